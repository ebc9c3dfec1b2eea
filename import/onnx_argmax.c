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
 * ArgMin is ArgMax of -x. No gradient flows through it (PyTorch's argmax has none): a stop_gradient.
 * A NaN in x gives no defined index (PyTorch's is the NaN's position); an index a lookup then reads
 * out of range is refused by that kernel. */
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"

#define MAX_POSITIONS (INT64_C(1) << 24) /* whole numbers exact in f32 */

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

static tf_status arg_extreme(ox_import *im, const ox_node *node, bool minimum) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t axis = ox_attr_int(node, "axis", 0);
  if (axis < -rank || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, rank);
  axis = axis < 0 ? axis + rank : axis;
  const tf_dim along = dims[axis];
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16 && !ox_is_integer_dtype(dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of %s data (float or integer data only)", node->proto->op_type,
                   tf_dtype_name(dtype));
  if (along.symbol >= 0 || along.size < 1 || along.size > MAX_POSITIONS)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s along axis %" PRId64 " of %s size (a fixed size of 1 to 2^24)",
                   node->proto->op_type, axis, along.symbol >= 0 ? "symbolic" : "another");
  const bool keepdims = ox_attr_int(node, "keepdims", 1) != 0, last = ox_attr_int(node, "select_last_index", 0) != 0;
  tf_graph *g = im->graph;
  if (dtype != TF_F32)
    x = tf_cast(g, x, TF_F32);
  if (minimum)
    x = tf_unary(g, TF_OP_NEG, x);
  const int32_t axes[1] = {(int32_t)axis};
  tf_tensor_id at_max = ox_equal_mask(im, node, x, tf_reduce(g, TF_OP_MAX, x, axes, 1, true), true);
  tf_tensor_id weights;
  TF_RETURN_IF_ERROR(positions(im, node, rank, (int32_t)axis, along.size, !last, &weights));
  tf_tensor_id index = tf_reduce(g, TF_OP_MAX, tf_mul(g, at_max, weights), axes, 1, keepdims);
  if (!last)
    index = tf_sub(g, ox_scalar(im, node, TF_F32, (double)(along.size - 1)), index);
  index = tf_cast(g, tf_unary(g, TF_OP_STOP_GRADIENT, index), TF_I64);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, index);
}

tf_status ox_convert_arg_max(ox_import *im, const ox_node *node) { return arg_extreme(im, node, false); }
tf_status ox_convert_arg_min(ox_import *im, const ox_node *node) { return arg_extreme(im, node, true); }
