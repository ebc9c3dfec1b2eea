/* The nodes the patterns stage fused (onnx_patterns.c, onnx_attention.c) as one graph op each: GELU,
 * attention, layer norm, RMS norm, SiLU, the loss of a LogSoftmax (onnx_loss.c). Their inputs are the pattern's real
 * inputs (ox_node.inputs). */
#include <math.h>
#include <string.h>

#include "import/onnx_converters.h"

static tf_status emit_gelu(ox_import *im, const ox_node *node, bool tanh_approximation) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_approximation));
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
