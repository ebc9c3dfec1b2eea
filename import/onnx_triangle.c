/* ONNX Trilu: the lower (upper=0) or upper (upper=1, the default) triangle of the last two axes, from
 * diagonal k (input 1, default 0: j - i <= k for the lower, j - i >= k for the upper), the rest zero.
 * PyTorch 2.x exports scaled_dot_product_attention(is_causal=True) with its causal mask computed as
 * Where(Equal(Trilu(Expand(1, [T, S]), upper=0), 0), -inf, 0): on a known value Trilu folds, and the
 * mask becomes the constant PyTorch 1.13 exports. On data whose last two axes are fixed it is the
 * data times a constant 0/1 triangle (exact for finite values; an infinity outside the triangle gives
 * NaN where Trilu gives 0); u8 data (a bool mask), i32 and i64 in f32 between casts. */
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The most elements of the 0/1 triangle that Trilu of data multiplies by (a 4096 x 4096 mask). */
#define OX_MAX_TRIANGLE ((int64_t)1 << 24)

/* Whether element (row, column) lies in the kept triangle. */
static bool kept(int64_t row, int64_t column, int64_t k, bool upper) {
  return upper ? column - row >= k : column - row <= k;
}

/* x with the elements outside the triangle zeroed, each of its [rows, columns] matrices. */
static ox_known *fold(const ox_known *x, int64_t k, bool upper) {
  ox_known *out = ox_known_new(x->is_float, x->dtype, x->rank, x->shape);
  if (!out)
    return NULL;
  const int64_t rows = x->shape[x->rank - 2], columns = x->shape[x->rank - 1];
  for (int64_t i = 0; i < x->count; i++) {
    const int64_t at = columns ? i % (rows * columns) : 0, row = columns ? at / columns : 0;
    const bool keep = kept(row, columns ? at % columns : 0, k, upper);
    if (x->is_float)
      out->reals[i] = keep ? x->reals[i] : 0.0;
    else
      out->ints[i] = keep ? x->ints[i] : tf_fixed(0);
  }
  return out;
}

/* A rows x columns graph constant of 1s inside the triangle from diagonal k (upper or lower), 0s
 * outside, named after the node's output; of `dtype` (a half constant: its f32 values cast where read). */
static tf_status triangle_constant(ox_import *im, const ox_node *node, int64_t rows, int64_t columns, int64_t k,
                                   bool upper, tf_dtype dtype, tf_tensor_id *out) {
  const int64_t shape[2] = {rows, columns};
  ox_known *ones = ox_known_new(true, TF_F32, 2, shape);
  if (!ones)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < ones->count; i++)
    ones->reals[i] = 1.0;
  ox_known *triangle = fold(ones, k, upper);
  ox_known_free(ones);
  if (!triangle)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  triangle->dtype = dtype;
  char name[300];
  snprintf(name, sizeof(name), "%s.triangle", node->proto->output[0]);
  return ox_known_constant(im, node, name, triangle, out);
}

tf_status ox_convert_trilu(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const int64_t upper = ox_attr_int(node, "upper", 1);
  if (upper != 0 && upper != 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "upper %" PRId64 " (0 or 1)", upper);
  int64_t k = 0;
  if (ox_input(node, 1)) {
    const ox_known *diagonal;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &diagonal));
    if (diagonal->count != 1 || diagonal->is_float || diagonal->ints[0].symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the diagonal k must be one fixed integer");
    k = diagonal->ints[0].size;
  }
  const char *name = ox_input(node, 0);
  if (ox_is_known(im, name)) {
    const ox_known *x = ox_value_find(im, name)->known;
    if (x->rank < 2)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a rank-%" PRId32 " input (at least 2)", x->rank);
    if (ox_known_has_symbol(x))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a known input holding symbolic sizes");
    ox_known *out = fold(x, k, upper == 1);
    if (!out)
      return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    return ox_set_known(im, node, 0, out);
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank < 2)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a rank-%" PRId32 " input (at least 2)", rank);
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16 && !ox_is_integer_dtype(dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input '%s' is %s data (only f32, f16, bf16, i32, i64 or u8 data)",
                   name, tf_dtype_name(dtype));
  const tf_dim rows = dims[rank - 2], columns = dims[rank - 1];
  if (rows.symbol >= 0 || columns.symbol >= 0 || rows.size < 0 || columns.size < 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "input '%s' has symbolic last two axes (a triangle of data needs fixed sizes)", name);
  if (rows.size > 0 && columns.size > OX_MAX_TRIANGLE / rows.size)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a %" PRId64 " x %" PRId64 " triangle of data (at most %" PRId64 " elements)", rows.size,
                   columns.size, OX_MAX_TRIANGLE);
  /* A bool mask (Gemma 2's sliding window, tril(ones_like(mask))) in f32, exactly; integers too, exact
   * below 2^24 in magnitude (their product by 0 or 1). */
  const tf_dtype work = ox_is_integer_dtype(dtype) ? TF_F32 : dtype;
  tf_tensor_id mask;
  TF_RETURN_IF_ERROR(triangle_constant(im, node, rows.size, columns.size, k, upper == 1, work, &mask));
  tf_tensor_id y = tf_mul(im->graph, work == dtype ? x : tf_cast(im->graph, x, work), mask);
  return ox_set_tensor(im, node, 0, work == dtype ? y : tf_cast(im->graph, y, dtype));
}

