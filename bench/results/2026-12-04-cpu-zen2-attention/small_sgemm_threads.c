#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), calls = 200000;
  for (int threads = 1; threads <= 2; threads++) {
    double t = now();
#pragma omp parallel num_threads(threads)
    {
      float *a = calloc(m * k, 4), *b = calloc(k * n, 4), *c = calloc(m * n, 4);
#pragma omp for schedule(static)
      for (int i = 0; i < calls; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
      free(a);
      free(b);
      free(c);
    }
    double e = now() - t;
    printf("%dx%dx%d T=%d: %.2f us per call (%.1f GFLOP/s total)\n", m, n, k, threads, e / calls * 1e6,
           2.0 * m * n * k * calls / e / 1e9);
  }
}
