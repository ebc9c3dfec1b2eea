/* ONNX Gather: folded when both inputs are known; by a known scalar index one slice; by known
 * indices a slice of a consecutive span, rows of a 2-d table (an embedding lookup), a table made of
 * the tensor's other axes, or slices of consecutive runs where another axis is symbolic; by computed
 * indices an embedding lookup of a 2-d table, or of a table made of the other axes (gather_computed). */
#include <inttypes.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* Whether known `index` holds first, first + 1, ... (a position table: arange(T)) inside an axis of
 * `length` (negative indices counted from its end, where it is fixed). */
static bool consecutive(const ox_known *index, tf_dim length, int64_t *first) {
  if (index->is_float || index->count < 1)
    return false;
  for (int64_t i = 0; i < index->count; i++)
    if (index->ints[i].symbol >= 0)
      return false;
  int64_t start = index->ints[0].size;
  if (start < 0 && length.symbol < 0 && length.size >= 0)
    start += length.size;
  for (int64_t i = 1; i < index->count; i++)
    if (index->ints[i - 1].size == INT64_MAX || index->ints[i].size != index->ints[i - 1].size + 1)
      return false;
  if (start < 0 || start > INT64_MAX - index->count || (length.symbol < 0 && start + index->count > length.size))
    return false;
  *first = start;
  return true;
}

/* y, data's elements gathered along `axis` (dims, rank: data's), shaped data[:axis] + indices +
 * data[axis + 1:]: the node's output. */
static tf_status shaped_as_indices(ox_import *im, const ox_node *node, tf_tensor_id y, const tf_dim *dims, int32_t rank,
                                   int32_t axis, const ox_known *index) {
  tf_dim out[TF_MAX_RANK];
  int32_t m = 0;
  for (int32_t d = 0; d < axis; d++)
    out[m++] = dims[d];
  for (int32_t d = 0; d < index->rank; d++)
    out[m++] = tf_fixed(index->shape[d]);
  for (int32_t d = axis + 1; d < rank; d++)
    out[m++] = dims[d];
  return ox_reshape_to(im, node, y, out, m);
}

/* A Gather by known indices: the indices (input 1), and data's rank and dims; refused when the result
 * would exceed TF_MAX_RANK axes. */
static tf_status gather_operands(ox_import *im, const ox_node *node, tf_tensor_id data, const ox_known **index,
                                 int32_t *rank, tf_dim *dims) {
  *index = ox_value_find(im, ox_input(node, 1))->known;
  ox_tensor_dims(im, data, rank, dims);
  if (*rank - 1 + (*index)->rank > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Gather to rank %" PRId32 ", over %d", *rank - 1 + (*index)->rank,
                   TF_MAX_RANK);
  return NULL;
}

/* Gather of data along `axis` by the consecutive known indices of input 1 from `first`: the slice
 * [first, first + count) of that axis, reshaped to the indices' shape there (wpe[arange(T)]). */
static tf_status gather_span(ox_import *im, const ox_node *node, tf_tensor_id data, int32_t axis, int64_t first) {
  const ox_known *index;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(gather_operands(im, node, data, &index, &rank, dims));
  return shaped_as_indices(im, node, tf_slice(im->graph, data, axis, first, first + index->count, 1), dims, rank, axis,
                           index);
}

/* Known row indices that an embedding lookup may read: each a fixed number in [0, rows) (the lookup
 * has no negative indexing, and reads no row past the table). */
static tf_status rows_inside(ox_import *im, const ox_node *node, const ox_known *index, tf_dim rows) {
  if (index->is_float || rows.symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Gather by known %s indices of a table of %s rows",
                   index->is_float ? "float" : "integer", rows.symbol >= 0 ? "symbolic" : "fixed");
  for (int64_t i = 0; i < index->count; i++) {
    const tf_dim at = index->ints[i];
    if (at.symbol >= 0 || at.size < 0 || at.size >= rows.size)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "Gather by known indices: index %" PRId64 " is %" PRId64 "%s, outside [0, %" PRId64
                     ") (the table's rows; negative indices are not taken)",
                     i, at.size, at.symbol >= 0 ? " times a symbol" : "", rows.size);
  }
  return NULL;
}

/* Gather along a fixed `axis` by known indices in range, of a tensor with a symbolic axis elsewhere
 * (nn.Unfold / F.unfold: PyTorch gathers each window's rows and columns by known tables over a batch
 * of symbolic size): each run of consecutive indices one slice of the axis, the slices concatenated
 * there and the axis shaped as the indices; the gradient adds the slices' parts where runs overlap.
 * At most OX_SLICE_COPIES_MAX runs. */
