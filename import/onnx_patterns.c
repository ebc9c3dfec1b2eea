/* Patterns that torch.onnx.export spells as several operators and tightfit has one op for:
 *   x * 0.5 * (1 + erf(x / sqrt 2))                        -> gelu (exact)
 *   x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    -> gelu (tanh approximation: torch's
 *                                                              approximate="tanh", GPT-2's gelu_new)
 *   view/transpose q, k, v; q @ k^T; scale; causal mask;    -> attention (onnx_attention.c)
 *     softmax; @ v; transpose; view back
 *   (x - mean) / sqrt(var + eps) * gamma + beta             -> layer_norm (the opset < 17 spelling)
 *   x * rsqrt(mean(x^2) + eps) * gamma, or x / sqrt(..)     -> rms_norm (Llama's RMSNorm written out)
 *   x * sigmoid(x)                                          -> silu
 *   MatMul(x, Transpose(W)) with W 2-d                      -> matmul with transpose_b
 *   AveragePool(Pad(x, zeros around H and W))               -> avg_pool2d with padding (torch's
 *                                                              avg_pool2d(padding=p) export)
 * A rewritten node takes the pattern's real inputs; the nodes it covers are then emitted only when
 * something else reads them (ox_mark_live), so a pattern used elsewhere stays correct. The patterns
 * stage (import/stages.txt) reads values and decoded nodes only; it runs before any converter. */
#include <math.h>
#include <string.h>

#include "import/onnx_patterns.h"

