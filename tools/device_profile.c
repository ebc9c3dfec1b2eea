/* Device profiles: the file format (read, write) and the calibration that measures one. See
 * tools/device_profile.h; the format is documented in docs/memory.md, "Device profiles":
 *
 *   tightfit-device-profile 1
 *   backend cuda
 *   device cuda:0
 *   name NVIDIA H200
 *   measured-at 2026-12-02T21:30:00Z
 *   memory 150754820096
 *   free 149883453440
 *   granularity 2097152
 *   part context 549060608 measured on NVIDIA H200: ...
 *   graphs 1048576 2048 measured on NVIDIA H200: ...
 *
 * Blank lines and lines starting with '#' are comments. Each fact but `part` appears once; `free`,
 * `granularity`, `part` and `graphs` are optional (the target's defaults stay where absent). */
#define _POSIX_C_SOURCE 200809L
#include "tools/device_profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "common/atomic_file.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

#define FORMAT_LINE "tightfit-device-profile 1"

/* ---- reading ---- */

typedef struct reader {
  const char *path;
  int line;
  unsigned seen; /* bit per fact: backend, device, name, measured-at, memory, free, granularity, graphs */
} reader;

enum {
  SEEN_BACKEND = 1,
  SEEN_DEVICE = 2,
  SEEN_NAME = 4,
  SEEN_AT = 8,
  SEEN_MEMORY = 16,
  SEEN_FREE = 32,
  SEEN_GRANULARITY = 64,
  SEEN_GRAPHS = 128
};

static tf_status bad(const reader *r, const char *what, const char *text) {
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s:%d: %s ('%.60s'); a profile is written by `tightfit devices --calibrate`", r->path, r->line,
                       what, text);
}

/* A byte count at *text (advanced past it): digits only, at least `least`. */
static bool parse_bytes(const char **text, int64_t least, int64_t *out) {
  const char *s = *text;
  if (*s < '0' || *s > '9')
    return false;
  errno = 0;
  char *end = NULL;
  long long value = strtoll(s, &end, 10);
  if (errno || value < least || (*end != '\0' && *end != ' '))
    return false;
  *out = value;
  *text = *end == ' ' ? end + 1 : end;
  return true;
}

static tf_status once(reader *r, unsigned fact, const char *text) {
  if (r->seen & fact)
    return bad(r, "this fact was given before", text);
  r->seen |= fact;
  return NULL;
}

static tf_status read_part(reader *r, const char *rest, const char *line, tf_device_profile *out) {
  char name[TF_OVERHEAD_NAME_BYTES];
  size_t n = strcspn(rest, " ");
  if (n == 0 || n >= sizeof(name) || rest[n] != ' ')
    return bad(r, "a part is 'part NAME BYTES SOURCE'", line);
  memcpy(name, rest, n);
  name[n] = '\0';
  const char *at = rest + n + 1;
  int64_t bytes = 0;
  if (!parse_bytes(&at, 0, &bytes) || *at == '\0')
    return bad(r, "a part is 'part NAME BYTES SOURCE' with BYTES a byte count and a source", line);
  if (strcmp(name, "rounding") == 0 || strcmp(name, "graphs") == 0)
    return bad(r, "'rounding' and 'graphs' follow from 'granularity' and 'graphs', not a part", line);
  for (int32_t i = 0; i < out->n_parts; i++)
    if (strcmp(out->parts[i].name, name) == 0)
      return bad(r, "this part was given before", line);
  if (out->n_parts >= TF_PROFILE_MAX_PARTS)
    return bad(r, "too many parts", line);
  tf_overhead_part *part = &out->parts[out->n_parts++];
  snprintf(part->name, sizeof(part->name), "%s", name);
  part->bytes = bytes;
  snprintf(part->source, sizeof(part->source), "%s", at);
  return NULL;
}

static tf_status read_line(reader *r, char *line, tf_device_profile *out) {
  char *space = strchr(line, ' ');
  if (!space)
    return bad(r, "a fact and its value", line);
  *space = '\0';
  const char *key = line, *rest = space + 1;
  tf_status status = NULL;
  if (strcmp(key, "backend") == 0) {
    if (!(status = once(r, SEEN_BACKEND, rest)) && (!tf_target_parse(rest, &out->kind) || out->kind == TF_TARGET_CPU))
      status = bad(r, "the backend is cuda or vulkan", rest);
  } else if (strcmp(key, "device") == 0) {
    if (!(status = once(r, SEEN_DEVICE, rest)))
      snprintf(out->device, sizeof(out->device), "%s", rest);
  } else if (strcmp(key, "name") == 0) {
    if (!(status = once(r, SEEN_NAME, rest)))
      snprintf(out->name, sizeof(out->name), "%s", rest);
  } else if (strcmp(key, "measured-at") == 0) {
    if (!(status = once(r, SEEN_AT, rest)))
      snprintf(out->measured_at, sizeof(out->measured_at), "%s", rest);
  } else if (strcmp(key, "memory") == 0 || strcmp(key, "free") == 0 || strcmp(key, "granularity") == 0) {
    const unsigned fact = key[0] == 'm' ? SEEN_MEMORY : key[0] == 'f' ? SEEN_FREE : SEEN_GRANULARITY;
    int64_t *slot = key[0] == 'm' ? &out->memory_bytes : key[0] == 'f' ? &out->free_bytes : &out->granularity;
    const char *at = rest;
    if (!(status = once(r, fact, rest)) && (!parse_bytes(&at, 1, slot) || *at != '\0'))
      status = bad(r, "a positive byte count", rest);
  } else if (strcmp(key, "part") == 0) {
    status = read_part(r, rest, rest, out);
  } else if (strcmp(key, "graphs") == 0) {
    const char *at = rest;
    if (!(status = once(r, SEEN_GRAPHS, rest)) &&
        (!parse_bytes(&at, 0, &out->graph_base_bytes) || !parse_bytes(&at, 0, &out->graph_step_bytes) || *at == '\0'))
      status = bad(r, "'graphs BASE PER_STEP SOURCE' with byte counts and a source", rest);
    if (!status)
      snprintf(out->graph_source, sizeof(out->graph_source), "%s", at);
  } else {
    status = bad(r, "unknown fact", key);
  }
  return status;
}

