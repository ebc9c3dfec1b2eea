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
