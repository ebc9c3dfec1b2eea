/* ONNX operators to graph ops: one converter per operator type, in a table (docs/import.md lists
 * the same rows). A converter folds the node when its inputs are known at import time (shape
 * arithmetic), and otherwise adds graph ops through the builder, which checks shapes as it goes. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_fold.h"
#include "import/onnx_internal.h"

typedef tf_status (*ox_converter)(ox_import *im, const ox_node *node);

static const char *input(const ox_node *node, int32_t i) {
  return i < node->n_inputs && node->inputs[i] && *node->inputs[i] ? node->inputs[i] : NULL;
}

static tf_status fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) TF_PRINTF(4, 5);
static tf_status fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) {
  char reason[512], label[256];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof(reason), fmt, args);
  va_end(args);
  return tf_status_new(code, "%s: %s: %s", im->source, ox_node_label(node, label, sizeof(label)), reason);
}

static tf_status need_input(ox_import *im, const ox_node *node, int32_t i) {
  return input(node, i) ? NULL : fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " is missing", i);
}

static bool is_known(ox_import *im, const char *name) {
  ox_value *v = name ? ox_value_find(im, name) : NULL;
  return v && v->known && v->tensor == TF_NO_TENSOR;
}

/* Output `i` becomes graph tensor `id` (renamed to the ONNX name when it is a graph output). */
static tf_status set_tensor(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id id) {
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  if ((size_t)i >= node->proto->n_output)
    return NULL;
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v)
    return fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  v->tensor = id;
  return NULL;
}

static tf_status set_known(ox_import *im, const ox_node *node, int32_t i, ox_known *k) {
  if ((size_t)i >= node->proto->n_output) {
    ox_known_free(k);
    return NULL;
  }
  ox_value *v = ox_value_get(im, node->proto->output[i]);
  if (!v) {
    ox_known_free(k);
    return fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  ox_known_free(v->known);
  v->known = k;
  return NULL;
}

static tf_status tensor_of(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(need_input(im, node, i));
  return ox_tensor(im, node, input(node, i), id);
}

static tf_status known_of(ox_import *im, const ox_node *node, int32_t i, const ox_known **k) {
  TF_RETURN_IF_ERROR(need_input(im, node, i));
  return ox_need_known(im, node, input(node, i), k);
}

/* The rank of a graph tensor after inference. */
static int32_t rank_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.rank : 0;
}

static tf_dtype dtype_of(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  return tf_graph_tensor(im->graph, id, &info) ? info.dtype : TF_F32;
}

/* Known integers of input i as plain numbers (no symbols), at most max. */
static tf_status fixed_ints(ox_import *im, const ox_node *node, int32_t i, int64_t *out, int32_t max, int32_t *n) {
  const ox_known *k;
  TF_RETURN_IF_ERROR(known_of(im, node, i, &k));
  if (k->is_float || k->count > max)
    return fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " must hold at most %" PRId32 " integers", i, max);
  for (int64_t j = 0; j < k->count; j++) {
    if (k->ints[j].symbol >= 0)
      return fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " element %" PRId64 " is a symbolic size", i, j);
    out[j] = k->ints[j].size;
  }
  *n = (int32_t)k->count;
  return NULL;
}

/* A scalar constant of `dtype` holding `value`, named after the node. */
static tf_tensor_id scalar(ox_import *im, const ox_node *node, tf_dtype dtype, double value) {
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
static tf_status operand(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id other, tf_tensor_id *id) {
  TF_RETURN_IF_ERROR(need_input(im, node, i));
  const char *name = input(node, i);
  if (is_known(im, name) && other != TF_NO_TENSOR) {
    const ox_known *k = ox_value_find(im, name)->known;
    if (k->count == 1 && (k->is_float || k->ints[0].symbol < 0)) {
      *id = scalar(im, node, dtype_of(im, other), k->is_float ? k->reals[0] : (double)k->ints[0].size);
      return ox_graph_error(im, node);
    }
  }
  return ox_tensor(im, node, name, id);
}

/* ---- elementwise ---- */

static tf_status binary(ox_import *im, const ox_node *node, char symbol, tf_op op) {
  TF_RETURN_IF_ERROR(need_input(im, node, 0));
  TF_RETURN_IF_ERROR(need_input(im, node, 1));
  const char *a = input(node, 0), *b = input(node, 1);
  char label[256];
  ox_node_label(node, label, sizeof(label));
  if (is_known(im, a) && is_known(im, b)) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_binary(symbol, ox_value_find(im, a)->known, ox_value_find(im, b)->known, label, &k));
    return set_known(im, node, 0, k);
  }
  tf_tensor_id ta = TF_NO_TENSOR, tb = TF_NO_TENSOR;
  if (!is_known(im, a))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, a, &ta));
  if (!is_known(im, b))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, b, &tb));
  if (ta == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(operand(im, node, 0, tb, &ta));
  if (tb == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(operand(im, node, 1, ta, &tb));
  tf_tensor_id ids[2] = {ta, tb};
  return set_tensor(im, node, 0, tf_graph_node(im->graph, op, ids, 2, NULL));
}

static tf_status convert_add(ox_import *im, const ox_node *node) { return binary(im, node, '+', TF_OP_ADD); }
static tf_status convert_sub(ox_import *im, const ox_node *node) { return binary(im, node, '-', TF_OP_SUB); }
static tf_status convert_mul(ox_import *im, const ox_node *node) { return binary(im, node, '*', TF_OP_MUL); }
static tf_status convert_div(ox_import *im, const ox_node *node) { return binary(im, node, '/', TF_OP_DIV); }

static tf_status unary(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  return set_tensor(im, node, 0, tf_unary(im->graph, op, x));
}

static tf_status convert_relu(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_RELU); }
static tf_status convert_sigmoid(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_SIGMOID); }
static tf_status convert_tanh(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_TANH); }
static tf_status convert_exp(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_EXP); }
static tf_status convert_log(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_LOG); }
static tf_status convert_neg(ox_import *im, const ox_node *node) { return unary(im, node, TF_OP_NEG); }

