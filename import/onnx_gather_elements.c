/* GatherElements (torch.gather) of data by indices known when importing, or known and broadcast by
 * an Expand to a symbolic batch (DeBERTa's c2p_pos.expand([N, H, T, T]), Funnel's position ids): an
 * embedding lookup, whose gradient is the scatter-add torch.gather's is. By indices computed at run
 * time: a one-hot product (gather_elements_computed).
 *
 * The output axes split in two: the gather axis and every axis along which the known indices vary
 * (V, all of fixed size), and the others, along which they are broadcast (B, where the output is
 * as long as the data). The data transposed to [V..., B...] and flattened to a table [rows of V,
 * B's elements] is looked up at the row each output position of V reads (the index on the gather
 * axis, the position's own coordinate on the others); the rows come back [V..., B...] and are
 * transposed to the output's order. */
#include <inttypes.h>
#include <string.h>

#include "common/checked.h"
#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The most rows a lookup's table has, and the most positions it reads. */
#define GATHER_ELEMENTS_LIMIT ((int64_t)1 << 24)

/* The known integers behind input 1: the value itself, or the known input of the Expand that made it. */
static const ox_known *known_indices(ox_import *im, const ox_node *node) {
  const ox_known *k = ox_foldable(im, node, 1);
  if (k)
    return k;
  const ox_node *expand = ox_producer(im, ox_input(node, 1));
  if (!expand)
    return NULL;
  if (expand->fused != OX_PLAIN || !ox_default_domain(expand->proto->domain) ||
      strcmp(expand->proto->op_type, "Expand") != 0)
    return NULL;
  const ox_value *v = ox_value_find(im, ox_input(expand, 0) ? ox_input(expand, 0) : "");
  return v && v->known && !v->known->is_float ? v->known : NULL; /* its graph tensor is the Expand's input */
}

/* The shape of the indices (the output's): a known value's, or the Expand's tensor's. */
static void output_dims(ox_import *im, const ox_value *v, int32_t *rank, tf_dim *dims) {
  *rank = 0;
  if (v->known && v->tensor == TF_NO_TENSOR) {
    *rank = v->known->rank;
    for (int32_t d = 0; d < *rank; d++)
      dims[d] = tf_fixed(v->known->shape[d]);
  } else if (v->tensor != TF_NO_TENSOR) {
    ox_tensor_dims(im, v->tensor, rank, dims);
  }
}

/* The lookup's row ids: for each position of the V axes (sizes out[v]), the row of the data's V
 * block (sizes rows[v]) that it reads. */
static tf_status row_ids(ox_import *im, const ox_node *node, const ox_known *index, int32_t rank, int32_t axis,
                         const int32_t *v_axes, int32_t nv, const int64_t *out, const int64_t *rows, ox_known **ids) {
  int64_t shape[TF_MAX_RANK], count = 1;
  for (int32_t i = 0; i < nv; i++) {
    shape[i] = out[v_axes[i]];
    count *= shape[i];
  }
  *ids = ox_known_new(false, TF_I64, nv, shape);
  if (!*ids)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for GatherElements' indices");
  for (int64_t p = 0; p < count; p++) {
    int64_t at = p, coordinate[TF_MAX_RANK] = {0}, row = 0;
    for (int32_t i = nv - 1; i >= 0; i--) {
      coordinate[v_axes[i]] = at % shape[i];
      at /= shape[i];
    }
    int64_t source = 0, stride = 1; /* the index's element, broadcast (aligned at the end) */
    for (int32_t d = rank - 1; d >= rank - index->rank; d--) {
      const int64_t size = index->shape[d - (rank - index->rank)];
      source += size == 1 ? 0 : coordinate[d] * stride;
      stride *= size;
    }
    int64_t i = index->ints[source].size;
    if (index->ints[source].symbol >= 0 || i < -rows[axis] || i >= rows[axis]) {
      ox_known_free(*ids);
      return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                     "GatherElements: index %" PRId64 " outside axis %" PRId32 " of %" PRId64, i, axis, rows[axis]);
    }
    coordinate[axis] = i < 0 ? i + rows[axis] : i;
    for (int32_t k = 0; k < nv; k++)
      row = row * rows[v_axes[k]] + coordinate[v_axes[k]];
    (*ids)->ints[p] = tf_fixed(row);
  }
  return NULL;
}

/* By indices computed at run time (torch.gather(x, dim, labels[:, None]), a top-k's positions): with
 * the axis last (onnx_indices.c), y[..., k] = sum over a of x[..., a] one_hot[..., k, a], the poison
 * added (an index outside [-A, A) gives +inf), moved back. The gradient to x is the one-hot's
 * scatter-add; the indices' axes other than `axis` must be the data's. Integer data (token ids: mBART's
 * shift_tokens_right gathers each row's last non-padding token) is gathered in f32 between casts, exact
 * below 2^24 in magnitude. */
