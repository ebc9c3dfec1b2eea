/* One row of cross-entropy, shared by cross_entropy (kernels/cpu/loss.c) and the fused loss head
 * (kernels/cpu/linear_loss.c), for the kernel file's `real` (real.h). The exponentials are
 * vector_math.h's (libm's in the f64 build); the sums are omp simd lanes in double, then the lanes
 * in order. */
#ifndef TIGHTFIT_KERNELS_CPU_XENT_ROW_H
#define TIGHTFIT_KERNELS_CPU_XENT_ROW_H

#include <math.h>
#include <stdint.h>

#include "kernels/cpu/real.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* -log softmax(row)[label] = log(sum(exp(row - max))) + max - row[label]; classes >= 1. The max
 * starts from the first class, so the loss is NaN exactly when that class is. */
static inline double tf_cpu_xent_row_loss(const real *row, int64_t classes, int64_t label) {
  real best = row[0];
  for (int64_t c = 1; c < classes; c++)
    best = row[c] > best ? row[c] : best;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < classes; c++)
    sum += (double)TF_CPU_VECTOR_EXP(row[c] - best);
  return log(sum) + ((double)best - (double)row[label]);
}

/* d = (softmax(x) - onehot(label)) scale, or 0 when label < 0 (it does not count). d may be x. The
 * max skips NaNs (it starts from -inf). */
static inline void tf_cpu_xent_row_gradient(const real *x, real *d, int64_t classes, int64_t label, real scale) {
  if (label < 0) {
    for (int64_t c = 0; c < classes; c++)
      d[c] = 0;
    return;
  }
  real best = -INFINITY;
  for (int64_t c = 0; c < classes; c++)
    best = x[c] > best ? x[c] : best;
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < classes; c++) {
    d[c] = TF_CPU_VECTOR_EXP(x[c] - best);
    sum += (double)d[c];
  }
  const real total = (real)sum;
  for (int64_t c = 0; c < classes; c++)
    d[c] = d[c] / total * scale;
  d[label] -= scale;
}

#endif
