/* Element-wise ONNX operators. Those tightfit has an op for: Add, Sub, Mul, Div and Pow (folded
 * when both operands are known at import time), the unary ops of the unary_ops table (Relu, Sigmoid,
 * Tanh, ...), LeakyRelu, Sqrt (folded on a known value) and Gelu (the trigonometric functions and the
 * roundings: onnx_functions.c). The others, as composites of ops
 * that have kernels and gradients on every backend:
 *
 *   Max(a, b, ...)      max over a new last axis of the inputs broadcast and stacked (concat): exact
 *   Min(a, b, ...)      -Max(-a, -b, ...): exact
 *   Clip(x, lo, hi)     clip, where the bounds are numbers known at import time; else
 *                       Min(Max(x, lo), hi) (either bound may be absent): exact
 *   Sum, Mean           a chain of adds (Mean then divides by the count)
 *   Reciprocal(x)       1 / x
 *   Softsign(x)         x / (1 + |x|)
 *   HardSigmoid(x)      Clip(alpha x + beta, 0, 1); HardSwish(x) = x HardSigmoid(x) (1/6, 1/2)
 *   Elu(x)              relu(x) + alpha (exp(-relu(-x)) - 1): x itself where x > 0
 *   Selu(x)             gamma Elu(x) (alpha, gamma its attributes)
 *   Celu(x)             relu(x) + alpha (exp(-relu(-x) / alpha) - 1)
 *   PRelu(x, slope)     relu(x) - slope relu(-x): one of the two terms is 0, so one rounding
 *   Mish(x)             x tanh(softplus(x))
 *   ThresholdedRelu     keep(x, relu(x - alpha)); Shrink(x) the same each side of +-lambd
 *   Size(x)             a known integer: the product of x's sizes
 *   Mod(a, b)           on values known at import time only (PyTorch 2.x's unflatten computes
 *                       (dim + rank) % rank): tightfit has no remainder op for data
 *
 * A composite's operands must be float data (f32, f16, bf16); anything else is refused naming the node.
 * Add, Sub and Mul of i32/i64 data compute in f32 between casts (integer_binary), and so do Neg, Abs and
 * Relu of it (unary), and Max and Min of i32, i64 or u8 data (extremum). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* ---- the operators tightfit has an op for ---- */

/* i32 and i64: u8 arithmetic wraps modulo 256, which f32 arithmetic would not; it stays refused. */
static bool is_integer(tf_dtype dtype) { return dtype == TF_I32 || dtype == TF_I64; }

/* Add, Sub or Mul of i32/i64 data (position ids a model computes from its mask: RoBERTa's
 * cumsum(ids != pad) * mask + pad, OPT's cumsum(mask) - 1): tightfit computes on floats, so in f32
 * between casts, the result cast back to a's type. Exact while every value and result is a whole
 * number below 2^24 in magnitude (positions and masks are); Div of integers (floor) is refused. */
static tf_status integer_binary(ox_import *im, const ox_node *node, tf_op op, tf_tensor_id a, tf_tensor_id b) {
  const tf_dtype dtype = ox_dtype_of(im, a);
  if (op != TF_OP_ADD && op != TF_OP_SUB && op != TF_OP_MUL)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of integer data (only Add, Sub and Mul)", node->proto->op_type);
  tf_tensor_id ids[2] = {tf_cast(im->graph, a, TF_F32), tf_cast(im->graph, b, TF_F32)};
  tf_tensor_id y = tf_graph_node(im->graph, op, ids, 2, NULL);
  return ox_set_tensor(im, node, 0, tf_cast(im->graph, y, dtype));
}

/* a op b of two graph constants that one value fills each, one of them a scalar (torch.full((n,), T)
 * of a symbolic batch exports as ConstantOfShape(0) + T): a constant fill of the other's shape and
 * dtype, so that readers which need known values (an LSTM's sequence lengths) see one. *out
 * TF_NO_TENSOR where a or b is no such fill. */
static tf_status fold_fills(ox_import *im, const ox_node *node, char symbol, tf_tensor_id a, tf_tensor_id b,
                            tf_tensor_id *out) {
  double x, y;
  tf_tensor_info ia, ib;
  *out = TF_NO_TENSOR;
  if (!ox_fill_value(im, a, &x) || !ox_fill_value(im, b, &y) || !tf_graph_tensor(im->graph, a, &ia) ||
      !tf_graph_tensor(im->graph, b, &ib) || (ia.declared.rank > 0 && ib.declared.rank > 0))
    return NULL;
  const tf_tensor_info *shape_of = ia.declared.rank > 0 ? &ia : &ib;
  double value = symbol == '+' ? x + y : symbol == '-' ? x - y : symbol == '*' ? x * y : x / y;
  if (is_integer(shape_of->dtype) && symbol == '/')
    return NULL; /* an integer division: the converter's own refusal */
  *out = tf_graph_constant(im->graph, node->proto->output[0], shape_of->dtype, shape_of->declared,
                           tf_init_make(TF_INIT_FILL, value, 0));
  return ox_graph_error(im, node);
}

