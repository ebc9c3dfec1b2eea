/* One row of cross-entropy, shared by cross_entropy (kernels/cpu/loss.c) and the fused loss head
 * (kernels/cpu/linear_loss.c), for the kernel file's `real` (real.h). The exponentials are
 * vector_math.h's (libm's in the f64 build).
 *
 * The row's max and its sum of exponentials run in TF_CPU_XENT_LANES fixed lanes (element c in lane
 * c % lanes, each lane summed in order, in double, then the lanes in order), so every vector width
 * computes the same operations in the same order: the loops take the wider clones
 * (TF_CPU_VECTOR_CLONES) and give the bits of the baseline build on every x86-64. The loss and the
 * gradient of a row share its max and its sum, so the single-pass form (tf_cpu_xent_row_train, the
 * fused head's) gives the loss of tf_cpu_xent_row_loss and the gradient of tf_cpu_xent_row_gradient
 * bit for bit. */
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

#define TF_CPU_XENT_LANES 16

/* The row's max, starting from its first class (classes >= 1): NaN exactly when row[0] is, and NaNs
 * elsewhere are skipped (they make the sum NaN instead). */
TF_CPU_VECTOR_CLONES static real tf_cpu_xent_row_max(const real *row, int64_t classes) {
  real lane[TF_CPU_XENT_LANES];
  for (int j = 0; j < TF_CPU_XENT_LANES; j++)
    lane[j] = row[0];
  int64_t c = 0;
  for (; c + TF_CPU_XENT_LANES <= classes; c += TF_CPU_XENT_LANES)
#pragma omp simd
    for (int j = 0; j < TF_CPU_XENT_LANES; j++)
      lane[j] = row[c + j] > lane[j] ? row[c + j] : lane[j];
  for (int j = 0; c + j < classes; j++)
    lane[j] = row[c + j] > lane[j] ? row[c + j] : lane[j];
  real best = lane[0];
  for (int j = 1; j < TF_CPU_XENT_LANES; j++)
    best = lane[j] > best ? lane[j] : best;
  return best;
}

/* The lanes' sum of exp(row - best), in double; with `out`, each exponential is stored there too (out
 * may be row). The two entries below inline it (always: each clone then vectorises it at its own
 * width), so they sum the same terms in the same order. The exponentials of a block of
 * TF_CPU_XENT_BLOCK classes are computed first (into `out`, or a block on the stack), then summed:
 * the same terms in the same order as one loop doing both, 30% faster (1.6 -> 1.1 ns a class on a
 * Zen 2 core: the double sums no longer wait on each exponential's chain). */
#define TF_CPU_XENT_BLOCK 1024
static inline __attribute__((always_inline)) double tf_cpu_xent_lanes_exp_sum(const real *row, real *out,
                                                                              int64_t classes, real best) {
  double lane[TF_CPU_XENT_LANES] = {0};
  real block[TF_CPU_XENT_BLOCK];
  int64_t c = 0;
  while (classes - c >= TF_CPU_XENT_LANES) {
    const int64_t whole = (classes - c) / TF_CPU_XENT_LANES * TF_CPU_XENT_LANES;
    const int64_t length = whole < TF_CPU_XENT_BLOCK ? whole : TF_CPU_XENT_BLOCK;
    real *e = out ? out + c : block;
#pragma omp simd
    for (int64_t i = 0; i < length; i++)
      e[i] = TF_CPU_VECTOR_EXP(row[c + i] - best);
    for (int64_t i = 0; i < length; i += TF_CPU_XENT_LANES)
#pragma omp simd
      for (int j = 0; j < TF_CPU_XENT_LANES; j++)
        lane[j] += (double)e[i + j];
    c += length;
  }
  for (int j = 0; c + j < classes; j++) {
    const real e = TF_CPU_VECTOR_EXP(row[c + j] - best);
    if (out)
      out[c + j] = e;
    lane[j] += (double)e;
  }
  double sum = 0;
  for (int j = 0; j < TF_CPU_XENT_LANES; j++)
    sum += lane[j];
  return sum;
}

TF_CPU_VECTOR_CLONES static double tf_cpu_xent_row_exp_sum(const real *row, int64_t classes, real best) {
  return tf_cpu_xent_lanes_exp_sum(row, NULL, classes, best);
}

TF_CPU_VECTOR_CLONES static double tf_cpu_xent_row_exp_store(const real *row, real *out, int64_t classes, real best) {
  return tf_cpu_xent_lanes_exp_sum(row, out, classes, best);
}

/* d[c] = d[c] / total * scale: the exponentials become the softmax's share of the gradient. */
TF_CPU_VECTOR_CLONES static void tf_cpu_xent_row_scale(real *d, int64_t classes, real total, real scale) {
#pragma omp simd
  for (int64_t c = 0; c < classes; c++)
    d[c] = d[c] / total * scale;
}

/* -log softmax(row)[label] = log(sum(exp(row - max))) + max - row[label]; classes >= 1. */
static inline double tf_cpu_xent_row_loss(const real *row, int64_t classes, int64_t label) {
  const real best = tf_cpu_xent_row_max(row, classes);
  return log(tf_cpu_xent_row_exp_sum(row, classes, best)) + ((double)best - (double)row[label]);
}

/* d = (softmax(x) - onehot(label)) scale for label >= 0 (d may be x); the row's max in *best, and
 * returns its sum of exponentials. */
static inline double tf_cpu_xent_row_softmax_gradient(const real *x, real *d, int64_t classes, int64_t label,
                                                      real scale, real *best) {
  *best = tf_cpu_xent_row_max(x, classes);
  const double sum = tf_cpu_xent_row_exp_store(x, d, classes, *best);
  tf_cpu_xent_row_scale(d, classes, (real)sum, scale);
  d[label] -= scale;
  return sum;
}

/* d = (softmax(x) - onehot(label)) scale, or 0 when label < 0 (it does not count). d may be x. */
static inline void tf_cpu_xent_row_gradient(const real *x, real *d, int64_t classes, int64_t label, real scale) {
  if (label < 0) {
    for (int64_t c = 0; c < classes; c++)
      d[c] = 0;
    return;
  }
  real best;
  tf_cpu_xent_row_softmax_gradient(x, d, classes, label, scale, &best);
}

/* Both in one call, in place (label >= 0): returns the loss tf_cpu_xent_row_loss gives and leaves in
 * row the gradient tf_cpu_xent_row_gradient gives (three sweeps of the row where the two take five). */
static inline double tf_cpu_xent_row_train(real *row, int64_t classes, int64_t label, real scale) {
  const real picked = row[label];
  real best;
  const double sum = tf_cpu_xent_row_softmax_gradient(row, row, classes, label, scale, &best);
  return log(sum) + ((double)best - (double)picked);
}

#endif
