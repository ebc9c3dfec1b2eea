/* ONNX layout operators: reshapes, transposes, concatenation, slicing, splitting, expanding,
 * casts (Cast, CastLike) and zero pads, which fold when their inputs are known at import time and
 * otherwise add graph ops (the constant and shape operators are in onnx_constants.c, Gather in onnx_gather.c). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/slice_bounds.h"
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

/* Slice of a known value (a shape vector's part: `v.size(-1)` exports as Slice(Shape(v), -1,
 * INT_MAX); Pad's pads reversed by torch's export with step -1), one axis after the other. */
static tf_status fold_slice(ox_import *im, const ox_node *node, const int64_t *starts, const ox_known *ends,
                            const int64_t *axes, const int64_t *steps, int32_t n) {
  const ox_known *value = ox_foldable(im, node, 0);
  ox_known *k = ox_fold_copy(value, value->rank, value->shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int32_t i = 0; i < n; i++) {
    const int64_t axis = axes ? (axes[i] < 0 ? axes[i] + k->rank : axes[i]) : i;
    if (axis < 0 || axis >= k->rank) {
      const int32_t rank = k->rank;
      ox_known_free(k);
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range for rank %" PRId32,
                     axes ? axes[i] : i, rank);
    }
    ox_known *sliced;
    tf_status status = ox_fold_slice(k, (int32_t)axis, starts[i], ends->ints[i].size, steps ? steps[i] : 1, &sliced);
    ox_known_free(k);
    TF_RETURN_IF_ERROR(ox_at(im, node, status));
    k = sliced;
  }
  return ox_set_known(im, node, 0, k);
}

/* The size a slice leaves of an axis of n elements (ONNX's clamping, either direction). */
static int64_t sliced_length(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (step > 0) {
    start = tf_slice_bound(start, n);
    end = tf_slice_bound(end, n);
    return end > start ? (end - start - 1) / step + 1 : 0;
  }
  start = start < 0 ? (start < -n ? -1 : start + n) : (start > n - 1 ? n - 1 : start);
  end = end < 0 ? (end < -n ? -1 : end + n) : (end > n - 1 ? n - 1 : end);
  return start > end ? (start - end - 1) / -step + 1 : 0;
}

/* dims after the slices when every sliced axis is of fixed size (or a symbolic one taken whole):
 * whether some axis is left with no elements. False where that is not known here (the slice's own
 * checks then report any error). */
static bool slices_to_nothing(int32_t rank, tf_dim *dims, const int64_t *starts, const ox_known *ends,
                              const int64_t *axes, const int64_t *steps, int32_t n) {
  bool empty = false;
  for (int32_t i = 0; i < n; i++) {
    int64_t axis = axes ? axes[i] : i;
    axis += axis < 0 ? rank : 0;
    const int64_t step = steps ? steps[i] : 1;
    if (axis < 0 || axis >= rank || step == 0)
      return false;
    const tf_dim end = ends->ints[i];
    if (dims[axis].symbol >= 0) {
      const bool whole = starts[i] == 0 && step == 1 &&
                         ((end.symbol == dims[axis].symbol && end.size == dims[axis].size) ||
                          (end.symbol < 0 && end.size >= OX_SYMBOL_PRIME_MIN));
      if (!whole)
        return false;
      continue;
    }
    if (end.symbol >= 0)
      return false;
    dims[axis] = tf_fixed(sliced_length(dims[axis].size, starts[i], end.size, step));
    empty = empty || dims[axis].size == 0;
  }
  return empty;
}

/* x[a S : b S] along an axis of F S elements, S a symbol (the first batch of a batch stacked F times:
 * TimeSformer's embeddings[:batch_size] of [batch x frames, ...], SimCLR's z[N:] of cat([z1, z2])): x as
 * [.., F, S, ..], rows [a, b) of the F, merged back to [.., (b - a) S, ..]. A start of 0 and an end past
 * the axis are whole multiples too; only step 1. */
static tf_status slice_by_symbol(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, tf_dim start,
                                 tf_dim end, int64_t step, tf_tensor_id *y) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK + 1];
  ox_tensor_dims(im, x, &rank, dims);
  const tf_dim whole = dims[axis];
  const int64_t a = start.symbol < 0 && start.size == 0 ? 0 : start.symbol == whole.symbol ? start.size : -1;
  const int64_t b = end.symbol < 0 && end.size >= INT64_MAX / 2       ? whole.size
                    : end.symbol == whole.symbol && whole.symbol >= 0 ? end.size
                                                                      : -1;
  if (whole.symbol < 0 || step != 1 || a < 0 || b < 0 || a >= b || b > whole.size || rank >= TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a slice by a symbolic start or end along axis %" PRId32
                   " other than whole multiples of its symbol, in steps of 1",
                   axis);
  memmove(dims + axis + 2, dims + axis + 1, sizeof(tf_dim) * (size_t)(rank - axis - 1));
  dims[axis] = tf_fixed(whole.size);
  dims[axis + 1] = (tf_dim){1, whole.symbol};
  tf_graph *g = im->graph;
  const tf_tensor_id rows = tf_slice(g, tf_reshape(g, x, tf_shape_from(dims, rank + 1)), axis, a, b, 1);
  memmove(dims + axis + 1, dims + axis + 2, sizeof(tf_dim) * (size_t)(rank - axis - 1));
  dims[axis] = (tf_dim){b - a, whole.symbol};
  *y = tf_reshape(g, rows, tf_shape_from(dims, rank));
  return ox_graph_error(im, node);
}

