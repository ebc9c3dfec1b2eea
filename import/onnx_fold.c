/* ONNX operators on values known at import time: the Shape / Gather / Unsqueeze / Concat / Cast
 * arithmetic that torch.onnx.export writes for `x.view(n, t, h, d)`, scalar float constants, and
 * the tables a model computes from positions alone (a rotary embedding's cos and sin: Range, Expand,
 * MatMul, Transpose, Cos, Sin; a causal mask's Greater). An integer may be a multiple of one symbol
 * (N, 3*T); arithmetic that leaves that form is refused. Floats are held in double; the results of
 * MatMul and of the unary functions of an f32 value are rounded to f32, as the model computes them. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_fold.h"

/* a op b on two (possibly symbolic) integers; false when the result is not one symbol's multiple or
 * does not fit 64 bits (a fuzzed model's INT64_MIN * -1). */
static bool fold_int(char op, tf_dim a, tf_dim b, tf_dim *out) {
  bool fa = a.symbol < 0, fb = b.symbol < 0;
  int64_t r;
  switch (op) {
  case '+':
  case '-': {
    if (op == '+' ? __builtin_add_overflow(a.size, b.size, &r) : __builtin_sub_overflow(a.size, b.size, &r))
      return false;
    if (fa && fb)
      *out = tf_fixed(r);
    else if (fb && b.size == 0)
      *out = a;
    else if (fa && a.size == 0 && op == '+')
      *out = b;
    else if (!fa && !fb && a.symbol == b.symbol && r >= 1)
      *out = tf_sym_times(a.symbol, r);
    else
      return false;
    return true;
  }
  case '*':
    if (__builtin_mul_overflow(a.size, b.size, &r))
      return false;
    if (fa && fb)
      *out = tf_fixed(r);
    else if (fb && b.size >= 1)
      *out = tf_sym_times(a.symbol, r);
    else if (fa && a.size >= 1)
      *out = tf_sym_times(b.symbol, r);
    else
      return false;
    return true;
  case '/':
    if (b.size == 0 || (a.size == INT64_MIN && b.size == -1))
      return false;
    if (fa && fb) {
      int64_t q = a.size / b.size;
      if ((a.size % b.size != 0) && ((a.size < 0) != (b.size < 0)))
        q--; /* floor, as ONNX integer Div of torch's // */
      *out = tf_fixed(q);
    } else if (fb && b.size >= 1 && a.size % b.size == 0) {
      *out = tf_sym_times(a.symbol, a.size / b.size);
    } else if (!fa && !fb && a.symbol == b.symbol && a.size % b.size == 0) {
      *out = tf_fixed(a.size / b.size);
    } else {
      return false;
    }
    return true;
  case '%': /* Mod: Python's (the divisor's sign; ONNX fmod=0) */
  case 'f': /* Mod with fmod=1: C's (the dividend's sign) */
    if (!fb || b.size == 0)
      return false;
    if (!fa) { /* k*S % b is 0 for any S where b divides k; else it depends on S */
      if (a.size % b.size != 0)
        return false;
      *out = tf_fixed(0);
      return true;
    }
    r = b.size == -1 ? 0 : a.size % b.size; /* INT64_MIN % -1 overflows in C */
    if (op == '%' && r != 0 && (r < 0) != (b.size < 0))
      r += b.size;
    *out = tf_fixed(r);
    return true;
  case '>': /* Greater, Less, GreaterOrEqual ('G'), LessOrEqual ('L'): of fixed sizes only */
  case '<':
  case 'G':
  case 'L':
    if (!fa || !fb)
      return false;
    *out = tf_fixed(op == '>'   ? a.size > b.size
                    : op == '<' ? a.size < b.size
                    : op == 'G' ? a.size >= b.size
                                : a.size <= b.size);
    return true;
  case 'M': /* Max, Min: of fixed sizes only */
  case 'm':
    if (!fa || !fb)
      return false;
    *out = tf_fixed(op == 'M' ? (a.size > b.size ? a.size : b.size) : (a.size < b.size ? a.size : b.size));
    return true;
  case 'A': /* And, Or, Xor: of fixed values only */
  case 'O':
  case 'X':
    if (!fa || !fb)
      return false;
    *out = tf_fixed(op == 'A' ? a.size && b.size : op == 'O' ? a.size || b.size : !a.size != !b.size);
    return true;
  case '=': /* Equal: a symbol's multiple is >= 1, so it equals no number below 1 */
    if (fa && fb)
      *out = tf_fixed(a.size == b.size);
    else if (!fa && !fb && a.symbol == b.symbol)
      *out = tf_fixed(a.size == b.size);
    else if ((fa && a.size < 1) || (fb && b.size < 1))
      *out = tf_fixed(0);
    else
      return false;
    return true;
  default: return false;
  }
}

