/* max_pool2d and max_pool2d_grad against a plain reference written here, element for element: the
 * first maximum of each window in row-major order, the first NaN winning, and the gradient 0 + dy
 * to that element only (so dy = -0 arrives as +0). The inputs are drawn from {-1, -0, 0, 1} with
 * some NaN and infinities, so most windows hold several maxima. It covers the 2x2 stride-2 loops
 * kernels/cpu/pool.c keeps for halving (even and odd image sizes) and the general loop, in f32 and
 * f64, on 1 and 2 threads. The f64 build is no independent reference here: it runs the same code. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/kernels.h"

typedef struct pool_case {
  const char *name;
  int64_t shape[4]; /* N, C, H, W */
  int32_t kernel, stride, padding;
} pool_case;

static uint64_t state = 12345;

static double draw(void) {
  state = state * 6364136223846793005u + 1442695040888963407u;
  static const double values[] = {-1, -0.0, 0, 1, 1, -1, 0, 1, -1, 0.5, INFINITY, -INFINITY, NAN};
  return values[(state >> 33) % 13]; // 1 NaN in 13
}

static int64_t output_size(int64_t size, const pool_case *k) {
  return (size + 2 * k->padding - k->kernel) / k->stride + 1;
}

/* The reference: index in the plane of window (oh, ow)'s first maximum, the first NaN winning. */
static int64_t first_maximum(const double *plane, int64_t height, int64_t width, const pool_case *k, int64_t oh,
                             int64_t ow) {
  int64_t best = -1;
  for (int64_t h = oh * k->stride - k->padding; h < oh * k->stride - k->padding + k->kernel; h++)
    for (int64_t w = ow * k->stride - k->padding; w < ow * k->stride - k->padding + k->kernel; w++) {
      if (h < 0 || h >= height || w < 0 || w >= width)
        continue;
      const int64_t at = h * width + w;
      if (isnan(plane[at]))
        return at;
      if (best < 0 || plane[at] > plane[best])
        best = at;
    }
  return best;
}

static void *to_buffer(const double *values, int64_t n, bool f64) {
  void *buffer = malloc((size_t)n * (f64 ? 8 : 4));
  for (int64_t i = 0; i < n; i++) {
    if (f64)
      ((double *)buffer)[i] = values[i];
    else
      ((float *)buffer)[i] = (float)values[i];
  }
  return buffer;
}

static double at(const void *buffer, int64_t i, bool f64) {
  return f64 ? ((const double *)buffer)[i] : (double)((const float *)buffer)[i];
}

