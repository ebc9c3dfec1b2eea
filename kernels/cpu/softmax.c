/* softmax and log_softmax along one axis, and their gradients.
 *
 * x is viewed as [outer, classes, inner] around the axis. When inner == 1 (the usual last axis)
 * each row is contiguous and one thread handles whole rows; otherwise a task takes a tile of up
 * to TILE neighbouring columns so that its reads along the axis stay contiguous. Sums accumulate
 * in double, each in a fixed order (a row's in `omp simd` lanes, then the lanes in order): results
 * do not depend on the thread count. The max is subtracted before exp, so no finite input
 * overflows; exp is kernels/cpu/vector_math.h's in f32, so the row loops vectorise. */
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define TILE 64

typedef struct geometry {
  int64_t outer, classes, inner;
} geometry;

static geometry geometry_of(const tf_cpu_tensor *x, int32_t axis) {
  if (axis < 0)
    axis += x->rank;
  geometry g = {1, x->shape[axis], 1};
  for (int32_t i = 0; i < axis; i++)
    g.outer *= x->shape[i];
  for (int32_t i = axis + 1; i < x->rank; i++)
    g.inner *= x->shape[i];
  return g;
}

/* ---- rows (inner == 1) ---- */

static void softmax_row(const real *x, real *y, int64_t n, bool log_output) {
  if (n < 1)
    return;
  real best = x[0];
  for (int64_t c = 1; c < n; c++)
    best = x[c] > best ? x[c] : best;
  double sum = 0;
  if (log_output) {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < n; c++)
      sum += (double)TF_CPU_VECTOR_EXP(x[c] - best);
    // (x - best) - log(sum), not x - (best + log(sum)): near-zero outputs keep their precision.
    const real log_sum = (real)log(sum);
    for (int64_t c = 0; c < n; c++)
      y[c] = (x[c] - best) - log_sum;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < n; c++) {
      y[c] = TF_CPU_VECTOR_EXP(x[c] - best);
      sum += (double)y[c];
    }
    const real total = (real)sum;
    for (int64_t c = 0; c < n; c++)
      y[c] /= total;
  }
}

static void softmax_grad_row(const real *y, const real *dy, real *dx, int64_t n, bool log_output) {
  double dot = 0;
  if (log_output) {
    for (int64_t c = 0; c < n; c++)
      dot += (double)dy[c];
    const real total = (real)dot;
#pragma omp simd
    for (int64_t c = 0; c < n; c++)
      dx[c] = dy[c] - TF_CPU_VECTOR_EXP(y[c]) * total;
  } else {
    for (int64_t c = 0; c < n; c++)
      dot += (double)dy[c] * (double)y[c];
    const real total = (real)dot;
    for (int64_t c = 0; c < n; c++)
      dx[c] = y[c] * (dy[c] - total);
  }
}

/* ---- tiles of columns (inner > 1): element (c, i) of a tile is at base[c * inner + i] ---- */

static void softmax_tile(const real *x, real *y, const geometry *g, int64_t width, bool log_output) {
  const int64_t inner = g->inner;
  real best[TILE];
  double sum[TILE];
  for (int64_t i = 0; i < width; i++) {
    best[i] = -INFINITY;
    sum[i] = 0;
  }
  for (int64_t c = 0; c < g->classes; c++)
    for (int64_t i = 0; i < width; i++)
      best[i] = x[c * inner + i] > best[i] ? x[c * inner + i] : best[i];
  for (int64_t c = 0; c < g->classes; c++)
    for (int64_t i = 0; i < width; i++)
      sum[i] += (double)TF_CPU_VECTOR_EXP(x[c * inner + i] - best[i]);
  if (log_output) {
    real log_sum[TILE];
    for (int64_t i = 0; i < width; i++)
      log_sum[i] = (real)log(sum[i]);
    for (int64_t c = 0; c < g->classes; c++)
      for (int64_t i = 0; i < width; i++)
        y[c * inner + i] = (x[c * inner + i] - best[i]) - log_sum[i];
  } else {
    real total[TILE];
    for (int64_t i = 0; i < width; i++)
      total[i] = (real)sum[i];
    for (int64_t c = 0; c < g->classes; c++)
      for (int64_t i = 0; i < width; i++)
        y[c * inner + i] = TF_CPU_VECTOR_EXP(x[c * inner + i] - best[i]) / total[i];
  }
}

