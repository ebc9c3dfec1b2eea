/* Per-op parity of the Vulkan backend against the CPU f32 kernels. Each case is a small graph whose
 * floating operands are parameters: its inference plan checks the op's forward output, its training
 * plan (loss = sum(op(...) x probe), probe random) the gradients its backward ops produce. Sizes are
 * awkward on purpose: 1, primes, not multiples of the workgroup or tile sizes. Runs under the
 * validation layer; prints SKIP and exits 77 without a Vulkan device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/vulkan/vulkan.h"
#include "op_graphs.h"
#include "parity.h"

static tf_test_counts counts;

/* Tolerances, stated per family: elementwise math is within a few ulps of the CPU's libm; sums
 * and products add in another order (tree or tile order), so their error grows with the terms. */
static const parity_tolerance EXACT = {1e-6, 1e-6};
static const parity_tolerance MATH = {2e-6, 2e-5};
static const parity_tolerance SUMS = {1e-5, 1e-4};

static void run(const char *label, tf_graph *g, parity_data data, parity_tolerance tolerance) {
  if (!g)
    return;
  const struct tf_status_s *error = tf_graph_status(g);
  CHECK(&counts, error == NULL, "%s: %s", label, tf_status_message(error));
  if (!error)
    parity_check_graph(&counts, label, g, &data, tolerance);
  tf_graph_destroy(g);
}

static const parity_data FLOATS = {1, 0, INT32_MIN};

static void test_matmul(void) {
  struct {
    const char *label;
    tf_shape a, b;
    bool ta, tb;
  } cases[] = {
      {"matmul [13,67]x[67,29]", TF_SHAPE(d(13), d(67)), TF_SHAPE(d(67), d(29)), false, false},
      {"matmul A^T [67,13]", TF_SHAPE(d(67), d(13)), TF_SHAPE(d(67), d(29)), true, false},
      {"matmul B^T [29,67]", TF_SHAPE(d(13), d(67)), TF_SHAPE(d(29), d(67)), false, true},
      {"matmul A^T B^T", TF_SHAPE(d(67), d(13)), TF_SHAPE(d(29), d(67)), true, true},
      {"matmul [1,1]x[1,1]", TF_SHAPE(d(1), d(1)), TF_SHAPE(d(1), d(1)), false, false},
      {"matmul batched [3,13,67]x[3,67,29]", TF_SHAPE(d(3), d(13), d(67)), TF_SHAPE(d(3), d(67), d(29)), false, false},
      {"matmul linear [2,3,13,5]x[5,7]", TF_SHAPE(d(2), d(3), d(13), d(5)), TF_SHAPE(d(5), d(7)), false, false},
      {"matmul broadcast [1,3,13,5]x[2,1,5,7]", TF_SHAPE(d(1), d(3), d(13), d(5)), TF_SHAPE(d(2), d(1), d(5), d(7)),
       false, false},
      {"matmul broadcast A^T [3,5,13]x[5,7]", TF_SHAPE(d(3), d(5), d(13)), TF_SHAPE(d(5), d(7)), true, false},
      {"matmul [131,257]x[257,65]", TF_SHAPE(d(131), d(257)), TF_SHAPE(d(257), d(65)), false, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "matmul");
    tf_test_finish_probe(g, tf_matmul(g, tf_test_param(g, "a", cases[i].a), tf_test_param(g, "b", cases[i].b),
                                      cases[i].ta, cases[i].tb));
    run(cases[i].label, g, FLOATS, SUMS);
  }
}

static void test_binary(void) {
  const tf_op ops[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    char label[64];
    snprintf(label, sizeof(label), "%s [5,7,3] (+) [7,1]", tf_op_name(ops[i]));
    tf_graph *g = tf_test_graph_begin(&counts, "binary");
    tf_tensor_id a = tf_test_param(g, "a", TF_SHAPE(d(5), d(7), d(3)));
    tf_tensor_id b = ops[i] == TF_OP_DIV ? tf_test_positive(g, "b", TF_SHAPE(d(7), d(1)))
                                         : tf_test_param(g, "b", TF_SHAPE(d(7), d(1)));
    tf_tensor_id y = ops[i] == TF_OP_ADD   ? tf_add(g, a, b)
                     : ops[i] == TF_OP_SUB ? tf_sub(g, a, b)
                     : ops[i] == TF_OP_MUL ? tf_mul(g, a, b)
                                           : tf_div(g, a, b);
    tf_test_finish_probe(g, y);
    run(label, g, FLOATS, SUMS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "binary");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(1))), tf_test_param(g, "b", TF_SHAPE(d(4), d(1), d(259)))));
  run("add [1] + [4,1,259]", g, FLOATS, SUMS);
}