static tf_status convert_sqrt(ox_import *im, const ox_node *node) {
  if (is_known(im, input(node, 0))) {
    const ox_known *x = ox_value_find(im, input(node, 0))->known;
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_cast(x, TF_F32, &k));
    for (int64_t i = 0; i < k->count; i++)
      k->reals[i] = sqrt(k->reals[i]);
    return set_known(im, node, 0, k);
  }
  return unary(im, node, TF_OP_SQRT);
}

static tf_status convert_gelu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  const Onnx__AttributeProto *a = ox_attr(node, "approximate");
  bool tanh_form = a && a->has_s && a->s.len == 4 && memcmp(a->s.data, "tanh", 4) == 0;
  return set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_form));
}

static tf_status convert_pow(ox_import *im, const ox_node *node) {
  if (is_known(im, input(node, 0)) && is_known(im, input(node, 1))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_binary('^', ox_value_find(im, input(node, 0))->known,
                                      ox_value_find(im, input(node, 1))->known, "Pow", &k));
    return set_known(im, node, 0, k);
  }
  tf_tensor_id x;
  const ox_known *e;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(known_of(im, node, 1, &e));
  if (e->count != 1)
    return fail(im, node, TF_ERR_UNSUPPORTED, "the exponent must be one number");
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
    return fail(im, node, TF_ERR_UNSUPPORTED, "exponent %g (supported: 0.5, -0.5, 1, 2, 3)", p);
  return set_tensor(im, node, 0, y);
}

/* ---- matrices ---- */

static tf_status convert_matmul(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &b));
  return set_tensor(im, node, 0, tf_matmul(im->graph, a, b, false, node->transpose_b));
}

static tf_status convert_gemm(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b, c = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &b));
  bool ta = ox_attr_int(node, "transA", 0) != 0, tb = (ox_attr_int(node, "transB", 0) != 0) != node->transpose_b;
  double alpha = ox_attr_float(node, "alpha", 1.0), beta = ox_attr_float(node, "beta", 1.0);
  tf_tensor_id y = tf_matmul(im->graph, a, b, ta, tb);
  if (alpha != 1.0)
    y = tf_mul(im->graph, y, scalar(im, node, TF_F32, alpha));
  if (input(node, 2) && beta != 0.0) {
    TF_RETURN_IF_ERROR(tensor_of(im, node, 2, &c));
    if (beta != 1.0)
      c = tf_mul(im->graph, c, scalar(im, node, TF_F32, beta));
    y = tf_add(im->graph, y, c);
  }
  return set_tensor(im, node, 0, y);
}

/* ---- normalisation and reductions ---- */

static tf_status softmax_like(ox_import *im, const ox_node *node, bool log_form) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int32_t rank = rank_of(im, x);
  int64_t axis = ox_attr_int(node, "axis", im->opset >= 13 ? -1 : 1);
  if (axis < 0)
    axis += rank;
  // Before opset 13 the axis flattened everything after it; that is the same only on the last axis.
  if (im->opset < 13 && axis != rank - 1)
    return fail(im, node, TF_ERR_UNSUPPORTED, "axis %" PRId64 " before opset 13 flattens trailing axes", axis);
  tf_tensor_id y = log_form ? tf_log_softmax(im->graph, x, (int32_t)axis) : tf_softmax(im->graph, x, (int32_t)axis);
  return set_tensor(im, node, 0, y);
}

static tf_status convert_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, false); }
static tf_status convert_log_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, true); }

