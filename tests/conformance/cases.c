/* THE table of op cases: every backend runs every row (conformance.h). A row names a graph builder
 * and its operands; together the rows' plans hold every op of the op table, and the suite fails
 * for an op that none holds. Sizes are awkward on purpose (1, primes, not multiples of 32, of the
 * Vulkan workgroups or of the CUDA tiles), and some rows are large enough to take the kernels'
 * other paths: split column sums, multi-block partials, the embedding sort across blocks, several
 * im2col chunks, every attention head-width variant, the subgroup variants' clusters, a second
 * grid-stride round. Unless a row says otherwise its data is f32 normal values, its training uses
 * SGD (conformance.h) and its end-to-end tolerance is the "sums" one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_builders.h"

/* ---- builders ---- */

static void build_matmul(tf_graph *g, const conf_case *c) {
  finish_probe(
      g, c,
      tf_matmul(g, param(g, c, "a", &c->shapes[0]), param(g, c, "b", &c->shapes[1]), c->transpose_a, c->transpose_b));
}

static void build_binary(tf_graph *g, const conf_case *c) {
  tf_tensor_id a = param(g, c, "a", &c->shapes[0]);
  tf_tensor_id b = c->op == TF_OP_DIV ? positive(g, c, "b", &c->shapes[1]) : param(g, c, "b", &c->shapes[1]);
  finish_probe(g, c, tf_graph_node(g, c->op, (tf_tensor_id[]){a, b}, 2, NULL));
}

/* x uniform in [lo, hi]: an op's domain (asin's), or away from its poles (tan's). */
static tf_tensor_id uniform(tf_graph *g, const conf_case *c, const dims *s, double lo, double hi) {
  return stored(g, c, tf_graph_parameter(g, "x", TF_F32, shape_of(s), tf_init_make(TF_INIT_UNIFORM, lo, hi)));
}

/* The unary op's input: normal, or within the op's domain. */
static tf_tensor_id unary_input(tf_graph *g, const conf_case *c) {
  switch (c->op) {
  case TF_OP_LOG:
  case TF_OP_SQRT:
  case TF_OP_RSQRT: return positive(g, c, "x", &c->shapes[0]);
  case TF_OP_ASIN:
  case TF_OP_ACOS:
  case TF_OP_ATANH: return uniform(g, c, &c->shapes[0], -0.95, 0.95);
  case TF_OP_TAN: return uniform(g, c, &c->shapes[0], -1.3, 1.3);
  case TF_OP_ACOSH: return uniform(g, c, &c->shapes[0], 1.05, 4.0);
  default: return param(g, c, "x", &c->shapes[0]);
  }
}

static void build_unary(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = unary_input(g, c);
  finish_probe(g, c,
               c->op == TF_OP_GELU         ? tf_gelu(g, x, c->approximate)
               : c->op == TF_OP_LEAKY_RELU ? tf_leaky_relu(g, x, c->slope)
               : c->op == TF_OP_CLIP       ? tf_clip(g, x, c->lo, c->hi)
                                           : tf_unary(g, c->op, x));
}

/* A unary op over x uniform in [lo, hi]: every branch of its kernels (softplus over [-30, 30]: x > 20
 * returns x, and the tiny outputs of log1p(exp(x)); sinh's and cosh's past 20, asinh's past 2^12;
 * asinh, atanh and sinh near 0, where log(1 + x) or e^x - e^-x would lose the small result).
 * The rows of sinh, cosh, asinh and acosh run forward only: their values, or the x² of their
 * gradients, pass f16's range, and a step of SGD on gradients of 1e12 leaves nothing to compare (the
 * [3,257] rows check their gradients). */
static void build_unary_wide(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_unary(g, c->op, uniform(g, c, &c->shapes[0], c->lo, c->hi)));
}

/* gelu of an activation (a + b), whose gradient reads it: with settings.gelu_pair the training plan
 * holds gelu_pair and a mul in place of gelu and gelu_grad (compiler/gelu_pair.c). */
static void build_gelu_pair(tf_graph *g, const conf_case *c) {
  tf_tensor_id a = param(g, c, "a", &c->shapes[0]), b = param(g, c, "b", &c->shapes[0]);
  finish_probe(g, c, tf_gelu(g, tf_graph_node(g, TF_OP_ADD, (tf_tensor_id[]){a, b}, 2, NULL), c->approximate));
}

/* x * stop_gradient(x): the value x^2, the gradient x (not 2x), which the f64 reference's plan,
 * compiled from the same graph, also says; tests/autodiff checks it against the formula. */
static void build_stop_gradient(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  finish_probe(g, c, tf_mul(g, x, tf_unary(g, TF_OP_STOP_GRADIENT, x)));
}

/* x * step(x + x), step one of floor, ceil, round and sign: the steps' values over several integers,
 * and the gradient step(2x) alone (none passes through a step, as none through stop_gradient). */
static void build_step(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  finish_probe(g, c, tf_mul(g, x, tf_unary(g, c->op, tf_add(g, x, x))));
}

/* keep(a, relu(sign(b))): a where b > 0, 0 elsewhere, broadcast; the gradient keep(dy, mask) summed
 * to a's shape, none to b (sign passes none, and keep none to its mask). */
static void build_keep(tf_graph *g, const conf_case *c) {
  tf_tensor_id a = param(g, c, "a", &c->shapes[0]), b = param(g, c, "b", &c->shapes[1]);
  finish_probe(g, c, tf_keep(g, a, tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_SIGN, b))));
}

/* keep(log x, relu(sign(x))): log x where x > 0, and 0, not log's NaN, where x < 0, forward and
 * backward (dy 0 there divided by x). */
static void build_keep_log(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  finish_probe(g, c, tf_keep(g, tf_unary(g, TF_OP_LOG, x), tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_SIGN, x))));
}

static void build_dropout(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_dropout(g, param(g, c, "x", &c->shapes[0]), 0.3f));
}

static void build_reduce(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_reduce(g, c->op, param(g, c, "x", &c->shapes[0]), c->axes, c->n_axes, c->keepdims));
}

/* a + bias broadcast: the bias gradient is a sum_to. */
static void build_bias_add(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_add(g, param(g, c, "a", &c->shapes[0]), param(g, c, "bias", &c->shapes[1])));
}

static void build_softmax(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  finish_probe(g, c, c->op == TF_OP_LOG_SOFTMAX ? tf_log_softmax(g, x, c->axes[0]) : tf_softmax(g, x, c->axes[0]));
}

/* x [rows, width], gamma (and beta) [width]. */
static void build_norm(tf_graph *g, const conf_case *c) {
  const dims width = DIMS(c->shapes[0].size[1]);
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]), gamma = param(g, c, "gamma", &width);
  finish_probe(g, c,
               c->op == TF_OP_RMS_NORM
                   ? tf_rms_norm(g, x, gamma, 1e-5f)
                   : tf_layer_norm(g, x, gamma, c->beta ? param(g, c, "beta", &width) : TF_NO_TENSOR, 1e-5f));
}

static void build_batch_norm(tf_graph *g, const conf_case *c) {
  const dims channels = DIMS(c->shapes[0].size[1]);
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  tf_tensor_id gamma = param(g, c, "gamma", &channels), beta = param(g, c, "beta", &channels);
  finish_probe(g, c, tf_batch_norm(g, x, gamma, beta, 1e-5f));
}

/* batch_norm tracking running statistics, f32 constants whatever x's dtype: a training plan updates
 * them in place after the forward batch_norm of each micro-batch (batch_norm_running). */
static void build_batch_norm_tracked(tf_graph *g, const conf_case *c) {
  const dims channels = DIMS(c->shapes[0].size[1]);
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]);
  tf_tensor_id gamma = param(g, c, "gamma", &channels), beta = param(g, c, "beta", &channels);
  tf_tensor_id mean =
      tf_graph_constant(g, "running_mean", TF_F32, shape_of(&channels), tf_init_make(TF_INIT_UNIFORM, -1.0, 1.0));
  tf_tensor_id var =
      tf_graph_constant(g, "running_var", TF_F32, shape_of(&channels), tf_init_make(TF_INIT_UNIFORM, 0.5, 2.0));
  finish_probe(g, c, tf_batch_norm_tracked(g, x, gamma, beta, mean, var, 1e-5f, 0.1f));
}

