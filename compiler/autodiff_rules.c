/* The vector-Jacobian product of every graph op, one small function each, and the table that maps
 * ops to them. Shapes are concrete here (symbols are bound before autodiff), so reshape targets
 * are plain numbers. Integer inputs (ids, labels) never receive gradients. */
#include <string.h>

#include "compiler/autodiff.h"

static const tf_ir_tensor *tensor(const tf_vjp *v, int32_t id) { return &v->t->g->tensors[id]; }
static const tf_attrs *attrs(const tf_vjp *v) { return &v->t->g->nodes[v->node].attrs; }

static int32_t op1(tf_vjp *v, tf_op op, int32_t a, const tf_attrs *at) { return tf_vjp_op(v, op, &a, 1, at); }

static int32_t op2(tf_vjp *v, tf_op op, int32_t a, int32_t b, const tf_attrs *at) {
  int32_t in[2] = {a, b};
  return tf_vjp_op(v, op, in, 2, at);
}

static int32_t op3(tf_vjp *v, tf_op op, int32_t a, int32_t b, int32_t c, const tf_attrs *at) {
  int32_t in[3] = {a, b, c};
  return tf_vjp_op(v, op, in, 3, at);
}

static bool same_shape(const tf_vjp *v, int32_t a, int32_t b) {
  const tf_ir_tensor *x = tensor(v, a), *y = tensor(v, b);
  return x->rank == y->rank && memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank) == 0;
}

/* Sums `g` over the axes that broadcasting added to reach it from `like`'s shape. */
static int32_t reduce_to(tf_vjp *v, int32_t g, int32_t like) {
  if (g < 0 || same_shape(v, g, like))
    return g;
  return op2(v, TF_OP_SUM_TO, g, like, NULL);
}

static int32_t reshape_like(tf_vjp *v, int32_t g, int32_t like) {
  if (g < 0 || same_shape(v, g, like))
    return g;
  tf_attrs at = tf_vjp_shape_attrs(v, like);
  return op1(v, TF_OP_RESHAPE, g, &at);
}

static tf_attrs matmul_attrs(bool transpose_a, bool transpose_b) {
  tf_attrs at;
  memset(&at, 0, sizeof(at));
  at.kind = TF_ATTR_MATMUL;
  at.u.matmul.transpose_a = transpose_a;
  at.u.matmul.transpose_b = transpose_b;
  return at;
}

static int32_t matmul(tf_vjp *v, int32_t a, int32_t b, bool ta, bool tb) {
  tf_attrs at = matmul_attrs(ta, tb);
  return op2(v, TF_OP_MATMUL, a, b, &at);
}

/* Reshapes `x` to [rows, last dim] (a view of its leading dims as one). */
static int32_t flatten_rows(tf_vjp *v, int32_t x) {
  const tf_ir_tensor *t = tensor(v, x);
  tf_attrs at;
  memset(&at, 0, sizeof(at));
  at.kind = TF_ATTR_SHAPE;
  at.u.shape.shape.rank = 2;
  at.u.shape.shape.dims[0] = (tf_dim){-1, -1};
  at.u.shape.shape.dims[1] = (tf_dim){t->shape[t->rank - 1], -1};
  return op1(v, TF_OP_RESHAPE, x, &at);
}

/* C = op(A) op(B). dA and dB by the four transpose cases; a rank-2 B shared by a batched A (a
 * linear layer) gets its gradient from one matmul over the flattened rows, never a batched
 * temporary of the weight's size per batch element. */
static void vjp_matmul_b(tf_vjp *v, int32_t a, int32_t b, int32_t dy, bool ta, bool tb);

