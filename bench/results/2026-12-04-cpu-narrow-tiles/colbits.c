#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static float rnd(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return ((*s >> 8) / 16777216.0f) - 0.5f;
}
int main(int argc, char **argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), ta = argc > 4 ? atoi(argv[4]) : 0;
  unsigned s = 1;
  float *A = malloc(4L * M * K), *B = malloc(4L * N * K), *C1 = malloc(4L * M * N), *C2 = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = rnd(&s);
  for (long i = 0; i < (long)N * K; i++)
    B[i] = rnd(&s);
  int lda = ta ? M : K;
  for (int ct = 512; ct >= 16; ct /= 2) {
    for (int c = 0; c < N; c += 512) {
      int n = N - c < 512 ? N - c : 512;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, M, n, K, 1, A, lda, B + c, N, 0, C1 + c,
                  N);
    }
    for (int c = 0; c < N; c += ct) {
      int n = N - c < ct ? N - c : ct;
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, M, n, K, 1, A, lda, B + c, N, 0, C2 + c,
                  N);
    }
    long diff = 0;
    for (long i = 0; i < (long)M * N; i++)
      diff += memcmp(&C1[i], &C2[i], 4) != 0;
    printf("M=%d N=%d K=%d ta=%d col %d vs 512: %ld differ\n", M, N, K, ta, ct, diff);
  }
}
