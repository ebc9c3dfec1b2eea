#include "kernels/cpu/gemm.h"
#include "kernels/cpu/tile.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
  int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), form = atoi(argv[4]);
  int reps = atoi(argv[5]);
  int ld = 256;
  float *A = malloc(4L * 1024 * ld), *B = malloc(4L * 1024 * ld), *C = malloc(4L * 1024 * ld);
  for (long i = 0; i < 1024L * ld; i++) {
    A[i] = 1e-3f * (i % 97);
    B[i] = 1e-3f * (i % 89);
  }
  tf_cpu_band all = {TF_CPU_BAND_ALL, 0};
  double bt = 1e9, bb = 1e9;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) {
      if (form == 0)
        tf_cpu_tile_nt_f32(m, n, k, 1, A, ld, B, ld, all, false, C, ld);
      else if (form == 1)
        tf_cpu_tile_nn_f32(m, n, k, 1, A, ld, 1, B, ld, all, false, C, ld);
      else
        tf_cpu_tile_nn_f32(m, n, k, 1, A, 1, ld, B, ld, all, true, C, ld);
    }
    double t1 = now();
    for (int i = 0; i < reps; i++) {
      if (form == 0)
        tf_cpu_gemm(false, true, m, n, k, 1, A, ld, B, ld, 0, C, ld);
      else if (form == 1)
        tf_cpu_gemm(false, false, m, n, k, 1, A, ld, B, ld, 0, C, ld);
      else
        tf_cpu_gemm(true, false, m, n, k, 1, A, ld, B, ld, 1, C, ld);
    }
    double t2 = now();
    if (t1 - t0 < bt)
      bt = t1 - t0;
    if (t2 - t1 < bb)
      bb = t2 - t1;
  }
  printf("%s %dx%dx%d: tile %.2f GFLOP/s  blas %.2f GFLOP/s\n",
         form == 0   ? "nt"
         : form == 1 ? "nn"
                     : "tn",
         m, n, k, 2.0 * m * n * k * reps / bt * 1e-9, 2.0 * m * n * k * reps / bb * 1e-9);
}
