/* Equal, Where, Not and the comparisons, folded on values known at import time (the end of this
 * file), and boolean masks computed from data (padding masks): Equal of data with a constant, Not,
 * Cast to BOOL, the comparisons, and Where with one branch a constant (masked_fill). tightfit has no
 * boolean ops, so a mask on data is an f32 tensor of exact 0s and 1s built from existing element-wise
 * ops, and Where becomes arithmetic that is exact for such masks:
 *
 *   nonzero(x)     = 1 - relu(1 - |x|)               x of integer or bool type, cast to f32
 *                  = 1 - relu(1 - |x| 2^100 2^49)    x of a float type (Cast to BOOL)
 *   x == k         = relu(1 - |x - k|)               integer or bool x, k an integer constant, |k| < 2^24
 *                  = relu(1 - |x - k| 2^100 2^49)    float x, k finite (no gradient: a stop_gradient)
 *                  = relu(+-sign(keep(x, isinf x)))  float x, k = +-inf (onnx_finite.c's ox_inf_sign)
 *   x == y         = the same of two data tensors    integers below 2^24; floats plus relu(sx sy) of
 *                                                    their infinities' signs (inf - inf is NaN)
 *   x < y, x > y   = 1 - relu(1 - relu(d))           integers, d = y - x or x - y (+ 1 for <=, >=);
 *                                                    floats, d scaled by 2^149, x >= y = 1 - [y > x]
 *                                                    where neither is NaN (a NaN compares false)
 *   not m          = 1 - m
 *   where(m, v, x) = keep(x, 1 - m) + v m            v finite
 *                  = keep(x, 1 - m) + log(1 - m)     v = -inf (log 0 = -inf, log 1 = 0)
 *                  = keep(x, 1 - m) - log(1 - m)     v = +inf
 *
 * keep(x, k) is the select op: x where k != 0, else 0, a NaN or an infinity of x included, where
 * x (1 - m) would be NaN (a log of padding's zeros, masked_fill'ed to 0). For an integer x cast to f32,
 * x != k leaves |x - k| >= 1 (both are whole numbers; a cast that rounds a large x keeps it far from
 * a small k), so each mask is exactly 0 or 1, and where() gives x or v bit for bit; its gradient
 * with respect to x is keep(dy, 1 - m), 0 where the fill is taken, as PyTorch's. Where of integer
 * data (BART's ids, masked_fill(ids == -100, pad)) computes in f32 and casts back: exact while the
 * ids and the fill are whole numbers below 2^24. Equal of float data scales the difference as
 * nonzero() does (equal_of). Where with both branches data, or both constants, selects each:
 * keep(a, m) + keep(b, 1 - m) (where_blend: the branch taken, whatever the other holds, as
 * torch.where(x > 0, x.log(), x) needs). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* |k| below this: an integer constant an f32 holds exactly. */
#define OX_MASK_EXACT_LIMIT 16777216.0

static tf_tensor_id one_minus(ox_import *im, const ox_node *node, tf_tensor_id x, tf_dtype dtype) {
  tf_tensor_id ids[2] = {ox_scalar(im, node, dtype, 1.0), x};
  return tf_graph_node(im->graph, TF_OP_SUB, ids, 2, NULL);
}

static tf_tensor_id binary_node(ox_import *im, tf_op op, tf_tensor_id a, tf_tensor_id b) {
  tf_tensor_id ids[2] = {a, b};
  return tf_graph_node(im->graph, op, ids, 2, NULL);
}

/* |x| (f32) scaled by 2^149, in two steps an f32 holds: the smallest subnormal then reaches 1. */
static tf_tensor_id scaled_to_one(ox_import *im, const ox_node *node, tf_tensor_id magnitude) {
  return binary_node(im, TF_OP_MUL, binary_node(im, TF_OP_MUL, magnitude, ox_scalar(im, node, TF_F32, 0x1p100)),
                     ox_scalar(im, node, TF_F32, 0x1p49));
}

