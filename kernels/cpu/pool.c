/* 2-D pooling and its gradients over NCHW planes: max_pool2d (padding counts as -inf, so a window
 * takes the maximum of its real elements; the shape rule keeps padding <= kernel/2, so every window
 * holds one) and avg_pool2d (divides by the whole window, padding included: count_include_pad).
 *
 * Each thread owns whole (n, c) planes, so gradients scatter without races, in a fixed order.
 *
 * max pooling of 2x2 windows at stride 2 without padding (the usual halving) has its own loops
 * (halve, halve_grad): no window is clipped and none overlap, so the first maximum is found with
 * selects, the gradient writes each element of dx once (no zeroing pass), and the loops run over
 * whole row pairs of the tensor rather than window by window. The same results, bit for bit, as the
 * general loops (tests/ops_dense/test_pool_windows.c). */
#include <string.h>

#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

typedef struct pooling {
  int64_t planes, height, width, out_height, out_width;
  int64_t kernel[2], stride[2], padding[2];
} pooling;

static pooling pooling_of(const tf_cpu_args *args, const tf_cpu_tensor *x, const tf_cpu_tensor *y) {
  const tf_pool_attrs *a = &args->attrs->u.pool;
  pooling p = {x->shape[0] * x->shape[1], x->shape[2], x->shape[3], y->shape[2], y->shape[3], {0}, {0}, {0}};
  for (int i = 0; i < 2; i++)
    p.kernel[i] = a->kernel[i], p.stride[i] = a->stride[i], p.padding[i] = a->padding[i];
  return p;
}

static int threads_of(const tf_cpu_args *args) { return args->context->threads > 0 ? args->context->threads : 1; }

/* The window of output (oh, ow), clipped to the image: rows [*h0, *h1), columns [*w0, *w1). */
static void window(const pooling *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
  int64_t top = oh * p->stride[0] - p->padding[0], left = ow * p->stride[1] - p->padding[1];
  *h0 = top > 0 ? top : 0;
  *h1 = top + p->kernel[0] < p->height ? top + p->kernel[0] : p->height;
  *w0 = left > 0 ? left : 0;
  *w1 = left + p->kernel[1] < p->width ? left + p->kernel[1] : p->width;
}

/* The index in `plane` of the first maximum (row-major) of window (oh, ow); the first NaN wins, so
 * NaN propagates as in PyTorch. The window is never empty (see above, and the empty-image check). */
static inline int64_t first_maximum(const pooling *p, const real *plane, int64_t oh, int64_t ow) {
  int64_t h0, h1, w0, w1;
  window(p, oh, ow, &h0, &h1, &w0, &w1);
  int64_t best = h0 * p->width + w0;
  real best_value = plane[best];
  if (isnan(best_value))
    return best;
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      const int64_t at = h * p->width + w;
      const real value = plane[at];
      if (value > best_value)
        best = at, best_value = value;
      else if (isnan(value)) // a NaN compares false: it is the first NaN, which wins
        return at;
    }
  return best;
}

/* 2x2 windows at stride 2, no padding: every window lies inside the image, no two overlap. */
static bool halving(const pooling *p) {
  return p->kernel[0] == 2 && p->kernel[1] == 2 && p->stride[0] == 2 && p->stride[1] == 2 && p->padding[0] == 0 &&
         p->padding[1] == 0;
}

/* Whether `later` replaces `first` as the first maximum of the two, in that order: it is larger, or
 * it is the first NaN (first_maximum's rule). A 2x2 window's first maximum is the first of its two
 * rows' firsts, since the whole top row comes before the bottom row. */
static inline bool replaces(real first, real later) { return later > first || (later != later && first == first); }

/* Row pairs [0, rows) of an image `width` wide, into rows of `count` windows: out[r][ow] = the first
 * maximum of window (r, ow). */
static inline void halve_rows(const real *restrict in, real *restrict out, int64_t width, int64_t count, int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    const real *top = in + 2 * r * width, *bottom = top + width;
    for (int64_t ow = 0; ow < count; ow++) {
      const real a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
      const real upper = replaces(a, b) ? b : a, lower = replaces(c, d) ? d : c;
      out[r * count + ow] = replaces(upper, lower) ? lower : upper;
    }
  }
}