static void build_embedding(tf_graph *g, const conf_case *c) {
  tf_tensor_id ids = tf_graph_input(g, "ids", c->dtype, shape_of(&c->shapes[0]));
  finish_probe(g, c, tf_embedding(g, ids, param(g, c, "table", &c->shapes[1])));
}

static void build_reshape(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_reshape(g, param(g, c, "x", &c->shapes[0]), shape_of(&c->shapes[1])));
}

static void build_transpose(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_transpose(g, param(g, c, "x", &c->shapes[0]), c->axes, c->n_axes));
}

static void build_concat(tf_graph *g, const conf_case *c) {
  tf_tensor_id parts[3] = {param(g, c, "a", &c->shapes[0]), param(g, c, "b", &c->shapes[1]),
                           param(g, c, "c", &c->shapes[2])};
  finish_probe(g, c, tf_concat(g, parts, 3, c->axes[0]));
}

static void build_slice(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_slice(g, param(g, c, "x", &c->shapes[0]), c->axes[0], c->slice[0], c->slice[1], c->slice[2]));
}

static void build_expand(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_expand(g, param(g, c, "x", &c->shapes[0]), shape_of(&c->shapes[1])));
}

/* conv2d or conv_transpose2d of x (shapes[0]) with w (shapes[1]). */
static void build_conv(tf_graph *g, const conf_case *c) {
  const bool transposed = c->op == TF_OP_CONV_TRANSPOSE2D;
  const dims channels = DIMS(transposed ? c->shapes[1].size[1] * c->conv.groups : c->shapes[1].size[0]);
  tf_tensor_id bias = c->bias ? param(g, c, "bias", &channels) : TF_NO_TENSOR;
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]), w = param(g, c, "w", &c->shapes[1]);
  finish_probe(g, c, transposed ? tf_conv_transpose2d(g, x, w, bias, &c->conv) : tf_conv2d(g, x, w, bias, &c->conv));
}

static void build_conv1d(tf_graph *g, const conf_case *c) {
  const dims channels = DIMS(c->shapes[1].size[0]);
  tf_tensor_id bias = c->bias ? param(g, c, "bias", &channels) : TF_NO_TENSOR;
  finish_probe(g, c,
               tf_conv1d(g, param(g, c, "x", &c->shapes[0]), param(g, c, "w", &c->shapes[1]), bias, c->conv.stride[0],
                         c->conv.padding[0], c->conv.dilation[0], c->conv.groups));
}

static void build_pool(tf_graph *g, const conf_case *c) {
  finish_probe(g, c, tf_pool2d(g, c->op, param(g, c, "x", &c->shapes[0]), &c->pool));
}

/* q [N, Tq, width], k and v [N, Tk, width]. */
static void build_attention(tf_graph *g, const conf_case *c) {
  tf_tensor_id q = param(g, c, "q", &c->shapes[0]), k = param(g, c, "k", &c->shapes[1]),
               v = param(g, c, "v", &c->shapes[1]);
  finish_probe(g, c, tf_attention(g, q, k, v, c->heads, c->causal));
}

/* logits (shapes[0]), labels of dtype (shapes[1]). */
static void build_cross_entropy(tf_graph *g, const conf_case *c) {
  tf_tensor_id labels = tf_graph_label(g, "labels", c->dtype, shape_of(&c->shapes[1]));
  tf_test_finish_loss(g, tf_cross_entropy(g, param(g, c, "logits", &c->shapes[0]), labels, c->ignore_index));
}

/* logits (shapes[0]) [N, T, C], labels of dtype (shapes[1]) [N, S], and input lengths of dtype when
 * shapes[2] has a rank: the data's integers end targets (negatives) and run past the classes. */
static void build_ctc_loss(tf_graph *g, const conf_case *c) {
  tf_tensor_id labels = tf_graph_label(g, "labels", c->dtype, shape_of(&c->shapes[1]));
  tf_tensor_id lengths =
      c->shapes[2].rank > 0 ? tf_graph_label(g, "input_lengths", c->dtype, shape_of(&c->shapes[2])) : TF_NO_TENSOR;
  tf_test_finish_loss(
      g, tf_ctc_loss(g, param(g, c, "logits", &c->shapes[0]), labels, lengths, c->blank, c->zero_infinity));
}

/* x (shapes[0]), weight (shapes[1]: [V, d] with transpose_b, else [d, V]), labels of dtype
 * (shapes[2]), with a bias [V] parameter when asked (input 3; the builder API has no bias argument,
 * so that node is made directly: its gradient is linear_cross_entropy_bias_grad's). */
static tf_tensor_id head_loss(tf_graph *g, const conf_case *c, bool bias) {
  tf_tensor_id labels = tf_graph_label(g, "labels", c->dtype, shape_of(&c->shapes[2]));
  tf_tensor_id x = param(g, c, "x", &c->shapes[0]), w = param(g, c, "w", &c->shapes[1]);
  if (!bias)
    return tf_linear_cross_entropy(g, x, w, c->transpose_b, labels, c->ignore_index, c->chunk_rows);
  const dims classes = DIMS(c->shapes[1].size[c->transpose_b ? 0 : 1]);
  tf_tensor_id b = param(g, c, "bias", &classes);
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_CROSS_ENTROPY;
  attrs.u.cross_entropy.ignore_index = c->ignore_index;
  attrs.u.cross_entropy.transpose_weight = c->transpose_b;
  attrs.u.cross_entropy.chunk_rows = c->chunk_rows;
  return tf_graph_node(g, TF_OP_LINEAR_CROSS_ENTROPY, (tf_tensor_id[]){x, w, labels, b}, 4, &attrs);
}

static void build_linear_cross_entropy(tf_graph *g, const conf_case *c) {
  tf_test_finish_loss(g, head_loss(g, c, false));
}

static void build_linear_cross_entropy_bias(tf_graph *g, const conf_case *c) {
  tf_test_finish_loss(g, head_loss(g, c, true));
}

/* The head's loss times a constant 0.5: its gradient step reads 0.5, not the loss seed, so it stays
 * a step of its own (linear_cross_entropy_grad, _bias_grad) even with one micro-batch per step. */
static void build_linear_cross_entropy_halved(tf_graph *g, const conf_case *c) {
  tf_tensor_id half = tf_graph_constant(g, "half", TF_F32, tf_shape_from(NULL, 0), tf_init_make(TF_INIT_FILL, 0.5, 0));
  tf_test_finish_loss(g, tf_mul(g, head_loss(g, c, c->op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD), half));
}

static void build_pair_loss(tf_graph *g, const conf_case *c) {
  tf_tensor_id target = stored(g, c, tf_graph_label(g, "target", TF_F32, shape_of(&c->shapes[0])));
  tf_tensor_id p = param(g, c, "p", &c->shapes[0]);
  tf_test_finish_loss(g, c->op == TF_OP_BCE_WITH_LOGITS ? tf_bce_with_logits(g, p, target) : tf_mse(g, p, target));
}

/* One weight w [N, K] (shapes[1]) read by two products, x1 w^T and x2^T w^T (x1 shapes[0] [M, K], x2
 * shapes[2] [K, M]): its gradient arrives in two parts, the second added to a sum that already
 * holds the first (matmul_accumulate on a non-zero accumulator, with either optimizer). */
static void build_matmul_shared(tf_graph *g, const conf_case *c) {
  tf_tensor_id w = param(g, c, "w", &c->shapes[1]);
  tf_tensor_id y1 = tf_matmul(g, param(g, c, "x1", &c->shapes[0]), w, false, true);
  tf_tensor_id y2 = tf_matmul(g, param(g, c, "x2", &c->shapes[2]), w, true, true);
  finish_probe(g, c, tf_add(g, y1, y2));
}