static double fold_real(char op, double a, double b) {
  switch (op) {
  case '+': return a + b;
  case '-': return a - b;
  case '*': return a * b;
  case '/': return a / b;
  case '=': return a == b;
  case '>': return a > b;
  case '<': return a < b;
  case 'G': return a >= b;
  case 'L': return a <= b;
  case 'A': return a != 0 && b != 0;
  case 'O': return a != 0 || b != 0;
  case 'X': return (a != 0) != (b != 0);
  case '%': return a - floor(a / b) * b;
  case 'f': return fmod(a, b);
  case 'M': return a != a || b != b ? NAN : fmax(a, b); /* ONNX's Max and Min propagate NaN */
  case 'm': return a != a || b != b ? NAN : fmin(a, b);
  default: return pow(a, b);
  }
}

/* x as a value of `dtype` holds it: f32 values rounded to f32, as ONNX computes them. */
static double stored(tf_dtype dtype, double x) { return dtype == TF_F32 ? (double)(float)x : x; }

/* The broadcast shape of a and b (numpy rules); false when they do not broadcast. */
static bool broadcast(const ox_known *a, const ox_known *b, int32_t *rank, int64_t *shape) {
  *rank = a->rank > b->rank ? a->rank : b->rank;
  for (int32_t i = 0; i < *rank; i++) {
    int32_t ia = i - (*rank - a->rank), ib = i - (*rank - b->rank);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    shape[i] = da == 1 ? db : da;
  }
  return true;
}

/* The flat index into `k` of element `flat` of a broadcast result of `shape`. */
static int64_t source_index(const ox_known *k, int32_t rank, const int64_t *shape, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    int64_t coordinate = flat % shape[i];
    flat /= shape[i];
    int32_t ik = i - (rank - k->rank);
    if (ik >= 0) {
      if (k->shape[ik] != 1)
        index += coordinate * stride;
      stride *= k->shape[ik];
    }
  }
  return index;
}

tf_status ox_fold_binary(char op, const ox_known *a, const ox_known *b, int64_t room, ox_known **out) {
  *out = NULL;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  if (!broadcast(a, b, &rank, shape))
    return tf_status_new(TF_ERR_SHAPE, "known operands of shapes that do not broadcast");
  bool is_float = a->is_float || b->is_float;
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_within(is_float, is_float ? TF_F32 : a->dtype, rank, shape, room, "the result", &k));
  for (int64_t i = 0; i < k->count; i++) {
    int64_t ia = source_index(a, rank, shape, i), ib = source_index(b, rank, shape, i);
    if (is_float) {
      double x = a->is_float ? a->reals[ia] : (double)a->ints[ia].size;
      double y = b->is_float ? b->reals[ib] : (double)b->ints[ib].size;
      if ((!a->is_float && a->ints[ia].symbol >= 0) || (!b->is_float && b->ints[ib].symbol >= 0)) {
        ox_known_free(k);
        return tf_status_new(TF_ERR_UNSUPPORTED, "float arithmetic on a symbolic size");
      }
      k->reals[i] = stored(k->dtype, fold_real(op, x, y));
    } else if ((op == '/' || op == '%' || op == 'f') && b->ints[ib].symbol < 0 && b->ints[ib].size == 0) {
      ox_known_free(k);
      return tf_status_new(TF_ERR_INVALID_INPUT, "integer %s of %" PRId64 "%s by zero",
                           op == '/' ? "division" : "remainder", a->ints[ia].size,
                           a->ints[ia].symbol >= 0 ? "*symbol" : "");
    } else if (!fold_int(op, a->ints[ia], b->ints[ib], &k->ints[i])) {
      ox_known_free(k);
      const bool remainder = op == '%' || op == 'f';
      return tf_status_new(TF_ERR_UNSUPPORTED, "'%c' of sizes %" PRId64 "%s and %" PRId64 "%s %s", remainder ? '%' : op,
                           a->ints[ia].size, a->ints[ia].symbol >= 0 ? "*symbol" : "", b->ints[ib].size,
                           b->ints[ib].symbol >= 0 ? "*symbol" : "",
                           remainder ? "depends on the symbol's value" : "is not one symbol's multiple in 64 bits");
    }
  }
  *out = k;
  return NULL;
}