static void vjp_matmul(tf_vjp *v) {
  bool ta = attrs(v)->u.matmul.transpose_a, tb = attrs(v)->u.matmul.transpose_b;
  int32_t a = tf_vjp_input(v, 0), b = tf_vjp_input(v, 1), dy = v->dy;
  /* With recompute, db (which reads the activation a, perhaps recomputed) is emitted first: the
   * schedule runs a's recompute just before its first reader, and da, emitted first, would sit in the
   * arena through that whole recompute (gpt2-small's [8, 1024, 3072] c_proj input gradient, 96 MiB,
   * across the last block's recompute: the peak). Without recompute da comes first, as before. */
  const bool db_first = v->t->options.remat != TF_REMAT_NONE;
  if (db_first && tf_vjp_wants(v, 1))
    vjp_matmul_b(v, a, b, dy, ta, tb);
  if (tf_vjp_wants(v, 0)) {
    int32_t da = !ta ? matmul(v, dy, b, false, !tb) : tb ? matmul(v, b, dy, true, true) : matmul(v, b, dy, false, true);
    tf_vjp_give(v, 0, reduce_to(v, da, a));
  }
  if (!db_first && tf_vjp_wants(v, 1))
    vjp_matmul_b(v, a, b, dy, ta, tb);
}

static void vjp_matmul_b(tf_vjp *v, int32_t a, int32_t b, int32_t dy, bool ta, bool tb) {
  int32_t db;
  if (tensor(v, b)->rank == 2 && tensor(v, a)->rank > 2 && !ta) {
    int32_t a2 = flatten_rows(v, a), dy2 = flatten_rows(v, dy);
    db = tb ? matmul(v, dy2, a2, true, false) : matmul(v, a2, dy2, true, false);
  } else if (!ta) {
    db = tb ? matmul(v, dy, a, true, false) : matmul(v, a, dy, true, false);
  } else {
    db = tb ? matmul(v, dy, a, true, true) : matmul(v, a, dy, false, false);
  }
  tf_vjp_give(v, 1, reduce_to(v, db, b));
}

static void vjp_add(tf_vjp *v) {
  tf_vjp_give(v, 0, reduce_to(v, v->dy, tf_vjp_input(v, 0)));
  tf_vjp_give(v, 1, reduce_to(v, v->dy, tf_vjp_input(v, 1)));
}

static void vjp_sub(tf_vjp *v) {
  tf_vjp_give(v, 0, reduce_to(v, v->dy, tf_vjp_input(v, 0)));
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, reduce_to(v, op1(v, TF_OP_NEG, v->dy, NULL), tf_vjp_input(v, 1)));
}

static void vjp_mul(tf_vjp *v) {
  int32_t a = tf_vjp_input(v, 0), b = tf_vjp_input(v, 1);
  if (tf_vjp_wants(v, 0))
    tf_vjp_give(v, 0, reduce_to(v, op2(v, TF_OP_MUL, v->dy, b, NULL), a));
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, reduce_to(v, op2(v, TF_OP_MUL, v->dy, a, NULL), b));
}

/* y = a / b: da = dy / b, db = -dy * y / b. */
static void vjp_div(tf_vjp *v) {
  int32_t a = tf_vjp_input(v, 0), b = tf_vjp_input(v, 1);
  if (tf_vjp_wants(v, 0))
    tf_vjp_give(v, 0, reduce_to(v, op2(v, TF_OP_DIV, v->dy, b, NULL), a));
  if (tf_vjp_wants(v, 1)) {
    int32_t t = op2(v, TF_OP_DIV, op2(v, TF_OP_MUL, v->dy, tf_vjp_output(v), NULL), b, NULL);
    tf_vjp_give(v, 1, reduce_to(v, op1(v, TF_OP_NEG, t, NULL), b));
  }
}

/* y = keep(x, m): dx = keep(dy, m), 0 where x was not kept (a NaN dy there too); m gets none. */
static void vjp_keep(tf_vjp *v) {
  const int32_t x = tf_vjp_input(v, 0);
  if (tf_vjp_wants(v, 0))
    tf_vjp_give(v, 0, reduce_to(v, op2(v, TF_OP_KEEP, v->dy, tf_vjp_input(v, 1), NULL), x));
}

static void vjp_neg(tf_vjp *v) { tf_vjp_give(v, 0, op1(v, TF_OP_NEG, v->dy, NULL)); }
static void vjp_exp(tf_vjp *v) { tf_vjp_give(v, 0, op2(v, TF_OP_MUL, v->dy, tf_vjp_output(v), NULL)); }
static void vjp_log(tf_vjp *v) { tf_vjp_give(v, 0, op2(v, TF_OP_DIV, v->dy, tf_vjp_input(v, 0), NULL)); }