static tf_status gather_by_slices(ox_import *im, const ox_node *node, tf_tensor_id data, int32_t axis,
                                  const ox_known *index, const tf_dim *dims, int32_t rank) {
  TF_RETURN_IF_ERROR(rows_inside(im, node, index, dims[axis]));
  tf_tensor_id pieces[OX_SLICE_COPIES_MAX];
  int32_t n = 0;
  for (int64_t i = 0; i < index->count;) {
    int64_t end = i + 1;
    while (end < index->count && index->ints[end].size == index->ints[end - 1].size + 1)
      end++;
    if (n == OX_SLICE_COPIES_MAX)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "Gather by known indices in more than %d runs of consecutive ones along axis %" PRId32
                     " of a tensor with a symbolic axis",
                     OX_SLICE_COPIES_MAX, axis);
    const int64_t first = index->ints[i].size;
    pieces[n++] = tf_slice(im->graph, data, axis, first, first + (end - i), 1);
    i = end;
  }
  return shaped_as_indices(im, node, n == 1 ? pieces[0] : tf_concat(im->graph, pieces, n, axis), dims, rank, axis,
                           index);
}

/* Gather along `axis` of a tensor whose other axes have fixed sizes, by known indices in range
 * (LeViT's attention_biases[:, idxs]: a [heads, offsets] parameter by a [T, T] table of offsets):
 * the axis moved first and the others flattened into a [length, rest] table, an embedding lookup of
 * it, and the result shaped and transposed back to data[:axis] + indices + data[axis + 1:]; the
 * gradient sums repeated indices as torch's does. */
static tf_status gather_along(ox_import *im, const ox_node *node, tf_tensor_id data, int32_t axis) {
  const ox_known *index;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(gather_operands(im, node, data, &index, &rank, dims));
  int64_t rest = 1;
  for (int32_t d = 0; d < rank; d++)
    if (d != axis && (dims[d].symbol >= 0 || dims[d].size < 0))
      return gather_by_slices(im, node, data, axis, index, dims, rank);
    else if (d != axis)
      rest *= dims[d].size;
  TF_RETURN_IF_ERROR(rows_inside(im, node, index, dims[axis]));
  int32_t first[TF_MAX_RANK], back[TF_MAX_RANK], m = 0;
  first[m++] = axis;
  for (int32_t d = 0; d < rank; d++)
    if (d != axis)
      first[m++] = d;
  tf_tensor_id table =
      tf_reshape(im->graph, tf_transpose(im->graph, data, first, rank), TF_SHAPE(dims[axis], tf_fixed(rest)));
  tf_tensor_id ids;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  tf_dim looked[TF_MAX_RANK]; /* indices, then data's axes before and after `axis` */
  m = 0;
  for (int32_t d = 0; d < index->rank; d++)
    looked[m++] = tf_fixed(index->shape[d]);
  for (int32_t d = 0; d < rank; d++)
    if (d != axis)
      looked[m++] = dims[d];
  tf_tensor_id y = tf_reshape(im->graph, tf_embedding(im->graph, ids, table), tf_shape_from(looked, m));
  int32_t n = 0; /* data's axes before `axis`, the indices', data's after */
  for (int32_t d = 0; d < axis; d++)
    back[n++] = index->rank + d;
  for (int32_t d = 0; d < index->rank; d++)
    back[n++] = d;
  for (int32_t d = axis; d < rank - 1; d++)
    back[n++] = index->rank + d;
  return ox_set_tensor(im, node, 0, tf_transpose(im->graph, y, back, m));
}

/* Gather along `axis` (of fixed size; not axis 0 of a 2-d table, an embedding lookup) by indices
 * computed at run time (x[:, idx], torch.index_select by data): as gather_along, the axis moved first
 * and the others flattened into a [length, rest] table, looked up by the wrapped indices
 * (onnx_indices.c), shaped and moved back; the poison added, so an index outside [-length, length)
 * gives +inf, not 0. */
