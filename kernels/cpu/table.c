/* Dispatch from op to kernel: the op table's cpu column (core/op_table.h). */
#include "kernels/cpu/list.h"

typedef struct kernel_pair {
  tf_cpu_kernel f32, f64;
} kernel_pair;

#define TF_CPU_ROW(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias, workspace,   \
                   vjp, cpu, ...)                                                                                      \
  [TF_OP_##ID] = {tf_cpu_##cpu##_f32, tf_cpu_##cpu##_f64},
static const kernel_pair kernels[TF_OP_COUNT] = {TF_OP_TABLE(TF_CPU_ROW)};
#undef TF_CPU_ROW

tf_cpu_kernel tf_cpu_kernel_get(tf_op op, bool f64) {
  if ((int)op < 0 || op >= TF_OP_COUNT)
    return NULL;
  return f64 ? kernels[op].f64 : kernels[op].f32;
}

tf_cpu_kernel tf_cpu_half_kernel_get(tf_op op) {
  switch (op) {
  case TF_OP_LINEAR_CROSS_ENTROPY:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_TRAIN:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN: return tf_cpu_linear_cross_entropy_half;
  case TF_OP_EMBEDDING: return tf_cpu_embedding_half;
  case TF_OP_EMBEDDING_GRAD: return tf_cpu_embedding_grad_half;
  case TF_OP_BATCH_NORM_RUNNING: return tf_cpu_batch_norm_running_half;
  default: return NULL;
  }
}
