/* Finite-difference gradient checks in float64: every gradient kernel of the element-wise family
 * against its forward kernel, and the compositions the compiler's autodiff uses for ops without a
 * gradient kernel (broadcasting binaries -> sum_to, unaries -> element-wise ops, sum/mean ->
 * reshape + expand, transpose -> inverse transpose, concat -> slices, expand -> sum_to, dropout ->
 * dropout of dy). For L = sum(w * forward(inputs)) with random w, the analytic gradient (the
 * backward kernels applied to dy = w) is compared with central differences of L:
 *   error = max |numeric - analytic| / max(max |analytic|, 1e-3)   over each input,
 * which must stay below 1e-6. Prints the worst error per checked op. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "harness.h"

#define STEP 1e-6
#define LIMIT 1e-6

typedef struct grad_case grad_case;
typedef void (*backward_fn)(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *grads);

struct grad_case {
  const char *label; /* the op whose gradient is checked, and through what */
  tf_op op;
  tf_attrs attrs;
  int n_inputs;
  th_tensor inputs[4];
  backward_fn backward;
};

#define IN(i) (&c->inputs[i])

/* ---- the backward passes ---- */

static void grad_add(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_SUM_TO, NULL, dy, IN(0));
  g[1] = th_call(TF_OP_SUM_TO, NULL, dy, IN(1));
}
static void grad_sub(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_SUM_TO, NULL, dy, IN(0));
  th_tensor minus = th_call(TF_OP_NEG, NULL, dy);
  g[1] = th_call(TF_OP_SUM_TO, NULL, &minus, IN(1));
}
static void grad_mul(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor da = th_call(TF_OP_MUL, NULL, dy, IN(1)), db = th_call(TF_OP_MUL, NULL, dy, IN(0));
  g[0] = th_call(TF_OP_SUM_TO, NULL, &da, IN(0));
  g[1] = th_call(TF_OP_SUM_TO, NULL, &db, IN(1));
}
static void grad_div(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor da = th_call(TF_OP_DIV, NULL, dy, IN(1));
  th_tensor dyy = th_call(TF_OP_MUL, NULL, dy, y);
  th_tensor ratio = th_call(TF_OP_DIV, NULL, &dyy, IN(1));
  th_tensor db = th_call(TF_OP_NEG, NULL, &ratio);
  g[0] = th_call(TF_OP_SUM_TO, NULL, &da, IN(0));
  g[1] = th_call(TF_OP_SUM_TO, NULL, &db, IN(1));
}
/* keep(x, m): dx = keep(dy, m) summed to x's shape; m none (left unchecked). */
static void grad_keep(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor dx = th_call(TF_OP_KEEP, NULL, dy, IN(1));
  g[0] = th_call(TF_OP_SUM_TO, NULL, &dx, IN(0));
}
static void grad_neg(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_NEG, NULL, dy);
}
static void grad_exp(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_MUL, NULL, dy, y);
}
static void grad_log(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_DIV, NULL, dy, IN(0));
}
/* As compiler/autodiff_rules.c writes them: sqrt: dx = (dy / y) 0.5; rsqrt: dx = (dy y^3) (-0.5). */
static void grad_sqrt(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor half = th_scalar(0.5), ratio = th_call(TF_OP_DIV, NULL, dy, y);
  g[0] = th_call(TF_OP_MUL, NULL, &ratio, &half);
}
static void grad_rsqrt(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor square = th_call(TF_OP_MUL, NULL, y, y), cube = th_call(TF_OP_MUL, NULL, &square, y);
  th_tensor scaled = th_call(TF_OP_MUL, NULL, dy, &cube), half = th_scalar(-0.5);
  g[0] = th_call(TF_OP_MUL, NULL, &scaled, &half);
}
/* As compiler/autodiff_rules.c writes it: softplus: dx = dy sigmoid(x). */
static void grad_softplus(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor s = th_call(TF_OP_SIGMOID, NULL, IN(0));
  g[0] = th_call(TF_OP_MUL, NULL, dy, &s);
}
/* Activation gradient kernels: (x, dy) or (y, dy). */
static void grad_of_x(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  tf_op op = c->op == TF_OP_RELU         ? TF_OP_RELU_GRAD
             : c->op == TF_OP_ABS        ? TF_OP_ABS_GRAD
             : c->op == TF_OP_ERF        ? TF_OP_ERF_GRAD
             : c->op == TF_OP_GELU       ? TF_OP_GELU_GRAD
             : c->op == TF_OP_LEAKY_RELU ? TF_OP_LEAKY_RELU_GRAD
             : c->op == TF_OP_CLIP       ? TF_OP_CLIP_GRAD
                                         : TF_OP_SILU_GRAD;
  g[0] = th_call(op, &c->attrs, IN(0), dy);
}
static void grad_of_y(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  tf_op op = c->op == TF_OP_SIGMOID   ? TF_OP_SIGMOID_GRAD
             : c->op == TF_OP_TANH    ? TF_OP_TANH_GRAD
             : c->op == TF_OP_SOFTMAX ? TF_OP_SOFTMAX_GRAD
                                      : TF_OP_LOG_SOFTMAX_GRAD;
  g[0] = th_call(op, &c->attrs, y, dy);
}
/* sum and mean: dy reshaped to the keepdims shape, expanded to x (and divided by the count). */
static void grad_sum_mean(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  const tf_reduce_attrs *a = &c->attrs.u.reduce;
  int64_t kept[TF_MAX_RANK], count = 1;
  for (int32_t i = 0; i < IN(0)->rank; i++)
    kept[i] = IN(0)->shape[i];
  for (int32_t i = 0; i < (a->n_axes ? a->n_axes : IN(0)->rank); i++) {
    int32_t axis = a->n_axes ? (a->axes[i] < 0 ? a->axes[i] + IN(0)->rank : a->axes[i]) : i;
    count *= kept[axis];
    kept[axis] = 1;
  }
  tf_attrs to_kept = th_shape_attrs((size_t)IN(0)->rank, kept),
           to_x = th_shape_attrs((size_t)IN(0)->rank, IN(0)->shape);
  th_tensor reshaped = a->keepdims ? *dy : th_call(TF_OP_RESHAPE, &to_kept, dy);
  g[0] = th_call(TF_OP_EXPAND, &to_x, &reshaped);
  if (c->op == TF_OP_MEAN) {
    th_tensor inverse = th_scalar(1.0 / (double)count);
    g[0] = th_call(TF_OP_MUL, NULL, &g[0], &inverse);
  }
}
static void grad_max(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_MAX_GRAD, &c->attrs, IN(0), y, dy);
}
static void grad_norm(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  th_tensor inputs[3] = {*IN(0), *IN(1), *dy}, outputs[TF_MAX_OUTPUTS];
  const tf_op grad = c->op == TF_OP_LAYER_NORM   ? TF_OP_LAYER_NORM_GRAD
                     : c->op == TF_OP_BATCH_NORM ? TF_OP_BATCH_NORM_GRAD
                                                 : TF_OP_RMS_NORM_GRAD;
  th_run(grad, &c->attrs, inputs, 3, outputs, true);
  for (int i = 0; i < c->n_inputs; i++)
    g[i] = outputs[i];
}
static void grad_reshape(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  tf_attrs back = th_shape_attrs((size_t)IN(0)->rank, IN(0)->shape);
  g[0] = th_call(TF_OP_RESHAPE, &back, dy);
}
static void grad_transpose(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  int32_t inverse[TF_MAX_RANK];
  for (int32_t i = 0; i < c->attrs.u.transpose.rank; i++)
    inverse[c->attrs.u.transpose.perm[i]] = i;
  tf_attrs back = th_transpose((size_t)c->attrs.u.transpose.rank, inverse);
  g[0] = th_call(TF_OP_TRANSPOSE, &back, dy);
}
static void grad_concat(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  int32_t axis = c->attrs.u.axis.axis;
  int64_t start = 0, rank = IN(0)->rank;
  for (int i = 0; i < c->n_inputs; i++) {
    int64_t length = IN(i)->shape[axis < 0 ? axis + rank : axis];
    tf_attrs part = th_slice(axis, start, start + length, 1);
    g[i] = th_call(TF_OP_SLICE, &part, dy);
    start += length;
  }
}
static void grad_slice(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_SLICE_GRAD, &c->attrs, dy, IN(0));
}
static void grad_expand(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_SUM_TO, NULL, dy, IN(0));
}
static void grad_dropout(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  g[0] = th_call(TF_OP_DROPOUT, &c->attrs, dy);
}
static void grad_loss(const grad_case *c, const th_tensor *y, const th_tensor *dy, th_tensor *g) {
  tf_op op = c->op == TF_OP_CROSS_ENTROPY ? TF_OP_CROSS_ENTROPY_GRAD
             : c->op == TF_OP_MSE         ? TF_OP_MSE_GRAD
                                          : TF_OP_BCE_WITH_LOGITS_GRAD;
  g[0] = th_call(op, &c->attrs, IN(0), IN(1), dy);
  if (c->op == TF_OP_MSE)
    g[1] = th_call(TF_OP_NEG, NULL, &g[0]);
}