/* x when `add` is Add(Erf(x / sqrt2 or x * 1/sqrt2), 1) */
static const char *erf_plus_one_of(ox_import *im, const ox_node *add) {
  if (!ox_is_op(add, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *erf = ox_producer(im, ox_input(add, side));
    if (!ox_is_op(erf, "Erf") || !ox_is_scalar(im, ox_input(add, 1 - side), 1.0, 0))
      continue;
    ox_node *scale = ox_producer(im, ox_input(erf, 0));
    if (ox_is_op(scale, "Div") && ox_is_scalar(im, ox_input(scale, 1), sqrt(2.0), 1e-5))
      return ox_input(scale, 0);
    if (ox_is_op(scale, "Mul") && ox_is_scalar(im, ox_input(scale, 1), sqrt(0.5), 1e-6))
      return ox_input(scale, 0);
  }
  return NULL;
}

/* x when `name` is x^3: Pow(x, 3), or x * (x * x) in any order of the operands. */
static const char *cube_of(ox_import *im, const char *name) {
  ox_node *p = ox_producer(im, name);
  if (ox_is_op(p, "Pow") && ox_is_scalar(im, ox_input(p, 1), 3.0, 0))
    return ox_input(p, 0);
  if (!ox_is_op(p, "Mul"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *square = ox_producer(im, ox_input(p, 1 - side));
    const char *x = ox_input(p, side);
    if (ox_is_op(square, "Mul") && ox_same_name(ox_input(square, 0), x) && ox_same_name(ox_input(square, 1), x))
      return x;
  }
  return NULL;
}

/* The two operands of `node` (a binary op) as (the one that is the scalar `value`, the other): the
 * other's name, or NULL when neither operand is that scalar. */
static const char *other_than_scalar(ox_import *im, const ox_node *node, double value, double tolerance) {
  for (int32_t side = 0; side < 2; side++)
    if (ox_is_scalar(im, ox_input(node, side), value, tolerance))
      return ox_input(node, 1 - side);
  return NULL;
}

/* x when `add` is Add(Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)), 1), the operands in any order
 * (sqrt(2/pi) = 0.7978845608028654) */
static const char *tanh_plus_one_of(ox_import *im, const ox_node *add) {
  if (!ox_is_op(add, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *tanh = ox_producer(im, ox_input(add, side));
    if (!ox_is_op(tanh, "Tanh") || !ox_is_scalar(im, ox_input(add, 1 - side), 1.0, 0))
      continue;
    ox_node *scale = ox_producer(im, ox_input(tanh, 0));
    ox_node *sum =
        ox_is_op(scale, "Mul") ? ox_producer(im, other_than_scalar(im, scale, 0.7978845608028654, 1e-5)) : NULL;
    if (!ox_is_op(sum, "Add"))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      ox_node *term = ox_producer(im, ox_input(sum, 1 - j));
      const char *x = ox_input(sum, j);
      if (ox_is_op(term, "Mul") && ox_same_name(cube_of(im, other_than_scalar(im, term, 0.044715, 1e-5)), x))
        return x;
    }
  }
  return NULL;
}

/* x when `add` is erf_plus_one (*kind OX_GELU_ERF) or tanh_plus_one (OX_GELU_TANH) of x. */
static const char *gelu_plus_one_of(ox_import *im, const ox_node *add, ox_fused *kind) {
  const char *x = erf_plus_one_of(im, add);
  *kind = x ? OX_GELU_ERF : OX_GELU_TANH;
  return x ? x : tanh_plus_one_of(im, add);
}

/* Mul(Mul(x, plus_one), 0.5), Mul(Mul(x, 0.5), plus_one), Mul(x, Mul(0.5, plus_one)) and the
 * operands swapped, plus_one the erf or tanh form of 1 + ... of x. */
static void match_gelu(ox_import *im, ox_node *top) {
  if (!ox_is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *inner = ox_producer(im, ox_input(top, side));
    const char *other = ox_input(top, 1 - side);
    if (!ox_is_op(inner, "Mul"))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      const char *x = NULL;
      ox_fused kind = OX_GELU_ERF;
      if (ox_is_scalar(im, other, 0.5, 0)) {
        const char *gelu_x = gelu_plus_one_of(im, ox_producer(im, ox_input(inner, 1 - j)), &kind);
        x = ox_same_name(gelu_x, ox_input(inner, j)) ? gelu_x : NULL;
      } else if (ox_is_scalar(im, ox_input(inner, 1 - j), 0.5, 0)) {
        const char *gelu_x = gelu_plus_one_of(im, ox_producer(im, other), &kind);
        x = ox_same_name(gelu_x, ox_input(inner, j)) ? gelu_x : NULL;
        if (!x) { /* x * (0.5 * (1 + erf(...))): PyTorch 2.x's dynamo exporter */
          gelu_x = gelu_plus_one_of(im, ox_producer(im, ox_input(inner, j)), &kind);
          x = ox_same_name(gelu_x, other) ? gelu_x : NULL;
        }
      }
      if (x) {
        top->fused = kind;
        top->fused_inputs[0] = x;
        top->inputs = top->fused_inputs;
        top->n_inputs = 1;
        return;
      }
    }
  }
}

/* ReduceMean over the last axis only, keeping it. */
static bool is_last_axis_mean(const ox_node *node) {
  int64_t axes[TF_MAX_RANK];
  return ox_is_op(node, "ReduceMean") && ox_attr_ints(node, "axes", axes, TF_MAX_RANK) == 1 && axes[0] == -1 &&
         ox_attr_int(node, "keepdims", 1) == 1;
}

/* Add(Mul(Div(Sub(x, mean(x)), Sqrt(Add(mean(Pow(Sub, 2)), eps))), gamma), beta), operands of Add and
 * Mul in either order. */
static void match_layer_norm(ox_import *im, ox_node *top) {
  if (!ox_is_op(top, "Add"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *scale = ox_producer(im, ox_input(top, side));
    const char *beta = ox_input(top, 1 - side);
    if (!ox_is_op(scale, "Mul") || !beta || ox_producer(im, beta))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      ox_node *div = ox_producer(im, ox_input(scale, j));
      const char *gamma = ox_input(scale, 1 - j);
      if (!ox_is_op(div, "Div") || !gamma || ox_producer(im, gamma))
        continue;
      ox_node *centre = ox_producer(im, ox_input(div, 0)), *root = ox_producer(im, ox_input(div, 1));
      if (!ox_is_op(centre, "Sub") || !ox_is_op(root, "Sqrt"))
        continue;
      ox_node *mean = ox_producer(im, ox_input(centre, 1));
      if (!is_last_axis_mean(mean) || !ox_same_name(ox_input(mean, 0), ox_input(centre, 0)))
        continue;
      ox_node *shift = ox_producer(im, ox_input(root, 0));
      double epsilon;
      if (!ox_is_op(shift, "Add") || !ox_scalar_of(im, ox_input(shift, 1), &epsilon, NULL))
        continue;
      ox_node *variance = ox_producer(im, ox_input(shift, 0));
      if (!is_last_axis_mean(variance))
        continue;
      ox_node *square = ox_producer(im, ox_input(variance, 0));
      if (!ox_is_op(square, "Pow") || !ox_same_name(ox_input(square, 0), ox_input(div, 0)) ||
          !ox_is_scalar(im, ox_input(square, 1), 2.0, 0))
        continue;
      top->fused = OX_LAYER_NORM;
      top->fused_inputs[0] = ox_input(centre, 0);
      top->fused_inputs[1] = gamma;
      top->fused_inputs[2] = beta;
      top->inputs = top->fused_inputs;
      top->n_inputs = 3;
      top->scale = epsilon;
      return;
    }
  }
}

/* x when `name` is x^2: Pow(x, 2) or Mul(x, x). */
static const char *square_of(ox_import *im, const char *name) {
  ox_node *p = ox_producer(im, name);
  if (ox_is_op(p, "Pow") && ox_is_scalar(im, ox_input(p, 1), 2.0, 0))
    return ox_input(p, 0);
  return ox_is_op(p, "Mul") && ox_same_name(ox_input(p, 0), ox_input(p, 1)) ? ox_input(p, 0) : NULL;
}

/* x (and *epsilon) when `name` is Sqrt(Add(ReduceMean_last(x^2), eps)), eps on either side. */
static const char *rms_root_of(ox_import *im, const char *name, double *epsilon) {
  ox_node *root = ox_producer(im, name);
  ox_node *shift = ox_is_op(root, "Sqrt") ? ox_producer(im, ox_input(root, 0)) : NULL;
  if (!ox_is_op(shift, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *mean = ox_producer(im, ox_input(shift, side));
    if (is_last_axis_mean(mean) && ox_scalar_of(im, ox_input(shift, 1 - side), epsilon, NULL))
      return square_of(im, ox_input(mean, 0));
  }
  return NULL;
}

/* x (and *epsilon) when `name` is x / root or x * inverse(root) (Reciprocal(root) or Div(1, root)),
 * root an rms_root_of x, the product's operands in either order. */
static const char *rms_normalized_of(ox_import *im, const char *name, double *epsilon) {
  ox_node *p = ox_producer(im, name);
  if (ox_is_op(p, "Div")) {
    const char *x = rms_root_of(im, ox_input(p, 1), epsilon);
    return ox_same_name(x, ox_input(p, 0)) ? x : NULL;
  }
  if (!ox_is_op(p, "Mul"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *inverse = ox_producer(im, ox_input(p, side));
    const char *root = ox_is_op(inverse, "Reciprocal") ? ox_input(inverse, 0)
                       : ox_is_op(inverse, "Div") && ox_is_scalar(im, ox_input(inverse, 0), 1.0, 0)
                           ? ox_input(inverse, 1)
                           : NULL;
    const char *x = root ? rms_root_of(im, root, epsilon) : NULL;
    if (x && ox_same_name(x, ox_input(p, 1 - side)))
      return x;
  }
  return NULL;
}

/* What `name` is a Cast of, or `name` itself. */
static const char *uncast(ox_import *im, const char *name) {
  ox_node *p = ox_producer(im, name);
  return ox_is_op(p, "Cast") ? ox_input(p, 0) : name;
}

/* Mul(normalized, gamma) in either order, gamma an initializer and normalized an rms_normalized_of x;
 * also Hugging Face's half-model spelling, normalized in f32 between casts: Mul(gamma,
 * Cast(rms_normalized_of(Cast(x)))) (the fused op computes in f32 too, and rounds once). */
static void match_rms_norm(ox_import *im, ox_node *top) {
  if (!ox_is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    const char *gamma = ox_input(top, 1 - side);
    double epsilon = 0;
    const char *x =
        gamma && !ox_producer(im, gamma) ? rms_normalized_of(im, uncast(im, ox_input(top, side)), &epsilon) : NULL;
    if (!x)
      continue;
    if (uncast(im, ox_input(top, side)) != ox_input(top, side)) /* cast back: the f32 copy of x is a Cast of x */
      x = uncast(im, x);
    top->fused = OX_RMS_NORM;
    top->fused_inputs[0] = x;
    top->fused_inputs[1] = gamma;
    top->inputs = top->fused_inputs;
    top->n_inputs = 2;
    top->scale = epsilon;
    return;
  }
}

/* Mul(x, Sigmoid(x)) in either order. */
static void match_silu(ox_import *im, ox_node *top) {
  if (!ox_is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *sigmoid = ox_producer(im, ox_input(top, side));
    if (ox_is_op(sigmoid, "Sigmoid") && ox_same_name(ox_input(sigmoid, 0), ox_input(top, 1 - side))) {
      top->fused = OX_SILU;
      top->fused_inputs[0] = ox_input(top, 1 - side);
      top->inputs = top->fused_inputs;
      top->n_inputs = 1;
      return;
    }
  }
}

/* MatMul(x, Transpose(W, perm [1, 0])) and Gemm(x, Transpose(W)): W read transposed. */
static void match_transposed_operand(ox_import *im, ox_node *node) {
  static const int64_t swap[2] = {1, 0};
  if (!ox_is_op(node, "MatMul") && !ox_is_op(node, "Gemm"))
    return;
  ox_node *transpose = ox_producer(im, ox_input(node, 1));
  if (!ox_is_op(transpose, "Transpose") || !ox_perm_is(transpose, swap, 2) || !ox_input(transpose, 0))
    return;
  int32_t n = node->n_inputs < 4 ? node->n_inputs : 4;
  for (int32_t i = 0; i < n; i++)
    node->fused_inputs[i] = node->inputs[i];
  node->fused_inputs[1] = ox_input(transpose, 0);
  node->inputs = node->fused_inputs;
  node->n_inputs = n;
  node->transpose_b = true;
}

/* NegativeLogLikelihoodLoss of LogSoftmax(z) (F.nll_loss(F.log_softmax(z, 1)), and torch's
 * cross_entropy before opset 12) as a mean without class weights: fused, so that the loss reads z
 * (onnx_loss.c) and a LogSoftmax nothing else reads is not computed. */
static void match_nll_of_log_softmax(ox_import *im, ox_node *node) {
  if (!ox_is_op(node, "NegativeLogLikelihoodLoss") || ox_input(node, 2) || !ox_input(node, 1) ||
      !ox_attr_is(node, "reduction", "mean", "mean"))
    return;
  ox_node *log_softmax = ox_producer(im, ox_input(node, 0));
  if (!ox_is_op(log_softmax, "LogSoftmax") || !ox_input(log_softmax, 0))
    return;
  node->fused = OX_NLL_OF_LOG_SOFTMAX;
  node->fused_inputs[0] = ox_input(log_softmax, 0);
  node->fused_inputs[1] = ox_input(node, 1);
  node->inputs = node->fused_inputs;
  node->n_inputs = 2;
  node->softmax_axis = ox_attr_int(log_softmax, "axis", im->opset >= 13 ? -1 : 1);
}

static void match_padded_pool(ox_import *im, ox_node *node) {
  if (!ox_is_op(node, "AveragePool"))
    return;
  ox_node *pad = ox_producer(im, ox_input(node, 0));
  if (!ox_is_op(pad, "Pad") || (ox_input(pad, 2) && !ox_is_scalar(im, ox_input(pad, 2), 0, 0)))
    return;
  if (!ox_attr_is(pad, "mode", "constant", "constant"))
    return;
  int64_t pads[8], own[4];
  int32_t n = im->opset >= 11 ? ox_ints_of(im, ox_input(pad, 1), pads, 8) : ox_attr_ints(pad, "pads", pads, 8);
  int32_t n_own = ox_attr_ints(node, "pads", own, 4);
  for (int32_t i = 0; i < n_own && i < 4; i++)
    if (own[i] != 0)
      return;
  // [N, C, H, W] begins then ends: zero on N and C, the same at both ends of H and of W.
  if (n != 8 || pads[0] || pads[1] || pads[4] || pads[5] || pads[2] != pads[6] || pads[3] != pads[7] || pads[2] < 0 ||
      pads[3] < 0)
    return;
  node->fused_inputs[0] = ox_input(pad, 0);
  node->inputs = node->fused_inputs;
  node->n_inputs = 1;
  node->pool_padding[0] = (int32_t)pads[2];
  node->pool_padding[1] = (int32_t)pads[3];
}

void ox_rewrite_patterns(ox_import *im) {
  /* layer_norm first, over every node: its normalised x, (x - mean) / sqrt(mean((x - mean)^2) + eps),
   * is also an RMSNorm of x - mean, and its Mul by gamma comes before the Add of beta that names it */
  for (int32_t i = 0; i < im->n_nodes; i++)
    match_layer_norm(im, &im->nodes[i]);
  for (int32_t i = 0; i < im->n_nodes; i++) {
    match_gelu(im, &im->nodes[i]);
    ox_match_attention(im, &im->nodes[i]);
    match_rms_norm(im, &im->nodes[i]);
    match_silu(im, &im->nodes[i]);
  }
  for (int32_t i = 0; i < im->n_nodes; i++) {
    match_transposed_operand(im, &im->nodes[i]);
    match_padded_pool(im, &im->nodes[i]);
    match_nll_of_log_softmax(im, &im->nodes[i]);
  }
}

/* Marks live the producers of every value the subgraphs of `proto` (an If's branches) read from the
 * graph around them, nested ones too (down to OX_MAX_BRANCH_DEPTH; deeper ones are refused when
 * emitted). */
static void mark_captured(ox_import *im, const Onnx__NodeProto *proto, int32_t depth) {
  for (size_t a = 0; a < proto->n_attribute && depth < OX_MAX_BRANCH_DEPTH; a++) {
    const Onnx__GraphProto *g = proto->attribute[a] ? proto->attribute[a]->g : NULL;
    for (size_t n = 0; g && n < g->n_node; n++) {
      for (size_t j = 0; j < g->node[n]->n_input; j++) {
        ox_node *p = g->node[n]->input[j] ? ox_producer(im, g->node[n]->input[j]) : NULL;
        if (p)
          p->live = true;
      }
      mark_captured(im, g->node[n], depth + 1);
    }
    for (size_t o = 0; g && o < g->n_output; o++) {
      ox_node *p = g->output[o] && g->output[o]->name ? ox_producer(im, g->output[o]->name) : NULL;
      if (p)
        p->live = true;
    }
  }
}

void ox_mark_live(ox_import *im) {
  // Walk back from the outputs; nodes come in topological order, so one backward sweep suffices.
  for (size_t i = 0; i < im->onnx->n_output; i++) {
    ox_node *p = ox_producer(im, im->onnx->output[i]->name);
    if (p)
      p->live = true;
  }
  for (int32_t i = im->n_nodes - 1; i >= 0; i--) {
    ox_node *node = &im->nodes[i];
    if (!node->live)
      continue;
    for (int32_t j = 0; j < node->n_inputs; j++) {
      ox_node *p = ox_producer(im, ox_input(node, j));
      if (p)
        p->live = true;
    }
    mark_captured(im, node->proto, 0);
  }
}
