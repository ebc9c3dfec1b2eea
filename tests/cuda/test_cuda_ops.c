/* Every op of the CUDA kernels, forward and backward, against the CPU f32 kernels. Each case is a
 * small graph compiled into a training plan for the cuda target (loss = sum(op(...) x probe) with a
 * random probe, SGD with momentum, weight decay, clipping and 2 accumulated micro-batches, or
 * AdamW), whose every step — forward, backward, accumulate, global norm, update, zero — runs on
 * both kernels from the same inputs (cuda_test.c). Sizes are awkward on purpose (1, primes, not
 * multiples of 32), and some cases are large enough to take the kernels' other paths: split column
 * sums, multi-block partials, the embedding sort across blocks, several im2col chunks, every
 * attention head-width variant. cast is also checked over every dtype pair on special values. At
 * the end every op of the op table (core/op_table.h) must have run. Exits 77 without a CUDA device. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda_test.h"
#include "kernels/cpu/list.h"
#include "kernels/cuda/kernels.h"
#include "op_graphs.h"

static tf_test_counts counts;
static cuda_op_coverage coverage;

typedef enum variant { SGD = 0, ADAMW } variant;

static void run_variant(const char *label, tf_graph *g, cuda_test_data data, variant v) {
  if (!g)
    return;
  const struct tf_status_s *error = tf_graph_status(g);
  CHECK(&counts, error == NULL, "%s: %s", label, tf_status_message(error));
  if (!error) {
    tf_training_config config;
    memset(&config, 0, sizeof(config));
    config.optimizer = v == ADAMW ? TF_OPTIMIZER_ADAMW : TF_OPTIMIZER_SGD;
    config.learning_rate = v == ADAMW ? 1e-2 : 0.1;
    config.momentum = 0.9;
    config.weight_decay = 0.01;
    config.clip_norm = v == ADAMW ? 0.0 : 0.5;
    config.accumulate_steps = v == ADAMW ? 1 : 2;
    tf_graph_set_training(g, &config);
    tf_plan *plan = NULL;
    tf_compile_options options = tf_compile_options_default(TF_TARGET_CUDA);
    tf_status status = tf_compile(g, &options, &plan);
    CHECK(&counts, status == NULL, "%s: %s", label, tf_status_message(status));
    tf_status_free(status);
    if (plan)
      cuda_test_step_parity(&counts, label, plan, &data, &coverage);
    tf_plan_destroy(plan);
  }
  tf_graph_destroy(g);
}

static void run(const char *label, tf_graph *g, cuda_test_data data) { run_variant(label, g, data, SGD); }

static const cuda_test_data FLOATS = {1, 0, INT32_MIN};

static void test_matmul(void) {
  struct {
    const char *label;
    tf_shape a, b;
    bool ta, tb;
  } cases[] = {
      {"matmul [13,67]x[67,29]", TF_SHAPE(d(13), d(67)), TF_SHAPE(d(67), d(29)), false, false},
      {"matmul A^T", TF_SHAPE(d(67), d(13)), TF_SHAPE(d(67), d(29)), true, false},
      {"matmul B^T", TF_SHAPE(d(13), d(67)), TF_SHAPE(d(29), d(67)), false, true},
      {"matmul A^T B^T", TF_SHAPE(d(67), d(13)), TF_SHAPE(d(29), d(67)), true, true},
      {"matmul [1,1]x[1,1]", TF_SHAPE(d(1), d(1)), TF_SHAPE(d(1), d(1)), false, false},
      {"matmul batched [3,13,67]x[3,67,29]", TF_SHAPE(d(3), d(13), d(67)), TF_SHAPE(d(3), d(67), d(29)), false, false},
      {"matmul linear [2,3,13,5]x[5,7]", TF_SHAPE(d(2), d(3), d(13), d(5)), TF_SHAPE(d(5), d(7)), false, false},
      {"matmul broadcast [1,3,13,5]x[2,1,5,7]", TF_SHAPE(d(1), d(3), d(13), d(5)), TF_SHAPE(d(2), d(1), d(5), d(7)),
       false, false},
      {"matmul broadcast A^T [3,5,13]x[5,7]", TF_SHAPE(d(3), d(5), d(13)), TF_SHAPE(d(5), d(7)), true, false},
      {"matmul [2,1,3,4,6]x[3,1,6,5] (loops)", TF_SHAPE(d(2), d(1), d(3), d(4), d(6)), TF_SHAPE(d(3), d(1), d(6), d(5)),
       false, false},
      {"matmul [131,257]x[257,65]", TF_SHAPE(d(131), d(257)), TF_SHAPE(d(257), d(65)), false, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "matmul");
    tf_test_finish_probe(g, tf_matmul(g, tf_test_param(g, "a", cases[i].a), tf_test_param(g, "b", cases[i].b),
                                      cases[i].ta, cases[i].tb));
    run_variant(cases[i].label, g, FLOATS, i % 2 ? ADAMW : SGD);
  }
}

static void test_elementwise(void) {
  const tf_op binaries[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
  for (size_t i = 0; i < 4; i++) {
    char label[64];
    snprintf(label, sizeof(label), "%s [5,7,3] (+) [7,1]", tf_op_name(binaries[i]));
    tf_graph *g = tf_test_graph_begin(&counts, "binary");
    tf_tensor_id a = tf_test_param(g, "a", TF_SHAPE(d(5), d(7), d(3)));
    tf_tensor_id b = binaries[i] == TF_OP_DIV ? tf_test_positive(g, "b", TF_SHAPE(d(7), d(1)))
                                              : tf_test_param(g, "b", TF_SHAPE(d(7), d(1)));
    tf_test_finish_probe(g, tf_graph_node(g, binaries[i], (tf_tensor_id[]){a, b}, 2, NULL));
    run(label, g, FLOATS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "binary");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(1))), tf_test_param(g, "b", TF_SHAPE(d(4), d(1), d(259)))));
  run("add [1] + [4,1,259]", g, FLOATS);
  const tf_op unaries[] = {TF_OP_NEG,  TF_OP_EXP,  TF_OP_LOG,     TF_OP_SQRT, TF_OP_RSQRT,
                           TF_OP_RELU, TF_OP_SILU, TF_OP_SIGMOID, TF_OP_TANH, TF_OP_SOFTPLUS};
  for (size_t i = 0; i < sizeof(unaries) / sizeof(unaries[0]); i++) {
    bool needs_positive = unaries[i] == TF_OP_LOG || unaries[i] == TF_OP_SQRT || unaries[i] == TF_OP_RSQRT;
    g = tf_test_graph_begin(&counts, "unary");
    tf_shape shape = TF_SHAPE(d(3), d(257));
    tf_test_finish_probe(
        g, tf_unary(g, unaries[i], needs_positive ? tf_test_positive(g, "x", shape) : tf_test_param(g, "x", shape)));
    char label[64];
    snprintf(label, sizeof(label), "%s (+ grad) [3,257]", tf_op_name(unaries[i]));
    run(label, g, FLOATS);
  }
  for (int approximate = 0; approximate < 2; approximate++) {
    g = tf_test_graph_begin(&counts, "gelu");
    tf_test_finish_probe(g, tf_gelu(g, tf_test_param(g, "x", TF_SHAPE(d(3), d(257))), approximate));
    run(approximate ? "gelu tanh (+ grad)" : "gelu erf (+ grad)", g, FLOATS);
  }
  g = tf_test_graph_begin(&counts, "dropout");
  tf_test_finish_probe(g, tf_dropout(g, tf_test_param(g, "x", TF_SHAPE(d(7), d(131))), 0.3f));
  run("dropout 0.3 (+ grad) [7,131]", g, FLOATS);
}

static void test_reductions(void) {
  struct {
    const char *label;
    tf_op op;
    int32_t axes[3], n_axes;
    bool keepdims;
    int64_t a, b, c;
  } cases[] = {
      {"sum axis 0 [5,7,11]", TF_OP_SUM, {0}, 1, false, 5, 7, 11},
      {"sum axes 1,2 keepdims", TF_OP_SUM, {1, 2}, 2, true, 5, 7, 11},
      {"sum all [5,7,11]", TF_OP_SUM, {0}, 0, false, 5, 7, 11},
      {"sum all [3,300,257] (partials)", TF_OP_SUM, {0}, 0, false, 3, 300, 257},
      {"sum axes 0,2 (strided)", TF_OP_SUM, {0, 2}, 2, false, 5, 7, 11},
      {"sum axis 0 [1000,3,7] (split columns)", TF_OP_SUM, {0}, 1, false, 1000, 3, 7},
      {"mean axis -1", TF_OP_MEAN, {-1}, 1, false, 5, 7, 11},
      {"mean axes 0,2 keepdims", TF_OP_MEAN, {0, 2}, 2, true, 5, 7, 11},
      {"max axis 1 (+ max_grad)", TF_OP_MAX, {1}, 1, false, 5, 7, 11},
      {"max axis 2 (+ max_grad)", TF_OP_MAX, {2}, 1, false, 5, 7, 11},
      {"max all (+ max_grad)", TF_OP_MAX, {0}, 0, false, 5, 7, 11},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "reduce");
    tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(cases[i].a), d(cases[i].b), d(cases[i].c)));
    tf_test_finish_probe(g, tf_reduce(g, cases[i].op, x, cases[i].axes, cases[i].n_axes, cases[i].keepdims));
    run(cases[i].label, g, FLOATS);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "sum_to");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(3000), d(37))), tf_test_param(g, "bias", TF_SHAPE(d(37)))));
  run("sum_to (bias gradient) [3000,37]->[37]", g, FLOATS);
  g = tf_test_graph_begin(&counts, "sum_to");
  tf_test_finish_probe(
      g, tf_add(g, tf_test_param(g, "a", TF_SHAPE(d(3000), d(3))), tf_test_param(g, "bias", TF_SHAPE(d(3000), d(1)))));
  run("sum_to (rows) [3000,3]->[3000,1]", g, FLOATS);
}

static void test_softmax_and_norms(void) {
  for (int log_output = 0; log_output < 2; log_output++)
    for (int axis = 1; axis < 3; axis++) {
      tf_graph *g = tf_test_graph_begin(&counts, "softmax");
      tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(3), d(13), d(5)));
      tf_test_finish_probe(g, log_output ? tf_log_softmax(g, x, axis) : tf_softmax(g, x, axis));
      char label[64];
      snprintf(label, sizeof(label), "%s axis %d (+ grad) [3,13,5]", log_output ? "log_softmax" : "softmax", axis);
      run_variant(label, g, FLOATS, axis == 1 ? ADAMW : SGD);
    }
  tf_graph *g = tf_test_graph_begin(&counts, "softmax");
  tf_test_finish_probe(g, tf_softmax(g, tf_test_param(g, "x", TF_SHAPE(d(4), d(1000))), -1));
  run("softmax [4,1000] (+ grad)", g, FLOATS);
  const int64_t rows[] = {6, 6, 6, 700};
  const int64_t widths[] = {37, 300, 1, 37};
  for (size_t i = 0; i < 4; i++)
    for (int kind = 0; kind < 3; kind++) {
      g = tf_test_graph_begin(&counts, "norm");
      tf_tensor_id x = tf_test_param(g, "x", TF_SHAPE(d(rows[i]), d(widths[i])));
      tf_tensor_id gamma = tf_test_param(g, "gamma", TF_SHAPE(d(widths[i])));
      tf_tensor_id y =
          kind == 2 ? tf_rms_norm(g, x, gamma, 1e-5f)
                    : tf_layer_norm(g, x, gamma,
                                    kind == 0 ? tf_test_param(g, "beta", TF_SHAPE(d(widths[i]))) : TF_NO_TENSOR, 1e-5f);
      tf_test_finish_probe(g, y);
      char label[64];
      snprintf(label, sizeof(label), "%s (+ grad) [%lld,%lld]",
               kind == 0   ? "layer_norm"
               : kind == 1 ? "layer_norm no beta"
                           : "rms_norm",
               (long long)rows[i], (long long)widths[i]);
      run(label, g, FLOATS);
    }
}

static void test_embedding_and_layout(void) {
  struct {
    const char *label;
    int64_t n, t, vocab, depth;
    int32_t special;
    tf_dtype ids;
  } cases[] = {
      {"embedding (+ grad) [3,5] ids, [11,7]", 3, 5, 11, 7, INT32_MIN, TF_I32},
      {"embedding, out-of-range ids (+ grad)", 3, 5, 11, 7, -1, TF_I32},
      {"embedding i64 ids [4,300] of 50 (global sort)", 4, 300, 50, 33, INT32_MIN, TF_I64},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "embedding");
    tf_tensor_id ids = tf_graph_input(g, "ids", cases[i].ids, TF_SHAPE(d(cases[i].n), d(cases[i].t)));
    tf_test_finish_probe(
        g, tf_embedding(g, ids, tf_test_param(g, "table", TF_SHAPE(d(cases[i].vocab), d(cases[i].depth)))));
    cuda_test_data data = {2, (int32_t)cases[i].vocab, cases[i].special};
    run(cases[i].label, g, data);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "reshape");
  tf_test_finish_probe(g, tf_reshape(g, tf_test_param(g, "x", TF_SHAPE(d(6), d(35))), TF_SHAPE(d(3), d(70))));
  run("reshape [6,35]->[3,70]", g, FLOATS);
  g = tf_test_graph_begin(&counts, "transpose");
  tf_test_finish_probe(g, tf_transpose(g, tf_test_param(g, "x", TF_SHAPE(d(3), d(5), d(7))), (int32_t[]){2, 0, 1}, 3));
  run("transpose [3,5,7] perm 2,0,1", g, FLOATS);
  g = tf_test_graph_begin(&counts, "concat");
  tf_tensor_id parts[3] = {tf_test_param(g, "a", TF_SHAPE(d(2), d(3), d(5))),
                           tf_test_param(g, "b", TF_SHAPE(d(2), d(1), d(5))),
                           tf_test_param(g, "c", TF_SHAPE(d(2), d(4), d(5)))};
  tf_test_finish_probe(g, tf_concat(g, parts, 3, 1));
  run("concat axis 1", g, FLOATS);
  g = tf_test_graph_begin(&counts, "slice");
  tf_test_finish_probe(g, tf_slice(g, tf_test_param(g, "x", TF_SHAPE(d(4), d(13), d(3))), 1, 1, -1, 3));
  run("slice axis 1 [1:-1:3] (+ slice_grad)", g, FLOATS);
  g = tf_test_graph_begin(&counts, "expand");
  tf_test_finish_probe(g, tf_expand(g, tf_test_param(g, "x", TF_SHAPE(d(1), d(5), d(1))), TF_SHAPE(d(4), d(5), d(3))));
  run("expand [1,5,1]->[4,5,3]", g, FLOATS);
  const tf_dtype halves[] = {TF_F16, TF_BF16};
  for (int i = 0; i < 2; i++) {
    g = tf_test_graph_begin(&counts, "cast");
    tf_test_finish_probe(g, tf_cast(g, tf_cast(g, tf_test_param(g, "x", TF_SHAPE(d(7), d(19))), halves[i]), TF_F32));
    run(i ? "cast f32->bf16->f32 (+ grad)" : "cast f32->f16->f32 (+ grad)", g, FLOATS);
  }
}

static void test_conv_and_pool(void) {
  struct {
    const char *label;
    tf_shape x, w;
    tf_conv_attrs attrs;
    bool bias, transpose;
  } cases[] = {
      {"conv2d 3x3 pad 1 [2,3,9,11]",
       TF_SHAPE(d(2), d(3), d(9), d(11)),
       TF_SHAPE(d(4), d(3), d(3), d(3)),
       {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1},
       true,
       false},
      {"conv2d stride 2 dilation 2",
       TF_SHAPE(d(2), d(3), d(13), d(10)),
       TF_SHAPE(d(5), d(3), d(3), d(2)),
       {{2, 2}, {0, 1}, {2, 2}, {0, 0}, 1},
       false,
       false},
      {"conv2d groups 2, 1x1 (direct)",
       TF_SHAPE(d(3), d(4), d(7), d(7)),
       TF_SHAPE(d(6), d(2), d(1), d(1)),
       {{1, 1}, {0, 0}, {1, 1}, {0, 0}, 2},
       true,
       false},
      {"conv2d groups 2, 3x3 stride 3",
       TF_SHAPE(d(1), d(4), d(8), d(7)),
       TF_SHAPE(d(6), d(2), d(3), d(3)),
       {{3, 3}, {1, 1}, {1, 1}, {0, 0}, 2},
       false,
       false},
      {"conv2d [9,16,64,64] 3x3 (2 im2col chunks)",
       TF_SHAPE(d(9), d(16), d(64), d(64)),
       TF_SHAPE(d(3), d(16), d(3), d(3)),
       {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1},
       true,
       false},
      {"conv_transpose2d stride 2 pad 1 out_pad 1",
       TF_SHAPE(d(2), d(4), d(5), d(6)),
       TF_SHAPE(d(4), d(3), d(3), d(3)),
       {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},
       true,
       true},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "conv");
    int64_t channels = cases[i].transpose ? cases[i].w.dims[1].size : cases[i].w.dims[0].size;
    tf_tensor_id bias = cases[i].bias ? tf_test_param(g, "bias", TF_SHAPE(d(channels))) : TF_NO_TENSOR;
    tf_tensor_id x = tf_test_param(g, "x", cases[i].x), w = tf_test_param(g, "w", cases[i].w);
    tf_test_finish_probe(g, cases[i].transpose ? tf_conv_transpose2d(g, x, w, bias, &cases[i].attrs)
                                               : tf_conv2d(g, x, w, bias, &cases[i].attrs));
    run_variant(cases[i].label, g, FLOATS, i % 2 ? ADAMW : SGD);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "conv1d");
  tf_test_finish_probe(g, tf_conv1d(g, tf_test_param(g, "x", TF_SHAPE(d(2), d(3), d(13))),
                                    tf_test_param(g, "w", TF_SHAPE(d(5), d(3), d(3))),
                                    tf_test_param(g, "bias", TF_SHAPE(d(5))), 2, 1, 1, 1));
  run("conv1d stride 2 pad 1 [2,3,13]", g, FLOATS);
  struct {
    const char *label;
    tf_op op;
    tf_pool_attrs attrs;
  } pools[] = {
      {"max_pool2d 2x2 stride 2 [2,3,9,7]", TF_OP_MAX_POOL2D, {{2, 2}, {2, 2}, {0, 0}}},
      {"max_pool2d 3x3 stride 2 pad 1", TF_OP_MAX_POOL2D, {{3, 3}, {2, 2}, {1, 1}}},
      {"avg_pool2d 3x3 stride 1 pad 1", TF_OP_AVG_POOL2D, {{3, 3}, {1, 1}, {1, 1}}},
      {"avg_pool2d 2x3 stride 2", TF_OP_AVG_POOL2D, {{2, 3}, {2, 2}, {0, 0}}},
  };
  for (size_t i = 0; i < sizeof(pools) / sizeof(pools[0]); i++) {
    g = tf_test_graph_begin(&counts, "pool");
    tf_test_finish_probe(
        g, tf_pool2d(g, pools[i].op, tf_test_param(g, "x", TF_SHAPE(d(2), d(3), d(9), d(7))), &pools[i].attrs));
    run(pools[i].label, g, FLOATS);
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
      {"attention causal Tq 9 > Tk 4", 9, 4, 8, 1, true},
      {"attention causal T 70, heads of 64", 70, 70, 128, 2, true},
      {"attention Tq 37, Tk 45, head of 100", 37, 45, 100, 1, false},
      {"attention causal T 33, head of 200", 33, 33, 200, 1, true},
      {"attention T 40, head of 300", 40, 40, 300, 1, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_graph *g = tf_test_graph_begin(&counts, "attention");
    tf_tensor_id q = tf_test_param(g, "q", TF_SHAPE(d(2), d(cases[i].queries), d(cases[i].width)));
    tf_tensor_id k = tf_test_param(g, "k", TF_SHAPE(d(2), d(cases[i].keys), d(cases[i].width)));
    tf_tensor_id v = tf_test_param(g, "v", TF_SHAPE(d(2), d(cases[i].keys), d(cases[i].width)));
    tf_test_finish_probe(g, tf_attention(g, q, k, v, cases[i].heads, cases[i].causal));
    run_variant(cases[i].label, g, FLOATS, i % 2 ? ADAMW : SGD);
  }
}

static void test_losses(void) {
  for (int ignore = 0; ignore < 2; ignore++) {
    tf_graph *g = tf_test_graph_begin(&counts, "cross_entropy");
    tf_tensor_id labels = tf_graph_label(g, "labels", TF_I32, TF_SHAPE(d(9)));
    tf_test_finish_loss(g, tf_cross_entropy(g, tf_test_param(g, "logits", TF_SHAPE(d(9), d(13))), labels, -100));
    cuda_test_data data = {3, 13, ignore ? -100 : INT32_MIN};
    run(ignore ? "cross_entropy, ignore_index (+ grad)" : "cross_entropy (+ grad) [9,13]", g, data);
  }
  tf_graph *g = tf_test_graph_begin(&counts, "cross_entropy");
  tf_tensor_id labels = tf_graph_label(g, "labels", TF_I64, TF_SHAPE(d(2), d(300)));
  tf_test_finish_loss(g, tf_cross_entropy(g, tf_test_param(g, "logits", TF_SHAPE(d(2), d(300), d(67))), labels, -1));
  cuda_test_data data = {4, 67, INT32_MIN};
  run_variant("cross_entropy i64 labels [2,300,67] (+ grad)", g, data, ADAMW);
  for (int bce = 0; bce < 2; bce++) {
    g = tf_test_graph_begin(&counts, "pair loss");
    tf_tensor_id target = tf_graph_label(g, "target", TF_F32, TF_SHAPE(d(7), d(19)));
    tf_tensor_id p = tf_test_param(g, "p", TF_SHAPE(d(7), d(19)));
    tf_test_finish_loss(g, bce ? tf_bce_with_logits(g, p, target) : tf_mse(g, p, target));
    run(bce ? "bce_with_logits (+ grad) [7,19]" : "mse (+ grad) [7,19]", g, FLOATS);
  }
}

/* ---- cast over every dtype pair, on values that test the rules ---- */

