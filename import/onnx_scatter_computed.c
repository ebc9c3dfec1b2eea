/* ScatterND of data by indices computed at run time, reduction none or add: what torch exports for
 * `out.index_put_((idx,), v, accumulate=...)` and `out[idx] = v` with an index tensor (a mixture of
 * experts' tokens summed back into place, counts added per class). The k indexed axes of data
 * [A_0, ..., A_k-1, R...] (of fixed sizes) are flattened into one of P positions, each index tuple
 * becomes one flat position (its components wrapped, onnx_indices.c, and combined in f32, exact below
 * 2^24), and with the K tuples one-hot over P (onehot [K, P]) and the updates as [K, R]:
 *
 *   put      onehot^T @ updates                          [P, R]
 *   add      data + put
 *   none     data (1 - min(1, hits)) + put / max(1, hits)     hits: sum over k of onehot
 *            (into zeros: put, which index_put_(accumulate=True) exports as: Add(x, ScatterND(zeros, ...)))
 *
 * plus the poison of every tuple (+inf in the whole output where an index lies outside its axis: no
 * write lost unnoticed). The gradient is PyTorch's: the data's passes where nothing was written (none)
 * or everywhere (add), the updates' is the output's gradient gathered at their positions. Equal tuples
 * under reduction none into data other than zeros write the mean of their updates, each update's gradient still the
 * whole output gradient there (ox_mean_of_writes): PyTorch's when their values are equal (a batch given twice), and one
 * defined answer where ONNX and PyTorch leave it open (PyTorch keeps one of them). */
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"

/* The operands' shapes: data [A_0..A_k-1, R...], indices [U..., k], updates [U..., R...]. */
typedef struct scatter_shapes {
  int32_t data_rank, index_rank, k;
  tf_dim data[TF_MAX_RANK], index[TF_MAX_RANK];
  int64_t positions, row; /* P = A_0 x .. x A_k-1, R's elements */
} scatter_shapes;

static tf_status shapes_of(ox_import *im, const ox_node *node, tf_tensor_id data, tf_tensor_id ids,
                           tf_tensor_id updates, scatter_shapes *s) {
  int32_t update_rank;
  tf_dim update[TF_MAX_RANK];
  ox_tensor_dims(im, data, &s->data_rank, s->data);
  ox_tensor_dims(im, ids, &s->index_rank, s->index);
  ox_tensor_dims(im, updates, &update_rank, update);
  const tf_dim depth = s->index_rank > 0 ? s->index[s->index_rank - 1] : tf_fixed(0);
  if (depth.symbol >= 0 || depth.size < 1 || depth.size > s->data_rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "ScatterND: index tuples of %" PRId64 " into data of rank %" PRId32,
                   depth.size, s->data_rank);
  s->k = (int32_t)depth.size;
  const int32_t q = s->index_rank - 1;
  bool match = update_rank == q + s->data_rank - s->k;
  for (int32_t d = 0; match && d < update_rank; d++) {
    const tf_dim want = d < q ? s->index[d] : s->data[s->k + d - q];
    match = update[d].size == want.size && update[d].symbol == want.symbol;
  }
  if (!match)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "ScatterND: updates that do not match the indices and the data");
  s->positions = s->row = 1;
  for (int32_t d = 0; d < s->data_rank; d++) {
    if (s->data[d].symbol >= 0 || s->data[d].size < 1)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "ScatterND by computed indices into data whose axis %" PRId32 " is of symbolic or no size", d);
    if (d < s->k)
      s->positions *= s->data[d].size;
    else
      s->row *= s->data[d].size;
  }
  if (s->positions >= OX_INDEX_EXACT_LIMIT)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "ScatterND by computed indices into %" PRId64 " positions (fewer than 2^24)", s->positions);
  return NULL;
}

