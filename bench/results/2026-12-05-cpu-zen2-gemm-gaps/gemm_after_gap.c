/* A 1600 x 512 x 128 sgemm (OpenBLAS, one thread) eight times in a row after a gap of idle_us
 * microseconds (spin: on the clock; else nanosleep), 20 times: the mean time of the 1st..8th call.
 * gcc -O2 gemm_after_gap.c -lopenblas; OPENBLAS_NUM_THREADS=1 ./a.out 1600 512 128 IDLE_US SPIN */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  long idle_us = atol(argv[4]);
  int spin = atoi(argv[5]);
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)K * N; i++)
    B[i] = (i % 5) * 0.1f;
  memset(C, 0, 4L * M * N);
  double acc[8] = {0};
  for (int r = 0; r < 20; r++) {
    if (spin) {
      double t0 = now();
      while (now() - t0 < idle_us * 1e-6)
        ;
    } else {
      struct timespec ts = {idle_us / 1000000, (idle_us % 1000000) * 1000};
      nanosleep(&ts, 0);
    }
    for (int j = 0; j < 8; j++) {
      double t = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, A, K, B, K, 0.f, C, N);
      acc[j] += now() - t;
    }
  }
  printf("idle %ld us spin %d: ", idle_us, spin);
  for (int j = 0; j < 8; j++)
    printf("%.2f ", acc[j] / 20 * 1e3);
  printf(" ms\n");
}
