/* layer_norm and rms_norm over the last axis, and their gradients.
 *
 * Row statistics (mean, 1/sqrt(variance + eps); the variance biased, as in PyTorch) accumulate in
 * double in a fixed order (`omp simd` lanes, then the lanes in order: vectorised, and the same for
 * every row and thread count) and come from one function for the forward and the backward pass,
 * so the backward's recomputation equals the forward bit for bit.
 *
 * The backward, where each of a few blocks of rows (tf_cpu_row_blocks, fixed by the shape) can keep
 * partial dgamma and dbeta sums, makes one pass per block: each row's statistics, its normalised x
 * (written into its dx row, read from there), its terms added to the block's partials in row order,
 * and its dx; the partials are then added in block order. Otherwise it runs in three parallel
 * phases: (1) over rows, the statistics of each row, kept in the first bytes of that row of dx
 * (which is written last); (2) over columns, dgamma and dbeta, each column summed over the rows in
 * order, so the result does not depend on the thread count and needs no per-thread partial rows;
 * (3) over rows, dx, reading the row's statistics back before overwriting them. Rows too short to
 * hold the statistics (fewer than 16 bytes; 8 for rms_norm) recompute them in phases 2 and 3
 * instead. dx must not alias x or dy (the op table declares no in-place
 * inputs for these ops). */
#include <string.h>

#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define COLUMN_TILE 256
#define PARTIALS 4096 /* row blocks' partial dgamma and dbeta sums (doubles, on the stack) */

typedef struct row_stats {
  double mean, rstd; /* rms_norm: mean is 0 */
} row_stats;

static row_stats layer_stats(const real *x, int64_t n, double epsilon) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; j++)
    sum += (double)x[j];
  const double mean = sum / (double)n;
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < n; j++) {
    const double centred = (double)x[j] - mean;
    squares += centred * centred;
  }
  row_stats s = {mean, 1.0 / sqrt(squares / (double)n + epsilon)};
  return s;
}

static row_stats rms_stats(const real *x, int64_t n, double epsilon) {
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < n; j++)
    squares += (double)x[j] * (double)x[j];
  row_stats s = {0.0, 1.0 / sqrt(squares / (double)n + epsilon)};
  return s;
}

static row_stats stats_of(const real *x, int64_t n, double epsilon, bool rms) {
  return rms ? rms_stats(x, n, epsilon) : layer_stats(x, n, epsilon);
}

/* (x - mean) rstd, centred in double: in f32, x - (float)mean would lose the low bits that matter
 * when a row's spread is small next to its mean. */
static inline real normalised(real x, row_stats s) { return (real)(((double)x - s.mean) * s.rstd); }

/* The element-wise loops of both passes are maps (each element, or each column's sum over the
 * rows, on its own), so they may take the wider clones, TF_CPU_VECTOR_CLONES, which give the same
 * bits on every machine. The row sums (layer_stats, gradient_sums) stay on the baseline: an omp simd
 * reduction's lane order follows the vector width. */

/* yr = xhat gamma (+ beta) over one row. */
TF_CPU_VECTOR_CLONES static void normalise_row(const real *xr, const real *gamma, const real *beta, row_stats s,
                                               int64_t n, real *yr) {
  if (beta) {
    for (int64_t j = 0; j < n; j++)
      yr[j] = normalised(xr[j], s) * gamma[j] + beta[j];
  } else {
    for (int64_t j = 0; j < n; j++)
      yr[j] = normalised(xr[j], s) * gamma[j];
  }
}

/* ---- forward ---- */

static void norm_forward(const tf_cpu_args *args, bool rms) {
  const tf_cpu_tensor *x = &args->inputs[0];
  const int64_t features = x->shape[x->rank - 1];
  if (features == 0 || x->count == 0)
    return;
  const int64_t rows = x->count / features;
  const real *in = x->data, *gamma = args->inputs[1].data;
  const real *beta = !rms && args->n_inputs > 2 ? args->inputs[2].data : NULL;
  real *out = args->outputs[0].data;
  const double epsilon = (double)args->attrs->u.norm.epsilon;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK), for (int64_t row = 0; row < rows; row++) {
        const real *xr = in + row * features;
        real *yr = out + row * features;
        normalise_row(xr, gamma, beta, stats_of(xr, features, epsilon, rms), features, yr);
      });
}

/* y = (x - mean) / sqrt(var + eps) * gamma [+ beta] */
void TF_REAL_NAME(tf_cpu_layer_norm)(const tf_cpu_args *args) { norm_forward(args, false); }
/* y = x / sqrt(mean(x^2) + eps) * gamma */
void TF_REAL_NAME(tf_cpu_rms_norm)(const tf_cpu_args *args) { norm_forward(args, true); }

/* ---- backward ---- */

/* Bytes of a row's statistics as kept in dx: layer_norm keeps mean and rstd, rms_norm rstd. */
static size_t kept_bytes(bool rms) { return rms ? sizeof(double) : 2 * sizeof(double); }

