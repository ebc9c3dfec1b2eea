/* InstanceNormalization and MeanVarianceNormalization. InstanceNormalization: each (sample, channel) of x [N, C,
 * spatial...] normalised by its own mean and biased variance over the spatial axes, then scaled and shifted per channel
 * (scale, B). nn.InstanceNorm1d/2d export it, and nn.GroupNorm too: over x reshaped to [N, groups, -1], with a scale of
 * ones and a B of zeros, the module's own weight and bias applied after by Mul and Add. It becomes mean, sub, mul, add
 * and rsqrt, whose gradients autodiff derives. MeanVarianceNormalization: (x - mean) / (sqrt(biased variance) + 1e-9)
 * over its axes, from mean, sub, mul, sqrt, add and div. */
#include <inttypes.h>

#include "import/onnx_converters.h"

/* Whether node input i is known at import time and every value of it is `value` (GroupNorm's ones
 * and zeros, which then cost no op). */
static bool known_all(ox_import *im, const ox_node *node, int32_t i, double value) {
  const char *name = ox_input(node, i);
  if (!name || !ox_is_known(im, name))
    return false;
  const ox_known *k = ox_value_find(im, name)->known;
  if (!k->is_float)
    return false;
  for (int64_t e = 0; e < k->count; e++)
    if (k->reals[e] != value)
      return false;
  return true;
}

/* y * scale (multiply) or y + B per channel, input i reshaped from [C] to [C, 1, ...]. */
static tf_status per_channel(ox_import *im, const ox_node *node, int32_t i, tf_shape shape, bool multiply,
                             tf_tensor_id *y) {
  tf_tensor_id v;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &v));
  v = tf_reshape(im->graph, v, shape);
  ox_match_half(im, y, &v);
  *y = multiply ? tf_mul(im->graph, *y, v) : tf_add(im->graph, *y, v);
  return NULL;
}

tf_status ox_convert_instance_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 2));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank < 3)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its input must be [N, C, spatial...]; it has rank %" PRId32, rank);
  if (dims[1].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its channel axis must have a fixed size");
  const double epsilon = ox_attr_float(node, "epsilon", 1e-5);
  if (!(epsilon >= 0))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "epsilon %g must be >= 0", epsilon);
  int32_t axes[TF_MAX_RANK];
  for (int32_t i = 2; i < rank; i++)
    axes[i - 2] = i;
  tf_graph *g = im->graph;
  tf_tensor_id centred = tf_sub(g, x, tf_reduce(g, TF_OP_MEAN, x, axes, rank - 2, true));
  tf_tensor_id variance = tf_reduce(g, TF_OP_MEAN, tf_mul(g, centred, centred), axes, rank - 2, true);
  tf_tensor_id eps = ox_scalar(im, node, TF_F32, epsilon);
  ox_match_half(im, &variance, &eps);
  tf_tensor_id y = tf_mul(g, centred, tf_unary(g, TF_OP_RSQRT, tf_add(g, variance, eps)));
  /* [C] -> [C, 1, ...]: broadcast over the spatial axes */
  tf_dim channel[TF_MAX_RANK];
  channel[0] = dims[1];
  for (int32_t i = 1; i < rank - 1; i++)
    channel[i] = tf_fixed(1);
  const tf_shape shape = tf_shape_from(channel, rank - 1);
  if (!known_all(im, node, 1, 1.0))
    TF_RETURN_IF_ERROR(per_channel(im, node, 1, shape, true, &y));
  if (!known_all(im, node, 2, 0.0))
    TF_RETURN_IF_ERROR(per_channel(im, node, 2, shape, false, &y));
  return ox_set_tensor(im, node, 0, y);
}

/* The distinct axes of MeanVarianceNormalization's `axes` attribute (default 0, 2, 3), counted from
 * the end when negative, into axes[0, *n). */
static tf_status normalised_axes(ox_import *im, const ox_node *node, int32_t rank, int32_t *axes, int32_t *n) {
  int64_t given[TF_MAX_RANK + 1];
  int32_t count = ox_attr_ints(node, "axes", given, TF_MAX_RANK + 1);
  if (count < 0) {
    count = 3;
    given[0] = 0, given[1] = 2, given[2] = 3;
  }
  if (count < 1 || count > rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%" PRId32 " axes for an input of rank %" PRId32, count, rank);
  for (int32_t i = 0; i < count; i++) {
    const int64_t a = given[i] < 0 ? given[i] + rank : given[i];
    if (a < 0 || a >= rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of an input of rank %" PRId32, given[i], rank);
    for (int32_t j = 0; j < i; j++)
      if (axes[j] == (int32_t)a)
        return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " given twice", given[i]);
    axes[i] = (int32_t)a;
  }
  *n = count;
  return NULL;
}

tf_status ox_convert_mean_variance_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t axes[TF_MAX_RANK], n = 0;
  TF_RETURN_IF_ERROR(normalised_axes(im, node, ox_rank_of(im, x), axes, &n));
  tf_graph *g = im->graph;
  tf_tensor_id centred = tf_sub(g, x, tf_reduce(g, TF_OP_MEAN, x, axes, n, true));
  tf_tensor_id variance = tf_reduce(g, TF_OP_MEAN, tf_mul(g, centred, centred), axes, n, true);
  tf_tensor_id deviation = tf_add(g, tf_unary(g, TF_OP_SQRT, variance), ox_scalar(im, node, ox_dtype_of(im, x), 1e-9));
  return ox_set_tensor(im, node, 0, tf_div(g, centred, deviation));
}
