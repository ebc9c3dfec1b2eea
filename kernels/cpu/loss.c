/* The losses and their gradients: cross_entropy (classes on the last axis, mean over the labels that
 * count), mse and bce_with_logits (means over every element).
 *
 * A loss is a scalar of the compute type (f32 in the f32 build, double in the f64 build), and so is
 * the incoming dloss of a gradient. Per-element terms are summed in double in blocks whose size
 * depends only on the element count, the block partials added in order: the loss does not depend on
 * the thread count. A mean over nothing (no label counts, or an empty tensor) is 0. */
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/xent_row.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#ifdef TF_REAL_F64
#define LOG1P log1p
#else
#define LOG1P log1pf
#endif

#define MAX_BLOCKS 256
#define MIN_BLOCK 4096 /* elements (logits for cross_entropy) per block at least */

/* Splits `n` items of `weight` elements each into at most MAX_BLOCKS blocks of *size items. */
static int64_t block_count(int64_t n, int64_t weight, int64_t *size) {
  int64_t block = (n + MAX_BLOCKS - 1) / MAX_BLOCKS, least = (MIN_BLOCK + weight - 1) / (weight > 0 ? weight : 1);
  block = block < least ? least : block;
  block = block < 1 ? 1 : block;
  *size = block;
  return (n + block - 1) / block;
}

/* ---- cross_entropy ---- */

typedef struct classes_view {
  const real *logits;
  const tf_cpu_tensor *labels;
  int64_t rows, classes, ignore_index;
} classes_view;

static classes_view classes_view_of(const tf_cpu_args *args) {
  const tf_cpu_tensor *logits = &args->inputs[0];
  classes_view v = {logits->data, &args->inputs[1], 0, logits->shape[logits->rank - 1],
                    args->attrs->u.cross_entropy.ignore_index};
  v.rows = v.classes > 0 ? logits->count / v.classes : 0;
  return v;
}

/* The label of `row`, or -1 when it does not count: ignore_index, or outside [0, classes). */
static int64_t label_of(const classes_view *v, int64_t row) {
  const int64_t label =
      v->labels->dtype == TF_I32 ? ((const int32_t *)v->labels->data)[row] : ((const int64_t *)v->labels->data)[row];
  return label == v->ignore_index || label < 0 || label >= v->classes ? -1 : label;
}

static int64_t counted_labels(const classes_view *v, int threads) {
  int64_t count = 0;
  TF_CPU_PARALLEL_SUM(
      tf_cpu_team(threads, v->rows > TF_CPU_CHUNK), count,
      for (int64_t row = 0; row < v->rows; row++) { count += label_of(v, row) >= 0; });
  return count;
}

void TF_REAL_NAME(tf_cpu_cross_entropy)(const tf_cpu_args *args) {
  const classes_view v = classes_view_of(args);
  int64_t size;
  const int64_t blocks = block_count(v.rows, v.classes, &size);
  double partial[MAX_BLOCKS];
  int64_t counts[MAX_BLOCKS];
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t end = b == blocks - 1 ? v.rows : (b + 1) * size;
        double sum = 0;
        int64_t count = 0;
        for (int64_t row = b * size; row < end; row++) {
          const int64_t label = label_of(&v, row);
          if (label < 0)
            continue;
          sum += tf_cpu_xent_row_loss(v.logits + row * v.classes, v.classes, label);
          count++;
        }
        partial[b] = sum;
        counts[b] = count;
      });
  double total = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < blocks; b++) {
    total += partial[b];
    count += counts[b];
  }
  *(real *)args->outputs[0].data = count > 0 ? (real)(total / (double)count) : (real)0;
}

/* dlogits = (softmax(logits) - onehot(label)) dloss / count on rows that count, 0 elsewhere. */
void TF_REAL_NAME(tf_cpu_cross_entropy_grad)(const tf_cpu_args *args) {
  const classes_view v = classes_view_of(args);
  const int threads = tf_cpu_threads(args);
  const int64_t count = counted_labels(&v, threads);
  const real dloss = *(const real *)args->inputs[2].data;
  const real scale = count > 0 ? (real)((double)dloss / (double)count) : (real)0;
  real *dx = args->outputs[0].data;
  const int64_t classes = v.classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(threads, v.rows * classes > TF_CPU_CHUNK), for (int64_t row = 0; row < v.rows; row++) {
        tf_cpu_xent_row_gradient(v.logits + row * classes, dx + row * classes, classes, label_of(&v, row), scale);
      });
}

/* ---- mse and bce_with_logits: means of per-element terms ---- */

static inline real bce_term(real x, real t) {
  // max(x, 0) - x t + log(1 + exp(-|x|)): never overflows.
  return (x > 0 ? x : (real)0) - x * t + LOG1P(TF_REAL_EXP(-TF_REAL_FABS(x)));
}

static double mean_loss(const tf_cpu_args *args, bool bce) {
  const real *p = args->inputs[0].data, *t = args->inputs[1].data;
  const int64_t n = args->inputs[0].count;
  int64_t size;
  const int64_t blocks = block_count(n, 1, &size);
  double partial[MAX_BLOCKS];
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t end = b == blocks - 1 ? n : (b + 1) * size;
        double sum = 0;
        if (bce) {
          for (int64_t i = b * size; i < end; i++)
            sum += (double)bce_term(p[i], t[i]);
        } else {
          for (int64_t i = b * size; i < end; i++) {
            const real d = p[i] - t[i];
            sum += (double)(d * d);
          }
        }
        partial[b] = sum;
      });
  double total = 0;
  for (int64_t b = 0; b < blocks; b++)
    total += partial[b];
  return n > 0 ? total / (double)n : 0.0;
}

/* mean((p - t)^2) */
void TF_REAL_NAME(tf_cpu_mse)(const tf_cpu_args *args) {
  *(real *)args->outputs[0].data = (real)mean_loss(args, false);
}

/* mean(max(x, 0) - x t + log1p(exp(-|x|))) */
void TF_REAL_NAME(tf_cpu_bce_with_logits)(const tf_cpu_args *args) {
  *(real *)args->outputs[0].data = (real)mean_loss(args, true);
}

/* dp = 2 (p - t) dloss / n */
void TF_REAL_NAME(tf_cpu_mse_grad)(const tf_cpu_args *args) {
  const real *p = args->inputs[0].data, *t = args->inputs[1].data;
  const real dloss = *(const real *)args->inputs[2].data;
  real *dp = args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const real scale = n > 0 ? (real)(2.0 * (double)dloss / (double)n) : (real)0;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK),
      for (int64_t i = 0; i < n; i++) { dp[i] = scale * (p[i] - t[i]); });
}

/* dx = (sigmoid(x) - t) dloss / n */
void TF_REAL_NAME(tf_cpu_bce_with_logits_grad)(const tf_cpu_args *args) {
  const real *x = args->inputs[0].data, *t = args->inputs[1].data;
  const real dloss = *(const real *)args->inputs[2].data;
  real *dx = args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const real scale = n > 0 ? (real)((double)dloss / (double)n) : (real)0;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK),
      for (int64_t i = 0; i < n; i++) { dx[i] = scale * ((real)1 / ((real)1 + TF_CPU_VECTOR_EXP(-x[i])) - t[i]); });
}
