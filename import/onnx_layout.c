/* ONNX layout operators: reshapes, transposes, concatenation, expanding, casts (Cast, CastLike) and zero
 * pads, which fold when their inputs are known at import time and otherwise add graph ops (Slice and Split
 * are in onnx_slice.c, the constant and shape operators in onnx_constants.c, Gather in onnx_gather.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* ---- layout ---- */

tf_status ox_reshape_to(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_dim *dims, int32_t rank) {
  int32_t unknown = 0;
  for (int32_t i = 0; i < rank; i++)
    unknown += dims[i].size == -1 && dims[i].symbol < 0;
  if (unknown > 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "the target shape has %" PRId32 " axes tightfit cannot name (products of symbols, or -1)", unknown);
  return ox_set_tensor(im, node, 0, tf_reshape(im->graph, x, tf_shape_from(dims, rank)));
}

tf_status ox_convert_reshape(ox_import *im, const ox_node *node) {
  const ox_known *shape;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &shape));
  if (shape->is_float || shape->rank != 1 || shape->count > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the shape must be at most %d integers", TF_MAX_RANK);
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
    int64_t target[TF_MAX_RANK], product = 1, infer = -1;
    for (int64_t i = 0; i < shape->count; i++) {
      if (shape->ints[i].symbol >= 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "symbolic reshape of a known value");
      target[i] = shape->ints[i].size == 0 && i < x->rank ? x->shape[i] : shape->ints[i].size;
      if (target[i] == -1 && infer >= 0)
        return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                       "the shape has more than one -1 (axes %" PRId64 " and %" PRId64 ")", infer, i);
      if (target[i] == -1)
        infer = i;
      else if (target[i] < 0 || __builtin_mul_overflow(product, target[i], &product))
        return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                       "the shape's axis %" PRId64 " is %" PRId64 ": sizes are -1, 0 or positive, and their product "
                       "must fit in 64 bits",
                       i, target[i]);
    }
    if (infer >= 0 && product > 0)
      target[infer] = x->count / product;
    ox_known *k = ox_fold_copy(x, (int32_t)shape->count, target);
    if (!k)
      return ox_fail(im, node, TF_ERR_SHAPE, "reshape changes the element count");
    return ox_set_known(im, node, 0, k);
  }
  int32_t in_rank;
  tf_dim in_dims[TF_MAX_RANK], dims[TF_MAX_RANK];
  const ox_empty *empty = ox_empty_input(im, node, 0);
  tf_tensor_id x = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &in_rank, in_dims));
  if (!empty)
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  bool allow_zero = ox_attr_int(node, "allowzero", 0) != 0;
  for (int64_t i = 0; i < shape->count; i++) {
    tf_dim d = shape->ints[i];
    if (d.symbol < 0 && d.size == 0 && !allow_zero)
      d = i < in_rank ? in_dims[i] : d;
    else if (d.symbol < 0 && d.size == -1)
      d = (tf_dim){-1, -1};
    dims[i] = d;
  }
  if (empty)
    return ox_set_empty_shaped(im, node, empty, dims, (int32_t)shape->count);
  return ox_reshape_to(im, node, x, dims, (int32_t)shape->count);
}

tf_dim ox_dims_product(const tf_dim *dims, int32_t from, int32_t to) {
  tf_dim p = tf_fixed(1);
  for (int32_t i = from; i < to; i++)
    if (dims[i].symbol < 0 && dims[i].size == 0)
      return tf_fixed(0);
  for (int32_t i = from; i < to; i++) {
    if (dims[i].symbol >= 0 && p.symbol >= 0)
      return (tf_dim){-1, -1};
    p = (tf_dim){p.size * dims[i].size, dims[i].symbol >= 0 ? dims[i].symbol : p.symbol};
  }
  return p;
}

/* Flatten(x) at `axis` (in range), x a value with no elements: none either. */
static tf_status flatten_empty(ox_import *im, const ox_node *node, const ox_empty *x, int64_t axis) {
  const tf_dim dims[2] = {ox_dims_product(x->dims, 0, (int32_t)axis), ox_dims_product(x->dims, (int32_t)axis, x->rank)};
  return ox_set_empty_shaped(im, node, x, dims, 2);
}

