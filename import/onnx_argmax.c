/* ArgMax and ArgMin of float data (a VQ-VAE's nearest codebook entry, distances.argmin(1) then an
 * embedding lookup; a classifier's prediction) composed of existing ops, exactly. On an f32 copy of x
 * along an axis of fixed size K (at most 2^24):
 *   m = max(x) over the axis, kept;
 *   e = relu(1 - |x - m| 2^149): 1 where x equals the maximum, else 0 (onnx_mask.c's equality,
 *       ox_equal_mask: the smallest nonzero difference, a subnormal, reaches 1 where subnormals are kept);
 *   the first such position: K - 1 - max(e (K - 1 - p)); with select_last_index the last: max(e p)
 *   (positions p are whole numbers, exact in f32), cast to i64.
 * Integer data (GPT2ForSequenceClassification's last non-padding position, the argmax of positions times a
 * mask) is compared in f32 too: exact while its values are below 2^24 in magnitude (larger ones may
 * round to equal values, and the first of them is taken).
 * ArgMin is ArgMax of -x; Hardmax the one-hot of ArgMax's index. No gradient flows through them (PyTorch's argmax has
 * none): a stop_gradient. A NaN in x gives no defined index (PyTorch's is the NaN's position); an index a lookup then
 * reads out of range is refused by that kernel.
 *
 * TopK by a known k (at most TOPK_MAX) is k rounds of that first maximum on a stop-gradient copy s of x
 * clipped to the finite range (negated for the smallest): the round's index i, its one-hot
 * h = [p == i], the value sum(x h) over the axis (its gradient reaches x at i alone, as PyTorch's topk
 * gives it), and s - 3 FLT_MAX h for the next round (the chosen position -inf, the others unchanged).
 * The values come out sorted (largest first), ties to the lower index as ONNX asks; infinities tie
 * with FLT_MAX (taken in index order), a NaN's place is undefined. */
#include <float.h>
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"

#define MAX_POSITIONS (INT64_C(1) << 24) /* whole numbers exact in f32 */
#define TOPK_MAX 128                     /* rounds a TopK may take: each is a few ops over the axis */

/* The constant [1, .., K, .., 1] (K on `axis`) of the positions p, or of K - 1 - p (`reversed`). */
static tf_status positions(ox_import *im, const ox_node *node, int32_t rank, int32_t axis, int64_t k, bool reversed,
                           tf_tensor_id *out) {
  int64_t shape[TF_MAX_RANK];
  for (int32_t i = 0; i < rank; i++)
    shape[i] = i == axis ? k : 1;
  ox_known *known = ox_known_new(true, TF_F32, rank, shape);
  if (!known)
    return ox_at(im, node, ox_known_refusal(rank, shape, "the positions of the axis"));
  for (int64_t p = 0; p < k; p++)
    known->reals[p] = (double)(reversed ? k - 1 - p : p);
  char name[300];
  snprintf(name, sizeof(name), "%s.positions", node->proto->output[0]);
  return ox_known_constant(im, node, name, known, out);
}

/* Input 0 as a tensor, its rank and dtype, the node's axis attribute (`fallback` when absent) made
 * non-negative, and that axis's size: float or integer data along a fixed axis of 1 to 2^24. */
typedef struct along_axis {
  tf_tensor_id x;
  int32_t rank;
  int64_t axis, size;
  tf_dtype dtype;
} along_axis;

