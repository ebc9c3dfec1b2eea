/* Indices computed at run time (data, not known when importing) into an axis of fixed size A, for
 * the converters that look up by them (Gather along any axis, GatherElements, ScatterElements).
 * tightfit has no integer arithmetic, so the indices are read as f32 (exact below 2^24; A must be):
 *
 *   wrapped  i + A [i < 0]                   ONNX's and PyTorch's negative indices, from the end
 *   found    [wrapped >= 0] [wrapped < A]    0/1; for integers [v >= 0] = min(1, relu(v + 1))
 *   poison   -log(found)                     0 where found (exactly), +inf elsewhere
 *   one-hot  relu(1 - |wrapped - a|)          [..., A]: 1 at a = wrapped, 0 elsewhere and off the axis
 *
 * A converter adds the poison to what it read through the indices, so an index outside [-A, A)
 * gives +inf there rather than a quiet 0 (a training step then stops on its non-finite loss). The
 * runtime's data check cannot see such indices: they are computed, not fed. */
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"

/* min(1, relu(v)) for whole numbers v: 1 where v >= 1, 0 where v <= 0. */
static tf_tensor_id at_least_one(ox_import *im, const ox_node *node, tf_tensor_id v) {
  tf_tensor_id one = ox_scalar(im, node, TF_F32, 1.0);
  return tf_sub(im->graph, one,
                tf_unary(im->graph, TF_OP_RELU, tf_sub(im->graph, one, tf_unary(im->graph, TF_OP_RELU, v))));
}

tf_status ox_wrapped_indices(ox_import *im, const ox_node *node, tf_tensor_id indices, int64_t size,
                             tf_tensor_id *wrapped, tf_tensor_id *poison) {
  const tf_dtype dtype = ox_dtype_of(im, indices);
  if (dtype != TF_I32 && dtype != TF_I64)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "indices of %s data (i32 or i64)", tf_dtype_name(dtype));
  if (size < 1 || size >= OX_INDEX_EXACT_LIMIT)
    return ox_fail(
        im, node, TF_ERR_UNSUPPORTED,
        "indices computed at run time into an axis of %" PRId64 " (from 1 to 2^24 - 1: they are read as f32)", size);
  tf_graph *g = im->graph;
  tf_tensor_id i = tf_cast(g, indices, TF_F32);
  tf_tensor_id negative = at_least_one(im, node, tf_unary(g, TF_OP_NEG, i));
  *wrapped = tf_add(g, i, tf_mul(g, negative, ox_scalar(im, node, TF_F32, (double)size)));
  tf_tensor_id from_zero = at_least_one(im, node, tf_add(g, *wrapped, ox_scalar(im, node, TF_F32, 1.0)));
  tf_tensor_id below = at_least_one(im, node, tf_sub(g, ox_scalar(im, node, TF_F32, (double)size), *wrapped));
  *poison = tf_unary(g, TF_OP_NEG, tf_unary(g, TF_OP_LOG, tf_mul(g, from_zero, below)));
  return ox_graph_error(im, node);
}

tf_status ox_one_hot_of(ox_import *im, const ox_node *node, tf_tensor_id wrapped, int64_t size, tf_tensor_id *out) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, wrapped, &rank, dims);
  if (rank + 1 > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "indices of rank %" PRId32 " (at most %d)", rank, TF_MAX_RANK - 1);
  const int64_t shape[1] = {size};
  ox_known *k = ox_known_new(true, TF_F32, 1, shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for %" PRId64 " positions", size);
  for (int64_t a = 0; a < size; a++)
    k->reals[a] = (double)a;
  char name[300];
  snprintf(name, sizeof(name), "%s.positions", node->proto->output[0]);
  tf_tensor_id positions;
  TF_RETURN_IF_ERROR(ox_known_constant(im, node, name, k, &positions));
  dims[rank] = tf_fixed(1);
  tf_tensor_id column = tf_reshape(im->graph, wrapped, tf_shape_from(dims, rank + 1));
  *out = ox_equal_mask(im, node, column, positions, false);
  return ox_graph_error(im, node);
}

void ox_axis_last(int32_t rank, int32_t axis, int32_t *perm, int32_t *back) {
  int32_t m = 0;
  for (int32_t d = 0; d < rank; d++)
    if (d != axis)
      perm[m++] = d;
  perm[m] = axis;
  for (int32_t d = 0; d < rank; d++)
    back[perm[d]] = d;
}

tf_status ox_along_last(ox_import *im, const ox_node *node, tf_tensor_id data, tf_tensor_id indices, int64_t attribute,
                        ox_along *out) {
  int32_t rank, ids_rank;
  tf_dim ids_dims[TF_MAX_RANK];
  ox_tensor_dims(im, data, &rank, out->dims);
  ox_tensor_dims(im, indices, &ids_rank, ids_dims);
  if (attribute < -rank || attribute >= rank || ids_rank != rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "axis %" PRId64 " and indices of rank %" PRId32 " for data of rank %" PRId32, attribute, ids_rank,
                   rank);
  const int32_t axis = (int32_t)(attribute < 0 ? attribute + rank : attribute);
  const tf_dim length = out->dims[axis];
  if (length.symbol >= 0 || length.size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "indices computed at run time along axis %" PRId32 " of symbolic or no size (only a fixed one)",
                   axis);
  for (int32_t d = 0; d < rank; d++)
    if (d != axis && (ids_dims[d].size != out->dims[d].size || ids_dims[d].symbol != out->dims[d].symbol))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "indices computed at run time whose axis %" PRId32 " is not the data's (only along axis %" PRId32
                     ")",
                     d, axis);
  out->rank = rank;
  out->axis = axis;
  out->length = length.size;
  out->count = ids_dims[axis];
  ox_axis_last(rank, axis, out->perm, out->back);
  out->identity = axis == rank - 1;
  tf_graph *g = im->graph;
  out->data = out->identity ? data : tf_transpose(g, data, out->perm, rank);
  tf_tensor_id moved = out->identity ? indices : tf_transpose(g, indices, out->perm, rank);
  tf_tensor_id wrapped;
  TF_RETURN_IF_ERROR(ox_wrapped_indices(im, node, moved, out->length, &wrapped, &out->poison));
  TF_RETURN_IF_ERROR(ox_one_hot_of(im, node, wrapped, out->length, &out->one_hot));
  if (ox_dtype_of(im, out->data) != TF_F32)
    out->one_hot = tf_cast(g, out->one_hot, ox_dtype_of(im, out->data));
  return ox_graph_error(im, node);
}

tf_tensor_id ox_along_back(ox_import *im, const ox_along *a, tf_tensor_id y) {
  return a->identity ? y : tf_transpose(im->graph, y, a->back, a->rank);
}