/* Input i of `node` as an f32 tensor of 0s and 1s: where ONNX types it bool (`is_bool`) an f32
 * tensor is a mask this file made and is taken as it is; anything else through nonzero(), for
 * floats with |x| scaled by 2^149 first so that the smallest subnormal reaches 1 (a backend that
 * flushes subnormals, as a Vulkan driver may, counts those as zero). */
static tf_status mask_operand(ox_import *im, const ox_node *node, int32_t i, bool is_bool, tf_tensor_id *out) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype == TF_F32 && is_bool) {
    *out = x;
    return NULL;
  }
  tf_tensor_id magnitude = tf_unary(im->graph, TF_OP_ABS, dtype == TF_F32 ? x : tf_cast(im->graph, x, TF_F32));
  if (!ox_is_integer_dtype(dtype))
    magnitude = scaled_to_one(im, node, magnitude);
  tf_tensor_id off = tf_unary(im->graph, TF_OP_RELU, one_minus(im, node, magnitude, TF_F32));
  *out = one_minus(im, node, off, TF_F32);
  return ox_graph_error(im, node);
}

tf_status ox_nonzero_mask(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *out) {
  return mask_operand(im, node, i, false, out);
}

/* The value symbol `symbol` had when the model was traced (its default), or 1 for no symbol. */
static int64_t traced_value(ox_import *im, int32_t symbol) {
  int64_t default_value = 1, value;
  const char *name;
  if (symbol >= 0 && !tf_graph_symbol_at(im->graph, symbol, &name, &default_value, &value))
    return -1;
  return default_value;
}

/* Whether known `k` holds one value in every element and its shape broadcasts into data `x`'s
 * (each axis, counted from the last, 1 or x's own size, a symbolic one at the value it was traced
 * with): F.kl_div's zeros_like branch, and torch.full_like(x, nan) of a batch the trace fixed, folded to
 * a constant of the traced shape, fill as that one value. */
static bool fills_within(ox_import *im, const ox_known *k, tf_tensor_id x) {
  for (int64_t j = 1; j < k->count; j++) /* NaN fills too (torch.full_like(x, nan) in a where) */
    if (k->is_float ? k->reals[j] != k->reals[0] && !(isnan(k->reals[j]) && isnan(k->reals[0]))
                    : (k->ints[j].size != k->ints[0].size || k->ints[j].symbol >= 0))
      return false;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (k->rank > rank)
    return false;
  for (int32_t a = 1; a <= k->rank; a++) {
    const int64_t c = k->shape[k->rank - a];
    const tf_dim d = dims[rank - a];
    if (c != 1 && d.size * traced_value(im, d.symbol) != c)
      return false;
  }
  return true;
}

/* The single value of known input i beside data `x` of rank `rank` (a constant filled with one value
 * that broadcasts into x counts as that value), or an error naming what `what` needs (a constant of
 * higher rank would raise the output's). */
static tf_status known_scalar(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id x, int32_t rank,
                              const char *what, double *out) {
  const ox_known *k = ox_value_find(im, ox_input(node, i))->known;
  if ((k->count != 1 && !fills_within(im, k, x)) || (!k->is_float && k->ints[0].symbol >= 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of data with a constant of %lld values (only with one value)",
                   what, (long long)k->count);
  if (k->count == 1 && k->rank > rank)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of rank-%d data with a rank-%d constant (only of lower rank)",
                   what, (int)rank, (int)k->rank);
  *out = k->is_float ? k->reals[0] : (double)k->ints[0].size;
  return NULL;
}

/* Equal of a graph constant that one value fills (a mask of ones of symbolic shape, which a model
 * makes when given none: DistilBERT's torch.ones(input_shape)) with known scalar k: the constant 0/1
 * fill of that shape. NULL-status and *out TF_NO_TENSOR when x is not such a fill. */
static tf_status equal_of_fill(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t other, tf_tensor_id *out) {
  tf_tensor_info info;
  *out = TF_NO_TENSOR;
  if (!tf_graph_tensor(im->graph, x, &info) || info.kind != TF_CONSTANT || info.init.kind != TF_INIT_FILL)
    return NULL;
  double k;
  TF_RETURN_IF_ERROR(known_scalar(im, node, other, x, info.rank, "Equal", &k));
  *out = tf_graph_constant(im->graph, node->proto->output[0], TF_F32, info.declared,
                           tf_init_make(TF_INIT_FILL, info.init.a == k ? 1.0 : 0.0, 0));
  return ox_graph_error(im, node);
}

