/* ONNX operators to graph ops: one converter per operator type, in a table (docs/import.md lists
 * the same rows); the layout and value operators are in onnx_layout.c, reductions in onnx_reduce.c,
 * element-wise composites in onnx_elementwise.c. A converter folds the node when its inputs are
 * known at import time (shape arithmetic), and otherwise adds graph ops through the builder, which checks shapes as it
 * goes. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_convert.h"
#include "import/onnx_fold.h"

typedef tf_status (*ox_converter)(ox_import *im, const ox_node *node);

const char *ox_input(const ox_node *node, int32_t i) {
  return i < node->n_inputs && node->inputs[i] && *node->inputs[i] ? node->inputs[i] : NULL;
}

tf_status ox_fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) {
  char reason[512], label[256];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof(reason), fmt, args);
  va_end(args);
  return tf_status_new(code, "%s: %s: %s", im->source, ox_node_label(node, label, sizeof(label)), reason);
}

tf_status ox_at(const ox_import *im, const ox_node *node, tf_status status) {
  char label[256];
  return status ? tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label))) : NULL;
}

tf_status ox_need_input(ox_import *im, const ox_node *node, int32_t i) {
  return ox_input(node, i) ? NULL : ox_fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " is missing", i);
}

bool ox_is_known(ox_import *im, const char *name) {
  ox_value *v = name ? ox_value_find(im, name) : NULL;
  return v && v->known && v->tensor == TF_NO_TENSOR;
}

/* Output `i` becomes graph tensor `id` (renamed to the ONNX name when it is a graph output). */
tf_status ox_set_tensor(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id id) {
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  if ((size_t)i >= node->proto->n_output)
    return NULL;
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  v->tensor = id;
  return NULL;
}

tf_status ox_set_known(ox_import *im, const ox_node *node, int32_t i, ox_known *k) {
  if ((size_t)i >= node->proto->n_output) {
    ox_known_free(k);
    return NULL;
  }
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v) {
    ox_known_free(k);
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  ox_known_free(v->known);
  v->known = k;
  return NULL;
}

tf_status ox_tensor_of(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  return ox_tensor(im, node, ox_input(node, i), id);
}

tf_status ox_known_of(ox_import *im, const ox_node *node, int32_t i, const ox_known **k) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  return ox_need_known(im, node, ox_input(node, i), k);
}

/* The rank of a graph tensor after inference. */
int32_t ox_rank_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.rank : 0;
}

tf_dtype ox_dtype_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.dtype : TF_F32;
}

/* Known integers of input i as plain numbers (no symbols), at most max. */
tf_status ox_fixed_ints(ox_import *im, const ox_node *node, int32_t i, int64_t *out, int32_t max, int32_t *n) {
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, i, &k));
  if (k->is_float || k->count > max)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " must hold at most %" PRId32 " integers", i, max);
  for (int64_t j = 0; j < k->count; j++) {
    if (k->ints[j].symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " element %" PRId64 " is a symbolic size", i, j);
    out[j] = k->ints[j].size;
  }
  *n = (int32_t)k->count;
  return NULL;
}

/* A scalar constant of `dtype` holding `value`, named after the node. */
tf_tensor_id ox_scalar(ox_import *im, const ox_node *node, tf_dtype dtype, double value) {
  char name[300];
  int counter = 0;
  do
    snprintf(name, sizeof(name), "%s.const%d", node->proto->output[0], counter++);
  while (tf_graph_find_tensor(im->graph, name) != TF_NO_TENSOR);
  tf_shape shape = {0};
  return tf_graph_constant(im->graph, name, dtype, shape, tf_init_make(TF_INIT_FILL, value, 0));
}

/* Operand i of an elementwise op whose other operand is tensor `other`: a known scalar becomes a
 * constant of the other's dtype. */
tf_status ox_operand(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id other, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  const char *name = ox_input(node, i);
  if (ox_is_known(im, name) && other != TF_NO_TENSOR) {
    const ox_known *k = ox_value_find(im, name)->known;
    if (k->count == 1 && (k->is_float || k->ints[0].symbol < 0)) {
      *id = ox_scalar(im, node, ox_dtype_of(im, other), k->is_float ? k->reals[0] : (double)k->ints[0].size);
      return ox_graph_error(im, node);
    }
  }
  return ox_tensor(im, node, name, id);
}