/* ---- the driver ---- */

typedef struct worst_entry {
  const char *label;
  double error;
  int cases;
} worst_entry;

static worst_entry worst[64];
static int n_worst;

static void record(const char *label, double error) {
  int i = 0;
  while (i < n_worst && strcmp(worst[i].label, label) != 0)
    i++;
  if (i == n_worst)
    worst[n_worst++] = (worst_entry){label, 0, 0};
  worst[i].error = error > worst[i].error ? error : worst[i].error;
  worst[i].cases++;
}

static double objective(const grad_case *c, th_tensor *inputs, const th_tensor *w) {
  th_tensor outputs[TF_MAX_OUTPUTS];
  th_run(c->op, &c->attrs, inputs, c->n_inputs, outputs, true);
  double sum = 0;
  for (int64_t i = 0; i < w->count; i++)
    sum += w->values[i] * outputs[0].values[i];
  return sum;
}

static void check_case(tf_test_counts *counts, grad_case *c) {
  th_tensor outputs[TF_MAX_OUTPUTS];
  if (th_run(c->op, &c->attrs, c->inputs, c->n_inputs, outputs, true) < 1) {
    CHECK(counts, false, "%s: forward refused", c->label);
    return;
  }
  th_tensor y = outputs[0];
  th_tensor w = th_random(-1, 1, (size_t)y.rank, y.shape);
  th_tensor grads[4];
  memset(grads, 0, sizeof(grads));
  c->backward(c, &y, &w, grads);
  for (int i = 0; i < c->n_inputs; i++) {
    if (c->inputs[i].dtype != TF_F32 || !grads[i].values)
      continue;
    th_tensor numeric = th_zeros(TF_F32, (size_t)c->inputs[i].rank, c->inputs[i].shape);
    for (int64_t j = 0; j < numeric.count; j++) {
      double saved = c->inputs[i].values[j];
      c->inputs[i].values[j] = saved + STEP;
      double up = objective(c, c->inputs, &w);
      c->inputs[i].values[j] = saved - STEP;
      double down = objective(c, c->inputs, &w);
      c->inputs[i].values[j] = saved;
      numeric.values[j] = (up - down) / (2 * STEP);
    }
    double error = th_relative_error(&grads[i], &numeric, 1e-3);
    record(c->label, error);
    CHECK(counts, error < LIMIT, "%s input %d %s: error %.3g", c->label, i, th_shape_text(&c->inputs[i]), error);
  }
}