static tf_status binary(ox_import *im, const ox_node *node, char symbol, tf_op op) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const char *a = ox_input(node, 0), *b = ox_input(node, 1);
  if (ox_is_known(im, a) && ox_is_known(im, b)) {
    ox_known *k;
    TF_RETURN_IF_ERROR(
        ox_at(im, node,
              ox_fold_binary(symbol, ox_value_find(im, a)->known, ox_value_find(im, b)->known, ox_fold_room(im), &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id ta = TF_NO_TENSOR, tb = TF_NO_TENSOR;
  if (!ox_is_known(im, a))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, a, &ta));
  if (!ox_is_known(im, b))
    TF_RETURN_IF_ERROR(ox_tensor(im, node, b, &tb));
  if (ta == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(ox_operand(im, node, 0, tb, &ta));
  if (tb == TF_NO_TENSOR)
    TF_RETURN_IF_ERROR(ox_operand(im, node, 1, ta, &tb));
  tf_tensor_id filled;
  TF_RETURN_IF_ERROR(fold_fills(im, node, symbol, ta, tb, &filled));
  if (filled != TF_NO_TENSOR)
    return ox_set_tensor(im, node, 0, filled);
  ox_match_half(im, &ta, &tb);
  if (is_integer(ox_dtype_of(im, ta)) && is_integer(ox_dtype_of(im, tb)))
    return integer_binary(im, node, op, ta, tb);
  tf_tensor_id ids[2] = {ta, tb};
  return ox_set_tensor(im, node, 0, tf_graph_node(im->graph, op, ids, 2, NULL));
}

tf_status ox_convert_add(ox_import *im, const ox_node *node) { return binary(im, node, '+', TF_OP_ADD); }
tf_status ox_convert_sub(ox_import *im, const ox_node *node) { return binary(im, node, '-', TF_OP_SUB); }
tf_status ox_convert_mul(ox_import *im, const ox_node *node) { return binary(im, node, '*', TF_OP_MUL); }
tf_status ox_convert_div(ox_import *im, const ox_node *node) { return binary(im, node, '/', TF_OP_DIV); }

static double neg_of(double x) { return -x; }
static double relu_of(double x) { return x > 0 ? x : 0; }
static double sigmoid_of(double x) { return 1 / (1 + exp(-x)); }
static double softplus_of(double x) { return x > 20 ? x : log1p(exp(x)); } /* ours and PyTorch's */

/* The function a unary op computes, in double, for folding known values. */
static double (*unary_function(tf_op op))(double) {
  switch (op) {
  case TF_OP_RELU: return relu_of;
  case TF_OP_SIGMOID: return sigmoid_of;
  case TF_OP_TANH: return tanh;
  case TF_OP_EXP: return exp;
  case TF_OP_LOG: return log;
  case TF_OP_NEG: return neg_of;
  case TF_OP_ABS: return fabs;
  case TF_OP_SOFTPLUS: return softplus_of;
  case TF_OP_ERF: return erf;
  default: return NULL;
  }
}

/* A unary op of a known value (T5's relative position buckets: Abs, Neg, Log of positions): Neg,
 * Abs and Relu of integers stay integers (fixed ones: a symbolic size is refused), the rest in f32. */
static tf_status fold_unary(ox_import *im, const ox_node *node, tf_op op, const ox_known *x) {
  ox_known *k;
  if (!x->is_float && (op == TF_OP_NEG || op == TF_OP_ABS || op == TF_OP_RELU)) {
    if (ox_known_has_symbol(x))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of a symbolic size", node->proto->op_type);
    if (!(k = ox_fold_copy(x, x->rank, x->shape)))
      return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    for (int64_t i = 0; i < k->count; i++) {
      const int64_t v = k->ints[i].size;
      if (v == INT64_MIN && op != TF_OP_RELU) {
        ox_known_free(k);
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of %" PRId64 ", which int64 cannot hold", node->proto->op_type,
                       v);
      }
      k->ints[i] = tf_fixed(op == TF_OP_NEG ? -v : op == TF_OP_ABS ? (v < 0 ? -v : v) : (v > 0 ? v : 0));
    }
    return ox_set_known(im, node, 0, k);
  }
  TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_unary(x, unary_function(op), &k)));
  return ox_set_known(im, node, 0, k);
}

static tf_status unary(ox_import *im, const ox_node *node, tf_op op) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *known = ox_foldable(im, node, 0);
  if (known && unary_function(op))
    return fold_unary(im, node, op, known);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (is_integer(dtype) && (op == TF_OP_NEG || op == TF_OP_ABS || op == TF_OP_RELU)) {
    /* of integer data (LongT5's relative positions to its global blocks, computed from the mask): in f32
     * between casts, exact below 2^24 in magnitude, as Add's (integer_binary) */
    tf_graph *g = im->graph;
    return ox_set_tensor(im, node, 0, tf_cast(g, tf_unary(g, op, tf_cast(g, x, TF_F32)), dtype));
  }
  return ox_set_tensor(im, node, 0, tf_unary(im->graph, op, x));
}

