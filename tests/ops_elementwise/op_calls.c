#include "op_calls.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* f32-vs-f64 tolerances, relative to the output's largest magnitude (see op_calls.h). */
#define EXACT 0.0    /* copies, selections, comparisons */
#define ROUNDED 2e-7 /* one or two roundings of an exact result */
#define TRANSCENDENTAL 2e-6
#define STATISTICS 2e-6 /* normalisations and their gradients (cancellation over few features) */

typedef struct builder {
  op_call *calls;
  int n, capacity;
} builder;

static void add_call(builder *b, tf_op op, tf_attrs attrs, double tolerance, const th_tensor *inputs, int n_inputs) {
  if (b->n == b->capacity)
    return;
  op_call *c = &b->calls[b->n++];
  memset(c, 0, sizeof(*c));
  c->op = op;
  c->attrs = attrs;
  c->tolerance = tolerance;
  c->n_inputs = n_inputs;
  int used = snprintf(c->name, sizeof(c->name), "%s", tf_op_name(op));
  for (int i = 0; i < n_inputs; i++) {
    c->inputs[i] = inputs[i];
    th_round_to_float(&c->inputs[i]);
    if (used < (int)sizeof(c->name))
      used += snprintf(c->name + used, sizeof(c->name) - (size_t)used, " %s", th_shape_text(&c->inputs[i]));
  }
}

#define R(lo, hi, ...) th_random(lo, hi, TH_SHAPE(__VA_ARGS__))
#define CALL(op, attrs, tolerance, ...)                                                                                \
  add_call(b, op, attrs, tolerance, (const th_tensor[]){__VA_ARGS__},                                                  \
           (int)(sizeof((th_tensor[]){__VA_ARGS__}) / sizeof(th_tensor)))

static th_tensor class_labels(tf_dtype dtype, size_t rank, const int64_t *shape, int64_t classes, int64_t ignore) {
  th_tensor t = th_zeros(dtype, rank, shape);
  for (int64_t i = 0; i < t.count; i++) {
    int64_t pick = th_integer(0, 9);
    // Mostly valid classes; some ignore_index and some out of range (both skipped by the loss).
    t.values[i] = (double)(pick == 0 ? ignore : pick == 1 ? classes + 2 : th_integer(0, classes - 1));
  }
  return t;
}

/* n multiples of 0.5 in [-8, 8]: round's ties, each to its even neighbour. */
static th_tensor halves(int64_t n) {
  th_tensor t = th_zeros(TF_F32, TH_SHAPE(n));
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = 0.5 * (double)th_integer(-16, 16);
  return t;
}

#define MASK(...) th_mask_with_zeros(TH_SHAPE(__VA_ARGS__))
#define NONFINITE(...) th_nonfinite_where_zero(TH_SHAPE(__VA_ARGS__))