/* The gradient of halve_rows: each window's dy to its first maximum, 0 to the other three. */
static inline void halve_rows_grad(const real *restrict in, const real *restrict dy, real *restrict dx, int64_t width,
                                   int64_t count, int64_t rows) {
  for (int64_t r = 0; r < rows; r++) {
    const real *top = in + 2 * r * width, *bottom = top + width;
    real *d_top = dx + 2 * r * width, *d_bottom = d_top + width;
    for (int64_t ow = 0; ow < count; ow++) {
      const real a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
      const real g = dy[r * count + ow] + (real)0; // what the general loop's 0 + dy gives: -0 becomes +0
      // Selects between values only, no bool temporaries: GCC then keeps the loop free of branches
      // (the first maxima of random data mispredict half the time).
      const real upper = replaces(a, b) ? b : a, lower = replaces(c, d) ? d : c;
      const real g_upper = replaces(upper, lower) ? 0 : g, g_lower = replaces(upper, lower) ? g : 0;
      const real ga = replaces(a, b) ? 0 : g_upper, gb = replaces(a, b) ? g_upper : 0;
      const real gc = replaces(c, d) ? 0 : g_lower, gd = replaces(c, d) ? g_lower : 0;
      d_top[2 * ow] = ga;
      d_top[2 * ow + 1] = gb;
      d_bottom[2 * ow] = gc;
      d_bottom[2 * ow + 1] = gd;
    }
  }
}

/* Runs CALL with `windows_` = count, a constant for the usual widths: the window loop of a row then
 * unrolls and vectorises without a loop of its own (a row of the cnn's images has 2 or 4 windows). */
#define WITH_WINDOWS(count, CALL)                                                                                      \
  switch (count) {                                                                                                     \
  case 2: {                                                                                                            \
    const int64_t windows_ = 2;                                                                                        \
    CALL;                                                                                                              \
  } break;                                                                                                             \
  case 4: {                                                                                                            \
    const int64_t windows_ = 4;                                                                                        \
    CALL;                                                                                                              \
  } break;                                                                                                             \
  case 8: {                                                                                                            \
    const int64_t windows_ = 8;                                                                                        \
    CALL;                                                                                                              \
  } break;                                                                                                             \
  default: {                                                                                                           \
    const int64_t windows_ = count;                                                                                    \
    CALL;                                                                                                              \
  } break;                                                                                                             \
  }

#define ROW_BLOCK 64 /* row pairs per task when the planes are cut across */

/* Halving max pooling. With an even height and width the planes' row pairs follow one another, so
 * the whole tensor is one run of row pairs, cut in blocks, and a row is 2 x its windows wide (both
 * constants for the usual widths); otherwise each plane is its own run (and its gradient's last row
 * or column, under no window, is zeroed first). */
static void halve(const pooling *p, const real *x, real *y, int threads) {
  const int64_t width = p->width, count = p->out_width;
  if (p->height % 2 == 0 && width % 2 == 0) {
    const int64_t rows = p->planes * p->out_height, blocks = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
    TF_CPU_PARALLEL_FOR(
        threads, for (int64_t block = 0; block < blocks; block++) {
          const int64_t first = block * ROW_BLOCK, n = rows - first < ROW_BLOCK ? rows - first : ROW_BLOCK;
          WITH_WINDOWS(count, halve_rows(x + 2 * first * width, y + first * count, 2 * windows_, windows_, n));
        });
    return;
  }
  TF_CPU_PARALLEL_FOR(
      threads, for (int64_t plane = 0; plane < p->planes; plane++) {
        halve_rows(x + plane * p->height * width, y + plane * p->out_height * count, width, count, p->out_height);
      });
}

static void halve_grad(const pooling *p, const real *x, const real *dy, real *dx, int threads) {
  const int64_t width = p->width, count = p->out_width;
  if (p->height % 2 == 0 && width % 2 == 0) {
    const int64_t rows = p->planes * p->out_height, blocks = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
    TF_CPU_PARALLEL_FOR(
        threads, for (int64_t block = 0; block < blocks; block++) {
          const int64_t first = block * ROW_BLOCK, n = rows - first < ROW_BLOCK ? rows - first : ROW_BLOCK;
          WITH_WINDOWS(count, halve_rows_grad(x + 2 * first * width, dy + first * count, dx + 2 * first * width,
                                              2 * windows_, windows_, n));
        });
    return;
  }
  TF_CPU_PARALLEL_FOR(
      threads, for (int64_t plane = 0; plane < p->planes; plane++) {
        const int64_t image = plane * p->height * width;
        memset(dx + image, 0, sizeof(real) * (size_t)(p->height * width));
        halve_rows_grad(x + image, dy + plane * p->out_height * count, dx + image, width, count, p->out_height);
      });
}

