#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
  int ta = atoi(argv[1]), tb = atoi(argv[2]), M = atoi(argv[3]), N = atoi(argv[4]), K = atoi(argv[5]);
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K), *C = malloc(sizeof(float) * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)N * K; i++)
    B[i] = (i % 5) * 0.1f;
  int lda = ta ? M : K, ldb = tb ? K : N;
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1, A, lda, B,
                ldb, 0, C, N);
    double t = now() - t0;
    if (t < best)
      best = t;
  }
  printf("ta=%d tb=%d M=%d N=%d K=%d: %.1f ms %.1f GFLOP/s\n", ta, tb, M, N, K, best * 1e3,
         2.0 * M * N * K / best / 1e9);
}
