/* The ONNX Reduce* operators as tightfit's sum, mean and max reductions, with element-wise ops
 * before and after:
 *
 *   ReduceSum, ReduceMean, ReduceMax   sum, mean, max
 *   ReduceL1, ReduceL2                 sum(|x|), sqrt(sum(x^2))
 *   ReduceSumSquare                    sum(x^2)
 *   ReduceMin                          -max(-x): exact
 *   ReduceLogSum                       log(sum(x))
 *   ReduceLogSumExp                    m + log(sum(exp(x - m))), m = max(x) over the same axes: no
 *                                      overflow past exp(88); NaN where every reduced x is -inf
 *                                      (ONNX's is -inf there)
 *   ReduceProd                         folded on values known at import (torch's std and var count
 *                                      the reduced elements as the product of their sizes); on
 *                                      float data halves multiplied along each fixed axis
 *
 * The axes come from the attribute, or from input 1 from the opset that moved them there (13 for
 * ReduceSum, 18 for the others); they must be known at import. ReduceSum, ReduceMax and ReduceMin of
 * i32/i64 data (a mask's count: XLM's `(ids != pad).sum(1)`) compute in f32 between casts: exact
 * while every value and sum is a whole number below 2^24 in magnitude; so do ReduceMax and
 * ReduceMin of u8 and bool data (opset 20's bool: any and all), exactly. */
#include <inttypes.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

typedef enum reduce_kind {
  REDUCE_PLAIN,
  REDUCE_L1,
  REDUCE_L2,
  REDUCE_SUM_SQUARE,
  REDUCE_MIN,
  REDUCE_LOG_SUM,
  REDUCE_LOG_SUM_EXP
} reduce_kind;

/* x as the reduction reads it: |x|, x^2, -x or x. */
static tf_tensor_id before(tf_graph *g, reduce_kind kind, tf_tensor_id x) {
  switch (kind) {
  case REDUCE_L1: return tf_unary(g, TF_OP_ABS, x);
  case REDUCE_L2:
  case REDUCE_SUM_SQUARE: return tf_mul(g, x, x);
  case REDUCE_MIN: return tf_unary(g, TF_OP_NEG, x);
  default: return x;
  }
}

/* sqrt(s) of an f32 sum of squares as PyTorch's 2-norm differentiates it: its backward gives a zero
 * norm the gradient 0 (a masked, all-zero row through F.normalize or x.norm()), where sqrt's would
 * be 0.5 / 0 and the row's 2x d(s) 0 x inf = NaN. Written sg(sqrt(s)) + (s - sg(s)) c with
 * c = sg(0.5 / (sqrt(s) + 1e-30)) (sg: stop_gradient): the value is sqrt(s) exactly (0 x c is 0, c
 * being finite), the gradient c: 0.5 / sqrt(s) within 1e-8 relative where sqrt(s) >= 1e-22, finite
 * at 0. Half sums keep the plain sqrt (1e-30 is 0 in f16). */
static tf_tensor_id norm_of(ox_import *im, const ox_node *node, tf_tensor_id s) {
  tf_graph *g = im->graph;
  if (ox_dtype_of(im, s) != TF_F32)
    return tf_unary(g, TF_OP_SQRT, s);
  tf_tensor_id root = tf_unary(g, TF_OP_SQRT, s), fixed = tf_unary(g, TF_OP_STOP_GRADIENT, s);
  tf_tensor_id shifted = tf_add(g, root, ox_scalar(im, node, TF_F32, 1e-30));
  tf_tensor_id slope = tf_unary(g, TF_OP_STOP_GRADIENT, tf_div(g, ox_scalar(im, node, TF_F32, 0.5), shifted));
  return tf_add(g, tf_unary(g, TF_OP_STOP_GRADIENT, root), tf_mul(g, tf_sub(g, s, fixed), slope));
}

/* The reduction's result y as the node gives it: sqrt(y), -y, log(y) or y. */
static tf_tensor_id after(ox_import *im, const ox_node *node, reduce_kind kind, tf_tensor_id y) {
  tf_graph *g = im->graph;
  switch (kind) {
  case REDUCE_L2: return norm_of(im, node, y);
  case REDUCE_MIN: return tf_unary(g, TF_OP_NEG, y);
  case REDUCE_LOG_SUM: return tf_unary(g, TF_OP_LOG, y);
  default: return y;
  }
}