static grad_case make(const char *label, tf_op op, tf_attrs attrs, backward_fn backward, int n, const th_tensor *in) {
  grad_case c;
  memset(&c, 0, sizeof(c));
  c.label = label;
  c.op = op;
  c.attrs = attrs;
  c.backward = backward;
  c.n_inputs = n;
  for (int i = 0; i < n; i++)
    c.inputs[i] = in[i];
  return c;
}

#define R(lo, hi, ...) th_random(lo, hi, TH_SHAPE(__VA_ARGS__))
#define CASE(label, op, attrs, backward, ...)                                                                          \
  do {                                                                                                                 \
    const th_tensor in_[] = {__VA_ARGS__};                                                                             \
    grad_case c_ = make(label, op, attrs, backward, (int)(sizeof(in_) / sizeof(in_[0])), in_);                         \
    check_case(counts, &c_);                                                                                           \
    th_release();                                                                                                      \
  } while (0)

static th_tensor labels(tf_dtype dtype, size_t rank, const int64_t *shape, int64_t classes) {
  th_tensor t = th_zeros(dtype, rank, shape);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = (double)th_integer(0, classes - 1);
  return t;
}

static void binary_cases(tf_test_counts *counts) {
  static const struct {
    const char *label;
    tf_op op;
    backward_fn fn;
  } ops[] = {{"add (sum_to)", TF_OP_ADD, grad_add},
             {"sub (sum_to)", TF_OP_SUB, grad_sub},
             {"mul (sum_to)", TF_OP_MUL, grad_mul},
             {"div (sum_to)", TF_OP_DIV, grad_div}};
  for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
    tf_attrs none = th_no_attrs();
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(-2, 2, 7), R(0.5, 2, 7));
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(-2, 2, 3, 1, 5), R(0.5, 2, 4, 1));
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(-2, 2, 2, 3, 5), R(0.5, 2, 5));
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(0.5, 2, 1), R(-2, 2, 2, 3));
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(0.5, 2, 3, 1), th_random(0.5, 2, 0, NULL));
    CASE(ops[k].label, ops[k].op, none, ops[k].fn, R(0.5, 2, 1, 13), R(0.5, 2, 11, 1));
  }
  tf_attrs none = th_no_attrs();
  CASE("keep (keep, sum_to)", TF_OP_KEEP, none, grad_keep, R(-2, 2, 3, 7), th_mask_with_zeros(TH_SHAPE(3, 7)));
  CASE("keep (keep, sum_to)", TF_OP_KEEP, none, grad_keep, R(-2, 2, 3, 1, 5), th_mask_with_zeros(TH_SHAPE(4, 5)));
}

