#include "plan_interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/workspace_cpu.h"

static bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

int64_t tf_interp_count(const tf_interp *interp, int32_t id) {
  const tf_plan_buffer *b = &interp->plan->buffers[id];
  int64_t n = 1;
  for (int32_t d = 0; d < b->rank; d++)
    n *= b->shape[d];
  return n;
}

static void fill_constant(tf_interp *interp, int32_t id) {
  const tf_plan_buffer *b = &interp->plan->buffers[id];
  int64_t n = tf_interp_count(interp, id);
  for (int64_t i = 0; i < n; i++) {
    double value = 0;
    switch (b->init.kind) {
    case TF_INIT_ONES: value = 1; break;
    case TF_INIT_FILL: value = b->init.a; break;
    case TF_INIT_ARANGE: value = b->init.a + b->init.b * (double)i; break;
    default: value = 0; break;
    }
    if (is_floating(b->dtype))
      ((double *)interp->data[id])[i] = value;
    else if (b->dtype == TF_I32)
      ((int32_t *)interp->data[id])[i] = (int32_t)value;
    else if (b->dtype == TF_I64)
      ((int64_t *)interp->data[id])[i] = (int64_t)value;
  }
}

bool tf_interp_init(tf_interp *interp, const tf_plan *plan) {
  memset(interp, 0, sizeof(*interp));
  interp->plan = plan;
  interp->data = calloc((size_t)plan->n_buffers, sizeof(void *));
  interp->context = (tf_cpu_context){.threads = 1, .optimizer_step = 1, .seed = 1234};
  if (!interp->data)
    return false;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    int64_t n = tf_interp_count(interp, i);
    size_t element = is_floating(b->dtype) ? sizeof(double) : (size_t)tf_dtype_size(b->dtype);
    interp->data[i] = calloc((size_t)(n ? n : 1), element ? element : 1);
    if (!interp->data[i])
      return false;
    if (b->role == TF_ROLE_CONSTANT)
      fill_constant(interp, i);
  }
  return true;
}

void tf_interp_free(tf_interp *interp) {
  for (int32_t i = 0; interp->data && i < interp->plan->n_buffers; i++)
    free(interp->data[i]);
  free(interp->data);
  memset(interp, 0, sizeof(*interp));
}

int32_t tf_interp_find(const tf_interp *interp, const char *name) {
  for (int32_t i = 0; i < interp->plan->n_buffers; i++)
    if (strcmp(interp->plan->buffers[i].name, name) == 0)
      return i;
  return -1;
}

static tf_cpu_tensor tensor_of(const tf_interp *interp, int32_t id) {
  const tf_plan_buffer *b = &interp->plan->buffers[id];
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = interp->data[id];
  t.dtype = b->dtype;
  t.rank = b->rank;
  memcpy(t.shape, b->shape, sizeof(t.shape));
  t.count = tf_interp_count(interp, id);
  return t;
}

bool tf_interp_run(tf_interp *interp, int32_t begin, int32_t end) {
  const tf_plan *plan = interp->plan;
  for (int32_t s = begin; s < end; s++) {
    const tf_plan_step *step = &plan->steps[s];
    tf_cpu_kernel kernel = tf_cpu_kernel_get(step->op, true);
    if (!kernel) {
      fprintf(stderr, "no f64 kernel for step %d (%s)\n", s, tf_op_name(step->op));
      return false;
    }
    tf_cpu_tensor inputs[128], outputs[TF_MAX_OUTPUTS];
    for (int32_t k = 0; k < step->n_inputs && k < 128; k++)
      inputs[k] = tensor_of(interp, step->inputs[k]);
    for (int32_t k = 0; k < step->n_outputs; k++)
      outputs[k] = tensor_of(interp, step->outputs[k]);
    void *workspace = NULL;
    int64_t workspace_bytes = 0;
    /* The plan sized workspaces for f32; the f64 kernels ask for their own size. */
    workspace_bytes = tf_cpu_workspace_bytes(step->op, &step->attrs, step->n_inputs, inputs, step->n_outputs, outputs,
                                             interp->context.threads, 8);
    if (workspace_bytes > 0)
      workspace = aligned_alloc(64, (size_t)((workspace_bytes + 63) / 64 * 64));
    tf_cpu_args args = {.op = step->op,
                        .attrs = &step->attrs,
                        .n_inputs = step->n_inputs,
                        .inputs = inputs,
                        .n_outputs = step->n_outputs,
                        .outputs = outputs,
                        .workspace = workspace,
                        .workspace_bytes = workspace_bytes,
                        .context = &interp->context};
    kernel(&args);
    free(workspace);
  }
  return true;
}