static tf_status reduce(ox_import *im, const ox_node *node, tf_op op, bool axes_input) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int64_t axes[TF_MAX_RANK];
  int32_t n = -1;
  if (axes_input && input(node, 1))
    TF_RETURN_IF_ERROR(fixed_ints(im, node, 1, axes, TF_MAX_RANK, &n));
  else if (!axes_input)
    n = ox_attr_ints(node, "axes", axes, TF_MAX_RANK);
  if (n > TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "too many axes");
  if (n <= 0 && ox_attr_int(node, "noop_with_empty_axes", 0))
    return set_tensor(im, node, 0, x);
  int32_t axes32[TF_MAX_RANK];
  for (int32_t i = 0; i < n; i++)
    axes32[i] = (int32_t)axes[i];
  bool keepdims = ox_attr_int(node, "keepdims", 1) != 0;
  return set_tensor(im, node, 0, tf_reduce(im->graph, op, x, axes32, n < 0 ? 0 : n, keepdims));
}

static tf_status convert_reduce_mean(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_MEAN, im->opset >= 18);
}
static tf_status convert_reduce_sum(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 13);
}
static tf_status convert_reduce_max(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_MAX, im->opset >= 18);
}

static tf_status convert_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &gamma));
  if (input(node, 2))
    TF_RETURN_IF_ERROR(tensor_of(im, node, 2, &beta));
  int64_t axis = ox_attr_int(node, "axis", -1);
  int32_t rank = rank_of(im, x);
  if (axis != -1 && axis != rank - 1)
    return fail(im, node, TF_ERR_UNSUPPORTED, "normalising from axis %" PRId64 " (only the last axis)", axis);
  float epsilon = (float)ox_attr_float(node, "epsilon", 1e-5);
  return set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, epsilon));
}

/* ---- layout ---- */

/* Reshape of x to `rank` dims, each fixed, symbolic, or {-1,-1} (inferred). */
static tf_status reshape_to(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_dim *dims, int32_t rank) {
  int32_t unknown = 0;
  for (int32_t i = 0; i < rank; i++)
    unknown += dims[i].size == -1 && dims[i].symbol < 0;
  if (unknown > 1)
    return fail(im, node, TF_ERR_UNSUPPORTED,
                "the target shape has %" PRId32 " axes tightfit cannot name (products of symbols, or -1)", unknown);
  return set_tensor(im, node, 0, tf_reshape(im->graph, x, tf_shape_from(dims, rank)));
}

static tf_status convert_reshape(ox_import *im, const ox_node *node) {
  const ox_known *shape;
  TF_RETURN_IF_ERROR(known_of(im, node, 1, &shape));
  if (shape->is_float || shape->rank != 1 || shape->count > TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "the shape must be at most %d integers", TF_MAX_RANK);
  if (is_known(im, input(node, 0))) {
    const ox_known *x = ox_value_find(im, input(node, 0))->known;
    int64_t target[TF_MAX_RANK], product = 1, infer = -1;
    for (int64_t i = 0; i < shape->count; i++) {
      if (shape->ints[i].symbol >= 0)
        return fail(im, node, TF_ERR_UNSUPPORTED, "symbolic reshape of a known value");
      target[i] = shape->ints[i].size == 0 && i < x->rank ? x->shape[i] : shape->ints[i].size;
      if (target[i] == -1)
        infer = i;
      else
        product *= target[i];
    }
    if (infer >= 0 && product > 0)
      target[infer] = x->count / product;
    ox_known *k = ox_fold_copy(x, (int32_t)shape->count, target);
    if (!k)
      return fail(im, node, TF_ERR_SHAPE, "reshape changes the element count");
    return set_known(im, node, 0, k);
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int32_t in_rank;
  tf_dim in_dims[TF_MAX_RANK], dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &in_rank, in_dims);
  bool allow_zero = ox_attr_int(node, "allowzero", 0) != 0;
  for (int64_t i = 0; i < shape->count; i++) {
    tf_dim d = shape->ints[i];
    if (d.symbol < 0 && d.size == 0 && !allow_zero)
      d = i < in_rank ? in_dims[i] : d;
    else if (d.symbol < 0 && d.size == -1)
      d = (tf_dim){-1, -1};
    dims[i] = d;
  }
  return reshape_to(im, node, x, dims, (int32_t)shape->count);
}