tf_status ox_convert_slice(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const bool known = ox_foldable(im, node, 0) != NULL;
  const bool known_vector = known && ox_foldable(im, node, 0)->rank == 1;
  const ox_empty *empty = ox_empty_input(im, node, 0);
  tf_tensor_id x = TF_NO_TENSOR;
  int32_t rank = 1;
  tf_dim dims[TF_MAX_RANK];
  if (empty) {
    rank = empty->rank;
    for (int32_t d = 0; d < rank; d++)
      dims[d] = empty->dims[d];
  } else if (!known) {
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, &rank, dims);
  }
  int64_t starts[TF_MAX_RANK], axes[TF_MAX_RANK], steps[TF_MAX_RANK];
  int32_t n_starts = 0, n_axes = -1, n_steps = -1;
  const ox_known *ends, *start_dims;
  if (im->opset < 10)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Slice before opset 10");
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &start_dims));
  if (start_dims->is_float || start_dims->count > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "starts must be at most %d integers", TF_MAX_RANK);
  n_starts = (int32_t)start_dims->count;
  bool fixed_starts = true;
  for (int32_t i = 0; i < n_starts; i++) {
    starts[i] = start_dims->ints[i].symbol < 0 ? start_dims->ints[i].size : 0; /* symbolic: by_symbol below */
    fixed_starts = fixed_starts && start_dims->ints[i].symbol < 0;
  }
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &ends));
  if (ox_input(node, 3))
    TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 3, axes, TF_MAX_RANK, &n_axes));
  if (ox_input(node, 4))
    TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 4, steps, TF_MAX_RANK, &n_steps));
  if (ends->is_float || ends->count != n_starts || (n_axes >= 0 && n_axes != n_starts) ||
      (n_steps >= 0 && n_steps != n_starts))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "starts, ends, axes and steps differ in length");
  bool fixed_ends = true;
  for (int32_t i = 0; i < n_starts; i++)
    fixed_ends = fixed_ends && ends->ints[i].symbol < 0;
  if (known && fixed_ends && fixed_starts)
    return fold_slice(im, node, starts, ends, n_axes >= 0 ? axes : NULL, n_steps >= 0 ? steps : NULL, n_starts);
  if (known_vector)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic start or end slicing a known value");
  tf_dim sliced[TF_MAX_RANK];
  for (int32_t d = 0; d < rank && !known; d++)
    sliced[d] = dims[d];
  if (!known && ((fixed_starts && slices_to_nothing(rank, sliced, starts, ends, n_axes >= 0 ? axes : NULL,
                                                    n_steps >= 0 ? steps : NULL, n_starts)) ||
                 empty)) /* (a value with no elements sliced has none either) */
    return ox_set_empty(im, node, 0, empty ? empty->dtype : ox_dtype_of(im, x), rank, sliced);
  if (x == TF_NO_TENSOR) { /* a known value sliced up to a symbolic end: as a tensor */
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, &rank, dims);
  }
  tf_tensor_id y = x;
  for (int32_t i = 0; i < n_starts; i++) {
    int64_t axis = n_axes >= 0 ? axes[i] : i;
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range", axis);
    int64_t step = n_steps >= 0 ? steps[i] : 1;
    if (step == 0)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "step 0 on axis %" PRId64, axis);
    const tf_dim start = start_dims->ints[i], end = ends->ints[i];
    if (start.symbol >= 0 || (end.symbol >= 0 && (dims[axis].symbol != end.symbol || dims[axis].size != end.size))) {
      TF_RETURN_IF_ERROR(slice_by_symbol(im, node, y, (int32_t)axis, start, end, step, &y));
      continue;
    }
    if (step < 0) { /* torch.flip: one-element slices, concatenated (onnx_axis_copies.c) */
      if (ends->ints[i].symbol >= 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic end with a negative step");
      TF_RETURN_IF_ERROR(ox_slice_backwards(im, node, y, (int32_t)axis, starts[i], ends->ints[i].size, step, &y));
      continue;
    }
    /* a symbolic end here is the whole axis (x[:, :T] with T the axis' size) */
    y = tf_slice(im->graph, y, (int32_t)axis, starts[i], end.symbol >= 0 ? INT64_MAX : end.size, step);
  }
  return ox_set_tensor(im, node, 0, y);
}

/* Split (nanoGPT's and Hugging Face GPT-2's `qkv.split(width, dim=2)`): each output a slice of x
 * along `axis`; the sizes come from input 1 (opset 13+) or the `split` attribute (before), else the
 * axis is cut into as many equal parts as the node has outputs. */
/* Split along a symbolic axis of F S elements into parts of whole multiples of S (z.split(n) of a batch
 * stacked three times: [3 N] into N, N, N), each by slice_by_symbol; a part of size 0 has no elements. */
