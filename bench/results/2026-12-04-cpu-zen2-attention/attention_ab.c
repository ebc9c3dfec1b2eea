#define _POSIX_C_SOURCE 200809L
#include "core/workspace_cpu.h"
#include "kernels/cpu/kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
void tf_cpu_attention_f32(const tf_cpu_args *args);
void tf_cpu_attention_grad_f32(const tf_cpu_args *args);
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static float *filled(int64_t n, int seed) {
  float *p = aligned_alloc(64, ((4 * n + 63) / 64) * 64);
  for (int64_t i = 0; i < n; i++)
    p[i] = (float)((i * 7 + seed) % 13) * 0.05f - 0.3f;
  return p;
}
static void run(int64_t B, int64_t T, int64_t H, int64_t D, int threads, bool causal) {
  int64_t E = H * D, n = B * T * E;
  float *q = filled(n, 1), *k = filled(n, 2), *v = filled(n, 3), *dy = filled(n, 4), *y = filled(n, 0),
        *dq = filled(n, 0), *dk = filled(n, 0), *dv = filled(n, 0);
  tf_attrs at;
  memset(&at, 0, sizeof at);
  at.kind = TF_ATTR_ATTENTION;
  at.u.attention.num_heads = H;
  at.u.attention.causal = causal;
  int64_t shape[3] = {B, T, E};
  tf_cpu_tensor in[4], out[3];
  float *ins[4] = {q, k, v, dy}, *outs[3] = {dq, dk, dv};
  for (int i = 0; i < 4; i++)
    in[i] = tf_tensor_ref_make(ins[i], TF_F32, 3, shape);
  for (int i = 0; i < 3; i++)
    out[i] = tf_tensor_ref_make(outs[i], TF_F32, 3, shape);
  tf_cpu_tensor yout = tf_tensor_ref_make(y, TF_F32, 3, shape);
  tf_cpu_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.threads = threads;
  tf_tensor_ref refs[4];
  for (int i = 0; i < 4; i++)
    refs[i] = in[i];
  int64_t wf = tf_cpu_workspace_bytes(TF_OP_ATTENTION, &at, 3, refs, 1, &yout, threads, 4);
  int64_t wg = tf_cpu_workspace_bytes(TF_OP_ATTENTION_GRAD, &at, 4, refs, 3, out, threads, 4);
  void *ws = aligned_alloc(64, ((wg > wf ? wg : wf) + 63) / 64 * 64);
  tf_cpu_args f = {.op = TF_OP_ATTENTION,
                   .attrs = &at,
                   .n_inputs = 3,
                   .inputs = in,
                   .n_outputs = 1,
                   .outputs = &yout,
                   .workspace = ws,
                   .workspace_bytes = wf,
                   .context = &ctx};
  tf_cpu_args g = {.op = TF_OP_ATTENTION_GRAD,
                   .attrs = &at,
                   .n_inputs = 4,
                   .inputs = in,
                   .n_outputs = 3,
                   .outputs = out,
                   .workspace = ws,
                   .workspace_bytes = wg,
                   .context = &ctx};
  tf_cpu_attention_f32(&f);
  tf_cpu_attention_grad_f32(&g);
  double best_f = 1e9, best_g = 1e9;
  for (int r = 0; r < 15; r++) {
    double t = now();
    tf_cpu_attention_f32(&f);
    double t2 = now();
    tf_cpu_attention_grad_f32(&g);
    double t3 = now();
    if (t2 - t < best_f)
      best_f = t2 - t;
    if (t3 - t2 < best_g)
      best_g = t3 - t2;
  }
  double flop = 2.0 * B * H * T * T * D; /* one full product */
  double sum = 0;
  for (int64_t i = 0; i < n; i++)
    sum += y[i] + dq[i] + dk[i] + dv[i];
  printf("B%ld T%ld H%ld D%ld thr%d  fwd %.3f ms (%.1f GF/s dense-equiv)  grad %.3f ms (%.1f)  check %.6e\n", (long)B,
         (long)T, (long)H, (long)D, threads, best_f * 1e3, 2 * flop / best_f / 1e9, best_g * 1e3,
         4 * flop / best_g / 1e9, sum);
}
int main(int argc, char **argv) {
  int th = argc > 1 ? atoi(argv[1]) : 1;
  run(32, 64, 4, 32, th, true);
  run(16, 100, 4, 32, th, false);
  run(16, 128, 4, 32, th, false);
  run(2, 128, 12, 64, th, true);
}