/* log(sum(exp(x))) over axes[0, n) (every axis when n is 0), shifted by the maximum. */
static tf_tensor_id log_sum_exp(tf_graph *g, tf_tensor_id x, const int32_t *axes, int32_t n, bool keepdims) {
  tf_tensor_id m = tf_reduce(g, TF_OP_MAX, x, axes, n, true);
  tf_tensor_id sum = tf_reduce(g, TF_OP_SUM, tf_unary(g, TF_OP_EXP, tf_sub(g, x, m)), axes, n, true);
  tf_tensor_id y = tf_add(g, tf_unary(g, TF_OP_LOG, sum), m);
  /* Dropping the kept size-1 axes: a sum of one element each, which is that element. */
  return keepdims ? y : tf_reduce(g, TF_OP_SUM, y, axes, n, false);
}

/* ReduceSum, ReduceMax or ReduceMin of a known value (BEiT's relative coordinates summed): folded. */
static tf_status fold_reduce(ox_import *im, const ox_node *node, const ox_known *x, const int64_t *axes, int32_t n,
                             char op) {
  bool reduced[TF_MAX_RANK] = {false};
  if (n <= 0 && ox_attr_int(node, "noop_with_empty_axes", 0)) {
    ox_known *copy = ox_fold_copy(x, x->rank, x->shape);
    return copy ? ox_set_known(im, node, 0, copy) : ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  for (int32_t i = 0; i < x->rank; i++)
    reduced[i] = n <= 0;
  for (int32_t i = 0; i < n; i++) {
    const int64_t axis = axes[i] < 0 ? axes[i] + x->rank : axes[i];
    if (axis < 0 || axis >= x->rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " value", axes[i], x->rank);
    reduced[axis] = true;
  }
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_reduce(x, reduced, ox_attr_int(node, "keepdims", 1) != 0, op, &k)));
  return ox_set_known(im, node, 0, k);
}

/* The axes: from input 1 (`axes_input`: the opset that moved them there) or the attribute, into
 * axes[0, *n); *n is -1 when none are given (every axis). */
static tf_status reduce_axes(ox_import *im, const ox_node *node, bool axes_input, int64_t *axes, int32_t *n) {
  *n = -1;
  if (axes_input && ox_input(node, 1))
    TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 1, axes, TF_MAX_RANK, n));
  else if (!axes_input)
    *n = ox_attr_ints(node, "axes", axes, TF_MAX_RANK);
  if (*n > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "too many axes");
  return ox_need_input(im, node, 0);
}

static tf_status reduce(ox_import *im, const ox_node *node, tf_op op, bool axes_input, reduce_kind kind) {
  int64_t axes[TF_MAX_RANK];
  int32_t n;
  TF_RETURN_IF_ERROR(reduce_axes(im, node, axes_input, axes, &n));
  const ox_known *known = ox_foldable(im, node, 0);
  const bool plain = kind == REDUCE_PLAIN || kind == REDUCE_MIN;
  if (plain && (op == TF_OP_SUM || op == TF_OP_MAX) && known)
    return fold_reduce(im, node, known, axes, n, kind == REDUCE_MIN ? 'm' : op == TF_OP_SUM ? '+' : 'M');
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  tf_graph *g = im->graph;
  const tf_dtype dtype = ox_dtype_of(im, x);
  /* u8 data: ONNX's uint8, and its bool (ReduceMax/ReduceMin of bool from opset 20: any, all) */
  const bool integer = dtype == TF_I32 || dtype == TF_I64 || dtype == TF_U8;
  if (integer && !(plain && op != TF_OP_MEAN))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of integer data (only ReduceSum, ReduceMax and ReduceMin)",
                   node->proto->op_type);
  if (dtype == TF_U8 && op != TF_OP_MAX) /* a u8 sum wraps modulo 256, an f32 one does not */
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of u8 or bool data (only ReduceMax and ReduceMin)",
                   node->proto->op_type);
  if (integer)
    x = tf_cast(g, x, TF_F32);
  if (n <= 0 && ox_attr_int(node, "noop_with_empty_axes", 0)) {
    const tf_tensor_id y = kind == REDUCE_LOG_SUM_EXP ? x : after(im, node, kind, before(g, kind, x));
    return ox_set_tensor(im, node, 0, integer ? tf_cast(g, y, dtype) : y);
  }
  int32_t axes32[TF_MAX_RANK];
  for (int32_t i = 0; i < n; i++)
    axes32[i] = (int32_t)axes[i];
  bool keepdims = ox_attr_int(node, "keepdims", 1) != 0;
  if (kind == REDUCE_LOG_SUM_EXP)
    return ox_set_tensor(im, node, 0, log_sum_exp(g, x, axes32, n < 0 ? 0 : n, keepdims));
  tf_tensor_id y = after(im, node, kind, tf_reduce(g, op, before(g, kind, x), axes32, n < 0 ? 0 : n, keepdims));
  return ox_set_tensor(im, node, 0, integer ? tf_cast(g, y, dtype) : y);
}