/* y = sqrt(x): dx = 0.5 dy / y. */
static void vjp_sqrt(tf_vjp *v) {
  int32_t ratio = op2(v, TF_OP_DIV, v->dy, tf_vjp_output(v), NULL);
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, ratio, tf_vjp_scalar(v, 0.5), NULL));
}

/* y = x^-1/2: dx = -0.5 dy y^3. */
static void vjp_rsqrt(tf_vjp *v) {
  int32_t y = tf_vjp_output(v);
  int32_t cube = op2(v, TF_OP_MUL, op2(v, TF_OP_MUL, y, y, NULL), y, NULL);
  int32_t scaled = op2(v, TF_OP_MUL, v->dy, cube, NULL);
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, scaled, tf_vjp_scalar(v, -0.5), NULL));
}

/* Gradient kernels that read the forward input x. */
static void vjp_from_input(tf_vjp *v, tf_op grad_op) {
  tf_vjp_give(v, 0, op2(v, grad_op, tf_vjp_input(v, 0), v->dy, attrs(v)->kind ? attrs(v) : NULL));
}

/* Gradient kernels that read the forward output y. */
static void vjp_from_output(tf_vjp *v, tf_op grad_op) {
  tf_vjp_give(v, 0, op2(v, grad_op, tf_vjp_output(v), v->dy, attrs(v)->kind ? attrs(v) : NULL));
}

/* relu_grad and clip_grad read y, which selects the same elements as x does (y > 0 exactly where x > 0;
 * lo < y < hi exactly where lo < x < hi, the bounds excluded), as PyTorch's relu does: y is what the
 * next layer's gradient keeps anyway (a conv's or matmul's input), so x (a BatchNorm's output, a
 * conv's) is not kept for it. */
static void vjp_relu(tf_vjp *v) { vjp_from_output(v, TF_OP_RELU_GRAD); }
static void vjp_gelu(tf_vjp *v) { vjp_from_input(v, TF_OP_GELU_GRAD); }
static void vjp_silu(tf_vjp *v) { vjp_from_input(v, TF_OP_SILU_GRAD); }
static void vjp_leaky_relu(tf_vjp *v) { vjp_from_input(v, TF_OP_LEAKY_RELU_GRAD); } /* PyTorch's: x > 0 */
static void vjp_abs(tf_vjp *v) { vjp_from_input(v, TF_OP_ABS_GRAD); }               /* PyTorch's: dy sgn(x) */
static void vjp_erf(tf_vjp *v) { vjp_from_input(v, TF_OP_ERF_GRAD); }               /* dy 2/sqrt(pi) e^(-x²) */
static void vjp_clip(tf_vjp *v) { vjp_from_output(v, TF_OP_CLIP_GRAD); } /* as relu's; PyTorch's hardtanh rule */
static void vjp_sigmoid(tf_vjp *v) { vjp_from_output(v, TF_OP_SIGMOID_GRAD); }
static void vjp_tanh(tf_vjp *v) { vjp_from_output(v, TF_OP_TANH_GRAD); }
/* y = sin(x): dx = dy cos(x); y = cos(x): dx = dy (-sin(x)). */
static void vjp_sin(tf_vjp *v) {
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, v->dy, op1(v, TF_OP_COS, tf_vjp_input(v, 0), NULL), NULL));
}
static void vjp_cos(tf_vjp *v) {
  int32_t minus_sin = op1(v, TF_OP_NEG, op1(v, TF_OP_SIN, tf_vjp_input(v, 0), NULL), NULL);
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, v->dy, minus_sin, NULL));
}
/* The inverse and hyperbolic functions: dx = dy f'(x), f' composed of existing ops; 1 - x² as
 * (1 - x)(1 + x), exact near |x| = 1, where the gradients grow without bound. */