/* ONNX operators that are one tightfit unary op of their input: a row each. Abs is torch.abs and
 * F.l1_loss's |input - target| (then ReduceMean); Softplus is torch.nn.Softplus() (beta 1,
 * threshold 20), which ours is: x itself past 20. */
typedef struct unary_row {
  const char *op_type;
  tf_op op;
} unary_row;

// One row a line, however short.
// clang-format off
static const unary_row unary_ops[] = {
    {"Relu", TF_OP_RELU},
    {"Sigmoid", TF_OP_SIGMOID},
    {"Tanh", TF_OP_TANH},
    {"Exp", TF_OP_EXP},
    {"Log", TF_OP_LOG},
    {"Neg", TF_OP_NEG},
    {"Abs", TF_OP_ABS},
    {"Softplus", TF_OP_SOFTPLUS},
    {"Erf", TF_OP_ERF},
};
// clang-format on

static const unary_row *unary_row_of(const char *op_type) {
  for (size_t i = 0; op_type && i < sizeof(unary_ops) / sizeof(unary_ops[0]); i++)
    if (strcmp(unary_ops[i].op_type, op_type) == 0)
      return &unary_ops[i];
  return NULL;
}

bool ox_is_unary(const char *op_type) { return unary_row_of(op_type) != NULL; }

tf_status ox_convert_unary(ox_import *im, const ox_node *node) {
  const unary_row *row = unary_row_of(node->proto->op_type);
  if (!row)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "operator %s is not supported", node->proto->op_type);
  return unary(im, node, row->op);
}

tf_status ox_convert_leaky_relu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const double alpha = ox_attr_float(node, "alpha", 0.01);
  if (!isfinite(alpha))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "alpha %g (a finite slope)", alpha);
  return ox_set_tensor(im, node, 0, tf_leaky_relu(im->graph, x, (float)alpha));
}

tf_status ox_convert_sqrt(ox_import *im, const ox_node *node) {
  if (ox_is_known(im, ox_input(node, 0))) {
    const ox_known *x = ox_value_find(im, ox_input(node, 0))->known;
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_cast(x, TF_F32, &k)));
    for (int64_t i = 0; i < k->count; i++)
      k->reals[i] = sqrt(k->reals[i]);
    return ox_set_known(im, node, 0, k);
  }
  return unary(im, node, TF_OP_SQRT);
}

/* Gelu (the default domain's from opset 20): approximate "none" (the default: erf) or "tanh"; any
 * other spelling is refused rather than read as one of them. */
tf_status ox_convert_gelu(ox_import *im, const ox_node *node) {
  const bool tanh_form = ox_attr_is(node, "approximate", "none", "tanh");
  if (!tanh_form && !ox_attr_is(node, "approximate", "none", "none")) {
    const Onnx__AttributeProto *a = ox_attr(node, "approximate");
    const int length = a && a->has_s && a->s.len < 64 ? (int)a->s.len : 0;
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "approximate '%.*s' (\"none\" or \"tanh\")", length,
                   length ? (const char *)a->s.data : "");
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_gelu(im->graph, x, tanh_form));
}

static tf_tensor_id power(ox_import *im, const ox_node *node, tf_tensor_id x, double p);

tf_status ox_convert_pow(ox_import *im, const ox_node *node) {
  if (ox_is_known(im, ox_input(node, 0)) && ox_is_known(im, ox_input(node, 1))) {
    ox_known *k;
    TF_RETURN_IF_ERROR(ox_at(im, node,
                             ox_fold_binary('^', ox_value_find(im, ox_input(node, 0))->known,
                                            ox_value_find(im, ox_input(node, 1))->known, ox_fold_room(im), &k)));
    return ox_set_known(im, node, 0, k);
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const ox_known *e = ox_foldable(im, node, 1);
  const bool zero = e && e->count == 1 && (e->is_float ? e->reals[0] == 0 : e->ints[0].size == 0);
  if (!e || e->count != 1 || zero || ox_is_integer_dtype(ox_dtype_of(im, x))) { /* of data, several, x^0 */
    tf_tensor_id p, y;
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &p));
    TF_RETURN_IF_ERROR(ox_pow_of_data(im, node, x, p, &y));
    return ox_set_tensor(im, node, 0, y);
  }
  double p = e->is_float ? e->reals[0] : (double)e->ints[0].size;
  /* an f32 exponent within 2^-20 of +-1/2 is the square root: PyTorch's p-norms export 1/p rounded
   * (pairwise_distance's and cdist's 0.49999976) and compute the 2-norm's square root */
  if (fabs(fabs(p) - 0.5) <= 0x1p-20)
    p = p > 0 ? 0.5 : -0.5;
  if (!isfinite(p))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "exponent %.9g (a finite exponent)", p);
  return ox_set_tensor(im, node, 0, power(im, node, x, p));
}

