/* Pow whose exponent is data, or a constant of several values (torch.pow(x, p) of a learned p: GeM
 * pooling's; x ** y of two tensors), composed from ops every backend has, with C's and PyTorch's
 * values:
 *
 *   |x|^p           exp(p log s), s = |x| where x != 0, else 1 (no log 0 on any path)
 *   x < 0           times (-1)^p for a whole p (parity p - 2 floor(p/2)), NaN for any other p
 *   x == 0          0 for p > 0, +inf for p < 0 (ox_mask_fill of the 0/1 mask of p < 0)
 *   p == 0          1, whatever x is: exp(0) where x is finite and not 0, else 1 put in its place
 *
 * selected by `keep` (a select: what one case computes elsewhere, log 0 or inf, never reaches the
 * others). Gradients as PyTorch's: dx = p y / x, 0 where x or p is 0 (PyTorch's is p at x = 0, p = 1);
 * dp = y log|x| (PyTorch's is y log x: NaN for a negative x), 0 where x is 0. An exponent that is NaN
 * gives NaN at x = 1 (C's pow gives 1). Integer data is computed in f32 and rounded back. */
#include <math.h>

#include "import/onnx_converters.h"

/* (-1)^p where x < 0 and p is whole, NaN where x < 0 and p is not, 1 elsewhere. */
static tf_tensor_id negative_base_factor(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id p) {
  tf_graph *g = im->graph;
  const tf_dtype dtype = ox_dtype_of(im, x);
  tf_tensor_id one = ox_scalar(im, node, dtype, 1.0), two = ox_scalar(im, node, dtype, 2.0);
  tf_tensor_id negative = ox_nonzero_of(im, node, tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_NEG, x)));
  tf_tensor_id half = tf_mul(g, p, ox_scalar(im, node, dtype, 0.5));
  tf_tensor_id parity = tf_mul(g, tf_sub(g, half, tf_unary(g, TF_OP_FLOOR, half)), two); /* 1 for an odd p */
  tf_tensor_id sign = tf_sub(g, one, tf_mul(g, two, tf_mul(g, negative, parity)));
  /* inf - inf (NaN) where x < 0 and p has a fraction, 0 - 0 elsewhere */
  tf_tensor_id fraction = tf_sub(g, p, tf_unary(g, TF_OP_FLOOR, p));
  tf_tensor_id infinite = ox_mask_fill(im, node, tf_keep(g, negative, fraction), INFINITY, dtype);
  return tf_add(g, sign, tf_sub(g, infinite, infinite));
}

static tf_tensor_id float_power(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id p) {
  tf_graph *g = im->graph;
  const tf_dtype dtype = ox_dtype_of(im, x);
  tf_tensor_id one = ox_scalar(im, node, dtype, 1.0);
  tf_tensor_id magnitude = tf_unary(g, TF_OP_ABS, x);
  tf_tensor_id x_nonzero = ox_nonzero_of(im, node, magnitude);
  tf_tensor_id safe = tf_add(g, magnitude, tf_sub(g, one, x_nonzero)); /* |x|, 1 where x is 0 */
  tf_tensor_id power = tf_unary(g, TF_OP_EXP, tf_mul(g, p, tf_unary(g, TF_OP_LOG, safe)));
  tf_tensor_id of_nonzero = tf_mul(g, power, negative_base_factor(im, node, x, p));
  tf_tensor_id p_negative = ox_nonzero_of(im, node, tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_NEG, p)));
  tf_tensor_id of_zero = ox_mask_fill(im, node, p_negative, INFINITY, dtype);
  tf_tensor_id x_zero = tf_sub(g, one, x_nonzero);
  tf_tensor_id y = tf_add(g, tf_keep(g, of_nonzero, x_nonzero), tf_keep(g, of_zero, x_zero));
  /* x^0 is 1 where the above is not: x 0, infinite or NaN (x - x is NaN for the last two) */
  tf_tensor_id p_zero = tf_sub(g, one, ox_nonzero_of(im, node, p));
  tf_tensor_id special = tf_mul(g, p_zero, tf_add(g, x_zero, ox_nonzero_of(im, node, tf_sub(g, x, x))));
  return tf_add(g, tf_keep(g, y, tf_sub(g, one, special)), special);
}

tf_status ox_pow_of_data(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id p, tf_tensor_id *y) {
  const tf_dtype dtype = ox_dtype_of(im, x);
  const bool integer = ox_is_integer_dtype(dtype);
  tf_graph *g = im->graph;
  if (integer)
    x = tf_cast(g, x, TF_F32);
  if (ox_dtype_of(im, p) != ox_dtype_of(im, x))
    p = tf_cast(g, p, ox_dtype_of(im, x));
  *y = float_power(im, node, x, p);
  if (integer) /* exp(p log x) of whole numbers lands beside them: 3^3 is 26.999998 */
    *y = tf_cast(g, tf_unary(g, TF_OP_ROUND, *y), dtype);
  return ox_graph_error(im, node);
}
