/* The attention pattern (onnx_patterns.c lists the others): torch.onnx.export writes
 * nn.MultiheadAttention, a hand-written causal self-attention (nanoGPT) and Hugging Face GPT-2 as
 *   view/transpose q, k, v; q @ k^T; scale; causal mask; softmax; @ v; transpose; view back
 * which becomes one fused attention node (causal or not), its scale a number or computed from shapes. */
#include <string.h>

#include "import/onnx_patterns.h"

/* q3 and its 4-d shape when `node` is Transpose(Reshape(q3, shape), perm). */
static bool split_heads(ox_import *im, const ox_node *node, const int64_t *perm, const char **x, const char **shape) {
  if (!ox_is_op(node, "Transpose") || !ox_perm_is(node, perm, 4))
    return false;
  ox_node *reshape = ox_producer(im, ox_input(node, 0));
  if (!ox_is_op(reshape, "Reshape"))
    return false;
  *x = ox_input(reshape, 0);
  *shape = ox_input(reshape, 1);
  return *x && *shape;
}

/* True when `cond` is [Cast](Not(Trilu(ones, upper=0))): masked where j > i. */
static bool is_causal_mask(ox_import *im, const char *cond) {
  ox_node *node = ox_producer(im, cond);
  if (ox_is_op(node, "Cast"))
    node = ox_producer(im, ox_input(node, 0));
  if (!ox_is_op(node, "Not"))
    return false;
  ox_node *trilu = ox_producer(im, ox_input(node, 0));
  if (!ox_is_op(trilu, "Trilu") || ox_attr_int(trilu, "upper", 1) != 0)
    return false;
  return !ox_input(trilu, 1) || ox_is_scalar(im, ox_input(trilu, 1), 0, 0);
}

/* True when `name` (a Constant node's output or a known initializer) is a tensor [1, .., 1, T, T]
 * that is nonzero exactly where j <= i: a causal mask of visible keys (Hugging Face GPT-2's `bias`
 * buffer, torch.tril of ones). */
static bool is_lower_triangular(ox_import *im, const char *name) {
  ox_node *p = ox_producer(im, name);
  ox_known *owned = NULL;
  const ox_known *k = NULL;
  if (ox_is_op(p, "Constant")) {
    for (size_t i = 0; i < p->proto->n_attribute; i++)
      if (p->proto->attribute[i]->name && strcmp(p->proto->attribute[i]->name, "value") == 0 &&
          p->proto->attribute[i]->t)
        tf_status_free(ox_known_from_tensor(p->proto->attribute[i]->t, "pattern", &owned));
    k = owned;
  } else if (!p && name) {
    ox_value *v = ox_value_find(im, name);
    k = v ? v->known : NULL;
  }
  bool lower = k && !k->is_float && k->rank >= 2 && k->shape[k->rank - 1] == k->shape[k->rank - 2];
  const int64_t t = lower ? k->shape[k->rank - 1] : 0;
  lower = lower && t >= 1 && t <= 8192 && k->count == t * t; /* every leading axis 1; known values are small */
  for (int64_t i = 0; lower && i < t; i++)
    for (int64_t j = 0; lower && j < t; j++)
      lower = (k->ints[i * t + j].size != 0) == (j <= i) && k->ints[i * t + j].symbol < 0;
  ox_known_free(owned);
  return lower;
}

/* ox_ints_of() of `name`, or of what the Unsqueeze or Cast producing it reads (the exporter spells a
 * slice's start as Unsqueeze(Constant 0)). */
static int32_t ints_through(ox_import *im, const char *name, int64_t *out, int32_t max) {
  ox_node *p = ox_producer(im, name);
  return ox_is_op(p, "Unsqueeze") || ox_is_op(p, "Cast") ? ox_ints_of(im, ox_input(p, 0), out, max)
                                                         : ox_ints_of(im, name, out, max);
}

/* Whether Slice node `slice` keeps a top-left corner: every start 0, every step 1. */
static bool slices_corner(ox_import *im, const ox_node *slice) {
  int64_t values[2 * TF_MAX_RANK];
  const int32_t n = ints_through(im, ox_input(slice, 1), values, 2 * TF_MAX_RANK);
  for (int32_t i = 0; i < n; i++)
    if (values[i] != 0)
      return false;
  const int32_t steps = ox_input(slice, 4) ? ints_through(im, ox_input(slice, 4), values, 2 * TF_MAX_RANK) : 0;
  for (int32_t i = 0; i < steps; i++)
    if (values[i] != 1)
      return false;
  return n > 0 && steps >= 0;
}

/* True when `cond` is [Cast](B), B under Slices that keep its top-left corner (`bias[:, :, :t, :t]`
 * exports as one Slice per axis), of a lower-triangular B (whose corners are lower-triangular too,
 * whatever the ends): true where key j is visible. */
static bool is_visible_mask(ox_import *im, const char *cond) {
  ox_node *node = ox_producer(im, cond);
  if (ox_is_op(node, "Cast")) {
    cond = ox_input(node, 0);
    node = ox_producer(im, cond);
  }
  for (int32_t depth = 0; ox_is_op(node, "Slice") && depth < TF_MAX_RANK; depth++) {
    if (!slices_corner(im, node))
      return false;
    cond = ox_input(node, 0);
    node = ox_producer(im, cond);
  }
  return (!node || ox_is_op(node, "Constant")) && is_lower_triangular(im, cond);
}