/* ---- composites ---- */

static tf_status need_float(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t i) {
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16)
    return NULL;
  return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " is %s data (only f32, f16 or bf16)", i,
                 tf_dtype_name(dtype));
}

/* Input i as float data. */
static tf_status float_input(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *x) {
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, x));
  return need_float(im, node, *x, i);
}

/* A scalar constant of x's dtype. */
static tf_tensor_id scalar_like(ox_import *im, const ox_node *node, tf_tensor_id x, double value) {
  return ox_scalar(im, node, ox_dtype_of(im, x), value);
}

static tf_tensor_id neg(ox_import *im, tf_tensor_id x) { return tf_unary(im->graph, TF_OP_NEG, x); }
static tf_tensor_id relu(ox_import *im, tf_tensor_id x) { return tf_unary(im->graph, TF_OP_RELU, x); }

/* The numpy broadcast shape of ids[0, n) into dims (rank *rank): per axis, the first size other
 * than 1; an axis whose size is a product of symbols is refused. */
static tf_status broadcast_dims(ox_import *im, const ox_node *node, const tf_tensor_id *ids, int32_t n, int32_t *rank,
                                tf_dim *dims) {
  *rank = 0;
  for (int32_t i = 0; i < n; i++)
    *rank = ox_rank_of(im, ids[i]) > *rank ? ox_rank_of(im, ids[i]) : *rank;
  for (int32_t a = 0; a < *rank; a++)
    dims[a] = tf_fixed(1);
  for (int32_t i = 0; i < n; i++) {
    int32_t r;
    tf_dim d[TF_MAX_RANK];
    ox_tensor_dims(im, ids[i], &r, d);
    for (int32_t a = 0; a < r; a++) {
      tf_dim *out = &dims[*rank - r + a];
      if (d[a].size == -1 && d[a].symbol < 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " axis %" PRId32 " is a product of symbols", i,
                       a);
      if (out->symbol < 0 && out->size == 1)
        *out = d[a];
    }
  }
  return NULL;
}

/* The element-wise maximum of ids[0, n), broadcast: each input reshaped to [1.., its sizes, 1],
 * expanded to [broadcast shape, 1], the n concatenated on that last axis and max-reduced over it.
 * Every output element is one of the inputs' elements, bit for bit. */
static tf_status maximum(ox_import *im, const ox_node *node, tf_tensor_id *ids, int32_t n, tf_tensor_id *out) {
  for (int32_t i = 1; i < n; i++)
    ox_match_half(im, &ids[0], &ids[i]);
  if (n == 1) {
    *out = ids[0];
    return NULL;
  }
  int32_t rank;
  tf_dim target[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(broadcast_dims(im, node, ids, n, &rank, target));
  if (rank + 1 > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "rank %" PRId32 " (at most %d here)", rank, TF_MAX_RANK - 1);
  target[rank] = tf_fixed(1);
  tf_graph *g = im->graph;
  tf_tensor_id stacked[64];
  if (n > 64)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 " inputs (at most 64)", n);
  for (int32_t i = 0; i < n; i++) {
    int32_t r;
    tf_dim d[TF_MAX_RANK];
    ox_tensor_dims(im, ids[i], &r, d);
    tf_dim lifted[TF_MAX_RANK];
    for (int32_t a = 0; a < rank; a++)
      lifted[a] = a < rank - r ? tf_fixed(1) : d[a - (rank - r)];
    lifted[rank] = tf_fixed(1);
    tf_tensor_id x = tf_reshape(g, ids[i], tf_shape_from(lifted, rank + 1));
    stacked[i] = tf_expand(g, x, tf_shape_from(target, rank + 1));
  }
  int32_t axis = rank;
  *out = tf_reduce(g, TF_OP_MAX, tf_concat(g, stacked, n, rank), &axis, 1, false);
  return ox_graph_error(im, node);
}

static tf_status minimum(ox_import *im, const ox_node *node, tf_tensor_id *ids, int32_t n, tf_tensor_id *out) {
  for (int32_t i = 0; i < n; i++)
    ids[i] = neg(im, ids[i]);
  TF_RETURN_IF_ERROR(maximum(im, node, ids, n, out));
  *out = neg(im, *out);
  return ox_graph_error(im, node);
}

/* The node's inputs as float data (absent optional ones skipped), at most 64. */
static tf_status variadic_inputs(ox_import *im, const ox_node *node, tf_tensor_id *ids, int32_t *n) {
  *n = 0;
  for (int32_t i = 0; i < node->n_inputs; i++) {
    if (!ox_input(node, i))
      continue;
    if (*n == 64)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "more than 64 inputs");
    TF_RETURN_IF_ERROR(float_input(im, node, i, &ids[(*n)++]));
  }
  if (!*n)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "no inputs");
  return NULL;
}

