/* Checkpoints: every parameter, optimizer-state and running-statistics buffer as a safetensors tensor named like the
 * buffer, and the counters in the metadata. Written atomically (temporary file, fsync, rename), so
 * a crash never leaves a broken checkpoint under the final name; loadable by any backend. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "runtime/safetensors.h"
#include "runtime/tensor_write.h"
#include "tightfit/runtime.h"

/* A ZeRO view (a range one rank updates) is saved with its parent: a split update's state, held in
 * pieces, gathered into one tensor under its own name, as a plan without ZeRO saves it. */
static bool is_saved(const tf_plan_buffer *b) {
  return (b->role == TF_ROLE_PARAMETER || b->role == TF_ROLE_OPTIMIZER_STATE || b->role == TF_ROLE_STATE) &&
         b->view_of == 0;
}

/* Whether buffer b is a half parameter's f32 master (optimizer state with an initialiser). */
static bool is_master(const tf_plan_buffer *b) {
  return b->role == TF_ROLE_OPTIMIZER_STATE && b->init.kind != TF_INIT_NONE && b->owner >= 0;
}

static bool has_tensor(const tf_safetensors *file, const char *name) {
  tf_safetensors_tensor view;
  tf_status status = tf_safetensors_find(file, name, &view);
  tf_status_free(status);
  return status == NULL;
}

/* The file tensor saved buffer id loads from, so checkpoints load across parameter dtypes
 * (--param-dtype): its own; but a parameter reads the file's f32 master of it where the file has one
 * (full precision), and a half parameter's master the file lacks (a checkpoint of f32 weights) reads
 * the file's parameter. Of the buffer's shape, and its dtype or another float one (converted). */
static tf_status source_of(const tf_plan *plan, const tf_safetensors *file, int32_t id, tf_safetensors_tensor *view) {
  const tf_plan_buffer *b = &plan->buffers[id];
  char master[1100];
  tf_plan_master_name(b->name, master, sizeof(master));
  const char *name = b->name;
  if (b->role == TF_ROLE_PARAMETER && has_tensor(file, master))
    name = master;
  else if (is_master(b) && b->owner < plan->n_buffers && !has_tensor(file, b->name))
    name = plan->buffers[b->owner].name;
  TF_RETURN_IF_ERROR(tf_safetensors_find(file, name, view));
  const tf_dtype dtype = tf_tensor_write_convertible(b->dtype, view->dtype) ? view->dtype : b->dtype;
  return tf_safetensors_expect(file, name, dtype, b->rank, b->shape, view);
}

/* A piece of a ZeRO buffer held in pieces that this session holds: its range of the parent's tensor
 * (a saved one's: at stage 2 a gradient is held in pieces too, and not saved). */
static tf_status load_piece(tf_session *s, const tf_safetensors *file, int32_t id) {
  const tf_plan *plan = tf_session_plan(s);
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->view_of == 0 || b->held_by <= 0 || !tf_session_holds(s, id) || !is_saved(&plan->buffers[b->view_of - 1]))
    return NULL;
  tf_safetensors_tensor view;
  TF_RETURN_IF_ERROR(source_of(plan, file, b->view_of - 1, &view));
  return tf_tensor_write(s, id, &view, b->view_at / tf_dtype_size(b->dtype), false);
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
  tf_safetensors_writer_add_checksums(writer); /* loads refuse a flipped bit, naming the tensor (issue 49) */
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
  /* The accumulation lets a loader check the two counters against each other (read_counters). */
  if (!status)
    status = add_metadata(writer, "tightfit.accumulate", plan->accumulate);
  const tf_session_scaling scaling = tf_session_scaling_state(s);
  if (!status)
    status = add_metadata(writer, "tightfit.skipped_steps", scaling.skipped_steps);
  if (!status && scaling.scaled)
    status = add_metadata(writer, "tightfit.loss_scale_log2", scaling.loss_scale_log2);
  if (!status && scaling.scaled)
    status = add_metadata(writer, "tightfit.loss_scale_good_steps", scaling.good_steps);
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

/* Counters are at most 2^53: the optimizer raises beta to the step count as a double (exact only up
 * to 2^53), and the data feed multiplies micro-steps by the micro-batch in int64. A real run counts
 * far less (2^53 steps at a million steps per second is 285 years), so anything above is a damaged or
 * hostile file, refused before it can overflow later. */
#define COUNTER_MAX TF_CHECKED_EXACT_DOUBLE_MAX

/* The metadata value `key` of `path` as a count in [minimum, maximum]; *present is false (and no
 * error) when the key is absent. Errors name the file, the key and the value. */
static tf_status parse_counter(const tf_safetensors *file, const char *path, const char *key, int64_t minimum,
                               int64_t maximum, int64_t *value, bool *present) {
  const char *text = tf_safetensors_metadata(file, key);
  *present = text != NULL;
  if (!text)
    return NULL;
  /* A hostile value may be megabytes long: quote only its start. */
  const int quoted = 40;
  const char *ellipsis = strlen(text) > (size_t)quoted ? "..." : "";
  switch (tf_parse_i64(text, minimum, maximum, value)) {
  case TF_PARSE_OK: return NULL;
  case TF_PARSE_SYNTAX:
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: metadata '%s' is '%.*s%s', not a decimal integer", path, key,
                         quoted, text, ellipsis);
  case TF_PARSE_RANGE: break;
  }
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: metadata '%s' is %.*s%s, outside %" PRId64 "..%" PRId64 "%s", path,
                       key, quoted, text, ellipsis, minimum, maximum,
                       maximum == COUNTER_MAX ? " (2^53: step counters must stay exact as doubles)" : "");
}

