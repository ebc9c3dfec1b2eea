/* IsNaN and IsInf (torch.isnan, torch.isinf, torch.isfinite, and torch.nan_to_num, which exports as
 * Where of them) as 0/1 masks (import/onnx_mask.c's convention: f32 tensors of exact 0s and 1s),
 * composed from ops whose NaN behaviour every backend shares, with no op of their own:
 *
 *   not_finite(x) = keep(1, x - x)               x - x is NaN for a NaN and for an infinity, else 0;
 *                                                keep's mask compares with 0, which a NaN is not
 *   isnan(x)      = keep(1, c - c), c = clip(x, -1, 1)   clip keeps a NaN, makes an infinity finite
 *   isinf(x)      = not_finite(x) - isnan(x)
 *   s             = sign(keep(x, isinf(x)))       +1 at +inf, -1 at -inf, 0 elsewhere (ox_inf_sign)
 *   +inf only     = relu(s),  -inf only = relu(-s)   (detect_negative 0, detect_positive 0)
 *
 * onnx_mask.c's Equal takes ox_inf_sign for x == inf and for inf == inf of two tensors.
 *
 * No gradient flows through them (keep passes none to its mask, sign none at all), as PyTorch's. */
#include <math.h>

#include "import/onnx_converters.h"

tf_tensor_id ox_nonzero_of(ox_import *im, const ox_node *node, tf_tensor_id d) {
  return tf_keep(im->graph, ox_scalar(im, node, ox_dtype_of(im, d), 1.0), d);
}

tf_tensor_id ox_nan_mask(ox_import *im, const ox_node *node, tf_tensor_id x) {
  tf_tensor_id c = tf_clip(im->graph, x, -1.0f, 1.0f);
  return ox_nonzero_of(im, node, tf_sub(im->graph, c, c));
}

/* isinf(x): keep(1, x - x) - isnan(x). */
static tf_tensor_id inf_mask(ox_import *im, const ox_node *node, tf_tensor_id x) {
  return tf_sub(im->graph, ox_nonzero_of(im, node, tf_sub(im->graph, x, x)), ox_nan_mask(im, node, x));
}

tf_tensor_id ox_inf_sign(ox_import *im, const ox_node *node, tf_tensor_id x) {
  return tf_unary(im->graph, TF_OP_SIGN, tf_keep(im->graph, x, inf_mask(im, node, x)));
}

/* Input 0 as float data (integer data cast to f32: never NaN nor infinite). */
static tf_status float_input(ox_import *im, const ox_node *node, tf_tensor_id *x) {
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, x));
  const tf_dtype dtype = ox_dtype_of(im, *x);
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16)
    *x = tf_cast(im->graph, *x, TF_F32);
  return NULL;
}

/* Output 0 as the f32 mask `m` (cast from a half type). */
static tf_status set_mask(ox_import *im, const ox_node *node, tf_tensor_id m) {
  if (ox_dtype_of(im, m) != TF_F32)
    m = tf_cast(im->graph, m, TF_F32);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, m);
}

/* A known input: the mask of its values, known too (u8, as ONNX's bool). */
static tf_status fold(ox_import *im, const ox_node *node, bool positive, bool negative, bool nan) {
  const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
  ox_known *k = ox_known_new(false, TF_U8, x->rank, x->shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < x->count; i++) {
    const double v = x->is_float ? x->reals[i] : 0.0;
    k->ints[i] = tf_fixed(nan ? isnan(v) : isinf(v) && (v > 0 ? positive : negative));
  }
  return ox_set_known(im, node, 0, k);
}

tf_status ox_convert_isnan(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (ox_is_known(im, ox_input(node, 0)))
    return fold(im, node, false, false, true);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, &x));
  return set_mask(im, node, ox_nan_mask(im, node, x));
}

tf_status ox_convert_isinf(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const bool positive = ox_attr_int(node, "detect_positive", 1) != 0;
  const bool negative = ox_attr_int(node, "detect_negative", 1) != 0;
  if (ox_is_known(im, ox_input(node, 0)))
    return fold(im, node, positive, negative, false);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, &x));
  tf_graph *g = im->graph;
  tf_tensor_id inf = inf_mask(im, node, x);
  if (!positive || !negative) {
    tf_tensor_id s = ox_inf_sign(im, node, x);
    inf = positive   ? tf_unary(g, TF_OP_RELU, s)
          : negative ? tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_NEG, s))
                     : tf_mul(g, inf, ox_scalar(im, node, ox_dtype_of(im, x), 0.0));
  }
  return set_mask(im, node, inf);
}