/* Max ('M') or Min ('m') of known values only (T5's relative position buckets, capped by
 * torch.min): folded left to right; false in *done when an input is data. */
static tf_status fold_extremum(ox_import *im, const ox_node *node, char op, bool *done) {
  *done = false;
  ox_known *k = NULL;
  for (int32_t i = 0; i < node->n_inputs; i++)
    if (ox_input(node, i) && !ox_foldable(im, node, i))
      return NULL;
  for (int32_t i = 0; i < node->n_inputs; i++) {
    if (!ox_input(node, i))
      continue;
    const ox_known *x = ox_foldable(im, node, i);
    ox_known *next = NULL;
    tf_status status = k ? ox_fold_binary(op, k, x, ox_fold_room(im), &next) : NULL;
    next = k ? next : ox_fold_copy(x, x->rank, x->shape);
    ox_known_free(k);
    TF_RETURN_IF_ERROR(ox_at(im, node, status));
    if (!next)
      return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    k = next;
  }
  if (!k)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "no inputs");
  *done = true;
  return ox_set_known(im, node, 0, k);
}

/* Max or Min of data inputs, each float or (all) integer data of one type (i32, i64, u8: HF's
 * torch.max(lengths, other), clamps of positions by tensors): integers in f32 between casts, exact
 * while every value is a whole number below 2^24 in magnitude, as Add's (integer_binary). */
static tf_status extremum(ox_import *im, const ox_node *node, bool is_max) {
  tf_tensor_id ids[64], y;
  int32_t n = 0;
  tf_dtype integer = TF_F32; /* the inputs' integer type, or F32 when they are float */
  for (int32_t i = 0; i < node->n_inputs; i++) {
    if (!ox_input(node, i))
      continue;
    if (n == 64)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "more than 64 inputs");
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &ids[n]));
    const tf_dtype dtype = ox_dtype_of(im, ids[n]);
    if (n == 0 && ox_is_integer_dtype(dtype))
      integer = dtype;
    if (integer != TF_F32 && dtype != integer)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input %" PRId32 " is %s data beside %s (one type)", i,
                     tf_dtype_name(dtype), tf_dtype_name(integer));
    if (integer == TF_F32)
      TF_RETURN_IF_ERROR(need_float(im, node, ids[n], i));
    else
      ids[n] = tf_cast(im->graph, ids[n], TF_F32);
    n++;
  }
  if (!n)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "no inputs");
  TF_RETURN_IF_ERROR(is_max ? maximum(im, node, ids, n, &y) : minimum(im, node, ids, n, &y));
  return ox_set_tensor(im, node, 0, integer == TF_F32 ? y : tf_cast(im->graph, y, integer));
}

tf_status ox_convert_max(ox_import *im, const ox_node *node) {
  bool folded;
  TF_RETURN_IF_ERROR(fold_extremum(im, node, 'M', &folded));
  return folded ? NULL : extremum(im, node, true);
}

tf_status ox_convert_min(ox_import *im, const ox_node *node) {
  bool folded;
  TF_RETURN_IF_ERROR(fold_extremum(im, node, 'm', &folded));
  return folded ? NULL : extremum(im, node, false);
}