static tf_status split_by_symbol(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, tf_dim whole,
                                 int32_t parts) {
  const ox_known *sizes;
  if (im->opset < 13 || !ox_input(node, 1))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "equal parts of symbolic axis %" PRId32 " without split sizes", axis);
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &sizes));
  if (sizes->is_float || sizes->count != parts)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%" PRId64 " split sizes for %" PRId32 " outputs", sizes->count,
                   parts);
  int64_t at = 0; /* in multiples of the symbol */
  for (int32_t i = 0; i < parts; i++) {
    const tf_dim size = sizes->ints[i];
    if (size.symbol < 0 && size.size == 0) {
      int32_t rank;
      tf_dim dims[TF_MAX_RANK];
      ox_tensor_dims(im, x, &rank, dims);
      dims[axis] = tf_fixed(0);
      TF_RETURN_IF_ERROR(ox_set_empty(im, node, i, ox_dtype_of(im, x), rank, dims));
      continue;
    }
    if (size.symbol != whole.symbol)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "split size %" PRId32 " along symbolic axis %" PRId32
                     " is not a whole multiple of its symbol (a size the trace froze: z.split(x.shape[0]) writes the "
                     "batch as a number; z.chunk(k) or slices z[:n] follow it)",
                     i, axis);
    tf_tensor_id part;
    const tf_dim start = at == 0 ? tf_fixed(0) : (tf_dim){at, whole.symbol};
    TF_RETURN_IF_ERROR(slice_by_symbol(im, node, x, axis, start, (tf_dim){at + size.size, whole.symbol}, 1, &part));
    TF_RETURN_IF_ERROR(ox_set_tensor(im, node, i, part));
    at += size.size;
  }
  if (at != whole.size)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "split sizes summing to %" PRId64 " of symbolic axis %" PRId32 " of %" PRId64 " times its symbol",
                   at, axis, whole.size);
  return NULL;
}

tf_status ox_convert_split(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *known = ox_foldable(im, node, 0); /* folded (Funnel's repeat counts) */
  tf_tensor_id x = TF_NO_TENSOR;
  int32_t rank = 0;
  tf_dim dims[TF_MAX_RANK];
  if (known) {
    rank = known->rank;
    for (int32_t d = 0; d < rank; d++)
      dims[d] = tf_fixed(known->shape[d]);
  } else {
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, &rank, dims);
  }
  int64_t axis = ox_attr_int(node, "axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " out of range for rank %" PRId32,
                   ox_attr_int(node, "axis", 0), rank);
  enum { MAX_PARTS = 64 };
  const int32_t parts = (int32_t)node->proto->n_output;
  if (parts < 1 || parts > MAX_PARTS)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 " outputs (1 to %d)", parts, MAX_PARTS);
  const bool fixed = dims[axis].symbol < 0;
  if (!fixed && !known)
    return split_by_symbol(im, node, x, (int32_t)axis, dims[axis], parts);
  int64_t sizes[MAX_PARTS];
  int32_t n = -1;
  if (im->opset >= 13 && ox_input(node, 1))
    TF_RETURN_IF_ERROR(ox_fixed_ints(im, node, 1, sizes, MAX_PARTS, &n));
  else if (im->opset < 13)
    n = ox_attr_ints(node, "split", sizes, MAX_PARTS);
  if (n < 0) { /* equal parts */
    if (!fixed || dims[axis].size % parts != 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "no split sizes, and axis %" PRId64 " (%s%" PRId64 ") is not %" PRId32 " equal parts", axis,
                     fixed ? "" : "a symbol times ", dims[axis].size, parts);
    n = parts;
    for (int32_t i = 0; i < parts; i++)
      sizes[i] = dims[axis].size / parts;
  }
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    if (sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "split size %" PRId64 " of part %" PRId32, sizes[i], i);
  }
  if (n != parts || (fixed && total != dims[axis].size))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "%" PRId32 " split sizes summing to %" PRId64 " for %" PRId32 " outputs of axis %" PRId64
                   " (size %" PRId64 "%s)",
                   n, total, parts, axis, dims[axis].size, fixed ? "" : " times a symbol");
  if (!fixed)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "split sizes along symbolic axis %" PRId64, axis);
  int64_t start = 0;
  for (int32_t i = 0; i < parts; i++) {
    if (known) {
      ox_known *k;
      TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_slice(known, (int32_t)axis, start, start + sizes[i], 1, &k)));
      TF_RETURN_IF_ERROR(ox_set_known(im, node, i, k));
    } else if (sizes[i] == 0) { /* torch.split by sizes of which one is 0 */
      tf_dim part[TF_MAX_RANK];
      memcpy(part, dims, sizeof(tf_dim) * (size_t)rank);
      part[axis] = tf_fixed(0);
      TF_RETURN_IF_ERROR(ox_set_empty(im, node, i, ox_dtype_of(im, x), rank, part));
    } else {
      TF_RETURN_IF_ERROR(ox_set_tensor(im, node, i, tf_slice(im->graph, x, (int32_t)axis, start, start + sizes[i], 1)));
    }
    start += sizes[i];
  }
  return NULL;
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