static void elementwise_calls(builder *b, bool large) {
  const tf_attrs none = th_no_attrs();
  static const tf_op binaries[] = {TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV};
  for (int k = 0; k < 4; k++) {
    tf_op op = binaries[k];
    CALL(op, none, ROUNDED, R(-2, 2, 7), R(0.5, 2, 7));
    CALL(op, none, ROUNDED, R(-2, 2, 3, 1, 5), R(0.5, 2, 4, 1));
    CALL(op, none, ROUNDED, R(-2, 2, 2, 3, 5), R(0.5, 2, 5));
    CALL(op, none, ROUNDED, R(0.5, 2, 1), R(-2, 2, 2, 3));
    CALL(op, none, ROUNDED, R(-2, 2, 3, 1), th_random(0.5, 2, 0, NULL));
    if (large) {
      CALL(op, none, ROUNDED, R(-2, 2, 301, 257), R(0.5, 2, 257));
      CALL(op, none, ROUNDED, R(-2, 2, 5, 1, 171), R(0.5, 2, 5, 97, 1));
      CALL(op, none, ROUNDED, R(-2, 2, 70001), R(0.5, 2, 70001));
    }
  }
  CALL(TF_OP_KEEP, none, EXACT, NONFINITE(7), MASK(7));
  CALL(TF_OP_KEEP, none, EXACT, R(-2, 2, 3, 1, 5), MASK(4, 1));
  CALL(TF_OP_KEEP, none, EXACT, MASK(5), R(-2, 2, 2, 3, 5)); /* x broadcast against the mask */
  if (large)
    CALL(TF_OP_KEEP, none, EXACT, NONFINITE(301, 257), MASK(301, 257));
  const int64_t n = large ? 100003 : 37;
  CALL(TF_OP_NEG, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_EXP, none, TRANSCENDENTAL, R(-3, 3, n));
  CALL(TF_OP_LOG, none, TRANSCENDENTAL, R(0.1, 5, n));
  CALL(TF_OP_SQRT, none, ROUNDED, R(0.1, 5, n));
  CALL(TF_OP_RSQRT, none, ROUNDED, R(0.1, 5, n));
  CALL(TF_OP_RELU, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_GELU, th_gelu(false), TRANSCENDENTAL, R(-5, 5, n));
  CALL(TF_OP_GELU, th_gelu(true), TRANSCENDENTAL, R(-5, 5, n));
  CALL(TF_OP_SILU, none, TRANSCENDENTAL, R(-8, 8, n));
  CALL(TF_OP_SIGMOID, none, TRANSCENDENTAL, R(-8, 8, n));
  CALL(TF_OP_TANH, none, TRANSCENDENTAL, R(-3, 3, n));
  CALL(TF_OP_SOFTPLUS, none, TRANSCENDENTAL, R(-30, 30, n)); // both sides of the threshold 20
  CALL(TF_OP_LEAKY_RELU, th_leaky_relu(0.2f), ROUNDED, R(-3, 3, n));
  CALL(TF_OP_LEAKY_RELU_GRAD, th_leaky_relu(0.2f), ROUNDED, R(-3, 3, n), R(-1, 1, n));
  CALL(TF_OP_CLIP, th_clip(-1.0f, 2.5f), EXACT, R(-3, 3, n));
  CALL(TF_OP_CLIP, th_clip(0.5f, INFINITY), EXACT, R(-3, 3, n));
  CALL(TF_OP_CLIP_GRAD, th_clip(-1.0f, 2.5f), EXACT, R(-3, 3, n), R(-1, 1, n));
  CALL(TF_OP_RELU_GRAD, none, EXACT, R(-3, 3, n), R(-1, 1, n));
  CALL(TF_OP_ABS, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_ABS_GRAD, none, EXACT, R(-3, 3, n), R(-1, 1, n));
  CALL(TF_OP_STOP_GRADIENT, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_FLOOR, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_CEIL, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_ROUND, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_ROUND, none, EXACT, halves(n)); // the ties, to even
  CALL(TF_OP_SIGN, none, EXACT, R(-3, 3, n));
  CALL(TF_OP_ERF, none, TRANSCENDENTAL, R(-5, 5, n)); // past 3.9, where erf(x) rounds to 1 in f32
  CALL(TF_OP_ERF, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_ERF_GRAD, none, TRANSCENDENTAL, R(-5, 5, n), R(-1, 1, n));
  CALL(TF_OP_SIN, none, TRANSCENDENTAL, R(-10, 10, n)); // several quadrants either side
  CALL(TF_OP_SIN, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_COS, none, TRANSCENDENTAL, R(-10, 10, n));
  CALL(TF_OP_COS, none, TRANSCENDENTAL, R(1.5, 1.65, n)); // around pi/2, where cos crosses 0
  CALL(TF_OP_ASIN, none, TRANSCENDENTAL, R(-1, 1, n));    // both polynomials, and the ends
  CALL(TF_OP_ASIN, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_ACOS, none, TRANSCENDENTAL, R(-1, 1, n));
  CALL(TF_OP_ACOS, none, TRANSCENDENTAL, R(0.999, 1, n)); // near 1, where acos goes to 0
  CALL(TF_OP_ATAN, none, TRANSCENDENTAL, R(-30, 30, n));  // the three reductions
  CALL(TF_OP_ATAN, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_TAN, none, TRANSCENDENTAL, R(-1.5, 1.5, n));
  CALL(TF_OP_SINH, none, TRANSCENDENTAL, R(-30, 30, n));   // past 20 too
  CALL(TF_OP_SINH, none, TRANSCENDENTAL, R(-1.5, 1.5, n)); // the polynomial and its edge at 1
  CALL(TF_OP_SINH, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_COSH, none, TRANSCENDENTAL, R(-30, 30, n));
  CALL(TF_OP_ASINH, none, TRANSCENDENTAL, R(-1e4, 1e4, n)); // past 2^12 too
  CALL(TF_OP_ASINH, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_ACOSH, none, TRANSCENDENTAL, R(1, 1e4, n));
  CALL(TF_OP_ACOSH, none, TRANSCENDENTAL, R(1, 1.01, n)); // near 1, where acosh goes to 0
  CALL(TF_OP_ATANH, none, TRANSCENDENTAL, R(-0.999, 0.999, n));
  CALL(TF_OP_ATANH, none, TRANSCENDENTAL, R(-0.01, 0.01, n));
  CALL(TF_OP_GELU_GRAD, th_gelu(false), TRANSCENDENTAL, R(-5, 5, n), R(-1, 1, n));
  CALL(TF_OP_GELU_GRAD, th_gelu(true), TRANSCENDENTAL, R(-5, 5, n), R(-1, 1, n));
  CALL(TF_OP_SILU_GRAD, none, TRANSCENDENTAL, R(-8, 8, n), R(-1, 1, n));
  CALL(TF_OP_SIGMOID_GRAD, none, ROUNDED, R(0, 1, n), R(-1, 1, n));
  CALL(TF_OP_TANH_GRAD, none, ROUNDED, R(-1, 1, n), R(-1, 1, n));
  CALL(TF_OP_DROPOUT, th_dropout(0.25f, 5), ROUNDED, R(-3, 3, n));
  CALL(TF_OP_DROPOUT, th_dropout(0.0f, 5), EXACT, R(-3, 3, 3, 5));
}

