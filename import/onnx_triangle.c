/* ONNX Trilu: the lower (upper=0) or upper (upper=1, the default) triangle of the last two axes, from
 * diagonal k (input 1, default 0: j - i <= k for the lower, j - i >= k for the upper), the rest zero.
 * PyTorch 2.x exports scaled_dot_product_attention(is_causal=True) with its causal mask computed as
 * Where(Equal(Trilu(Expand(1, [T, S]), upper=0), 0), -inf, 0): on a known value Trilu folds, and the
 * mask becomes the constant PyTorch 1.13 exports. On data whose last two axes are fixed it is the
 * data times a constant 0/1 triangle (exact for finite values; an infinity outside the triangle gives
 * NaN where Trilu gives 0). */
#include <inttypes.h>
#include <stdio.h>

#include "import/onnx_converters.h"

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
    for (int64_t i = 0; i < x->count && !x->is_float; i++)
      if (x->ints[i].symbol >= 0)
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
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input '%s' is %s data (only f32, f16 or bf16 data)", name,
                   tf_dtype_name(dtype));
  const tf_dim rows = dims[rank - 2], columns = dims[rank - 1];
  if (rows.symbol >= 0 || columns.symbol >= 0 || rows.size < 0 || columns.size < 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "input '%s' has symbolic last two axes (a triangle of data needs fixed sizes)", name);
  if (rows.size > 0 && columns.size > OX_MAX_TRIANGLE / rows.size)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a %" PRId64 " x %" PRId64 " triangle of data (at most %" PRId64 " elements)", rows.size,
                   columns.size, OX_MAX_TRIANGLE);
  const int64_t shape[2] = {rows.size, columns.size};
  ox_known *ones = ox_known_new(true, TF_F32, 2, shape);
  if (!ones)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < ones->count; i++)
    ones->reals[i] = 1.0;
  ox_known *triangle = fold(ones, k, upper == 1);
  ox_known_free(ones);
  if (!triangle)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  triangle->dtype = dtype; /* a half constant: its f32 values cast where read */
  char mask_name[300];
  snprintf(mask_name, sizeof(mask_name), "%s.triangle", node->proto->output[0]);
  tf_tensor_id mask;
  TF_RETURN_IF_ERROR(ox_known_constant(im, node, mask_name, triangle, &mask));
  return ox_set_tensor(im, node, 0, tf_mul(im->graph, x, mask));
}