static tf_status convert_flatten(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim in_dims[TF_MAX_RANK], dims[2];
  ox_tensor_dims(im, x, &rank, in_dims);
  int64_t axis = ox_attr_int(node, "axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, rank);
  // [prod(dims[:axis]), prod(dims[axis:])]: a leading symbol stays named when the rest is fixed.
  int64_t tail = 1;
  bool tail_fixed = true;
  for (int32_t i = (int32_t)axis; i < rank; i++) {
    tail_fixed = tail_fixed && in_dims[i].symbol < 0 && in_dims[i].size >= 0;
    tail *= in_dims[i].size;
  }
  dims[0] = axis == 0 ? tf_fixed(1) : axis == 1 ? in_dims[0] : (tf_dim){-1, -1};
  dims[1] = tail_fixed ? tf_fixed(tail) : (tf_dim){-1, -1};
  return reshape_to(im, node, x, dims, 2);
}

/* Unsqueeze/Squeeze: axes from the attribute (before opset 13) or input 1. */
static tf_status axes_of(ox_import *im, const ox_node *node, int64_t *axes, int32_t *n) {
  *n = 0;
  if (im->opset >= 13)
    return input(node, 1) ? fixed_ints(im, node, 1, axes, TF_MAX_RANK, n) : NULL;
  *n = ox_attr_ints(node, "axes", axes, TF_MAX_RANK);
  if (*n > TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "too many axes");
  if (*n < 0)
    *n = 0;
  return NULL;
}

static tf_status squeeze_like(ox_import *im, const ox_node *node, bool unsqueeze) {
  int64_t axes[TF_MAX_RANK];
  int32_t n;
  TF_RETURN_IF_ERROR(axes_of(im, node, axes, &n));
  bool known = is_known(im, input(node, 0));
  int32_t rank = 0;
  tf_dim in_dims[TF_MAX_RANK], dims[TF_MAX_RANK];
  tf_tensor_id x = TF_NO_TENSOR;
  const ox_known *k = NULL;
  if (known) {
    k = ox_value_find(im, input(node, 0))->known;
    rank = k->rank;
    for (int32_t i = 0; i < rank; i++)
      in_dims[i] = tf_fixed(k->shape[i]);
  } else {
    TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, &rank, in_dims);
  }
  int32_t out_rank = unsqueeze ? rank + n : rank;
  if (out_rank > TF_MAX_RANK)
    return fail(im, node, TF_ERR_UNSUPPORTED, "rank %" PRId32 " is over %d", out_rank, TF_MAX_RANK);
  bool marked[TF_MAX_RANK * 2] = {false};
  for (int32_t i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + out_rank : axes[i];
    if (a < 0 || a >= out_rank)
      return fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range", axes[i]);
    marked[a] = true;
  }
  int32_t m = 0;
  if (unsqueeze) {
    for (int32_t i = 0, j = 0; i < out_rank; i++)
      dims[m++] = marked[i] ? tf_fixed(1) : in_dims[j++];
  } else {
    for (int32_t i = 0; i < rank; i++) {
      bool drop = n == 0 ? (in_dims[i].symbol < 0 && in_dims[i].size == 1) : marked[i];
      if (drop && !(in_dims[i].symbol < 0 && in_dims[i].size == 1))
        return fail(im, node, TF_ERR_SHAPE, "cannot squeeze axis %" PRId32 ": its size is not 1", i);
      if (!drop)
        dims[m++] = in_dims[i];
    }
  }
  if (known) {
    int64_t shape[TF_MAX_RANK];
    for (int32_t i = 0; i < m; i++)
      shape[i] = dims[i].size;
    ox_known *copy = ox_fold_copy(k, m, shape);
    if (!copy)
      return fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    return set_known(im, node, 0, copy);
  }
  return reshape_to(im, node, x, dims, m);
}

static tf_status convert_unsqueeze(ox_import *im, const ox_node *node) { return squeeze_like(im, node, true); }
static tf_status convert_squeeze(ox_import *im, const ox_node *node) { return squeeze_like(im, node, false); }

static tf_status convert_transpose(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int32_t rank = rank_of(im, x);
  int64_t perm64[TF_MAX_RANK];
  int32_t perm[TF_MAX_RANK];
  int32_t n = ox_attr_ints(node, "perm", perm64, TF_MAX_RANK);
  if (n > TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "perm is too long");
  for (int32_t i = 0; i < rank; i++)
    perm[i] = n < 0 ? rank - 1 - i : (int32_t)perm64[i];
  if (n >= 0 && n != rank)
    return fail(im, node, TF_ERR_INVALID_INPUT, "perm has %" PRId32 " axes for a rank-%" PRId32 " input", n, rank);
  return set_tensor(im, node, 0, tf_transpose(im->graph, x, perm, rank));
}

static tf_status convert_concat(ox_import *im, const ox_node *node) {
  int64_t axis = ox_attr_int(node, "axis", 0);
  int32_t n = node->n_inputs;
  if (n < 1 || n > 64)
    return fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 " inputs (1 to 64)", n);
  bool all_known = true;
  for (int32_t i = 0; i < n; i++)
    all_known = all_known && is_known(im, input(node, i));
  if (all_known) {
    const ox_known *parts[64];
    for (int32_t i = 0; i < n; i++)
      parts[i] = ox_value_find(im, input(node, i))->known;
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_concat(parts, n, (int32_t)axis, &k));
    return set_known(im, node, 0, k);
  }
  tf_tensor_id ids[64];
  for (int32_t i = 0; i < n; i++)
    TF_RETURN_IF_ERROR(tensor_of(im, node, i, &ids[i]));
  if (axis < 0)
    axis += rank_of(im, ids[0]);
  return set_tensor(im, node, 0, tf_concat(im->graph, ids, n, (int32_t)axis));
}