static int32_t times_dy(tf_vjp *v, int32_t derivative) { return op2(v, TF_OP_MUL, v->dy, derivative, NULL); }
static int32_t one_minus_square(tf_vjp *v, int32_t x) {
  int32_t one = tf_vjp_scalar(v, 1.0);
  return op2(v, TF_OP_MUL, op2(v, TF_OP_SUB, one, x, NULL), op2(v, TF_OP_ADD, one, x, NULL), NULL);
}
static int32_t one_plus_square(tf_vjp *v, int32_t x) {
  return op2(v, TF_OP_ADD, op2(v, TF_OP_MUL, x, x, NULL), tf_vjp_scalar(v, 1.0), NULL);
}
static void vjp_asin(tf_vjp *v) { /* 1 / sqrt(1 - x²) */
  tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_RSQRT, one_minus_square(v, tf_vjp_input(v, 0)), NULL)));
}
static void vjp_acos(tf_vjp *v) { /* -1 / sqrt(1 - x²) */
  int32_t rsqrt = op1(v, TF_OP_RSQRT, one_minus_square(v, tf_vjp_input(v, 0)), NULL);
  tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_NEG, rsqrt, NULL)));
}
static void vjp_atan(tf_vjp *v) { /* 1 / (1 + x²) */
  tf_vjp_give(v, 0, op2(v, TF_OP_DIV, v->dy, one_plus_square(v, tf_vjp_input(v, 0)), NULL));
}
static void vjp_tan(tf_vjp *v) { tf_vjp_give(v, 0, times_dy(v, one_plus_square(v, tf_vjp_output(v)))); } /* 1 + y² */
static void vjp_sinh(tf_vjp *v) { tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_COSH, tf_vjp_input(v, 0), NULL))); }
static void vjp_cosh(tf_vjp *v) { tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_SINH, tf_vjp_input(v, 0), NULL))); }
static void vjp_asinh(tf_vjp *v) { /* 1 / sqrt(1 + x²) */
  tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_RSQRT, one_plus_square(v, tf_vjp_input(v, 0)), NULL)));
}
static void vjp_acosh(tf_vjp *v) { /* 1 / sqrt((x - 1)(x + 1)) */
  int32_t x = tf_vjp_input(v, 0), one = tf_vjp_scalar(v, 1.0);
  int32_t product = op2(v, TF_OP_MUL, op2(v, TF_OP_SUB, x, one, NULL), op2(v, TF_OP_ADD, x, one, NULL), NULL);
  tf_vjp_give(v, 0, times_dy(v, op1(v, TF_OP_RSQRT, product, NULL)));
}
static void vjp_atanh(tf_vjp *v) { /* 1 / (1 - x²) */
  tf_vjp_give(v, 0, op2(v, TF_OP_DIV, v->dy, one_minus_square(v, tf_vjp_input(v, 0)), NULL));
}
/* y = log(1 + e^x): dx = dy sigmoid(x), from the existing kernels. */
static void vjp_softplus(tf_vjp *v) {
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, v->dy, op1(v, TF_OP_SIGMOID, tf_vjp_input(v, 0), NULL), NULL));
}
static void vjp_softmax(tf_vjp *v) { vjp_from_output(v, TF_OP_SOFTMAX_GRAD); }
static void vjp_log_softmax(tf_vjp *v) { vjp_from_output(v, TF_OP_LOG_SOFTMAX_GRAD); }

/* sum: dy broadcast back over the reduced axes (first re-inserting them when keepdims is off). */
static int32_t expand_reduced(tf_vjp *v, int32_t dy) {
  int32_t x = tf_vjp_input(v, 0);
  const tf_reduce_attrs *r = &attrs(v)->u.reduce;
  const tf_ir_tensor *input = tensor(v, x);
  tf_attrs kept;
  memset(&kept, 0, sizeof(kept));
  kept.kind = TF_ATTR_SHAPE;
  kept.u.shape.shape.rank = input->rank;
  for (int32_t d = 0; d < input->rank; d++) {
    bool reduced = r->n_axes == 0;
    for (int32_t k = 0; k < r->n_axes; k++)
      reduced = reduced || r->axes[k] == d || r->axes[k] + input->rank == d;
    kept.u.shape.shape.dims[d] = (tf_dim){reduced ? 1 : input->shape[d], -1};
  }
  int32_t shaped = r->keepdims ? dy : op1(v, TF_OP_RESHAPE, dy, &kept);
  tf_attrs full = tf_vjp_shape_attrs(v, x);
  return op1(v, TF_OP_EXPAND, shaped, &full);
}