static void unary_cases(tf_test_counts *counts) {
  tf_attrs none = th_no_attrs();
  CASE("neg (neg)", TF_OP_NEG, none, grad_neg, R(-2, 2, 3, 7));
  CASE("exp (mul)", TF_OP_EXP, none, grad_exp, R(-2, 2, 3, 7));
  CASE("log (div)", TF_OP_LOG, none, grad_log, R(0.3, 3, 3, 7));
  CASE("sqrt (div, mul)", TF_OP_SQRT, none, grad_sqrt, R(0.3, 3, 3, 7));
  CASE("rsqrt (mul)", TF_OP_RSQRT, none, grad_rsqrt, R(0.3, 3, 3, 7));
  CASE("relu_grad", TF_OP_RELU, none, grad_of_x, R(-2, 2, 5, 11));
  CASE("abs_grad", TF_OP_ABS, none, grad_of_x, R(-2, 2, 5, 11));
  CASE("erf_grad", TF_OP_ERF, none, grad_of_x, R(-3, 3, 5, 11));
  CASE("gelu_grad (exact)", TF_OP_GELU, th_gelu(false), grad_of_x, R(-4, 4, 5, 11));
  CASE("gelu_grad (tanh)", TF_OP_GELU, th_gelu(true), grad_of_x, R(-4, 4, 5, 11));
  CASE("silu_grad", TF_OP_SILU, none, grad_of_x, R(-6, 6, 5, 11));
  CASE("leaky_relu_grad", TF_OP_LEAKY_RELU, th_leaky_relu(0.2f), grad_of_x, R(-2, 2, 5, 11));
  CASE("clip_grad", TF_OP_CLIP, th_clip(-0.5f, 1.25f), grad_of_x, R(-2, 2, 5, 11));
  CASE("sigmoid_grad", TF_OP_SIGMOID, none, grad_of_y, R(-6, 6, 5, 11));
  CASE("tanh_grad", TF_OP_TANH, none, grad_of_y, R(-3, 3, 5, 11));
  CASE("softplus (sigmoid, mul)", TF_OP_SOFTPLUS, none, grad_softplus, R(-6, 6, 3, 7));
  CASE("softplus (sigmoid, mul)", TF_OP_SOFTPLUS, none, grad_softplus, R(21, 30, 3, 7)); // x itself past 20
  CASE("dropout (dropout of dy)", TF_OP_DROPOUT, th_dropout(0.3f, 77), grad_dropout, R(-2, 2, 4, 13));
}