static void reduction_calls(builder *b, bool large) {
  static const int32_t axis1[] = {1}, last_first[] = {-1, 0}, middle[] = {-2}, outer[] = {0, 2}, first[] = {0};
  static const int32_t bias_grad[] = {0, 2, 3}; // a convolution's bias gradient: several runs per output
  static const tf_op sums[] = {TF_OP_SUM, TF_OP_MEAN};
  for (int k = 0; k < 2; k++) {
    tf_op op = sums[k];
    CALL(op, th_reduce(false, 1, axis1), ROUNDED, R(-2, 2, 3, 5, 7));
    CALL(op, th_reduce(true, 2, last_first), ROUNDED, R(-2, 2, 3, 5, 7));
    CALL(op, th_reduce(false, 0, NULL), ROUNDED, R(-2, 2, 3, 1, 7));
    CALL(op, th_reduce(true, 2, outer), ROUNDED, R(-2, 2, 2, 3, 5, 2));
    CALL(op, th_reduce(false, 1, middle), ROUNDED, R(-2, 2, 1, 13, 11));
    CALL(op, th_reduce(false, 3, bias_grad), ROUNDED, R(-2, 2, 3, 19, 4, 5)); // 19 outputs: 8, 8 and 3 side by side
    CALL(op, th_reduce(true, 2, outer), ROUNDED, R(-2, 2, 4, 6, 3, 10));      // the kept axes inner and between
    if (large) {
      CALL(op, th_reduce(false, 0, NULL), ROUNDED, R(-2, 2, 1000003));
      CALL(op, th_reduce(false, 1, first), ROUNDED, R(-2, 2, 2003, 301));
      CALL(op, th_reduce(true, 1, middle), ROUNDED, R(-2, 2, 301, 2003));
    }
  }
  CALL(TF_OP_MAX, th_reduce(false, 1, middle), EXACT, R(-2, 2, 3, 5, 7));
  CALL(TF_OP_MAX, th_reduce(true, 2, outer), EXACT, R(-2, 2, 2, 3, 5, 2));
  CALL(TF_OP_MAX, th_reduce(false, 0, NULL), EXACT, R(-2, 2, 3, 7));
  th_tensor x = R(-2, 2, 4, 9), x_all = R(-2, 2, 5, 3);
  tf_attrs max_axis = th_reduce(true, 1, middle), max_all = th_reduce(false, 0, NULL);
  // max_grad: y from the f64 max kernel (a copy, exact in f32 too) and ties planted in x.
  x.values[1] = x.values[19] = x.values[28] = 7; // column 1, rows 0, 2 and 3
  x_all.values[4] = x_all.values[11] = x_all.values[7] = 9;
  th_round_to_float(&x);
  th_round_to_float(&x_all);
  th_tensor y = th_call(TF_OP_MAX, &max_axis, &x), y_all = th_call(TF_OP_MAX, &max_all, &x_all);
  CALL(TF_OP_MAX_GRAD, max_axis, ROUNDED, x, y, R(-1, 1, 1, 9));
  CALL(TF_OP_MAX_GRAD, max_all, ROUNDED, x_all, y_all, th_random(-1, 1, 0, NULL));
  CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 3, 4, 5), R(0, 1, 4, 1));
  CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 3, 4, 5), R(0, 1, 5));
  CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 3, 4, 5), th_random(0, 1, 0, NULL));
  CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 2, 3), R(0, 1, 2, 3));
  // A bias gradient past TF_CPU_CHUNK elements: its rows in blocks (kernels/cpu/reduce.c row_blocks).
  CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 601, 64), R(0, 1, 64));
  if (large)
    CALL(TF_OP_SUM_TO, th_no_attrs(), ROUNDED, R(-2, 2, 4099, 257), R(0, 1, 257));
  CALL(TF_OP_GLOBAL_NORM_SQ, th_no_attrs(), ROUNDED, R(-2, 2, 3, 5), R(-2, 2, 7), th_random(-2, 2, 0, NULL));
  if (large)
    CALL(TF_OP_GLOBAL_NORM_SQ, th_no_attrs(), ROUNDED, R(-2, 2, 1000003), R(-2, 2, 301, 7));
}