/* ---- elementwise ---- */

static bool is_half_dtype(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* Operands of one op in f32 and in f16/bf16: the f32 one is cast to the half type. ONNX wants one
 * type, yet PyTorch 1.13 exports a bf16 model's `scores / sqrt(d)` with a shape-derived f32 scale as
 * Cast(scores, float) -> Div -> Softmax in f32, then MatMul with the bf16 values (eager PyTorch
 * computes that product in bf16), and a decomposed bf16 LayerNorm with f32 scale and shift. Other
 * mismatches are left to the builder's error. */
void ox_match_half(ox_import *im, tf_tensor_id *a, tf_tensor_id *b) {
  tf_tensor_info x, y;
  if (!tf_graph_tensor(im->graph, *a, &x) || !tf_graph_tensor(im->graph, *b, &y))
    return;
  if (x.dtype == TF_F32 && is_half_dtype(y.dtype))
    *a = tf_cast(im->graph, *a, y.dtype);
  else if (y.dtype == TF_F32 && is_half_dtype(x.dtype))
    *b = tf_cast(im->graph, *b, x.dtype);
}

static tf_status binary(ox_import *im, const ox_node *node, char symbol, tf_op op) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const char *a = ox_input(node, 0), *b = ox_input(node, 1);
  if (ox_is_known(im, a) && ox_is_known(im, b)) {
    ox_known *k;
    TF_RETURN_IF_ERROR(
        ox_at(im, node, ox_fold_binary(symbol, ox_value_find(im, a)->known, ox_value_find(im, b)->known, &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id ta = TF_NO_TENSOR, tb = TF_NO_TENSOR;
  if (!ox_is_known(im, a))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, a, &ta));
  if (!ox_is_known(im, b))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, b, &tb));
  if (ta == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(ox_operand(im, node, 0, tb, &ta));
  if (tb == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(ox_operand(im, node, 1, ta, &tb));
  ox_match_half(im, &ta, &tb);
  tf_tensor_id ids[2] = {ta, tb};
  return ox_set_tensor(im, node, 0, tf_graph_node(im->graph, op, ids, 2, NULL));
}

static tf_status convert_add(ox_import *im, const ox_node *node) { return binary(im, node, '+', TF_OP_ADD); }

/* Equal and Where on values known at import time: the shape arithmetic torch.onnx.export writes for
 * `expand(n, t)` (Where(Equal(shape, -1), ones, shape)). On data they are refused. */
static tf_status convert_equal(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const char *a = ox_input(node, 0), *b = ox_input(node, 1);
  if (!ox_is_known(im, a) || !ox_is_known(im, b))
    return ox_convert_mask_equal(im, node);
  ox_known *k;
  TF_RETURN_IF_ERROR(
      ox_at(im, node, ox_fold_binary('=', ox_value_find(im, a)->known, ox_value_find(im, b)->known, &k)));
  return ox_set_known(im, node, 0, k);
}

static tf_status convert_where(ox_import *im, const ox_node *node) {
  for (int32_t i = 0; i < 3; i++) {
    TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
    if (!ox_is_known(im, ox_input(node, i)))
      return ox_convert_mask_where(im, node);
  }
  ox_known *k;
  TF_RETURN_IF_ERROR(
      ox_at(im, node,
            ox_fold_where(ox_value_find(im, ox_input(node, 0))->known, ox_value_find(im, ox_input(node, 1))->known,
                          ox_value_find(im, ox_input(node, 2))->known, &k)));
  return ox_set_known(im, node, 0, k);
}
static tf_status convert_not(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (!ox_is_known(im, ox_input(node, 0)))
    return ox_convert_mask_not(im, node);
  const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
  ox_known *k = ox_known_new(false, TF_U8, x->rank, x->shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < x->count; i++)
    k->ints[i] = tf_fixed((x->is_float ? x->reals[i] : (double)x->ints[i].size) == 0);
  return ox_set_known(im, node, 0, k);
}
static tf_status convert_sub(ox_import *im, const ox_node *node) { return binary(im, node, '-', TF_OP_SUB); }
static tf_status convert_mul(ox_import *im, const ox_node *node) { return binary(im, node, '*', TF_OP_MUL); }
static tf_status convert_div(ox_import *im, const ox_node *node) { return binary(im, node, '/', TF_OP_DIV); }

static tf_status unary(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_unary(im->graph, op, x));
}

static tf_status convert_relu(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_RELU); }
static tf_status convert_sigmoid(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_SIGMOID); }
static tf_status convert_tanh(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_TANH); }
static tf_status convert_exp(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_EXP); }
static tf_status convert_log(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_LOG); }
static tf_status convert_neg(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_NEG); }
/* torch.abs, F.l1_loss's |input - target| (then ReduceMean). */
static tf_status convert_abs(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_ABS); }
/* torch.nn.Softplus() (beta 1, threshold 20), which ours is: x itself past 20. */
static tf_status convert_softplus(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_SOFTPLUS); }