static void keep_stats(real *dx_row, row_stats s, bool rms) {
  if (rms)
    memcpy(dx_row, &s.rstd, sizeof(double));
  else
    memcpy(dx_row, &s, 2 * sizeof(double));
}

static row_stats kept_stats(const real *dx_row, bool rms) {
  row_stats s = {0.0, 0.0};
  if (rms)
    memcpy(&s.rstd, dx_row, sizeof(double));
  else
    memcpy(&s, dx_row, 2 * sizeof(double));
  return s;
}

/* xhat[j] = normalised(x[j]) over one row: what the three uses below read, computed once. */
TF_CPU_VECTOR_CLONES static void normalised_row(const real *xr, row_stats s, int64_t n, real *xhat) {
  for (int64_t j = 0; j < n; j++)
    xhat[j] = normalised(xr[j], s);
}

/* One row's terms of dgamma (dy xhat) and dbeta (dy), added to each column's sum. */
TF_CPU_VECTOR_CLONES static void add_column_terms(const real *xhat, const real *dyr, int64_t n, double *gamma_sum,
                                                  double *beta_sum) {
  for (int64_t j = 0; j < n; j++) {
    gamma_sum[j] += (double)(dyr[j] * xhat[j]);
    beta_sum[j] += (double)dyr[j];
  }
}

/* sum of g = dy gamma and of g xhat over a row, in double. Its own function because the parallel
 * loop that uses it is a macro argument (kernels/cpu/parallel.h), where a #pragma cannot stand. */
static void gradient_sums_of(const real *xhat, const real *dyr, const real *gamma, int64_t features, double *g_total,
                             double *gx_total) {
  double g_sum = 0, gx_sum = 0;
#pragma omp simd reduction(+ : g_sum, gx_sum)
  for (int64_t j = 0; j < features; j++) {
    const double g = (double)(dyr[j] * gamma[j]);
    g_sum += g;
    gx_sum += g * (double)xhat[j];
  }
  *g_total = g_sum;
  *gx_total = gx_sum;
}

/* dx of one row from its xhat (xhat may be dxr). */
TF_CPU_VECTOR_CLONES static void input_gradient_row_of(const real *xhat, const real *dyr, const real *gamma, real rstd,
                                                       real g_mean, real gx_mean, int64_t n, real *dxr) {
  for (int64_t j = 0; j < n; j++)
    dxr[j] = rstd * (dyr[j] * gamma[j] - g_mean - xhat[j] * gx_mean);
}

/* One row's dx, its xhat first written into dxr and read from there (so x is read once more, not
 * three times); with gamma_sum, the row's dgamma and dbeta terms are added to those column sums too.
 * With g = dy * gamma and xhat the normalised x,
 *   layer_norm: dx = rstd (g - mean(g) - xhat mean(g xhat))
 *   rms_norm:   dx = rstd (g - xhat mean(g xhat)),  xhat = x rstd */
static void row_gradient(const real *xr, const real *dyr, const real *gamma, row_stats s, int64_t features, bool rms,
                         double *gamma_sum, double *beta_sum, real *dxr) {
  normalised_row(xr, s, features, dxr);
  if (gamma_sum)
    add_column_terms(dxr, dyr, features, gamma_sum, beta_sum);
  double g_sum = 0, gx_sum = 0;
  gradient_sums_of(dxr, dyr, gamma, features, &g_sum, &gx_sum);
  const real g_mean = rms ? (real)0 : (real)(g_sum / (double)features), gx_mean = (real)(gx_sum / (double)features);
  input_gradient_row_of(dxr, dyr, gamma, (real)s.rstd, g_mean, gx_mean, features, dxr);
}

/* What phase 2 below reads: x, dy, and dx holding each row's statistics when `keep`. */
typedef struct norm_terms {
  const real *in, *dy;
  const real *dx;
  int64_t features;
  double epsilon;
  bool rms, keep;
} norm_terms;

/* gamma_sum[j] and beta_sum[j], j < count <= COLUMN_TILE: columns [first, first + count) of dy xhat
 * and of dy summed over `rows` rows, in row order, in double. */
static void column_terms(const norm_terms *t, int64_t rows, int64_t first, int64_t count, double *gamma_sum,
                         double *beta_sum) {
  real xhat[COLUMN_TILE];
  for (int64_t j = 0; j < count; j++)
    gamma_sum[j] = beta_sum[j] = 0;
  for (int64_t row = 0; row < rows; row++) {
    const real *xr = t->in + row * t->features + first, *dyr = t->dy + row * t->features + first;
    const row_stats s = t->keep ? kept_stats(t->dx + row * t->features, t->rms)
                                : stats_of(t->in + row * t->features, t->features, t->epsilon, t->rms);
    normalised_row(xr, s, count, xhat);
    add_column_terms(xhat, dyr, count, gamma_sum, beta_sum);
  }
}

