/* The exact GELU as kernels/cpu/elementwise.c computes it (gelu_erf, vector_math.h), 819,200 elements (one
 * [16, 100, 512] activation of the asr row), best of 30: the forward and the gradient as two kernels that
 * each evaluate it, against one pass writing y and dy/dx and a multiply for the gradient.
 * gcc -O2 -std=c11 -mavx2 -fopenmp -fno-trapping-math -fno-math-errno -ffp-contract=off -I. gelu_pair.c -lm
 * (from the repository root; the kernels' own flags, AVX2 as their avx2 clone) */
#define _POSIX_C_SOURCE 200809L
#include "kernels/cpu/vector_math.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define SQRT_HALF 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define AI static inline __attribute__((always_inline))
AI float gelu_erf(float x, float *derivative) {
  const float magnitude = x < 0 ? -x : x, gaussian = tf_cpu_math_exp(-0.5f * x * x);
  const float tail = tf_cpu_math_half_erfc(magnitude * (float)SQRT_HALF, gaussian);
  const float cdf = x < 0 ? tail : 1.0f - tail;
  *derivative = cdf + x * (float)INV_SQRT_2PI * gaussian;
  return x * cdf;
}
__attribute__((noinline)) void fwd(const float *x, float *y, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
    float d;
    y[i] = gelu_erf(x[i], &d);
  }
}
__attribute__((noinline)) void grad(const float *x, const float *dy, float *dx, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
    float d;
    gelu_erf(x[i], &d);
    dx[i] = dy[i] * d;
  }
}
__attribute__((noinline)) void pair(const float *x, float *y, float *dd, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
    float d;
    y[i] = gelu_erf(x[i], &d);
    dd[i] = d;
  }
}
__attribute__((noinline)) void mul(const float *dy, const float *d, float *dx, int64_t n) {
  _Pragma("omp simd") for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * d[i];
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main() {
  long n = 819200;
  float *x = aligned_alloc(64, 4 * n), *y = aligned_alloc(64, 4 * n), *dy = aligned_alloc(64, 4 * n),
        *dx = aligned_alloc(64, 4 * n), *d = aligned_alloc(64, 4 * n), *dx2 = aligned_alloc(64, 4 * n);
  for (long i = 0; i < n; i++) {
    x[i] = ((i * 7) % 1000) * 0.008f - 4;
    dy[i] = ((i * 3) % 17) * 0.1f;
  }
  double bf = 1e9, bg = 1e9, bp = 1e9, bm = 1e9;
  for (int r = 0; r < 30; r++) {
    double t = now();
    fwd(x, y, n);
    t = now() - t;
    if (t < bf)
      bf = t;
    t = now();
    grad(x, dy, dx, n);
    t = now() - t;
    if (t < bg)
      bg = t;
    t = now();
    pair(x, y, d, n);
    t = now() - t;
    if (t < bp)
      bp = t;
    t = now();
    mul(dy, d, dx2, n);
    t = now() - t;
    if (t < bm)
      bm = t;
  }
  long diff = 0;
  for (long i = 0; i < n; i++)
    diff += dx[i] != dx2[i];
  printf("gelu %.3f + gelu_grad %.3f = %.3f ms; pair %.3f + mul %.3f = %.3f ms; dx bits differing: %ld of %ld\n",
         bf * 1e3, bg * 1e3, (bf + bg) * 1e3, bp * 1e3, bm * 1e3, (bp + bm) * 1e3, diff, n);
}
