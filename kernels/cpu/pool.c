/* 2-D pooling and its gradients over NCHW planes: max_pool2d (padding counts as -inf, so a window
 * takes the maximum of its real elements; the shape rule keeps padding <= kernel/2, so every window
 * holds one) and avg_pool2d (divides by the whole window, padding included: count_include_pad).
 *
 * Each thread owns whole (n, c) planes, so gradients scatter without races, in a fixed order. */
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

void TF_REAL_NAME(tf_cpu_max_pool2d)(const tf_cpu_args *args) {
  pooling p = pooling_of(args, &args->inputs[0], &args->outputs[0]);
  const real *x = args->inputs[0].data;
  real *y = args->outputs[0].data;
  if (p.height == 0 || p.width == 0) { // windows of padding only: no element to take
    memset(y, 0, sizeof(real) * (size_t)args->outputs[0].count);
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