/* Sum (mean_too false) or Mean of the inputs, added left to right. */
static tf_status add_all(ox_import *im, const ox_node *node, bool mean) {
  tf_tensor_id ids[64];
  int32_t n;
  TF_RETURN_IF_ERROR(variadic_inputs(im, node, ids, &n));
  tf_tensor_id y = ids[0];
  for (int32_t i = 1; i < n; i++) {
    ox_match_half(im, &y, &ids[i]);
    y = tf_add(im->graph, y, ids[i]);
  }
  if (mean && n > 1)
    y = tf_div(im->graph, y, scalar_like(im, node, y, n));
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_sum(ox_import *im, const ox_node *node) { return add_all(im, node, false); }
tf_status ox_convert_mean(ox_import *im, const ox_node *node) { return add_all(im, node, true); }

/* x clipped to [lo, hi]; a bound of TF_NO_TENSOR is absent. */
static tf_status clip(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id lo, tf_tensor_id hi,
                      tf_tensor_id *out) {
  *out = x;
  if (lo != TF_NO_TENSOR) {
    tf_tensor_id pair[2] = {*out, lo};
    TF_RETURN_IF_ERROR(maximum(im, node, pair, 2, out));
  }
  if (hi != TF_NO_TENSOR) {
    tf_tensor_id pair[2] = {*out, hi};
    TF_RETURN_IF_ERROR(minimum(im, node, pair, 2, out));
  }
  return NULL;
}

/* Clip of a known value by known bounds (DeBERTa's clamp of relative positions): Max, then Min. */
static tf_status fold_clip(ox_import *im, const ox_node *node, const ox_known *x) {
  ox_known *k = ox_fold_copy(x, x->rank, x->shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int32_t i = 0; i < 2; i++) {
    const ox_known *bound = ox_input(node, i + 1) ? ox_foldable(im, node, i + 1) : NULL;
    if (!bound)
      continue;
    ox_known *next;
    tf_status status = ox_fold_binary(i == 0 ? 'M' : 'm', k, bound, ox_fold_room(im), &next);
    ox_known_free(k);
    TF_RETURN_IF_ERROR(ox_at(im, node, status));
    k = next;
  }
  return ox_set_known(im, node, 0, k);
}

/* Clip's bound `i` (1 min, 2 max) as a number: input i (opset 11 on) known at import time as a float
 * scalar, or the attribute (before); `absent` when not given. False when the bound is data, or NaN
 * (the bounds then compose Max and Min). */
static bool constant_bound(ox_import *im, const ox_node *node, int32_t i, double absent, double *value) {
  *value = absent;
  if (im->opset < 11) {
    const char *name = i == 1 ? "min" : "max";
    if (ox_attr(node, name))
      *value = ox_attr_float(node, name, 0);
    return !isnan(*value);
  }
  if (!ox_input(node, i))
    return true;
  const ox_known *k = ox_foldable(im, node, i);
  if (!k || k->rank != 0 || k->count != 1 || (!k->is_float && k->ints[0].symbol >= 0))
    return false;
  *value = k->is_float ? k->reals[0] : (double)k->ints[0].size; /* an integer x's bounds are integers */
  return !isnan(*value);
}

/* Clip: bounds from inputs 1 and 2 (opset 11 on), before that from the min and max attributes. Bounds
 * known at import time (ReLU6, hardtanh, torch.clamp by numbers) make one clip op; bounds of data
 * compose Max and Min (a known scalar becomes a constant of x's dtype); known values by known bounds
 * fold. */
tf_status ox_convert_clip(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *known = ox_foldable(im, node, 0);
  bool bounds_known = im->opset >= 11;
  for (int32_t i = 1; i <= 2 && bounds_known; i++)
    bounds_known = !ox_input(node, i) || ox_foldable(im, node, i);
  if (known && bounds_known)
    return fold_clip(im, node, known);
  tf_tensor_id x, bounds[2] = {TF_NO_TENSOR, TF_NO_TENSOR};
  double lo, hi;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (ox_is_integer_dtype(dtype) && constant_bound(im, node, 1, -INFINITY, &lo) &&
      constant_bound(im, node, 2, INFINITY, &hi)) /* clamp(positions, 0, T): in f32, exact below 2^24 */
    return ox_set_tensor(
        im, node, 0,
        tf_cast(im->graph, tf_clip(im->graph, tf_cast(im->graph, x, TF_F32), (float)lo, (float)hi), dtype));
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  if (constant_bound(im, node, 1, -INFINITY, &lo) && constant_bound(im, node, 2, INFINITY, &hi))
    return ox_set_tensor(im, node, 0, tf_clip(im->graph, x, (float)lo, (float)hi));
  static const char *const names[2] = {"min", "max"};
  for (int32_t i = 0; i < 2; i++) {
    if (im->opset < 11) {
      if (ox_attr(node, names[i]))
        bounds[i] = scalar_like(im, node, x, ox_attr_float(node, names[i], 0));
      continue;
    }
    if (!ox_input(node, i + 1))
      continue;
    TF_RETURN_IF_ERROR(ox_operand(im, node, i + 1, x, &bounds[i]));
    TF_RETURN_IF_ERROR(need_float(im, node, bounds[i], i + 1));
    if (ox_rank_of(im, bounds[i]) != 0)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " (%s) must be a scalar", i + 1, names[i]);
  }
  tf_tensor_id y;
  TF_RETURN_IF_ERROR(clip(im, node, x, bounds[0], bounds[1], &y));
  return ox_set_tensor(im, node, 0, y);
}

/* x^p for a finite p other than 0: +-1/2 sqrt and rsqrt; a whole p of magnitude 1 to 16 by
 * multiplications (squares of squares; negative ones the reciprocal), exact in sign for negative x;
 * any other p exp(p log x) (NaN for negative x, as PyTorch's; 0 or infinity at 0). */
static tf_tensor_id power(ox_import *im, const ox_node *node, tf_tensor_id x, double p) {
  tf_graph *g = im->graph;
  if (p == 0.5)
    return tf_unary(g, TF_OP_SQRT, x);
  if (p == -0.5)
    return tf_unary(g, TF_OP_RSQRT, x);
  if (p == floor(p) && fabs(p) <= 16) {
    tf_tensor_id y = TF_NO_TENSOR, square = x;
    for (int64_t n = (int64_t)fabs(p); n > 0; n >>= 1) {
      if (n & 1)
        y = y == TF_NO_TENSOR ? square : tf_mul(g, y, square);
      if (n > 1)
        square = tf_mul(g, square, square);
    }
    return p > 0 ? y : tf_div(g, scalar_like(im, node, x, 1.0), y);
  }
  tf_tensor_id logarithm = tf_unary(g, TF_OP_LOG, x);
  return tf_unary(g, TF_OP_EXP, tf_mul(g, logarithm, scalar_like(im, node, x, p)));
}