tf_status ox_fold_where(const ox_known *cond, const ox_known *x, const ox_known *y, int64_t room, ox_known **out) {
  *out = NULL;
  int32_t rank, rank2;
  int64_t shape[TF_MAX_RANK], shape2[TF_MAX_RANK];
  if (!broadcast(x, y, &rank, shape))
    return tf_status_new(TF_ERR_SHAPE, "Where: known values of shapes that do not broadcast");
  ox_known both = {.rank = rank}; /* the shape of x and y broadcast */
  memcpy(both.shape, shape, sizeof(int64_t) * (size_t)rank);
  if (!broadcast(cond, &both, &rank2, shape2))
    return tf_status_new(TF_ERR_SHAPE, "Where: a condition that does not broadcast with its values");
  if (x->is_float != y->is_float)
    return tf_status_new(TF_ERR_UNSUPPORTED, "Where of a known float and a known integer");
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_within(x->is_float, x->dtype, rank2, shape2, room, "a Where", &k));
  for (int64_t i = 0; i < k->count; i++) {
    const int64_t ic = source_index(cond, rank2, shape2, i);
    const bool take_x = cond->is_float ? cond->reals[ic] != 0 : cond->ints[ic].size != 0 || cond->ints[ic].symbol >= 0;
    const ox_known *from = take_x ? x : y;
    const int64_t at = source_index(from, rank2, shape2, i);
    if (k->is_float)
      k->reals[i] = from->reals[at];
    else
      k->ints[i] = from->ints[at];
  }
  *out = k;
  return NULL;
}

tf_status ox_fold_cast(const ox_known *x, tf_dtype to, ox_known **out) {
  bool is_float = to == TF_F32 || to == TF_F16 || to == TF_BF16;
  *out = ox_known_new(is_float, to, x->rank, x->shape);
  if (!*out)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a cast");
  for (int64_t i = 0; i < x->count; i++) {
    if (is_float && !x->is_float) {
      if (x->ints[i].symbol >= 0) {
        ox_known_free(*out);
        *out = NULL;
        return tf_status_new(TF_ERR_UNSUPPORTED, "a symbolic size cast to a float");
      }
      (*out)->reals[i] = (double)x->ints[i].size;
    } else if (is_float) {
      (*out)->reals[i] = x->reals[i];
    } else if (x->is_float) {
      if (isnan(x->reals[i])) {
        ox_known_free(*out);
        *out = NULL;
        return tf_status_new(TF_ERR_UNSUPPORTED, "a cast to an integer of NaN");
      }
      /* past int64 (T5's log(0) = -inf, which its Where then leaves out): saturated, as CUDA's cast */
      (*out)->ints[i] = tf_fixed(x->reals[i] >= 0x1p63   ? INT64_MAX
                                 : x->reals[i] < -0x1p63 ? INT64_MIN
                                                         : (int64_t)x->reals[i]);
    } else {
      (*out)->ints[i] = x->ints[i];
    }
  }
  return NULL;
}

ox_known *ox_fold_copy(const ox_known *x, int32_t rank, const int64_t *shape) {
  ox_known *k = ox_known_new(x->is_float, x->dtype, rank, shape);
  if (!k || k->count != x->count) {
    ox_known_free(k);
    return NULL;
  }
  if (x->is_float)
    memcpy(k->reals, x->reals, (size_t)x->count * sizeof(double));
  else
    memcpy(k->ints, x->ints, (size_t)x->count * sizeof(tf_dim));
  return k;
}

/* ONNX's Slice bounds on an axis of n elements: start and end counted from the end when negative,
 * then clamped to [0, n] (step > 0) or start to [0, n - 1] and end to [-1, n - 1] (step < 0). */