/* Flatten of a known value (BEiT's meshgrid of window coordinates): the same elements as [outer, inner]. */
static tf_status fold_flatten(ox_import *im, const ox_node *node, const ox_known *x) {
  int64_t axis = ox_attr_int(node, "axis", 1), shape[2] = {1, 1};
  if (axis < 0)
    axis += x->rank;
  if (axis < 0 || axis > x->rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, x->rank);
  for (int32_t i = 0; i < x->rank; i++)
    shape[i < axis ? 0 : 1] *= x->shape[i];
  ox_known *k = ox_fold_copy(x, 2, shape);
  return k ? ox_set_known(im, node, 0, k) : ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
}

tf_status ox_convert_flatten(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *known = ox_foldable(im, node, 0);
  if (known)
    return fold_flatten(im, node, known);
  int32_t rank;
  tf_dim in_dims[TF_MAX_RANK], dims[2];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, in_dims));
  int64_t axis = ox_attr_int(node, "axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, rank);
  const ox_empty *empty = ox_empty_input(im, node, 0);
  if (empty)
    return flatten_empty(im, node, empty, axis);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  // [prod(dims[:axis]), prod(dims[axis:])]: a symbol stays named in either part when the rest is fixed
  // (the batch after a transpose: [2, 2, N] flattened at 2 is [4, N], advanced indexing's layout).
  dims[0] = ox_dims_product(in_dims, 0, (int32_t)axis);
  dims[1] = ox_dims_product(in_dims, (int32_t)axis, rank);
  return ox_reshape_to(im, node, x, dims, 2);
}

/* Unsqueeze/Squeeze: axes from the attribute (before opset 13) or input 1. */
static tf_status axes_of(ox_import *im, const ox_node *node, int64_t *axes, int32_t *n) {
  *n = 0;
  if (im->opset >= 13)
    return ox_input(node, 1) ? ox_fixed_ints(im, node, 1, axes, TF_MAX_RANK, n) : NULL;
  *n = ox_attr_ints(node, "axes", axes, TF_MAX_RANK);
  if (*n > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "too many axes");
  if (*n < 0)
    *n = 0;
  return NULL;
}

static tf_status squeeze_like(ox_import *im, const ox_node *node, bool unsqueeze) {
  int64_t axes[TF_MAX_RANK];
  int32_t n;
  TF_RETURN_IF_ERROR(axes_of(im, node, axes, &n));
  const bool known = ox_is_known(im, ox_input(node, 0));
  const ox_empty *empty = ox_empty_input(im, node, 0);
  int32_t rank = 0;
  tf_dim in_dims[TF_MAX_RANK], dims[TF_MAX_RANK];
  tf_tensor_id x = TF_NO_TENSOR;
  const ox_known *k = known ? ox_value_find(im, ox_input(node, 0))->known : NULL;
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, in_dims));
  if (!known && !empty)
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t out_rank = unsqueeze ? rank + n : rank;
  if (out_rank > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "rank %" PRId32 " is over %d", out_rank, TF_MAX_RANK);
  bool marked[TF_MAX_RANK * 2] = {false};
  for (int32_t i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + out_rank : axes[i];
    if (a < 0 || a >= out_rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range", axes[i]);
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
        return ox_fail(im, node, TF_ERR_SHAPE, "cannot squeeze axis %" PRId32 ": its size is not 1", i);
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
      return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    return ox_set_known(im, node, 0, copy);
  }
  if (empty)
    return ox_set_empty(im, node, 0, empty->dtype, m, dims);
  return ox_reshape_to(im, node, x, dims, m);
}

tf_status ox_convert_unsqueeze(ox_import *im, const ox_node *node) { return squeeze_like(im, node, true); }
tf_status ox_convert_squeeze(ox_import *im, const ox_node *node) { return squeeze_like(im, node, false); }