static void test_unary(void) {
  const tf_op ops[] = {TF_OP_NEG,  TF_OP_EXP,  TF_OP_LOG,     TF_OP_SQRT, TF_OP_RSQRT,
                       TF_OP_RELU, TF_OP_SILU, TF_OP_SIGMOID, TF_OP_TANH, TF_OP_SOFTPLUS};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    bool needs_positive = ops[i] == TF_OP_LOG || ops[i] == TF_OP_SQRT || ops[i] == TF_OP_RSQRT;
    tf_graph *g = tf_test_graph_begin(&counts, "unary");
    tf_shape shape = TF_SHAPE(d(3), d(257));
    tf_test_finish_probe(
        g, tf_unary(g, ops[i], needs_positive ? tf_test_positive(g, "x", shape) : tf_test_param(g, "x", shape)));
    char label[64];
    snprintf(label, sizeof(label), "%s (+ grad) [3,257]", tf_op_name(ops[i]));
    run(label, g, FLOATS, MATH);
  }
  for (int approximate = 0; approximate < 2; approximate++) {
    tf_graph *g = tf_test_graph_begin(&counts, "gelu");
    tf_test_finish_probe(g, tf_gelu(g, tf_test_param(g, "x", TF_SHAPE(d(3), d(257))), approximate));
    run(approximate ? "gelu tanh (+ grad) [3,257]" : "gelu erf (+ grad) [3,257]", g, FLOATS, MATH);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "cast");
  tf_tensor_id wide =
      tf_graph_parameter(g, "x", TF_F32, TF_SHAPE(d(5), d(67)), tf_init_make(TF_INIT_UNIFORM, -3e9, 3e9));
  tf_test_finish_probe(g, tf_cast(g, tf_cast(g, wide, TF_I32), TF_F32));
  if (!tf_graph_status(g))
    parity_check_inference(&counts, "cast f32 -> i32 (saturating) -> f32", g, &FLOATS, EXACT);
  tf_graph_destroy(g);
  g = tf_test_graph_begin(&counts, "dropout");
  tf_test_finish_probe(g, tf_dropout(g, tf_test_param(g, "x", TF_SHAPE(d(7), d(131))), 0.3f));
  run("dropout 0.3 (+ grad) [7,131]", g, FLOATS, EXACT);
}

static void test_reductions(void) {
  struct {
    const char *label;
    tf_op op;
    int32_t axes[3], n_axes;
    bool keepdims;
  } cases[] = {
      {"sum axis 0 [5,7,11]", TF_OP_SUM, {0}, 1, false},
      {"sum axes 1,2 keepdims", TF_OP_SUM, {1, 2}, 2, true},
      {"sum all", TF_OP_SUM, {0}, 0, false},
      {"sum axes 0,2 (strided)", TF_OP_SUM, {0, 2}, 2, false},
      {"mean axis -1", TF_OP_MEAN, {-1}, 1, false},
      {"mean axes 0,2", TF_OP_MEAN, {0, 2}, 2, true},
      {"max axis 1 (+ max_grad)", TF_OP_MAX, {1}, 1, false},
      {"max all (+ max_grad)", TF_OP_MAX, {0}, 0, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "reduce");
    tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(5), d(7), d(11)));
    tf_test_finish_probe(g, tf_reduce(g, cases[i].op, x, cases[i].axes, cases[i].n_axes, cases[i].keepdims));
    run(cases[i].label, g, FLOATS, SUMS);
  }
  // Few, long groups: a workgroup (and, with subgroups, its subgroups) reduces each.
  struct {
    const char *label;
    tf_op op;
    int32_t axis, n_axes;
  } long_cases[] = {
      {"sum all [37,101]", TF_OP_SUM, 0, 0},
      {"mean axis -1 [3,1031]->[3]", TF_OP_MEAN, 0, 0},
      {"max all [37,101] (+ max_grad)", TF_OP_MAX, 0, 0},
      {"max axis 0 [37,101] (+ max_grad)", TF_OP_MAX, 0, 1},
  };
  for (size_t i = 0; i < sizeof(long_cases) / sizeof(long_cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "reduce");
    if (long_cases[i].op == TF_OP_MEAN) {
      int32_t last[1] = {-1};
      tf_test_finish_probe(g, tf_reduce(g, TF_OP_MEAN, tf_test_param(g, "x", TF_SHAPE(d(3), d(1031))), last, 1, false));
    } else {
      tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(37), d(101)));
      tf_test_finish_probe(g, tf_reduce(g, long_cases[i].op, x, &long_cases[i].axis, long_cases[i].n_axes, false));
    }
    run(long_cases[i].label, g, FLOATS, SUMS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "sum_to");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(300), d(37))), tf_test_param(g, "bias", TF_SHAPE(d(37)))));
  run("sum_to (bias gradient) [300,37]->[37]", g, FLOATS, SUMS);
  g = tf_test_graph_begin(&counts, "sum_to");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(3000), d(3))), tf_test_param(g, "bias", TF_SHAPE(d(3000), d(1)))));
  run("sum_to (rows) [3000,3]->[3000,1]", g, FLOATS, SUMS);
}