void TF_REAL_NAME(tf_cpu_max_pool2d)(const tf_cpu_args *args) {
  pooling p = pooling_of(args, &args->inputs[0], &args->outputs[0]);
  const real *x = args->inputs[0].data;
  real *y = args->outputs[0].data;
  if (p.height == 0 || p.width == 0) { // windows of padding only: no element to take
    memset(y, 0, sizeof(real) * (size_t)args->outputs[0].count);
    return;
  }
  if (halving(&p)) {
    halve(&p, x, y, threads_of(args));
    return;
  }
  TF_CPU_PARALLEL_FOR(
      threads_of(args), for (int64_t plane = 0; plane < p.planes; plane++) {
        const real *in = x + plane * p.height * p.width;
        real *out = y + plane * p.out_height * p.out_width;
        for (int64_t oh = 0; oh < p.out_height; oh++)
          for (int64_t ow = 0; ow < p.out_width; ow++)
            out[oh * p.out_width + ow] = in[first_maximum(&p, in, oh, ow)];
      });
}

void TF_REAL_NAME(tf_cpu_avg_pool2d)(const tf_cpu_args *args) {
  pooling p = pooling_of(args, &args->inputs[0], &args->outputs[0]);
  const real *x = args->inputs[0].data;
  real *y = args->outputs[0].data;
  real scale = (real)1 / (real)(p.kernel[0] * p.kernel[1]);
  TF_CPU_PARALLEL_FOR(
      threads_of(args), for (int64_t plane = 0; plane < p.planes; plane++) {
        const real *in = x + plane * p.height * p.width;
        real *out = y + plane * p.out_height * p.out_width;
        for (int64_t oh = 0; oh < p.out_height; oh++)
          for (int64_t ow = 0; ow < p.out_width; ow++) {
            int64_t h0, h1, w0, w1;
            window(&p, oh, ow, &h0, &h1, &w0, &w1);
            real sum = 0;
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++)
                sum += in[h * p.width + w];
            out[oh * p.out_width + ow] = sum * scale;
          }
      });
}

/* max_pool2d_grad(x, dy) -> dx: each dy to the first maximum of its window. */
void TF_REAL_NAME(tf_cpu_max_pool2d_grad)(const tf_cpu_args *args) {
  pooling p = pooling_of(args, &args->inputs[0], &args->inputs[1]);
  const real *x = args->inputs[0].data, *dy = args->inputs[1].data;
  real *dx = args->outputs[0].data;
  if (p.height == 0 || p.width == 0)
    return;
  if (halving(&p)) {
    halve_grad(&p, x, dy, dx, threads_of(args));
    return;
  }
  TF_CPU_PARALLEL_FOR(
      threads_of(args), for (int64_t plane = 0; plane < p.planes; plane++) {
        const real *in = x + plane * p.height * p.width;
        const real *d_out = dy + plane * p.out_height * p.out_width;
        real *d_in = dx + plane * p.height * p.width;
        memset(d_in, 0, sizeof(real) * (size_t)(p.height * p.width));
        for (int64_t oh = 0; oh < p.out_height; oh++)
          for (int64_t ow = 0; ow < p.out_width; ow++)
            d_in[first_maximum(&p, in, oh, ow)] += d_out[oh * p.out_width + ow];
      });
}

/* avg_pool2d_grad(dy, x (shape)) -> dx: each dy spread evenly over its whole window. */
void TF_REAL_NAME(tf_cpu_avg_pool2d_grad)(const tf_cpu_args *args) {
  pooling p = pooling_of(args, &args->outputs[0], &args->inputs[0]);
  const real *dy = args->inputs[0].data;
  real *dx = args->outputs[0].data;
  real scale = (real)1 / (real)(p.kernel[0] * p.kernel[1]);
  TF_CPU_PARALLEL_FOR(
      threads_of(args), for (int64_t plane = 0; plane < p.planes; plane++) {
        const real *d_out = dy + plane * p.out_height * p.out_width;
        real *d_in = dx + plane * p.height * p.width;
        memset(d_in, 0, sizeof(real) * (size_t)(p.height * p.width));
        for (int64_t oh = 0; oh < p.out_height; oh++)
          for (int64_t ow = 0; ow < p.out_width; ow++) {
            int64_t h0, h1, w0, w1;
            window(&p, oh, ow, &h0, &h1, &w0, &w1);
            real share = d_out[oh * p.out_width + ow] * scale;
            for (int64_t h = h0; h < h1; h++)
              for (int64_t w = w0; w < w1; w++)
                d_in[h * p.width + w] += share;
          }
      });
}