tf_status ox_convert_transpose(ox_import *im, const ox_node *node) {
  int32_t rank;
  tf_dim in_dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, in_dims));
  const bool known = ox_is_known(im, ox_input(node, 0));
  const ox_empty *empty = ox_empty_input(im, node, 0);
  tf_tensor_id x = TF_NO_TENSOR;
  if (!known && !empty)
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int64_t perm64[TF_MAX_RANK];
  int32_t perm[TF_MAX_RANK];
  int32_t n = ox_attr_ints(node, "perm", perm64, TF_MAX_RANK);
  if (n > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "perm is too long");
  for (int32_t i = 0; i < rank; i++)
    perm[i] = n < 0 ? rank - 1 - i : (int32_t)perm64[i];
  if (n >= 0 && n != rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "perm has %" PRId32 " axes for a rank-%" PRId32 " input", n, rank);
  if (known || empty) {
    bool seen[TF_MAX_RANK] = {false};
    for (int32_t i = 0; i < rank; i++) {
      if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
        return ox_fail(im, node, TF_ERR_INVALID_INPUT, "perm is not a permutation of %" PRId32 " axes", rank);
      seen[perm[i]] = true;
    }
  }
  if (empty) {
    tf_dim dims[TF_MAX_RANK];
    for (int32_t i = 0; i < rank; i++)
      dims[i] = in_dims[perm[i]];
    return ox_set_empty(im, node, 0, empty->dtype, rank, dims);
  }
  if (known) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_transpose(ox_value_find(im, ox_input(node, 0))->known, perm, &k)));
    return ox_set_known(im, node, 0, k);
  }
  return ox_set_tensor(im, node, 0, tf_transpose(im->graph, x, perm, rank));
}

/* Concat whose inputs all have no elements: so has its output (its axis the inputs' sizes summed). */
static tf_status concat_of_empty(ox_import *im, const ox_node *node, int64_t axis) {
  ox_empty out = *ox_empty_input(im, node, 0);
  if (axis < 0)
    axis += out.rank;
  if (axis < 0 || axis >= out.rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range for rank %" PRId32, axis, out.rank);
  for (int32_t i = 1; i < node->n_inputs; i++)
    out.dims[axis].size += ox_empty_input(im, node, i)->dims[axis].size;
  return ox_set_empty(im, node, 0, out.dtype, out.rank, out.dims);
}

/* The inputs of no elements that Concat leaves out must still be of the rank of tensor `first` (a
 * file that breaks this is refused, not read around). Their sizes off the axis may differ, as
 * onnxruntime reads them: they add nothing (PyTorch's export of Emformer's attention mask concatenates
 * a (0, 6) block with (2, 8) ones). */
static tf_status empty_parts_fit(ox_import *im, const ox_node *node, tf_tensor_id first) {
  const int32_t rank = ox_rank_of(im, first);
  for (int32_t i = 0; i < node->n_inputs; i++) {
    const ox_empty *e = ox_empty_input(im, node, i);
    if (e && e->rank != rank)
      return ox_fail(im, node, TF_ERR_SHAPE,
                     "input %" PRId32 " '%s' (no elements) does not fit beside the others: rank %" PRId32
                     ", not %" PRId32,
                     i, ox_input(node, i), e->rank, rank);
  }
  return NULL;
}

tf_status ox_convert_concat(ox_import *im, const ox_node *node) {
  int64_t axis = ox_attr_int(node, "axis", 0);
  int32_t n = node->n_inputs;
  if (n < 1 || n > 64)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 " inputs (1 to 64)", n);
  int32_t empty = 0;
  for (int32_t i = 0; i < n; i++) {
    TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
    empty += ox_empty_input(im, node, i) != NULL;
  }
  if (empty == n)
    return concat_of_empty(im, node, axis);
  bool all_known = true;
  for (int32_t i = 0; i < n; i++)
    all_known = all_known && ox_is_known(im, ox_input(node, i));
  if (all_known) {
    const ox_known *parts[64];
    for (int32_t i = 0; i < n; i++)
      parts[i] = ox_value_find(im, ox_input(node, i))->known;
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_concat(parts, n, (int32_t)axis, ox_fold_room(im), &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id ids[64];
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++) /* an input with no elements adds none: left out */
    if (!ox_empty_input(im, node, i))
      TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &ids[m++]));
  if (axis < 0)
    axis += ox_rank_of(im, ids[0]);
  if (empty)
    TF_RETURN_IF_ERROR(empty_parts_fit(im, node, ids[0]));
  return ox_set_tensor(im, node, 0, m == 1 ? ids[0] : tf_concat(im->graph, ids, m, (int32_t)axis));
}

/* Expand (numpy broadcasting both ways: `ids.unsqueeze(0).expand(n, t)`): the target axes where the
 * shape says 1 keep x's size; x's axes the shape does not reach are kept. */