/* a == b of tensors (b broadcast): relu(1 - |a - b|) on f32 copies, with |a - b| scaled by 2^149
 * first for float data (`scaled`: the smallest nonzero difference, a subnormal, then reaches 1;
 * x - k is 0 only when x == k where subnormals are kept). PyTorch's == has no gradient: a float
 * mask is a stop_gradient. */
tf_tensor_id ox_equal_mask(ox_import *im, const ox_node *node, tf_tensor_id a, tf_tensor_id b, bool scaled) {
  tf_tensor_id distance = tf_unary(im->graph, TF_OP_ABS, binary_node(im, TF_OP_SUB, a, b));
  if (scaled)
    distance = scaled_to_one(im, node, distance);
  return tf_unary(im->graph, TF_OP_RELU, one_minus(im, node, distance, TF_F32));
}

/* a == b as ox_equal_mask of f32 copies; of two float tensors (`infinities`) plus relu(sa sb) of
 * their infinities' signs (ox_inf_sign), since inf - inf is NaN where inf == inf is true. */
static tf_status equal_of(ox_import *im, const ox_node *node, tf_tensor_id a, tf_tensor_id b, bool scaled,
                          bool infinities) {
  tf_tensor_id wide[2] = {a, b};
  for (int32_t i = 0; i < 2; i++)
    if (ox_dtype_of(im, wide[i]) != TF_F32)
      wide[i] = tf_cast(im->graph, wide[i], TF_F32);
  tf_tensor_id equal = ox_equal_mask(im, node, wide[0], wide[1], scaled);
  if (infinities)
    equal = binary_node(
        im, TF_OP_ADD, equal,
        tf_unary(im->graph, TF_OP_RELU,
                 binary_node(im, TF_OP_MUL, ox_inf_sign(im, node, wide[0]), ox_inf_sign(im, node, wide[1]))));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, scaled ? tf_unary(im->graph, TF_OP_STOP_GRADIENT, equal) : equal);
}

/* Equal of two data tensors of one type (Funnel's token_type_ids[:, :, None] == token_type_ids[:, None]):
 * integers and bool masks exact below 2^24, floats scaled. */
static tf_status data_equal(ox_import *im, const ox_node *node) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  const tf_dtype dtype = ox_dtype_of(im, a);
  if (dtype != ox_dtype_of(im, b))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Equal of %s and %s data (one type)", tf_dtype_name(dtype),
                   tf_dtype_name(ox_dtype_of(im, b)));
  return equal_of(im, node, a, b, !ox_is_integer_dtype(dtype), !ox_is_integer_dtype(dtype));
}

/* x == +inf (`positive`) or x == -inf of float data: relu(s) or relu(-s) of s = ox_inf_sign(x). */
static tf_status inf_equal(ox_import *im, const ox_node *node, tf_tensor_id x, bool positive) {
  if (ox_dtype_of(im, x) != TF_F32)
    x = tf_cast(im->graph, x, TF_F32);
  tf_tensor_id s = ox_inf_sign(im, node, x);
  tf_tensor_id mask = tf_unary(im->graph, TF_OP_RELU, positive ? s : tf_unary(im->graph, TF_OP_NEG, s));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, mask);
}

