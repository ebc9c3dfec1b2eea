#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static char *junk;
static size_t junkn = (size_t)64 << 20;
static void flush(void) {
  for (size_t i = 0; i < junkn; i += 64)
    junk[i]++;
}
int main(void) {
  junk = calloc(junkn, 1);
  const int m = 2048, k = 128, n = 512;
  float *a = malloc(4L * m * k), *b = malloc(4L * k * n), *c = malloc(4L * m * n);
  for (long i = 0; i < (long)m * k; i++)
    a[i] = 0.01f * (i % 13);
  for (long i = 0; i < (long)k * n; i++)
    b[i] = 0.02f * (i % 11);
  memset(c, 0, 4L * m * n);
  int tiles[] = {256, 128, 64};
  for (int th = 1; th <= 2; th++)
    for (int ti = 0; ti < 3; ti++) {
      int tile = tiles[ti];
      double tot = 0;
      int reps = 20;
      for (int r = 0; r < reps; r++) {
        flush();
        double t = now();
#pragma omp parallel for num_threads(th) schedule(dynamic)
        for (int row = 0; row < m; row += tile)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tile, n, k, 1.0f, a + (long)row * k, k, b, n, 0.0f,
                      c + (long)row * n, n);
        tot += now() - t;
      }
      printf("T=%d tile %3d: %.3f ms  %.1f GFLOP/s (cold C)\n", th, tile, tot / reps * 1e3,
             2.0 * m * n * k / (tot / reps) / 1e9);
    }
  return 0;
}