static void vjp_sum(tf_vjp *v) { tf_vjp_give(v, 0, expand_reduced(v, v->dy)); }

static void vjp_mean(tf_vjp *v) {
  const tf_ir_tensor *x = tensor(v, tf_vjp_input(v, 0)), *y = tensor(v, tf_vjp_output(v));
  double inputs = 1, outputs = 1;
  for (int32_t d = 0; d < x->rank; d++)
    inputs *= (double)x->shape[d];
  for (int32_t d = 0; d < y->rank; d++)
    outputs *= (double)y->shape[d];
  int32_t spread = expand_reduced(v, v->dy);
  tf_vjp_give(v, 0, op2(v, TF_OP_MUL, spread, tf_vjp_scalar(v, inputs > 0 ? outputs / inputs : 0), NULL));
}

static void vjp_max(tf_vjp *v) {
  tf_vjp_give(v, 0, op3(v, TF_OP_MAX_GRAD, tf_vjp_input(v, 0), tf_vjp_output(v), v->dy, attrs(v)));
}

static void vjp_norm(tf_vjp *v) {
  bool layer = v->t->g->nodes[v->node].op == TF_OP_LAYER_NORM;
  int32_t in[3] = {tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy};
  int32_t out[TF_MAX_OUTPUTS];
  tf_vjp_op_multi(v, layer ? TF_OP_LAYER_NORM_GRAD : TF_OP_RMS_NORM_GRAD, in, 3, attrs(v), out);
  tf_vjp_give(v, 0, out[0]);
  tf_vjp_give(v, 1, out[1]);
  if (layer)
    tf_vjp_give(v, 2, out[2]);
}

/* batch_norm_grad recomputes the batch's statistics from x, as layer_norm_grad does its rows'. */
static void vjp_batch_norm(tf_vjp *v) {
  int32_t in[3] = {tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy};
  int32_t out[TF_MAX_OUTPUTS];
  tf_vjp_op_multi(v, TF_OP_BATCH_NORM_GRAD, in, 3, attrs(v), out);
  for (int32_t i = 0; i < 3; i++)
    tf_vjp_give(v, i, out[i]);
}

static void vjp_embedding(tf_vjp *v) {
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, op3(v, TF_OP_EMBEDDING_GRAD, tf_vjp_input(v, 0), v->dy, tf_vjp_input(v, 1), NULL));
}

static void vjp_reshape(tf_vjp *v) { tf_vjp_give(v, 0, reshape_like(v, v->dy, tf_vjp_input(v, 0))); }

static void vjp_transpose(tf_vjp *v) {
  const tf_transpose_attrs *p = &attrs(v)->u.transpose;
  tf_attrs inverse;
  memset(&inverse, 0, sizeof(inverse));
  inverse.kind = TF_ATTR_TRANSPOSE;
  inverse.u.transpose.rank = p->rank;
  for (int32_t i = 0; i < p->rank; i++)
    inverse.u.transpose.perm[p->perm[i]] = i;
  tf_vjp_give(v, 0, op1(v, TF_OP_TRANSPOSE, v->dy, &inverse));
}

