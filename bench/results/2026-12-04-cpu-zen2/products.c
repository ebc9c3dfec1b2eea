#define _POSIX_C_SOURCE 200809L
#include "kernels/cpu/kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void tf_cpu_matmul_f32(const tf_cpu_args *args);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static void run(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads, const char *what) {
  float *a = malloc(4 * m * k), *b = malloc(4 * k * n), *c = malloc(4 * m * n);
  for (int64_t i = 0; i < m * k; i++)
    a[i] = (float)(i % 7) * 0.1f;
  for (int64_t i = 0; i < k * n; i++)
    b[i] = (float)(i % 5) * 0.1f;
  tf_attrs at;
  memset(&at, 0, sizeof at);
  at.kind = TF_ATTR_MATMUL;
  at.u.matmul.transpose_a = ta;
  at.u.matmul.transpose_b = tb;
  tf_cpu_tensor in[2], out[1];
  int64_t as[2] = {ta ? k : m, ta ? m : k}, bs[2] = {tb ? n : k, tb ? k : n}, cs[2] = {m, n};
  in[0] = tf_tensor_ref_make(a, TF_F32, 2, as);
  in[1] = tf_tensor_ref_make(b, TF_F32, 2, bs);
  out[0] = tf_tensor_ref_make(c, TF_F32, 2, cs);
  tf_cpu_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.threads = threads;
  tf_cpu_args args;
  memset(&args, 0, sizeof args);
  args.op = TF_OP_MATMUL;
  args.attrs = &at;
  args.n_inputs = 2;
  args.inputs = in;
  args.n_outputs = 1;
  args.outputs = out;
  args.context = &ctx;
  tf_cpu_matmul_f32(&args);
  double t = now();
  int reps = 20;
  for (int r = 0; r < reps; r++)
    tf_cpu_matmul_f32(&args);
  double dt = (now() - t) / reps;
  printf("%-28s T=%d %7.3f ms %6.1f GFLOP/s\n", what, threads, dt * 1e3, 2.0 * m * n * k / dt / 1e9);
  free(a);
  free(b);
  free(c);
}
int main(void) {
  for (int th = 1; th <= 2; th++) {
    run(2048, 128, 512, false, true, th, "dX=dY W^T [2048x512] k128");
    run(2048, 128, 512, false, false, th, "fc x W [2048x512] k128");
    run(2048, 128, 384, false, false, th, "qkv x W [2048x384] k128");
    run(2048, 512, 128, false, false, th, "proj x W [2048x128] k512");
    run(512, 2048, 128, true, false, th, "dW x^T dy [512x128] k2048");
  }
}