static tf_status convert_leaky_relu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const double alpha = ox_attr_float(node, "alpha", 0.01);
  if (!isfinite(alpha))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "alpha %g (a finite slope)", alpha);
  return ox_set_tensor(im, node, 0, tf_leaky_relu(im->graph, x, (float)alpha));
}

static tf_status convert_sqrt(ox_import *im, const ox_node *node) {
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_cast(x, TF_F32, &k)));
    for (int64_t i = 0; i < k->count; i++)
      k->reals[i] = sqrt(k->reals[i]);
    return ox_set_known(im, node, 0, k);
  }
  return unary(im, node, TF_OP_SQRT);
}

static tf_status convert_gelu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const Onnx__AttributeProto *a = ox_attr(node, "approximate");
  bool tanh_form = a && a->has_s && a->s.len == 4 && memcmp(a->s.data, "tanh", 4) == 0;
  return ox_set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_form));
}

static tf_status convert_pow(ox_import *im, const ox_node *node) {
  if (ox_is_known(im, ox_input(node, 0)) && ox_is_known(im, ox_input(node, 1))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node,
                             ox_fold_binary('^', ox_value_find(im, ox_input(node, 0))->known,
                                            ox_value_find(im, ox_input(node, 1))->known, &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id x;
  const ox_known *e;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &e));
  if (e->count != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the exponent must be one number");
  double p = e->is_float ? e->reals[0] : (double)e->ints[0].size;
  tf_tensor_id y;
  if (p == 1)
    y = x;
  else if (p == 2)
    y = tf_mul(im->graph, x, x);
  else if (p == 3)
    y = tf_mul(im->graph, tf_mul(im->graph, x, x), x);
  else if (p == 0.5)
    y = tf_unary(im->graph, TF_OP_SQRT, x);
  else if (p == -0.5)
    y = tf_unary(im->graph, TF_OP_RSQRT, x);
  else
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "exponent %g (supported: 0.5, -0.5, 1, 2, 3)", p);
  return ox_set_tensor(im, node, 0, y);
}

/* ---- matrices ---- */

static tf_status convert_matmul(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  ox_match_half(im, &a, &b);
  return ox_set_tensor(im, node, 0, tf_matmul(im->graph, a, b, false, node->transpose_b));
}

static tf_status convert_gemm(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b, c = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  bool ta = ox_attr_int(node, "transA", 0) != 0, tb = (ox_attr_int(node, "transB", 0) != 0) != node->transpose_b;
  double alpha = ox_attr_float(node, "alpha", 1.0), beta = ox_attr_float(node, "beta", 1.0);
  ox_match_half(im, &a, &b);
  tf_tensor_id y = tf_matmul(im->graph, a, b, ta, tb);
  if (alpha != 1.0) {
    tf_tensor_id scale = ox_scalar(im, node, TF_F32, alpha);
    ox_match_half(im, &y, &scale);
    y = tf_mul(im->graph, y, scale);
  }
  if (ox_input(node, 2) && beta != 0.0) {
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &c));
    if (beta != 1.0) {
      tf_tensor_id scale = ox_scalar(im, node, TF_F32, beta);
      ox_match_half(im, &c, &scale);
      c = tf_mul(im->graph, c, scale);
    }
    ox_match_half(im, &y, &c);
    y = tf_add(im->graph, y, c);
  }
  return ox_set_tensor(im, node, 0, y);
}