/* dgamma[j] and dbeta[j] (when dbeta) from `blocks` row blocks' partial column sums, in block order. */
static void sum_partials(const double *gamma_partial, const double *beta_partial, int64_t blocks, int64_t features,
                         real *dgamma, real *dbeta) {
  for (int64_t j = 0; j < features; j++) {
    double gamma_sum = 0, beta_sum = 0;
    for (int64_t b = 0; b < blocks; b++) {
      gamma_sum += gamma_partial[b * features + j];
      beta_sum += beta_partial[b * features + j];
    }
    dgamma[j] = (real)gamma_sum;
    if (dbeta)
      dbeta[j] = (real)beta_sum;
  }
}

static void norm_backward(const tf_cpu_args *args, bool rms) {
  const tf_cpu_tensor *x = &args->inputs[0];
  const int64_t features = x->shape[x->rank - 1];
  real *dx = args->outputs[0].data, *dgamma = args->outputs[1].data;
  real *dbeta = !rms ? args->outputs[2].data : NULL;
  if (features == 0)
    return;
  const int64_t rows = x->count / features;
  const real *in = x->data, *gamma = args->inputs[1].data, *dy = args->inputs[2].data;
  const double epsilon = (double)args->attrs->u.norm.epsilon;
  const int threads = tf_cpu_threads(args);
  const bool parallel = x->count > TF_CPU_CHUNK;

  // Where the partial column sums of blocks of rows fit (tf_cpu_row_blocks), one pass per block:
  // each row's statistics, its dgamma and dbeta terms (added to the block's partials, rows in
  // order) and its dx.
  const int64_t blocks = tf_cpu_row_blocks(rows, features, 2, TF_CPU_CHUNK, PARTIALS);
  if (blocks > 1) {
    const int64_t block_rows = (rows + blocks - 1) / blocks;
    double gamma_partial[PARTIALS / 2], beta_partial[PARTIALS / 2];
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, parallel), for (int64_t b = 0; b < blocks; b++) {
          double *gamma_sum = gamma_partial + b * features, *beta_sum = beta_partial + b * features;
          for (int64_t j = 0; j < features; j++)
            gamma_sum[j] = beta_sum[j] = 0;
          const int64_t end = (b + 1) * block_rows < rows ? (b + 1) * block_rows : rows;
          for (int64_t row = b * block_rows; row < end; row++) {
            const real *xr = in + row * features;
            row_gradient(xr, dy + row * features, gamma, stats_of(xr, features, epsilon, rms), features, rms, gamma_sum,
                         beta_sum, dx + row * features);
          }
        });
    sum_partials(gamma_partial, beta_partial, blocks, features, dgamma, dbeta);
    return;
  }

  // Else three phases. (1) Each row's statistics, kept in the row's own dx.
  const bool keep = (size_t)features * sizeof(real) >= kept_bytes(rms);
  if (keep) {
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(threads, parallel), for (int64_t row = 0; row < rows; row++) {
          keep_stats(dx + row * features, stats_of(in + row * features, features, epsilon, rms), rms);
        });
  }

  // (2) dgamma = sum over rows of dy * xhat, dbeta = sum of dy: a tile of columns per task.
  const norm_terms terms = {in, dy, dx, features, epsilon, rms, keep};
  int64_t width = (features + threads - 1) / threads;
  width = width > COLUMN_TILE ? COLUMN_TILE : width;
  const int64_t tiles = (features + width - 1) / width;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(threads, parallel), for (int64_t tile = 0; tile < tiles; tile++) {
        const int64_t first = tile * width, count = features - first < width ? features - first : width;
        double gamma_sum[COLUMN_TILE], beta_sum[COLUMN_TILE];
        column_terms(&terms, rows, first, count, gamma_sum, beta_sum);
        for (int64_t j = 0; j < count; j++) {
          dgamma[first + j] = (real)gamma_sum[j];
          if (dbeta)
            dbeta[first + j] = (real)beta_sum[j];
        }
      });

  // (3) dx per row, reading the row's statistics back before overwriting them.
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(threads, parallel), for (int64_t row = 0; row < rows; row++) {
        const real *xr = in + row * features;
        real *dxr = dx + row * features;
        const row_stats s = keep ? kept_stats(dxr, rms) : stats_of(xr, features, epsilon, rms);
        row_gradient(xr, dy + row * features, gamma, s, features, rms, NULL, NULL, dxr);
      });
}

/* (x, gamma, dy) -> (dx, dgamma, dbeta) */
void TF_REAL_NAME(tf_cpu_layer_norm_grad)(const tf_cpu_args *args) { norm_backward(args, false); }
/* (x, gamma, dy) -> (dx, dgamma) */
void TF_REAL_NAME(tf_cpu_rms_norm_grad)(const tf_cpu_args *args) { norm_backward(args, true); }