tf_status ox_convert_reciprocal(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  return ox_set_tensor(im, node, 0, tf_div(im->graph, scalar_like(im, node, x, 1.0), x));
}

tf_status ox_convert_softsign(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  tf_tensor_id denominator = tf_add(im->graph, scalar_like(im, node, x, 1.0), tf_unary(im->graph, TF_OP_ABS, x));
  return ox_set_tensor(im, node, 0, tf_div(im->graph, x, denominator));
}

static tf_status hard_sigmoid(ox_import *im, const ox_node *node, tf_tensor_id x, double alpha, double beta,
                              tf_tensor_id *out) {
  *out = TF_NO_TENSOR;
  if (!isfinite(alpha) || !isfinite(beta))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "alpha %g, beta %g (finite numbers)", alpha, beta);
  tf_graph *g = im->graph;
  tf_tensor_id y = tf_add(g, tf_mul(g, x, scalar_like(im, node, x, alpha)), scalar_like(im, node, x, beta));
  *out = tf_clip(g, y, 0.0f, 1.0f);
  return NULL;
}

tf_status ox_convert_hard_sigmoid(ox_import *im, const ox_node *node) {
  tf_tensor_id x, y;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  TF_RETURN_IF_ERROR(
      hard_sigmoid(im, node, x, ox_attr_float(node, "alpha", 0.2), ox_attr_float(node, "beta", 0.5), &y));
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_hard_swish(ox_import *im, const ox_node *node) {
  tf_tensor_id x, y;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  TF_RETURN_IF_ERROR(hard_sigmoid(im, node, x, 1.0 / 6.0, 0.5, &y));
  return ox_set_tensor(im, node, 0, tf_mul(im->graph, x, y));
}

/* relu(x) + alpha (exp(min(x, 0) / divisor) - 1), min(x, 0) as -relu(-x): Elu (divisor 1), Celu
 * (divisor alpha). Where x > 0 the second term is alpha (exp(0) - 1) = 0 exactly. */
static tf_status exponential_unit(ox_import *im, const ox_node *node, double alpha, double divisor, tf_tensor_id x,
                                  tf_tensor_id *out) {
  if (!isfinite(alpha) || !isfinite(divisor) || divisor == 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "alpha %g (a finite nonzero number)", alpha);
  tf_graph *g = im->graph;
  tf_tensor_id negative_part = neg(im, relu(im, neg(im, x)));
  if (divisor != 1)
    negative_part = tf_div(g, negative_part, scalar_like(im, node, x, divisor));
  tf_tensor_id expm1 = tf_sub(g, tf_unary(g, TF_OP_EXP, negative_part), scalar_like(im, node, x, 1.0));
  *out = tf_add(g, relu(im, x), tf_mul(g, scalar_like(im, node, x, alpha), expm1));
  return ox_graph_error(im, node);
}

tf_status ox_convert_elu(ox_import *im, const ox_node *node) {
  tf_tensor_id x, y;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  TF_RETURN_IF_ERROR(exponential_unit(im, node, ox_attr_float(node, "alpha", 1.0), 1.0, x, &y));
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_selu(ox_import *im, const ox_node *node) {
  tf_tensor_id x, y;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  const double gamma = ox_attr_float(node, "gamma", 1.05070102214813232421875);
  if (!isfinite(gamma))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "gamma %g (a finite number)", gamma);
  TF_RETURN_IF_ERROR(exponential_unit(im, node, ox_attr_float(node, "alpha", 1.67326319217681884765625), 1.0, x, &y));
  return ox_set_tensor(im, node, 0, tf_mul(im->graph, y, scalar_like(im, node, x, gamma)));
}

tf_status ox_convert_celu(ox_import *im, const ox_node *node) {
  tf_tensor_id x, y;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  const double alpha = ox_attr_float(node, "alpha", 1.0);
  TF_RETURN_IF_ERROR(exponential_unit(im, node, alpha, alpha, x, &y));
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_prelu(ox_import *im, const ox_node *node) {
  tf_tensor_id x, slope;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_operand(im, node, 1, x, &slope));
  TF_RETURN_IF_ERROR(need_float(im, node, slope, 1));
  ox_match_half(im, &x, &slope);
  tf_graph *g = im->graph;
  return ox_set_tensor(im, node, 0, tf_sub(g, relu(im, x), tf_mul(g, slope, relu(im, neg(im, x)))));
}

/* keep(v, relu(d)): v where d > 0, else 0 (a NaN d too), gradients through v only. */
static tf_tensor_id where_positive(ox_import *im, tf_tensor_id v, tf_tensor_id d) {
  return tf_keep(im->graph, v, relu(im, d));
}

/* ThresholdedRelu: x where x > alpha, else 0 (F.threshold(x, alpha, 0)); a NaN gives 0, as the
 * comparison is false. */
tf_status ox_convert_thresholded_relu(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  const double alpha = ox_attr_float(node, "alpha", 1.0);
  if (!isfinite(alpha))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "alpha %g (a finite threshold)", alpha);
  return ox_set_tensor(im, node, 0, where_positive(im, x, tf_sub(im->graph, x, scalar_like(im, node, x, alpha))));
}