static void softmax_norm_calls(builder *b, bool large) {
  static const tf_op softmaxes[] = {TF_OP_SOFTMAX, TF_OP_LOG_SOFTMAX};
  static const tf_op grads[] = {TF_OP_SOFTMAX_GRAD, TF_OP_LOG_SOFTMAX_GRAD};
  for (int k = 0; k < 2; k++) {
    CALL(softmaxes[k], th_axis(-1), TRANSCENDENTAL, R(-5, 5, 4, 7));
    CALL(softmaxes[k], th_axis(1), TRANSCENDENTAL, R(-5, 5, 2, 5, 3));
    CALL(softmaxes[k], th_axis(0), TRANSCENDENTAL, R(-5, 5, 5, 67));
    if (large)
      CALL(softmaxes[k], th_axis(-1), TRANSCENDENTAL, R(-5, 5, 307, 1001));
    // y: probabilities (softmax) or log-probabilities (log_softmax) of some x.
    tf_attrs axis = th_axis(-2);
    th_tensor logits = R(-3, 3, 3, 6, 5);
    th_tensor y = th_call(softmaxes[k], &axis, &logits);
    CALL(grads[k], axis, TRANSCENDENTAL, y, R(-1, 1, 3, 6, 5));
    if (large) {
      tf_attrs last = th_axis(-1);
      th_tensor big = R(-3, 3, 211, 997);
      th_tensor y_big = th_call(softmaxes[k], &last, &big);
      CALL(grads[k], last, TRANSCENDENTAL, y_big, R(-1, 1, 211, 997));
    }
  }
  static const int64_t features[] = {1, 2, 3, 64};
  for (int k = 0; k < 4; k++) {
    const int64_t d = features[k], rows = large ? 2003 : 5;
    CALL(TF_OP_LAYER_NORM, th_norm(1e-5f), STATISTICS, R(-2, 2, rows, d), R(0.5, 1.5, d), R(-1, 1, d));
    CALL(TF_OP_LAYER_NORM, th_norm(1e-5f), STATISTICS, R(-2, 2, 3, rows, d), R(0.5, 1.5, d));
    CALL(TF_OP_RMS_NORM, th_norm(1e-6f), STATISTICS, R(-2, 2, rows, d), R(0.5, 1.5, d));
    CALL(TF_OP_LAYER_NORM_GRAD, th_norm(1e-5f), STATISTICS, R(-2, 2, rows, d), R(0.5, 1.5, d), R(-1, 1, rows, d));
    CALL(TF_OP_RMS_NORM_GRAD, th_norm(1e-6f), STATISTICS, R(-2, 2, rows, d), R(0.5, 1.5, d), R(-1, 1, rows, d));
  }
  // dgamma and dbeta past TF_CPU_CHUNK elements: summed by row blocks (kernels/cpu/norm.c, phase 2).
  CALL(TF_OP_LAYER_NORM_GRAD, th_norm(1e-5f), STATISTICS, R(-2, 2, 601, 64), R(0.5, 1.5, 64), R(-1, 1, 601, 64));
  CALL(TF_OP_RMS_NORM_GRAD, th_norm(1e-6f), STATISTICS, R(-2, 2, 601, 64), R(0.5, 1.5, 64), R(-1, 1, 601, 64));
  /* batch_norm: channels on axis 1; statistics over N (rank 2) or N and the spatial axes */
  const int64_t batch = large ? 64 : 4;
  CALL(TF_OP_BATCH_NORM, th_norm(1e-5f), STATISTICS, R(-2, 2, batch, 3, 5, 7), R(0.5, 1.5, 3), R(-1, 1, 3));
  CALL(TF_OP_BATCH_NORM, th_norm(1e-3f), STATISTICS, R(-2, 2, batch, 6), R(0.5, 1.5, 6), R(-1, 1, 6));
  CALL(TF_OP_BATCH_NORM_GRAD, th_norm(1e-5f), STATISTICS, R(-2, 2, batch, 3, 5, 7), R(0.5, 1.5, 3),
       R(-1, 1, batch, 3, 5, 7));
  CALL(TF_OP_BATCH_NORM_GRAD, th_norm(1e-5f), STATISTICS, R(-2, 2, batch, 6), R(0.5, 1.5, 6), R(-1, 1, batch, 6));
}