static void reduction_cases(tf_test_counts *counts) {
  static const int32_t axis1[] = {1}, last_first[] = {-1, 0}, middle[] = {-2}, outer[] = {0, 2};
  for (int mean = 0; mean < 2; mean++) {
    tf_op op = mean ? TF_OP_MEAN : TF_OP_SUM;
    const char *label = mean ? "mean (reshape, expand, mul)" : "sum (reshape, expand)";
    CASE(label, op, th_reduce(false, 1, axis1), grad_sum_mean, R(-2, 2, 3, 5, 7));
    CASE(label, op, th_reduce(true, 1, axis1), grad_sum_mean, R(-2, 2, 3, 5, 7));
    CASE(label, op, th_reduce(true, 2, last_first), grad_sum_mean, R(-2, 2, 3, 5, 7));
    CASE(label, op, th_reduce(false, 2, last_first), grad_sum_mean, R(-2, 2, 3, 5, 7));
    CASE(label, op, th_reduce(false, 0, NULL), grad_sum_mean, R(-2, 2, 3, 1, 7));
    CASE(label, op, th_reduce(true, 2, outer), grad_sum_mean, R(-2, 2, 2, 3, 5, 2));
  }
  CASE("max_grad", TF_OP_MAX, th_reduce(false, 1, middle), grad_max, R(-2, 2, 3, 5, 7));
  CASE("max_grad", TF_OP_MAX, th_reduce(true, 1, axis1), grad_max, R(-2, 2, 3, 5, 7));
  CASE("max_grad", TF_OP_MAX, th_reduce(false, 2, last_first), grad_max, R(-2, 2, 3, 5, 7));
  CASE("max_grad", TF_OP_MAX, th_reduce(true, 0, NULL), grad_max, R(-2, 2, 3, 7));
  CASE("max_grad", TF_OP_MAX, th_reduce(false, 2, outer), grad_max, R(-2, 2, 2, 3, 5, 2));
  for (int log_output = 0; log_output < 2; log_output++) {
    tf_op op = log_output ? TF_OP_LOG_SOFTMAX : TF_OP_SOFTMAX;
    const char *label = log_output ? "log_softmax_grad" : "softmax_grad";
    CASE(label, op, th_axis(-1), grad_of_y, R(-3, 3, 4, 7));
    CASE(label, op, th_axis(1), grad_of_y, R(-3, 3, 2, 5, 3));
    CASE(label, op, th_axis(0), grad_of_y, R(-3, 3, 5, 3));
    CASE(label, op, th_axis(-1), grad_of_y, R(-3, 3, 3, 1));
  }
}

static void norm_cases(tf_test_counts *counts) {
  static const int64_t features[] = {1, 3, 7, 20};
  for (size_t k = 0; k < sizeof(features) / sizeof(features[0]); k++) {
    int64_t d = features[k];
    CASE("layer_norm_grad", TF_OP_LAYER_NORM, th_norm(1e-5f), grad_norm, R(-2, 2, 5, d), R(0.5, 1.5, d), R(-1, 1, d));
    CASE("layer_norm_grad", TF_OP_LAYER_NORM, th_norm(1e-3f), grad_norm, R(-2, 2, 2, 3, d), R(0.5, 1.5, d));
    CASE("rms_norm_grad", TF_OP_RMS_NORM, th_norm(1e-5f), grad_norm, R(-2, 2, 2, 3, d), R(0.5, 1.5, d));
  }
  CASE("batch_norm_grad", TF_OP_BATCH_NORM, th_norm(1e-5f), grad_norm, R(-2, 2, 3, 4, 5), R(0.5, 1.5, 4), R(-1, 1, 4));
  CASE("batch_norm_grad", TF_OP_BATCH_NORM, th_norm(1e-3f), grad_norm, R(-2, 2, 5, 3), R(0.5, 1.5, 3), R(-1, 1, 3));
  CASE("batch_norm_grad", TF_OP_BATCH_NORM, th_norm(1e-5f), grad_norm, R(-2, 2, 2, 2, 3, 2), R(0.5, 1.5, 2),
       R(-1, 1, 2));
}

