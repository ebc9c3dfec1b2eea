/* Throughput of the dense f32 kernels: GFLOP/s of a 512x512x512 matmul, a linear layer, conv2d
 * [8,64,32,32] * [64,64,3,3] (padding 1) forward and backward, and causal attention forward and
 * backward. Each kernel runs a few times; the best time counts.
 *
 * usage: dense_bench [THREADS] (default 2) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense_harness.h"
#include "kernels/cpu/list.h"

#define REPEATS 11

static tf_cpu_tensor make(int32_t rank, const int64_t *shape, tf_dtype dtype) {
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.dtype = dtype;
  t.rank = rank;
  t.count = 1;
  for (int32_t i = 0; i < rank; i++)
    t.shape[i] = shape[i], t.count *= shape[i];
  float *data = aligned_alloc(64, (size_t)(t.count * 4 + 63) / 64 * 64);
  for (int64_t i = 0; i < t.count; i++)
    data[i] = (float)((i * 7919 % 1000) / 1000.0 - 0.5);
  t.data = data;
  return t;
}

#define MAKE(...) make(DENSE_RANK(__VA_ARGS__), (const int64_t[]){__VA_ARGS__}, TF_F32)

static void bench(const char *label, tf_op op, tf_attrs attrs, tf_cpu_tensor *in, int32_t n_in, tf_cpu_tensor *out,
                  int32_t n_out, double flops, int32_t threads) {
  int64_t bytes = tf_cpu_workspace_bytes(op, &attrs, n_in, in, n_out, out, threads, 4);
  void *workspace = bytes ? aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64) : NULL;
  tf_cpu_context context = {.threads = threads, .optimizer_step = 1, .seed = 1};
  tf_cpu_args args = {.op = op,
                      .attrs = &attrs,
                      .n_inputs = n_in,
                      .inputs = in,
                      .n_outputs = n_out,
                      .outputs = out,
                      .workspace = workspace,
                      .workspace_bytes = bytes,
                      .context = &context};
  tf_cpu_kernel kernel = dense_kernel(op, false);
  double best = 1e30;
  for (int r = 0; r < REPEATS; r++) {
    double start = omp_get_wtime();
    kernel(&args);
    double elapsed = omp_get_wtime() - start;
    best = elapsed < best ? elapsed : best;
  }
  printf("%-52s %8.3f ms %7.1f GFLOP/s  workspace %.2f MiB\n", label, best * 1e3, flops / best * 1e-9,
         (double)bytes / (1 << 20));
  free(workspace);
}

static void release(tf_cpu_tensor *ts, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    free(ts[i].data);
}

int main(int argc, char **argv) {
  dense_setup();
  int32_t threads = argc > 1 ? atoi(argv[1]) : 2;
  printf("dense kernels, f32, %d threads (BLAS single-threaded inside)\n", threads);

  tf_cpu_tensor mm[3] = {MAKE(512, 512), MAKE(512, 512), MAKE(512, 512)};
  bench("matmul 512x512x512", TF_OP_MATMUL, dense_matmul_attrs(false, false), mm, 2, &mm[2], 1, 2.0 * 512 * 512 * 512,
        threads);
  release(mm, 3);
  tf_cpu_tensor lin[3] = {MAKE(8, 256, 768), MAKE(768, 3072), MAKE(8, 256, 3072)};
  bench("linear x[8,256,768] W[768,3072]", TF_OP_MATMUL, dense_matmul_attrs(false, false), lin, 2, &lin[2], 1,
        2.0 * 2048 * 768 * 3072, threads);
  release(lin, 3);

  tf_attrs conv = dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0);
  double conv_flops = 2.0 * 8 * 64 * 32 * 32 * 64 * 9;
  tf_cpu_tensor fwd[3] = {MAKE(8, 64, 32, 32), MAKE(64, 64, 3, 3), MAKE(8, 64, 32, 32)};
  bench("conv2d x[8,64,32,32] w[64,64,3,3] p1", TF_OP_CONV2D, conv, fwd, 2, &fwd[2], 1, conv_flops, threads);
  tf_cpu_tensor gi[4] = {fwd[2], fwd[1], fwd[0], MAKE(8, 64, 32, 32)};
  bench("conv2d_grad_input  (same shapes)", TF_OP_CONV2D_GRAD_INPUT, conv, gi, 3, &gi[3], 1, conv_flops, threads);
  tf_cpu_tensor gw[4] = {fwd[0], fwd[2], fwd[1], MAKE(64, 64, 3, 3)};
  bench("conv2d_grad_weight (same shapes)", TF_OP_CONV2D_GRAD_WEIGHT, conv, gw, 3, &gw[3], 1, conv_flops, threads);
  release(fwd, 3);
  free(gi[3].data);
  free(gw[3].data);

  tf_attrs causal = dense_attention_attrs(8, true, 0);
  double attention_flops = 4.0 * 8 * 8 * 512 * 512 * 64 / 2; // QKᵀ and PV, half the keys on average
  tf_cpu_tensor at[8] = {MAKE(8, 512, 512), MAKE(8, 512, 512), MAKE(8, 512, 512), MAKE(8, 512, 512),
                         MAKE(8, 512, 512), MAKE(8, 512, 512), MAKE(8, 512, 512), MAKE(8, 512, 512)};
  bench("attention N8 T512 H8 D64 causal", TF_OP_ATTENTION, causal, at, 3, &at[4], 1, attention_flops, threads);
  bench("attention_grad (same shapes)", TF_OP_ATTENTION_GRAD, causal, at, 4, &at[5], 3, attention_flops * 2.5, threads);
  release(at, 8);
  return 0;
}