static void test_softmax(void) {
  for (int log_output = 0; log_output < 2; log_output++)
    for (int axis = 1; axis < 3; axis++) {
      tf_graph *g = tf_test_graph_begin(&counts, "softmax");
      tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(3), d(13), d(5)));
      tf_test_finish_probe(g, log_output ? tf_log_softmax(g, x, axis) : tf_softmax(g, x, axis));
      char label[64];
      snprintf(label, sizeof(label), "%s axis %d (+ grad) [3,13,5]", log_output ? "log_softmax" : "softmax", axis);
      run(label, g, FLOATS, SUMS);
    }
  // Long rows (the subgroup variant's clusters, 1031 is prime), and a long non-last axis.
  for (int log_output = 0; log_output < 2; log_output++)
    for (int rank = 2; rank < 4; rank++) {
      tf_graph *g = tf_test_graph_begin(&counts, "softmax");
      tf_tensor_id x = tf_test_param(g, "x", rank == 2 ? TF_SHAPE(d(3), d(1031)) : TF_SHAPE(d(4), d(1031), d(3)));
      tf_test_finish_probe(g, log_output ? tf_log_softmax(g, x, 1) : tf_softmax(g, x, 1));
      char label[64];
      snprintf(label, sizeof(label), "%s axis 1 (+ grad) %s", log_output ? "log_softmax" : "softmax",
               rank == 2 ? "[3,1031]" : "[4,1031,3]");
      run(label, g, FLOATS, SUMS);
    }
}

static void test_norms(void) {
  int64_t widths[] = {37, 300, 1, 1031};
  for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
    for (int kind = 0; kind < 3; kind++) {
      tf_graph *g = tf_test_graph_begin(&counts, "norm");
      tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(6), d(widths[i])));
      tf_tensor_id gamma = tf_test_param(g, "gamma", TF_SHAPE(d(widths[i])));
      tf_tensor_id y =
          kind == 2 ? tf_rms_norm(g, x, gamma, 1e-5f)
                    : tf_layer_norm(g, x, gamma,
                                    kind == 0 ? tf_test_param(g, "beta", TF_SHAPE(d(widths[i]))) : TF_NO_TENSOR, 1e-5f);
      tf_test_finish_probe(g, y);
      char label[64];
      snprintf(label, sizeof(label), "%s (+ grad) [6,%lld]",
               kind == 0   ? "layer_norm"
               : kind == 1 ? "layer_norm no beta"
                           : "rms_norm",
               (long long)widths[i]);
      run(label, g, FLOATS, SUMS);
    }
}

static void test_embedding(void) {
  for (int special = 0; special < 2; special++) {
    tf_graph *g = tf_test_graph_begin(&counts, "embedding");
    tf_tensor_id ids = tf_graph_input(g, "ids", TF_I32, TF_SHAPE(d(3), d(5)));
    tf_test_finish_probe(g, tf_embedding(g, ids, tf_test_param(g, "table", TF_SHAPE(d(11), d(7)))));
    parity_data data = {2, 11, special ? -1 : INT32_MIN};
    run(special ? "embedding, out-of-range ids (+ grad)" : "embedding (+ grad) [3,5] ids, [11,7]", g, data, SUMS);
  }
}