static void layout_cases(tf_test_counts *counts) {
  static const int32_t swap[] = {1, 0}, rotate[] = {2, 0, 1}, heads[] = {0, 2, 1, 3};
  CASE("reshape (reshape)", TF_OP_RESHAPE, th_shape_attrs(TH_SHAPE(5, 2, 3)), grad_reshape, R(-2, 2, 2, 15));
  CASE("transpose (transpose)", TF_OP_TRANSPOSE, th_transpose(2, swap), grad_transpose, R(-2, 2, 7, 5));
  CASE("transpose (transpose)", TF_OP_TRANSPOSE, th_transpose(3, rotate), grad_transpose, R(-2, 2, 2, 3, 5));
  CASE("transpose (transpose)", TF_OP_TRANSPOSE, th_transpose(4, heads), grad_transpose, R(-2, 2, 2, 3, 2, 5));
  CASE("concat (slice)", TF_OP_CONCAT, th_axis(-2), grad_concat, R(-2, 2, 2, 1, 3), R(-2, 2, 2, 4, 3),
       R(-2, 2, 2, 2, 3));
  CASE("concat (slice)", TF_OP_CONCAT, th_axis(0), grad_concat, R(-2, 2, 3, 2), R(-2, 2, 1, 2));
  CASE("slice_grad", TF_OP_SLICE, th_slice(1, -6, 100, 2), grad_slice, R(-2, 2, 3, 7, 2));
  CASE("slice_grad", TF_OP_SLICE, th_slice(-1, 1, -1, 1), grad_slice, R(-2, 2, 3, 5));
  CASE("slice_grad", TF_OP_SLICE, th_slice(0, 0, 5, 3), grad_slice, R(-2, 2, 5));
  CASE("expand (sum_to)", TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(2, 3, 4)), grad_expand, R(-2, 2, 3, 1));
  CASE("expand (sum_to)", TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(3, 5, 2)), grad_expand, R(-2, 2, 1, 1));
  CASE("expand (sum_to)", TF_OP_EXPAND, th_shape_attrs(TH_SHAPE(4, -1)), grad_expand, R(-2, 2, 1, 5));
}

static void loss_cases(tf_test_counts *counts) {
  th_tensor ids = labels(TF_I64, TH_SHAPE(7), 5);
  ids.values[2] = -100; // ignore_index
  ids.values[5] = 9;    // out of range: ignored as well
  CASE("cross_entropy_grad", TF_OP_CROSS_ENTROPY, th_cross_entropy(-100), grad_loss, R(-3, 3, 7, 5), ids);
  CASE("cross_entropy_grad", TF_OP_CROSS_ENTROPY, th_cross_entropy(1), grad_loss, R(-3, 3, 2, 3, 4),
       labels(TF_I32, TH_SHAPE(2, 3), 4));
  CASE("cross_entropy_grad", TF_OP_CROSS_ENTROPY, th_cross_entropy(-1), grad_loss, R(-3, 3, 1, 1),
       labels(TF_I32, TH_SHAPE(1), 1));
  CASE("mse_grad", TF_OP_MSE, th_no_attrs(), grad_loss, R(-2, 2, 3, 7), R(-2, 2, 3, 7));
  CASE("bce_with_logits_grad", TF_OP_BCE_WITH_LOGITS, th_no_attrs(), grad_loss, R(-5, 5, 3, 7), R(0, 1, 3, 7));
}

/* Ties: max_grad splits dy evenly among the maxima (torch.amax), exactly. */
static void tie_cases(tf_test_counts *counts) {
  static const int32_t last[] = {-1};
  th_tensor x = th_zeros(TF_F32, TH_SHAPE(2, 3)), dy = th_zeros(TF_F32, TH_SHAPE(2));
  const double xs[] = {1, 3, 3, 2, 2, 2}, expected[] = {0, 0.75, 0.75, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  memcpy(x.values, xs, sizeof(xs));
  dy.values[0] = 1.5;
  dy.values[1] = 1;
  tf_attrs a = th_reduce(false, 1, last);
  th_tensor y = th_call(TF_OP_MAX, &a, &x), dx = th_call(TF_OP_MAX_GRAD, &a, &x, &y, &dy);
  bool exact = true;
  for (int i = 0; i < 6; i++)
    exact = exact && dx.values[i] == expected[i];
  printf("max_grad ties: dy split evenly among equal maxima: %s\n", exact ? "exact" : "WRONG");
  CHECK(counts, exact, "max_grad with ties");
  th_release();
}

int main(void) {
  tf_test_counts counts = {0, 0};
  th_seed(20240611);
  binary_cases(&counts);
  unary_cases(&counts);
  reduction_cases(&counts);
  norm_cases(&counts);
  layout_cases(&counts);
  loss_cases(&counts);
  tie_cases(&counts);
  printf("finite differences (f64, central, step %g): worst max|num-ana|/max(max|ana|,1e-3) per op, limit %g\n", STEP,
         LIMIT);
  for (int i = 0; i < n_worst; i++)
    printf("  %-30s %9.2e  (%d inputs)\n", worst[i].label, worst[i].error, worst[i].cases);
  return tf_test_finish("ops_elementwise gradcheck", &counts);
}