/* Expand of one known number to a fixed shape of at most this many elements stays known (a fill):
 * PyTorch 2.x's causal mask is Trilu(Expand(1, [T, S])), which then folds to a constant. */
#define OX_MAX_FOLDED_FILL ((int64_t)1 << 24)

/* The known fill of Expand(x, shape), x one known number; NULL where a size is symbolic or large. */
static ox_known *expanded_fill(const ox_known *x, const ox_known *shape) {
  int64_t dims[TF_MAX_RANK], count = 1;
  const int32_t rank = x->rank > (int32_t)shape->count ? x->rank : (int32_t)shape->count;
  for (int32_t i = 0; i < rank; i++) {
    const int32_t at = i - (rank - (int32_t)shape->count);
    const tf_dim want = at >= 0 ? shape->ints[at] : tf_fixed(1);
    if (want.symbol >= 0 || want.size < 1 || __builtin_mul_overflow(count, want.size, &count) ||
        count > OX_MAX_FOLDED_FILL)
      return NULL;
    dims[i] = want.size;
  }
  ox_known *k = ox_known_new(x->is_float, x->dtype, rank, dims);
  for (int64_t i = 0; k && i < k->count; i++) {
    if (k->is_float)
      k->reals[i] = x->reals[0];
    else
      k->ints[i] = x->ints[0];
  }
  return k;
}

/* Expand whose input or target has no elements: the output has none either, its sizes x's (rank, dims)
 * broadcast with the target's ({-1, -1} where the target keeps x's size). */
static tf_status expand_empty(ox_import *im, const ox_node *node, int32_t rank, const tf_dim *dims, int32_t out_rank,
                              const tf_dim *target, tf_dtype dtype) {
  tf_dim out[TF_MAX_RANK];
  for (int32_t i = 0; i < out_rank; i++) {
    const int32_t at = i - (out_rank - rank);
    const tf_dim have = at >= 0 ? dims[at] : tf_fixed(1);
    const bool keeps = target[i].symbol < 0 && target[i].size == -1, one = have.symbol < 0 && have.size == 1;
    if (!keeps && !one && (have.symbol != target[i].symbol || have.size != target[i].size))
      return ox_fail(im, node, TF_ERR_SHAPE, "axis %" PRId32 " of the input does not broadcast to the shape's", i);
    out[i] = keeps ? have : target[i];
  }
  return ox_set_empty(im, node, 0, dtype, out_rank, out);
}

tf_status ox_convert_expand(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *shape;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &shape));
  if (shape->is_float || shape->rank != 1 || shape->count > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the shape must be at most %d integers", TF_MAX_RANK);
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *value = ox_value_find(im, ox_input(node, 0))->known;
    ox_known *fill =
        value->count == 1 && (value->is_float || value->ints[0].symbol < 0) ? expanded_fill(value, shape) : NULL;
    if (fill)
      return ox_set_known(im, node, 0, fill);
    int64_t sizes[TF_MAX_RANK];
    bool fixed = true;
    for (int64_t i = 0; i < shape->count; i++) {
      fixed = fixed && shape->ints[i].symbol < 0 && shape->ints[i].size >= 1;
      sizes[i] = shape->ints[i].size;
    }
    if (fixed) { /* a table computed from positions (a rotary embedding's inv_freq): stays known */
      ox_known *k;
      TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_expand(value, (int32_t)shape->count, sizes, ox_fold_room(im), &k)));
      return ox_set_known(im, node, 0, k);
    }
  }
  int32_t rank;
  tf_dim dims[TF_MAX_RANK], target[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, dims));
  const ox_empty *empty = ox_empty_input(im, node, 0);
  tf_tensor_id x = TF_NO_TENSOR;
  if (!empty)
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  bool none = empty != NULL; /* the output has no elements */
  const int32_t out_rank = (int32_t)shape->count > rank ? (int32_t)shape->count : rank;
  const int32_t shape_offset = out_rank - (int32_t)shape->count, x_offset = out_rank - rank;
  for (int32_t i = 0; i < out_rank; i++) {
    const bool in_x = i >= x_offset, in_shape = i >= shape_offset;
    const tf_dim want = in_shape ? shape->ints[i - shape_offset] : tf_fixed(1);
    if (want.symbol < 0 && want.size < 0)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "shape entry %" PRId32 " is %" PRId64, i - shape_offset,
                     want.size);
    const bool keeps = want.symbol < 0 && want.size == 1; /* 1: x's size (or 1 where x lacks the axis) */
    target[i] = keeps && in_x ? (tf_dim){-1, -1} : want;
    none = none || (want.symbol < 0 && want.size == 0);
  }
  if (none)
    return expand_empty(im, node, rank, dims, out_rank, target, empty ? empty->dtype : ox_dtype_of(im, x));
  return ox_set_tensor(im, node, 0, tf_expand(im->graph, x, tf_shape_from(target, out_rank)));
}

