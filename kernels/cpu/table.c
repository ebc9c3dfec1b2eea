/* Dispatch from op to kernel, generated from kernels/cpu/list.h. */
#include "kernels/cpu/list.h"

typedef struct kernel_pair {
  tf_cpu_kernel f32, f64;
} kernel_pair;

#define TF_CPU_ROW(op, name) [op] = {tf_cpu_##name##_f32, tf_cpu_##name##_f64},
static const kernel_pair kernels[TF_OP_COUNT] = {TF_CPU_KERNEL_LIST(TF_CPU_ROW)};
#undef TF_CPU_ROW

tf_cpu_kernel tf_cpu_kernel_get(tf_op op, bool f64) {
  if ((int)op < 0 || op >= TF_OP_COUNT)
    return NULL;
  return f64 ? kernels[op].f64 : kernels[op].f32;
}
