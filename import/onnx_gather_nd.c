/* ONNX GatherND by indices known at import (torch.diagonal's export: the diagonal summed out of
 * x * EyeLike, then its first min(rows, cols) entries gathered by an arange; an ONNX model's own
 * GatherND by a constant table). With batch_dims b, every batch position must hold the same index
 * tuples (the export's case): the k indexed axes [b, b + k), of fixed sizes, are flattened into one,
 * each tuple becomes one position along it (negative indices counted from the end, each checked
 * inside its axis), and the rows are looked up by those positions (an embedding lookup of the axis
 * moved first, the other axes of fixed sizes flattened), so the gradient sums repeated tuples as
 * PyTorch's indexing does. The output is data[:b] + indices[b:-1] + data[b + k:]. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* Whether the index tuples of every batch position of `ix` (its first `b` axes) equal the first's. */
static bool same_over_batch(const ox_known *ix, int32_t b) {
  int64_t slab = 1;
  for (int32_t d = b; d < ix->rank; d++)
    slab *= ix->shape[d];
  for (int64_t i = slab; i < ix->count; i++)
    if (ix->ints[i].size != ix->ints[i % slab].size)
      return false;
  return true;
}

/* The flat positions along the flattened axes dims[b, b + k) of the first batch position's tuples of
 * `ix` into flat[0, tuples). */
static tf_status flat_positions(ox_import *im, const ox_node *node, const ox_known *ix, const tf_dim *dims, int32_t b,
                                int32_t k, int64_t tuples, int64_t *flat) {
  for (int64_t t = 0; t < tuples; t++) {
    int64_t at = 0;
    for (int32_t j = 0; j < k; j++) {
      const int64_t size = dims[b + j].size;
      int64_t i = ix->ints[t * k + j].size;
      if (i < -size || i >= size)
        return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                       "GatherND index %" PRId64 " is outside [-%" PRId64 ", %" PRId64 ") along data axis %" PRId32, i,
                       size, size, b + j);
      at = at * size + (i < 0 ? i + size : i);
    }
    flat[t] = at;
  }
  return NULL;
}

/* The checks GatherND by known `ix` of data `dims` (rank r) with batch_dims b needs, into *k. */
static tf_status check_operands(ox_import *im, const ox_node *node, const ox_known *ix, const tf_dim *dims, int32_t r,
                                int64_t b, int32_t *k) {
  if (ix->is_float || ox_known_has_symbol(ix) || ix->rank < 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "GatherND indices: integers of rank 1 or more");
  if (b < 0 || b >= ix->rank || b > r)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "GatherND batch_dims %" PRId64 " of rank-%" PRId32 " indices and rank-%" PRId32 " data", b, ix->rank,
                   r);
  const int64_t depth = ix->shape[ix->rank - 1];
  if (depth < 1 || b + depth > r)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "GatherND index tuples of %" PRId64 " (at least 1, at most the data's rank %" PRId32 " less %" PRId64
                   " batch axes)",
                   depth, r, b);
  for (int32_t d = 0; d < b; d++)
    if (dims[d].symbol >= 0 || dims[d].size != ix->shape[d])
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "GatherND by known indices over batch axis %" PRId32 " of %s size (only the indices' own, fixed)",
                     d, dims[d].symbol >= 0 ? "symbolic" : "another");
  if (!same_over_batch(ix, (int32_t)b))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "GatherND by known indices that differ from one batch position to the next");
  for (int32_t d = 0; d < r; d++)
    if (dims[d].symbol >= 0 || dims[d].size < 1)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "GatherND by known indices of data whose axis %" PRId32 " is of symbolic or no size", d);
  *k = (int32_t)depth;
  return NULL;
}

tf_status ox_gather_nd_known(ox_import *im, const ox_node *node) {
  const ox_known *ix;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &ix));
  tf_tensor_id data;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  int32_t r, k = 0;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, data, &r, dims);
  const int64_t b = ox_attr_int(node, "batch_dims", 0);
  TF_RETURN_IF_ERROR(check_operands(im, node, ix, dims, r, b, &k));
  const int32_t nb = (int32_t)b, tuple_axes = ix->rank - 1 - nb; /* the indices' axes past the batch */
  if (nb + tuple_axes + (r - nb - k) > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "GatherND whose output has more than %d axes", TF_MAX_RANK);
  int64_t tuples = 1, flat_size = 1, rest = 1;
  for (int32_t d = nb; d < ix->rank - 1; d++)
    tuples *= ix->shape[d];
  for (int32_t j = 0; j < k; j++)
    flat_size *= dims[nb + j].size;
  for (int32_t d = 0; d < r; d++)
    if (d < nb || d >= nb + k)
      rest *= dims[d].size;
  const int64_t shape[1] = {tuples};
  ox_known *positions = ox_known_new(false, TF_I64, 1, shape);
  if (!positions)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  int64_t *flat = tuples ? calloc((size_t)tuples, sizeof(int64_t)) : NULL;
  tf_status status = tuples && !flat ? ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory")
                                     : flat_positions(im, node, ix, dims, nb, k, tuples, flat);
  for (int64_t t = 0; !status && t < tuples; t++)
    positions->ints[t] = tf_fixed(flat[t]);
  free(flat);
  if (status) {
    ox_known_free(positions);
    return status;
  }
  char name[256];
  snprintf(name, sizeof(name), "%s/positions", node->proto->output[0]);
  tf_tensor_id ids;
  TF_RETURN_IF_ERROR(ox_known_constant(im, node, name, positions, &ids));
  tf_graph *g = im->graph;
  /* [batch, flattened, after] -> [flattened, batch, after] -> [flattened, rest] table */
  tf_dim merged[TF_MAX_RANK];
  int32_t m = 0;
  for (int32_t d = 0; d < nb; d++)
    merged[m++] = dims[d];
  merged[m++] = tf_fixed(flat_size);
  for (int32_t d = nb + k; d < r; d++)
    merged[m++] = dims[d];
  int32_t first[TF_MAX_RANK], n = 0;
  first[n++] = nb;
  for (int32_t d = 0; d < m; d++)
    if (d != nb)
      first[n++] = d;
  tf_tensor_id table = tf_reshape(g, tf_transpose(g, tf_reshape(g, data, tf_shape_from(merged, m)), first, m),
                                  TF_SHAPE(tf_fixed(flat_size), tf_fixed(rest)));
  tf_tensor_id looked = tf_embedding(g, ids, table); /* [tuples, rest] */
  tf_dim out[TF_MAX_RANK];                           /* indices' tuple axes, batch, after */
  int32_t o = 0;
  for (int32_t d = nb; d < ix->rank - 1; d++)
    out[o++] = tf_fixed(ix->shape[d]);
  for (int32_t d = 0; d < nb; d++)
    out[o++] = dims[d];
  for (int32_t d = nb + k; d < r; d++)
    out[o++] = dims[d];
  int32_t back[TF_MAX_RANK], q = 0; /* batch, tuple axes, after */
  for (int32_t d = 0; d < nb; d++)
    back[q++] = tuple_axes + d;
  for (int32_t d = 0; d < tuple_axes; d++)
    back[q++] = d;
  for (int32_t d = tuple_axes + nb; d < o; d++)
    back[q++] = d;
  tf_tensor_id y = tf_reshape(g, looked, tf_shape_from(out, o));
  if (nb > 0 && tuple_axes > 0)
    y = tf_transpose(g, y, back, o);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, y);
}
