/* runtime/host_steps.h: offloaded updates on the host. */
#define _POSIX_C_SOURCE 200809L
#include "runtime/host_steps.h"

#include <stdlib.h>
#include <string.h>

#include "core/ops.h"

#define STAGING_ALIGN 64

static int64_t aligned(int64_t bytes) { return (bytes + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN; }

static int32_t operand_count(const tf_plan_step *step) { return step->n_inputs + step->n_outputs; }

/* The staging bytes of one host step: each device operand, aligned. */
static int64_t staging_of(const tf_plan *plan, const tf_plan_step *step) {
  int64_t bytes = 0;
  for (int32_t k = 0; k < operand_count(step); k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    if (b->region != TF_REGION_HOST)
      bytes += aligned(b->bytes);
  }
  return bytes;
}

/* Why a host step cannot run on the host's kernels, or NULL: no CPU kernel, or a half operand of a
 * step that computes (the host steps compute on f32 data; compiler/offload.c refuses such plans
 * too); an activation's copy (reshape) moves any type, a cast (cast_into) converts any. */
static tf_status refusal(const tf_plan *plan, int32_t s, tf_cpu_kernel kernel) {
  const tf_plan_step *step = &plan->host_steps[s];
  if (!kernel)
    return tf_status_new(TF_ERR_UNSUPPORTED, "host step %d '%s' (%s): no CPU kernel to run it on the host", s,
                         step->name, tf_op_name(step->op));
  const bool any = step->op == TF_OP_RESHAPE || tf_op_info_get(step->op)->dtypes == TF_DTYPES_ANY;
  for (int32_t k = 0; !any && k < operand_count(step); k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    if (b->dtype == TF_F16 || b->dtype == TF_BF16)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "host step %d '%s' (%s): operand '%s' is %s; the host steps compute on f32 data", s,
                           step->name, tf_op_name(step->op), b->name, tf_dtype_name(b->dtype));
  }
  return NULL;
}

/* `bytes` of zeroed host memory: the backend's (page-locked, or reachable by its copies) where it has
 * some and can give it (*from_backend), else ordinary memory. */
static void *host_memory(const tf_host_steps *h, int64_t bytes, bool *from_backend) {
  void *memory = NULL;
  *from_backend = false;
  if (h->backend->alloc_host) {
    tf_status status = h->backend->alloc_host(h->state, bytes, &memory);
    tf_status_free(status);
    if (!status) {
      *from_backend = true;
      return memory;
    }
  }
  const size_t size = (size_t)(bytes > 0 ? bytes : STAGING_ALIGN);
  memory = aligned_alloc(STAGING_ALIGN, (size + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN);
  if (memory)
    memset(memory, 0, size);
  return memory;
}

static void free_host_memory(const tf_host_steps *h, void *memory, bool from_backend) {
  if (memory && from_backend)
    h->backend->free_host(h->state, memory);
  else
    free(memory);
}

tf_status tf_host_steps_create(const tf_plan *plan, const tf_backend_vtable *backend, void *state, tf_host_steps *out) {
  memset(out, 0, sizeof(*out));
  out->backend = backend;
  out->state = state;
  if (plan->n_host_steps == 0)
    return NULL;
  int32_t most_operands = 1;
  for (int32_t s = 0; s < plan->n_host_steps; s++) {
    const tf_plan_step *step = &plan->host_steps[s];
    const int64_t bytes = staging_of(plan, step);
    out->staging_bytes = bytes > out->staging_bytes ? bytes : out->staging_bytes;
    most_operands = operand_count(step) > most_operands ? operand_count(step) : most_operands;
  }
  out->region = host_memory(out, plan->host_bytes, &out->region_from_backend);
  out->staging = out->staging_bytes > 0 ? host_memory(out, out->staging_bytes, &out->staging_from_backend) : NULL;
  out->pinned_bytes =
      (out->region_from_backend ? plan->host_bytes : 0) + (out->staging_from_backend ? out->staging_bytes : 0);
  out->kernels = calloc((size_t)plan->n_host_steps, sizeof(tf_cpu_kernel));
  out->by_backend = calloc((size_t)plan->n_host_steps, sizeof(bool));
  out->tensors = calloc((size_t)most_operands, sizeof(tf_cpu_tensor));
  if (!out->region || (out->staging_bytes > 0 && !out->staging) || !out->kernels || !out->tensors || !out->by_backend) {
    tf_host_steps_destroy(out);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY,
                         "cannot allocate the host region (%lld bytes) and staging (%lld bytes) of the offloaded "
                         "plan",
                         (long long)plan->host_bytes, (long long)out->staging_bytes);
  }
  for (int32_t s = 0; s < plan->n_host_steps; s++) {
    out->kernels[s] = tf_cpu_kernel_get(plan->host_steps[s].op, false);
    tf_status status = refusal(plan, s, out->kernels[s]);
    if (status) {
      tf_host_steps_destroy(out);
      return status;
    }
  }
  return NULL;
}

