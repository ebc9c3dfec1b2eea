/* Checkpoints: every parameter and optimizer-state buffer as a safetensors tensor named like the
 * buffer, and the counters in the metadata. Written atomically (temporary file, fsync, rename), so
 * a crash never leaves a broken checkpoint under the final name; loadable by any backend. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/safetensors.h"
#include "tightfit/runtime.h"

static bool is_saved(const tf_plan_buffer *b) {
  return b->role == TF_ROLE_PARAMETER || b->role == TF_ROLE_OPTIMIZER_STATE;
}

static tf_status add_metadata(tf_safetensors_writer *writer, const char *key, int64_t value) {
  char text[32];
  snprintf(text, sizeof(text), "%" PRId64, value);
  return tf_safetensors_writer_set_metadata(writer, key, text);
}

static tf_status user_metadata(tf_safetensors_writer *writer, const char *pair) {
  const char *eq = strchr(pair, '=');
  if (!eq || eq == pair)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "checkpoint metadata '%s' is not key=value", pair);
  char key[256];
  size_t length = (size_t)(eq - pair) < sizeof(key) - 1 ? (size_t)(eq - pair) : sizeof(key) - 1;
  memcpy(key, pair, length);
  key[length] = '\0';
  return tf_safetensors_writer_set_metadata(writer, key, eq + 1);
}

tf_status tf_session_save(tf_session *s, const char *path, const char *const *metadata, int32_t n_metadata) {
  const tf_plan *plan = tf_session_plan(s);
  tf_safetensors_writer *writer = NULL;
  TF_RETURN_IF_ERROR(tf_safetensors_writer_create(&writer));
  void **copies = calloc((size_t)(plan->n_buffers ? plan->n_buffers : 1), sizeof(void *));
  tf_status status = copies ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "checkpoint: out of memory");
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (!is_saved(b))
      continue;
    copies[i] = malloc((size_t)(b->bytes ? b->bytes : 1));
    if (!copies[i])
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "checkpoint: cannot stage '%s'", b->name);
    if (!status)
      status = tf_session_read(s, b->name, copies[i], b->bytes);
    if (!status)
      status = tf_safetensors_writer_add(writer, b->name, b->dtype, b->rank, b->shape, copies[i]);
  }
  if (!status)
    status = add_metadata(writer, "tightfit.optimizer_step", tf_session_optimizer_steps(s));
  if (!status)
    status = add_metadata(writer, "tightfit.micro_step", tf_session_micro_steps(s));
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "tightfit.graph", plan->graph_name);
  for (int32_t i = 0; i < n_metadata && !status; i++)
    status = user_metadata(writer, metadata[i]);
  if (!status)
    status = tf_safetensors_writer_write(writer, path);
  tf_safetensors_writer_destroy(writer);
  for (int32_t i = 0; copies && i < plan->n_buffers; i++)
    free(copies[i]);
  free(copies);
  return status;
}

static bool parse_counter(const tf_safetensors *file, const char *key, int64_t *value) {
  const char *text = tf_safetensors_metadata(file, key);
  if (!text)
    return false;
  char *end;
  long long parsed = strtoll(text, &end, 10);
  if (end == text || *end || parsed < 0)
    return false;
  *value = parsed;
  return true;
}

tf_status tf_session_load(tf_session *s, const char *path) {
  const tf_plan *plan = tf_session_plan(s);
  tf_safetensors *file = NULL;
  TF_RETURN_IF_ERROR(tf_safetensors_open(path, &file));
  tf_status status = NULL;
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (!is_saved(b))
      continue;
    tf_safetensors_tensor view;
    status = tf_safetensors_expect(file, b->name, b->dtype, b->rank, b->shape, &view);
    if (!status)
      status = tf_session_write(s, b->name, view.data, b->bytes);
  }
  int64_t optimizer_steps = 0, micro_steps = 0;
  if (!status && (!parse_counter(file, "tightfit.optimizer_step", &optimizer_steps) ||
                  !parse_counter(file, "tightfit.micro_step", &micro_steps)))
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: not a tightfit checkpoint (no step counters in its metadata)",
                           path);
  if (!status)
    tf_session_set_counters(s, optimizer_steps, micro_steps);
  tf_safetensors_close(file);
  return status ? tf_status_prefix(status, "loading checkpoint") : NULL;
}
