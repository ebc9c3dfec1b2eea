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
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), RT = atoi(argv[4]), CT = atoi(argv[5]);
  int tb = argc > 6 ? atoi(argv[6]) : 1;
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K), *C = malloc(sizeof(float) * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)N * K; i++)
    B[i] = (i % 5) * 0.1f;
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (int r = 0; r < M; r += RT)
      for (int c = 0; c < N; c += CT) {
        int m = M - r < RT ? M - r : RT, n = N - c < CT ? N - c : CT;
        if (tb)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, K, 1, A + (long)r * K, K, B + (long)c * K, K, 0,
                      C + (long)r * N + c, N);
        else
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, K, 1, A + (long)r * K, K, B + c, N, 0,
                      C + (long)r * N + c, N);
      }
    double t = now() - t0;
    if (t < best)
      best = t;
  }
  printf("M=%d N=%d K=%d tile %dx%d tb=%d: %.1f ms %.1f GFLOP/s\n", M, N, K, RT, CT, tb, best * 1e3,
         2.0 * M * N * K / best / 1e9);
}