/* Shrink: x - bias where x > lambd, x + bias where x < -lambd, else 0 (F.hardshrink: bias 0;
 * F.softshrink: bias = lambd). */
tf_status ox_convert_shrink(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  const double bias = ox_attr_float(node, "bias", 0.0), lambd = ox_attr_float(node, "lambd", 0.5);
  if (!isfinite(bias) || !isfinite(lambd))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "bias %g, lambd %g (finite numbers)", bias, lambd);
  tf_graph *g = im->graph;
  tf_tensor_id b = scalar_like(im, node, x, bias), l = scalar_like(im, node, x, lambd);
  tf_tensor_id above = where_positive(im, tf_sub(g, x, b), tf_sub(g, x, l));
  tf_tensor_id below = where_positive(im, tf_add(g, x, b), tf_sub(g, neg(im, x), l));
  return ox_set_tensor(im, node, 0, tf_add(g, above, below));
}

tf_status ox_convert_mish(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(float_input(im, node, 0, &x));
  tf_graph *g = im->graph;
  return ox_set_tensor(im, node, 0, tf_mul(g, x, tf_unary(g, TF_OP_TANH, tf_unary(g, TF_OP_SOFTPLUS, x))));
}

/* Size: the element count, known at import; a count with two symbolic axes (N*T) is refused. */
tf_status ox_convert_size(ox_import *im, const ox_node *node) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, dims));
  tf_dim count = tf_fixed(1);
  for (int32_t i = 0; i < rank; i++) {
    if ((dims[i].size == -1 && dims[i].symbol < 0) || (dims[i].symbol >= 0 && count.symbol >= 0))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the size of '%s' is a product of symbols", ox_input(node, 0));
    if (__builtin_mul_overflow(count.size, dims[i].size, &count.size))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the size of '%s' overflows int64", ox_input(node, 0));
    if (dims[i].symbol >= 0)
      count.symbol = dims[i].symbol;
  }
  ox_known *k = ox_known_new(false, TF_I64, 0, NULL);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  k->ints[0] = count;
  return ox_set_known(im, node, 0, k);
}

/* Mod of data: a - b q in f32, q = floor(a / b) (fmod 0: the divisor's sign, Python's %, for integer
 * data, computed in f32 and cast back: exact while |a| and |b| are below 2^23) or q = trunc(a / b) =
 * sign(a / b) floor(|a / b|) (fmod 1: C's fmod, the dividend's sign; for floats within a few roundings
 * of it, where C's is exact). The gradients are PyTorch's: 1 to a, -q to b. */
static tf_status mod_of_data(ox_import *im, const ox_node *node, bool fmod) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_operand(im, node, 1, a, &b));
  const tf_dtype dtype = ox_dtype_of(im, a);
  if (dtype != ox_dtype_of(im, b))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Mod of %s and %s data (one type)", tf_dtype_name(dtype),
                   tf_dtype_name(ox_dtype_of(im, b)));
  tf_graph *g = im->graph;
  const bool integer = ox_is_integer_dtype(dtype);
  if (integer) {
    a = tf_cast(g, a, TF_F32);
    b = tf_cast(g, b, TF_F32);
  }
  tf_tensor_id ratio = tf_div(g, a, b);
  tf_tensor_id q =
      fmod ? tf_mul(g, tf_unary(g, TF_OP_SIGN, ratio), tf_unary(g, TF_OP_FLOOR, tf_unary(g, TF_OP_ABS, ratio)))
           : tf_unary(g, TF_OP_FLOOR, ratio);
  tf_tensor_id r = tf_sub(g, a, tf_mul(g, b, q));
  return ox_set_tensor(im, node, 0, integer ? tf_cast(g, r, dtype) : r);
}

tf_status ox_convert_mod(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const char *a = ox_input(node, 0), *b = ox_input(node, 1);
  const int64_t fmod = ox_attr_int(node, "fmod", 0);
  if (fmod != 0 && fmod != 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "fmod %" PRId64 " (0 or 1)", fmod);
  if (!ox_is_known(im, a) || !ox_is_known(im, b))
    return mod_of_data(im, node, fmod == 1);
  const ox_known *x = ox_value_find(im, a)->known, *y = ox_value_find(im, b)->known;
  if (fmod == 0 && (x->is_float || y->is_float))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "fmod 0 on floating-point values (ONNX requires fmod 1)");
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_binary(fmod ? 'f' : '%', x, y, ox_fold_room(im), &k)));
  return ox_set_known(im, node, 0, k);
}