/* ---- normalisation and reductions ---- */

static tf_status softmax_like(ox_import *im, const ox_node *node, bool log_form) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank = ox_rank_of(im, x);
  int64_t axis = ox_attr_int(node, "axis", im->opset >= 13 ? -1 : 1);
  if (axis < 0)
    axis += rank;
  // Before opset 13 the axis flattened everything after it; that is the same only on the last axis.
  if (im->opset < 13 && axis != rank - 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "axis %" PRId64 " before opset 13 flattens trailing axes", axis);
  tf_tensor_id y = log_form ? tf_log_softmax(im->graph, x, (int32_t)axis) : tf_softmax(im->graph, x, (int32_t)axis);
  return ox_set_tensor(im, node, 0, y);
}

static tf_status convert_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, false); }
static tf_status convert_log_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, true); }

static tf_status convert_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  if (ox_input(node, 2))
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &beta));
  int64_t axis = ox_attr_int(node, "axis", -1);
  int32_t rank = ox_rank_of(im, x);
  if (axis != -1 && axis != rank - 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "normalising from axis %" PRId64 " (only the last axis)", axis);
  float epsilon = (float)ox_attr_float(node, "epsilon", 1e-5);
  ox_match_half(im, &x, &gamma);
  if (beta != TF_NO_TENSOR)
    ox_match_half(im, &x, &beta);
  return ox_set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, epsilon));
}

/* ---- convolution and pooling ---- */

/* Symmetric pads of a spatial rank-`n` op: pads[i] == pads[i + n]. */
static tf_status symmetric_pads(ox_import *im, const ox_node *node, int32_t n, int32_t *padding) {
  const Onnx__AttributeProto *auto_pad = ox_attr(node, "auto_pad");
  if (auto_pad && auto_pad->has_s && !(auto_pad->s.len == 6 && memcmp(auto_pad->s.data, "NOTSET", 6) == 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "auto_pad (export with explicit pads)");
  int64_t pads[8];
  int32_t count = ox_attr_ints(node, "pads", pads, 8);
  for (int32_t i = 0; i < n; i++) {
    padding[i] = count < 0 ? 0 : (int32_t)pads[i];
    if (count >= 0 && (count != 2 * n || pads[i] != pads[i + n] || pads[i] < 0))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "padding must be the same at both ends of each axis");
  }
  return NULL;
}

static tf_status ints_or(const ox_node *node, const char *name, int32_t n, int64_t fallback, int32_t *out) {
  int64_t values[8];
  int32_t count = ox_attr_ints(node, name, values, 8);
  for (int32_t i = 0; i < n; i++)
    out[i] = (int32_t)(count < 0 ? fallback : count == n ? values[i] : -1);
  if (count >= 0 && count != n)
    return tf_status_new(TF_ERR_INVALID_INPUT, "attribute %s has %" PRId32 " values for %" PRId32 " axes", name, count,
                         n);
  return NULL;
}

/* A 1-d ConvTranspose (nn.ConvTranspose1d, the upsampling of vocoders) as the 2-d one over a plane
 * of height 1: x [N, C, L] and the weight [C, C_out / groups, K] reshaped to [N, C, 1, L] and
 * [C, C_out / groups, 1, K], the 1-d attributes (in a's first entries) moved to the width, and the
 * [N, C_out, 1, L_out] result reshaped back. The weight stays the parameter it was. */
static tf_status conv_transpose1d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                                  tf_conv_attrs *a) {
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t xr, wr, yr;
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  if (xr != 3)
    return ox_fail(im, node, TF_ERR_SHAPE, "a 1-d ConvTranspose reads [N, C, L]; its input has rank %" PRId32, xr);
  tf_graph *g = im->graph;
  tf_tensor_id x2 = tf_reshape(g, x, TF_SHAPE(xd[0], xd[1], tf_fixed(1), xd[2]));
  tf_tensor_id w2 = tf_reshape(g, w, TF_SHAPE(wd[0], wd[1], tf_fixed(1), wd[2]));
  a->stride[1] = a->stride[0];
  a->padding[1] = a->padding[0];
  a->dilation[1] = a->dilation[0];
  a->output_padding[1] = a->output_padding[0];
  a->stride[0] = a->dilation[0] = 1;
  a->padding[0] = a->output_padding[0] = 0;
  tf_tensor_id y = tf_conv_transpose2d(g, x2, w2, bias, a);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  ox_tensor_dims(im, y, &yr, yd);
  return ox_set_tensor(im, node, 0, tf_reshape(g, y, TF_SHAPE(yd[0], yd[1], yd[3])));
}

