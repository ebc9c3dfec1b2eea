#define _POSIX_C_SOURCE 200809L
#include "kernels/cpu/kernels.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void tf_cpu_sum_to_f32(const tf_cpu_args *args);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static void run(int64_t rows, int64_t cols, int threads, int produce) {
  float *dy = malloc(4 * rows * cols), *y = malloc(4 * cols), *like = malloc(4 * cols);
  for (int64_t i = 0; i < rows * cols; i++)
    dy[i] = (float)(i % 11) * 0.1f;
  int64_t s2[2] = {rows, cols}, s1[1] = {cols};
  tf_cpu_tensor in[2] = {tf_tensor_ref_make(dy, TF_F32, 2, s2), tf_tensor_ref_make(like, TF_F32, 1, s1)};
  tf_cpu_tensor out = tf_tensor_ref_make(y, TF_F32, 1, s1);
  tf_attrs at;
  memset(&at, 0, sizeof at);
  tf_cpu_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.threads = threads;
  tf_cpu_args a = {
      .op = TF_OP_SUM_TO, .attrs = &at, .n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = &out, .context = &ctx};
  double best = 1e9, total = 0;
  for (int r = 0; r < 200; r++) {
    if (produce) { /* the producer's split: contiguous row halves per thread, as an element-wise op writes them */
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t i = 0; i < rows * cols; i++)
        dy[i] = dy[i] * 0.5f + 1.0f;
    }
    double t = now();
    tf_cpu_sum_to_f32(&a);
    double e = now() - t;
    total += e;
    if (e < best)
      best = e;
  }
  printf("sum_to [%ld x %ld] T=%d %s: best %.1f us, mean %.1f us   y0 %.6g\n", (long)rows, (long)cols, threads,
         produce ? "after a producer" : "warm", best * 1e6, total / 200 * 1e6, y[0]);
}
int main(void) {
  for (int p = 0; p < 2; p++)
    for (int t = 1; t <= 2; t++) {
      run(2048, 128, t, p);
      run(2048, 512, t, p);
      run(2048, 384, t, p);
    }
}
