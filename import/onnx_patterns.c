/* Patterns that torch.onnx.export spells as several operators and tightfit has one op for:
 *   x * 0.5 * (1 + erf(x / sqrt 2))                        -> gelu (exact)
 *   x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))    -> gelu (tanh approximation: torch's
 *                                                              approximate="tanh", GPT-2's gelu_new)
 *   view/transpose q, k, v; q @ k^T; scale; causal mask;    -> attention (fused, causal or not)
 *     softmax; @ v; transpose; view back
 *   (x - mean) / sqrt(var + eps) * gamma + beta             -> layer_norm (the opset < 17 spelling)
 *   x * rsqrt(mean(x^2) + eps) * gamma, or x / sqrt(..)     -> rms_norm (Llama's RMSNorm written out)
 *   x * sigmoid(x)                                          -> silu
 *   MatMul(x, Transpose(W)) with W 2-d                      -> matmul with transpose_b
 *   AveragePool(Pad(x, zeros around H and W))               -> avg_pool2d with padding (torch's
 *                                                              avg_pool2d(padding=p) export)
 * A rewritten node takes the pattern's real inputs; the nodes it covers are then emitted only when
 * something else reads them (ox_mark_live), so a pattern used elsewhere stays correct. */
#include <math.h>
#include <string.h>

#include "core/half_bits.h"
#include "import/onnx_internal.h"

static ox_node *producer(ox_import *im, const char *name) {
  int32_t index = name ? tf_strmap_get(&im->producers, name) : -1;
  return index < 0 ? NULL : &im->nodes[index];
}

static bool is_op(const ox_node *node, const char *op_type) {
  return node && node->fused == OX_PLAIN && strcmp(node->proto->op_type, op_type) == 0;
}

static const char *in(const ox_node *node, int32_t i) {
  return node && i < node->n_inputs && node->inputs[i] && *node->inputs[i] ? node->inputs[i] : NULL;
}

static bool same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

static int32_t ints_of(ox_import *im, const char *name, int64_t *out, int32_t max);

/* The one number of a Constant node or initializer named `name`, and its dtype (dtype may be NULL). */
static bool scalar_of(ox_import *im, const char *name, double *value, tf_dtype *dtype) {
  const Onnx__TensorProto *t = NULL;
  ox_node *p = producer(im, name);
  if (is_op(p, "Constant")) {
    for (size_t i = 0; i < p->proto->n_attribute; i++)
      if (p->proto->attribute[i]->name && strcmp(p->proto->attribute[i]->name, "value") == 0)
        t = p->proto->attribute[i]->t;
  } else if (!p) {
    ox_value *v = name ? ox_value_find(im, name) : NULL;
    t = v ? v->initializer : NULL;
  }
  if (!t)
    return false;
  ox_known *k;
  tf_status status = ox_known_from_tensor(t, "pattern", &k);
  if (status) {
    tf_status_free(status);
    return false;
  }
  bool one = k->count == 1;
  if (one)
    *value = k->is_float ? k->reals[0] : (double)k->ints[0].size;
  if (dtype)
    *dtype = k->dtype;
  ox_known_free(k);
  return one;
}

/* `expected` as a constant of `dtype` holds it: rounded to nearest even for f16 and bf16. */
static double as_stored(double expected, tf_dtype dtype) {
  if (dtype != TF_F16 && dtype != TF_BF16)
    return expected;
  float f = (float)expected;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits = dtype == TF_BF16 ? tf_f32_bits_from_bf16(tf_bf16_from_f32_bits(bits))
                          : tf_f32_bits_from_f16(tf_f16_from_f32_bits(bits));
  memcpy(&f, &bits, 4);
  return f;
}

/* Whether `name` is one number within `tolerance` of `expected` as its dtype stores it (a bf16
 * model's sqrt(2) is 1.4140625). */
static bool is_scalar(ox_import *im, const char *name, double expected, double tolerance) {
  double value;
  tf_dtype dtype;
  return scalar_of(im, name, &value, &dtype) && fabs(value - as_stored(expected, dtype)) <= tolerance;
}

static bool perm_is(const ox_node *node, const int64_t *perm, int32_t n) {
  int64_t found[TF_MAX_RANK];
  return ox_attr_ints(node, "perm", found, TF_MAX_RANK) == n && memcmp(found, perm, (size_t)n * sizeof(int64_t)) == 0;
}