static tf_status conv_like(ox_import *im, const ox_node *node, bool transposed) {
  tf_tensor_id x, w, bias = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &w));
  if (ox_input(node, 2))
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &bias));
  int32_t spatial = ox_rank_of(im, w) - 2;
  if (spatial != 1 && spatial != 2)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 "-d convolution (1-d and 2-d only)", spatial);
  if (transposed && ox_attr(node, "output_shape"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "output_shape (export with output_padding)");
  tf_conv_attrs a;
  memset(&a, 0, sizeof(a));
  TF_RETURN_IF_ERROR(symmetric_pads(im, node, spatial, a.padding));
  tf_status status = ints_or(node, "strides", spatial, 1, a.stride);
  if (!status)
    status = ints_or(node, "dilations", spatial, 1, a.dilation);
  if (!status)
    status = ints_or(node, "output_padding", spatial, 0, a.output_padding);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  a.groups = (int32_t)ox_attr_int(node, "group", 1);
  if (spatial == 1 && transposed)
    return conv_transpose1d(im, node, x, w, bias, &a);
  if (spatial == 1) {
    a.stride[1] = a.padding[1] = a.dilation[1] = 1;
    a.padding[1] = 0;
    return ox_set_tensor(im, node, 0,
                         tf_conv1d(im->graph, x, w, bias, a.stride[0], a.padding[0], a.dilation[0], a.groups));
  }
  return ox_set_tensor(
      im, node, 0, transposed ? tf_conv_transpose2d(im->graph, x, w, bias, &a) : tf_conv2d(im->graph, x, w, bias, &a));
}

static tf_status convert_conv(ox_import *im, const ox_node *node) { return conv_like(im, node, false); }
static tf_status convert_conv_transpose(ox_import *im, const ox_node *node) { return conv_like(im, node, true); }

static tf_status pool(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  if (ox_rank_of(im, x) != 4)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "pooling over a rank-%" PRId32 " input (2-d only)", ox_rank_of(im, x));
  if (ox_attr_int(node, "ceil_mode", 0) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ceil_mode=1");
  tf_pool_attrs a;
  memset(&a, 0, sizeof(a));
  TF_RETURN_IF_ERROR(symmetric_pads(im, node, 2, a.padding));
  int32_t dilation[2];
  tf_status status = ints_or(node, "kernel_shape", 2, -1, a.kernel);
  if (!status)
    status = ints_or(node, "strides", 2, 1, a.stride);
  if (!status)
    status = ints_or(node, "dilations", 2, 1, dilation);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  if (dilation[0] != 1 || dilation[1] != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "dilated pooling");
  if (node->pool_padding[0] || node->pool_padding[1]) { /* a Pad of zeros folded in: counted, like tf */
    a.padding[0] = node->pool_padding[0];
    a.padding[1] = node->pool_padding[1];
  } else if (op == TF_OP_AVG_POOL2D && (a.padding[0] || a.padding[1]) && !ox_attr_int(node, "count_include_pad", 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "padded average pooling must count the padding (count_include_pad=1)");
  return ox_set_tensor(im, node, 0, tf_pool2d(im->graph, op, x, &a));
}

static tf_status convert_max_pool(ox_import *im, const ox_node *node) {
  // The Indices output is left without a value: a node that reads it fails with "has no value".
  return pool(im, node, TF_OP_MAX_POOL2D);
}
static tf_status convert_average_pool(ox_import *im, const ox_node *node) { return pool(im, node, TF_OP_AVG_POOL2D); }

/* GlobalAveragePool: the mean over every axis after the channel's, kept as size-1 axes ([N, C, 1, 1]
 * from [N, C, H, W]); nn.AdaptiveAvgPool2d(1) exports as it. */
static tf_status convert_global_average_pool(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const int32_t rank = ox_rank_of(im, x);
  if (rank < 3)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its input has rank %" PRId32 "; it needs [N, C, spatial...]", rank);
  int32_t axes[TF_MAX_RANK];
  for (int32_t i = 2; i < rank; i++)
    axes[i - 2] = i;
  return ox_set_tensor(im, node, 0, tf_reduce(im->graph, TF_OP_MEAN, x, axes, rank - 2, true));
}

/* ---- the rest ---- */

static tf_status convert_dropout(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  double rate = ox_attr_float(node, "ratio", 0.5);
  if (ox_input(node, 1)) {
    const ox_known *r;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &r));
    rate = r->count == 1 ? (r->is_float ? r->reals[0] : (double)r->ints[0].size) : rate;
  }
  /* ONNX's Dropout is the identity unless its training_mode input (opset 12 on) is true; torch sets
   * it in training-mode exports. Before opset 12 it has none: the identity, as onnxruntime runs it. */
  bool training = false;
  if (ox_input(node, 2)) {
    const ox_known *mode;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &mode));
    training = mode->count == 1 && (mode->is_float ? mode->reals[0] != 0 : mode->ints[0].size != 0);
  }
  // The mask output (torch names it in training exports) is left without a value: a node that
  // reads it fails with "has no value".
  return ox_set_tensor(im, node, 0, rate == 0 || !training ? x : tf_dropout(im->graph, x, (float)rate));
}