/* One symbolic size (a symbol s times m: the count torch's std and var divide by over the batch axis)
 * cast to a float: a tensor the bound plan computes, sum(expand(1, [s])) m, exact below 2^24. */
static tf_status symbolic_size_as_float(ox_import *im, const ox_node *node, const ox_known *k, tf_dtype to) {
  tf_graph *g = im->graph;
  const int32_t axes[1] = {0};
  tf_tensor_id ones = tf_expand(g, ox_scalar(im, node, TF_F32, 1.0), TF_SHAPE(tf_sym(k->ints[0].symbol)));
  tf_tensor_id y = tf_reduce(g, TF_OP_SUM, ones, axes, 1, false);
  if (k->ints[0].size != 1)
    y = tf_mul(g, y, ox_scalar(im, node, TF_F32, (double)k->ints[0].size));
  if (k->rank > 0)
    y = tf_reshape(g, y, TF_SHAPE(tf_fixed(1)));
  if (to == TF_F16 || to == TF_BF16)
    y = tf_cast(g, y, to);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  TF_RETURN_IF_ERROR(ox_set_tensor(im, node, 0, y));
  ox_value *v = ox_value_find(im, node->proto->output[0]);
  if (v && k->rank == 0 && to == TF_F32) { /* torch.arange(x.shape[1], dtype=torch.float) */
    v->is_float_size = true;
    v->float_size = k->ints[0];
  }
  return NULL;
}

/* Input 0 of `node` cast to ONNX type `to_onnx` (Cast's `to`, CastLike's second input's type). */
static tf_status cast_to(ox_import *im, const ox_node *node, int64_t to_onnx) {
  tf_dtype to;
  if (!ox_dtype((int32_t)to_onnx, &to))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "cast to %s (%" PRId64 ")", ox_dtype_name((int32_t)to_onnx), to_onnx);
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
    const bool to_float = to == TF_F32 || to == TF_F16 || to == TF_BF16;
    if (to_float && !x->is_float && x->count == 1 && x->rank <= 1 && x->ints[0].symbol >= 0)
      return symbolic_size_as_float(im, node, x, to);
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_cast(x, to, &k)));
    return ox_set_known(im, node, 0, k);
  }
  if (to_onnx == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) /* nonzero, not a wrapping or saturating cast */
    return ox_convert_mask_cast(im, node);
  if (to_onnx == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && !im->options->narrow_float64)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "cast of data to DOUBLE: tightfit has no float64 data (constants are narrowed to f32); "
                   "`tightfit import --narrow-float64` computes it in f32 (torch.onnx's TorchScript exporter "
                   "writes such casts for torch.where(m, 0.0, -inf) of two Python numbers and torch.nan_to_num, "
                   "which PyTorch computes in f32)");
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  double fill;
  tf_tensor_info info;
  if (ox_dtype_of(im, x) != to && to != TF_U8 && ox_fill_value(im, x, &fill) && tf_graph_tensor(im->graph, x, &info)) {
    /* a constant fill stays one (lengths made from the sizes, cast to the LSTM's int32) */
    const bool to_integer = to == TF_I32 || to == TF_I64;
    const tf_tensor_id y = tf_graph_constant(im->graph, node->proto->output[0], to, info.declared,
                                             tf_init_make(TF_INIT_FILL, to_integer ? trunc(fill) : fill, 0));
    TF_RETURN_IF_ERROR(ox_graph_error(im, node));
    return ox_set_tensor(im, node, 0, y);
  }
  return ox_set_tensor(im, node, 0, ox_dtype_of(im, x) == to ? x : tf_cast(im->graph, x, to));
}

