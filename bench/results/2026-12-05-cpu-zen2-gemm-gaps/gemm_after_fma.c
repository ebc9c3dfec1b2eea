/* The same sgemm six times after a gap spent in a register-only loop: 8 independent ymm FMA chains
 * (kind 1) or 4 xmm mul+add chains (kind 0). gcc -O2 gemm_after_fma.c -lopenblas; ./a.out GAP_S KIND */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
__attribute__((target("avx2,fma"))) static float keeper(double secs, int kind) {
  __m256 a0 = _mm256_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
         m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  __m128 s0 = _mm_set1_ps(1), s1 = s0, s2 = s0, s3 = s0;
  __m128 sm = _mm_set1_ps(0.9999999f), sc = _mm_set1_ps(1e-7f);
  double t0 = now();
  while (now() - t0 < secs) {
    for (int i = 0; i < 1000; i++) {
      if (kind == 1) {
        a0 = _mm256_fmadd_ps(a0, m, c);
        a1 = _mm256_fmadd_ps(a1, m, c);
        a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c);
        a4 = _mm256_fmadd_ps(a4, m, c);
        a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c);
        a7 = _mm256_fmadd_ps(a7, m, c);
      } else {
        s0 = _mm_add_ps(_mm_mul_ps(s0, sm), sc);
        s1 = _mm_add_ps(_mm_mul_ps(s1, sm), sc);
        s2 = _mm_add_ps(_mm_mul_ps(s2, sm), sc);
        s3 = _mm_add_ps(_mm_mul_ps(s3, sm), sc);
      }
    }
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  return _mm256_cvtss_f32(s) + _mm_cvtss_f32(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
}
int main(int argc, char **argv) {
  int M = 1600, N = 512, K = 128;
  double gap = atof(argv[1]);
  int kind = atoi(argv[2]);
  float *A = malloc(4L * M * K), *B = malloc(4L * K * N), *C = malloc(4L * M * N);
  for (long i = 0; i < (long)M * K; i++)
    A[i] = (i % 7) * 0.1f;
  for (long i = 0; i < (long)K * N; i++)
    B[i] = (i % 5) * 0.1f;
  memset(C, 0, 4L * M * N);
  double acc[6] = {0};
  float z = 0;
  for (int r = 0; r < 20; r++) {
    z += keeper(gap, kind);
    for (int j = 0; j < 6; j++) {
      double t = now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.f, A, K, B, K, 0.f, C, N);
      acc[j] += now() - t;
    }
  }
  printf("gap %.0f ms keeper %s: ", gap * 1e3, kind == 1 ? "ymm FMA x8" : "xmm mul+add x4");
  for (int j = 0; j < 6; j++)
    printf("%.2f ", acc[j] / 20 * 1e3);
  printf(" ms (%g)\n", z);
}
