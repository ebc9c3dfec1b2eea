/* f32 against f64: every dense kernel runs in f32 (2 threads, as the CPU backend would) and in f64
 * (1 thread) on the same inputs, which are f32 values so both see exactly the same numbers. The
 * error max |y32 - y64| / max |y64| of every output must stay under the op's stated tolerance:
 * a few units of f32 rounding (6e-8) times the growth of the longest sum in the op. */
#include <math.h>
#include <stdio.h>

#include "dense_harness.h"

static dense_rng rng = {77};

static dense_tensor random_f32(int32_t rank, const int64_t *shape, double low, double high) {
  dense_tensor t = dense_random(&rng, rank, shape, low, high);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = (double)(float)t.values[i];
  return t;
}

#define R(low, high, ...) random_f32(DENSE_RANK(__VA_ARGS__), (const int64_t[]){__VA_ARGS__}, low, high)

/* Runs `op` in both precisions and checks each output against `tolerance`; frees `inputs`. */
static void compare(tf_test_counts *c, const char *label, tf_op op, tf_attrs attrs, dense_tensor *inputs, int32_t n,
                    double tolerance) {
  dense_tensor wide[TF_MAX_OUTPUTS], narrow[TF_MAX_OUTPUTS];
  int32_t k = dense_call(c, op, &attrs, true, 1, inputs, n, wide);
  if (k > 0 && dense_call(c, op, &attrs, false, 2, inputs, n, narrow) == k) {
    for (int32_t i = 0; i < k; i++) {
      double error = dense_relative_error(&narrow[i], &wide[i], 1e-30);
      printf("%-4s %-22s %-46s output %d %-14s error %.2e (tolerance %.0e)\n", error < tolerance ? "ok" : "FAIL",
             tf_op_name(op), label, i, dense_shape_text(&wide[i], 0), error, tolerance);
      CHECK(c, error < tolerance, "%s %s output %d: f32 error %.3e >= %.0e", tf_op_name(op), label, i, error,
            tolerance);
    }
    dense_free_all(narrow, k);
  }
  if (k > 0)
    dense_free_all(wide, k);
  dense_free_all(inputs, n);
}

static void compare_matmuls(tf_test_counts *c) {
  // Tolerance 5e-6 for every op that sums products: about 10x the largest error seen (5e-7).
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    dense_tensor in[2] = {ta ? R(-1, 1, 4, 129, 37) : R(-1, 1, 4, 37, 129), tb ? R(-1, 1, 65, 129) : R(-1, 1, 129, 65)};
    compare(c, ta ? "linear layer, a transposed" : "linear layer (one gemm)", TF_OP_MATMUL, dense_matmul_attrs(ta, tb),
            in, 2, 5e-6);
    dense_tensor bc[2] = {ta ? R(-1, 1, 3, 1, 257, 33) : R(-1, 1, 3, 1, 33, 257),
                          tb ? R(-1, 1, 2, 17, 257) : R(-1, 1, 2, 257, 17)};
    compare(c, "broadcast batch", TF_OP_MATMUL, dense_matmul_attrs(ta, tb), bc, 2, 5e-6);
  }
  dense_tensor big[2] = {R(-1, 1, 300, 301), R(-1, 1, 301, 299)};
  compare(c, "300x301x299 (split over threads)", TF_OP_MATMUL, dense_matmul_attrs(false, false), big, 2, 5e-6);
}