static tf_status read_all(reader *r, FILE *file, tf_device_profile *out) {
  char line[1024];
  bool format = false;
  while (fgets(line, sizeof(line), file)) {
    r->line++;
    size_t n = strlen(line);
    if (n == sizeof(line) - 1 && line[n - 1] != '\n')
      return bad(r, "a line longer than 1023 bytes", line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = '\0';
    if (n == 0 || line[0] == '#')
      continue;
    if (!format) {
      if (strcmp(line, FORMAT_LINE) != 0)
        return bad(r, "not a tightfit device profile (the first fact is '" FORMAT_LINE "')", line);
      format = true;
      continue;
    }
    TF_RETURN_IF_ERROR(read_line(r, line, out));
  }
  if (ferror(file))
    return tf_status_new(TF_ERR_IO, "%s: cannot read: %s", r->path, strerror(errno));
  if (!format)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: empty: not a tightfit device profile", r->path);
  const unsigned needed = SEEN_BACKEND | SEEN_NAME | SEEN_MEMORY;
  if ((r->seen & needed) != needed)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: the profile lacks %s", r->path,
                         !(r->seen & SEEN_BACKEND) ? "'backend'"
                         : !(r->seen & SEEN_NAME)  ? "'name'"
                                                   : "'memory'");
  return NULL;
}

tf_status tf_device_profile_read(const char *path, tf_device_profile *out) {
  memset(out, 0, sizeof(*out));
  out->free_bytes = out->granularity = out->graph_base_bytes = out->graph_step_bytes = -1;
  FILE *file = fopen(path, "r");
  if (!file)
    return tf_status_new(TF_ERR_IO, "%s: cannot open the device profile: %s", path, strerror(errno));
  reader r = {path, 0, 0};
  tf_status status = read_all(&r, file, out);
  fclose(file);
  return status;
}

/* ---- writing ---- */

static void append(char *text, size_t size, size_t *used, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *text, size_t size, size_t *used, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = *used < size ? vsnprintf(text + *used, size - *used, format, args) : 0;
  va_end(args);
  *used += n > 0 ? (size_t)n : 0;
}

size_t tf_device_profile_format(const tf_device_profile *p, char *text, size_t size) {
  size_t used = 0;
  append(text, size, &used,
         "# tightfit device profile: `tightfit devices --calibrate %s -o FILE` measured it; give it to\n"
         "# compile and check with --device-profile FILE (docs/memory.md, \"Device profiles\")\n" FORMAT_LINE
         "\nbackend %s\ndevice %s\nname %s\nmeasured-at %s\nmemory %" PRId64 "\n",
         p->device, tf_target_name(p->kind), p->device, p->name, p->measured_at, p->memory_bytes);
  if (p->free_bytes > 0)
    append(text, size, &used, "free %" PRId64 "\n", p->free_bytes);
  if (p->granularity > 0)
    append(text, size, &used, "granularity %" PRId64 "\n", p->granularity);
  for (int32_t i = 0; i < p->n_parts; i++)
    append(text, size, &used, "part %s %" PRId64 " %s\n", p->parts[i].name, p->parts[i].bytes, p->parts[i].source);
  if (p->graph_base_bytes >= 0 && p->graph_step_bytes >= 0)
    append(text, size, &used, "graphs %" PRId64 " %" PRId64 " %s\n", p->graph_base_bytes, p->graph_step_bytes,
           p->graph_source);
  return used;
}

tf_status tf_device_profile_write(const char *path, const tf_device_profile *p) {
  char text[TF_PROFILE_MAX_BYTES];
  size_t used = tf_device_profile_format(p, text, sizeof(text));
  if (used >= sizeof(text))
    return tf_status_new(TF_ERR_INTERNAL, "%s: the profile is longer than %zu bytes", path, sizeof(text));
  return tf_status_prefix(tf_atomic_file_write_all(path, text, used), "writing the device profile");
}

/* ---- using ---- */

tf_target tf_device_profile_target(const tf_device_profile *p) {
  tf_target target = tf_target_default(p->kind);
  for (int32_t i = 0; i < p->n_parts; i++)
    tf_target_set_part(&target, p->parts[i].name, p->parts[i].bytes, p->parts[i].source);
  if (p->granularity > 0) {
    target.overhead.granularity = p->granularity;
    snprintf(target.overhead.granularity_source, sizeof(target.overhead.granularity_source),
             "measured on %.64s: each region rounds up to the allocation granularity, %" PRId64 " bytes", p->name,
             p->granularity);
  }
  if (p->graph_base_bytes >= 0 && p->graph_step_bytes >= 0) {
    target.overhead.graph_base_bytes = p->graph_base_bytes;
    target.overhead.graph_step_bytes = p->graph_step_bytes;
    snprintf(target.overhead.graph_source, sizeof(target.overhead.graph_source), "%s", p->graph_source);
  }
  return target;
}
