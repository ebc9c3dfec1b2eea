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
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K), *C = malloc(sizeof(float) * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)N * K; i++)
    B[i] = (i % 5) * 0.1f;
  int rts[] = {256, 128, 64}, cts[] = {512, 256, 128, 64};
  printf("M=%d N=%d K=%d:", M, N, K);
  for (int ri = 0; ri < 3; ri++)
    for (int ci = 0; ci < 4; ci++) {
      int RT = rts[ri], CT = cts[ci];
      double best = 1e9;
      long reps = (long)(2e8 / (2.0 * M * N * K)) + 1;
      for (int rep = 0; rep < 7; rep++) {
        double t0 = now();
        for (long q = 0; q < reps; q++)
          for (int r = 0; r < M; r += RT)
            for (int c = 0; c < N; c += CT) {
              int m = M - r < RT ? M - r : RT, n = N - c < CT ? N - c : CT;
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, K, 1, A + (long)r * K, K, B + c, N, 0,
                          C + (long)r * N + c, N);
            }
        double t = (now() - t0) / reps;
        if (t < best)
          best = t;
      }
      printf(" %dx%d:%.0f", RT, CT, 2.0 * M * N * K / best / 1e9);
    }
  printf("\n");
}
