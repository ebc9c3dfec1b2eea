/* ONNX's Slice and Split: of known values folded; of data one tf_slice per axis (negative steps by
 * onnx_axis_copies.c), a slice that selects nothing a value with no elements (onnx_empty.c), and a start
 * or end at whole multiples of the symbol of an axis of k N elements (a batch stacked k times) as whole
 * rows of [k, N] (slice_by_symbol). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/slice_bounds.h"
#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

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