static int64_t slice_bound(int64_t at, int64_t n, bool backward, bool is_end) {
  if (at < 0)
    at = at < -n ? -1 : at + n; /* never overflows: -n <= at < 0 here, or below */
  const int64_t low = backward && is_end ? -1 : 0, high = backward ? n - 1 : n;
  return at < low ? low : at > high ? high : at;
}

tf_status ox_fold_slice(const ox_known *x, int32_t axis, int64_t start, int64_t end, int64_t step, ox_known **out) {
  *out = NULL;
  if (axis < 0 || axis >= x->rank || step == 0 || step == INT64_MIN)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "Slice of a known rank-%" PRId32 " value: axis %" PRId32 ", step %" PRId64, x->rank, axis,
                         step);
  const int64_t n = x->shape[axis];
  const bool backward = step < 0;
  start = slice_bound(start, n, backward, false);
  end = slice_bound(end, n, backward, true);
  const int64_t stride = backward ? -step : step, span = backward ? start - end : end - start;
  int64_t shape[TF_MAX_RANK];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->rank);
  shape[axis] = span > 0 ? (span - 1) / stride + 1 : 0; /* no overflow at a step of INT64_MAX */
  ox_known *k = ox_known_new(x->is_float, x->dtype, x->rank, shape);
  if (!k)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a Slice");
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < axis; i++)
    outer *= x->shape[i];
  for (int32_t i = axis + 1; i < x->rank; i++)
    inner *= x->shape[i];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < shape[axis]; j++)
      for (int64_t e = 0; e < inner; e++, at++) {
        const int64_t from = (o * n + start + j * step) * inner + e;
        if (x->is_float)
          k->reals[at] = x->reals[from];
        else
          k->ints[at] = x->ints[from];
      }
  *out = k;
  return NULL;
}

tf_status ox_fold_reduce(const ox_known *x, const bool *reduced, bool keepdims, char op, ox_known **out) {
  *out = NULL;
  if (!x->is_float && ox_known_has_symbol(x) && op != '*')
    return tf_status_new(TF_ERR_UNSUPPORTED, "a reduction of symbolic sizes");
  int64_t shape[TF_MAX_RANK], kept[TF_MAX_RANK]; /* kept: the output's shape with every axis, 1 where reduced */
  int32_t rank = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    kept[i] = reduced[i] ? 1 : x->shape[i];
    if (!reduced[i] || keepdims)
      shape[rank++] = kept[i];
  }
  ox_known *k = ox_known_new(x->is_float, x->dtype, rank, shape);
  bool *filled = k ? calloc((size_t)(k->count ? k->count : 1), sizeof(bool)) : NULL;
  if (!filled) {
    ox_known_free(k);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a reduction");
  }
  bool fits = true;
  for (int64_t i = 0; i < x->count && fits; i++) {
    int64_t rest = i, to = 0, stride = 1;
    for (int32_t a = x->rank - 1; a >= 0; a--) { /* the output element of input element i */
      const int64_t at = rest % x->shape[a];
      rest /= x->shape[a];
      to += (reduced[a] ? 0 : at) * stride;
      stride *= kept[a];
    }
    if (x->is_float)
      k->reals[to] = !filled[to] ? x->reals[i] : stored(k->dtype, fold_real(op, k->reals[to], x->reals[i]));
    else if (!filled[to])
      k->ints[to] = x->ints[i];
    else
      fits = fold_int(op, k->ints[to], x->ints[i], &k->ints[to]);
    filled[to] = true;
  }
  for (int64_t i = 0; i < k->count && fits; i++) /* an empty reduction: the sum 0, the product 1 (max/min: refused) */
    if (!filled[i] && (op == '+' || op == '*')) {
      if (k->is_float)
        k->reals[i] = op == '+' ? 0 : 1;
      else
        k->ints[i] = tf_fixed(op == '+' ? 0 : 1);
    } else {
      fits = filled[i];
    }
  free(filled);
  if (!fits) {
    ox_known_free(k);
    return tf_status_new(TF_ERR_UNSUPPORTED, "a reduction of known values past int64, or a max of none");
  }
  *out = k;
  return NULL;
}

