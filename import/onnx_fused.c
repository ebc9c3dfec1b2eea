/* The nodes the patterns stage fused (onnx_patterns.c, onnx_attention.c) as one graph op each: GELU,
 * attention, layer norm, RMS norm, SiLU, the loss of a LogSoftmax (onnx_loss.c). Their inputs are the pattern's real
 * inputs (ox_node.inputs). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "import/onnx_converters.h"

static tf_status emit_gelu(ox_import *im, const ox_node *node, bool tanh_approximation) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_approximation));
}

/* x [N, T, E] as [N, heads, T, E / heads] (keys_last: [N, heads, E / heads, T]). */
static tf_tensor_id heads_of(ox_import *im, tf_tensor_id x, int64_t heads, bool keys_last) {
  int32_t rank;
  tf_dim d[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, d);
  const tf_dim split[4] = {d[0], d[1], tf_fixed(heads), tf_fixed(d[2].size / heads)};
  static const int32_t first[4] = {0, 2, 1, 3}, keys[4] = {0, 2, 3, 1};
  return tf_transpose(im->graph, tf_reshape(im->graph, x, tf_shape_from(split, 4)), keys_last ? keys : first, 4);
}

/* The attention the pattern matched, written out where the values' width differs from the queries' and
 * keys' (Perceiver's decoder: queries of 256 against values of 32), which the fused op does not take:
 * softmax(q k^T scale) v over the heads, then the heads merged. */
static tf_status attention_written_out(ox_import *im, const ox_node *node, tf_tensor_id q, tf_tensor_id k,
                                       tf_tensor_id v, const tf_attention_attrs *a) {
  int32_t rank;
  tf_dim qd[TF_MAX_RANK], vd[TF_MAX_RANK];
  ox_tensor_dims(im, q, &rank, qd);
  ox_tensor_dims(im, v, &rank, vd);
  if (a->causal || qd[2].symbol >= 0 || vd[2].symbol >= 0 || qd[2].size % a->num_heads || vd[2].size % a->num_heads)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "attention whose values' width differs from the queries' (causal, or not a multiple of %" PRId32
                   " heads)",
                   a->num_heads);
  tf_graph *g = im->graph;
  const double scale = a->scale != 0.0f ? a->scale : 1.0 / sqrt((double)(qd[2].size / a->num_heads));
  tf_tensor_id scores = tf_matmul(g, heads_of(im, q, a->num_heads, false), heads_of(im, k, a->num_heads, true), false,
                                  false); /* [N, heads, Tq, Tk] */
  scores = tf_mul(g, scores, ox_scalar(im, node, ox_dtype_of(im, q), scale));
  tf_tensor_id mixed = tf_matmul(g, tf_softmax(g, scores, -1), heads_of(im, v, a->num_heads, false), false, false);
  static const int32_t merge[4] = {0, 2, 1, 3};
  const tf_dim out[3] = {qd[0], qd[1], vd[2]};
  return ox_set_tensor(im, node, 0, tf_reshape(g, tf_transpose(g, mixed, merge, 4), tf_shape_from(out, 3)));
}

static tf_status emit_attention(ox_import *im, const ox_node *node) {
  tf_tensor_id q, k, v;
  const ox_known *shape;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &q));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &k));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &v));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 3, &shape));
  if (shape->is_float || shape->count != 4 || shape->ints[2].symbol >= 0 || shape->ints[2].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "attention whose heads split is not [N, T, heads, head_dim]");
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_ATTENTION;
  attrs.u.attention.num_heads = (int32_t)shape->ints[2].size;
  attrs.u.attention.causal = node->causal;
  attrs.u.attention.scale = (float)node->scale;
  if (node->n_inputs > 4) { /* the scale computed from shapes (onnx_patterns.c): known by now */
    const ox_known *scale;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, 4, &scale));
    if (!scale->is_float || scale->count != 1 || !(scale->reals[0] != 0) || !isfinite(scale->reals[0]))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "attention whose scores scale is not one finite number");
    attrs.u.attention.scale = (float)(node->scale_divides ? 1.0 / scale->reals[0] : scale->reals[0]);
  }
  int32_t rank;
  tf_dim qd[TF_MAX_RANK], vd[TF_MAX_RANK];
  ox_tensor_dims(im, q, &rank, qd);
  ox_tensor_dims(im, v, &rank, vd);
  if (qd[2].size != vd[2].size || qd[2].symbol != vd[2].symbol)
    return attention_written_out(im, node, q, k, v, &attrs.u.attention);
  tf_tensor_id ids[3] = {q, k, v};
  return ox_set_tensor(im, node, 0, tf_graph_node(im->graph, TF_OP_ATTENTION, ids, 3, &attrs));
}

static tf_status emit_layer_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma, beta;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &beta));
  ox_match_half(im, &x, &gamma);
  ox_match_half(im, &x, &beta);
  return ox_set_tensor(im, node, 0, tf_layer_norm(im->graph, x, gamma, beta, (float)node->scale));
}

static tf_status emit_rms_norm(ox_import *im, const ox_node *node) {
  tf_tensor_id x, gamma;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &gamma));
  ox_match_half(im, &x, &gamma);
  return ox_set_tensor(im, node, 0, tf_rms_norm(im->graph, x, gamma, (float)node->scale));
}

static tf_status emit_silu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_unary(im->graph, TF_OP_SILU, x));
}

tf_status ox_convert_fused(ox_import *im, const ox_node *node) {
  switch (node->fused) {
  case OX_GELU_ERF: return emit_gelu(im, node, false);
  case OX_GELU_TANH: return emit_gelu(im, node, true);
  case OX_ATTENTION: return emit_attention(im, node);
  case OX_LAYER_NORM: return emit_layer_norm(im, node);
  case OX_RMS_NORM: return emit_rms_norm(im, node);
  case OX_SILU: return emit_silu(im, node);
  case OX_NLL_OF_LOG_SOFTMAX: return ox_convert_nll_of_log_softmax(im, node);
  default: break;
  }
  return ox_fail(im, node, TF_ERR_INTERNAL, "fused pattern %d has no converter", (int)node->fused);
}