tf_status ox_convert_cast(ox_import *im, const ox_node *node) {
  int64_t to_onnx = ox_attr_int(node, "to", 0);
  // PyTorch 2.x's TorchScript exporter casts a scalar to a bf16 operand's type as Cast(to=15): torch's
  // own number for BFloat16, which ONNX numbers COMPLEX128 (pytorch/pytorch#158658). That exporter
  // writes no complex types, so from PyTorch 15 means bf16 (BFLOAT16 is 16).
  const char *producer = im->model->producer_name;
  if (to_onnx == ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128 && producer && strcmp(producer, "pytorch") == 0)
    to_onnx = ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
  return cast_to(im, node, to_onnx);
}

/* The ONNX type the model declares for value `name` (a graph input, an initializer, a value_info),
 * or 0. */
static int32_t declared_type(const ox_import *im, const char *name) {
  const Onnx__GraphProto *g = im->onnx;
  const Onnx__ValueInfoProto *const *lists[] = {(const Onnx__ValueInfoProto *const *)g->input,
                                                (const Onnx__ValueInfoProto *const *)g->value_info};
  const size_t counts[] = {g->n_input, g->n_value_info};
  for (size_t l = 0; l < 2; l++)
    for (size_t i = 0; i < counts[l]; i++) {
      const Onnx__ValueInfoProto *info = lists[l][i];
      if (info->name && strcmp(info->name, name) == 0 && info->type &&
          info->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && info->type->tensor_type)
        return info->type->tensor_type->elem_type;
    }
  for (size_t i = 0; i < g->n_initializer; i++)
    if (g->initializer[i]->name && strcmp(g->initializer[i]->name, name) == 0)
      return g->initializer[i]->data_type;
  return 0;
}

/* The ONNX type of value `name`, which CastLike casts to: as declared, else as its producer makes it
 * (a comparison or logic op: BOOL, whose data this importer holds as an f32 0/1 mask; Cast: its
 * `to`), else its tensor's or known value's own type. 0 where none is found. */
static int32_t like_type(ox_import *im, const char *name) {
  int32_t declared = declared_type(im, name);
  if (declared)
    return declared;
  static const char *const boolean_ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
                                            "And",   "Or",   "Xor",     "IsNaN",       "IsInf"};
  const ox_node *producer = ox_producer(im, name);
  for (size_t i = 0; producer && i < sizeof(boolean_ops) / sizeof(boolean_ops[0]); i++)
    if (strcmp(producer->proto->op_type, boolean_ops[i]) == 0)
      return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  if (producer && strcmp(producer->proto->op_type, "Cast") == 0)
    return (int32_t)ox_attr_int(producer, "to", 0);
  const ox_value *v = ox_value_find(im, name);
  const tf_dtype dtype = !v                          ? TF_DTYPE_COUNT
                         : v->known                  ? v->known->dtype
                         : v->tensor != TF_NO_TENSOR ? ox_dtype_of(im, v->tensor)
                                                     : TF_DTYPE_COUNT;
  switch (dtype) {
  case TF_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  case TF_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
  case TF_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
  case TF_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  case TF_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
  case TF_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
  default: return 0;
  }
}

/* CastLike (opset 15): input 0 cast to the type of input 1 (PyTorch 2.x's dynamo exporter writes it
 * for `x.type_as(y)` and its scalars). */
tf_status ox_convert_cast_like(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const int32_t to_onnx = like_type(im, ox_input(node, 1));
  if (!to_onnx)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "CastLike: the type of input '%s' is not known", ox_input(node, 1));
  return cast_to(im, node, to_onnx);
}