static tf_status convert_slice(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t starts[TF_MAX_RANK], axes[TF_MAX_RANK], steps[TF_MAX_RANK];
  int32_t n_starts = 0, n_axes = -1, n_steps = -1;
  const ox_known *ends;
  if (im->opset < 10)
    return fail(im, node, TF_ERR_UNSUPPORTED, "Slice before opset 10");
  TF_RETURN_IF_ERROR(fixed_ints(im, node, 1, starts, TF_MAX_RANK, &n_starts));
  TF_RETURN_IF_ERROR(known_of(im, node, 2, &ends));
  if (input(node, 3))
    TF_RETURN_IF_ERROR(fixed_ints(im, node, 3, axes, TF_MAX_RANK, &n_axes));
  if (input(node, 4))
    TF_RETURN_IF_ERROR(fixed_ints(im, node, 4, steps, TF_MAX_RANK, &n_steps));
  if (ends->is_float || ends->count != n_starts || (n_axes >= 0 && n_axes != n_starts) ||
      (n_steps >= 0 && n_steps != n_starts))
    return fail(im, node, TF_ERR_INVALID_INPUT, "starts, ends, axes and steps differ in length");
  tf_tensor_id y = x;
  for (int32_t i = 0; i < n_starts; i++) {
    int64_t axis = n_axes >= 0 ? axes[i] : i;
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range", axis);
    int64_t step = n_steps >= 0 ? steps[i] : 1;
    if (step < 1)
      return fail(im, node, TF_ERR_UNSUPPORTED, "step %" PRId64 " (only positive steps)", step);
    tf_dim end = ends->ints[i];
    int64_t end_value = end.size;
    if (end.symbol >= 0) {
      // A symbolic end is fine when it is the whole axis (x[:, :T] with T the axis' size).
      if (dims[axis].symbol != end.symbol || dims[axis].size != end.size)
        return fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic end that is not the whole axis %" PRId64, axis);
      end_value = INT64_MAX;
    }
    y = tf_slice(im->graph, y, (int32_t)axis, starts[i], end_value, step);
  }
  return set_tensor(im, node, 0, y);
}

static tf_status convert_gather(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(need_input(im, node, 0));
  TF_RETURN_IF_ERROR(need_input(im, node, 1));
  int64_t axis = ox_attr_int(node, "axis", 0);
  if (is_known(im, input(node, 0)) && is_known(im, input(node, 1))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_gather(ox_value_find(im, input(node, 0))->known,
                                      ox_value_find(im, input(node, 1))->known, (int32_t)axis, &k));
    return set_known(im, node, 0, k);
  }
  tf_tensor_id data;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &data));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, data, &rank, dims);
  if (axis < 0)
    axis += rank;
  if (is_known(im, input(node, 1))) {
    // x[:, i]: a slice of width one, then the axis dropped.
    const ox_known *index = ox_value_find(im, input(node, 1))->known;
    if (index->count != 1 || index->is_float || index->ints[0].symbol >= 0 || axis < 0 || axis >= rank)
      return fail(im, node, TF_ERR_UNSUPPORTED, "Gather of a tensor by several known indices");
    int64_t i = index->ints[0].size;
    tf_tensor_id y = tf_slice(im->graph, data, (int32_t)axis, i, i == -1 ? INT64_MAX : i + 1, 1);
    tf_dim out[TF_MAX_RANK];
    int32_t m = 0;
    for (int32_t d = 0; d < rank; d++)
      if (d != axis)
        out[m++] = dims[d];
    for (int32_t d = index->rank; d > 0; d--) // a rank-1 index keeps the axis
      out[m++] = tf_fixed(1);
    if (index->rank == 1) { // keep the axis where it was
      for (int32_t d = m - 1; d > axis; d--)
        out[d] = out[d - 1];
      out[axis] = tf_fixed(1);
    }
    return reshape_to(im, node, y, out, m);
  }
  if (axis != 0 || rank != 2)
    return fail(im, node, TF_ERR_UNSUPPORTED,
                "Gather by computed indices is an embedding lookup: axis 0 of a 2-d table (got axis %" PRId64
                " of rank %" PRId32 ")",
                axis, rank);
  tf_tensor_id ids;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &ids));
  return set_tensor(im, node, 0, tf_embedding(im->graph, ids, data));
}

/* ---- convolution and pooling ---- */

