/* Kernel workspace per op and target: the one thing about kernels the planner must know. The
 * formulas live in core/ (core/workspace_cpu.c, core/workspace_cuda.h), which the kernels include
 * too, so the planned bytes and the bytes a kernel touches come from one formula; of the Vulkan
 * shaders only the fused loss heads (core/linear_loss.h), embedding's gradient on half data, the
 * split column sums of sum_to/sum/mean and the norms' gradients (core/workspace.h) and the CTC loss
 * (core/ctc.h) need any. */
#include <string.h>

#include "compiler/training.h"
#include "core/ctc.h"
#include "core/linear_loss.h"
#include "core/ops.h"
#include "core/workspace.h"
#include "core/workspace_cpu.h"
#include "core/workspace_cuda.h"

static tf_tensor_ref operand(const tf_graph *g, int32_t id) {
  const tf_ir_tensor *source = &g->tensors[id];
  return tf_tensor_ref_make(NULL, source->dtype, source->rank, source->shape);
}

/* The node's operands (shapes only) into inputs[] and outputs[]; returns how many inputs. */
static int32_t operands(const tf_graph *g, const tf_ir_node *node, tf_tensor_ref *inputs, tf_tensor_ref *outputs) {
  int32_t n_inputs = node->n_inputs < TF_OP_VARIADIC_INTERNAL ? node->n_inputs : TF_OP_VARIADIC_INTERNAL;
  for (int32_t i = 0; i < n_inputs; i++)
    inputs[i] = operand(g, node->inputs[i]);
  for (int32_t i = 0; i < node->n_outputs; i++)
    outputs[i] = operand(g, node->outputs[i]);
  return n_inputs;
}

int64_t tf_workspace_bytes(const tf_target *target, const tf_graph *g, const tf_ir_node *node) {
  tf_tensor_ref inputs[TF_OP_VARIADIC_INTERNAL], outputs[TF_MAX_OUTPUTS];
  switch (target->kind) {
  case TF_TARGET_CPU: {
    int32_t n_inputs = operands(g, node, inputs, outputs);
    return tf_cpu_workspace_bytes(node->op, &node->attrs, n_inputs, inputs, node->n_outputs, outputs, target->threads,
                                  4);
  }
  case TF_TARGET_CUDA: {
    int32_t n_inputs = operands(g, node, inputs, outputs);
    return tf_cuda_workspace_bytes(node->op, &node->attrs, n_inputs, inputs, node->n_outputs, outputs);
  }
  case TF_TARGET_VULKAN: { /* the fused loss heads' chunks, column partials, embedding's gradient on half data */
    const int32_t n_inputs = operands(g, node, inputs, outputs);
    if (node->op == TF_OP_EMBEDDING_GRAD && (outputs[0].dtype == TF_F16 || outputs[0].dtype == TF_BF16))
      return tf_vulkan_embedding_grad_half_workspace_bytes(inputs[0].count);
    if (tf_op_workspace_rule(node->op) == TF_WORKSPACE_REDUCE) /* reduce.comp's split columns */
      return tf_vulkan_reduce_workspace_bytes(node->op, inputs[0].count, outputs[0].count);
    if (tf_op_workspace_rule(node->op) == TF_WORKSPACE_NORM_GRAD) { /* norm.comp's dgamma/dbeta partials */
      const int64_t features = inputs[0].rank > 0 ? inputs[0].shape[inputs[0].rank - 1] : 0;
      return features > 0 ? tf_vulkan_norm_grad_workspace_bytes(inputs[0].count / features, features) : 0;
    }
    if (tf_op_workspace_rule(node->op) == TF_WORKSPACE_CTC) { /* shaders/ctc.comp: f32 words */
      const tf_ctc_geometry cg = tf_ctc_geometry_of(&inputs[0], &inputs[1]);
      return tf_ctc_mul(4, tf_ctc_workspace_elements(&cg));
    }
    if (tf_op_workspace_rule(node->op) != TF_WORKSPACE_LINEAR_CROSS_ENTROPY)
      return 0;
    const tf_linear_loss_geometry lg = tf_linear_loss_geometry_of(&node->attrs, &inputs[0], &inputs[1]);
    if (inputs[0].dtype == TF_F16 || inputs[0].dtype == TF_BF16) /* the half head, spans of classes outside */
      return 4 * tf_linear_loss_vulkan_half_workspace_of(&lg, node->op != TF_OP_LINEAR_CROSS_ENTROPY,
                                                         tf_linear_loss_bias_input(node->op, n_inputs) >= 0)
                     .words;
    return 4 * tf_linear_loss_vulkan_workspace_words(&lg, node->op != TF_OP_LINEAR_CROSS_ENTROPY);
  }
  default: return 0;
  }
}