static void test_layout(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "reshape");
  tf_test_finish_probe(g, tf_reshape(g, tf_test_param(g, "x", TF_SHAPE(d(6), d(35))), TF_SHAPE(d(3), d(70))));
  run("reshape [6,35]->[3,70]", g, FLOATS, EXACT);
  g = tf_test_graph_begin(&counts, "transpose");
  int32_t perm[3] = {2, 0, 1};
  tf_test_finish_probe(g, tf_transpose(g, tf_test_param(g, "x", TF_SHAPE(d(3), d(5), d(7))), perm, 3));
  run("transpose [3,5,7] perm 2,0,1", g, FLOATS, EXACT);
  g = tf_test_graph_begin(&counts, "concat");
  tf_tensor_id parts[3] = {tf_test_param(g, "a", TF_SHAPE(d(2), d(3), d(5))),
                           tf_test_param(g, "b", TF_SHAPE(d(2), d(1), d(5))),
                           tf_test_param(g, "c", TF_SHAPE(d(2), d(4), d(5)))};
  tf_test_finish_probe(g, tf_concat(g, parts, 3, 1));
  run("concat axis 1", g, FLOATS, EXACT);
  g = tf_test_graph_begin(&counts, "slice");
  tf_test_finish_probe(g, tf_slice(g, tf_test_param(g, "x", TF_SHAPE(d(4), d(13), d(3))), 1, 1, -1, 3));
  run("slice axis 1 [1:-1:3] (+ slice_grad)", g, FLOATS, EXACT);
  g = tf_test_graph_begin(&counts, "expand");
  tf_test_finish_probe(g, tf_expand(g, tf_test_param(g, "x", TF_SHAPE(d(1), d(5), d(1))), TF_SHAPE(d(4), d(5), d(3))));
  run("expand [1,5,1]->[4,5,3]", g, FLOATS, SUMS);
}

