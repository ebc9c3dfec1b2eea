/* The parameter updates' element-wise loops (kernels/cpu/optimizer.c), for the kernel file's `real`
 * (real.h), in a header so that tests/ops_dense/test_vector_widths.c builds them at each vector width.
 *
 * Each is a map over a span of restrict operands (an update's tensors never overlap) that takes the
 * wider clones (TF_CPU_VECTOR_CLONES): the same operations in the same order at every width, so the
 * same bits. Without them GCC kept the baseline's 4-float vectors and re-read each operand after
 * every store in case they overlapped: AdamW on gpt2-small's 38.6M-element embedding took 68 ms a
 * step, the span takes 38 ms (its 28 bytes an element streamed through this machine's memory). */
#ifndef TIGHTFIT_KERNELS_CPU_UPDATE_SPAN_H
#define TIGHTFIT_KERNELS_CPU_UPDATE_SPAN_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/real.h"
#include "kernels/cpu/vector_math.h"

/* sum += x */
TF_CPU_VECTOR_CLONES static void tf_cpu_accumulate_span(real *restrict sum, const real *restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++)
    sum[i] += x[i];
}

/* The SGD update's coefficients: the gradient's factor, then torch.optim.SGD's. */
typedef struct {
  real factor, lr, decay, momentum;
  bool decays, has_momentum;
} tf_cpu_sgd_coefficients;

/* g = grad factor (+ decay param); with momentum buffer = momentum buffer + g and g = buffer;
 * param -= lr g. */
TF_CPU_VECTOR_CLONES static void tf_cpu_sgd_span(real *restrict param, const real *restrict grad, real *restrict buffer,
                                                 int64_t n, const tf_cpu_sgd_coefficients *k) {
  const real factor = k->factor, lr = k->lr, decay = k->decay, momentum = k->momentum;
  const bool decays = k->decays, has_momentum = k->has_momentum;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    real g = grad[i] * factor;
    if (decays)
      g += decay * param[i];
    if (has_momentum) {
      buffer[i] = momentum * buffer[i] + g;
      g = buffer[i];
    }
    param[i] -= lr * g;
  }
}

/* The AdamW update's coefficients for one step (computed in double, rounded once). */
typedef struct {
  real factor, decay, b1, one_minus_b1, b2, one_minus_b2, step_size, correction2_sqrt, epsilon;
} tf_cpu_adamw_coefficients;

/* g = grad factor; param *= decay; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * param -= step_size (m / (sqrt(v) / correction2_sqrt + epsilon)). */
TF_CPU_VECTOR_CLONES static void tf_cpu_adamw_span(real *restrict param, const real *restrict grad, real *restrict m,
                                                   real *restrict v, int64_t n, const tf_cpu_adamw_coefficients *k) {
  const real factor = k->factor, decay = k->decay, b1 = k->b1, one_minus_b1 = k->one_minus_b1, b2 = k->b2;
  const real one_minus_b2 = k->one_minus_b2, step_size = k->step_size, correction2_sqrt = k->correction2_sqrt;
  const real epsilon = k->epsilon;
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const real g = grad[i] * factor;
    param[i] *= decay;
    m[i] = m[i] * b1 + one_minus_b1 * g;
    v[i] = v[i] * b2 + one_minus_b2 * g * g;
    param[i] -= step_size * (m[i] / (TF_REAL_SQRT(v[i]) / correction2_sqrt + epsilon));
  }
}

#endif