static tf_status gather_elements_computed(ox_import *im, const ox_node *node, tf_tensor_id data) {
  tf_tensor_id ids;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  const tf_dtype dtype = ox_dtype_of(im, data);
  if (ox_is_integer_dtype(dtype))
    data = tf_cast(im->graph, data, TF_F32);
  ox_along a;
  TF_RETURN_IF_ERROR(ox_along_last(im, node, data, ids, ox_attr_int(node, "axis", 0), &a));
  tf_dim rows[TF_MAX_RANK];
  for (int32_t d = 0; d < a.rank - 1; d++)
    rows[d] = a.dims[a.perm[d]];
  rows[a.rank - 1] = tf_fixed(1);
  rows[a.rank] = tf_fixed(a.length);
  tf_graph *g = im->graph;
  tf_tensor_id x = tf_reshape(g, a.data, tf_shape_from(rows, a.rank + 1));
  int32_t last = a.rank;
  tf_tensor_id y = tf_reduce(g, TF_OP_SUM, tf_mul(g, x, a.one_hot), &last, 1, false);
  y = tf_add(g, y, ox_dtype_of(im, y) == TF_F32 ? a.poison : tf_cast(g, a.poison, ox_dtype_of(im, y)));
  y = ox_along_back(im, &a, y);
  return ox_set_tensor(im, node, 0, ox_is_integer_dtype(dtype) ? tf_cast(g, y, dtype) : y);
}

tf_status ox_convert_gather_elements(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  tf_tensor_id data;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  const ox_known *index = known_indices(im, node);
  if (!index || index->is_float)
    return gather_elements_computed(im, node, data);
  int32_t rank, out_rank;
  tf_dim dims[TF_MAX_RANK], out_dims[TF_MAX_RANK];
  ox_tensor_dims(im, data, &rank, dims);
  output_dims(im, ox_value_find(im, ox_input(node, 1)), &out_rank, out_dims);
  int64_t axis = ox_attr_int(node, "axis", 0);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank || out_rank != rank || index->rank > rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "GatherElements: axis %" PRId64 " and indices of rank %" PRId32 " for data of rank %" PRId32,
                   ox_attr_int(node, "axis", 0), out_rank, rank);
  int32_t v_axes[TF_MAX_RANK], b_axes[TF_MAX_RANK], nv = 0, nb = 0;
  int64_t out[TF_MAX_RANK], rows[TF_MAX_RANK], n_rows = 1, n_ids = 1;
  for (int32_t d = 0; d < rank; d++) {
    const int32_t di = d - (rank - index->rank);
    const bool varies = d == axis || (di >= 0 && index->shape[di] > 1);
    out[d] = out_dims[d].size;
    rows[d] = dims[d].size;
    if (varies) {
      if (dims[d].symbol >= 0 || out_dims[d].symbol >= 0 || dims[d].size < 0 || out_dims[d].size < 0 ||
          (d != axis && out[d] > rows[d]))
        return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                       "GatherElements whose indices vary along axis %" PRId32 " of symbolic or unknown size", d);
      v_axes[nv++] = d;
      if (!tf_checked_mul_i64(n_rows, rows[d], &n_rows) || !tf_checked_mul_i64(n_ids, out[d], &n_ids) ||
          n_rows > GATHER_ELEMENTS_LIMIT || n_ids > GATHER_ELEMENTS_LIMIT)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "GatherElements over more than 2^24 positions");
    } else {
      if (dims[d].size != out_dims[d].size || dims[d].symbol != out_dims[d].symbol)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                       "GatherElements with indices shorter than the data along axis %" PRId32, d);
      b_axes[nb++] = d;
    }
  }
  ox_known *ids;
  TF_RETURN_IF_ERROR(row_ids(im, node, index, rank, (int32_t)axis, v_axes, nv, out, rows, &ids));
  tf_tensor_id id;
  TF_RETURN_IF_ERROR(ox_known_constant(im, node, node->proto->output[0], ids, &id));
  int32_t perm[TF_MAX_RANK], back[TF_MAX_RANK];
  bool identity = true;
  /* the table [rows, B's elements]: B's one axis, or its product inferred */
  tf_dim table[2] = {tf_fixed(n_rows), nb == 0 ? tf_fixed(1) : nb == 1 ? dims[b_axes[0]] : (tf_dim){-1, -1}};
  tf_dim looked[TF_MAX_RANK];
  for (int32_t i = 0; i < nv; i++) {
    perm[i] = v_axes[i];
    looked[i] = tf_fixed(out[v_axes[i]]);
  }
  for (int32_t i = 0; i < nb; i++) {
    perm[nv + i] = b_axes[i];
    looked[nv + i] = dims[b_axes[i]];
  }
  for (int32_t i = 0; i < rank; i++) {
    back[perm[i]] = i;
    identity = identity && perm[i] == i;
  }
  tf_tensor_id x = identity ? data : tf_transpose(im->graph, data, perm, rank);
  x = tf_embedding(im->graph, id, tf_reshape(im->graph, x, tf_shape_from(table, 2)));
  x = tf_reshape(im->graph, x, tf_shape_from(looked, rank));
  return ox_set_tensor(im, node, 0, identity ? x : tf_transpose(im->graph, x, back, rank));
}