/* Emitting nodes may move the node array: read the forward node through its id every time. */
static void vjp_concat(tf_vjp *v) {
  int32_t rank = tensor(v, v->dy)->rank;
  int32_t axis = attrs(v)->u.axis.axis < 0 ? attrs(v)->u.axis.axis + rank : attrs(v)->u.axis.axis;
  int32_t n_inputs = v->t->g->nodes[v->node].n_inputs;
  int64_t start = 0;
  for (int32_t i = 0; i < n_inputs; i++) {
    int64_t length = tensor(v, tf_vjp_input(v, i))->shape[axis];
    if (length > 0 && tf_vjp_wants(v, i)) { /* a part of no elements takes no gradient (an empty slice) */
      tf_attrs at;
      memset(&at, 0, sizeof(at));
      at.kind = TF_ATTR_SLICE;
      at.u.slice = (tf_slice_attrs){axis, start, start + length, 1};
      tf_vjp_give(v, i, op1(v, TF_OP_SLICE, v->dy, &at));
    }
    start += length;
  }
}

static void vjp_slice(tf_vjp *v) { tf_vjp_give(v, 0, op2(v, TF_OP_SLICE_GRAD, v->dy, tf_vjp_input(v, 0), attrs(v))); }

static void vjp_expand(tf_vjp *v) { tf_vjp_give(v, 0, reduce_to(v, v->dy, tf_vjp_input(v, 0))); }

/* The bias of a convolution is added per channel (axis 1): its gradient sums dy over the rest. */
static int32_t channel_sum(tf_vjp *v, int32_t dy) {
  int32_t rank = tensor(v, dy)->rank;
  int32_t axes[TF_MAX_RANK], n = 0;
  for (int32_t d = 0; d < rank; d++)
    if (d != 1)
      axes[n++] = d;
  tf_attrs at;
  memset(&at, 0, sizeof(at));
  at.kind = TF_ATTR_REDUCE;
  at.u.reduce.n_axes = n;
  memcpy(at.u.reduce.axes, axes, sizeof(int32_t) * (size_t)n);
  return op1(v, TF_OP_SUM, dy, &at);
}

static void vjp_conv(tf_vjp *v) {
  bool is_1d = v->t->g->nodes[v->node].op == TF_OP_CONV1D;
  int32_t x = tf_vjp_input(v, 0), w = tf_vjp_input(v, 1);
  if (tf_vjp_wants(v, 0))
    tf_vjp_give(v, 0, op3(v, is_1d ? TF_OP_CONV1D_GRAD_INPUT : TF_OP_CONV2D_GRAD_INPUT, v->dy, w, x, attrs(v)));
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, op3(v, is_1d ? TF_OP_CONV1D_GRAD_WEIGHT : TF_OP_CONV2D_GRAD_WEIGHT, x, v->dy, w, attrs(v)));
  if (tf_vjp_wants(v, 2))
    tf_vjp_give(v, 2, channel_sum(v, v->dy));
}

/* y = conv_transpose2d(x, w) is the adjoint of conv2d(., w): dx = conv2d(dy, w) and
 * dw = conv2d_grad_weight(dy, x) with the roles of input and output swapped. */
static void vjp_conv_transpose2d(tf_vjp *v) {
  int32_t x = tf_vjp_input(v, 0), w = tf_vjp_input(v, 1);
  tf_attrs conv = *attrs(v);
  conv.u.conv.output_padding[0] = conv.u.conv.output_padding[1] = 0;
  if (tf_vjp_wants(v, 0))
    tf_vjp_give(v, 0, op2(v, TF_OP_CONV2D, v->dy, w, &conv));
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, op3(v, TF_OP_CONV2D_GRAD_WEIGHT, v->dy, x, w, &conv));
  if (tf_vjp_wants(v, 2))
    tf_vjp_give(v, 2, channel_sum(v, v->dy));
}

static void vjp_max_pool2d(tf_vjp *v) {
  tf_vjp_give(v, 0, op2(v, TF_OP_MAX_POOL2D_GRAD, tf_vjp_input(v, 0), v->dy, attrs(v)));
}

static void vjp_avg_pool2d(tf_vjp *v) {
  tf_vjp_give(v, 0, op2(v, TF_OP_AVG_POOL2D_GRAD, v->dy, tf_vjp_input(v, 0), attrs(v)));
}

/* The same mask (same attributes, same RNG key) applied to dy. */
static void vjp_dropout(tf_vjp *v) { tf_vjp_give(v, 0, op1(v, TF_OP_DROPOUT, v->dy, attrs(v))); }