/* Symmetric pads of a spatial rank-`n` op: pads[i] == pads[i + n]. */
static tf_status symmetric_pads(ox_import *im, const ox_node *node, int32_t n, int32_t *padding) {
  const Onnx__AttributeProto *auto_pad = ox_attr(node, "auto_pad");
  if (auto_pad && auto_pad->has_s && !(auto_pad->s.len == 6 && memcmp(auto_pad->s.data, "NOTSET", 6) == 0))
    return fail(im, node, TF_ERR_UNSUPPORTED, "auto_pad (export with explicit pads)");
  int64_t pads[8];
  int32_t count = ox_attr_ints(node, "pads", pads, 8);
  for (int32_t i = 0; i < n; i++) {
    padding[i] = count < 0 ? 0 : (int32_t)pads[i];
    if (count >= 0 && (count != 2 * n || pads[i] != pads[i + n] || pads[i] < 0))
      return fail(im, node, TF_ERR_UNSUPPORTED, "padding must be the same at both ends of each axis");
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

static tf_status conv_like(ox_import *im, const ox_node *node, bool transposed) {
  tf_tensor_id x, w, bias = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &w));
  if (input(node, 2))
    TF_RETURN_IF_ERROR(tensor_of(im, node, 2, &bias));
  int32_t spatial = rank_of(im, w) - 2;
  if (spatial != 1 && spatial != 2)
    return fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 "-d convolution (1-d and 2-d only)", spatial);
  if (transposed && spatial != 2)
    return fail(im, node, TF_ERR_UNSUPPORTED, "1-d ConvTranspose (2-d only)");
  if (transposed && ox_attr(node, "output_shape"))
    return fail(im, node, TF_ERR_UNSUPPORTED, "output_shape (export with output_padding)");
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
  if (spatial == 1) {
    a.stride[1] = a.padding[1] = a.dilation[1] = 1;
    a.padding[1] = 0;
    return set_tensor(im, node, 0,
                      tf_conv1d(im->graph, x, w, bias, a.stride[0], a.padding[0], a.dilation[0], a.groups));
  }
  return set_tensor(im, node, 0,
                    transposed ? tf_conv_transpose2d(im->graph, x, w, bias, &a) : tf_conv2d(im->graph, x, w, bias, &a));
}

static tf_status convert_conv(ox_import *im, const ox_node *node) { return conv_like(im, node, false); }
static tf_status convert_conv_transpose(ox_import *im, const ox_node *node) { return conv_like(im, node, true); }

static tf_status pool(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  if (rank_of(im, x) != 4)
    return fail(im, node, TF_ERR_UNSUPPORTED, "pooling over a rank-%" PRId32 " input (2-d only)", rank_of(im, x));
  if (ox_attr_int(node, "ceil_mode", 0) != 0)
    return fail(im, node, TF_ERR_UNSUPPORTED, "ceil_mode=1");
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
    return fail(im, node, TF_ERR_UNSUPPORTED, "dilated pooling");
  if (op == TF_OP_AVG_POOL2D && (a.padding[0] || a.padding[1]) && !ox_attr_int(node, "count_include_pad", 0))
    return fail(im, node, TF_ERR_UNSUPPORTED, "padded average pooling must count the padding (count_include_pad=1)");
  return set_tensor(im, node, 0, tf_pool2d(im->graph, op, x, &a));
}

static tf_status convert_max_pool(ox_import *im, const ox_node *node) {
  if (node->proto->n_output > 1 && node->proto->output[1] && *node->proto->output[1])
    return fail(im, node, TF_ERR_UNSUPPORTED, "the Indices output");
  return pool(im, node, TF_OP_MAX_POOL2D);
}
static tf_status convert_average_pool(ox_import *im, const ox_node *node) { return pool(im, node, TF_OP_AVG_POOL2D); }

/* ---- the rest ---- */

static tf_status convert_dropout(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  double rate = ox_attr_float(node, "ratio", 0.5);
  if (input(node, 1)) {
    const ox_known *r;
    TF_RETURN_IF_ERROR(known_of(im, node, 1, &r));
    rate = r->count == 1 ? (r->is_float ? r->reals[0] : (double)r->ints[0].size) : rate;
  }
  if (node->proto->n_output > 1 && node->proto->output[1] && *node->proto->output[1])
    return fail(im, node, TF_ERR_UNSUPPORTED, "the mask output");
  return set_tensor(im, node, 0, rate == 0 ? x : tf_dropout(im->graph, x, (float)rate));
}

static tf_status convert_cast(ox_import *im, const ox_node *node) {
  int64_t to_onnx = ox_attr_int(node, "to", 0);
  tf_dtype to;
  if (!ox_dtype((int32_t)to_onnx, &to))
    return fail(im, node, TF_ERR_UNSUPPORTED, "cast to %s (%" PRId64 ")", ox_dtype_name((int32_t)to_onnx), to_onnx);
  TF_RETURN_IF_ERROR(need_input(im, node, 0));
  if (is_known(im, input(node, 0))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_fold_cast(ox_value_find(im, input(node, 0))->known, to, &k));
    return set_known(im, node, 0, k);
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  return set_tensor(im, node, 0, dtype_of(im, x) == to ? x : tf_cast(im->graph, x, to));
}

/* Only a zero Pad: torch exports one before every avg_pool2d (count_include_pad), padding 0 or not. */
static tf_status convert_pad(ox_import *im, const ox_node *node) {
  int64_t pads[2 * TF_MAX_RANK];
  int32_t n = 0;
  if (im->opset >= 11)
    TF_RETURN_IF_ERROR(fixed_ints(im, node, 1, pads, 2 * TF_MAX_RANK, &n));
  else if ((n = ox_attr_ints(node, "pads", pads, 2 * TF_MAX_RANK)) > 2 * TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "too many pads");
  for (int32_t i = 0; i < n; i++)
    if (pads[i] != 0)
      return fail(im, node, TF_ERR_UNSUPPORTED, "non-zero padding (only the pooling and convolution pads are)");
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  return set_tensor(im, node, 0, x);
}