static tf_status mask_equal(ox_import *im, const ox_node *node) {
  const bool known0 = ox_is_known(im, ox_input(node, 0)), known1 = ox_is_known(im, ox_input(node, 1));
  if (!known0 && !known1)
    return data_equal(im, node);
  const int32_t data = known0 ? 1 : 0;
  tf_tensor_id x, filled;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, data, &x));
  TF_RETURN_IF_ERROR(equal_of_fill(im, node, x, 1 - data, &filled));
  if (filled != TF_NO_TENSOR)
    return ox_set_tensor(im, node, 0, filled);
  const tf_dtype dtype = ox_dtype_of(im, x);
  double k;
  TF_RETURN_IF_ERROR(known_scalar(im, node, 1 - data, x, ox_rank_of(im, x), "Equal", &k));
  /* f32 data is a mask this file made where ONNX says bool: Equal takes one type, so the constant
   * is bool too */
  if (!ox_is_integer_dtype(dtype) &&
      !(dtype == TF_F32 && ox_value_find(im, ox_input(node, 1 - data))->known->dtype == TF_U8)) {
    if (isnan(k))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Equal of float data with NaN (never true: write zeros instead)");
    if (isinf(k)) /* x == inf: relu(sign(keep(x, isinf(x)))), of -inf relu(-...) */
      return inf_equal(im, node, x, k > 0);
    return equal_of(im, node, x, ox_scalar(im, node, TF_F32, k), true, false); /* BLOOM's causal + mask == 0 */
  }
  if (k != floor(k) || fabs(k) >= OX_MASK_EXACT_LIMIT)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Equal of data with %g (only with a whole number below 2^24 in magnitude)", k);
  return equal_of(im, node, x, ox_scalar(im, node, TF_F32, k), false, false);
}

static tf_status mask_not(ox_import *im, const ox_node *node) {
  tf_tensor_id m;
  TF_RETURN_IF_ERROR(mask_operand(im, node, 0, true, &m));
  tf_tensor_id out = one_minus(im, node, m, TF_F32);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, out);
}

tf_status ox_convert_mask_cast(ox_import *im, const ox_node *node) {
  tf_tensor_id m;
  TF_RETURN_IF_ERROR(mask_operand(im, node, 0, false, &m));
  return ox_set_tensor(im, node, 0, m);
}

tf_tensor_id ox_mask_fill(ox_import *im, const ox_node *node, tf_tensor_id m, double v, tf_dtype dtype) {
  if (!isinf(v))
    return binary_node(im, TF_OP_MUL, m, ox_scalar(im, node, dtype, v));
  tf_tensor_id fill = tf_unary(im->graph, TF_OP_LOG, one_minus(im, node, m, dtype));
  return v > 0 ? tf_unary(im->graph, TF_OP_NEG, fill) : fill;
}

/* x where the mask m is 0, the constant v where it is 1, in x's dtype (see the top of the file). */
static tf_status masked_fill(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id m, double v,
                             tf_tensor_id *out) {
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32)
    m = tf_cast(im->graph, m, dtype);
  *out = binary_node(im, TF_OP_ADD, binary_node(im, TF_OP_KEEP, x, one_minus(im, node, m, dtype)),
                     ox_mask_fill(im, node, m, v, dtype));
  return ox_graph_error(im, node);
}

/* An error when input i is a known value of several elements or an initializer holding a value that
 * is not finite (a graph constant holds finite values only; one value takes ox_mask_fill). */
static tf_status finite_branch(ox_import *im, const ox_node *node, int32_t i) {
  const ox_value *v = ox_value_find(im, ox_input(node, i));
  ox_known *decoded = NULL;
  const ox_known *k = v->known;
  if (!k && v->initializer) {
    char what[512], label[256];
    snprintf(what, sizeof(what), "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
    TF_RETURN_IF_ERROR(ox_known_from_tensor(v->initializer, what, &decoded));
    k = decoded;
  }
  double bad = 0;
  for (int64_t e = 0; k && k->is_float && e < k->count && isfinite(bad); e++)
    bad = k->reals[e];
  ox_known_free(decoded);
  if (!isfinite(bad))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Where of two branches, input %" PRId32
                   " '%s' holding %g among several values (only finite constant "
                   "tensors; a single infinity is taken)",
                   i, ox_input(node, i), bad);
  return NULL;
}

/* Whether input i is a known value of one element (a number) of rank `rank` at most. */
static bool one_value(ox_import *im, const ox_node *node, int32_t i, int32_t rank) {
  const ox_value *v = ox_value_find(im, ox_input(node, i));
  return v && v->known && v->known->count == 1 && v->known->rank <= rank &&
         (v->known->is_float || v->known->ints[0].symbol < 0);
}

