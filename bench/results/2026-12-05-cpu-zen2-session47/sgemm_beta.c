#include <cblas.h>
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
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  int ta = atoi(argv[4]), tb = atoi(argv[5]);
  int reps = atoi(argv[6]);
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = 1e-3f * (i % 97);
  for (long i = 0; i < (long)K * N; i++)
    B[i] = 1e-3f * (i % 89);
  memset(C, 0, 4L * M * N);
  int lda = ta ? M : K, ldb = tb ? K : N;
  double b0 = 1e9, b1 = 1e9;
  for (int r = 0; r < 4; r++) {
    double t0 = now();
    for (int i = 0; i < reps; i++)
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1, A, lda, B,
                  ldb, 0, C, N);
    double t1 = now();
    for (int i = 0; i < reps; i++) {
      memset(C, 0, 4L * M * N);
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1, A, lda, B,
                  ldb, 1, C, N);
    }
    double t2 = now();
    if (t1 - t0 < b0)
      b0 = t1 - t0;
    if (t2 - t1 < b1)
      b1 = t2 - t1;
  }
  printf("%dx%dx%d ta%d tb%d: beta0 %.3f ms  memset+beta1 %.3f ms  ratio %.3f\n", M, N, K, ta, tb, b0 / reps * 1e3,
         b1 / reps * 1e3, b1 / b0);
}