/* The flat position of each of the K tuples of `ids` (f32 [K]) and their poison (f32 [K]). */
static tf_status flat_positions(ox_import *im, const ox_node *node, tf_tensor_id ids, const scatter_shapes *s,
                                tf_tensor_id *flat, tf_tensor_id *poison) {
  tf_graph *g = im->graph;
  const tf_dim tuples = {-1, -1}; /* K: the product of the indices' leading axes */
  *flat = *poison = TF_NO_TENSOR;
  for (int32_t j = 0; j < s->k; j++) {
    tf_tensor_id part = tf_reshape(g, tf_slice(g, ids, s->index_rank - 1, j, j + 1, 1), TF_SHAPE(tuples));
    tf_tensor_id wrapped, bad;
    TF_RETURN_IF_ERROR(ox_wrapped_indices(im, node, part, s->data[j].size, &wrapped, &bad));
    *flat = *flat == TF_NO_TENSOR
                ? wrapped
                : tf_add(g, tf_mul(g, *flat, ox_scalar(im, node, TF_F32, (double)s->data[j].size)), wrapped);
    *poison = *poison == TF_NO_TENSOR ? bad : tf_add(g, *poison, bad);
  }
  return ox_graph_error(im, node);
}

bool ox_is_zero_fill(ox_import *im, const ox_node *node, int32_t i) {
  const ox_value *v = ox_value_find(im, ox_input(node, i));
  if (v && v->known) {
    for (int64_t j = 0; j < v->known->count; j++)
      if (v->known->is_float ? v->known->reals[j] != 0 : v->known->ints[j].size != 0 || v->known->ints[j].symbol >= 0)
        return false;
    return true;
  }
  double fill;
  return v && ox_fill_value(im, v->tensor, &fill) && fill == 0;
}

tf_tensor_id ox_mean_of_writes(ox_import *im, tf_tensor_id put, tf_tensor_id hits, tf_tensor_id kept) {
  tf_graph *g = im->graph;
  tf_tensor_id mean = tf_div(g, put, tf_add(g, hits, kept)); /* max(1, hits): hits are whole numbers */
  return tf_add(g, put, tf_unary(g, TF_OP_STOP_GRADIENT, tf_sub(g, mean, put)));
}

tf_status ox_scatter_nd_computed(ox_import *im, const ox_node *node) {
  const bool add = ox_attr_is(node, "reduction", "none", "add");
  if (!add && !ox_attr_is(node, "reduction", "none", "none"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "ScatterND of data with reduction mul, max or min (only none and add)");
  const bool zeros = ox_is_zero_fill(im, node, 0); /* before its graph tensor is made */
  tf_tensor_id data, ids, updates;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &data));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &ids));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &updates));
  if (ox_dtype_of(im, data) != TF_F32 || ox_dtype_of(im, updates) != TF_F32)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ScatterND by computed indices of %s data (only f32)",
                   tf_dtype_name(ox_dtype_of(im, data)));
  scatter_shapes s;
  TF_RETURN_IF_ERROR(shapes_of(im, node, data, ids, updates, &s));
  tf_tensor_id flat, poison, one_hot;
  TF_RETURN_IF_ERROR(flat_positions(im, node, ids, &s, &flat, &poison));
  TF_RETURN_IF_ERROR(ox_one_hot_of(im, node, flat, s.positions, &one_hot)); /* [K, P] */
  tf_graph *g = im->graph;
  const tf_dim tuples = {-1, -1};
  tf_tensor_id rows = tf_reshape(g, updates, TF_SHAPE(tuples, tf_fixed(s.row)));
  tf_tensor_id put = tf_matmul(g, one_hot, rows, true, false); /* [P, R] */
  tf_tensor_id table = tf_reshape(g, data, TF_SHAPE(tf_fixed(s.positions), tf_fixed(s.row)));
  tf_tensor_id y;
  if (add) {
    y = tf_add(g, table, put);
  } else {
    int32_t k_axis = 0;
    tf_tensor_id hits = tf_reduce(g, TF_OP_SUM, one_hot, &k_axis, 1, false); /* [P] */
    tf_tensor_id kept = tf_unary(g, TF_OP_RELU, tf_sub(g, ox_scalar(im, node, TF_F32, 1.0), hits));
    kept = tf_reshape(g, kept, TF_SHAPE(tf_fixed(s.positions), tf_fixed(1)));
    hits = tf_reshape(g, hits, TF_SHAPE(tf_fixed(s.positions), tf_fixed(1)));
    y = tf_add(g, tf_mul(g, table, kept), zeros ? put : ox_mean_of_writes(im, put, hits, kept));
  }
  int32_t all = 0;
  y = tf_add(g, y, tf_reduce(g, TF_OP_SUM, poison, &all, 1, false));
  y = tf_reshape(g, y, tf_shape_from(s.data, s.data_rank));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, y);
}