/* Where(m, a, b) of two numbers (an additive mask: torch.where(m, 0.0, -inf)): ox_mask_fill(m, a) +
 * ox_mask_fill(1 - m, b), of m's shape, an infinity included; integers in f32, cast back. */
static tf_status where_of_numbers(ox_import *im, const ox_node *node, tf_tensor_id m) {
  const ox_known *a = ox_value_find(im, ox_input(node, 1))->known, *b = ox_value_find(im, ox_input(node, 2))->known;
  const double va = a->is_float ? a->reals[0] : (double)a->ints[0].size;
  const double vb = b->is_float ? b->reals[0] : (double)b->ints[0].size;
  if (isnan(va) || isnan(vb))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Where filling NaN");
  if (a->is_float != b->is_float)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Where of a float and an integer branch (one type)");
  const tf_dtype dtype = a->is_float && (a->dtype == TF_F16 || a->dtype == TF_BF16) ? a->dtype : TF_F32;
  if (dtype != TF_F32)
    m = tf_cast(im->graph, m, dtype);
  tf_tensor_id out = binary_node(im, TF_OP_ADD, ox_mask_fill(im, node, m, va, dtype),
                                 ox_mask_fill(im, node, one_minus(im, node, m, dtype), vb, dtype));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, a->is_float ? out : tf_cast(im->graph, out, a->dtype));
}

/* Where(m, a, b) with both branches data (Funnel's token-type bias) or both constants: keep(a, m) +
 * keep(b, 1 - m), the branch taken bit for bit whatever the other holds (log's NaN in the branch not
 * taken: torch.where(x > 0, x.log(), 0)); two numbers take where_of_numbers; integers in f32
 * between casts. */
static tf_status where_blend(ox_import *im, const ox_node *node) {
  tf_tensor_id m, a, b;
  TF_RETURN_IF_ERROR(mask_operand(im, node, 0, true, &m));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 2));
  const int32_t rank = ox_rank_of(im, m);
  if (one_value(im, node, 1, rank) && one_value(im, node, 2, rank))
    return where_of_numbers(im, node, m);
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &a)); /* each branch has a value past here */
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &b));
  for (int32_t i = 1; i <= 2; i++)
    TF_RETURN_IF_ERROR(finite_branch(im, node, i));
  const tf_dtype dtype = ox_dtype_of(im, a);
  if (dtype != ox_dtype_of(im, b))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Where of %s and %s branches (one type)", tf_dtype_name(dtype),
                   tf_dtype_name(ox_dtype_of(im, b)));
  const tf_dtype compute = ox_is_integer_dtype(dtype) ? TF_F32 : dtype;
  if (compute != dtype) {
    a = tf_cast(im->graph, a, TF_F32);
    b = tf_cast(im->graph, b, TF_F32);
  }
  if (compute != TF_F32)
    m = tf_cast(im->graph, m, compute);
  tf_tensor_id out = binary_node(im, TF_OP_ADD, binary_node(im, TF_OP_KEEP, a, m),
                                 binary_node(im, TF_OP_KEEP, b, one_minus(im, node, m, compute)));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, compute != dtype ? tf_cast(im->graph, out, dtype) : out);
}

static tf_status mask_where(ox_import *im, const ox_node *node) {
  const bool known1 = ox_is_known(im, ox_input(node, 1)), known2 = ox_is_known(im, ox_input(node, 2));
  if (known1 == known2)
    return where_blend(im, node);
  const int32_t data = known1 ? 2 : 1;
  tf_tensor_id x, m;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, data, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32 && dtype != TF_F16 && dtype != TF_BF16 && !ox_is_integer_dtype(dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Where of %s data (only of float or integer data)",
                   tf_dtype_name(dtype));
  TF_RETURN_IF_ERROR(mask_operand(im, node, 0, true, &m));
  const int32_t rank = ox_rank_of(im, x) > ox_rank_of(im, m) ? ox_rank_of(im, x) : ox_rank_of(im, m);
  double v;
  TF_RETURN_IF_ERROR(known_scalar(im, node, 3 - data, x, rank, "Where", &v));
  if (isnan(v))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Where filling NaN");
  if (ox_is_integer_dtype(dtype) && (v != floor(v) || fabs(v) >= OX_MASK_EXACT_LIMIT))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Where of integer data filling %g (only a whole number below 2^24 in magnitude)", v);
  if (data == 1) /* Where(keep, x, v): the fill goes where the condition is 0 */
    m = one_minus(im, node, m, TF_F32);
  if (ox_is_integer_dtype(dtype)) /* ids filled (BART's masked_fill of -100 by the pad id): in f32, cast back */
    x = tf_cast(im->graph, x, TF_F32);
  tf_tensor_id out;
  TF_RETURN_IF_ERROR(masked_fill(im, node, x, m, v, &out));
  return ox_set_tensor(im, node, 0, ox_is_integer_dtype(dtype) ? tf_cast(im->graph, out, dtype) : out);
}