static const float SPECIALS[] = {0.0f,   -0.0f,  1.5f,        -2.5f,    0.1f,      65504.0f, 65520.0f, 1e-8f,  6e-8f,
                                 -3e-5f, NAN,    -NAN,        INFINITY, -INFINITY, 3e9f,     -3e9f,    300.7f, -1.0f,
                                 255.5f, 256.0f, 16777217.0f, 1e20f,    -1e20f,    2.5f,     3.5f};
#define N_SPECIALS ((int64_t)(sizeof(SPECIALS) / sizeof(SPECIALS[0])))

static tf_cpu_tensor host_tensor(void *data, tf_dtype dtype) {
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data, t.dtype = dtype, t.rank = 1, t.shape[0] = N_SPECIALS, t.count = N_SPECIALS;
  return t;
}

static void cpu_cast(const tf_cpu_tensor *x, const tf_cpu_tensor *y) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = y->dtype;
  tf_cpu_context context = {1, 1, 0, 0};
  tf_cpu_args args = {TF_OP_CAST, &attrs, 1, x, 1, y, NULL, 0, &context};
  tf_cpu_kernel_get(TF_OP_CAST, false)(&args);
}

static void test_cast_matrix(void) {
  const tf_dtype dtypes[] = {TF_F32, TF_F16, TF_BF16, TF_I32, TF_I64, TF_U8};
  char *device = NULL;
  if (cudaMalloc((void **)&device, 2 * 8 * N_SPECIALS) != cudaSuccess) {
    CHECK(&counts, false, "cast: cudaMalloc");
    return;
  }
  int pairs = 0, failed_before = counts.failed;
  for (int from = 0; from < 6; from++)
    for (int to = 0; to < 6; to++) {
      uint64_t source[N_SPECIALS], expected[N_SPECIALS], actual[N_SPECIALS];
      memset(expected, 0, sizeof(expected));
      memset(actual, 0, sizeof(actual));
      tf_cpu_tensor specials = host_tensor((void *)SPECIALS, TF_F32), x = host_tensor(source, dtypes[from]);
      tf_cpu_tensor y = host_tensor(expected, dtypes[to]);
      cpu_cast(&specials, &x); /* the specials as `from` values, by the CPU's rules */
      cpu_cast(&x, &y);
      tf_cuda_tensor cx = {device, dtypes[from], 1, {N_SPECIALS}, N_SPECIALS};
      tf_cuda_tensor cy = {device + 8 * N_SPECIALS, dtypes[to], 1, {N_SPECIALS}, N_SPECIALS};
      tf_attrs attrs;
      memset(&attrs, 0, sizeof(attrs));
      attrs.kind = TF_ATTR_CAST;
      attrs.u.cast.to = dtypes[to];
      tf_cuda_args args = {TF_OP_CAST, &attrs, 1, &cx, 1, &cy, NULL, 0, NULL, NULL, NULL};
      const int64_t from_bytes = N_SPECIALS * tf_dtype_size(dtypes[from]),
                    to_bytes = N_SPECIALS * tf_dtype_size(dtypes[to]);
      const char *error = cudaMemcpy(device, source, (size_t)from_bytes, cudaMemcpyHostToDevice) == cudaSuccess
                              ? tf_cuda_kernel_launch(&args)
                              : "upload";
      if (!error && cudaMemcpy(actual, cy.data, (size_t)to_bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        error = "download";
      CHECK(&counts, error == NULL, "cast %s -> %s: %s", tf_dtype_name(dtypes[from]), tf_dtype_name(dtypes[to]), error);
      CHECK(&counts, memcmp(expected, actual, (size_t)to_bytes) == 0, "cast %s -> %s differs from the CPU's",
            tf_dtype_name(dtypes[from]), tf_dtype_name(dtypes[to]));
      pairs++;
    }
  coverage.steps[TF_OP_CAST] += pairs;
  printf("%-4s %-48s %4d pairs\n", counts.failed == failed_before ? "ok" : "FAIL", "cast, every dtype pair, specials",
         pairs);
  cudaFree(device);
}

/* A reshape placed on its input (alias_of) must not move anything. */
static void test_reshape_alias(void) {
  float *device = NULL, host[12], back[12];
  for (int i = 0; i < 12; i++)
    host[i] = (float)i;
  if (cudaMalloc((void **)&device, sizeof(host)) != cudaSuccess) {
    CHECK(&counts, false, "reshape alias: cudaMalloc");
    return;
  }
  tf_cuda_tensor x = {device, TF_F32, 2, {3, 4}, 12}, y = {device, TF_F32, 2, {2, 6}, 12};
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_SHAPE;
  tf_cuda_args args = {TF_OP_RESHAPE, &attrs, 1, &x, 1, &y, NULL, 0, NULL, NULL, NULL};
  const char *error = cudaMemcpy(device, host, sizeof(host), cudaMemcpyHostToDevice) == cudaSuccess
                          ? tf_cuda_kernel_launch(&args)
                          : "upload";
  if (!error && cudaMemcpy(back, device, sizeof(back), cudaMemcpyDeviceToHost) != cudaSuccess)
    error = "download";
  CHECK(&counts, error == NULL && memcmp(host, back, sizeof(host)) == 0, "reshape onto its input: %s",
        error ? error : "changed the data");
  printf("ok   reshape onto its own input is a no-op\n");
  cudaFree(device);
}

static void check_coverage(void) {
#define TF_CUDA_COVERED(ID, name, ...)                                                                                 \
  CHECK(&counts, coverage.steps[TF_OP_##ID] > 0, "op %s never ran on CUDA", #name);                                    \
  printf("  %-22s %5d steps, worst %.3f of its tolerance\n", #name, coverage.steps[TF_OP_##ID],                        \
         coverage.worst[TF_OP_##ID]);
  printf("coverage (every row of core/op_table.h):\n");
  TF_OP_TABLE(TF_CUDA_COVERED)
#undef TF_CUDA_COVERED
}

int main(void) {
  int available = cuda_test_device();
  if (available != 0)
    return available;
  test_matmul();
  test_elementwise();
  test_reductions();
  test_softmax_and_norms();
  test_embedding_and_layout();
  test_conv_and_pool();
  test_attention();
  test_losses();
  test_cast_matrix();
  test_reshape_alias();
  check_coverage();
  return tf_test_finish("cuda ops", &counts);
}