static tf_status convert_identity(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(need_input(im, node, 0));
  ox_value *from = ox_value_find(im, input(node, 0));
  if (!from)
    return fail(im, node, TF_ERR_INVALID_INPUT, "input '%s' has no value", input(node, 0));
  if (from->known && from->tensor == TF_NO_TENSOR && !from->initializer) {
    ox_known *k = ox_fold_copy(from->known, from->known->rank, from->known->shape);
    return k ? set_known(im, node, 0, k) : fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x)); /* a tied initializer stays one parameter */
  return set_tensor(im, node, 0, x);
}

static tf_status convert_constant(ox_import *im, const ox_node *node) {
  char what[512], label[256];
  snprintf(what, sizeof(what), "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  const Onnx__AttributeProto *a;
  ox_known *k = NULL;
  int64_t one = 1;
  if ((a = ox_attr(node, "value")) && a->t) {
    TF_RETURN_IF_ERROR(ox_known_from_tensor(a->t, what, &k));
  } else if ((a = ox_attr(node, "value_float")) && a->has_f) {
    if ((k = ox_known_new(true, TF_F32, 0, NULL)))
      k->reals[0] = a->f;
  } else if ((a = ox_attr(node, "value_int")) && a->has_i) {
    if ((k = ox_known_new(false, TF_I64, 0, NULL)))
      k->ints[0] = tf_fixed(a->i);
  } else if ((a = ox_attr(node, "value_ints"))) {
    int64_t n = (int64_t)a->n_ints;
    if ((k = ox_known_new(false, TF_I64, 1, &n)))
      for (int64_t i = 0; i < n; i++)
        k->ints[i] = tf_fixed(a->ints[i]);
  } else if ((a = ox_attr(node, "value_floats"))) {
    int64_t n = (int64_t)a->n_floats;
    if ((k = ox_known_new(true, TF_F32, 1, &n)))
      for (int64_t i = 0; i < n; i++)
        k->reals[i] = a->floats[i];
  } else {
    return fail(im, node, TF_ERR_UNSUPPORTED, "no value, value_float, value_int(s) or value_floats attribute");
  }
  (void)one;
  return k ? set_known(im, node, 0, k) : fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
}

static tf_status convert_shape(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(need_input(im, node, 0));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  if (is_known(im, input(node, 0))) {
    const ox_known *x = ox_value_find(im, input(node, 0))->known;
    rank = x->rank;
    for (int32_t i = 0; i < rank; i++)
      dims[i] = tf_fixed(x->shape[i]);
  } else {
    tf_tensor_id x;
    TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, &rank, dims);
  }
  int64_t start = ox_attr_int(node, "start", 0), end = ox_attr_int(node, "end", rank);
  start = start < 0 ? start + rank : start;
  end = end < 0 ? end + rank : end;
  start = start < 0 ? 0 : start > rank ? rank : start;
  end = end < start ? start : end > rank ? rank : end;
  int64_t n = end - start;
  ox_known *k = ox_known_new(false, TF_I64, 1, &n);
  if (!k)
    return fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < n; i++) {
    k->ints[i] = dims[start + i];
    if (k->ints[i].size == -1 && k->ints[i].symbol < 0) {
      ox_known_free(k);
      return fail(im, node, TF_ERR_UNSUPPORTED, "axis %" PRId64 " of '%s' is a product of symbols", start + i,
                  input(node, 0));
    }
  }
  return set_known(im, node, 0, k);
}

static tf_status convert_range(ox_import *im, const ox_node *node) {
  const ox_known *start, *limit, *delta;
  TF_RETURN_IF_ERROR(known_of(im, node, 0, &start));
  TF_RETURN_IF_ERROR(known_of(im, node, 1, &limit));
  TF_RETURN_IF_ERROR(known_of(im, node, 2, &delta));
  if (start->count != 1 || limit->count != 1 || delta->count != 1 || start->is_float || limit->is_float ||
      delta->is_float || start->ints[0].symbol >= 0 || delta->ints[0].symbol >= 0)
    return fail(im, node, TF_ERR_UNSUPPORTED, "Range of integers with a fixed start and step");
  int64_t s = start->ints[0].size, d = delta->ints[0].size;
  tf_dim l = limit->ints[0];
  if (d != 1 || (l.symbol >= 0 && s != 0))
    return fail(im, node, TF_ERR_UNSUPPORTED,
                "Range with a step other than 1, or from a start other than 0 to a "
                "symbolic limit");
  tf_dim length = l.symbol >= 0 ? l : tf_fixed(l.size - s > 0 ? l.size - s : 0);
  // A symbolic length (torch.arange(x.shape[1])) is a constant of symbolic shape: position ids.
  char name[300];
  snprintf(name, sizeof(name), "%s", node->proto->output[0]);
  tf_tensor_id id = tf_graph_constant(im->graph, name, limit->dtype == TF_I32 ? TF_I32 : TF_I64,
                                      tf_shape_from(&length, 1), tf_init_make(TF_INIT_ARANGE, (double)s, 1));
  return set_tensor(im, node, 0, id);
}

