/* The gradient factor and the overflow check every parameter update shares (optimizer.c,
 * optimizer8bit.c): static functions of the compute type, since each kernel file is compiled twice.
 * Include after kernels/cpu/list.h. */
#ifndef TIGHTFIT_KERNELS_CPU_UPDATE_FACTOR_H
#define TIGHTFIT_KERNELS_CPU_UPDATE_FACTOR_H

#include <math.h>
#include <stdbool.h>

#include "kernels/cpu/real.h"

/* The factor that turns the accumulated gradient into the one the update uses. `states` is the
 * number of tensor operands before the optional norm_sq. */
static inline double gradient_factor(const tf_cpu_args *args, int32_t states) {
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  const int32_t loss_scale_log2 = args->context ? args->context->loss_scale_log2 : 0;
  const double grad_scale = ldexp((double)a->grad_scale, -loss_scale_log2);
  if (!(a->clip_norm > 0.0f) || args->n_inputs <= states)
    return grad_scale;
  const double norm = sqrt((double)*(const real *)args->inputs[states].data) * grad_scale;
  const double clip = (double)a->clip_norm / (norm + 1e-6);
  return clip < 1.0 ? grad_scale * clip : grad_scale;
}

/* True when the update must be skipped: its norm_sq input (after `states` tensor operands) is
 * present and not finite. */
static inline bool overflowed(const tf_cpu_args *args, int32_t states) {
  return args->n_inputs > states && !isfinite((double)*(const real *)args->inputs[states].data);
}

#endif