/* ---- Equal, Where and Not: folded on values known at import time (the shape arithmetic
 * torch.onnx.export writes for `expand(n, t)`: Where(Equal(shape, -1), ones, shape)), masks on data ---- */

/* Folds `node` (two inputs) by `op` when both inputs are known (*folded true; the result u8 for
 * And, Or and Xor); otherwise leaves it to the caller's path for data. */
static tf_status fold_pair(ox_import *im, const ox_node *node, char op, bool *folded) {
  *folded = false;
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const char *a = ox_input(node, 0), *b = ox_input(node, 1);
  if (!ox_is_known(im, a) || !ox_is_known(im, b))
    return NULL;
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_at(
      im, node, ox_fold_binary(op, ox_value_find(im, a)->known, ox_value_find(im, b)->known, ox_fold_room(im), &k)));
  if (op == 'A' || op == 'O' || op == 'X')
    k->dtype = TF_U8;
  *folded = true;
  return ox_set_known(im, node, 0, k);
}

tf_status ox_convert_equal(ox_import *im, const ox_node *node) {
  bool folded;
  TF_RETURN_IF_ERROR(fold_pair(im, node, '=', &folded));
  return folded ? NULL : mask_equal(im, node);
}

/* Greater, Less, GreaterOrEqual or LessOrEqual of data (a known side a constant), as a 0/1 mask
 * 1 - relu(1 - relu(d)), 1 where d >= 1 and 0 where d <= 0 or d is NaN (relu of a NaN is 0 on every
 * backend). Integer data (XLM's padding mask arange(T) < lengths[:, None]), cast to f32 (exact below
 * 2^24): d = a - b for > (b - a for <), plus 1 for the forms with equality. Float data: d = (a - b)
 * 2^149 for > (the smallest positive difference, a subnormal, then reaches 1; x - y is 0 only where
 * x == y where subnormals are kept; inf > inf is NaN: 0), and a >= b as (1 - [b > a]) times 0 where a
 * or b is NaN (ox_nan_mask), as PyTorch's comparisons with a NaN are false (inf >= inf true);
 * PyTorch's comparisons have no gradient: a stop_gradient. */
static tf_status compare_data(ox_import *im, const ox_node *node, char op) {
  tf_tensor_id x[2];
  bool integer[2];
  for (int32_t i = 0; i < 2; i++) {
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &x[i]));
    const tf_dtype dtype = ox_dtype_of(im, x[i]);
    integer[i] = ox_is_integer_dtype(dtype);
    if (dtype != TF_F32)
      x[i] = tf_cast(im->graph, x[i], TF_F32);
  }
  if (integer[0] != integer[1])
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%s of %s and %s data (one kind: integers or floats)",
                   node->proto->op_type, integer[0] ? "integer" : "float", integer[1] ? "integer" : "float");
  const bool greater = op == '>' || op == 'G', equality = op == 'G' || op == 'L';
  const bool flipped = integer[0] ? !greater : greater == equality; /* d = x[1] - x[0] */
  tf_tensor_id d = binary_node(im, TF_OP_SUB, x[flipped ? 1 : 0], x[flipped ? 0 : 1]);
  if (integer[0] && equality)
    d = binary_node(im, TF_OP_ADD, d, ox_scalar(im, node, TF_F32, 1.0));
  if (!integer[0])
    d = scaled_to_one(im, node, d);
  tf_tensor_id below = tf_unary(im->graph, TF_OP_RELU, one_minus(im, node, tf_unary(im->graph, TF_OP_RELU, d), TF_F32));
  tf_tensor_id mask = one_minus(im, node, below, TF_F32); /* 1 - relu(1 - relu(d)) */
  if (!integer[0] && equality) {                          /* a >= b: not b > a, and neither a NaN */
    mask = one_minus(im, node, mask, TF_F32);
    for (int32_t i = 0; i < 2; i++)
      mask = binary_node(im, TF_OP_MUL, mask, one_minus(im, node, ox_nan_mask(im, node, x[i]), TF_F32));
  }
  if (!integer[0])
    mask = tf_unary(im->graph, TF_OP_STOP_GRADIENT, mask);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, mask);
}

