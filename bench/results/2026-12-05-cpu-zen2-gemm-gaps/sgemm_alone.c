/* One sgemm shape alone, best of 20 back-to-back calls: gcc -O2 sgemm_alone.c -lopenblas;
 * OPENBLAS_NUM_THREADS=1 ./a.out M N K [TRANSPOSE_A TRANSPOSE_B] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  int ta = argc > 4 ? atoi(argv[4]) : 0, tb = argc > 5 ? atoi(argv[5]) : 0;
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)K * N; i++)
    B[i] = (i % 5) * 0.1f;
  double best = 1e9;
  for (int r = 0; r < 20; r++) {
    double t = now();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.f, A,
                ta ? M : K, B, tb ? K : N, 0.f, C, N);
    t = now() - t;
    if (t < best)
      best = t;
  }
  printf("%d x %d x %d ta%d tb%d: %.3f ms %.1f GFLOP/s\n", M, N, K, ta, tb, best * 1e3, 2.0 * M * N * K / best / 1e9);
}