static tf_status convert_constant_of_shape(ox_import *im, const ox_node *node) {
  const ox_known *shape;
  TF_RETURN_IF_ERROR(known_of(im, node, 0, &shape));
  if (shape->is_float || shape->count > TF_MAX_RANK)
    return fail(im, node, TF_ERR_INVALID_INPUT, "the shape must be at most %d integers", TF_MAX_RANK);
  double value = 0;
  tf_dtype dtype = TF_F32;
  const Onnx__AttributeProto *a = ox_attr(node, "value");
  if (a && a->t) {
    ox_known *k;
    char what[512], label[256];
    snprintf(what, sizeof(what), "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
    TF_RETURN_IF_ERROR(ox_known_from_tensor(a->t, what, &k));
    value = k->count < 1 ? 0 : k->is_float ? k->reals[0] : (double)k->ints[0].size;
    dtype = k->is_float ? TF_F32 : k->dtype;
    ox_known_free(k);
  }
  tf_dim dims[TF_MAX_RANK];
  for (int64_t i = 0; i < shape->count; i++)
    dims[i] = shape->ints[i];
  tf_tensor_id id = tf_graph_constant(im->graph, node->proto->output[0], dtype,
                                      tf_shape_from(dims, (int32_t)shape->count), tf_init_make(TF_INIT_FILL, value, 0));
  return set_tensor(im, node, 0, id);
}

/* ---- fused patterns ---- */

static tf_status emit_gelu_erf(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  return set_tensor(im, node, 0, tf_gelu(im->graph, x, false));
}

static tf_status emit_attention(ox_import *im, const ox_node *node) {
  tf_tensor_id q, k, v;
  const ox_known *shape;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &q));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &k));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 2, &v));
  TF_RETURN_IF_ERROR(known_of(im, node, 3, &shape));
  if (shape->is_float || shape->count != 4 || shape->ints[2].symbol >= 0 || shape->ints[2].size < 1)
    return fail(im, node, TF_ERR_UNSUPPORTED, "attention whose heads split is not [N, T, heads, head_dim]");
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_ATTENTION;
  attrs.u.attention.num_heads = (int32_t)shape->ints[2].size;
  attrs.u.attention.causal = node->causal;
  attrs.u.attention.scale = (float)node->scale;
  tf_tensor_id ids[3] = {q, k, v};
  return set_tensor(im, node, 0, tf_graph_node(im->graph, TF_OP_ATTENTION, ids, 3, &attrs));
}

static tf_status emit_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta;
  TF_RETURN_IF_ERROR(tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 1, &gamma));
  TF_RETURN_IF_ERROR(tensor_of(im, node, 2, &beta));
  return set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, (float)node->scale));
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
    {"Sigmoid", convert_sigmoid},
    {"Tanh", convert_tanh},
    {"Exp", convert_exp},
    {"Log", convert_log},
    {"Neg", convert_neg},
    {"Sqrt", convert_sqrt},
    {"Gelu", convert_gelu},
    {"MatMul", convert_matmul},
    {"Gemm", convert_gemm},
    {"Softmax", convert_softmax},
    {"LogSoftmax", convert_log_softmax},
    {"ReduceMean", convert_reduce_mean},
    {"ReduceSum", convert_reduce_sum},
    {"ReduceMax", convert_reduce_max},
    {"LayerNormalization", convert_layer_norm},
    {"Reshape", convert_reshape},
    {"Flatten", convert_flatten},
    {"Unsqueeze", convert_unsqueeze},
    {"Squeeze", convert_squeeze},
    {"Transpose", convert_transpose},
    {"Concat", convert_concat},
    {"Slice", convert_slice},
    {"Gather", convert_gather},
    {"Conv", convert_conv},
    {"ConvTranspose", convert_conv_transpose},
    {"MaxPool", convert_max_pool},
    {"AveragePool", convert_average_pool},
    {"Dropout", convert_dropout},
    {"Cast", convert_cast},
    {"Identity", convert_identity},
    {"Pad", convert_pad},
    {"Constant", convert_constant},
    {"Shape", convert_shape},
    {"Range", convert_range},
    {"ConstantOfShape", convert_constant_of_shape},
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
  case OX_GELU_ERF: return emit_gelu_erf(im, node);
  case OX_ATTENTION: return emit_attention(im, node);
  case OX_LAYER_NORM: return emit_layer_norm(im, node);
  default: break;
  }
  ox_converter convert = find_converter(node->proto->op_type);
  if (!convert)
    return fail(im, node, TF_ERR_UNSUPPORTED, "operator %s is not supported", node->proto->op_type);
  return convert(im, node);
}