static void compare_convolutions(tf_test_counts *c) {
  // Tolerance: sums of C/g x KH x KW (up to 576) products, and N x positions terms for weight grads.
  tf_attrs a = dense_conv_attrs(1, 2, 1, 2, 1, 2, 2, 0, 0);
  dense_tensor fwd[3] = {R(-1, 1, 4, 16, 23, 19), R(-1, 1, 32, 8, 3, 3), R(-1, 1, 32)};
  compare(c, "x[4,16,23,19] w[32,8,3,3] g2 d(1,2)", TF_OP_CONV2D, a, fwd, 3, 5e-6);
  dense_tensor gi[3] = {R(-1, 1, 4, 32, 23, 10), R(-1, 1, 32, 8, 3, 3), R(0, 0, 4, 16, 23, 19)};
  compare(c, "x[4,16,23,19] w[32,8,3,3] g2 d(1,2)", TF_OP_CONV2D_GRAD_INPUT, a, gi, 3, 5e-6);
  dense_tensor gw[3] = {R(-1, 1, 4, 16, 23, 19), R(-1, 1, 4, 32, 23, 10), R(0, 0, 32, 8, 3, 3)};
  compare(c, "x[4,16,23,19] w[32,8,3,3] g2 d(1,2)", TF_OP_CONV2D_GRAD_WEIGHT, a, gw, 3, 5e-6);

  tf_attrs big = dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0); // 576 x 2304 columns: 3 position blocks
  dense_tensor bf[2] = {R(-1, 1, 2, 64, 48, 48), R(-1, 1, 8, 64, 3, 3)};
  compare(c, "x[2,64,48,48] w[8,64,3,3] (3 blocks)", TF_OP_CONV2D, big, bf, 2, 5e-6);
  dense_tensor bi[3] = {R(-1, 1, 2, 8, 48, 48), R(-1, 1, 8, 64, 3, 3), R(0, 0, 2, 64, 48, 48)};
  compare(c, "x[2,64,48,48] w[8,64,3,3] (3 blocks)", TF_OP_CONV2D_GRAD_INPUT, big, bi, 3, 5e-6);
  dense_tensor bw[3] = {R(-1, 1, 2, 64, 48, 48), R(-1, 1, 2, 8, 48, 48), R(0, 0, 8, 64, 3, 3)};
  compare(c, "x[2,64,48,48] w[8,64,3,3] (3 blocks)", TF_OP_CONV2D_GRAD_WEIGHT, big, bw, 3, 5e-6);

  tf_attrs one = dense_conv_attrs(2, 0, 2, 0, 2, 0, 3, 0, 0);
  dense_tensor f1[3] = {R(-1, 1, 4, 12, 101), R(-1, 1, 24, 4, 5), R(-1, 1, 24)};
  compare(c, "x[4,12,101] w[24,4,5] s2 p2 d2 g3", TF_OP_CONV1D, one, f1, 3, 5e-6);
  dense_tensor i1[3] = {R(-1, 1, 4, 24, 49), R(-1, 1, 24, 4, 5), R(0, 0, 4, 12, 101)};
  compare(c, "x[4,12,101] w[24,4,5] s2 p2 d2 g3", TF_OP_CONV1D_GRAD_INPUT, one, i1, 3, 5e-6);
  dense_tensor w1[3] = {R(-1, 1, 4, 12, 101), R(-1, 1, 4, 24, 49), R(0, 0, 24, 4, 5)};
  compare(c, "x[4,12,101] w[24,4,5] s2 p2 d2 g3", TF_OP_CONV1D_GRAD_WEIGHT, one, w1, 3, 5e-6);

  tf_attrs t = dense_conv_attrs(2, 2, 1, 1, 1, 1, 2, 1, 1);
  dense_tensor ct[3] = {R(-1, 1, 2, 16, 9, 11), R(-1, 1, 16, 8, 4, 4), R(-1, 1, 16)};
  compare(c, "x[2,16,9,11] w[16,8,4,4] s2 p1 op1 g2", TF_OP_CONV_TRANSPOSE2D, t, ct, 3, 5e-6);
}

static void compare_pools(tf_test_counts *c) {
  // max pooling picks an input exactly; average pooling sums 9 terms.
  tf_attrs a = dense_pool_attrs(3, 3, 2, 2, 1, 1);
  dense_tensor mx[1] = {R(-1, 1, 4, 8, 17, 19)};
  compare(c, "x[4,8,17,19] k3 s2 p1", TF_OP_MAX_POOL2D, a, mx, 1, 1e-12);
  dense_tensor av[1] = {R(-1, 1, 4, 8, 17, 19)};
  compare(c, "x[4,8,17,19] k3 s2 p1", TF_OP_AVG_POOL2D, a, av, 1, 1e-6);
  dense_tensor mg[2] = {R(-1, 1, 4, 8, 17, 19), R(-1, 1, 4, 8, 9, 10)};
  compare(c, "x[4,8,17,19] k3 s2 p1", TF_OP_MAX_POOL2D_GRAD, a, mg, 2, 1e-6);
  dense_tensor ag[2] = {R(-1, 1, 4, 8, 9, 10), R(0, 0, 4, 8, 17, 19)};
  compare(c, "x[4,8,17,19] k3 s2 p1", TF_OP_AVG_POOL2D_GRAD, a, ag, 2, 1e-6);
}

static void compare_attention(tf_test_counts *c, bool causal) {
  // Tolerance: softmax over 90 keys, dot products of D = 16, and sums over 70 query rows for dk/dv.
  tf_attrs a = dense_attention_attrs(4, causal, 0);
  const char *label = causal ? "N2 Tq70 Tk90 H4 D16 causal" : "N2 Tq70 Tk90 H4 D16";
  dense_tensor f[3] = {R(-2, 2, 2, 70, 64), R(-2, 2, 2, 90, 64), R(-1, 1, 2, 90, 64)};
  compare(c, label, TF_OP_ATTENTION, a, f, 3, 5e-6);
  dense_tensor g[4] = {R(-2, 2, 2, 70, 64), R(-2, 2, 2, 90, 64), R(-1, 1, 2, 90, 64), R(-1, 1, 2, 70, 64)};
  compare(c, label, TF_OP_ATTENTION_GRAD, a, g, 4, 5e-6);
}

static void compare_embedding(tf_test_counts *c) {
  dense_tensor ids = dense_random_ids(&rng, TF_I64, 2, (int64_t[]){8, 33}, -3, 53);
  dense_tensor f[2] = {dense_copy(&ids), R(-1, 1, 50, 64)};
  compare(c, "ids[8,33] i64 V50 D64", TF_OP_EMBEDDING, dense_no_attrs(), f, 2, 1e-12); // a copy: exact
  dense_tensor g[3] = {ids, R(-1, 1, 8, 33, 64), R(0, 0, 50, 64)};
  compare(c, "ids[8,33] i64 V50 D64", TF_OP_EMBEDDING_GRAD, dense_no_attrs(), g, 3, 1e-6);
}

int main(void) {
  dense_setup();
  tf_test_counts counts = {0, 0};
  compare_matmuls(&counts);
  compare_convolutions(&counts);
  compare_pools(&counts);
  compare_attention(&counts, false);
  compare_attention(&counts, true);
  compare_embedding(&counts);
  return tf_test_finish("test_dense_precision", &counts);
}
