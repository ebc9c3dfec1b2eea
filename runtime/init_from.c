/* tf_session_init_from (include/tightfit/init_from.h): a plan's parameters from a safetensors file of
 * pretrained weights. First every file tensor is matched to a plan buffer through the map and checked
 * (name, shape or its transpose, dtype), and every parameter is accounted for; only when nothing is
 * wrong are the tensors converted to the plan's dtype (transposed where the map says) a megabyte at a
 * time and written, so a failed load leaves the session as it was. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/init_map.h"
#include "runtime/safetensors.h"
#include "runtime/tensor_write.h"
#include "tightfit/plan.h"

#define MAX_LISTED 8

/* The problems found, the first MAX_LISTED in text, all counted. */
typedef struct problems {
  char text[MAX_LISTED * 400];
  size_t used;
  int32_t count;
} problems;

static void problem(problems *p, const char *format, ...) {
  if (p->count++ >= MAX_LISTED)
    return;
  va_list args;
  va_start(args, format);
  int n = snprintf(p->text + p->used, sizeof(p->text) - p->used, "\n  ");
  if (n > 0 && (size_t)n < sizeof(p->text) - p->used)
    p->used += (size_t)n;
  n = vsnprintf(p->text + p->used, sizeof(p->text) - p->used, format, args);
  if (n > 0)
    p->used = (size_t)n < sizeof(p->text) - p->used ? p->used + (size_t)n : sizeof(p->text) - 1;
  va_end(args);
}

/* A ZeRO view (a range of a parameter one rank updates) is loaded with its parameter. */
static bool loadable(const tf_plan_buffer *b) {
  return (b->role == TF_ROLE_PARAMETER || b->role == TF_ROLE_STATE) && b->view_of == 0;
}

static int32_t find(const tf_plan *plan, const char *name) {
  for (int32_t i = 0; i < plan->n_buffers; i++)
    if (loadable(&plan->buffers[i]) && strcmp(plan->buffers[i].name, name) == 0)
      return i;
  return -1;
}

/* One file tensor bound for plan buffer `buffer`. */
typedef struct binding {
  tf_safetensors_tensor view;
  bool transpose;
} binding;

static bool same_shape(int32_t rank, const int64_t *a, const int64_t *b) {
  for (int32_t i = 0; i < rank; i++)
    if (a[i] != b[i])
      return false;
  return true;
}

/* Checks file tensor `view` against plan buffer b; fills *to or records a problem. */
static void check_tensor(const tf_init_map *map, const tf_plan_buffer *b, const tf_safetensors_tensor *view,
                         binding *to, problems *p) {
  char theirs[128], ours[128];
  tf_format_shape(view->shape, view->rank, theirs, sizeof(theirs));
  tf_format_shape(b->shape, b->rank, ours, sizeof(ours));
  if (!tf_tensor_write_convertible(b->dtype, view->dtype)) {
    problem(p, "'%s' is %s in the file, the plan's '%s' is %s", view->name, view->file_dtype, b->name,
            tf_dtype_name(b->dtype));
    return;
  }
  bool swapped = view->rank == 2 && b->rank == 2 && view->shape[0] == b->shape[1] && view->shape[1] == b->shape[0];
  bool transpose = tf_init_map_matches(map, TF_INIT_RULE_TRANSPOSE, b->name);
  if (transpose && !swapped)
    problem(p, "'%s' is %s in the file: a 'transpose' line matches '%s' %s, whose transpose it is not", view->name,
            theirs, b->name, ours);
  else if (!transpose && (view->rank != b->rank || !same_shape(b->rank, view->shape, b->shape)))
    problem(p, "'%s' is %s in the file, the plan's '%s' is %s%s", view->name, theirs, b->name, ours,
            swapped ? " (stored transposed? a map line 'transpose NAME' reads it so)" : "");
  else {
    to->view = *view;
    to->transpose = transpose;
  }
}

/* Matches every file tensor to a plan buffer (bound[id].view.name set) and accounts for every
 * parameter; records each problem. */