tf_status ox_convert_reduce_mean(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_MEAN, im->opset >= 18, REDUCE_PLAIN);
}
tf_status ox_convert_reduce_sum(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 13, REDUCE_PLAIN);
}
tf_status ox_convert_reduce_max(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_MAX, im->opset >= 18, REDUCE_PLAIN);
}
tf_status ox_convert_reduce_min(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_MAX, im->opset >= 18, REDUCE_MIN);
}
/* The norms torch.norm and weight_norm export (p = 1 or 2 over the axes): sqrt(sum(x^2)), sum(|x|). */
tf_status ox_convert_reduce_l2(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 18, REDUCE_L2);
}
tf_status ox_convert_reduce_l1(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 18, REDUCE_L1);
}
tf_status ox_convert_reduce_sum_square(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 18, REDUCE_SUM_SQUARE);
}
tf_status ox_convert_reduce_log_sum(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 18, REDUCE_LOG_SUM);
}
tf_status ox_convert_reduce_log_sum_exp(ox_import *im, const ox_node *node) {
  return reduce(im, node, TF_OP_SUM, im->opset >= 18, REDUCE_LOG_SUM_EXP);
}

/* The most elements along one axis ReduceProd of data multiplies (halving: log2 of it steps). */
#define OX_MAX_PRODUCT_AXIS 4096

/* x's product along fixed axis `axis` (kept, of size 1): its halves multiplied until one element
 * remains, an odd last element carried to the next round, so the gradient is the product rule's. */
static tf_status product_along(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, tf_tensor_id *y) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t length = dims[axis].size;
  if (dims[axis].symbol >= 0 || length < 1 || length > OX_MAX_PRODUCT_AXIS)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "ReduceProd of data along axis %" PRId32 " of symbolic or no size, or of more than %d elements",
                   axis, OX_MAX_PRODUCT_AXIS);
  tf_graph *g = im->graph;
  while (length > 1) {
    const int64_t half = length / 2;
    tf_tensor_id p = tf_mul(g, tf_slice(g, x, axis, 0, half, 1), tf_slice(g, x, axis, half, 2 * half, 1));
    if (length % 2) {
      tf_tensor_id parts[2] = {p, tf_slice(g, x, axis, 2 * half, length, 1)};
      p = tf_concat(g, parts, 2, axis);
    }
    x = p;
    length = half + length % 2;
  }
  *y = x;
  return ox_graph_error(im, node);
}

/* ReduceProd: folded on a known value (torch's std and var: the count of the reduced elements, a
 * product of sizes, which may be a symbol's multiple); on float data (torch.prod) the product along
 * each reduced axis of fixed size (product_along), the axes then dropped unless keepdims. */
tf_status ox_convert_reduce_prod(ox_import *im, const ox_node *node) {
  int64_t axes[TF_MAX_RANK];
  int32_t n;
  TF_RETURN_IF_ERROR(reduce_axes(im, node, im->opset >= 18, axes, &n));
  const ox_known *known = ox_foldable(im, node, 0);
  if (known)
    return fold_reduce(im, node, known, axes, n, '*');
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ReduceProd of %s data (float data only)", tf_dtype_name(dtype));
  if (n <= 0 && ox_attr_int(node, "noop_with_empty_axes", 0))
    return ox_set_tensor(im, node, 0, x);
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  bool reduced[TF_MAX_RANK] = {false};
  for (int32_t i = 0; i < (n <= 0 ? rank : n); i++) {
    const int64_t axis = n <= 0 ? i : axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range for rank %" PRId32,
                     n <= 0 ? (int64_t)i : axes[i], rank);
    if (reduced[axis])
      continue;
    reduced[axis] = true;
    TF_RETURN_IF_ERROR(product_along(im, node, x, (int32_t)axis, &x));
  }
  if (ox_attr_int(node, "keepdims", 1) != 0)
    return ox_set_tensor(im, node, 0, x);
  tf_dim kept[TF_MAX_RANK];
  int32_t m = 0;
  for (int32_t a = 0; a < rank; a++)
    if (!reduced[a])
      kept[m++] = dims[a];
  return ox_set_tensor(im, node, 0, tf_reshape(im->graph, x, tf_shape_from(kept, m)));
}