/* real += value and whole += count; false when the integer sum leaves 64 bits. */
static bool add_to(double *real, int64_t *whole, double value, int64_t count) {
  *real += value;
  return !__builtin_add_overflow(*whole, count, whole);
}

/* CumSum of a known value along `axis`: running sums in order (ONNX exclusive, reverse); NULL when
 * out of memory or when an integer sum leaves 64 bits. */
static ox_known *fold_cumsum(const ox_known *x, int32_t axis, bool exclusive, bool reverse) {
  ox_known *out = ox_known_new(x->is_float, x->dtype, x->rank, x->shape);
  if (!out)
    return NULL;
  int64_t inner = 1;
  for (int32_t d = axis + 1; d < x->rank; d++)
    inner *= x->shape[d];
  const int64_t length = x->shape[axis], outer = length > 0 && inner > 0 ? x->count / (length * inner) : 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double real = 0;
      int64_t whole = 0;
      for (int64_t step = 0; step < length; step++) {
        const int64_t at = (o * length + (reverse ? length - 1 - step : step)) * inner + i;
        const double value = x->is_float ? x->reals[at] : 0;
        const int64_t count = x->is_float ? 0 : x->ints[at].size;
        if (!exclusive && !add_to(&real, &whole, value, count))
          goto overflow;
        if (x->is_float)
          out->reals[at] = real;
        else
          out->ints[at] = tf_fixed(whole);
        if (exclusive && !add_to(&real, &whole, value, count))
          goto overflow;
      }
    }
  return out;
overflow:
  ox_known_free(out);
  return NULL;
}

/* ONNX CumSum (opset 11+; axis a known integer; exclusive, reverse). A known value folds. On data,
 * along an axis of fixed length L (L x L at most OX_MAX_TRIANGLE; another axis than the last swapped
 * with it by a transpose, and back; a vector as one row): x times a constant 0/1
 * triangle (y[j] = sum over i of x[i] U[i, j]), which is exact for whole numbers below 2^24 (masks
 * and positions: RoBERTa's and OPT's position ids); float data is summed in the product's order,
 * not one by one. Integer data is summed in f32 between casts. */
tf_status ox_convert_cumsum(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *axis_value;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &axis_value));
  if (axis_value->count != 1 || axis_value->is_float || axis_value->ints[0].symbol >= 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the axis must be one fixed integer");
  const bool exclusive = ox_attr_int(node, "exclusive", 0) != 0, reverse = ox_attr_int(node, "reverse", 0) != 0;
  const char *name = ox_input(node, 0);
  int64_t axis = axis_value->ints[0].size;
  if (ox_is_known(im, name)) {
    const ox_known *x = ox_value_find(im, name)->known;
    if (axis < -x->rank || axis >= x->rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, x->rank);
    if (ox_known_has_symbol(x))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a known input holding symbolic sizes");
    ox_known *out = fold_cumsum(x, (int32_t)(axis < 0 ? axis + x->rank : axis), exclusive, reverse);
    return out ? ox_set_known(im, node, 0, out)
               : ox_fail(im, node, TF_ERR_UNSUPPORTED, "running sums that int64 cannot hold, or no memory");
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " input", axis, rank);
  const tf_dim length = dims[axis];
  if (length.symbol >= 0 || length.size < 1 || length.size > OX_MAX_TRIANGLE / length.size)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "CumSum of data along an axis that is symbolic or longer than 4096 (the triangle it multiplies by)");
  const tf_dtype dtype = ox_dtype_of(im, x);
  const bool integer = dtype == TF_I32 || dtype == TF_I64; /* u8 sums wrap modulo 256: refused */
  if (!integer && dtype != TF_F32)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "CumSum of %s data (only i32, i64 or f32 data)", tf_dtype_name(dtype));
  /* U[i, j] = 1 where x[i] counts towards y[j]: i <= j (i < j exclusive); reversed, i >= j (i > j) */
  tf_tensor_id sums;
  TF_RETURN_IF_ERROR(triangle_constant(im, node, length.size, length.size,
                                       reverse ? (exclusive ? -1 : 0) : (exclusive ? 1 : 0), !reverse, TF_F32, &sums));
  /* another axis is swapped with the last one (and back); a vector is one row */
  tf_graph *g = im->graph;
  int32_t swap[TF_MAX_RANK];
  for (int32_t i = 0; i < rank; i++)
    swap[i] = i == axis ? rank - 1 : i == rank - 1 ? (int32_t)axis : i;
  tf_tensor_id rows = rank == 1          ? tf_reshape(g, x, TF_SHAPE(tf_fixed(1), length))
                      : axis != rank - 1 ? tf_transpose(g, x, swap, rank)
                                         : x;
  tf_tensor_id y = tf_matmul(g, integer ? tf_cast(g, rows, TF_F32) : rows, sums, false, false);
  if (integer)
    y = tf_cast(g, y, dtype);
  y = rank == 1 ? tf_reshape(g, y, TF_SHAPE(length)) : axis != rank - 1 ? tf_transpose(g, y, swap, rank) : y;
  return ox_set_tensor(im, node, 0, y);
}
