/* ScatterElements (torch.scatter, Tensor.scatter_ and scatter_add_ by index tensors: a one-hot made by
 * zeros_like(x).scatter(1, labels[:, None], 1.0)) and Scatter (its name before opset 11), by indices
 * known or computed at run time. With the axis last (onnx_indices.c: data [..., A], indices and
 * updates [..., K], one_hot [..., K, A]):
 *
 *   put      sum over k of one_hot[..., k, a] updates[..., k]         [..., A]
 *   written  min(1, sum over k of one_hot[..., k, a])                 1 where an index points
 *   none     data (1 - written) + put / max(1, hits)                  (reduction none)
 *   add      data + put                                               (reduction add)
 *
 * then the poison of each row's indices added to the row (an index outside [-A, A) gives +inf, not a
 * write lost unnoticed) and the axis moved back. The gradient is PyTorch's: data's passes where
 * nothing was written (none) or everywhere (add), updates' is the output's gradient gathered at the
 * indices. Where indices of one row are equal, reduction none writes the sum of their updates into
 * zeros (how torch exports scatter_add_ at early opsets: ox_is_zero_fill), elsewhere their mean, each
 * update's gradient the whole output gradient there (ox_mean_of_writes: PyTorch's when the values are
 * equal; where they differ ONNX leaves the result undefined and PyTorch keeps one of them). Reductions
 * mul, max and min are refused. */
#include <inttypes.h>
#include <string.h>

#include "import/onnx_converters.h"

tf_status ox_convert_scatter_elements(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 2));
  const bool add = ox_attr_is(node, "reduction", "none", "add");
  if (!add && !ox_attr_is(node, "reduction", "none", "none"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ScatterElements with reduction mul, max or min (only none and add)");
  const bool zeros = ox_is_zero_fill(im, node, 0); /* before its graph tensor is made */
  tf_tensor_id data, ids, updates;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  TF_RETURN_IF_ERROR(ox_operand(im, node, 2, data, &updates));
  ox_match_half(im, &data, &updates);
  ox_along a;
  TF_RETURN_IF_ERROR(ox_along_last(im, node, data, ids, ox_attr_int(node, "axis", 0), &a));
  int32_t updates_rank;
  tf_dim updates_dims[TF_MAX_RANK], columns[TF_MAX_RANK];
  ox_tensor_dims(im, updates, &updates_rank, updates_dims);
  bool same = updates_rank == a.rank && updates_dims[a.axis].size == a.count.size &&
              updates_dims[a.axis].symbol == a.count.symbol;
  for (int32_t d = 0; same && d < a.rank; d++)
    same = d == a.axis || (updates_dims[d].size == a.dims[d].size && updates_dims[d].symbol == a.dims[d].symbol);
  if (!same)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "ScatterElements' updates must have the indices' shape");
  tf_graph *g = im->graph;
  for (int32_t d = 0; d < a.rank - 1; d++)
    columns[d] = a.dims[a.perm[d]];
  columns[a.rank - 1] = a.count;
  columns[a.rank] = tf_fixed(1);
  tf_tensor_id moved = a.identity ? updates : tf_transpose(g, updates, a.perm, a.rank);
  tf_tensor_id column = tf_reshape(g, moved, tf_shape_from(columns, a.rank + 1)); /* [..., K, 1] */
  int32_t k_axis = a.rank - 1;
  tf_tensor_id put = tf_reduce(g, TF_OP_SUM, tf_mul(g, a.one_hot, column), &k_axis, 1, false);
  tf_tensor_id y;
  if (add) {
    y = tf_add(g, a.data, put);
  } else {
    tf_tensor_id one = ox_scalar(im, node, ox_dtype_of(im, a.data), 1.0);
    tf_tensor_id hits = tf_reduce(g, TF_OP_SUM, a.one_hot, &k_axis, 1, false);
    tf_tensor_id kept = tf_unary(g, TF_OP_RELU, tf_sub(g, one, hits)); /* 1 - min(1, hits) */
    y = tf_add(g, tf_mul(g, a.data, kept), zeros ? put : ox_mean_of_writes(im, put, hits, kept));
  }
  tf_tensor_id poison = tf_reduce(g, TF_OP_SUM, a.poison, &k_axis, 1, true); /* [..., 1]: the row's */
  y = tf_add(g, y, ox_dtype_of(im, y) == TF_F32 ? poison : tf_cast(g, poison, ox_dtype_of(im, y)));
  return ox_set_tensor(im, node, 0, ox_along_back(im, &a, y));
}
