/* LRN, local response normalisation across channels (AlexNet's, GoogLeNet's in ONNX's model zoo):
 *
 *   y = x / (bias + alpha / size * s)^beta,  s[n, c, ...] = sum of x[n, i, ...]^2 over the channels
 *       i from c - floor((size - 1) / 2) to c + ceil((size - 1) / 2), clipped to [0, C)
 *
 * s as a product by a constant [C, C] band of ones, the channels moved last for it (any spatial sizes,
 * symbolic ones too) and back; the power as exp(-beta log(...)). Its gradient is autodiff's. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "import/onnx_converters.h"

/* The [C, C] band: row c holds ones at the channels c's window sums (its transpose multiplies). */
static tf_status band_of(ox_import *im, const ox_node *node, int64_t channels, int64_t size, tf_tensor_id *band) {
  const int64_t shape[2] = {channels, channels};
  ox_known *k = ox_known_new(true, TF_F32, 2, shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for a %" PRId64 " x %" PRId64 " band", channels,
                   channels);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  for (int64_t c = 0; c < channels; c++)
    for (int64_t i = c - before < 0 ? 0 : c - before; i <= c + after && i < channels; i++)
      k->reals[c * channels + i] = 1.0;
  char name[300];
  snprintf(name, sizeof(name), "%s.band", node->proto->output[0]);
  return ox_known_constant(im, node, name, k, band);
}

tf_status ox_convert_lrn(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank < 3)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its input must be [N, C, spatial...]; it has rank %" PRId32, rank);
  if (dims[1].symbol >= 0 || dims[1].size > 4096)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its channel axis must have a fixed size of at most 4096");
  const int64_t size = ox_attr_int(node, "size", 0);
  const double alpha = ox_attr_float(node, "alpha", 1e-4), beta = ox_attr_float(node, "beta", 0.75),
               bias = ox_attr_float(node, "bias", 1.0);
  if (size < 1 || size > 4096 || !isfinite(alpha) || !isfinite(beta) || !isfinite(bias))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "size %" PRId64 ", alpha %g, beta %g, bias %g (size 1 to 4096, "
                   "finite numbers)",
                   size, alpha, beta, bias);
  tf_tensor_id band;
  TF_RETURN_IF_ERROR(band_of(im, node, dims[1].size, size, &band));
  tf_graph *g = im->graph;
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32)
    band = tf_cast(g, band, dtype);
  int32_t last[TF_MAX_RANK], back[TF_MAX_RANK]; /* channels moved last, and back */
  for (int32_t i = 0, j = 0; i < rank; i++)
    if (i != 1)
      last[j++] = i;
  last[rank - 1] = 1;
  for (int32_t i = 0; i < rank; i++)
    back[last[i]] = i;
  tf_tensor_id squares = tf_transpose(g, tf_mul(g, x, x), last, rank);
  tf_tensor_id sums = tf_transpose(g, tf_matmul(g, squares, band, false, true), back, rank);
  tf_tensor_id base =
      tf_add(g, tf_mul(g, sums, ox_scalar(im, node, dtype, alpha / (double)size)), ox_scalar(im, node, dtype, bias));
  tf_tensor_id scale =
      tf_unary(g, TF_OP_EXP, tf_mul(g, tf_unary(g, TF_OP_LOG, base), ox_scalar(im, node, dtype, -beta)));
  return ox_set_tensor(im, node, 0, tf_mul(g, x, scale));
}