/* Whether `fill` masks a score out: -inf, or a number no score reaches (torch.finfo(dtype).min,
 * f16's -65504 the largest of them). */
static bool is_mask_fill(ox_import *im, const char *name) {
  double fill;
  return ox_scalar_of(im, name, &fill, NULL) && fill <= -65504.0;
}

/* Whether `name` is d ** 0.5 of a traced size: Pow(...), maybe made a tensor of the scores' dtype
 * through Casts and an Add to a ConstantOfShape (Hugging Face GPT-2's torch.full([], d ** 0.5,
 * dtype=...) exports as Add(ConstantOfShape(shape []), Cast(Pow(...)))). */
static bool is_computed_root(ox_import *im, const char *name) {
  ox_node *p = ox_producer(im, name);
  for (int32_t depth = 0; depth < 6 && p && !ox_is_op(p, "Pow"); depth++) {
    if (ox_is_op(p, "Cast")) {
      p = ox_producer(im, ox_input(p, 0));
    } else if (ox_is_op(p, "Add") && ox_is_op(ox_producer(im, ox_input(p, 0)), "ConstantOfShape")) {
      p = ox_producer(im, ox_input(p, 1));
    } else if (ox_is_op(p, "Add") && ox_is_op(ox_producer(im, ox_input(p, 1)), "ConstantOfShape")) {
      p = ox_producer(im, ox_input(p, 0));
    } else {
      return false;
    }
  }
  return ox_is_op(p, "Pow");
}

void ox_match_attention(ox_import *im, ox_node *top) {
  static const int64_t heads_first[4] = {0, 2, 1, 3}, keys_transposed[4] = {0, 2, 3, 1}, swap_last[4] = {0, 1, 3, 2};
  if (!ox_is_op(top, "Reshape"))
    return;
  ox_node *merge = ox_producer(im, ox_input(top, 0));
  if (!ox_is_op(merge, "Transpose") || !ox_perm_is(merge, heads_first, 4))
    return;
  ox_node *mix = ox_producer(im, ox_input(merge, 0));
  if (!ox_is_op(mix, "MatMul"))
    return;
  ox_node *softmax = ox_producer(im, ox_input(mix, 0));
  if (!ox_is_op(softmax, "Softmax") ||
      (ox_attr_int(softmax, "axis", -1) != -1 && ox_attr_int(softmax, "axis", -1) != 3))
    return;
  ox_node *scores = ox_producer(im, ox_input(softmax, 0));
  bool causal = false;
  if (ox_is_op(scores, "Where")) {
    /* Where(masked, fill, scores) (masked_fill of ~tril), or Where(visible, scores, fill) (HF GPT-2) */
    if (is_causal_mask(im, ox_input(scores, 0)) && is_mask_fill(im, ox_input(scores, 1)))
      scores = ox_producer(im, ox_input(scores, 2));
    else if (is_visible_mask(im, ox_input(scores, 0)) && is_mask_fill(im, ox_input(scores, 2)))
      scores = ox_producer(im, ox_input(scores, 1));
    else
      return;
    causal = true;
  }
  double scale = 1.0, c;
  const char *computed_scale = NULL; /* a scale computed from shapes: folded when the node is emitted */
  const bool divides = ox_is_op(scores, "Div");
  if ((divides || ox_is_op(scores, "Mul")) && ox_scalar_of(im, ox_input(scores, 1), &c, NULL) && c != 0) {
    scale = divides ? 1.0 / c : c;
    scores = ox_producer(im, ox_input(scores, 0));
  } else if ((divides || ox_is_op(scores, "Mul")) && is_computed_root(im, ox_input(scores, 1))) {
    computed_scale = ox_input(scores, 1); /* PyTorch: d ** 0.5 of a traced size */
    scores = ox_producer(im, ox_input(scores, 0));
  }
  // PyTorch 1.13 exports a bf16 model's scores scaled by a shape-derived f32 through a Cast to f32
  // (the fused op computes in f32 anyway)
  if (ox_is_op(scores, "Cast") && ox_attr_int(scores, "to", 0) == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    scores = ox_producer(im, ox_input(scores, 0));
  if (!ox_is_op(scores, "MatMul"))
    return;
  const char *q, *k, *v, *q_shape, *k_shape, *v_shape;
  if (!split_heads(im, ox_producer(im, ox_input(scores, 0)), heads_first, &q, &q_shape))
    return;
  ox_node *keys = ox_producer(im, ox_input(scores, 1));
  if (!split_heads(im, keys, keys_transposed, &k, &k_shape)) {
    if (!ox_is_op(keys, "Transpose") || !ox_perm_is(keys, swap_last, 4) ||
        !split_heads(im, ox_producer(im, ox_input(keys, 0)), heads_first, &k, &k_shape))
      return;
  }
  if (!split_heads(im, ox_producer(im, ox_input(mix, 1)), heads_first, &v, &v_shape))
    return;
  top->fused = OX_ATTENTION;
  top->fused_inputs[0] = q;
  top->fused_inputs[1] = k;
  top->fused_inputs[2] = v;
  top->fused_inputs[3] = q_shape;
  top->fused_inputs[4] = computed_scale;
  top->inputs = top->fused_inputs;
  top->n_inputs = computed_scale ? 5 : 4;
  top->causal = causal;
  top->scale = scale;
  top->scale_divides = computed_scale && divides;
}