static void layout_calls(builder *b, bool large) {
  static const int32_t swap[] = {1, 0}, rotate[] = {2, 0, 1}, heads[] = {0, 2, 1, 3};
  CALL(TF_OP_RESHAPE, th_shape_attrs(TH_SHAPE(5, -1, 3)), EXACT, R(-2, 2, 2, 15));
  CALL(TF_OP_TRANSPOSE, th_transpose(2, swap), EXACT, R(-2, 2, 7, 5));
  CALL(TF_OP_TRANSPOSE, th_transpose(3, rotate), EXACT, R(-2, 2, 2, 3, 5));
  CALL(TF_OP_TRANSPOSE, th_transpose(4, heads), EXACT, R(-2, 2, 2, 3, 2, 5));
  if (large) {
    CALL(TF_OP_TRANSPOSE, th_transpose(2, swap), EXACT, R(-2, 2, 513, 259));
    CALL(TF_OP_TRANSPOSE, th_transpose(4, heads), EXACT, R(-2, 2, 3, 67, 5, 64));
    CALL(TF_OP_TRANSPOSE, th_transpose(3, rotate), EXACT, R(-2, 2, 33, 61, 65));
  }
  CALL(TF_OP_CONCAT, th_axis(-2), EXACT, R(-2, 2, 2, 1, 3), R(-2, 2, 2, 4, 3), R(-2, 2, 2, 2, 3));
  CALL(TF_OP_CONCAT, th_axis(0), EXACT, R(-2, 2, 3, 2), R(-2, 2, 1, 2));
  CALL(TF_OP_SLICE, th_slice(1, -6, 100, 2), EXACT, R(-2, 2, 3, 7, 2));
  CALL(TF_OP_SLICE, th_slice(-1, 1, -1, 1), EXACT, R(-2, 2, 3, 5));
  CALL(TF_OP_SLICE_GRAD, th_slice(1, -6, 100, 2), EXACT, R(-2, 2, 3, 3, 2), R(0, 1, 3, 7, 2));
  CALL(TF_OP_SLICE_GRAD, th_slice(0, 1, 4, 1), EXACT, R(-2, 2, 3, 5), R(0, 1, 6, 5));
  // Along the last axis with a step: single elements, strided (the slice kernels' loop path).
  CALL(TF_OP_SLICE, th_slice(-1, 1, 8, 3), EXACT, R(-2, 2, 3, 8));
  CALL(TF_OP_SLICE_GRAD, th_slice(-1, 1, 8, 3), EXACT, R(-2, 2, 3, 3), R(0, 1, 3, 8));
  CALL(TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(2, 3, 4)), EXACT, R(-2, 2, 3, 1));
  CALL(TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(4, -1)), EXACT, R(-2, 2, 1, 5));
  if (large) {
    CALL(TF_OP_CONCAT, th_axis(1), EXACT, R(-2, 2, 301, 100), R(-2, 2, 301, 157));
    CALL(TF_OP_SLICE, th_slice(0, 3, -3, 3), EXACT, R(-2, 2, 2001, 67));
    // The k third of a fused qkv projection [N T, 3E] and its gradient, on the parallel path.
    CALL(TF_OP_SLICE, th_slice(-1, 128, 256, 1), EXACT, R(-2, 2, 512, 384));
    CALL(TF_OP_SLICE_GRAD, th_slice(-1, 128, 256, 1), EXACT, R(-2, 2, 512, 128), R(0, 1, 512, 384));
    CALL(TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(301, 7, 67)), EXACT, R(-2, 2, 7, 1));
  }
}

