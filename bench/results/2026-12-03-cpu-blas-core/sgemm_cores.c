#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
extern char *openblas_get_corename(void);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int c, char **v) {
  int M = atoi(v[1]), N = atoi(v[2]), K = atoi(v[3]);
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)K * N; i++)
    B[i] = (i % 5) * 0.1f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, K, B, N, 0, C, N);
  double t = now();
  int r = 10;
  for (int i = 0; i < r; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, K, B, N, 0, C, N);
  t = (now() - t) / r;
  printf("%s %dx%dx%d %.1f GFLOP/s\n", openblas_get_corename(), M, N, K, 2.0 * M * N * K / t / 1e9);
}