static tf_status along_axis_of(ox_import *im, const ox_node *node, int64_t fallback, along_axis *a) {
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a->x));
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, a->x, &a->rank, dims);
  a->axis = ox_attr_int(node, "axis", fallback);
  if (a->rank < 1 || a->axis < -a->rank || a->axis >= a->rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", a->axis, a->rank);
  a->axis = a->axis < 0 ? a->axis + a->rank : a->axis;
  const tf_dim along = dims[a->axis];
  a->size = along.size;
  a->dtype = ox_dtype_of(im, a->x);
  if (a->dtype != TF_F32 && a->dtype != TF_F16 && a->dtype != TF_BF16 && !ox_is_integer_dtype(a->dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of %s data (float or integer data only)", node->proto->op_type,
                   tf_dtype_name(a->dtype));
  if (along.symbol >= 0 || along.size < 1 || along.size > MAX_POSITIONS)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s along axis %" PRId64 " of %s size (a fixed size of 1 to 2^24)",
                   node->proto->op_type, a->axis, along.symbol >= 0 ? "symbolic" : "another");
  return NULL;
}

static tf_status arg_extreme(ox_import *im, const ox_node *node, bool minimum) {
  along_axis a;
  TF_RETURN_IF_ERROR(along_axis_of(im, node, 0, &a));
  tf_tensor_id x = a.x;
  const int32_t rank = a.rank;
  const int64_t axis = a.axis;
  const tf_dtype dtype = a.dtype;
  const bool keepdims = ox_attr_int(node, "keepdims", 1) != 0, last = ox_attr_int(node, "select_last_index", 0) != 0;
  tf_graph *g = im->graph;
  if (dtype != TF_F32)
    x = tf_cast(g, x, TF_F32);
  if (minimum)
    x = tf_unary(g, TF_OP_NEG, x);
  const int32_t axes[1] = {(int32_t)axis};
  tf_tensor_id at_max = ox_equal_mask(im, node, x, tf_reduce(g, TF_OP_MAX, x, axes, 1, true), true);
  tf_tensor_id weights;
  TF_RETURN_IF_ERROR(positions(im, node, rank, (int32_t)axis, a.size, !last, &weights));
  tf_tensor_id index = tf_reduce(g, TF_OP_MAX, tf_mul(g, at_max, weights), axes, 1, keepdims);
  if (!last)
    index = tf_sub(g, ox_scalar(im, node, TF_F32, (double)(a.size - 1)), index);
  index = tf_cast(g, tf_unary(g, TF_OP_STOP_GRADIENT, index), TF_I64);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, index);
}

tf_status ox_convert_arg_max(ox_import *im, const ox_node *node) { return arg_extreme(im, node, false); }
tf_status ox_convert_arg_min(ox_import *im, const ox_node *node) { return arg_extreme(im, node, true); }

/* Hardmax: 1 at the first maximum along the axis, 0 elsewhere (the one-hot of ArgMax's index), in x's
 * dtype, under a stop_gradient (its derivative is 0). From opset 13 along one axis (default -1);
 * before, over the axes from `axis` (default 1) flattened, which is the same where it is the last. */
tf_status ox_convert_hardmax(ox_import *im, const ox_node *node) {
  along_axis a;
  TF_RETURN_IF_ERROR(along_axis_of(im, node, im->opset >= 13 ? -1 : 1, &a));
  if (im->opset < 13 && a.axis != a.rank - 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Hardmax before opset 13 over axes %" PRId64 " to %" PRId32 " flattened (only over the last axis)",
                   a.axis, a.rank - 1);
  tf_graph *g = im->graph;
  tf_tensor_id x = a.dtype == TF_F32 ? a.x : tf_cast(g, a.x, TF_F32);
  const int32_t axes[1] = {(int32_t)a.axis};
  tf_tensor_id reversed, forward;
  TF_RETURN_IF_ERROR(positions(im, node, a.rank, (int32_t)a.axis, a.size, true, &reversed));
  TF_RETURN_IF_ERROR(positions(im, node, a.rank, (int32_t)a.axis, a.size, false, &forward));
  tf_tensor_id at_max = ox_equal_mask(im, node, x, tf_reduce(g, TF_OP_MAX, x, axes, 1, true), true);
  tf_tensor_id first = tf_sub(g, ox_scalar(im, node, TF_F32, (double)(a.size - 1)),
                              tf_reduce(g, TF_OP_MAX, tf_mul(g, at_max, reversed), axes, 1, true));
  tf_tensor_id y = tf_unary(g, TF_OP_STOP_GRADIENT, ox_equal_mask(im, node, forward, first, true));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, a.dtype == TF_F32 ? y : tf_cast(g, y, a.dtype));
}

