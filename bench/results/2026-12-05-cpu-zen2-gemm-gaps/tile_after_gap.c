/* tightfit's own register tiles (kernels/cpu/tile.c, no OpenBLAS) on 256 x 512 x 128, eight calls after a
 * spin of GAP_S seconds, 20 times; with a third argument the spin reads A, B and C all along (their
 * lines stay cached). Built against build-rel's kernel library like
 * ../2026-12-04-cpu-zen2-attention/attention_ab.c: ./a.out GAP_S [touch] */
#define _POSIX_C_SOURCE 200809L
#include "kernels/cpu/tile.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void tf_cpu_tile_nn_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_row, int64_t a_col,
                        const float *b, int64_t ldb, tf_cpu_band band, bool accumulate, float *c, int64_t ldc);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
  double gap = atof(argv[1]);
  int M = 256, N = 512, K = 128;
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)K * N; i++)
    B[i] = (i % 5) * 0.1f;
  memset(C, 0, 4L * M * N);
  tf_cpu_band all = {TF_CPU_BAND_ALL, 0};
  double acc[8] = {0};
  for (int r = 0; r < 20; r++) {
    double t0 = now();
    if (argc > 2) {
      volatile float s = 0;
      while (now() - t0 < gap) {
        for (long i = 0; i < (long)M * K; i += 16)
          s += A[i];
        for (long i = 0; i < (long)K * N; i += 16)
          s += B[i];
        for (long i = 0; i < (long)M * N; i += 16)
          s += C[i];
      }
    } else
      while (now() - t0 < gap)
        ;
    for (int j = 0; j < 8; j++) {
      double t = now();
      tf_cpu_tile_nn_f32(M, N, K, 1, A, K, 1, B, N, all, false, C, N);
      acc[j] += now() - t;
    }
  }
  printf("gap %.0f ms%s: ", gap * 1e3, argc > 2 ? " touching A, B, C" : "");
  for (int j = 0; j < 8; j++)
    printf("%.3f ", acc[j] / 20 * 1e3);
  printf("ms\n");
}