static void match(const tf_plan *plan, const tf_safetensors *file, const tf_init_map *map, binding *bound,
                  tf_init_from_result *r, problems *p) {
  for (int32_t i = 0; i < tf_safetensors_count(file); i++) {
    tf_safetensors_tensor view;
    if (!tf_safetensors_at(file, i, &view))
      continue;
    if (strncmp(view.name, "__", 2) == 0)
      continue; /* safetensors' own entries (__metadata__) */
    char name[1024];
    tf_status status = tf_init_map_plan_name(map, view.name, name, sizeof(name));
    if (status) {
      problem(p, "%s", tf_status_message(status));
      tf_status_free(status);
      continue;
    }
    if (tf_init_map_matches(map, TF_INIT_RULE_IGNORE, name)) {
      r->ignored++;
      continue;
    }
    int32_t id = find(plan, name);
    if (id < 0) {
      problem(p,
              "'%s'%s%s%s is in the file, and the plan has no parameter of that name (a map line 'ignore NAME' "
              "leaves it out)",
              view.name, strcmp(name, view.name) ? " (as '" : "", strcmp(name, view.name) ? name : "",
              strcmp(name, view.name) ? "')" : "");
      continue;
    }
    if (bound[id].view.name) {
      problem(p, "'%s' and '%s' both map onto the plan's '%s'", bound[id].view.name, view.name, name);
      continue;
    }
    check_tensor(map, &plan->buffers[id], &view, &bound[id], p);
    if (!bound[id].view.name)
      bound[id].view.name = view.name; /* matched, though mis-shaped: not missing */
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (!loadable(b) || bound[id].view.name)
      continue;
    char shape[128];
    tf_format_shape(b->shape, b->rank, shape, sizeof(shape));
    if (b->role == TF_ROLE_STATE)
      r->state_kept++;
    else if (tf_init_map_matches(map, TF_INIT_RULE_KEEP, b->name))
      r->kept++;
    else
      problem(p,
              "the plan's parameter '%s' %s is not in the file (a map line 'keep NAME' leaves it at its initial "
              "value)",
              b->name, shape);
  }
}

tf_status tf_session_init_from(tf_session *session, const char *path, const tf_init_map *map,
                               tf_init_from_result *out) {
  tf_init_from_result r;
  memset(&r, 0, sizeof(r));
  if (out)
    *out = r;
  const tf_plan *plan = tf_session_plan(session);
  tf_safetensors *file;
  TF_RETURN_IF_ERROR(tf_safetensors_open(path, &file));
  binding *bound = calloc((size_t)plan->n_buffers + 1, sizeof(*bound));
  problems *p = calloc(1, sizeof(*p));
  tf_status status = NULL;
  if (!bound || !p)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (!status) {
    match(plan, file, map, bound, &r, p);
    if (p->count)
      status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: %d problem%s loading it into plan '%s' (nothing loaded):%s%s",
                             path, p->count, p->count == 1 ? "" : "s", plan->graph_name, p->text,
                             p->count > MAX_LISTED ? "\n  ..." : "");
  }
  for (int32_t id = 0; id < plan->n_buffers && !status; id++) {
    if (!bound[id].view.name)
      continue;
    const tf_plan_buffer *b = &plan->buffers[id];
    status = tf_tensor_write(session, id, &bound[id].view, 0, bound[id].transpose);
    /* a half parameter's f32 master gets the file's values too, at full precision */
    const int32_t master = tf_plan_master_of(plan, id);
    if (!status && master >= 0)
      status = tf_tensor_write(session, master, &bound[id].view, 0, bound[id].transpose);
    if (status)
      status = tf_status_prefix(status, "%s: writing '%s'", path, b->name);
    r.loaded++;
    r.transposed += bound[id].transpose;
    r.converted += bound[id].view.dtype != b->dtype;
  }
  free(p);
  free(bound);
  tf_safetensors_close(file);
  if (!status && out)
    *out = r;
  return status;
}