/* TopK's k: input 1 (opset 10+) or the attribute. */
static tf_status top_k_count(ox_import *im, const ox_node *node, int64_t *k) {
  if (im->opset < 10) {
    *k = ox_attr_int(node, "k", -1);
    return NULL;
  }
  int32_t n = 0;
  TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 1, k, 1, &n));
  if (n != 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "TopK's k holds %" PRId32 " numbers, not one", n);
  return NULL;
}

tf_status ox_convert_top_k(ox_import *im, const ox_node *node) {
  along_axis a;
  TF_RETURN_IF_ERROR(along_axis_of(im, node, -1, &a));
  int64_t k;
  TF_RETURN_IF_ERROR(top_k_count(im, node, &k));
  const tf_tensor_id x = a.x;
  const int32_t rank = a.rank;
  const int64_t axis = a.axis;
  const tf_dtype dtype = a.dtype;
  if (k < 1 || k > a.size || k > TOPK_MAX)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "TopK of k = %" PRId64 " along an axis of %" PRId64 " (1 to %d, at most the axis)", k, a.size,
                   TOPK_MAX);
  tf_graph *g = im->graph;
  const int32_t axes[1] = {(int32_t)axis};
  const tf_tensor_id xf = dtype == TF_F32 ? x : tf_cast(g, x, TF_F32);
  tf_tensor_id s = tf_clip(g, tf_unary(g, TF_OP_STOP_GRADIENT, xf), -FLT_MAX, FLT_MAX);
  if (ox_attr_int(node, "largest", 1) == 0)
    s = tf_unary(g, TF_OP_NEG, s);
  tf_tensor_id reversed, forward;
  TF_RETURN_IF_ERROR(positions(im, node, rank, (int32_t)axis, a.size, true, &reversed));
  TF_RETURN_IF_ERROR(positions(im, node, rank, (int32_t)axis, a.size, false, &forward));
  const tf_tensor_id last = ox_scalar(im, node, TF_F32, (double)(a.size - 1));
  const tf_tensor_id most = ox_scalar(im, node, TF_F32, FLT_MAX);
  tf_tensor_id values[TOPK_MAX], indices[TOPK_MAX];
  for (int64_t round = 0; round < k; round++) {
    tf_tensor_id at_max = ox_equal_mask(im, node, s, tf_reduce(g, TF_OP_MAX, s, axes, 1, true), true);
    tf_tensor_id index = tf_sub(g, last, tf_reduce(g, TF_OP_MAX, tf_mul(g, at_max, reversed), axes, 1, true));
    tf_tensor_id chosen = ox_equal_mask(im, node, forward, index, true);
    values[round] = tf_reduce(g, TF_OP_SUM, tf_mul(g, xf, chosen), axes, 1, true);
    indices[round] = index;
    if (round + 1 < k) {
      tf_tensor_id drop = tf_mul(g, chosen, most);
      s = tf_sub(g, tf_sub(g, tf_sub(g, s, drop), drop), drop);
    }
  }
  tf_tensor_id y = k == 1 ? values[0] : tf_concat(g, values, (int32_t)k, (int32_t)axis);
  tf_tensor_id at = k == 1 ? indices[0] : tf_concat(g, indices, (int32_t)k, (int32_t)axis);
  at = tf_cast(g, tf_unary(g, TF_OP_STOP_GRADIENT, at), TF_I64);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  TF_RETURN_IF_ERROR(ox_set_tensor(im, node, 0, dtype == TF_F32 ? y : tf_cast(g, y, dtype)));
  return ox_set_tensor(im, node, 1, at);
}