/* The same number, NaN for NaN, and the same sign of zero. */
static bool same(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

static tf_cpu_tensor tensor(void *data, const int64_t *shape) {
  tf_cpu_tensor t = {.data = data, .dtype = TF_F32, .rank = 4, .count = 1};
  for (int i = 0; i < 4; i++)
    t.shape[i] = shape[i], t.count *= shape[i];
  return t;
}

static void check_case(tf_test_counts *c, const pool_case *k, bool f64, int32_t threads) {
  const int64_t n = k->shape[0] * k->shape[1], height = k->shape[2], width = k->shape[3];
  const int64_t out_shape[4] = {k->shape[0], k->shape[1], output_size(height, k), output_size(width, k)};
  const int64_t plane = height * width, out_plane = out_shape[2] * out_shape[3];
  double *x = malloc(sizeof(double) * (size_t)(n * plane)), *dy = malloc(sizeof(double) * (size_t)(n * out_plane));
  for (int64_t i = 0; i < n * plane; i++)
    x[i] = draw();
  for (int64_t i = 0; i < n * out_plane; i++)
    dy[i] = i % 7 == 3 ? -0.0 : (double)(i % 5) - 2.5;

  void *xb = to_buffer(x, n * plane, f64), *dyb = to_buffer(dy, n * out_plane, f64);
  void *yb = malloc((size_t)(n * out_plane) * (f64 ? 8 : 4)), *dxb = malloc((size_t)(n * plane) * (f64 ? 8 : 4));
  memset(yb, 0xFF, (size_t)(n * out_plane) * (f64 ? 8 : 4)); // NaN: every element must be written
  memset(dxb, 0xFF, (size_t)(n * plane) * (f64 ? 8 : 4));
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  for (int i = 0; i < 2; i++)
    attrs.u.pool.kernel[i] = k->kernel, attrs.u.pool.stride[i] = k->stride, attrs.u.pool.padding[i] = k->padding;
  tf_cpu_context context = {.threads = threads};
  tf_cpu_tensor in[2] = {tensor(xb, k->shape), tensor(dyb, out_shape)}, y = tensor(yb, out_shape),
                dx = tensor(dxb, k->shape);
  tf_cpu_args forward = {.op = TF_OP_MAX_POOL2D,
                         .attrs = &attrs,
                         .n_inputs = 1,
                         .inputs = in,
                         .n_outputs = 1,
                         .outputs = &y,
                         .context = &context};
  tf_cpu_args backward = {.op = TF_OP_MAX_POOL2D_GRAD,
                          .attrs = &attrs,
                          .n_inputs = 2,
                          .inputs = in,
                          .n_outputs = 1,
                          .outputs = &dx,
                          .context = &context};
  tf_cpu_kernel_get(TF_OP_MAX_POOL2D, f64)(&forward);
  tf_cpu_kernel_get(TF_OP_MAX_POOL2D_GRAD, f64)(&backward);

  int64_t y_wrong = 0, dx_wrong = 0, nans = 0;
  for (int64_t p = 0; p < n; p++) {
    double *expected_dx = calloc((size_t)plane, sizeof(double));
    for (int64_t oh = 0; oh < out_shape[2]; oh++)
      for (int64_t ow = 0; ow < out_shape[3]; ow++) {
        const int64_t best = first_maximum(x + p * plane, height, width, k, oh, ow), o = oh * out_shape[3] + ow;
        nans += isnan(x[p * plane + best]);
        y_wrong += !same(at(yb, p * out_plane + o, f64), x[p * plane + best]);
        expected_dx[best] += dy[p * out_plane + o];
      }
    for (int64_t i = 0; i < plane; i++)
      dx_wrong += !same(at(dxb, p * plane + i, f64), expected_dx[i]);
    free(expected_dx);
  }
  printf("%-4s %-30s [%lld,%lld,%lld,%lld] %s %d thread(s): %lld NaN windows, %lld y and %lld dx elements differ\n",
         y_wrong || dx_wrong ? "FAIL" : "ok", k->name, (long long)k->shape[0], (long long)k->shape[1],
         (long long)height, (long long)width, f64 ? "f64" : "f32", threads, (long long)nans, (long long)y_wrong,
         (long long)dx_wrong);
  CHECK(c, y_wrong == 0, "%s %s: %lld max_pool2d outputs differ from the first maximum", k->name, f64 ? "f64" : "f32",
        (long long)y_wrong);
  CHECK(c, dx_wrong == 0, "%s %s: %lld max_pool2d_grad elements differ", k->name, f64 ? "f64" : "f32",
        (long long)dx_wrong);
  CHECK(c, nans > 0, "%s: the inputs gave no window a NaN to propagate", k->name);
  free(x), free(dy), free(xb), free(dyb), free(yb), free(dxb);
}

int main(void) {
  static const pool_case cases[] = {
      {"k2 s2 (halving), 4 a row", {3, 5, 8, 8}, 2, 2, 0},    // the cnn's first pooling
      {"k2 s2 (halving), 2 a row", {2, 40, 4, 4}, 2, 2, 0},   // 160 row pairs: several blocks
      {"k2 s2 (halving), 8 a row", {2, 3, 6, 16}, 2, 2, 0},   // the last constant width
      {"k2 s2 (halving), 3 a row", {4, 9, 8, 6}, 2, 2, 0},    // any other width
      {"k2 s2 (halving), 2x2 image", {4, 16, 2, 2}, 2, 2, 0}, // one window a plane
      {"k2 s2 (halving), odd sizes", {2, 3, 9, 7}, 2, 2, 0},  // plane by plane, last row and column zero
      {"k3 s2 p1 (general)", {2, 3, 9, 7}, 3, 2, 1},          // clipped windows
      {"k2 s1 (general)", {2, 3, 6, 5}, 2, 1, 0},             // overlapping windows
  };

  tf_test_counts counts = {0, 0};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (int f64 = 0; f64 <= 1; f64++)
      for (int32_t threads = 1; threads <= 2; threads++)
        check_case(&counts, &cases[i], f64, threads);
  return tf_test_finish("test_pool_windows", &counts);
}