static tf_status gather_computed(ox_import *im, const ox_node *node, tf_tensor_id data, int32_t axis,
                                 const tf_dim *dims, int32_t rank) {
  const tf_dim length = dims[axis];
  if (length.symbol >= 0 || length.size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Gather by computed indices along axis %" PRId32 " of symbolic or no size (only a fixed one)", axis);
  tf_graph *g = im->graph;
  tf_tensor_id ids, wrapped, poison;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  TF_RETURN_IF_ERROR(ox_wrapped_indices(im, node, ids, length.size, &wrapped, &poison));
  int32_t first[TF_MAX_RANK], back[TF_MAX_RANK], m = 0, ids_rank;
  tf_dim ids_dims[TF_MAX_RANK], looked[TF_MAX_RANK];
  ox_tensor_dims(im, ids, &ids_rank, ids_dims);
  if (ids_rank + rank - 1 > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Gather whose output has more than %d axes", TF_MAX_RANK);
  int64_t rest = 1;
  bool fixed = true;
  first[m++] = axis;
  for (int32_t d = 0; d < rank; d++)
    if (d != axis) {
      first[m++] = d;
      fixed = fixed && dims[d].symbol < 0 && dims[d].size >= 0;
      rest = fixed ? rest * dims[d].size : rest;
    }
  tf_tensor_id table =
      tf_reshape(g, tf_transpose(g, data, first, rank), TF_SHAPE(length, fixed ? tf_fixed(rest) : (tf_dim){-1, -1}));
  m = 0; /* the indices' axes, then data's before and after `axis` */
  for (int32_t d = 0; d < ids_rank; d++)
    looked[m++] = ids_dims[d];
  for (int32_t d = 0; d < rank; d++)
    if (d != axis)
      looked[m++] = dims[d];
  tf_tensor_id y = tf_reshape(g, tf_embedding(g, tf_cast(g, wrapped, TF_I64), table), tf_shape_from(looked, m));
  for (int32_t d = ids_rank; d < m; d++)
    looked[d] = tf_fixed(1);
  poison = tf_reshape(g, poison, tf_shape_from(looked, m));
  y = tf_add(g, y, ox_dtype_of(im, y) == TF_F32 ? poison : tf_cast(g, poison, ox_dtype_of(im, y)));
  int32_t n = 0;
  for (int32_t d = 0; d < axis; d++)
    back[n++] = ids_rank + d;
  for (int32_t d = 0; d < ids_rank; d++)
    back[n++] = d;
  for (int32_t d = axis; d < rank - 1; d++)
    back[n++] = ids_rank + d;
  return ox_set_tensor(im, node, 0, tf_transpose(g, y, back, m));
}

tf_status ox_convert_gather(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  int64_t axis = ox_attr_int(node, "axis", 0);
  if (ox_is_known(im, ox_input(node, 0)) && ox_is_known(im, ox_input(node, 1))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(
        ox_at(im, node,
              ox_fold_gather(ox_value_find(im, ox_input(node, 0))->known, ox_value_find(im, ox_input(node, 1))->known,
                             (int32_t)axis, ox_fold_room(im), &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id data;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, data, &rank, dims);
  if (axis < 0)
    axis += rank;
  if (ox_is_known(im, ox_input(node, 1)) && ox_value_find(im, ox_input(node, 1))->known->count > 1) {
    int64_t first;
    if (consecutive(ox_value_find(im, ox_input(node, 1))->known, axis >= 0 && axis < rank ? dims[axis] : tf_fixed(-1),
                    &first))
      return gather_span(im, node, data, (int32_t)axis, first);
    if (axis < 0 || axis >= rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Gather along axis %" PRId64 " of a rank-%" PRId32 " tensor",
                     ox_attr_int(node, "axis", 0), rank);
    if (axis != 0 || rank != 2)
      return gather_along(im, node, data, (int32_t)axis);
    TF_RETURN_IF_ERROR(rows_inside(im, node, ox_value_find(im, ox_input(node, 1))->known, dims[0]));
  } else if (ox_is_known(im, ox_input(node, 1))) {
    // x[:, i]: a slice of width one, then the axis dropped.
    const ox_known *index = ox_value_find(im, ox_input(node, 1))->known;
    if (index->count != 1 || index->is_float || index->ints[0].symbol >= 0 || axis < 0 || axis >= rank)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Gather of a tensor by several known indices");
    int64_t i = index->ints[0].size;
    const tf_dim along = dims[axis];
    if (along.symbol < 0 && along.size >= 0) { // a fixed axis: ONNX's range [-n, n), negatives from the end
      if (i < -along.size || i >= along.size)
        return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                       "Gather index %" PRId64 " is outside [-%" PRId64 ", %" PRId64 ") along axis %" PRId64, i,
                       along.size, along.size, ox_attr_int(node, "axis", 0));
      if (i < 0)
        i += along.size;
    } else if (i == INT64_MAX || i < -(int64_t)INT32_MAX) { // no axis is that long: nor is i + 1 an int64
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Gather index %" PRId64 " along axis %" PRId64 " of unknown size",
                     i, ox_attr_int(node, "axis", 0));
    }
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
    return ox_reshape_to(im, node, y, out, m);
  }
  if (axis < 0 || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Gather along axis %" PRId64 " of a rank-%" PRId32 " tensor",
                   ox_attr_int(node, "axis", 0), rank);
  if (axis != 0 || rank != 2)
    return gather_computed(im, node, data, (int32_t)axis, dims, rank);
  tf_tensor_id ids;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  return ox_set_tensor(im, node, 0, tf_embedding(im->graph, ids, data));
}