/* ---- fused patterns ---- */

static tf_status emit_gelu(ox_import *im, const ox_node *node, bool tanh_approximation) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_approximation));
}

static tf_status emit_attention(ox_import *im, const ox_node *node) {
  tf_tensor_id q, k, v;
  const ox_known *shape;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &q));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &k));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &v));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 3, &shape));
  if (shape->is_float || shape->count != 4 || shape->ints[2].symbol >= 0 || shape->ints[2].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "attention whose heads split is not [N, T, heads, head_dim]");
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_ATTENTION;
  attrs.u.attention.num_heads = (int32_t)shape->ints[2].size;
  attrs.u.attention.causal = node->causal;
  attrs.u.attention.scale = (float)node->scale;
  if (node->n_inputs > 4) { /* the scale computed from shapes (onnx_patterns.c): known by now */
    const ox_known *scale;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 4, &scale));
    if (!scale->is_float || scale->count != 1 || !(scale->reals[0] != 0) || !isfinite(scale->reals[0]))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "attention whose scores scale is not one finite number");
    attrs.u.attention.scale = (float)(node->scale_divides ? 1.0 / scale->reals[0] : scale->reals[0]);
  }
  tf_tensor_id ids[3] = {q, k, v};
  return ox_set_tensor(im, node, 0, tf_graph_node(im->graph, TF_OP_ATTENTION, ids, 3, &attrs));
}

static tf_status emit_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &beta));
  ox_match_half(im, &x, &gamma);
  ox_match_half(im, &x, &beta);
  return ox_set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, (float)node->scale));
}

static tf_status emit_rms_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  ox_match_half(im, &x, &gamma);
  return ox_set_tensor(im, node, 0, tf_rms_norm(im->graph, x, gamma, (float)node->scale));
}

static tf_status emit_silu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_unary(im->graph, TF_OP_SILU, x));
}

/* ---- the table ---- */

typedef struct ox_converter_row {
  const char *op_type;
  ox_converter convert;
} ox_converter_row;