/* ---- the table ---- */

#define ADAMW .settings.optimizer = CONF_ADAMW
#define MATH .settings.family = CONF_MATH
#define EXACT .settings.family = CONF_EXACT
#define HALF_PATTERNS                                                                                                  \
  EXACT, .settings.data.patterns = true, .settings.forward_only = true, .settings.needs = CONF_NEEDS_HALF
#define LONG_SUMS .settings.family = CONF_LONG_SUMS
#define CONV(sh, sw, ph, pw, dh, dw, oh, ow, g)                                                                        \
  { {sh, sw}, {ph, pw}, {dh, dw}, {oh, ow}, g }
#define POOL(kh, kw, sh, sw, ph, pw)                                                                                   \
  {                                                                                                                    \
    {kh, kw}, {sh, sw}, { ph, pw }                                                                                     \
  }

static const conf_case cases[] = {
    /* matmul: transposes, batches, broadcasting, a 1x1, and one large enough for several tiles */
    {"matmul [13,67]x[67,29]", build_matmul, .shapes = {DIMS(13, 67), DIMS(67, 29)}},
    {"matmul A^T [67,13]", build_matmul, .shapes = {DIMS(67, 13), DIMS(67, 29)}, .transpose_a = true, ADAMW},
    {"matmul B^T [29,67]", build_matmul, .shapes = {DIMS(13, 67), DIMS(29, 67)}, .transpose_b = true},
    {"matmul A^T B^T", build_matmul, .shapes = {DIMS(67, 13), DIMS(29, 67)}, .transpose_a = true, .transpose_b = true,
     ADAMW},
    {"matmul [1,1]x[1,1]", build_matmul, .shapes = {DIMS(1, 1), DIMS(1, 1)}},
    /* adamw8bit: the [67,29] weight is 7 blocks of 256 and a partial one of 151 */
    {"matmul [13,67]x[67,29] adamw8bit", build_matmul, .shapes = {DIMS(13, 67), DIMS(67, 29)},
     .settings.optimizer = CONF_ADAMW8BIT},
    /* bf16/f16 parameters with f32 masters (compile param_dtype): the products read widened copies,
     * the gradients are half, widened for the update of the master, which cast_into writes back */
    {"matmul [13,67]x[67,29] bf16 params, f32 masters", build_matmul, .shapes = {DIMS(13, 67), DIMS(67, 29)}, ADAMW,
     .settings.params = TF_BF16},
    {"matmul [13,67]x[67,29] f16 params, 2 micro-batches", build_matmul, .shapes = {DIMS(13, 67), DIMS(67, 29)},
     .settings.params = TF_F16},
    {"matmul batched [3,13,67]x[3,67,29]", build_matmul, .shapes = {DIMS(3, 13, 67), DIMS(3, 67, 29)}, ADAMW},
    {"matmul linear [2,3,13,5]x[5,7]", build_matmul, .shapes = {DIMS(2, 3, 13, 5), DIMS(5, 7)}},
    {"matmul broadcast [1,3,13,5]x[2,1,5,7]", build_matmul, .shapes = {DIMS(1, 3, 13, 5), DIMS(2, 1, 5, 7)}, ADAMW},
    {"matmul broadcast A^T [3,5,13]x[5,7]", build_matmul, .shapes = {DIMS(3, 5, 13), DIMS(5, 7)}, .transpose_a = true},
    {"matmul [2,1,3,4,6]x[3,1,6,5] (loops)", build_matmul, .shapes = {DIMS(2, 1, 3, 4, 6), DIMS(3, 1, 6, 5)}, ADAMW},
    /* These two's gradients sum 257 and 260 products of N(0, 1) values: results up to about 60, where the
     * sums family's absolute 1e-5 is 2e-7 of the largest, a few ulps; end to end they are held relative to
     * it (LONG_SUMS). The H100's Vulkan driver summed grad(a)[3400] of the second 1.5e-5 from the CPU's (0.0236, where
     * the buffer's standard deviation is about 16; sixth lend). */
    {"matmul [131,257]x[257,65]", build_matmul, .shapes = {DIMS(131, 257), DIMS(257, 65)}, LONG_SUMS},
    /* Past 128 on M and N (the big-tile Vulkan matmul's partial tiles on both axes, and in each gradient). */
    {"matmul [130,40]x[40,260]", build_matmul, .shapes = {DIMS(130, 40), DIMS(40, 260)}, LONG_SUMS},
    /* matmul_accumulate: with SGD's 2 micro-batches each 2-D gradient product of the rows above adds
     * itself to its accumulator (transposes (F,T), (T,F), (F,F)); these add (T,T), the weight of a
     * batched activation (one product over the flattened rows, as a linear layer's), and a weight
     * read twice (its second part added onto a non-zero sum, step by step too). */
    {"matmul_accumulate (F,T) (F,F): matmul A^T", build_matmul, .shapes = {DIMS(67, 13), DIMS(67, 29)},
     .transpose_a = true},
    {"matmul_accumulate (T,T): matmul A^T B^T", build_matmul, .shapes = {DIMS(67, 13), DIMS(29, 67)},
     .transpose_a = true, .transpose_b = true},
    {"matmul_accumulate: linear [2,13,5]x[7,5]^T", build_matmul, .shapes = {DIMS(2, 13, 5), DIMS(7, 5)},
     .transpose_b = true},
    {"matmul_accumulate: shared w [29,67], 2 parts", build_matmul_shared,
     .shapes = {DIMS(13, 67), DIMS(29, 67), DIMS(67, 13)}},
    {"matmul_accumulate: shared w, 1 micro-batch", build_matmul_shared,
     .shapes = {DIMS(13, 67), DIMS(29, 67), DIMS(67, 13)}, ADAMW},

    /* elementwise binaries with broadcasting, unaries and their gradients, dropout, cast */
    {"add [5,7,3] (+) [7,1]", build_binary, .op = TF_OP_ADD, .shapes = {DIMS(5, 7, 3), DIMS(7, 1)}},
    {"sub [5,7,3] (+) [7,1]", build_binary, .op = TF_OP_SUB, .shapes = {DIMS(5, 7, 3), DIMS(7, 1)}},
    {"mul [5,7,3] (+) [7,1]", build_binary, .op = TF_OP_MUL, .shapes = {DIMS(5, 7, 3), DIMS(7, 1)}},
    {"div [5,7,3] (+) [7,1]", build_binary, .op = TF_OP_DIV, .shapes = {DIMS(5, 7, 3), DIMS(7, 1)}},
    {"add [1] + [4,1,259]", build_binary, .op = TF_OP_ADD, .shapes = {DIMS(1), DIMS(4, 1, 259)}},
    {"keep [5,7,3] where [7,1] > 0", build_keep, .shapes = {DIMS(5, 7, 3), DIMS(7, 1)}},
    {"keep log(x) where x > 0 [3,257]", build_keep_log, .shapes = {DIMS(3, 257)}, MATH},
    {"neg (+ grad) [3,257]", build_unary, .op = TF_OP_NEG, .shapes = {DIMS(3, 257)}, MATH},
    {"exp (+ grad) [3,257]", build_unary, .op = TF_OP_EXP, .shapes = {DIMS(3, 257)}, MATH},
    {"log (+ grad) [3,257]", build_unary, .op = TF_OP_LOG, .shapes = {DIMS(3, 257)}, MATH},
    {"sqrt (+ grad) [3,257]", build_unary, .op = TF_OP_SQRT, .shapes = {DIMS(3, 257)}, MATH},
    {"rsqrt (+ grad) [3,257]", build_unary, .op = TF_OP_RSQRT, .shapes = {DIMS(3, 257)}, MATH},
    {"relu (+ grad) [3,257]", build_unary, .op = TF_OP_RELU, .shapes = {DIMS(3, 257)}, MATH},
    {"abs (+ grad) [3,257]", build_unary, .op = TF_OP_ABS, .shapes = {DIMS(3, 257)}, MATH},
    {"erf (+ grad) [3,257]", build_unary, .op = TF_OP_ERF, .shapes = {DIMS(3, 257)}, MATH},
    {"sin (+ grad) [3,257]", build_unary, .op = TF_OP_SIN, .shapes = {DIMS(3, 257)}, MATH},
    {"cos (+ grad) [3,257]", build_unary, .op = TF_OP_COS, .shapes = {DIMS(3, 257)}, MATH},
    {"asin (+ grad) [3,257]", build_unary, .op = TF_OP_ASIN, .shapes = {DIMS(3, 257)}, MATH},
    {"acos (+ grad) [3,257]", build_unary, .op = TF_OP_ACOS, .shapes = {DIMS(3, 257)}, MATH},
    {"atan (+ grad) [3,257]", build_unary, .op = TF_OP_ATAN, .shapes = {DIMS(3, 257)}, MATH},
    {"tan (+ grad) [3,257]", build_unary, .op = TF_OP_TAN, .shapes = {DIMS(3, 257)}, MATH},
    {"sinh (+ grad) [3,257]", build_unary, .op = TF_OP_SINH, .shapes = {DIMS(3, 257)}, MATH},
    {"cosh (+ grad) [3,257]", build_unary, .op = TF_OP_COSH, .shapes = {DIMS(3, 257)}, MATH},
    {"asinh (+ grad) [3,257]", build_unary, .op = TF_OP_ASINH, .shapes = {DIMS(3, 257)}, MATH},
    {"acosh (+ grad) [3,257]", build_unary, .op = TF_OP_ACOSH, .shapes = {DIMS(3, 257)}, MATH},
    {"atanh (+ grad) [3,257]", build_unary, .op = TF_OP_ATANH, .shapes = {DIMS(3, 257)}, MATH},
    {"x * stop_gradient(x) [3,257]", build_stop_gradient, .shapes = {DIMS(3, 257)}, MATH},
    {"x * floor(2x) [3,257]", build_step, .op = TF_OP_FLOOR, .shapes = {DIMS(3, 257)}, MATH},
    {"x * ceil(2x) [3,257]", build_step, .op = TF_OP_CEIL, .shapes = {DIMS(3, 257)}, MATH},
    {"x * round(2x) [3,257]", build_step, .op = TF_OP_ROUND, .shapes = {DIMS(3, 257)}, MATH},
    {"x * sign(2x) [3,257]", build_step, .op = TF_OP_SIGN, .shapes = {DIMS(3, 257)}, MATH},
    {"silu (+ grad) [3,257]", build_unary, .op = TF_OP_SILU, .shapes = {DIMS(3, 257)}, MATH},
    {"sigmoid (+ grad) [3,257]", build_unary, .op = TF_OP_SIGMOID, .shapes = {DIMS(3, 257)}, MATH},
    {"tanh (+ grad) [3,257]", build_unary, .op = TF_OP_TANH, .shapes = {DIMS(3, 257)}, MATH},
    {"softplus (+ grad) [3,257]", build_unary, .op = TF_OP_SOFTPLUS, .shapes = {DIMS(3, 257)}, MATH},
    {"softplus over [-30, 30] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_SOFTPLUS, .shapes = {DIMS(5, 131)},
     .lo = -30, .hi = 30, MATH},
    {"atan over [-1e8, 1e8] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_ATAN, .shapes = {DIMS(5, 131)}, .lo = -1e8,
     .hi = 1e8, MATH},
    {"atan over [-30, 30] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_ATAN, .shapes = {DIMS(5, 131)}, .lo = -30,
     .hi = 30, MATH},
    {"sinh over [-30, 30] [5,131]", build_unary_wide, .op = TF_OP_SINH, .shapes = {DIMS(5, 131)}, .lo = -30, .hi = 30,
     MATH, .settings.forward_only = true},
    {"cosh over [-30, 30] [5,131]", build_unary_wide, .op = TF_OP_COSH, .shapes = {DIMS(5, 131)}, .lo = -30, .hi = 30,
     MATH, .settings.forward_only = true},
    {"asinh over [-0.01, 0.01] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_ASINH, .shapes = {DIMS(5, 131)},
     .lo = -0.01, .hi = 0.01, MATH},
    {"atanh over [-0.01, 0.01] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_ATANH, .shapes = {DIMS(5, 131)},
     .lo = -0.01, .hi = 0.01, MATH},
    {"sinh over [-0.01, 0.01] (+ grad) [5,131]", build_unary_wide, .op = TF_OP_SINH, .shapes = {DIMS(5, 131)},
     .lo = -0.01, .hi = 0.01, MATH},
    {"asinh over [-1e4, 1e4] [5,131]", build_unary_wide, .op = TF_OP_ASINH, .shapes = {DIMS(5, 131)}, .lo = -1e4,
     .hi = 1e4, MATH, .settings.forward_only = true},
    {"acosh over [1, 1e4] [5,131]", build_unary_wide, .op = TF_OP_ACOSH, .shapes = {DIMS(5, 131)}, .lo = 1, .hi = 1e4,
     MATH, .settings.forward_only = true},
    {"gelu erf (+ grad) [3,257]", build_unary, .op = TF_OP_GELU, .shapes = {DIMS(3, 257)}, MATH},
    {"gelu tanh (+ grad) [3,257]", build_unary, .op = TF_OP_GELU, .shapes = {DIMS(3, 257)}, .approximate = true, MATH},
    {"gelu_pair erf of a + b [3,257]", build_gelu_pair, .shapes = {DIMS(3, 257)}, MATH, .settings.gelu_pair = true},
    {"gelu_pair tanh of a + b [5,131]", build_gelu_pair, .shapes = {DIMS(5, 131)}, .approximate = true, MATH,
     .settings.gelu_pair = true},
    {"leaky_relu 0.2 (+ grad) [3,257]", build_unary, .op = TF_OP_LEAKY_RELU, .shapes = {DIMS(3, 257)}, .slope = 0.2f,
     MATH},
    {"leaky_relu -1.5 (+ grad) [5,131]", build_unary, .op = TF_OP_LEAKY_RELU, .shapes = {DIMS(5, 131)}, .slope = -1.5f,
     MATH},
    {"clip [-0.5, 0.8] (+ grad) [3,257]", build_unary, .op = TF_OP_CLIP, .shapes = {DIMS(3, 257)}, .lo = -0.5f,
     .hi = 0.8f, MATH},
    {"clip [-inf, 0.25] (+ grad) [5,131]", build_unary, .op = TF_OP_CLIP, .shapes = {DIMS(5, 131)}, .lo = -INFINITY,
     .hi = 0.25f, MATH},
    {"dropout 0.3 (+ grad) [7,131]", build_dropout, .shapes = {DIMS(7, 131)}, EXACT},
    {"cast f32->f32 (+ grad) [7,19]", build_cast, .shapes = {DIMS(7, 19)}, .dtype = TF_F32, EXACT},
    {"cast f32->f16->f32 (+ grad)", build_cast, .shapes = {DIMS(7, 19)}, .dtype = TF_F16, EXACT,
     .settings.needs = CONF_NEEDS_HALF},
    {"cast f32->bf16->f32 (+ grad)", build_cast, .shapes = {DIMS(7, 19)}, .dtype = TF_BF16, EXACT,
     .settings.needs = CONF_NEEDS_HALF},
    {"cast f32 -> i32 (saturating) -> f32", build_cast_saturating, .shapes = {DIMS(5, 67)}, EXACT,
     .settings.forward_only = true},
    {"cast f32 -> u8 (saturating) -> f32", build_cast_u8, .shapes = {DIMS(5, 67)}, EXACT,
     .settings.forward_only = true},
    {"cast f32 -> i64 (truncating) -> f32", build_cast_i64, .shapes = {DIMS(5, 67)}, .slope = 3000.0f, EXACT,
     .settings.forward_only = true},
    {"cast f32 -> i64 (saturating) -> f32", build_cast_i64, .shapes = {DIMS(5, 67)}, .slope = 3e19f, EXACT,
     .settings.forward_only = true},
    {"cast f32 -> i64 -> i32 (wrapping) -> i64 -> f32", build_cast_i32_i64, .shapes = {DIMS(5, 67)}, EXACT,
     .settings.forward_only = true},
    {"cast f32 -> i32 -> u8 (low byte) -> i64 -> u8 -> i32 -> f32", build_cast_bytes, .shapes = {DIMS(5, 67)}, EXACT,
     .settings.forward_only = true},
    {"u8 transpose, slice, expand, concat", build_layout_bytes, .shapes = {DIMS(5, 13)}, EXACT,
     .settings.forward_only = true},
    /* the half casts bit for bit: ties, overflow, NaNs, infinities, signed zeros, subnormals; odd counts */
    {"cast f32->f16->f32 special values + random bits [4097]", build_cast_f32_patterns, .shapes = {DIMS(4097)},
     .dtype = TF_F16, HALF_PATTERNS},
    {"cast f32->bf16->f32 special values + random bits [4097]", build_cast_f32_patterns, .shapes = {DIMS(4097)},
     .dtype = TF_BF16, HALF_PATTERNS},
    {"cast f16->f32->f16 every f16 [65537]", build_cast_half_patterns, .shapes = {DIMS(65537)}, .dtype = TF_F16,
     HALF_PATTERNS},
    {"cast bf16->f32->bf16 every bf16 [65537]", build_cast_half_patterns, .shapes = {DIMS(65537)}, .dtype = TF_BF16,
     HALF_PATTERNS},

    /* reductions: axes, keepdims, strided groups, few long groups, partials, split columns */
    {"sum axis 0 [5,7,11]", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(5, 7, 11)}, .axes = {0}, .n_axes = 1},
    {"sum axes 1,2 keepdims", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(5, 7, 11)}, .axes = {1, 2}, .n_axes = 2,
     .keepdims = true},
    {"sum all [5,7,11]", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(5, 7, 11)}},
    {"sum all [3,300,257] (partials)", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(3, 300, 257)}},
    {"sum axes 0,2 (strided)", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(5, 7, 11)}, .axes = {0, 2}, .n_axes = 2},
    {"sum axis 0 [1000,3,7] (split columns)", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(1000, 3, 7)}, .axes = {0},
     .n_axes = 1},
    {"sum all [37,101]", build_reduce, .op = TF_OP_SUM, .shapes = {DIMS(37, 101)}},
    {"mean axis -1", build_reduce, .op = TF_OP_MEAN, .shapes = {DIMS(5, 7, 11)}, .axes = {-1}, .n_axes = 1},
    {"mean axes 0,2 keepdims", build_reduce, .op = TF_OP_MEAN, .shapes = {DIMS(5, 7, 11)}, .axes = {0, 2}, .n_axes = 2,
     .keepdims = true},
    {"mean axis -1 [3,1031]->[3]", build_reduce, .op = TF_OP_MEAN, .shapes = {DIMS(3, 1031)}, .axes = {-1},
     .n_axes = 1},
    {"max axis 1 (+ max_grad)", build_reduce, .op = TF_OP_MAX, .shapes = {DIMS(5, 7, 11)}, .axes = {1}, .n_axes = 1},
    {"max axis 2 (+ max_grad)", build_reduce, .op = TF_OP_MAX, .shapes = {DIMS(5, 7, 11)}, .axes = {2}, .n_axes = 1},
    {"max all (+ max_grad)", build_reduce, .op = TF_OP_MAX, .shapes = {DIMS(5, 7, 11)}},
    {"max all [37,101] (+ max_grad)", build_reduce, .op = TF_OP_MAX, .shapes = {DIMS(37, 101)}},
    {"max axis 0 [37,101] (+ max_grad)", build_reduce, .op = TF_OP_MAX, .shapes = {DIMS(37, 101)}, .axes = {0},
     .n_axes = 1},
    {"sum_to (bias gradient) [300,37]->[37]", build_bias_add, .shapes = {DIMS(300, 37), DIMS(37)}},
    {"sum_to (bias gradient) [3000,37]->[37]", build_bias_add, .shapes = {DIMS(3000, 37), DIMS(37)}, LONG_SUMS},
    {"sum_to (rows) [3000,3]->[3000,1]", build_bias_add, .shapes = {DIMS(3000, 3), DIMS(3000, 1)}},

    /* softmax and log_softmax over the last and a middle axis, long rows (1031 is prime) */
    {"softmax axis 1 (+ grad) [3,13,5]", build_softmax, .op = TF_OP_SOFTMAX, .shapes = {DIMS(3, 13, 5)}, .axes = {1},
     ADAMW},
    {"softmax axis 2 (+ grad) [3,13,5]", build_softmax, .op = TF_OP_SOFTMAX, .shapes = {DIMS(3, 13, 5)}, .axes = {2}},
    {"log_softmax axis 1 (+ grad) [3,13,5]", build_softmax, .op = TF_OP_LOG_SOFTMAX, .shapes = {DIMS(3, 13, 5)},
     .axes = {1}, ADAMW},
    {"log_softmax axis 2 (+ grad) [3,13,5]", build_softmax, .op = TF_OP_LOG_SOFTMAX, .shapes = {DIMS(3, 13, 5)},
     .axes = {2}},
    {"softmax [4,1000] (+ grad)", build_softmax, .op = TF_OP_SOFTMAX, .shapes = {DIMS(4, 1000)}, .axes = {-1}},
    {"softmax axis 1 (+ grad) [3,1031]", build_softmax, .op = TF_OP_SOFTMAX, .shapes = {DIMS(3, 1031)}, .axes = {1}},
    {"softmax axis 1 (+ grad) [4,1031,3]", build_softmax, .op = TF_OP_SOFTMAX, .shapes = {DIMS(4, 1031, 3)},
     .axes = {1}},
    {"log_softmax axis 1 (+ grad) [3,1031]", build_softmax, .op = TF_OP_LOG_SOFTMAX, .shapes = {DIMS(3, 1031)},
     .axes = {1}},
    {"log_softmax axis 1 (+ grad) [4,1031,3]", build_softmax, .op = TF_OP_LOG_SOFTMAX, .shapes = {DIMS(4, 1031, 3)},
     .axes = {1}},

    /* layer_norm (with and without beta) and rms_norm: widths 1, prime, long; many rows */
    {"layer_norm (+ grad) [6,37]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 37)}, .beta = true},
    {"layer_norm no beta (+ grad) [6,37]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 37)}},
    {"rms_norm (+ grad) [6,37]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(6, 37)}},
    {"layer_norm (+ grad) [6,300]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 300)}, .beta = true},
    {"layer_norm no beta (+ grad) [6,300]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 300)}},
    {"rms_norm (+ grad) [6,300]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(6, 300)}},
    {"layer_norm (+ grad) [6,1]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 1)}, .beta = true},
    /* batch_norm: channels on axis 1, statistics over N and the spatial axes (none, one, two) */
    {"batch_norm (+ grad) [4,3,5,7]", build_batch_norm, .shapes = {DIMS(4, 3, 5, 7)}},
    {"batch_norm (+ grad) [5,6]", build_batch_norm, .shapes = {DIMS(5, 6)}},
    {"batch_norm (+ grad) [3,5,300]", build_batch_norm, .shapes = {DIMS(3, 5, 300)}},
    /* ... tracking running statistics (batch_norm_running). 70,001 channels: a second grid-stride
     * round; of 8 elements each, not 2, whose dx is 0 in exact arithmetic (xhat = +-1) and in float
     * only rounding noise, which the end-to-end check cannot hold to a tolerance */
    {"batch_norm running (+ grad) [4,3,5,7]", build_batch_norm_tracked, .shapes = {DIMS(4, 3, 5, 7)}},
    {"batch_norm running (+ grad) [5,6]", build_batch_norm_tracked, .shapes = {DIMS(5, 6)}},
    {"batch_norm running (+ grad) [3,5,300]", build_batch_norm_tracked, .shapes = {DIMS(3, 5, 300)}},
    {"batch_norm running (+ grad) [8,70001]", build_batch_norm_tracked, .shapes = {DIMS(8, 70001)}},
    {"layer_norm no beta (+ grad) [6,1]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 1)}},
    {"rms_norm (+ grad) [6,1]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(6, 1)}},
    {"layer_norm (+ grad) [6,1031]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 1031)}, .beta = true},
    {"layer_norm no beta (+ grad) [6,1031]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(6, 1031)}},
    {"rms_norm (+ grad) [6,1031]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(6, 1031)}},
    {"layer_norm (+ grad) [700,37]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(700, 37)}, .beta = true},
    {"layer_norm no beta (+ grad) [700,37]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(700, 37)}},
    {"rms_norm (+ grad) [700,37]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(700, 37)}},
    /* enough elements for the CPU's gradient by blocks of rows (4 blocks; 3 uneven ones) */
    {"layer_norm (+ grad) [600,128]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(600, 128)}, .beta = true},
    {"rms_norm (+ grad) [600,128]", build_norm, .op = TF_OP_RMS_NORM, .shapes = {DIMS(600, 128)}},
    {"layer_norm no beta (+ grad) [1001,65]", build_norm, .op = TF_OP_LAYER_NORM, .shapes = {DIMS(1001, 65)}},

    /* embedding: out-of-range ids (rows of zeros, no gradient), the sort across blocks. With SGD
     * (2 micro-batches) the gradient is scattered into the accumulator (embedding_grad_accumulate);
     * with AdamW (1) embedding_grad writes it straight into the gradients region. */
    {"embedding (+ grad, written directly) [3,5] ids, [11,7]", build_embedding, .shapes = {DIMS(3, 5), DIMS(11, 7)},
     .dtype = TF_I32, .settings.data = {2, 11}, ADAMW},
    {"embedding (+ grad) [3,5] ids, [11,7]", build_embedding, .shapes = {DIMS(3, 5), DIMS(11, 7)}, .dtype = TF_I32,
     .settings.data = {2, 11}},
    {"embedding, out-of-range ids (+ grad)", build_embedding, .shapes = {DIMS(3, 5), DIMS(11, 7)}, .dtype = TF_I32,
     .settings.data = {2, 11, -1, true}},
    {"embedding i64 ids [4,300] of 50 (global sort)", build_embedding, .shapes = {DIMS(4, 300), DIMS(50, 33)},
     .dtype = TF_I64, .settings.data = {2, 50}, .settings.needs = CONF_NEEDS_I64},

    /* layout */
    {"reshape [6,35]->[3,70]", build_reshape, .shapes = {DIMS(6, 35), DIMS(3, 70)}, EXACT},
    {"transpose [3,5,7] perm 2,0,1", build_transpose, .shapes = {DIMS(3, 5, 7)}, .axes = {2, 0, 1}, .n_axes = 3, EXACT},
    {"concat axis 1", build_concat, .shapes = {DIMS(2, 3, 5), DIMS(2, 1, 5), DIMS(2, 4, 5)}, .axes = {1}, EXACT},
    {"slice axis 1 [1:-1:3] (+ slice_grad)", build_slice, .shapes = {DIMS(4, 13, 3)}, .axes = {1}, .slice = {1, -1, 3},
     EXACT},
    /* rows of whole 16-byte units (CUDA copies them 16 bytes at a time, layout.cu), and in half runs
     * some that are not */
    {"concat axis 2, rows of 16-byte units", build_concat, .shapes = {DIMS(3, 5, 8), DIMS(3, 5, 4), DIMS(3, 5, 12)},
     .axes = {2}, EXACT},
    {"slice axis 2 [4:12] (+ slice_grad)", build_slice, .shapes = {DIMS(3, 5, 16)}, .axes = {2}, .slice = {4, 12, 1},
     EXACT},
    {"slice axis 2 [8:16] (+ slice_grad)", build_slice, .shapes = {DIMS(3, 5, 24)}, .axes = {2}, .slice = {8, 16, 1},
     EXACT},
    {"expand [1,5,1]->[4,5,3]", build_expand, .shapes = {DIMS(1, 5, 1), DIMS(4, 5, 3)}},

    /* convolutions and pooling */
    {"conv2d 3x3 pad 1 [2,3,9,11]", build_conv, .op = TF_OP_CONV2D, .shapes = {DIMS(2, 3, 9, 11), DIMS(4, 3, 3, 3)},
     .conv = CONV(1, 1, 1, 1, 1, 1, 0, 0, 1), .bias = true},
    {"conv2d stride 2 dilation 2", build_conv, .op = TF_OP_CONV2D, .shapes = {DIMS(2, 3, 13, 10), DIMS(5, 3, 3, 2)},
     .conv = CONV(2, 2, 0, 1, 2, 2, 0, 0, 1), ADAMW},
    {"conv2d groups 2, 1x1 (direct)", build_conv, .op = TF_OP_CONV2D, .shapes = {DIMS(3, 4, 7, 7), DIMS(6, 2, 1, 1)},
     .conv = CONV(1, 1, 0, 0, 1, 1, 0, 0, 2), .bias = true},
    {"conv2d groups 2, 3x3 stride 3", build_conv, .op = TF_OP_CONV2D, .shapes = {DIMS(1, 4, 8, 7), DIMS(6, 2, 3, 3)},
     .conv = CONV(3, 3, 1, 1, 1, 1, 0, 0, 2), ADAMW},
    {"conv2d [9,16,64,64] 3x3 (2 im2col chunks)", build_conv, .op = TF_OP_CONV2D,
     .shapes = {DIMS(9, 16, 64, 64), DIMS(3, 16, 3, 3)}, .conv = CONV(1, 1, 1, 1, 1, 1, 0, 0, 1), .bias = true,
     LONG_SUMS},
    {"conv_transpose2d stride 2 pad 1 out_pad 1", build_conv, .op = TF_OP_CONV_TRANSPOSE2D,
     .shapes = {DIMS(2, 4, 5, 6), DIMS(4, 3, 3, 3)}, .conv = CONV(2, 2, 1, 1, 1, 1, 1, 1, 1), .bias = true, ADAMW},
    {"conv_transpose2d groups 2, dilation 2", build_conv, .op = TF_OP_CONV_TRANSPOSE2D,
     .shapes = {DIMS(1, 4, 5, 5), DIMS(4, 2, 3, 2)}, .conv = CONV(1, 2, 0, 1, 2, 1, 0, 0, 2), .bias = true},
    {"conv1d stride 2 pad 1 [2,3,13]", build_conv1d, .shapes = {DIMS(2, 3, 13), DIMS(5, 3, 3)},
     .conv = CONV(2, 0, 1, 0, 1, 0, 0, 0, 1), .bias = true},
    {"max_pool2d 2x2 stride 2 [2,3,9,7]", build_pool, .op = TF_OP_MAX_POOL2D, .shapes = {DIMS(2, 3, 9, 7)},
     .pool = POOL(2, 2, 2, 2, 0, 0)},
    {"max_pool2d 3x3 stride 2 pad 1", build_pool, .op = TF_OP_MAX_POOL2D, .shapes = {DIMS(2, 3, 9, 7)},
     .pool = POOL(3, 3, 2, 2, 1, 1)},
    {"avg_pool2d 3x3 stride 1 pad 1", build_pool, .op = TF_OP_AVG_POOL2D, .shapes = {DIMS(2, 3, 9, 7)},
     .pool = POOL(3, 3, 1, 1, 1, 1)},
    {"avg_pool2d 2x3 stride 2", build_pool, .op = TF_OP_AVG_POOL2D, .shapes = {DIMS(2, 3, 9, 7)},
     .pool = POOL(2, 3, 2, 2, 0, 0)},

    /* attention: heads of 1 to 300 lanes, causal with Tq > Tk and Tq < Tk, long rows, the
     * subgroup variant's clusters of 8 lanes (a lane's share ending early, idle lanes) */
    {"attention [2,5,12] 3 heads", build_attention, .shapes = {DIMS(2, 5, 12), DIMS(2, 5, 12)}, .heads = 3},
    {"attention causal [2,7,12] 3 heads", build_attention, .shapes = {DIMS(2, 7, 12), DIMS(2, 7, 12)}, .heads = 3,
     .causal = true, ADAMW},
    {"attention Tq 5, Tk 9, 2 heads of 7", build_attention, .shapes = {DIMS(2, 5, 14), DIMS(2, 9, 14)}, .heads = 2},
    {"attention causal, heads of 2 (recompute)", build_attention, .shapes = {DIMS(2, 6, 12), DIMS(2, 6, 12)},
     .heads = 6, .causal = true, ADAMW},
    {"attention causal Tq 9 > Tk 4", build_attention, .shapes = {DIMS(2, 9, 8), DIMS(2, 4, 8)}, .heads = 1,
     .causal = true, ADAMW},
    {"attention Tq 11, Tk 13, 2 heads of 15", build_attention, .shapes = {DIMS(2, 11, 30), DIMS(2, 13, 30)}, .heads = 2,
     ADAMW},
    {"attention causal Tq 13 > Tk 11, 2 heads of 15", build_attention, .shapes = {DIMS(2, 13, 30), DIMS(2, 11, 30)},
     .heads = 2, .causal = true},
    {"attention causal Tq 6 < Tk 10, 2 heads of 3", build_attention, .shapes = {DIMS(2, 6, 6), DIMS(2, 10, 6)},
     .heads = 2, .causal = true, ADAMW},
    {"attention Tq 9, Tk 5, 3 heads of 1 (recompute)", build_attention, .shapes = {DIMS(2, 9, 3), DIMS(2, 5, 3)},
     .heads = 3},
    {"attention causal, 3 heads of 1 (recompute)", build_attention, .shapes = {DIMS(2, 7, 3), DIMS(2, 7, 3)},
     .heads = 3, .causal = true, ADAMW},
    {"attention Tq 33, Tk 17, 2 heads of 128", build_attention, .shapes = {DIMS(2, 33, 256), DIMS(2, 17, 256)},
     .heads = 2},
    {"attention [2,257,64] 1 head", build_attention, .shapes = {DIMS(2, 257, 64), DIMS(2, 257, 64)}, .heads = 1, ADAMW},
    {"attention causal [2,257,64] 1 head", build_attention, .shapes = {DIMS(2, 257, 64), DIMS(2, 257, 64)}, .heads = 1,
     .causal = true},
    {"attention causal T 70, heads of 64", build_attention, .shapes = {DIMS(2, 70, 128), DIMS(2, 70, 128)}, .heads = 2,
     .causal = true},
    /* the CPU's blocks of more than 32 query rows (96 here: core/workspace_cpu.c), several per head */
    {"attention causal T 150, 2 heads of 16", build_attention, .shapes = {DIMS(2, 150, 32), DIMS(2, 150, 32)},
     .heads = 2, .causal = true, ADAMW},
    {"attention Tq 200, Tk 130, head of 8", build_attention, .shapes = {DIMS(2, 200, 8), DIMS(2, 130, 8)}, .heads = 1},
    /* one query (causal: it sees one key, so dS must be exactly 0 under AdamW); T = Tk not a multiple
     * of the tiled shader's 16-row blocks, heads of 10, three batch entries */
    {"attention causal Tq 1, Tk 5, 2 heads of 9", build_attention, .shapes = {DIMS(3, 1, 18), DIMS(3, 5, 18)},
     .heads = 2, .causal = true, ADAMW},
    {"attention Tq 1, Tk 19, 3 heads of 8", build_attention, .shapes = {DIMS(2, 1, 24), DIMS(2, 19, 24)}, .heads = 3},
    {"attention causal T 21, 3 heads of 10", build_attention, .shapes = {DIMS(3, 21, 30), DIMS(3, 21, 30)}, .heads = 3,
     .causal = true, ADAMW},
    {"attention Tq 37, Tk 45, head of 100", build_attention, .shapes = {DIMS(2, 37, 100), DIMS(2, 45, 100)}, .heads = 1,
     ADAMW},
    {"attention causal T 33, head of 200", build_attention, .shapes = {DIMS(2, 33, 200), DIMS(2, 33, 200)}, .heads = 1,
     .causal = true, .settings.needs = CONF_NEEDS_WIDE_HEADS},
    {"attention T 40, head of 300", build_attention, .shapes = {DIMS(2, 40, 300), DIMS(2, 40, 300)}, .heads = 1, ADAMW,
     .settings.needs = CONF_NEEDS_WIDE_HEADS},
    /* 524,292 rows: more than 65535 workgroups of 8 (Vulkan's subgroup grid), so a second
     * grid-stride round. The forward only: lavapipe would spend some 6 s on the gradient. */
    {"attention causal [2,3,262146], 87382 heads of 3", build_attention,
     .shapes = {DIMS(2, 3, 3 * 87382), DIMS(2, 3, 3 * 87382)}, .heads = 87382, .causal = true,
     .settings.forward_only = true},

    /* losses: ignored labels, labels past the last class, long rows, i64 labels */
    {"cross_entropy (+ grad) [9,13]", build_cross_entropy, .shapes = {DIMS(9, 13), DIMS(9)}, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {3, 13}},
    {"cross_entropy, ignore_index (+ grad)", build_cross_entropy, .shapes = {DIMS(9, 13), DIMS(9)}, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {3, 13, -100, true}},
    {"cross_entropy [2,300,67] (+ grad)", build_cross_entropy, .shapes = {DIMS(2, 300, 67), DIMS(2, 300)},
     .dtype = TF_I32, .ignore_index = -1, .settings.data = {4, 67}},
    {"cross_entropy i64 labels [2,300,67] (+ grad)", build_cross_entropy, .shapes = {DIMS(2, 300, 67), DIMS(2, 300)},
     .dtype = TF_I64, .ignore_index = -1, .settings.data = {4, 67}, ADAMW, .settings.needs = CONF_NEEDS_I64},
    {"cross_entropy [37,1031], labels out of range", build_cross_entropy, .shapes = {DIMS(37, 1031), DIMS(37)},
     .dtype = TF_I32, .ignore_index = -100, .settings.data = {5, 1034, -100, true}},
    /* ctc: targets ended by -1 (every 7th label), empty ones, repeats; labels >= C under zero_infinity,
     * input lengths (clamped: -1 every 7th, some too short for their targets), another blank */
    {"ctc_loss (+ grad) [3,12,6] labels [3,4]", build_ctc_loss, .shapes = {DIMS(3, 12, 6), DIMS(3, 4)}, .dtype = TF_I32,
     .settings.data = {6, 6, -1, true}},
    {"ctc_loss i64, input_lengths, blank 2, zero_infinity [4,9,5] labels [4,3]", build_ctc_loss,
     .shapes = {DIMS(4, 9, 5), DIMS(4, 3), DIMS(4)}, .dtype = TF_I64, .blank = 2, .zero_infinity = true,
     .settings.data = {7, 10, -1, true}, ADAMW, .settings.needs = CONF_NEEDS_I64},
    /* the fused loss head: chunks that do not divide the rows, ignored labels, both weight layouts */
    {"linear_cross_entropy (+ grad) [2,9,16] x [37,16]^T, chunk 4", build_linear_cross_entropy,
     .shapes = {DIMS(2, 9, 16), DIMS(37, 16), DIMS(2, 9)}, .transpose_b = true, .chunk_rows = 4, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {6, 37, -100, true}},
    {"linear_cross_entropy (+ grad) [23,8] x [8,1031], chunk 5, out of range", build_linear_cross_entropy,
     .shapes = {DIMS(23, 8), DIMS(8, 1031), DIMS(23)}, .chunk_rows = 5, .dtype = TF_I32, .ignore_index = -1,
     .settings.data = {7, 1034}},
    {"linear_cross_entropy i64 labels [3,4,6] x [11,6]^T, one chunk", build_linear_cross_entropy,
     .shapes = {DIMS(3, 4, 6), DIMS(11, 6), DIMS(3, 4)}, .transpose_b = true, .dtype = TF_I64, .ignore_index = -100,
     .settings.data = {8, 11, -100, true}, .settings.needs = CONF_NEEDS_I64},
    /* with a bias: linear_cross_entropy's fourth input; with SGD's 2 micro-batches (above and here) the
     * gradient steps add dweight (and dbias) into the accumulators (the _accumulate forms) */
    {"linear_cross_entropy + bias (+ grad) [2,9,16] x [37,16]^T + [37], chunk 4", build_linear_cross_entropy_bias,
     .shapes = {DIMS(2, 9, 16), DIMS(37, 16), DIMS(2, 9)}, .transpose_b = true, .chunk_rows = 4, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {9, 37, -100, true}},
    {"linear_cross_entropy + bias (+ grad) [23,8] x [8,1031] + [1031], chunk 5, out of range",
     build_linear_cross_entropy_bias, .shapes = {DIMS(23, 8), DIMS(8, 1031), DIMS(23)}, .chunk_rows = 5,
     .dtype = TF_I32, .ignore_index = -1, .settings.data = {10, 1034}},
    /* one micro-batch per step, the loss halved: the forward and gradient steps of their own */
    {"linear_cross_entropy_grad, loss x 0.5 [2,9,16] x [37,16]^T, chunk 4", build_linear_cross_entropy_halved,
     .op = TF_OP_LINEAR_CROSS_ENTROPY_GRAD, .shapes = {DIMS(2, 9, 16), DIMS(37, 16), DIMS(2, 9)}, .transpose_b = true,
     .chunk_rows = 4, .dtype = TF_I32, .ignore_index = -100, .settings.data = {13, 37, -100, true}, ADAMW},
    {"linear_cross_entropy_bias_grad, loss x 0.5 [23,8] x [8,1031] + [1031], chunk 5",
     build_linear_cross_entropy_halved, .op = TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD,
     .shapes = {DIMS(23, 8), DIMS(8, 1031), DIMS(23)}, .chunk_rows = 5, .dtype = TF_I32, .ignore_index = -1,
     .settings.data = {14, 1034}, ADAMW},
    /* one micro-batch per step (AdamW here): the loss and the gradients in one pass of the forward
     * (linear_cross_entropy_train, _bias_train) */
    {"linear_cross_entropy_train [2,9,16] x [37,16]^T, chunk 4", build_linear_cross_entropy,
     .shapes = {DIMS(2, 9, 16), DIMS(37, 16), DIMS(2, 9)}, .transpose_b = true, .chunk_rows = 4, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {11, 37, -100, true}, ADAMW},
    {"linear_cross_entropy_bias_train [23,8] x [8,1031] + [1031], chunk 5, out of range",
     build_linear_cross_entropy_bias, .shapes = {DIMS(23, 8), DIMS(8, 1031), DIMS(23)}, .chunk_rows = 5,
     .dtype = TF_I32, .ignore_index = -1, .settings.data = {12, 1034}, ADAMW},
    /* more classes than one span of the CPU's half kernel (TF_LINEAR_LOSS_HALF_SPAN, 2,048): its
     * running log-sum-exp across spans, a partial last span, both weight layouts */
    {"linear_cross_entropy (+ grad) [2,5,8] x [4500,8]^T, chunk 3", build_linear_cross_entropy,
     .shapes = {DIMS(2, 5, 8), DIMS(4500, 8), DIMS(2, 5)}, .transpose_b = true, .chunk_rows = 3, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {15, 4500, -100, true}},
    {"linear_cross_entropy_bias_train [9,8] x [8,4500] + [4500], chunk 4, out of range",
     build_linear_cross_entropy_bias, .shapes = {DIMS(9, 8), DIMS(8, 4500), DIMS(9)}, .chunk_rows = 4, .dtype = TF_I32,
     .ignore_index = -1, .settings.data = {16, 4503}, ADAMW},
    /* Vulkan runs dx in slices of the classes here (core/linear_loss.h: 3 of 2,050 and 1 left over; 2 of
     * 2,049 and 1), chunks of other sizes last */
    {"linear_cross_entropy_train [3,7,8] x [6151,8]^T, chunk 5", build_linear_cross_entropy,
     .shapes = {DIMS(3, 7, 8), DIMS(6151, 8), DIMS(3, 7)}, .transpose_b = true, .chunk_rows = 5, .dtype = TF_I32,
     .ignore_index = -100, .settings.data = {17, 6151, -100, true}, ADAMW},
    {"linear_cross_entropy + bias (+ grad) [11,8] x [8,4099] + [4099], chunk 4", build_linear_cross_entropy_bias,
     .shapes = {DIMS(11, 8), DIMS(8, 4099), DIMS(11)}, .chunk_rows = 4, .dtype = TF_I32, .ignore_index = -1,
     .settings.data = {18, 4099}},
    {"mse (+ grad) [7,19]", build_pair_loss, .op = TF_OP_MSE, .shapes = {DIMS(7, 19)}},
    {"bce_with_logits (+ grad) [7,19]", build_pair_loss, .op = TF_OP_BCE_WITH_LOGITS, .shapes = {DIMS(7, 19)}},
};

/* Whether a row also runs on half data: not the casts' own rows (they choose their dtypes; every cast
 * row but build_cast's is forward-only) nor rows with nothing to train. */
static bool runs_on_half(const conf_case *c) { return c->build != build_cast && !c->settings.forward_only; }

static void run_case(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage, const conf_case *c,
                     const char *label) {
  tf_graph *g = tf_test_graph_begin(counts, "conformance");
  if (!g)
    return;
  c->build(g, c);
  conf_check_graph(counts, backend, coverage, label, g, &c->settings);
}

void conf_run_table(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    run_case(counts, backend, coverage, &cases[i], cases[i].label);
}

void conf_run_rows(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage, const char *prefix,
                   tf_dtype storage, const char *note) {
  const char *half = getenv("TIGHTFIT_CONFORMANCE_HALF");
  if (storage != TF_F32 && half && strcmp(half, "0") == 0) {
    printf("%s rows on %s data (%s): not run (TIGHTFIT_CONFORMANCE_HALF=0)\n", prefix, tf_dtype_name(storage), note);
    return;
  }
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (strncmp(cases[i].label, prefix, strlen(prefix)) != 0 || !runs_on_half(&cases[i]))
      continue;
    conf_case c = cases[i];
    c.settings.storage = storage;
    char label[256];
    if (storage == TF_F32)
      snprintf(label, sizeof(label), "%s (%s)", c.label, note);
    else
      snprintf(label, sizeof(label), "%s on %s (%s)", c.label, tf_dtype_name(storage), note);
    run_case(counts, backend, coverage, &c, label);
  }
}

void conf_run_table_half(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage,
                         tf_dtype storage) {
  const char *half = getenv("TIGHTFIT_CONFORMANCE_HALF");
  if (half && strcmp(half, "0") == 0) {
    printf("rows on %s data: not run (TIGHTFIT_CONFORMANCE_HALF=0)\n", tf_dtype_name(storage));
    return;
  }
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (!runs_on_half(&cases[i]))
      continue;
    conf_case c = cases[i];
    c.settings.storage = storage;
    char label[256];
    snprintf(label, sizeof(label), "%s on %s", c.label, tf_dtype_name(storage));
    run_case(counts, backend, coverage, &c, label);
  }
}
