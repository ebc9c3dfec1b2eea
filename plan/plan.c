/* Plans in files: loading (decode in schema/plan_fb.cc, then every invariant in plan_verify.c),
 * saving all or nothing (runtime/atomic_file.h: temporary file, fsync, rename), and the plan's
 * lifetime and names. A plan file is untrusted input, so nothing reaches a caller that
 * tf_plan_verify() has not accepted. */
#include <stdio.h>
#include <stdlib.h>

#include "common/atomic_file.h"
#include "common/file.h"
#include "core/ops.h"
#include "plan/plan_checksum.h"
#include "schema/plan_fb.h"
#include "tightfit/plan.h"

void tf_plan_destroy(tf_plan *plan) {
  if (!plan)
    return;
  free(plan->graph_name);
  free(plan->graph_dir);
  free(plan->target);
  for (int32_t i = 0; plan->buffers && i < plan->n_buffers; i++) {
    free(plan->buffers[i].name);
    free((void *)plan->buffers[i].init.file);
    free((void *)plan->buffers[i].init.key);
  }
  free(plan->buffers);
  for (int32_t i = 0; plan->steps && i < plan->n_steps; i++) {
    free(plan->steps[i].name);
    free(plan->steps[i].inputs);
  }
  free(plan->steps);
  for (int32_t i = 0; plan->host_steps && i < plan->n_host_steps; i++) {
    free(plan->host_steps[i].name);
    free(plan->host_steps[i].inputs);
  }
  free(plan->host_steps);
  free(plan->host_at);
  for (int32_t i = 0; plan->symbol_names && i < plan->n_symbols; i++)
    free(plan->symbol_names[i]);
  free(plan->symbol_names);
  free(plan->symbol_values);
  free(plan->outputs);
  free(plan->report.live_bytes);
  free(plan->report.notes);
  free(plan);
}

/* -1 for no plan or a negative region (a plan that tf_plan_verify refuses); INT64_MAX when the sum
 * overflows, so that no caller ever allocates less than the regions hold. */
int64_t tf_plan_total_bytes(const tf_plan *plan) {
  if (!plan)
    return -1;
  int64_t total = 0;
  for (int region = 0; region < TF_REGION_COUNT; region++) {
    if (plan->region_bytes[region] < 0)
      return -1;
    if (__builtin_add_overflow(total, plan->region_bytes[region], &total))
      return INT64_MAX;
  }
  return total;
}

/* Like tf_plan_total_bytes(): -1 for a negative part, INT64_MAX on overflow. */
int64_t tf_plan_graph_steps(const tf_plan *plan) {
  int64_t forward = 0;
  while (forward < plan->micro_steps && plan->steps[forward].phase == TF_PHASE_FORWARD)
    forward++;
  int64_t optimizer = plan->n_steps > plan->micro_steps ? plan->n_steps - plan->micro_steps : 0;
  return 2 * (int64_t)plan->micro_steps + 2 * forward + optimizer;
}

int32_t tf_plan_step_operand(const tf_plan_step *step, int32_t k, bool *written) {
  const tf_op_info *info = tf_op_info_get(step->op);
  if (k < step->n_inputs) {
    *written = info && k < 8 && (info->in_place >> k) & 1;
    return step->inputs[k];
  }
  *written = true;
  return step->outputs[k - step->n_inputs];
}

bool tf_plan_step_reads(const tf_plan_step *step, int32_t k) { return k < step->n_inputs && step->op != TF_OP_ZERO; }

void tf_plan_master_name(const char *param, char *name, size_t size) { snprintf(name, size, "master(%s)", param); }

int32_t tf_plan_master_of(const tf_plan *plan, int32_t param) {
  const tf_plan_buffer *p = &plan->buffers[param];
  const int64_t size = tf_dtype_size(p->dtype), elements = size > 0 ? p->bytes / size : -1;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    /* f32, one element per parameter element (a plan file could say otherwise) */
    if (b->role == TF_ROLE_OPTIMIZER_STATE && b->owner == param && b->init.kind != TF_INIT_NONE && b->view_of == 0 &&
        b->dtype == TF_F32 && b->bytes == 4 * elements)
      return i;
  }
  return -1;
}

const char *tf_plan_init_name(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  const bool master =
      b->role == TF_ROLE_OPTIMIZER_STATE && b->init.kind != TF_INIT_NONE && b->owner >= 0 && b->owner < plan->n_buffers;
  return master ? plan->buffers[b->owner].name : b->name;
}

/* The bytes host step s moves each step (see tf_plan_host_moved_bytes). */
static int64_t host_step_moved_bytes(const tf_plan *plan, const tf_plan_step *step) {
  /* a host step of the micro-batch block (a gradient's accumulation) runs with each micro-batch */
  const int64_t runs = step->phase == TF_PHASE_OPTIMIZER || plan->accumulate < 1 ? 1 : plan->accumulate;
  int64_t moved = 0;
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    bool written;
    const int32_t id = tf_plan_step_operand(step, k, &written);
    if (id >= 0 && id < plan->n_buffers && plan->buffers[id].region != TF_REGION_HOST)
      moved +=
          runs * plan->buffers[id].bytes * (tf_plan_step_reads(step, k) + written); /* down if read, up if written */
  }
  return moved;
}

int64_t tf_plan_host_moved_bytes(const tf_plan *plan) {
  int64_t most = 0;
  const int32_t ranks = plan && plan->zero > 0 ? plan->ranks : 1;
  for (int32_t rank = 0; plan && rank < ranks; rank++) { /* under ZeRO each rank runs the updates it holds */
    int64_t moved = 0;
    for (int32_t s = 0; s < plan->n_host_steps; s++) {
      const int32_t held = plan->host_steps[s].held_by;
      if (plan->zero == 0 || held <= 0 || held == rank + 1)
        moved += host_step_moved_bytes(plan, &plan->host_steps[s]);
    }
    most = moved > most ? moved : most;
  }
  return most;
}