static const ox_converter_row converters[] = {
    {"Add", convert_add},
    {"Sub", convert_sub},
    {"Mul", convert_mul},
    {"Div", convert_div},
    {"Pow", convert_pow},
    {"Relu", convert_relu},
    {"LeakyRelu", convert_leaky_relu},
    {"Softplus", convert_softplus},
    {"Sigmoid", convert_sigmoid},
    {"Tanh", convert_tanh},
    {"Exp", convert_exp},
    {"Log", convert_log},
    {"Neg", convert_neg},
    {"Abs", convert_abs},
    {"Sqrt", convert_sqrt},
    {"Gelu", convert_gelu},
    {"Reciprocal", ox_convert_reciprocal},
    {"Softsign", ox_convert_softsign},
    {"HardSigmoid", ox_convert_hard_sigmoid},
    {"HardSwish", ox_convert_hard_swish},
    {"Elu", ox_convert_elu},
    {"Selu", ox_convert_selu},
    {"Celu", ox_convert_celu},
    {"PRelu", ox_convert_prelu},
    {"Mish", ox_convert_mish},
    {"Max", ox_convert_max},
    {"Min", ox_convert_min},
    {"Clip", ox_convert_clip},
    {"Sum", ox_convert_sum},
    {"Mean", ox_convert_mean},
    {"Size", ox_convert_size},
    {"MatMul", convert_matmul},
    {"Gemm", convert_gemm},
    {"Softmax", convert_softmax},
    {"LogSoftmax", convert_log_softmax},
    {"ReduceMean", ox_convert_reduce_mean},
    {"ReduceSum", ox_convert_reduce_sum},
    {"ReduceMax", ox_convert_reduce_max},
    {"ReduceMin", ox_convert_reduce_min},
    {"ReduceL2", ox_convert_reduce_l2},
    {"ReduceL1", ox_convert_reduce_l1},
    {"ReduceSumSquare", ox_convert_reduce_sum_square},
    {"ReduceLogSum", ox_convert_reduce_log_sum},
    {"ReduceLogSumExp", ox_convert_reduce_log_sum_exp},
    {"NegativeLogLikelihoodLoss", ox_convert_nll_loss},
    {"SoftmaxCrossEntropyLoss", ox_convert_softmax_cross_entropy_loss},
    {"LayerNormalization", convert_layer_norm},
    {"BatchNormalization", ox_convert_batch_norm},
    {"InstanceNormalization", ox_convert_instance_norm},
    {"Reshape", ox_convert_reshape},
    {"Flatten", ox_convert_flatten},
    {"Unsqueeze", ox_convert_unsqueeze},
    {"Squeeze", ox_convert_squeeze},
    {"Transpose", ox_convert_transpose},
    {"Concat", ox_convert_concat},
    {"Slice", ox_convert_slice},
    {"Split", ox_convert_split},
    {"Expand", ox_convert_expand},
    {"Resize", ox_convert_resize},
    {"Tile", ox_convert_tile},
    {"Equal", convert_equal},
    {"Where", convert_where},
    {"Not", convert_not},
    {"Mod", ox_convert_mod},
    {"Trilu", ox_convert_trilu},
    {"Gather", ox_convert_gather},
    {"Conv", convert_conv},
    {"ConvTranspose", convert_conv_transpose},
    {"MaxPool", convert_max_pool},
    {"AveragePool", convert_average_pool},
    {"GlobalAveragePool", convert_global_average_pool},
    {"Dropout", convert_dropout},
    {"Cast", ox_convert_cast},
    {"Identity", ox_convert_identity},
    {"LSTM", ox_convert_lstm},
    {"GRU", ox_convert_gru},
    {"Pad", ox_convert_pad},
    {"Constant", ox_convert_constant},
    {"Shape", ox_convert_shape},
    {"Range", ox_convert_range},
    {"ConstantOfShape", ox_convert_constant_of_shape},
};

static ox_converter find_converter(const char *op_type) {
  for (size_t i = 0; i < sizeof(converters) / sizeof(converters[0]); i++)
    if (strcmp(converters[i].op_type, op_type) == 0)
      return converters[i].convert;
  return NULL;
}

bool ox_op_supported(const char *op_type) { return op_type && find_converter(op_type) != NULL; }

tf_status ox_op_emit(ox_import *im, const ox_node *node) {
  switch (node->fused) {
  case OX_GELU_ERF: return emit_gelu(im, node, false);
  case OX_GELU_TANH: return emit_gelu(im, node, true);
  case OX_ATTENTION: return emit_attention(im, node);
  case OX_LAYER_NORM: return emit_layer_norm(im, node);
  case OX_RMS_NORM: return emit_rms_norm(im, node);
  case OX_SILU: return emit_silu(im, node);
  default: break;
  }
  ox_converter convert = find_converter(node->proto->op_type);
  if (!convert)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "operator %s is not supported", node->proto->op_type);
  return convert(im, node);
}