/* Pad's constant value: input 2 (opset 11+, a known scalar) or the `value` attribute; 0 when absent. */
static tf_status pad_value(ox_import *im, const ox_node *node, double *value) {
  *value = im->opset >= 11 ? 0 : ox_attr_float(node, "value", 0);
  if (im->opset < 11 || !ox_input(node, 2))
    return NULL;
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &k));
  if (k->count != 1 || (!k->is_float && k->ints[0].symbol >= 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a constant value that is not one number");
  *value = k->is_float ? k->reals[0] : (double)k->ints[0].size;
  return NULL;
}

/* x with `before` and `after` elements of `value` on `axis` (each >= 0): a concat with constants
 * expanded to x's other sizes (the batch's symbolic one too). */
tf_tensor_id ox_pad_axis(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t before,
                         int64_t after, double value) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  tf_tensor_id parts[3];
  int32_t n = 0;
  if (before == 0 && after == 0)
    return x;
  const tf_tensor_id fill = ox_scalar(im, node, ox_dtype_of(im, x), value);
  for (int32_t side = 0; side < 2; side++) {
    if (side == 1)
      parts[n++] = x;
    const int64_t width = side == 0 ? before : after;
    if (width > 0) {
      dims[axis] = tf_fixed(width);
      parts[n++] = tf_expand(im->graph, fill, tf_shape_from(dims, rank));
    }
  }
  return tf_concat(im->graph, parts, n, axis);
}

/* The widest pad or crop read (the fuzzer's INT64_MIN crop had no negation). */
#define PAD_LIMIT (INT64_C(1) << 31)

/* Pad's mode attribute: constant (the default), reflect, edge, or wrap (opset 19). */
static tf_status pad_mode(ox_import *im, const ox_node *node, ox_pad_mode *mode) {
  static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
  for (int32_t m = 0; m < 4; m++)
    if (ox_attr_is(node, "mode", "constant", names[m])) {
      *mode = (ox_pad_mode)m;
      return m == OX_PAD_WRAP && im->opset < 19 ? ox_fail(im, node, TF_ERR_INVALID_INPUT, "mode wrap before opset 19")
                                                : NULL;
    }
  return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a mode other than constant, reflect, edge or wrap");
}

/* Pad: in constant mode (MobileBERT's trigram embeddings pad the sequence with a zero row) negative
 * pads crop (a slice), positive ones add constants (ox_pad_axis); in reflect, edge and wrap modes
 * (nn.ReflectionPad2d, nn.ReplicationPad2d) positive pads add copies of x's elements
 * (onnx_axis_copies.c). Zero Pads before an avg_pool2d and convolution pads are the patterns'
 * (onnx_patterns.c). */
tf_status ox_convert_pad(ox_import *im, const ox_node *node) {
  int64_t pads[2 * TF_MAX_RANK];
  int32_t n = 0;
  if (im->opset >= 11)
    TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 1, pads, 2 * TF_MAX_RANK, &n));
  else if ((n = ox_attr_ints(node, "pads", pads, 2 * TF_MAX_RANK)) > 2 * TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "too many pads");
  ox_pad_mode mode;
  TF_RETURN_IF_ERROR(pad_mode(im, node, &mode));
  if (im->opset >= 18 && ox_input(node, 3))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "an axes input (pads for every axis only)");
  double value;
  TF_RETURN_IF_ERROR(pad_value(im, node, &value));
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank = ox_rank_of(im, x);
  if (n != 2 * rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%" PRId32 " pads for a rank-%" PRId32 " input (two per axis)", n,
                   rank);
  for (int32_t axis = 0; axis < rank; axis++) {
    const int64_t before = pads[axis], after = pads[rank + axis];
    if (before < -PAD_LIMIT || before > PAD_LIMIT || after < -PAD_LIMIT || after > PAD_LIMIT)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                     "pads %" PRId64 " and %" PRId64 " on axis %" PRId32 ": each must be within +-2^31", before, after,
                     axis);
    if (mode != OX_PAD_CONSTANT) {
      if (before < 0 || after < 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a negative pad on axis %" PRId32 " in a mode other than constant",
                       axis);
      TF_RETURN_IF_ERROR(ox_pad_copies(im, node, x, axis, before, after, mode, &x));
      continue;
    }
    if (before < 0 || after < 0) {
      int32_t r;
      tf_dim dims[TF_MAX_RANK];
      ox_tensor_dims(im, x, &r, dims);
      if (dims[axis].symbol >= 0 && after < 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "cropping the end of symbolic axis %" PRId32, axis);
      x = tf_slice(im->graph, x, axis, before < 0 ? -before : 0, after < 0 ? dims[axis].size + after : INT64_MAX, 1);
    }
    x = ox_pad_axis(im, node, x, axis, before > 0 ? before : 0, after > 0 ? after : 0, value);
  }
  return ox_set_tensor(im, node, 0, x);
}