static void loss_calls(builder *b, bool large) {
  const int64_t rows = large ? 4001 : 7;
  for (int k = 0; k < 2; k++) {
    tf_dtype dtype = k ? TF_I32 : TF_I64;
    th_tensor logits = R(-4, 4, rows, 11), ids = class_labels(dtype, TH_SHAPE(rows), 11, -100);
    CALL(TF_OP_CROSS_ENTROPY, th_cross_entropy(-100), TRANSCENDENTAL, logits, ids);
    CALL(TF_OP_CROSS_ENTROPY_GRAD, th_cross_entropy(-100), TRANSCENDENTAL, logits, ids, th_scalar(0.7));
  }
  th_tensor logits3 = R(-4, 4, 2, 3, 5), ids3 = class_labels(TF_I32, TH_SHAPE(2, 3), 5, 4);
  CALL(TF_OP_CROSS_ENTROPY, th_cross_entropy(4), TRANSCENDENTAL, logits3, ids3);
  CALL(TF_OP_CROSS_ENTROPY_GRAD, th_cross_entropy(4), TRANSCENDENTAL, logits3, ids3, th_scalar(1.3));
  const int64_t n = large ? 100003 : 23;
  CALL(TF_OP_MSE, th_no_attrs(), ROUNDED, R(-2, 2, 3, n), R(-2, 2, 3, n));
  CALL(TF_OP_MSE_GRAD, th_no_attrs(), ROUNDED, R(-2, 2, 3, n), R(-2, 2, 3, n), th_scalar(0.9));
  CALL(TF_OP_BCE_WITH_LOGITS, th_no_attrs(), TRANSCENDENTAL, R(-6, 6, n), R(0, 1, n));
  CALL(TF_OP_BCE_WITH_LOGITS_GRAD, th_no_attrs(), TRANSCENDENTAL, R(-6, 6, n), R(0, 1, n), th_scalar(1.1));
}

static void optimizer_calls(builder *b, bool large) {
  const int64_t n = large ? 100003 : 19;
  CALL(TF_OP_ACCUMULATE, th_no_attrs(), ROUNDED, R(-2, 2, n), R(-2, 2, n));
  CALL(TF_OP_ZERO, th_no_attrs(), EXACT, R(-2, 2, n));
  // (param, grad, state..., norm_sq): with and without clipping, weight decay and momentum.
  tf_attrs sgd = th_optimizer(0.1f, 0.9f, 0, 0, 0, 0.01f, 1.0f, 0.5f);
  tf_attrs plain_sgd = th_optimizer(0.05f, 0, 0, 0, 0, 0, 0, 1);
  tf_attrs adamw = th_optimizer(1e-3f, 0, 0.9f, 0.999f, 1e-8f, 0.1f, 0.5f, 0.25f);
  CALL(TF_OP_SGD, sgd, ROUNDED, R(-1, 1, n), R(-1, 1, n), R(-1, 1, n), th_scalar(9.0));
  CALL(TF_OP_SGD, plain_sgd, ROUNDED, R(-1, 1, n), R(-1, 1, n), R(-1, 1, n));
  CALL(TF_OP_ADAMW, adamw, TRANSCENDENTAL, R(-1, 1, n), R(-1, 1, n), R(-0.1, 0.1, n), R(0.001, 0.01, n),
       th_scalar(4.0));
}

int op_calls_build(op_call *calls, int capacity, bool large) {
  builder state = {calls, 0, capacity}, *b = &state;
  elementwise_calls(b, large);
  reduction_calls(b, large);
  softmax_norm_calls(b, large);
  layout_calls(b, large);
  loss_calls(b, large);
  optimizer_calls(b, large);
  return b->n;
}
