/* The operators of dense layers: MatMul (1-d operands as numpy reads them) and Gemm (input 1 maybe
 * read through a dropped Transpose, onnx_patterns.c), Softmax and LogSoftmax, LayerNormalization and Dropout (the
 * identity unless the export is in training mode). */
#include <inttypes.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The most values one LayerNormalization normalises at once (its axes from `axis` on). */
#define OX_LAYER_NORM_MAX_SIZE ((int64_t)1 << 40)

tf_status ox_convert_matmul(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  if (!node->transpose_b && ox_is_known(im, ox_input(node, 0)) && ox_is_known(im, ox_input(node, 1))) {
    /* frequencies x positions: a rotary embedding's angles */
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node,
                             ox_fold_matmul(ox_value_find(im, ox_input(node, 0))->known,
                                            ox_value_find(im, ox_input(node, 1))->known, ox_fold_room(im), &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  ox_match_half(im, &a, &b);
  /* numpy's 1-d operands (torch.mv, a dot product: spectral_norm's sigma): a [K] as [1, K], b [K]
   * as [K, 1], that axis of the product dropped after */
  tf_dim ad[TF_MAX_RANK], bd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t ar, br, yr;
  ox_tensor_dims(im, a, &ar, ad);
  ox_tensor_dims(im, b, &br, bd);
  if (ar == 1)
    a = tf_reshape(im->graph, a, TF_SHAPE(tf_fixed(1), ad[0]));
  if (br == 1 && !node->transpose_b)
    b = tf_reshape(im->graph, b, TF_SHAPE(bd[0], tf_fixed(1)));
  tf_tensor_id y = tf_matmul(im->graph, a, b, false, node->transpose_b);
  if ((ar != 1 && (br != 1 || node->transpose_b)) || tf_graph_status(im->graph))
    return ox_set_tensor(im, node, 0, y);
  ox_tensor_dims(im, y, &yr, yd);
  int32_t kept = 0;
  for (int32_t i = 0; i < yr; i++)
    if (!((ar == 1 && i == yr - 2) || (br == 1 && i == yr - 1)))
      yd[kept++] = yd[i];
  return ox_set_tensor(im, node, 0, tf_reshape(im->graph, y, tf_shape_from(yd, kept)));
}

tf_status ox_convert_gemm(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b, c = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  bool ta = ox_attr_int(node, "transA", 0) != 0, tb = (ox_attr_int(node, "transB", 0) != 0) != node->transpose_b;
  double alpha = ox_attr_float(node, "alpha", 1.0), beta = ox_attr_float(node, "beta", 1.0);
  ox_match_half(im, &a, &b);
  tf_tensor_id y = tf_matmul(im->graph, a, b, ta, tb);
  if (alpha != 1.0) {
    tf_tensor_id scale = ox_scalar(im, node, TF_F32, alpha);
    ox_match_half(im, &y, &scale);
    y = tf_mul(im->graph, y, scale);
  }
  if (ox_input(node, 2) && beta != 0.0) {
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &c));
    if (beta != 1.0) {
      tf_tensor_id scale = ox_scalar(im, node, TF_F32, beta);
      ox_match_half(im, &c, &scale);
      c = tf_mul(im->graph, c, scale);
    }
    ox_match_half(im, &y, &c);
    y = tf_add(im->graph, y, c);
  }
  return ox_set_tensor(im, node, 0, y);
}

static tf_status softmax_like(ox_import *im, const ox_node *node, bool log_form) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank = ox_rank_of(im, x);
  int64_t axis = ox_attr_int(node, "axis", im->opset >= 13 ? -1 : 1);
  if (axis < 0)
    axis += rank;
  // Before opset 13 the axis flattened everything after it; that is the same only on the last axis.
  if (im->opset < 13 && axis != rank - 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "axis %" PRId64 " before opset 13 flattens trailing axes", axis);
  tf_tensor_id y = log_form ? tf_log_softmax(im->graph, x, (int32_t)axis) : tf_softmax(im->graph, x, (int32_t)axis);
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, false); }
tf_status ox_convert_log_softmax(ox_import *im, const ox_node *node) { return softmax_like(im, node, true); }

/* The normalised axes [axis, rank) of x as one: their sizes (each fixed) multiplied into *size. */
static tf_status normalised_size(ox_import *im, const ox_node *node, const tf_dim *dims, int32_t rank, int32_t axis,
                                 int64_t *size) {
  *size = 1;
  for (int32_t d = axis; d < rank; d++) {
    if (dims[d].symbol >= 0 || dims[d].size < 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "normalising over axis %" PRId32 " of symbolic size (from axis %" PRId32
                     ", the normalised axes must be fixed)",
                     d, axis);
    if (dims[d].size > 0 && *size > OX_LAYER_NORM_MAX_SIZE / dims[d].size)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "normalising over more than 2^40 values at once");
    *size *= dims[d].size;
  }
  return NULL;
}

