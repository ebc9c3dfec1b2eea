/* The report's numbers, computed once for every output format (tools/report.h). */
#include "tools/report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"

tf_report_summary tf_report_summarise(const tf_plan *plan) {
  tf_report_summary s;
  s.total = tf_plan_total_bytes(plan);
  /* The same regions with an arena that reuses nothing: what the plan would need without liveness. */
  s.naive_total = s.total - plan->region_bytes[TF_REGION_ARENA] + plan->report.arena_naive;
  s.saving = s.naive_total - s.total;
  s.ratio = plan->report.arena_lower_bound > 0
                ? (double)plan->region_bytes[TF_REGION_ARENA] / (double)plan->report.arena_lower_bound
                : 0.0;
  s.casts_total = 0;
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    s.casts[phase] = 0;
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_plan_step *step = &plan->steps[i];
    if (step->op != TF_OP_CAST || (int)step->phase < 0 || step->phase >= TF_PHASE_COUNT)
      continue;
    const int64_t runs = i < plan->micro_steps && plan->training ? plan->accumulate : 1;
    s.casts[step->phase] += runs;
    s.casts_total += runs;
  }
  return s;
}

tf_report_parameters tf_report_parameter_split(const tf_plan *plan) {
  tf_report_parameters split = {0, 0, 0, 0};
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    if (plan->buffers[id].role != TF_ROLE_PARAMETER || plan->buffers[id].view_of != 0)
      continue; /* a ZeRO view is a range of its parameter, updated with it */
    bool updated = false;
    for (int32_t i = 0; i < plan->n_steps && !updated; i++) {
      const tf_plan_step *step = &plan->steps[i];
      const int32_t first = step->n_inputs > 0 ? step->inputs[0] : -1;
      /* an update, or cast_into writing a half parameter from its updated master */
      updated = (step->op == TF_OP_SGD || step->op == TF_OP_ADAMW || step->op == TF_OP_ADAMW8BIT ||
                 step->op == TF_OP_CAST_INTO) &&
                (first == id || (first >= 0 && plan->buffers[first].view_of == id + 1));
    }
    if (updated) {
      split.trainable_bytes += plan->buffers[id].bytes;
      split.trainable++;
    } else {
      split.frozen_bytes += plan->buffers[id].bytes;
      split.frozen++;
    }
  }
  return split;
}

int32_t tf_report_count_role(const tf_plan *plan, tf_buffer_role role) {
  int32_t n = 0;
  for (int32_t i = 0; i < plan->n_buffers; i++)
    n += plan->buffers[i].role == role;
  return n;
}

tf_status tf_report_largest_live(const tf_plan *plan, int32_t step, int32_t *ids, int32_t limit, int32_t *count) {
  *count = 0;
  size_t n_buffers = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *from = malloc(sizeof(int32_t) * n_buffers), *to = malloc(sizeof(int32_t) * n_buffers);
  tf_status status = from && to ? tf_plan_counted_steps(plan, from, to)
                                : tf_status_new(TF_ERR_OUT_OF_MEMORY, "report: out of host memory");
  int32_t n = 0;
  for (int32_t id = 0; id < plan->n_buffers && !status; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_ARENA || from[id] > step || to[id] < step)
      continue;
    int32_t at = n < limit ? n++ : limit;
    while (at > 0 && plan->buffers[ids[at - 1]].bytes < b->bytes)
      at--;
    if (at >= limit)
      continue;
    memmove(&ids[at + 1], &ids[at], sizeof(int32_t) * (size_t)(n - 1 - at));
    ids[at] = id;
  }
  free(from);
  free(to);
  *count = status ? 0 : n;
  return status;
}

int tf_report_memory_rows(const tf_plan *plan, tf_report_row *rows) {
  static const struct {
    tf_region region;
    const char *label;
    tf_buffer_role roles[3];
    const char *role_labels[3];
    int n_roles;
  } regions[] = {
      {TF_REGION_PARAMETERS,
       "parameters region",
       {TF_ROLE_PARAMETER, TF_ROLE_CONSTANT, TF_ROLE_STATE},
       {"parameters", "constants", "running statistics"},
       3},
      {TF_REGION_GRADIENTS, "gradients region", {TF_ROLE_GRADIENT}, {"gradients"}, 1},
      {TF_REGION_OPTIMIZER_STATE, "optimizer state region", {TF_ROLE_OPTIMIZER_STATE}, {"optimizer state"}, 1},
      {TF_REGION_ARENA,
       "activations arena",
       {TF_ROLE_ACTIVATION, TF_ROLE_WORKSPACE},
       {"activations, without reuse", "workspaces, without reuse"},
       2},
      {TF_REGION_IO, "io (double-buffered micro-batches)", {TF_ROLE_INPUT, TF_ROLE_LABEL}, {"inputs", "labels"}, 2},
  };
  int n = 0;
  for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
    rows[n++] = (tf_report_row){regions[i].label, 0, plan->region_bytes[regions[i].region], -1};
    for (int k = 0; k < regions[i].n_roles; k++) {
      const int32_t count = tf_report_count_role(plan, regions[i].roles[k]);
      if (regions[i].roles[k] == TF_ROLE_STATE && count == 0)
        continue; /* a row only for plans that track running statistics */
      rows[n++] = (tf_report_row){regions[i].role_labels[k], 1, plan->report.role_bytes[regions[i].roles[k]], count};
    }
  }
  if (plan->overhead.n_parts == 0) {
    rows[n++] = (tf_report_row){"total", 0, tf_plan_total_bytes(plan), -1};
    return n;
  }
  rows[n++] = (tf_report_row){"regions total", 0, tf_plan_total_bytes(plan), -1};
  rows[n++] = (tf_report_row){"device overhead", 0, tf_plan_overhead_bytes(plan), -1};
  for (int32_t i = 0; i < plan->overhead.n_parts && i < TF_MAX_OVERHEAD_PARTS; i++)
    rows[n++] = (tf_report_row){plan->overhead.parts[i].name, 1, plan->overhead.parts[i].bytes, -1};
  rows[n++] = (tf_report_row){"device total", 0, tf_plan_device_total(plan), -1};
  return n;
}