tf_status ox_fold_scatter_nd(const ox_known *data, const ox_known *indices, const ox_known *updates, char reduction,
                             ox_known **out) {
  *out = NULL;
  const int32_t k = indices->rank > 0 ? (int32_t)indices->shape[indices->rank - 1] : -1;
  if (indices->is_float || ox_known_has_symbol(indices) || (!data->is_float && ox_known_has_symbol(data)) ||
      (!updates->is_float && ox_known_has_symbol(updates)))
    return tf_status_new(TF_ERR_UNSUPPORTED, "ScatterND: integer indices and fixed values");
  if (k < 1 || k > data->rank || updates->rank != indices->rank - 1 + data->rank - k)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "ScatterND: indices [..., %" PRId32 "] and updates of rank %" PRId32
                         " for data of rank %" PRId32,
                         k, updates->rank, data->rank);
  int64_t slice = 1, n = 1;
  for (int32_t i = k; i < data->rank; i++)
    slice *= data->shape[i];
  for (int32_t i = 0; i < indices->rank - 1; i++) {
    if (updates->shape[i] != indices->shape[i])
      return tf_status_new(TF_ERR_INVALID_INPUT, "ScatterND: updates' axis %" PRId32 " is not the indices'", i);
    n *= indices->shape[i];
  }
  for (int32_t i = k; i < data->rank; i++)
    if (updates->shape[indices->rank - 1 + i - k] != data->shape[i])
      return tf_status_new(TF_ERR_INVALID_INPUT, "ScatterND: updates' slices are not data's");
  if (data->is_float != updates->is_float)
    return tf_status_new(TF_ERR_INVALID_INPUT, "ScatterND: updates of another type than the data's");
  ox_known *y = ox_fold_copy(data, data->rank, data->shape);
  if (!y)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a ScatterND");
  for (int64_t j = 0; j < n; j++) {
    int64_t at = 0;
    for (int32_t a = 0; a < k; a++) {
      int64_t index = indices->ints[j * k + a].size;
      index += index < 0 ? data->shape[a] : 0;
      if (index < 0 || index >= data->shape[a]) {
        ox_known_free(y);
        return tf_status_new(TF_ERR_INVALID_INPUT, "ScatterND: index %" PRId64 " outside axis %" PRId32 " of %" PRId64,
                             indices->ints[j * k + a].size, a, data->shape[a]);
      }
      at = at * data->shape[a] + index;
    }
    for (int64_t e = 0; e < slice; e++) {
      const int64_t to = at * slice + e, from = j * slice + e;
      if (data->is_float) {
        const double u = updates->reals[from];
        y->reals[to] = stored(y->dtype, reduction == '=' ? u : fold_real(reduction, y->reals[to], u));
      } else if (reduction == '=') {
        y->ints[to] = updates->ints[from];
      } else if (!fold_int(reduction, y->ints[to], updates->ints[from], &y->ints[to])) {
        ox_known_free(y);
        return tf_status_new(TF_ERR_UNSUPPORTED, "ScatterND: an integer reduction past int64");
      }
    }
  }
  *out = y;
  return NULL;
}

tf_status ox_fold_gather(const ox_known *data, const ox_known *indices, int32_t axis, int64_t room, ox_known **out) {
  *out = NULL;
  if (axis < 0)
    axis += data->rank;
  if (axis < 0 || axis >= data->rank || data->rank + indices->rank - 1 > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "Gather axis %" PRId32 " of a rank-%" PRId32 " value", axis, data->rank);
  int64_t shape[TF_MAX_RANK];
  int32_t rank = 0;
  for (int32_t i = 0; i < axis; i++)
    shape[rank++] = data->shape[i];
  for (int32_t i = 0; i < indices->rank; i++)
    shape[rank++] = indices->shape[i];
  for (int32_t i = axis + 1; i < data->rank; i++)
    shape[rank++] = data->shape[i];
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_within(data->is_float, data->dtype, rank, shape, room, "a Gather", &k));
  int64_t outer = 1, inner = 1, n = data->shape[axis];
  for (int32_t i = 0; i < axis; i++)
    outer *= data->shape[i];
  for (int32_t i = axis + 1; i < data->rank; i++)
    inner *= data->shape[i];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t j = 0; j < indices->count; j++) {
      if (indices->is_float || indices->ints[j].symbol >= 0) {
        ox_known_free(k);
        return tf_status_new(TF_ERR_INVALID_INPUT, "Gather index %" PRId64 " is not an integer", j);
      }
      int64_t index = indices->ints[j].size;
      if (index < 0)
        index += n;
      if (index < 0 || index >= n) {
        ox_known_free(k);
        return tf_status_new(TF_ERR_INVALID_INPUT, "Gather index %" PRId64 " out of range [0, %" PRId64 ")",
                             indices->ints[j].size, n);
      }
      for (int64_t i = 0; i < inner; i++, at++) {
        int64_t from = (o * n + index) * inner + i;
        if (k->is_float)
          k->reals[at] = data->reals[from];
        else
          k->ints[at] = data->ints[from];
      }
    }
  }
  *out = k;
  return NULL;
}