/* Scale or bias p, broadcast to the normalised axes dims[axis, rank) as ONNX allows, as one [size] vector. */
static tf_tensor_id normalised_vector(ox_import *im, tf_tensor_id p, const tf_dim *dims, int32_t rank, int32_t axis,
                                      int64_t size) {
  int32_t p_rank;
  tf_dim p_dims[TF_MAX_RANK];
  ox_tensor_dims(im, p, &p_rank, p_dims);
  bool same = p_rank == rank - axis;
  for (int32_t d = 0; same && d < p_rank; d++)
    same = p_dims[d].symbol < 0 && p_dims[d].size == dims[axis + d].size;
  if (!same)
    p = tf_expand(im->graph, p, tf_shape_from(dims + axis, rank - axis));
  return tf_reshape(im->graph, p, TF_SHAPE({size, -1}));
}

/* The optional outputs Mean (1) and InvStdDev (2): x's mean and 1 / sqrt(variance + epsilon) over the
 * normalised axes, kept as axes of 1, in f32 (stash_type 1; tightfit has no other). */
static tf_status layer_norm_statistics(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t rank, int32_t axis,
                                       float epsilon) {
  const bool mean_out = node->proto->n_output > 1 && *node->proto->output[1];
  const bool inverse_out = node->proto->n_output > 2 && *node->proto->output[2];
  if (!mean_out && !inverse_out)
    return NULL;
  if (ox_attr_int(node, "stash_type", 1) != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "stash_type %" PRId64 " (only 1: statistics in f32)",
                   ox_attr_int(node, "stash_type", 1));
  tf_graph *g = im->graph;
  int32_t axes[TF_MAX_RANK];
  for (int32_t d = axis; d < rank; d++)
    axes[d - axis] = d;
  tf_tensor_id wide = ox_dtype_of(im, x) == TF_F32 ? x : tf_cast(g, x, TF_F32);
  tf_tensor_id mean = tf_reduce(g, TF_OP_MEAN, wide, axes, rank - axis, true);
  tf_tensor_id centred = tf_sub(g, wide, mean);
  tf_tensor_id variance = tf_reduce(g, TF_OP_MEAN, tf_mul(g, centred, centred), axes, rank - axis, true);
  tf_tensor_id inverse = tf_unary(g, TF_OP_RSQRT, tf_add(g, variance, ox_scalar(im, node, TF_F32, epsilon)));
  if (mean_out)
    TF_RETURN_IF_ERROR(ox_set_tensor(im, node, 1, mean));
  return inverse_out ? ox_set_tensor(im, node, 2, inverse) : NULL;
}

/* LayerNormalization from any axis: the axes from `axis` on normalised as one (nn.LayerNorm([C, H, W])):
 * x reshaped to [..., size], layer_norm over that last axis, reshaped back. */
tf_status ox_convert_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  if (ox_input(node, 2))
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &beta));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t axis = ox_attr_int(node, "axis", -1);
  if (axis < -rank || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of rank-%" PRId32 " data", axis, rank);
  axis = axis < 0 ? axis + rank : axis;
  const float epsilon = (float)ox_attr_float(node, "epsilon", 1e-5);
  TF_RETURN_IF_ERROR(layer_norm_statistics(im, node, x, rank, (int32_t)axis, epsilon));
  ox_match_half(im, &x, &gamma);
  if (beta != TF_NO_TENSOR)
    ox_match_half(im, &x, &beta);
  if (axis == rank - 1)
    return ox_set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, epsilon));
  int64_t size;
  TF_RETURN_IF_ERROR(normalised_size(im, node, dims, rank, (int32_t)axis, &size));
  tf_dim flat[TF_MAX_RANK];
  memcpy(flat, dims, sizeof(tf_dim) * (size_t)axis);
  flat[axis] = (tf_dim){size, -1};
  gamma = normalised_vector(im, gamma, dims, rank, (int32_t)axis, size);
  if (beta != TF_NO_TENSOR)
    beta = normalised_vector(im, beta, dims, rank, (int32_t)axis, size);
  tf_tensor_id y =
      tf_layer_norm(im->graph, tf_reshape(im->graph, x, tf_shape_from(flat, (int32_t)axis + 1)), gamma, beta, epsilon);
  return ox_set_tensor(im, node, 0, tf_reshape(im->graph, y, tf_shape_from(dims, rank)));
}

tf_status ox_convert_dropout(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  double rate = ox_attr_float(node, "ratio", 0.5);
  if (ox_input(node, 1)) {
    const ox_known *r;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &r));
    rate = r->count == 1 ? (r->is_float ? r->reals[0] : (double)r->ints[0].size) : rate;
  }
  /* ONNX's Dropout is the identity unless its training_mode input (opset 12 on) is true; torch sets
   * it in training-mode exports. Before opset 12 it has none: the identity, as onnxruntime runs it. */
  bool training = false;
  if (ox_input(node, 2)) {
    const ox_known *mode;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &mode));
    training = mode->count == 1 && (mode->is_float ? mode->reals[0] != 0 : mode->ints[0].size != 0);
  }
  // The mask output (torch names it in training exports) is left without a value: a node that
  // reads it fails with "has no value".
  return ox_set_tensor(im, node, 0, rate == 0 || !training ? x : tf_dropout(im->graph, x, (float)rate));
}
