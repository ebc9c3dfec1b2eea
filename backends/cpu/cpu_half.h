/* The CPU backend's half kernels: a step on f16/bf16 data runs its f32 kernel over the step's half
 * slices (core/half_slices.h), each half operand of a slice widened into the step's workspace and
 * each half result rounded from it by the cast kernel (exact up, nearest even down). */
#ifndef TIGHTFIT_BACKENDS_CPU_HALF_H
#define TIGHTFIT_BACKENDS_CPU_HALF_H

#include "core/half_slices.h"
#include "kernels/cpu/kernels.h"

/* Runs `kernel` on `args` (the step's operands as stored, its whole workspace) slice by slice as
 * `slices` says. */
void tf_cpu_half_run(tf_cpu_kernel kernel, const tf_cpu_args *args, const tf_cpu_half_slices *slices);

#endif