/* Greater, Less, GreaterOrEqual and LessOrEqual of known values (a causal mask's positions: HF's
 * arange(S) > cache_position[:, None]), folded; of data, a mask (compare_data). */
static tf_status compare(ox_import *im, const ox_node *node, char op) {
  bool folded;
  TF_RETURN_IF_ERROR(fold_pair(im, node, op, &folded));
  return folded ? NULL : compare_data(im, node, op);
}

tf_status ox_convert_greater(ox_import *im, const ox_node *node) { return compare(im, node, '>'); }
tf_status ox_convert_less(ox_import *im, const ox_node *node) { return compare(im, node, '<'); }
tf_status ox_convert_greater_or_equal(ox_import *im, const ox_node *node) { return compare(im, node, 'G'); }
tf_status ox_convert_less_or_equal(ox_import *im, const ox_node *node) { return compare(im, node, 'L'); }

tf_status ox_convert_where(ox_import *im, const ox_node *node) {
  for (int32_t i = 0; i < 3; i++) /* all three first: the mask paths read each */
    TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
  for (int32_t i = 0; i < 3; i++)
    if (!ox_is_known(im, ox_input(node, i)))
      return mask_where(im, node);
  ox_known *k;
  TF_RETURN_IF_ERROR(
      ox_at(im, node,
            ox_fold_where(ox_value_find(im, ox_input(node, 0))->known, ox_value_find(im, ox_input(node, 1))->known,
                          ox_value_find(im, ox_input(node, 2))->known, ox_fold_room(im), &k)));
  return ox_set_known(im, node, 0, k);
}

/* And, Or and Xor of two masks: m1 m2, m1 + m2 - m1 m2 and |m1 - m2|, exact on 0s and 1s. */
static tf_status mask_logical(ox_import *im, const ox_node *node, char op) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(mask_operand(im, node, 0, true, &a));
  TF_RETURN_IF_ERROR(mask_operand(im, node, 1, true, &b));
  tf_tensor_id both = binary_node(im, TF_OP_MUL, a, b), out = both;
  if (op == 'O')
    out = binary_node(im, TF_OP_SUB, binary_node(im, TF_OP_ADD, a, b), both);
  else if (op == 'X')
    out = tf_unary(im->graph, TF_OP_ABS, binary_node(im, TF_OP_SUB, a, b));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, out);
}

static tf_status logical(ox_import *im, const ox_node *node, char op) {
  bool folded;
  TF_RETURN_IF_ERROR(fold_pair(im, node, op, &folded));
  return folded ? NULL : mask_logical(im, node, op);
}

tf_status ox_convert_and(ox_import *im, const ox_node *node) { return logical(im, node, 'A'); }
tf_status ox_convert_or(ox_import *im, const ox_node *node) { return logical(im, node, 'O'); }
tf_status ox_convert_xor(ox_import *im, const ox_node *node) { return logical(im, node, 'X'); }

tf_status ox_convert_not(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (!ox_is_known(im, ox_input(node, 0)))
    return mask_not(im, node);
  const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
  ox_known *k = ox_known_new(false, TF_U8, x->rank, x->shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < x->count; i++)
    k->ints[i] = tf_fixed((x->is_float ? x->reals[i] : (double)x->ints[i].size) == 0);
  return ox_set_known(im, node, 0, k);
}
