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
  int R = 256, V = 50257, D = 768, CS = atoi(argv[1]), FS = atoi(argv[2]);
  float *x = malloc(4L * R * D), *W = malloc(4L * V * D), *L = malloc(4L * R * V), *dx = malloc(4L * R * D),
        *dW = malloc(4L * V * D);
  for (long i = 0; i < (long)R * D; i++)
    x[i] = (i % 7) * 0.01f;
  for (long i = 0; i < (long)V * D; i++)
    W[i] = (i % 5) * 0.01f;
  for (long i = 0; i < (long)R * V; i++)
    L[i] = (i % 3) * 0.01f;
  for (int rep = 0; rep < 2; rep++) {
    double t0 = now();
    for (int b = 0; b < V; b += CS) {
      int e = b + CS < V ? b + CS : V;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, e - b, D, 1, x, D, W + (long)b * D, D, 0, L + b, V);
    }
    double t1 = now();
    for (int b = 0; b < D; b += FS) {
      int e = b + FS < D ? b + FS : D;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, e - b, V, 1, L, V, W + b, D, 0, dx + b, D);
    }
    double t2 = now();
    for (int b = 0; b < V; b += CS) {
      int e = b + CS < V ? b + CS : V;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, e - b, D, R, 1, L + b, V, x, D, 1, dW + (long)b * D, D);
    }
    double t3 = now();
    double f = 2.0 * R * V * D / 1e9;
    if (rep)
      printf("CS=%d FS=%d logits %.1f ms %.0f GF/s; dx %.1f ms %.0f; dW %.1f ms %.0f\n", CS, FS, (t1 - t0) * 1e3,
             f / (t1 - t0), (t2 - t1) * 1e3, f / (t2 - t1), (t3 - t2) * 1e3, f / (t3 - t2));
  }
}