/* Whether a part of a Concat adds to it: one of no elements adds none, whatever its sizes off the axis
 * (as onnxruntime reads it), unless no part has elements. */
static bool adds_to(const ox_known *part, const ox_known *first) { return part->count > 0 || first->count == 0; }

tf_status ox_fold_concat(const ox_known *const *parts, int32_t n, int32_t axis, int64_t room, ox_known **out) {
  *out = NULL;
  if (n < 1)
    return tf_status_new(TF_ERR_INVALID_INPUT, "Concat of nothing");
  const ox_known *first = parts[0]; /* the first part with elements, where one has */
  for (int32_t p = 1; p < n && first->count == 0; p++)
    if (parts[p]->count > 0)
      first = parts[p];
  if (axis < 0)
    axis += first->rank;
  if (axis < 0 || axis >= first->rank)
    return tf_status_new(TF_ERR_SHAPE, "Concat axis out of range for rank %" PRId32, first->rank);
  int64_t shape[TF_MAX_RANK];
  memcpy(shape, first->shape, sizeof(shape));
  shape[axis] = 0;
  bool is_float = false;
  for (int32_t p = 0; p < n; p++) {
    if (parts[p]->rank != first->rank)
      return tf_status_new(TF_ERR_SHAPE, "Concat of ranks %" PRId32 " and %" PRId32, first->rank, parts[p]->rank);
    if (!adds_to(parts[p], first))
      continue;
    for (int32_t d = 0; d < first->rank; d++)
      if (d != axis && parts[p]->shape[d] != first->shape[d])
        return tf_status_new(TF_ERR_SHAPE, "Concat parts differ at axis %" PRId32, d);
    shape[axis] += parts[p]->shape[axis];
    is_float = is_float || parts[p]->is_float;
  }
  ox_known *k;
  TF_RETURN_IF_ERROR(
      ox_known_within(is_float, is_float ? TF_F32 : first->dtype, first->rank, shape, room, "a Concat", &k));
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < axis; i++)
    outer *= shape[i];
  for (int32_t i = axis + 1; i < first->rank; i++)
    inner *= shape[i];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; o++) {
    for (int32_t p = 0; p < n; p++) {
      if (!adds_to(parts[p], first))
        continue;
      int64_t block = parts[p]->shape[axis] * inner;
      for (int64_t i = 0; i < block; i++, at++) {
        int64_t from = o * block + i;
        if (!is_float)
          k->ints[at] = parts[p]->ints[from];
        else
          k->reals[at] = parts[p]->is_float ? parts[p]->reals[from] : (double)parts[p]->ints[from].size;
      }
    }
  }
  *out = k;
  return NULL;
}

/* The most multiply-adds a MatMul of known values may take at import (a rotary table: T x d/2). */
#define OX_FOLD_MATMUL_WORK ((int64_t)1 << 24)

static double real_at(const ox_known *x, int64_t i) { return x->is_float ? x->reals[i] : (double)x->ints[i].size; }

bool ox_known_has_symbol(const ox_known *x) {
  for (int64_t i = 0; !x->is_float && i < x->count; i++)
    if (x->ints[i].symbol >= 0)
      return true;
  return false;
}

tf_status ox_fold_transpose(const ox_known *x, const int32_t *perm, ox_known **out) {
  int64_t shape[TF_MAX_RANK], strides[TF_MAX_RANK], stride = 1;
  for (int32_t i = x->rank - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= x->shape[i];
  }
  for (int32_t i = 0; i < x->rank; i++)
    shape[i] = x->shape[perm[i]];
  *out = ox_known_new(x->is_float, x->dtype, x->rank, shape);
  if (!*out)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a transpose");
  for (int64_t i = 0; i < (*out)->count; i++) {
    int64_t rest = i, from = 0;
    for (int32_t d = x->rank - 1; d >= 0; d--) {
      from += (rest % shape[d]) * strides[perm[d]];
      rest /= shape[d];
    }
    if (x->is_float)
      (*out)->reals[i] = x->reals[from];
    else
      (*out)->ints[i] = x->ints[from];
  }
  return NULL;
}