typedef struct counters {
  int64_t optimizer_steps, micro_steps;
  bool has_scale; /* the writer scaled its loss (f16) */
  int64_t loss_scale_log2, good_steps, skipped_steps;
} counters;

/* optimizer_step x k <= micro_step < (optimizer_step + 1) x k, for the writer's accumulation k. */
static tf_status check_accumulation(const char *path, counters steps, int64_t accumulate) {
  int64_t first, past;
  if (!tf_checked_mul_i64(steps.optimizer_steps, accumulate, &first) || !tf_checked_add_i64(first, accumulate, &past))
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: metadata 'tightfit.optimizer_step' %" PRId64 " x 'tightfit.accumulate' %" PRId64
                         " micro-steps overflows int64",
                         path, steps.optimizer_steps, accumulate);
  if (steps.micro_steps >= first && steps.micro_steps < past)
    return NULL;
  char needed[64];
  if (accumulate == 1)
    snprintf(needed, sizeof(needed), "needs it to be %" PRId64, first);
  else
    snprintf(needed, sizeof(needed), "needs it in %" PRId64 "..%" PRId64, first, past - 1);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: metadata 'tightfit.micro_step' is %" PRId64 ", but 'tightfit.optimizer_step' %" PRId64
                       " x 'tightfit.accumulate' %" PRId64 " %s",
                       path, steps.micro_steps, steps.optimizer_steps, accumulate, needed);
}

/* The step counters of checkpoint `path`, checked against each other and against `plan`: every
 * optimizer step follows at least one micro-step; with the accumulation the writer recorded (k),
 * optimizer_step x k <= micro_step < (optimizer_step + 1) x k (a save between optimizer steps gives
 * equality); and the samples the feed skips on resume (micro_step x micro-batch) stay within 2^53. */
static tf_status read_counters(const tf_safetensors *file, const char *path, const tf_plan *plan, counters *out) {
  bool has_optimizer, has_micro, has_accumulate;
  int64_t accumulate = 0;
  TF_RETURN_IF_ERROR(
      parse_counter(file, path, "tightfit.optimizer_step", 0, COUNTER_MAX, &out->optimizer_steps, &has_optimizer));
  TF_RETURN_IF_ERROR(parse_counter(file, path, "tightfit.micro_step", 0, COUNTER_MAX, &out->micro_steps, &has_micro));
  TF_RETURN_IF_ERROR(parse_counter(file, path, "tightfit.accumulate", 1, INT32_MAX, &accumulate, &has_accumulate));
  if (!has_optimizer || !has_micro)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: not a tightfit checkpoint (no '%s' counter in its metadata)", path,
                         has_optimizer ? "tightfit.micro_step" : "tightfit.optimizer_step");
  const int64_t optimizer_steps = out->optimizer_steps, micro_steps = out->micro_steps;
  if (micro_steps < optimizer_steps)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: metadata 'tightfit.micro_step' is %" PRId64
                         ", fewer than 'tightfit.optimizer_step' %" PRId64
                         " (every optimizer step follows at least one micro-step)",
                         path, micro_steps, optimizer_steps);
  if (has_accumulate)
    TF_RETURN_IF_ERROR(check_accumulation(path, *out, accumulate));
  bool has_skipped, has_good;
  TF_RETURN_IF_ERROR(
      parse_counter(file, path, "tightfit.skipped_steps", 0, optimizer_steps, &out->skipped_steps, &has_skipped));
  TF_RETURN_IF_ERROR(parse_counter(file, path, "tightfit.loss_scale_log2", TF_LOSS_SCALE_MIN_LOG2,
                                   TF_LOSS_SCALE_MAX_LOG2, &out->loss_scale_log2, &out->has_scale));
  TF_RETURN_IF_ERROR(
      parse_counter(file, path, "tightfit.loss_scale_good_steps", 0, COUNTER_MAX, &out->good_steps, &has_good));
  int64_t samples = 0;
  if (plan->micro_batch > 0 && (!tf_checked_mul_i64(micro_steps, plan->micro_batch, &samples) || samples > COUNTER_MAX))
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: metadata 'tightfit.micro_step' is %" PRId64 ": resuming would skip %" PRId64
                         " micro-batches of %" PRId64 " samples, more than 2^53 samples",
                         path, micro_steps, micro_steps, plan->micro_batch);
  return NULL;
}

tf_status tf_session_load(tf_session *s, const char *path) {
  const tf_plan *plan = tf_session_plan(s);
  tf_safetensors *file = NULL;
  TF_RETURN_IF_ERROR(tf_safetensors_open(path, &file));
  /* The counters first: a refused checkpoint leaves the session as it was. */
  counters steps;
  memset(&steps, 0, sizeof(steps));
  tf_status status = read_counters(file, path, plan, &steps);
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    status = load_piece(s, file, i);
    if (status || !is_saved(b))
      continue;
    tf_safetensors_tensor view;
    status = source_of(plan, file, i, &view);
    if (!status && tf_session_holds(s, i)) /* under ZeRO each rank loads its own shard */
      status = tf_tensor_write(s, i, &view, 0, false);
  }
  if (!status) {
    /* A checkpoint of a plan that did not scale its loss keeps this plan's current scale. */
    const tf_session_scaling scaling = tf_session_scaling_state(s);
    tf_session_set_counters(s, steps.optimizer_steps, steps.micro_steps);
    status = tf_session_set_scaling(s, steps.has_scale ? (int32_t)steps.loss_scale_log2 : scaling.loss_scale_log2,
                                    steps.has_scale ? steps.good_steps : 0, steps.skipped_steps);
  }
  tf_safetensors_close(file);
  return status ? tf_status_prefix(status, "loading checkpoint") : NULL;
}