static void test_conv(void) {
  struct {
    const char *label;
    tf_shape x, w;
    tf_conv_attrs attrs;
    bool bias;
  } cases[] = {
      {"conv2d 3x3 pad 1 [2,3,9,11]",
       TF_SHAPE(d(2), d(3), d(9), d(11)),
       TF_SHAPE(d(4), d(3), d(3), d(3)),
       {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1},
       true},
      {"conv2d stride 2 dilation 2",
       TF_SHAPE(d(2), d(3), d(13), d(10)),
       TF_SHAPE(d(5), d(3), d(3), d(2)),
       {{2, 2}, {0, 1}, {2, 2}, {0, 0}, 1},
       false},
      {"conv2d groups 2, 1x1",
       TF_SHAPE(d(3), d(4), d(7), d(7)),
       TF_SHAPE(d(6), d(2), d(1), d(1)),
       {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 2},
       true},
      {"conv2d groups 2, 3x3 stride 3",
       TF_SHAPE(d(1), d(4), d(8), d(7)),
       TF_SHAPE(d(6), d(2), d(3), d(3)),
       {{3, 3}, {1, 1}, {1, 1}, {0, 0}, 2},
       false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "conv");
    tf_tensor_id bias = cases[i].bias ? tf_test_param(g, "bias", TF_SHAPE(d(cases[i].w.dims[0].size))) : TF_NO_TENSOR;
    tf_test_finish_probe(
        g, tf_conv2d(g, tf_test_param(g, "x", cases[i].x), tf_test_param(g, "w", cases[i].w), bias, &cases[i].attrs));
    run(cases[i].label, g, FLOATS, SUMS);
  }
  struct {
    const char *label;
    tf_shape x, w;
    tf_conv_attrs attrs;
  } transposed[] = {
      {"conv_transpose2d stride 2 pad 1 out_pad 1",
       TF_SHAPE(d(2), d(4), d(5), d(6)),
       TF_SHAPE(d(4), d(3), d(3), d(3)),
       {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}},
      {"conv_transpose2d groups 2, dilation 2",
       TF_SHAPE(d(1), d(4), d(5), d(5)),
       TF_SHAPE(d(4), d(2), d(3), d(2)),
       {{1, 2}, {0, 1}, {2, 1}, {0, 0}, 2}},
  };
  for (size_t i = 0; i < sizeof(transposed) / sizeof(transposed[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "conv_transpose2d");
    int64_t channels = transposed[i].w.dims[1].size * transposed[i].attrs.groups;
    tf_test_finish_probe(g, tf_conv_transpose2d(g, tf_test_param(g, "x", transposed[i].x),
                                                tf_test_param(g, "w", transposed[i].w),
                                                tf_test_param(g, "bias", TF_SHAPE(d(channels))), &transposed[i].attrs));
    run(transposed[i].label, g, FLOATS, SUMS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "conv1d");
  tf_test_finish_probe(g, tf_conv1d(g, tf_test_param(g, "x", TF_SHAPE(d(2), d(3), d(13))),
                                    tf_test_param(g, "w", TF_SHAPE(d(5), d(3), d(3))),
                                    tf_test_param(g, "bias", TF_SHAPE(d(5))), 2, 1, 1, 1));
  run("conv1d stride 2 pad 1 [2,3,13]", g, FLOATS, SUMS);
}

static void test_pool(void) {
  struct {
    const char *label;
    tf_op op;
    tf_pool_attrs attrs;
  } cases[] = {
      {"max_pool2d 2x2 stride 2 [2,3,9,7]", TF_OP_MAX_POOL2D, {{2, 2}, {2, 2}, {0, 0}}},
      {"max_pool2d 3x3 stride 2 pad 1", TF_OP_MAX_POOL2D, {{3, 3}, {2, 2}, {1, 1}}},
      {"avg_pool2d 3x3 stride 1 pad 1", TF_OP_AVG_POOL2D, {{3, 3}, {1, 1}, {1, 1}}},
      {"avg_pool2d 2x3 stride 2", TF_OP_AVG_POOL2D, {{2, 3}, {2, 2}, {0, 0}}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "pool");
    tf_test_finish_probe(
        g, tf_pool2d(g, cases[i].op, tf_test_param(g, "x", TF_SHAPE(d(2), d(3), d(9), d(7))), &cases[i].attrs));
    run(cases[i].label, g, FLOATS, SUMS);
  }
}

static void test_attention(void) {
  struct {
    const char *label;
    int64_t queries, keys, width;
    int32_t heads;
    bool causal;
  } cases[] = {
      {"attention [2,5,12] 3 heads", 5, 5, 12, 3, false},
      {"attention causal [2,7,12] 3 heads", 7, 7, 12, 3, true},
      {"attention Tq 5, Tk 9, 2 heads of 7", 5, 9, 14, 2, false},
      {"attention causal, heads of 2 (recompute)", 6, 6, 12, 6, true},
      {"attention causal Tq 9 > Tk 4", 9, 4, 8, 1, true},
      // The subgroup variant's clusters of 8 lanes: heads not a multiple of 8 wide (a lane's share
      // ends early), of 1 (recomputed statistics, 7 idle lanes) and of 3 (statistics kept in lanes
      // 0..2), keys != queries, long rows, the widest head.
      {"attention Tq 11, Tk 13, 2 heads of 15", 11, 13, 30, 2, false},
      {"attention causal Tq 13 > Tk 11, 2 heads of 15", 13, 11, 30, 2, true},
      {"attention causal Tq 6 < Tk 10, 2 heads of 3", 6, 10, 6, 2, true},
      {"attention Tq 9, Tk 5, 3 heads of 1 (recompute)", 9, 5, 3, 3, false},
      {"attention causal, 3 heads of 1 (recompute)", 7, 7, 3, 3, true},
      {"attention Tq 33, Tk 17, 2 heads of 128", 33, 17, 256, 2, false},
      {"attention [2,257,64] 1 head", 257, 257, 64, 1, false},
      {"attention causal [2,257,64] 1 head", 257, 257, 64, 1, true},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "attention");
    tf_tensor_id q = tf_test_param(g, "q", TF_SHAPE(d(2), d(cases[i].queries), d(cases[i].width)));
    tf_tensor_id k = tf_test_param(g, "k", TF_SHAPE(d(2), d(cases[i].keys), d(cases[i].width)));
    tf_tensor_id v = tf_test_param(g, "v", TF_SHAPE(d(2), d(cases[i].keys), d(cases[i].width)));
    tf_test_finish_probe(g, tf_attention(g, q, k, v, cases[i].heads, cases[i].causal));
    run(cases[i].label, g, FLOATS, SUMS);
  }
  // 524,292 rows: more than 65535 workgroups of 8 (the subgroup variant's grid), so a second
  // grid-stride round. The forward only: lavapipe runs a cluster's row about as slowly as a plain
  // invocation's 8 rows, so the gradient's three passes would add some 6 seconds.
  tf_graph *g = tf_test_graph_begin(&counts, "attention");
  tf_shape shape = TF_SHAPE(d(2), d(3), d(3 * 87382));
  tf_test_finish_probe(g, tf_attention(g, tf_test_param(g, "q", shape), tf_test_param(g, "k", shape),
                                       tf_test_param(g, "v", shape), 87382, true));
  if (!tf_graph_status(g))
    parity_check_inference(&counts, "attention causal [2,3,262146], 87382 heads of 3 (2 grid rounds)", g, &FLOATS,
                           SUMS);
  tf_graph_destroy(g);
}

static void test_losses(void) {
  for (int ignore = 0; ignore < 2; ignore++) {
    tf_graph *g = tf_test_graph_begin(&counts, "cross_entropy");
    tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(d(9)));
    tf_test_finish_loss(g, tf_cross_entropy(g, tf_test_param(g, "logits", TF_SHAPE(d(9), d(13))), labels, -100));
    parity_data data = {3, 13, ignore ? -100 : INT32_MIN};
    run(ignore ? "cross_entropy, ignore_index (+ grad)" : "cross_entropy (+ grad) [9,13]", g, data, SUMS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "cross_entropy");
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(d(2), d(300)));
  tf_test_finish_loss(g, tf_cross_entropy(g, tf_test_param(g, "logits", TF_SHAPE(d(2), d(300), d(67))), labels, -1));
  parity_data data = {4, 67, INT32_MIN};
  run("cross_entropy [2,300,67] (+ grad)", g, data, SUMS);
  // Long rows, labels past the last class (they do not count) and ignored ones.
  g = tf_test_graph_begin(&counts, "cross_entropy");
  labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(d(37)));
  tf_test_finish_loss(g, tf_cross_entropy(g, tf_test_param(g, "logits", TF_SHAPE(d(37), d(1031))), labels, -100));
  parity_data long_rows = {5, 1034, -100};
  run("cross_entropy [37,1031], labels out of range (+ grad)", g, long_rows, SUMS);
  for (int bce = 0; bce < 2; bce++) {
    g = tf_test_graph_begin(&counts, "pair loss");
    tf_tensor_id target = tf_graph_label(g, "target", TF_F32, TF_SHAPE(d(7), d(19)));
    tf_tensor_id p = tf_test_param(g, "p", TF_SHAPE(d(7), d(19)));
    tf_test_finish_loss(g, bce ? tf_bce_with_logits(g, p, target) : tf_mse(g, p, target));
    run(bce ? "bce_with_logits (+ grad) [7,19]" : "mse (+ grad) [7,19]", g, FLOATS, SUMS);
  }
}