/* x when `add` is Add(Erf(x / sqrt2 or x * 1/sqrt2), 1) */
static const char *erf_plus_one_of(ox_import *im, const ox_node *add) {
  if (!is_op(add, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *erf = producer(im, in(add, side));
    if (!is_op(erf, "Erf") || !is_scalar(im, in(add, 1 - side), 1.0, 0))
      continue;
    ox_node *scale = producer(im, in(erf, 0));
    if (is_op(scale, "Div") && is_scalar(im, in(scale, 1), sqrt(2.0), 1e-5))
      return in(scale, 0);
    if (is_op(scale, "Mul") && is_scalar(im, in(scale, 1), sqrt(0.5), 1e-6))
      return in(scale, 0);
  }
  return NULL;
}

/* x when `name` is x^3: Pow(x, 3), or x * (x * x) in any order of the operands. */
static const char *cube_of(ox_import *im, const char *name) {
  ox_node *p = producer(im, name);
  if (is_op(p, "Pow") && is_scalar(im, in(p, 1), 3.0, 0))
    return in(p, 0);
  if (!is_op(p, "Mul"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *square = producer(im, in(p, 1 - side));
    const char *x = in(p, side);
    if (is_op(square, "Mul") && same(in(square, 0), x) && same(in(square, 1), x))
      return x;
  }
  return NULL;
}

/* The two operands of `node` (a binary op) as (the one that is the scalar `value`, the other): the
 * other's name, or NULL when neither operand is that scalar. */
static const char *other_than_scalar(ox_import *im, const ox_node *node, double value, double tolerance) {
  for (int32_t side = 0; side < 2; side++)
    if (is_scalar(im, in(node, side), value, tolerance))
      return in(node, 1 - side);
  return NULL;
}

/* x when `add` is Add(Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)), 1), the operands in any order
 * (sqrt(2/pi) = 0.7978845608028654) */
static const char *tanh_plus_one_of(ox_import *im, const ox_node *add) {
  if (!is_op(add, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *tanh = producer(im, in(add, side));
    if (!is_op(tanh, "Tanh") || !is_scalar(im, in(add, 1 - side), 1.0, 0))
      continue;
    ox_node *scale = producer(im, in(tanh, 0));
    ox_node *sum = is_op(scale, "Mul") ? producer(im, other_than_scalar(im, scale, 0.7978845608028654, 1e-5)) : NULL;
    if (!is_op(sum, "Add"))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      ox_node *term = producer(im, in(sum, 1 - j));
      const char *x = in(sum, j);
      if (is_op(term, "Mul") && same(cube_of(im, other_than_scalar(im, term, 0.044715, 1e-5)), x))
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
  if (!is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *inner = producer(im, in(top, side));
    const char *other = in(top, 1 - side);
    if (!is_op(inner, "Mul"))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      const char *x = NULL;
      ox_fused kind = OX_GELU_ERF;
      if (is_scalar(im, other, 0.5, 0)) {
        const char *gelu_x = gelu_plus_one_of(im, producer(im, in(inner, 1 - j)), &kind);
        x = same(gelu_x, in(inner, j)) ? gelu_x : NULL;
      } else if (is_scalar(im, in(inner, 1 - j), 0.5, 0)) {
        const char *gelu_x = gelu_plus_one_of(im, producer(im, other), &kind);
        x = same(gelu_x, in(inner, j)) ? gelu_x : NULL;
        if (!x) { /* x * (0.5 * (1 + erf(...))): PyTorch 2.x's dynamo exporter */
          gelu_x = gelu_plus_one_of(im, producer(im, in(inner, j)), &kind);
          x = same(gelu_x, other) ? gelu_x : NULL;
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

/* q3 and its 4-d shape when `node` is Transpose(Reshape(q3, shape), perm). */
static bool split_heads(ox_import *im, const ox_node *node, const int64_t *perm, const char **x, const char **shape) {
  if (!is_op(node, "Transpose") || !perm_is(node, perm, 4))
    return false;
  ox_node *reshape = producer(im, in(node, 0));
  if (!is_op(reshape, "Reshape"))
    return false;
  *x = in(reshape, 0);
  *shape = in(reshape, 1);
  return *x && *shape;
}

/* True when `cond` is [Cast](Not(Trilu(ones, upper=0))): masked where j > i. */
static bool is_causal_mask(ox_import *im, const char *cond) {
  ox_node *node = producer(im, cond);
  if (is_op(node, "Cast"))
    node = producer(im, in(node, 0));
  if (!is_op(node, "Not"))
    return false;
  ox_node *trilu = producer(im, in(node, 0));
  if (!is_op(trilu, "Trilu") || ox_attr_int(trilu, "upper", 1) != 0)
    return false;
  return !in(trilu, 1) || is_scalar(im, in(trilu, 1), 0, 0);
}

/* True when `name` (a Constant node's output or a known initializer) is a tensor [1, .., 1, T, T]
 * that is nonzero exactly where j <= i: a causal mask of visible keys (Hugging Face GPT-2's `bias`
 * buffer, torch.tril of ones). */
static bool is_lower_triangular(ox_import *im, const char *name) {
  ox_node *p = producer(im, name);
  ox_known *owned = NULL;
  const ox_known *k = NULL;
  if (is_op(p, "Constant")) {
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

/* ints_of() of `name`, or of what the Unsqueeze or Cast producing it reads (the exporter spells a
 * slice's start as Unsqueeze(Constant 0)). */
static int32_t ints_through(ox_import *im, const char *name, int64_t *out, int32_t max) {
  ox_node *p = producer(im, name);
  return is_op(p, "Unsqueeze") || is_op(p, "Cast") ? ints_of(im, in(p, 0), out, max) : ints_of(im, name, out, max);
}

/* Whether Slice node `slice` keeps a top-left corner: every start 0, every step 1. */
static bool slices_corner(ox_import *im, const ox_node *slice) {
  int64_t values[2 * TF_MAX_RANK];
  const int32_t n = ints_through(im, in(slice, 1), values, 2 * TF_MAX_RANK);
  for (int32_t i = 0; i < n; i++)
    if (values[i] != 0)
      return false;
  const int32_t steps = in(slice, 4) ? ints_through(im, in(slice, 4), values, 2 * TF_MAX_RANK) : 0;
  for (int32_t i = 0; i < steps; i++)
    if (values[i] != 1)
      return false;
  return n > 0 && steps >= 0;
}

/* True when `cond` is [Cast](B), B under Slices that keep its top-left corner (`bias[:, :, :t, :t]`
 * exports as one Slice per axis), of a lower-triangular B (whose corners are lower-triangular too,
 * whatever the ends): true where key j is visible. */
static bool is_visible_mask(ox_import *im, const char *cond) {
  ox_node *node = producer(im, cond);
  if (is_op(node, "Cast")) {
    cond = in(node, 0);
    node = producer(im, cond);
  }
  for (int32_t depth = 0; is_op(node, "Slice") && depth < TF_MAX_RANK; depth++) {
    if (!slices_corner(im, node))
      return false;
    cond = in(node, 0);
    node = producer(im, cond);
  }
  return (!node || is_op(node, "Constant")) && is_lower_triangular(im, cond);
}

/* Whether `fill` masks a score out: -inf, or a number no score reaches (torch.finfo(dtype).min,
 * f16's -65504 the largest of them). */
static bool is_mask_fill(ox_import *im, const char *name) {
  double fill;
  return scalar_of(im, name, &fill, NULL) && fill <= -65504.0;
}

/* Whether `name` is d ** 0.5 of a traced size: Pow(...), maybe made a tensor of the scores' dtype
 * through Casts and an Add to a ConstantOfShape (Hugging Face GPT-2's torch.full([], d ** 0.5,
 * dtype=...) exports as Add(ConstantOfShape(shape []), Cast(Pow(...)))). */
static bool is_computed_root(ox_import *im, const char *name) {
  ox_node *p = producer(im, name);
  for (int32_t depth = 0; depth < 6 && p && !is_op(p, "Pow"); depth++) {
    if (is_op(p, "Cast")) {
      p = producer(im, in(p, 0));
    } else if (is_op(p, "Add") && is_op(producer(im, in(p, 0)), "ConstantOfShape")) {
      p = producer(im, in(p, 1));
    } else if (is_op(p, "Add") && is_op(producer(im, in(p, 1)), "ConstantOfShape")) {
      p = producer(im, in(p, 0));
    } else {
      return false;
    }
  }
  return is_op(p, "Pow");
}

static void match_attention(ox_import *im, ox_node *top) {
  static const int64_t heads_first[4] = {0, 2, 1, 3}, keys_transposed[4] = {0, 2, 3, 1}, swap_last[4] = {0, 1, 3, 2};
  if (!is_op(top, "Reshape"))
    return;
  ox_node *merge = producer(im, in(top, 0));
  if (!is_op(merge, "Transpose") || !perm_is(merge, heads_first, 4))
    return;
  ox_node *mix = producer(im, in(merge, 0));
  if (!is_op(mix, "MatMul"))
    return;
  ox_node *softmax = producer(im, in(mix, 0));
  if (!is_op(softmax, "Softmax") || (ox_attr_int(softmax, "axis", -1) != -1 && ox_attr_int(softmax, "axis", -1) != 3))
    return;
  ox_node *scores = producer(im, in(softmax, 0));
  bool causal = false;
  if (is_op(scores, "Where")) {
    /* Where(masked, fill, scores) (masked_fill of ~tril), or Where(visible, scores, fill) (HF GPT-2) */
    if (is_causal_mask(im, in(scores, 0)) && is_mask_fill(im, in(scores, 1)))
      scores = producer(im, in(scores, 2));
    else if (is_visible_mask(im, in(scores, 0)) && is_mask_fill(im, in(scores, 2)))
      scores = producer(im, in(scores, 1));
    else
      return;
    causal = true;
  }
  double scale = 1.0, c;
  const char *computed_scale = NULL; /* a scale computed from shapes: folded when the node is emitted */
  const bool divides = is_op(scores, "Div");
  if ((divides || is_op(scores, "Mul")) && scalar_of(im, in(scores, 1), &c, NULL) && c != 0) {
    scale = divides ? 1.0 / c : c;
    scores = producer(im, in(scores, 0));
  } else if ((divides || is_op(scores, "Mul")) && is_computed_root(im, in(scores, 1))) {
    computed_scale = in(scores, 1); /* PyTorch: d ** 0.5 of a traced size */
    scores = producer(im, in(scores, 0));
  }
  // PyTorch 1.13 exports a bf16 model's scores scaled by a shape-derived f32 through a Cast to f32
  // (the fused op computes in f32 anyway)
  if (is_op(scores, "Cast") && ox_attr_int(scores, "to", 0) == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
    scores = producer(im, in(scores, 0));
  if (!is_op(scores, "MatMul"))
    return;
  const char *q, *k, *v, *q_shape, *k_shape, *v_shape;
  if (!split_heads(im, producer(im, in(scores, 0)), heads_first, &q, &q_shape))
    return;
  ox_node *keys = producer(im, in(scores, 1));
  if (!split_heads(im, keys, keys_transposed, &k, &k_shape)) {
    if (!is_op(keys, "Transpose") || !perm_is(keys, swap_last, 4) ||
        !split_heads(im, producer(im, in(keys, 0)), heads_first, &k, &k_shape))
      return;
  }
  if (!split_heads(im, producer(im, in(mix, 1)), heads_first, &v, &v_shape))
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

/* ReduceMean over the last axis only, keeping it. */
static bool is_last_axis_mean(const ox_node *node) {
  int64_t axes[TF_MAX_RANK];
  return is_op(node, "ReduceMean") && ox_attr_ints(node, "axes", axes, TF_MAX_RANK) == 1 && axes[0] == -1 &&
         ox_attr_int(node, "keepdims", 1) == 1;
}

/* Add(Mul(Div(Sub(x, mean(x)), Sqrt(Add(mean(Pow(Sub, 2)), eps))), gamma), beta), operands of Add and
 * Mul in either order. */
static void match_layer_norm(ox_import *im, ox_node *top) {
  if (!is_op(top, "Add"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *scale = producer(im, in(top, side));
    const char *beta = in(top, 1 - side);
    if (!is_op(scale, "Mul") || !beta || producer(im, beta))
      continue;
    for (int32_t j = 0; j < 2; j++) {
      ox_node *div = producer(im, in(scale, j));
      const char *gamma = in(scale, 1 - j);
      if (!is_op(div, "Div") || !gamma || producer(im, gamma))
        continue;
      ox_node *centre = producer(im, in(div, 0)), *root = producer(im, in(div, 1));
      if (!is_op(centre, "Sub") || !is_op(root, "Sqrt"))
        continue;
      ox_node *mean = producer(im, in(centre, 1));
      if (!is_last_axis_mean(mean) || !same(in(mean, 0), in(centre, 0)))
        continue;
      ox_node *shift = producer(im, in(root, 0));
      double epsilon;
      if (!is_op(shift, "Add") || !scalar_of(im, in(shift, 1), &epsilon, NULL))
        continue;
      ox_node *variance = producer(im, in(shift, 0));
      if (!is_last_axis_mean(variance))
        continue;
      ox_node *square = producer(im, in(variance, 0));
      if (!is_op(square, "Pow") || !same(in(square, 0), in(div, 0)) || !is_scalar(im, in(square, 1), 2.0, 0))
        continue;
      top->fused = OX_LAYER_NORM;
      top->fused_inputs[0] = in(centre, 0);
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
  ox_node *p = producer(im, name);
  if (is_op(p, "Pow") && is_scalar(im, in(p, 1), 2.0, 0))
    return in(p, 0);
  return is_op(p, "Mul") && same(in(p, 0), in(p, 1)) ? in(p, 0) : NULL;
}

/* x (and *epsilon) when `name` is Sqrt(Add(ReduceMean_last(x^2), eps)), eps on either side. */
static const char *rms_root_of(ox_import *im, const char *name, double *epsilon) {
  ox_node *root = producer(im, name);
  ox_node *shift = is_op(root, "Sqrt") ? producer(im, in(root, 0)) : NULL;
  if (!is_op(shift, "Add"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *mean = producer(im, in(shift, side));
    if (is_last_axis_mean(mean) && scalar_of(im, in(shift, 1 - side), epsilon, NULL))
      return square_of(im, in(mean, 0));
  }
  return NULL;
}

/* x (and *epsilon) when `name` is x / root or x * inverse(root) (Reciprocal(root) or Div(1, root)),
 * root an rms_root_of x, the product's operands in either order. */
static const char *rms_normalized_of(ox_import *im, const char *name, double *epsilon) {
  ox_node *p = producer(im, name);
  if (is_op(p, "Div")) {
    const char *x = rms_root_of(im, in(p, 1), epsilon);
    return same(x, in(p, 0)) ? x : NULL;
  }
  if (!is_op(p, "Mul"))
    return NULL;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *inverse = producer(im, in(p, side));
    const char *root = is_op(inverse, "Reciprocal")                                     ? in(inverse, 0)
                       : is_op(inverse, "Div") && is_scalar(im, in(inverse, 0), 1.0, 0) ? in(inverse, 1)
                                                                                        : NULL;
    const char *x = root ? rms_root_of(im, root, epsilon) : NULL;
    if (x && same(x, in(p, 1 - side)))
      return x;
  }
  return NULL;
}

/* What `name` is a Cast of, or `name` itself. */
static const char *uncast(ox_import *im, const char *name) {
  ox_node *p = producer(im, name);
  return is_op(p, "Cast") ? in(p, 0) : name;
}

/* Mul(normalized, gamma) in either order, gamma an initializer and normalized an rms_normalized_of x;
 * also Hugging Face's half-model spelling, normalized in f32 between casts: Mul(gamma,
 * Cast(rms_normalized_of(Cast(x)))) (the fused op computes in f32 too, and rounds once). */
static void match_rms_norm(ox_import *im, ox_node *top) {
  if (!is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    const char *gamma = in(top, 1 - side);
    double epsilon = 0;
    const char *x = gamma && !producer(im, gamma) ? rms_normalized_of(im, uncast(im, in(top, side)), &epsilon) : NULL;
    if (!x)
      continue;
    if (uncast(im, in(top, side)) != in(top, side)) /* cast back: the f32 copy of x is a Cast of x */
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
  if (!is_op(top, "Mul"))
    return;
  for (int32_t side = 0; side < 2; side++) {
    ox_node *sigmoid = producer(im, in(top, side));
    if (is_op(sigmoid, "Sigmoid") && same(in(sigmoid, 0), in(top, 1 - side))) {
      top->fused = OX_SILU;
      top->fused_inputs[0] = in(top, 1 - side);
      top->inputs = top->fused_inputs;
      top->n_inputs = 1;
      return;
    }
  }
}

/* MatMul(x, Transpose(W, perm [1, 0])) and Gemm(x, Transpose(W)): W read transposed. */
static void match_transposed_operand(ox_import *im, ox_node *node) {
  static const int64_t swap[2] = {1, 0};
  if (!is_op(node, "MatMul") && !is_op(node, "Gemm"))
    return;
  ox_node *transpose = producer(im, in(node, 1));
  if (!is_op(transpose, "Transpose") || !perm_is(transpose, swap, 2) || !in(transpose, 0))
    return;
  int32_t n = node->n_inputs < 4 ? node->n_inputs : 4;
  for (int32_t i = 0; i < n; i++)
    node->fused_inputs[i] = node->inputs[i];
  node->fused_inputs[1] = in(transpose, 0);
  node->inputs = node->fused_inputs;
  node->n_inputs = n;
  node->transpose_b = true;
}

/* The integers of a Constant node or known initializer named `name`, at most max; -1 otherwise. */
static int32_t ints_of(ox_import *im, const char *name, int64_t *out, int32_t max) {
  const Onnx__TensorProto *t = NULL;
  ox_node *p = producer(im, name);
  if (is_op(p, "Constant")) {
    for (size_t i = 0; i < p->proto->n_attribute; i++)
      if (p->proto->attribute[i]->name && strcmp(p->proto->attribute[i]->name, "value") == 0)
        t = p->proto->attribute[i]->t;
  }
  ox_known *k = NULL;
  const ox_known *known = NULL;
  if (t) {
    tf_status status = ox_known_from_tensor(t, "pattern", &k);
    tf_status_free(status);
    known = k;
  } else if (!p && name) {
    ox_value *v = ox_value_find(im, name);
    known = v ? v->known : NULL;
  }
  int32_t n = known && !known->is_float && known->count <= max ? (int32_t)known->count : -1;
  for (int32_t i = 0; i < n; i++)
    out[i] = known->ints[i].symbol < 0 ? known->ints[i].size : -1;
  ox_known_free(k);
  return n;
}

static void match_padded_pool(ox_import *im, ox_node *node) {
  if (!is_op(node, "AveragePool"))
    return;
  ox_node *pad = producer(im, in(node, 0));
  if (!is_op(pad, "Pad") || (in(pad, 2) && !is_scalar(im, in(pad, 2), 0, 0)))
    return;
  const Onnx__AttributeProto *mode = ox_attr(pad, "mode");
  if (mode && mode->has_s && !(mode->s.len == 8 && memcmp(mode->s.data, "constant", 8) == 0))
    return;
  int64_t pads[8], own[4];
  int32_t n = im->opset >= 11 ? ints_of(im, in(pad, 1), pads, 8) : ox_attr_ints(pad, "pads", pads, 8);
  int32_t n_own = ox_attr_ints(node, "pads", own, 4);
  for (int32_t i = 0; i < n_own && i < 4; i++)
    if (own[i] != 0)
      return;
  // [N, C, H, W] begins then ends: zero on N and C, the same at both ends of H and of W.
  if (n != 8 || pads[0] || pads[1] || pads[4] || pads[5] || pads[2] != pads[6] || pads[3] != pads[7] || pads[2] < 0 ||
      pads[3] < 0)
    return;
  node->fused_inputs[0] = in(pad, 0);
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
    match_attention(im, &im->nodes[i]);
    match_rms_norm(im, &im->nodes[i]);
    match_silu(im, &im->nodes[i]);
  }
  for (int32_t i = 0; i < im->n_nodes; i++) {
    match_transposed_operand(im, &im->nodes[i]);
    match_padded_pool(im, &im->nodes[i]);
  }
}

void ox_mark_live(ox_import *im) {
  // Walk back from the outputs; nodes come in topological order, so one backward sweep suffices.
  for (size_t i = 0; i < im->onnx->n_output; i++) {
    ox_node *p = producer(im, im->onnx->output[i]->name);
    if (p)
      p->live = true;
  }
  for (int32_t i = im->n_nodes - 1; i >= 0; i--) {
    ox_node *node = &im->nodes[i];
    if (!node->live)
      continue;
    for (int32_t j = 0; j < node->n_inputs; j++) {
      ox_node *p = producer(im, in(node, j));
      if (p)
        p->live = true;
    }
  }
}
