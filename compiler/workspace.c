/* Kernel workspace per op and target: the one thing about kernels the planner must know. The CPU
 * formulas live beside the CPU kernels (kernels/cpu/workspace.c) so that both change together;
 * the Vulkan and CUDA backends add theirs here when they exist. */
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/workspace.h"

static tf_cpu_tensor operand(const tf_graph *g, int32_t id) {
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  const tf_ir_tensor *source = &g->tensors[id];
  t.dtype = source->dtype;
  t.rank = source->rank;
  t.count = 1;
  for (int32_t d = 0; d < source->rank; d++) {
    t.shape[d] = source->shape[d];
    t.count *= source->shape[d];
  }
  return t;
}

/* CUDA: kernels/cuda/workspace.h, the formulas the CUDA kernels carve their workspace with. */
static int64_t cuda_workspace_bytes(const tf_graph *g, const tf_ir_node *node) {
  tf_cuda_tensor inputs[TF_OP_VARIADIC_INTERNAL], outputs[TF_MAX_OUTPUTS];
  int32_t n_inputs = node->n_inputs < TF_OP_VARIADIC_INTERNAL ? node->n_inputs : TF_OP_VARIADIC_INTERNAL;
  for (int32_t i = 0; i < n_inputs + node->n_outputs; i++) {
    tf_cpu_tensor t = operand(g, i < n_inputs ? node->inputs[i] : node->outputs[i - n_inputs]);
    tf_cuda_tensor *c = i < n_inputs ? &inputs[i] : &outputs[i - n_inputs];
    memset(c, 0, sizeof(*c));
    c->dtype = t.dtype;
    c->rank = t.rank;
    c->count = t.count;
    memcpy(c->shape, t.shape, sizeof(c->shape));
  }
  return tf_cuda_workspace_bytes(node->op, &node->attrs, n_inputs, inputs, node->n_outputs, outputs);
}

int64_t tf_workspace_bytes(const tf_target *target, const tf_graph *g, const tf_ir_node *node) {
  if (target->kind == TF_TARGET_CUDA)
    return cuda_workspace_bytes(g, node);
  if (target->kind != TF_TARGET_CPU)
    return 0;
  tf_cpu_tensor inputs[TF_OP_VARIADIC_INTERNAL], outputs[TF_MAX_OUTPUTS];
  int32_t n_inputs = node->n_inputs < TF_OP_VARIADIC_INTERNAL ? node->n_inputs : TF_OP_VARIADIC_INTERNAL;
  for (int32_t i = 0; i < n_inputs; i++)
    inputs[i] = operand(g, node->inputs[i]);
  for (int32_t i = 0; i < node->n_outputs; i++)
    outputs[i] = operand(g, node->outputs[i]);
  return tf_cpu_workspace_bytes(node->op, &node->attrs, n_inputs, inputs, node->n_outputs, outputs, target->threads, 4);
}