/* Whether the device is lavapipe, whose shader loops end silently after 65,535 iterations per
 * invocation: steps that could need more are refused (vk_check_loops), not run wrong. */
static bool on_lavapipe(void) {
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  tf_backend_options options = {0, 1};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  bool lavapipe = !status && strstr(tf_vulkan_device_name(state), "llvmpipe") != NULL;
  tf_status_free(status);
  if (state)
    vulkan->destroy(state);
  return lavapipe;
}

/* The session-creation status of `graph`'s training plan on Vulkan (NULL: created). */
static tf_status create_training(tf_graph *g) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_VULKAN);
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &options, &plan);
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = "vulkan";
  tf_session *session = NULL;
  if (!status)
    status = tf_session_create(plan, &session_options, &session);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status;
}

/* A plan larger than the device's memory fails at session creation (the only place it can), naming
 * the region and the heap. */
static void test_out_of_memory(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "huge");
  // 2^38 floats: 1 TiB of parameters, beyond any heap.
  tf_test_finish_probe(g, tf_unary(g, TF_OP_RELU, tf_test_param(g, "huge", TF_SHAPE(d((int64_t)1 << 38)))));
  tf_status status = create_training(g);
  tf_graph_destroy(g);
  CHECK(&counts,
        tf_status_code(status) == TF_ERR_OUT_OF_MEMORY && strstr(tf_status_message(status), "parameters region") &&
            strstr(tf_status_message(status), "heap"),
        "1 TiB of parameters: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
}