tf_status ox_fold_expand(const ox_known *x, int32_t rank, const int64_t *shape, int64_t room, ox_known **out) {
  ox_known target = {.rank = rank};
  memcpy(target.shape, shape, sizeof(int64_t) * (size_t)rank);
  int32_t out_rank;
  int64_t out_shape[TF_MAX_RANK];
  *out = NULL;
  if (!broadcast(x, &target, &out_rank, out_shape))
    return tf_status_new(TF_ERR_SHAPE, "Expand: a known value that does not broadcast to the shape");
  TF_RETURN_IF_ERROR(ox_known_within(x->is_float, x->dtype, out_rank, out_shape, room, "an Expand", out));
  for (int64_t i = 0; i < (*out)->count; i++) {
    const int64_t from = source_index(x, out_rank, out_shape, i);
    if (x->is_float)
      (*out)->reals[i] = x->reals[from];
    else
      (*out)->ints[i] = x->ints[from];
  }
  return NULL;
}

tf_status ox_fold_matmul(const ox_known *a, const ox_known *b, int64_t room, ox_known **out) {
  *out = NULL;
  if (a->rank < 2 || b->rank < 2 || ox_known_has_symbol(a) || ox_known_has_symbol(b))
    return tf_status_new(TF_ERR_UNSUPPORTED, "MatMul of known values needs two of rank 2 or more, without sizes");
  const int64_t m = a->shape[a->rank - 2], k = a->shape[a->rank - 1], n = b->shape[b->rank - 1];
  if (b->shape[b->rank - 2] != k)
    return tf_status_new(TF_ERR_SHAPE, "MatMul of known values: %" PRId64 " columns against %" PRId64 " rows", k,
                         b->shape[b->rank - 2]);
  ox_known batch_a = {.rank = a->rank - 2}, batch_b = {.rank = b->rank - 2};
  memcpy(batch_a.shape, a->shape, sizeof(int64_t) * (size_t)batch_a.rank);
  memcpy(batch_b.shape, b->shape, sizeof(int64_t) * (size_t)batch_b.rank);
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  if (!broadcast(&batch_a, &batch_b, &rank, shape) || rank + 2 > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "MatMul of known values whose batch axes do not broadcast");
  int64_t batches = 1;
  for (int32_t i = 0; i < rank; i++)
    batches *= shape[i];
  const double work = (double)batches * (double)m * (double)n * (double)k;
  if (work > OX_FOLD_MATMUL_WORK)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "MatMul of known values of %.3g multiply-adds, over the %.3g folded "
                         "when importing",
                         work, (double)OX_FOLD_MATMUL_WORK);
  shape[rank] = m;
  shape[rank + 1] = n;
  const tf_dtype dtype = a->is_float ? a->dtype : b->is_float ? b->dtype : TF_F32;
  TF_RETURN_IF_ERROR(ox_known_within(true, dtype, rank + 2, shape, room, "a MatMul", out));
  for (int64_t e = 0; e < batches; e++) {
    const int64_t first_a = source_index(&batch_a, rank, shape, e) * m * k;
    const int64_t first_b = source_index(&batch_b, rank, shape, e) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double sum = 0;
        for (int64_t t = 0; t < k; t++)
          sum += real_at(a, first_a + i * k + t) * real_at(b, first_b + t * n + j);
        (*out)->reals[(e * m + i) * n + j] = stored(dtype, sum);
      }
  }
  return NULL;
}

tf_status ox_fold_unary(const ox_known *x, double (*function)(double), ox_known **out) {
  *out = NULL;
  if (ox_known_has_symbol(x))
    return tf_status_new(TF_ERR_UNSUPPORTED, "a function of a symbolic size");
  const tf_dtype dtype = x->is_float ? x->dtype : TF_F32;
  *out = ox_known_new(true, dtype, x->rank, x->shape);
  if (!*out)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < x->count; i++)
    (*out)->reals[i] = stored(dtype, function(real_at(x, i)));
  return NULL;
}