bool tf_plan_offloads_gradients(const tf_plan *plan) {
  for (int32_t id = 0; plan && id < plan->n_buffers; id++)
    if (plan->buffers[id].role == TF_ROLE_GRADIENT && plan->buffers[id].region == TF_REGION_HOST)
      return true;
  return false;
}

const char *tf_plan_host_contents(const tf_plan *plan) {
  bool state = false, activations = false;
  for (int32_t id = 0; plan && id < plan->n_buffers; id++)
    state |= plan->buffers[id].role == TF_ROLE_OPTIMIZER_STATE && plan->buffers[id].region == TF_REGION_HOST;
  for (int32_t h = 0; plan && h < plan->n_host_steps; h++)
    activations |= plan->host_steps[h].phase == TF_PHASE_FORWARD; /* a copy down */
  static const char *const contents[8] = {"nothing",
                                          "activations",
                                          "optimizer state",
                                          "activations and optimizer state",
                                          "gradients",
                                          "activations and gradients",
                                          "gradients and optimizer state",
                                          "activations, gradients and optimizer state"};
  return contents[(tf_plan_offloads_gradients(plan) ? 4 : 0) | (state ? 2 : 0) | (activations ? 1 : 0)];
}

bool tf_plan_updates_in_backward(const tf_plan *plan) {
  for (int32_t s = 0; plan && s < plan->micro_steps; s++)
    if (plan->steps[s].phase == TF_PHASE_OPTIMIZER)
      return true;
  return false;
}

int64_t tf_plan_overhead_bytes(const tf_plan *plan) {
  if (!plan)
    return -1;
  int64_t total = 0;
  for (int32_t i = 0; i < plan->overhead.n_parts && i < TF_MAX_OVERHEAD_PARTS; i++) {
    if (plan->overhead.parts[i].bytes < 0)
      return -1;
    if (__builtin_add_overflow(total, plan->overhead.parts[i].bytes, &total))
      return INT64_MAX;
  }
  return total;
}

int64_t tf_plan_device_total(const tf_plan *plan) {
  int64_t regions = tf_plan_total_bytes(plan), overhead = tf_plan_overhead_bytes(plan), total;
  if (regions < 0 || overhead < 0)
    return -1;
  return __builtin_add_overflow(regions, overhead, &total) ? INT64_MAX : total;
}

tf_status tf_plan_serialize(const tf_plan *plan, void **data, size_t *size) {
  if (!plan || !data || !size)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_serialize: plan, data and size must not be NULL");
  *data = NULL;
  *size = 0;
  TF_RETURN_IF_ERROR(tf_plan_verify(plan));
  TF_RETURN_IF_ERROR(tf_plan_fb_encode(plan, data, size));
  tf_status status = tf_plan_checksum_append(data, size);
  if (status) {
    free(*data);
    *data = NULL;
    *size = 0;
  }
  return status;
}

tf_status tf_plan_parse(const void *data, size_t size, const char *source, tf_plan **out) {
  if (!out)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_parse: out is NULL");
  *out = NULL;
  const char *name = source ? source : "<memory>";
  tf_plan *plan = calloc(1, sizeof(*plan));
  if (!plan)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: out of memory for the plan", name);
  /* The Verifier's refusals first (they say more than a mismatch), then the checksum, then the
   * invariants: a flipped bit they would accept is still refused. */
  bool has_trailer;
  tf_status status = tf_plan_fb_decode(data, tf_plan_checksum_body(data, size, &has_trailer), name, plan);
  if (!status)
    status = tf_plan_checksum_check(data, size, name);
  if (status) {
    tf_plan_destroy(plan);
    return status;
  }
  status = tf_plan_verify(plan);
  if (status) {
    tf_plan_destroy(plan);
    return tf_status_prefix(status, "%s", name);
  }
  *out = plan;
  return NULL;
}

tf_status tf_plan_load(const char *path, tf_plan **out) {
  if (!path || !out)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_load: path and out must not be NULL");
  *out = NULL;
  void *data = NULL;
  size_t size = 0;
  TF_RETURN_IF_ERROR(tf_file_read(path, &data, &size));
  tf_status status = tf_plan_parse(data, size, path, out);
  free(data);
  return status;
}

tf_status tf_plan_save(const tf_plan *plan, const char *path) {
  if (!path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_save: path is NULL");
  void *data = NULL;
  size_t size = 0;
  tf_status status = tf_plan_serialize(plan, &data, &size);
  if (status)
    return tf_status_prefix(status, "%s: not saved", path);
  status = tf_atomic_file_write_all(path, data, size);
  free(data);
  return status;
}

const char *tf_region_name(tf_region region) {
  static const char *const names[TF_REGION_HOST + 1] = {"parameters", "gradients", "optimizer_state",
                                                        "arena",      "io",        "host"};
  return (int)region >= 0 && region <= TF_REGION_HOST ? names[region] : "?";
}

const char *tf_role_name(tf_buffer_role role) {
  static const char *const names[TF_ROLE_COUNT] = {
      "parameter", "constant", "gradient", "optimizer_state", "input", "label", "activation", "workspace", "state"};
  return (int)role >= 0 && role < TF_ROLE_COUNT ? names[role] : "?";
}

const char *tf_phase_name(tf_phase phase) {
  static const char *const names[TF_PHASE_COUNT] = {"forward", "recompute", "backward", "accumulate", "optimizer"};
  return (int)phase >= 0 && phase < TF_PHASE_COUNT ? names[phase] : "?";
}