static void softmax_grad_tile(const real *y, const real *dy, real *dx, const geometry *g, int64_t width,
                              bool log_output) {
  const int64_t inner = g->inner;
  double dot[TILE];
  real total[TILE];
  for (int64_t i = 0; i < width; i++)
    dot[i] = 0;
  for (int64_t c = 0; c < g->classes; c++)
    for (int64_t i = 0; i < width; i++)
      dot[i] += log_output ? (double)dy[c * inner + i] : (double)dy[c * inner + i] * (double)y[c * inner + i];
  for (int64_t i = 0; i < width; i++)
    total[i] = (real)dot[i];
  for (int64_t c = 0; c < g->classes; c++)
    for (int64_t i = 0; i < width; i++) {
      const int64_t at = c * inner + i;
      dx[at] = log_output ? dy[at] - TF_CPU_VECTOR_EXP(y[at]) * total[i] : y[at] * (dy[at] - total[i]);
    }
}

/* ---- drivers ---- */

static void softmax_run(const tf_cpu_args *args, bool log_output) {
  const tf_cpu_tensor *x = &args->inputs[0];
  const geometry g = geometry_of(x, args->attrs->u.axis.axis);
  const real *in = x->data;
  real *out = args->outputs[0].data;
  if (g.inner == 1) {
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK), for (int64_t row = 0; row < g.outer; row++) {
          softmax_row(in + row * g.classes, out + row * g.classes, g.classes, log_output);
        });
    return;
  }
  const int64_t tiles = (g.inner + TILE - 1) / TILE, tasks = g.outer * tiles;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK), for (int64_t task = 0; task < tasks; task++) {
        const int64_t o = task / tiles, first = (task % tiles) * TILE;
        const int64_t width = g.inner - first < TILE ? g.inner - first : TILE;
        const int64_t base = o * g.classes * g.inner + first;
        softmax_tile(in + base, out + base, &g, width, log_output);
      });
}

static void softmax_grad_run(const tf_cpu_args *args, bool log_output) {
  const tf_cpu_tensor *y = &args->inputs[0];
  const geometry g = geometry_of(y, args->attrs->u.axis.axis);
  const real *y_data = y->data, *dy = args->inputs[1].data;
  real *dx = args->outputs[0].data;
  if (g.inner == 1) {
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(tf_cpu_threads(args), y->count > TF_CPU_CHUNK), for (int64_t row = 0; row < g.outer; row++) {
          const int64_t base = row * g.classes;
          softmax_grad_row(y_data + base, dy + base, dx + base, g.classes, log_output);
        });
    return;
  }
  const int64_t tiles = (g.inner + TILE - 1) / TILE, tasks = g.outer * tiles;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), y->count > TF_CPU_CHUNK), for (int64_t task = 0; task < tasks; task++) {
        const int64_t o = task / tiles, first = (task % tiles) * TILE;
        const int64_t width = g.inner - first < TILE ? g.inner - first : TILE;
        const int64_t base = o * g.classes * g.inner + first;
        softmax_grad_tile(y_data + base, dy + base, dx + base, &g, width, log_output);
      });
}

void TF_REAL_NAME(tf_cpu_softmax)(const tf_cpu_args *args) { softmax_run(args, false); }
void TF_REAL_NAME(tf_cpu_log_softmax)(const tf_cpu_args *args) { softmax_run(args, true); }
/* dx = y (dy - sum(dy y)) */
void TF_REAL_NAME(tf_cpu_softmax_grad)(const tf_cpu_args *args) { softmax_grad_run(args, false); }
/* dx = dy - exp(y) sum(dy), y = log_softmax(x) */
void TF_REAL_NAME(tf_cpu_log_softmax_grad)(const tf_cpu_args *args) { softmax_grad_run(args, true); }