void tf_host_steps_destroy(tf_host_steps *h) {
  free_host_memory(h, h->region, h->region_from_backend);
  free_host_memory(h, h->staging, h->staging_from_backend);
  free(h->kernels);
  free(h->by_backend);
  free(h->tensors);
  memset(h, 0, sizeof(*h));
}

bool tf_host_step_is_copy(const tf_plan *plan, int32_t index) {
  const tf_plan_step *step = &plan->host_steps[index];
  if (step->op != TF_OP_RESHAPE || step->phase == TF_PHASE_OPTIMIZER || step->n_inputs != 1 || step->n_outputs != 1)
    return false;
  const tf_plan_buffer *from = &plan->buffers[step->inputs[0]], *to = &plan->buffers[step->outputs[0]];
  return from->bytes == to->bytes && (from->region == TF_REGION_HOST) != (to->region == TF_REGION_HOST);
}

/* Whether host step `index` is a copy no other kind of host step shares a place with: handed to the
 * backend, it runs after the host steps the runtime runs at that place, so none may be there. */
static bool copy_alone(const tf_plan *plan, int32_t index) {
  if (!tf_host_step_is_copy(plan, index))
    return false;
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    if (plan->host_at[h] == plan->host_at[index] && !tf_host_step_is_copy(plan, h))
      return false;
  return true;
}

tf_status tf_host_steps_hand_copies(tf_host_steps *h, const tf_plan *plan) {
  const char *where = getenv("TIGHTFIT_HOST_COPIES"); /* "host": the runtime runs them (to compare) */
  if (where && where[0] && strcmp(where, "host") != 0 && strcmp(where, "device") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "TIGHTFIT_HOST_COPIES is '%s': 'device' (the default: the backend runs an offloaded "
                         "activation's copies among its steps) or 'host' (the runtime runs them)",
                         where);
  if (!h->backend || !h->backend->take_host_copies || !h->region_from_backend || plan->n_host_steps == 0 ||
      (where && strcmp(where, "host") == 0))
    return NULL;
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_host_steps; s++) {
    h->by_backend[s] = copy_alone(plan, s);
    n += h->by_backend[s] ? 1 : 0;
  }
  if (n == 0)
    return NULL;
  tf_status status = h->backend->take_host_copies(h->state, plan, h->region, h->by_backend);
  if (status) {
    memset(h->by_backend, 0, sizeof(bool) * (size_t)plan->n_host_steps);
    return tf_status_prefix(status, "handing the offloaded activations' %d copies to the backend", n);
  }
  h->n_by_backend = n;
  return NULL;
}

tf_status tf_host_step_run(const tf_host_steps *h, const tf_plan *plan, int32_t index, const tf_backend_vtable *backend,
                           void *state, void *const regions[TF_REGION_COUNT], const tf_cpu_context *context) {
  const tf_plan_step *step = &plan->host_steps[index];
  char *staged = h->staging;
  for (int32_t k = 0; k < operand_count(step); k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    char *data = (char *)h->region + b->offset;
    if (b->region != TF_REGION_HOST) {
      data = staged;
      staged += aligned(b->bytes);
      if (tf_plan_step_reads(step, k) && b->bytes > 0) /* an empty tensor's region may not exist */
        TF_RETURN_IF_ERROR(backend->download(state, regions[b->region], b->offset, data, b->bytes));
    }
    h->tensors[k] = tf_tensor_ref_make(data, b->dtype, b->rank, b->shape);
  }
  tf_cpu_args args = {.op = step->op,
                      .attrs = &step->attrs,
                      .n_inputs = step->n_inputs,
                      .inputs = h->tensors,
                      .n_outputs = step->n_outputs,
                      .outputs = h->tensors + step->n_inputs,
                      .context = context};
  h->kernels[index](&args);
  for (int32_t k = 0; k < operand_count(step); k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    if (written && b->region != TF_REGION_HOST && b->bytes > 0)
      TF_RETURN_IF_ERROR(backend->upload(state, regions[b->region], b->offset, h->tensors[k].data, b->bytes));
  }
  return NULL;
}