/* Long rows on lavapipe: 3 walks of 30,000 classes exceed its loop limit one invocation per row
 * (refused without subgroups) but not a cluster of 8 lanes per row (checked against the CPU); so do
 * attention's walks over 1,024 keys of width 64, and 4,096 keys exceed it either way. */
static void test_loop_limit(void) {
  if (!on_lavapipe()) {
    printf("ok   loop limit: not lavapipe, nothing to refuse\n");
    return;
  }
  const char *requested = getenv("TIGHTFIT_VULKAN_SUBGROUPS");
  bool subgroups = !(requested && strcmp(requested, "0") == 0);
  tf_graph *g = tf_test_graph_begin(&counts, "softmax");
  tf_test_finish_probe(g, tf_softmax(g, tf_test_param(g, "x", TF_SHAPE(d(2), d(30000))), 1));
  if (subgroups) {
    run("softmax [2,30000] (+ grad), within lavapipe's loop limit", g, FLOATS, SUMS);
  } else {
    tf_status status = create_training(g);
    tf_graph_destroy(g);
    CHECK(&counts, status && strstr(tf_status_message(status), "65535"), "softmax [2,30000]: %s",
          status ? tf_status_message(status) : "created");
    printf("ok   refused: %s\n", status ? tf_status_message(status) : "-");
    tf_status_free(status);
  }
  for (int64_t keys = 1024; keys <= 4096; keys *= 4) {
    g = tf_test_graph_begin(&counts, "attention");
    tf_tensor_id q = tf_test_param(g, "q", TF_SHAPE(d(1), d(keys), d(64)));
    tf_test_finish_probe(g, tf_attention(g, q, tf_test_param(g, "k", TF_SHAPE(d(1), d(keys), d(64))),
                                         tf_test_param(g, "v", TF_SHAPE(d(1), d(keys), d(64))), 1, true));
    if (subgroups && keys == 1024) {
      run("attention causal [1,1024,64] (+ grad), within lavapipe's loop limit", g, FLOATS, SUMS);
      continue;
    }
    tf_status status = create_training(g);
    tf_graph_destroy(g);
    CHECK(&counts, status && strstr(tf_status_message(status), "65535"), "attention over %lld keys: %s",
          (long long)keys, status ? tf_status_message(status) : "created");
    printf("ok   refused: %s\n", status ? tf_status_message(status) : "-");
    tf_status_free(status);
  }
}

/* A loader that cannot be opened is named, with what to install. */
static void test_no_loader(void) {
  setenv("TIGHTFIT_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  tf_backend_options options = {0, 1};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  CHECK(&counts,
        tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "no Vulkan loader") &&
            strstr(tf_status_message(status), "/nonexistent/libvulkan.so.1"),
        "missing loader: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
  if (state)
    vulkan->destroy(state);
  unsetenv("TIGHTFIT_VULKAN_LOADER");
}

/* What the backend refuses, it refuses at session creation with a message naming the cause. */
static void test_refusals(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "i64 ids");
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I64, TF_SHAPE(d(3)));
  tf_test_finish_probe(g, tf_embedding(g, ids, tf_test_param(g, "table", TF_SHAPE(d(5), d(4)))));
  tf_compile_options options = tf_compile_options_default(TF_TARGET_VULKAN);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  tf_graph_destroy(g);
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = "vulkan";
  tf_session *session = NULL;
  tf_status status = plan ? tf_session_create(plan, &session_options, &session) : NULL;
  CHECK(&counts, tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "i64"),
        "i64 ids: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
  session_options.device = 99;
  status = plan ? tf_session_create(plan, &session_options, &session) : NULL;
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && strstr(tf_status_message(status), "no device 99"),
        "device 99: %s", tf_status_message(status));
  printf("ok   refused: %s\n", tf_status_message(status));
  tf_status_free(status);
  tf_plan_destroy(plan);
  test_out_of_memory();
  test_loop_limit();
  test_no_loader();
}

int main(void) {
  int available = parity_vulkan_available();
  if (available != 0)
    return available;
  test_matmul();
  test_binary();
  test_unary();
  test_reductions();
  test_softmax();
  test_norms();
  test_embedding();
  test_layout();
  test_conv();
  test_pool();
  test_attention();
  test_losses();
  test_refusals();
  return tf_test_finish("vulkan ops", &counts);
}