const char *tf_report_flops_text(double flops, char *buf, size_t size) {
  static const char *const units[] = {"", "K", "M", "G", "T", "P", "E"};
  int unit = 0;
  while (flops >= 1000 && unit < 6) {
    flops /= 1000;
    unit++;
  }
  snprintf(buf, size, unit ? "%.2f %sFLOP" : "%.0f %sFLOP", flops, units[unit]);
  return buf;
}

const char *tf_report_shape_text(const tf_plan_buffer *b, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s [", tf_dtype_name(b->dtype));
  for (int32_t d = 0; d < b->rank && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", b->shape[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

/* ---- text buffer ---- */

static bool reserve(tf_text *text, size_t extra) {
  if (text->failed)
    return false;
  if (text->size + extra + 1 <= text->capacity)
    return true;
  size_t capacity = text->capacity ? text->capacity : 4096;
  while (capacity < text->size + extra + 1)
    capacity *= 2;
  char *data = realloc(text->data, capacity);
  if (!data) {
    text->failed = true;
    return false;
  }
  text->data = data;
  text->capacity = capacity;
  return true;
}

void tf_text_append(tf_text *text, const char *data, size_t size) {
  if (!reserve(text, size))
    return;
  memcpy(text->data + text->size, data, size);
  text->size += size;
  text->data[text->size] = '\0';
}

void tf_text_vprintf(tf_text *text, const char *fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int length = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (length < 0) {
    text->failed = true;
    return;
  }
  if (!reserve(text, (size_t)length))
    return;
  vsnprintf(text->data + text->size, (size_t)length + 1, fmt, args);
  text->size += (size_t)length;
}

tf_status tf_text_save(tf_text *text, tf_status status, const char *path, const char *what) {
  if (!status && text->failed)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate the %s", path, what);
  if (!status)
    status = tf_atomic_file_write_all(path, text->data, text->size);
  free(text->data);
  text->data = NULL;
  return status;
}

void tf_text_printf(tf_text *text, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  tf_text_vprintf(text, fmt, args);
  va_end(args);
}

/* Length of the valid UTF-8 sequence at p (1..4, within `left` bytes), or 0 when the bytes there
 * are not one. Overlong forms, surrogates and code points past U+10FFFF are refused, as an XML
 * parser would. */
static int utf8_length(const unsigned char *p, size_t left) {
  unsigned c = p[0];
  int n;
  unsigned min;
  if (c < 0x80)
    return 1;
  if ((c & 0xE0) == 0xC0)
    n = 2, min = 0x80, c &= 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, min = 0x800, c &= 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, min = 0x10000, c &= 0x07;
  else
    return 0;
  if ((size_t)n > left)
    return 0;
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) || c == 0xFFFE || c == 0xFFFF)
    return 0;
  return n;
}

void tf_text_escaped_span(tf_text *text, const char *value, size_t length, size_t max_chars) {
  const unsigned char *p = (const unsigned char *)value, *end = p + length;
  for (size_t chars = 0; p < end; chars++) {
    if (max_chars && chars == max_chars) {
      tf_text_append(text, "\xE2\x80\xA6", 3); /* U+2026 HORIZONTAL ELLIPSIS */
      return;
    }
    int n = 1;
    switch (*p) {
    case '&': tf_text_append(text, "&amp;", 5); break;
    case '<': tf_text_append(text, "&lt;", 4); break;
    case '>': tf_text_append(text, "&gt;", 4); break;
    case '"': tf_text_append(text, "&quot;", 6); break;
    case '\'': tf_text_append(text, "&#39;", 5); break;
    default:
      n = utf8_length(p, (size_t)(end - p));
      if (n == 0 || (*p < 0x20 && *p != '\t') || *p == 0x7F) {
        tf_text_append(text, "?", 1);
        n = 1;
      } else {
        tf_text_append(text, (const char *)p, (size_t)n);
      }
    }
    p += n;
  }
}

void tf_text_escaped(tf_text *text, const char *value, size_t max_chars) {
  if (value)
    tf_text_escaped_span(text, value, strlen(value), max_chars);
}