static void vjp_attention(tf_vjp *v) {
  int32_t in[4] = {tf_vjp_input(v, 0), tf_vjp_input(v, 1), tf_vjp_input(v, 2), v->dy};
  int32_t out[TF_MAX_OUTPUTS];
  tf_vjp_op_multi(v, TF_OP_ATTENTION_GRAD, in, 4, attrs(v), out);
  for (int32_t i = 0; i < 3; i++)
    tf_vjp_give(v, i, out[i]);
}

/* A head with a bias (input 3) takes linear_cross_entropy_bias_grad, whose third output is dbias:
 * the bias is read for the logits whether or not its gradient is wanted. */
static void vjp_linear_cross_entropy(tf_vjp *v) {
  const bool bias = v->t->g->nodes[v->node].n_inputs == 4;
  int32_t in[5] = {tf_vjp_input(v, 0), tf_vjp_input(v, 1), tf_vjp_input(v, 2), v->dy, bias ? tf_vjp_input(v, 3) : -1};
  int32_t out[TF_MAX_OUTPUTS];
  tf_vjp_op_multi(v, bias ? TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD : TF_OP_LINEAR_CROSS_ENTROPY_GRAD, in, bias ? 5 : 4,
                  attrs(v), out);
  tf_vjp_give(v, 0, out[0]);
  tf_vjp_give(v, 1, out[1]);
  if (bias)
    tf_vjp_give(v, 3, out[2]);
}

static void vjp_cast(tf_vjp *v) {
  tf_attrs at;
  memset(&at, 0, sizeof(at));
  at.kind = TF_ATTR_CAST;
  at.u.cast.to = tensor(v, tf_vjp_input(v, 0))->dtype;
  tf_vjp_give(v, 0, op1(v, TF_OP_CAST, v->dy, &at));
}

static void vjp_cross_entropy(tf_vjp *v) {
  tf_vjp_give(v, 0, op3(v, TF_OP_CROSS_ENTROPY_GRAD, tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy, attrs(v)));
}

/* The lengths, when given, stay ctc_loss_grad's last input (its dtypes rule reads them there). */
static void vjp_ctc_loss(tf_vjp *v) {
  const bool lengths = v->t->g->nodes[v->node].n_inputs == 3;
  int32_t in[4] = {tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy, lengths ? tf_vjp_input(v, 2) : -1};
  tf_vjp_give(v, 0, tf_vjp_op(v, TF_OP_CTC_LOSS_GRAD, in, lengths ? 4 : 3, attrs(v)));
}

/* mse is symmetric in its operands: d/dtarget = -d/dprediction. */
static void vjp_mse(tf_vjp *v) {
  int32_t d = op3(v, TF_OP_MSE_GRAD, tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy, NULL);
  tf_vjp_give(v, 0, d);
  if (tf_vjp_wants(v, 1))
    tf_vjp_give(v, 1, op1(v, TF_OP_NEG, d, NULL));
}

static void vjp_bce_with_logits(tf_vjp *v) {
  if (tf_vjp_wants(v, 1) && !v->status)
    v->status = tf_status_new(TF_ERR_UNSUPPORTED, "node '%s' (bce_with_logits): no gradient for the target",
                              v->t->g->nodes[v->node].name);
  tf_vjp_give(v, 0, op3(v, TF_OP_BCE_WITH_LOGITS_GRAD, tf_vjp_input(v, 0), tf_vjp_input(v, 1), v->dy, NULL));
}

/* The vjp column of the op table (core/op_table.h): vjp_<vjp>, or none. */
#define vjp_none NULL
#define RULE(ID, op_name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias, workspace, vjp, \
             ...)                                                                                                      \
  [TF_OP_##ID] = vjp_##vjp,
static const tf_vjp_rule rules[TF_OP_COUNT] = {TF_OP_TABLE(RULE)};
#undef RULE
#undef vjp_none

tf_vjp_rule tf_vjp_rule_for(tf_op op) {
  if ((int)op < 0 || op >= TF_OP_COUNT)
    return NULL;
  return rules[op];
}
