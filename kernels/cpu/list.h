/* Every op's CPU kernels, declared from the op table's cpu column (core/op_table.h): the functions
 * tf_cpu_<cpu>_f32 and tf_cpu_<cpu>_f64 (kernels/cpu/real.h), which table.c dispatches to. */
#ifndef TIGHTFIT_KERNELS_CPU_LIST_H
#define TIGHTFIT_KERNELS_CPU_LIST_H

#include "kernels/cpu/kernels.h"

#define TF_CPU_DECLARE(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias,          \
                       workspace, vjp, cpu, ...)                                                                       \
  void tf_cpu_##cpu##_f32(const tf_cpu_args *args);                                                                    \
  void tf_cpu_##cpu##_f64(const tf_cpu_args *args);
TF_OP_TABLE(TF_CPU_DECLARE)
#undef TF_CPU_DECLARE

#endif
