/* The operators that make values known at import time or constants of the graph: Identity (a known
 * value copied, a tensor passed on), Constant, Shape (a tensor's symbolic shape), Range (fixed and
 * up to OX_KNOWN_RANGE long: known; else a graph constant) and ConstantOfShape (fixed and up to
 * OX_KNOWN_FILL elements: known; others become graph constants), OneHot of known values, EyeLike (of a
 * fixed shape known, of a symbolic one computed); and
 * tightfit's StopGradient, a value autodiff treats as a constant. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "common/checked.h"
#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The longest Range with fixed ends that stays a known value (positions of a fixed sequence length,
 * from which a rotary table or a causal mask folds); a longer one is an arange constant of the graph. */
#define OX_KNOWN_RANGE ((int64_t)1 << 16)
/* The largest fixed ConstantOfShape that stays a known value (16 MiB of integers: T5's [512, 512]
 * relative positions and their cap); a larger or symbolic one is a fill constant of the graph. */
#define OX_KNOWN_FILL ((int64_t)1 << 20)

tf_status ox_convert_identity(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  ox_value *from = ox_value_find(im, ox_input(node, 0));
  if (!from)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "input '%s' has no value", ox_input(node, 0));
  if (from->known && from->tensor == TF_NO_TENSOR && !from->initializer) {
    ox_known *k = ox_fold_copy(from->known, from->known->rank, from->known->shape);
    return k ? ox_set_known(im, node, 0, k) : ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x)); /* a tied initializer stays one parameter */
  return ox_set_tensor(im, node, 0, x);
}

/* tightfit's StopGradient (domain "tightfit", written by from_torch for PyTorch's detach()): its
 * input's value, through which no gradient flows. A known value and integer data have none. */
tf_status ox_convert_stop_gradient(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (ox_foldable(im, node, 0))
    return ox_convert_identity(im, node);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  const bool floating = dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16;
  return ox_set_tensor(im, node, 0, floating ? tf_unary(im->graph, TF_OP_STOP_GRADIENT, x) : x);
}

tf_status ox_convert_constant(ox_import *im, const ox_node *node) {
  char what[512], label[256];
  snprintf(what, sizeof(what), "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  const Onnx__AttributeProto *a;
  ox_known *k = NULL;
  if ((a = ox_attr(node, "value")) && a->t) {
    TF_RETURN_IF_ERROR(ox_known_from_tensor(a->t, what, &k));
  } else if ((a = ox_attr(node, "value_float")) && a->has_f) {
    if ((k = ox_known_new(true, TF_F32, 0, NULL)))
      k->reals[0] = a->f;
  } else if ((a = ox_attr(node, "value_int")) && a->has_i) {
    if ((k = ox_known_new(false, TF_I64, 0, NULL)))
      k->ints[0] = tf_fixed(a->i);
  } else if ((a = ox_attr(node, "value_ints"))) {
    int64_t n = (int64_t)a->n_ints;
    if ((k = ox_known_new(false, TF_I64, 1, &n)))
      for (int64_t i = 0; i < n; i++)
        k->ints[i] = tf_fixed(a->ints[i]);
  } else if ((a = ox_attr(node, "value_floats"))) {
    int64_t n = (int64_t)a->n_floats;
    if ((k = ox_known_new(true, TF_F32, 1, &n)))
      for (int64_t i = 0; i < n; i++)
        k->reals[i] = a->floats[i];
  } else {
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "no value, value_float, value_int(s) or value_floats attribute");
  }
  return k ? ox_set_read(im, node, 0, k) : ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
}

tf_status ox_convert_shape(ox_import *im, const ox_node *node) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, dims));
  int64_t start = ox_attr_int(node, "start", 0), end = ox_attr_int(node, "end", rank);
  start = start < 0 ? start + rank : start;
  end = end < 0 ? end + rank : end;
  start = start < 0 ? 0 : start > rank ? rank : start;
  end = end < start ? start : end > rank ? rank : end;
  int64_t n = end - start;
  ox_known *k = ox_known_new(false, TF_I64, 1, &n);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < n; i++) {
    k->ints[i] = dims[start + i];
    if (k->ints[i].size == -1 && k->ints[i].symbol < 0) {
      ox_known_free(k);
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "axis %" PRId64 " of '%s' is a product of symbols", start + i,
                     ox_input(node, 0));
    }
  }
  return ox_set_known(im, node, 0, k);
}

/* A Range of fixed numbers and at most OX_KNOWN_RANGE elements as a known value: integers, or floats
 * (XLNet's relative positions, torch.arange(T, -T, -1.0)), any non-zero step. */
static tf_status fixed_range(ox_import *im, const ox_node *node, const ox_known *start, const ox_known *limit,
                             const ox_known *delta) {
  const bool is_float = start->is_float || limit->is_float || delta->is_float;
  const double s = is_float && start->is_float ? start->reals[0] : (double)start->ints[0].size;
  const double l = limit->is_float ? limit->reals[0] : (double)limit->ints[0].size;
  const double d = delta->is_float ? delta->reals[0] : (double)delta->ints[0].size;
  double count = d != 0 ? ceil((l - s) / d) : NAN;
  if (!is_float && d != 0) { /* exactly: int64 ends need not fit a double */
    const int64_t a = start->ints[0].size, b = limit->ints[0].size, step = delta->ints[0].size;
    int64_t span;
    const bool fits = step > 0 ? tf_checked_sub_i64(b, a, &span) : tf_checked_sub_i64(a, b, &span);
    const int64_t stride = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
    count = !fits ? INFINITY : span <= 0 ? 0 : (double)((span - 1) / stride + 1);
  }
  if (!(count <= (double)OX_KNOWN_RANGE)) /* NaN too: a zero step, infinite ends */
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Range from %g to %g by %g: a non-zero step and at most %" PRId64 " elements", s, l, d,
                   OX_KNOWN_RANGE);
  const int64_t n = count > 0 ? (int64_t)count : 0;
  ox_known *k = ox_known_new(is_float, is_float ? TF_F32 : (limit->dtype == TF_I32 ? TF_I32 : TF_I64), 1, &n);
  if (!k)
    return ox_at(im, node, ox_known_refusal(1, &n, "a Range"));
  for (int64_t i = 0; i < n; i++) {
    if (is_float)
      k->reals[i] = (double)(float)(s + (double)i * d);
    else
      k->ints[i] = tf_fixed(start->ints[0].size + i * delta->ints[0].size); /* within [start, limit) */
  }
  return ox_set_known(im, node, 0, k);
}

/* A Range of floats from 0 by 1 to a symbolic size cast to f32 (Gemma 2's torch.arange(T, dtype=float)
 * of a symbolic T): an arange constant of f32, of symbolic length. */
static tf_status float_range_to_size(ox_import *im, const ox_node *node, const ox_value *limit) {
  const ox_known *start, *delta;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 0, &start));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &delta));
  const double s = start->count != 1 ? NAN : start->is_float ? start->reals[0] : (double)start->ints[0].size;
  const double d = delta->count != 1 ? NAN : delta->is_float ? delta->reals[0] : (double)delta->ints[0].size;
  if (s != 0 || d != 1 || (!start->is_float && start->ints[0].symbol >= 0) ||
      (!delta->is_float && delta->ints[0].symbol >= 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a Range to a symbolic size cast to a float only from 0 by 1");
  tf_dim length = limit->float_size;
  tf_tensor_id id = tf_graph_constant(im->graph, node->proto->output[0], TF_F32, tf_shape_from(&length, 1),
                                      tf_init_make(TF_INIT_ARANGE, 0, 1));
  return ox_set_tensor(im, node, 0, id);
}

tf_status ox_convert_range(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  const ox_value *to = ox_value_find(im, ox_input(node, 1));
  if (to && !ox_is_known(im, ox_input(node, 1)) && to->is_float_size)
    return float_range_to_size(im, node, to);
  const ox_known *start, *limit, *delta;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 0, &start));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &limit));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &delta));
  if (start->count != 1 || limit->count != 1 || delta->count != 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "start, limit and delta must be scalars");
  const bool fixed = (start->is_float || start->ints[0].symbol < 0) && (limit->is_float || limit->ints[0].symbol < 0) &&
                     (delta->is_float || delta->ints[0].symbol < 0);
  int64_t span = 0;
  const bool long_arange =
      fixed && !start->is_float && !limit->is_float && !delta->is_float && delta->ints[0].size == 1 &&
      (!tf_checked_sub_i64(limit->ints[0].size, start->ints[0].size, &span) || span > OX_KNOWN_RANGE);
  if (fixed && !long_arange)
    return fixed_range(im, node, start, limit, delta);
  if (start->is_float || limit->is_float || delta->is_float || start->ints[0].symbol >= 0 || delta->ints[0].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Range of integers with a fixed start and step");
  int64_t s = start->ints[0].size, d = delta->ints[0].size;
  tf_dim l = limit->ints[0];
  if (d != 1 || (l.symbol >= 0 && s != 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Range with a step other than 1, or from a start other than 0 to a "
                   "symbolic limit");
  span = 0;
  if (l.symbol < 0 && l.size > s && !tf_checked_sub_i64(l.size, s, &span))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "Range from %" PRId64 " to %" PRId64 " has more elements than int64 counts", s, l.size);
  tf_dim length = l.symbol >= 0 ? l : tf_fixed(span);
  // A symbolic length (torch.arange(x.shape[1])) is a constant of symbolic shape: position ids.
  char name[300];
  snprintf(name, sizeof(name), "%s", node->proto->output[0]);
  tf_tensor_id id = tf_graph_constant(im->graph, name, limit->dtype == TF_I32 ? TF_I32 : TF_I64,
                                      tf_shape_from(&length, 1), tf_init_make(TF_INIT_ARANGE, (double)s, 1));
  return ox_set_tensor(im, node, 0, id);
}

tf_status ox_convert_constant_of_shape(ox_import *im, const ox_node *node) {
  const ox_known *shape;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 0, &shape));
  if (shape->is_float || shape->count > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the shape must be at most %d integers", TF_MAX_RANK);
  double value = 0;
  tf_dtype dtype = TF_F32;
  const Onnx__AttributeProto *a = ox_attr(node, "value");
  if (a && a->t) {
    ox_known *k;
    char what[512], label[256];
    snprintf(what, sizeof(what), "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
    TF_RETURN_IF_ERROR(ox_known_from_tensor(a->t, what, &k));
    value = k->count < 1 ? 0 : k->is_float ? k->reals[0] : (double)k->ints[0].size;
    dtype = k->is_float && k->dtype != TF_F16 && k->dtype != TF_BF16 ? TF_F32 : k->dtype; /* bf16: opset 20 */
    ox_known_free(k);
  }
  tf_dim dims[TF_MAX_RANK];
  int64_t sizes[TF_MAX_RANK], count = 1;
  bool fixed = true;
  for (int64_t i = 0; i < shape->count; i++) {
    dims[i] = shape->ints[i];
    sizes[i] = dims[i].size;
    fixed = fixed && dims[i].symbol < 0 && dims[i].size >= 0 && dims[i].size <= OX_KNOWN_FILL;
    count *= fixed ? dims[i].size : 1;
    fixed = fixed && count <= OX_KNOWN_FILL;
  }
  if (fixed) { /* torch.full([], x) is Add(ConstantOfShape([]), x); T5's full_like of its [T, T] buckets */
    const bool is_float = dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16;
    ox_known *k = ox_known_new(is_float, dtype, (int32_t)shape->count, sizes);
    if (!k)
      return ox_at(im, node, ox_known_refusal((int32_t)shape->count, sizes, "a fill"));
    for (int64_t i = 0; i < k->count; i++) {
      if (is_float)
        k->reals[i] = value;
      else
        k->ints[i] = tf_fixed((int64_t)value);
    }
    return ox_set_known(im, node, 0, k);
  }
  /* A half fill is an f32 constant cast to its type, as the importer's other half constants. */
  const bool half = dtype == TF_F16 || dtype == TF_BF16;
  tf_tensor_id id = tf_graph_constant(im->graph, node->proto->output[0], half ? TF_F32 : dtype,
                                      tf_shape_from(dims, (int32_t)shape->count), tf_init_make(TF_INIT_FILL, value, 0));
  return ox_set_tensor(im, node, 0, half ? tf_cast(im->graph, id, dtype) : id);
}

/* OneHot of indices computed at run time (F.one_hot(labels, C); float and u8 indices cast to int64
 * first, floats truncated, as ONNX has it) by a known depth and [off, on] values: each index's one-hot
 * row over depth (onnx_indices.c: one outside [-depth, depth) all off, as ONNX has it), off + (on -
 * off) row, the depth axis moved to `axis`, in the values' dtype (an integer one exact: the rows are
 * 0s and 1s). */
static tf_status one_hot_of_data(ox_import *im, const ox_node *node, int64_t depth, const ox_known *values) {
  tf_tensor_id indices, wrapped, poison, row;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &indices));
  const tf_dtype dtype = ox_dtype_of(im, indices);
  if (dtype != TF_I32 && dtype != TF_I64) /* ONNX casts other indices (float, uint8) to int64 first */
    indices = tf_cast(im->graph, indices, TF_I64);
  TF_RETURN_IF_ERROR(ox_wrapped_indices(im, node, indices, depth, &wrapped, &poison));
  TF_RETURN_IF_ERROR(ox_one_hot_of(im, node, wrapped, depth, &row));
  const int32_t rank = ox_rank_of(im, row);
  int64_t axis = ox_attr_int(node, "axis", -1);
  if (axis < -rank || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId32 " output", axis, rank);
  axis = axis < 0 ? axis + rank : axis;
  const double off = values->is_float ? values->reals[0] : (double)values->ints[0].size;
  const double on = values->is_float ? values->reals[1] : (double)values->ints[1].size;
  if ((!values->is_float && (values->ints[0].symbol >= 0 || values->ints[1].symbol >= 0)) || !isfinite(off) ||
      !isfinite(on))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "OneHot of data with values that are not two finite numbers");
  tf_graph *g = im->graph;
  tf_tensor_id y = row;
  if (on - off != 1.0)
    y = tf_mul(g, y, ox_scalar(im, node, TF_F32, on - off));
  if (off != 0.0)
    y = tf_add(g, y, ox_scalar(im, node, TF_F32, off));
  if (axis != rank - 1) {
    int32_t perm[TF_MAX_RANK];
    for (int32_t d = 0, j = 0; d < rank; d++)
      perm[d] = d == axis ? rank - 1 : j++;
    y = tf_transpose(g, y, perm, rank);
  }
  return ox_set_tensor(im, node, 0, values->dtype == TF_F32 ? y : tf_cast(g, y, values->dtype));
}

/* OneHot of known indices, depth and [off, on] values (PyTorch 2.x's repeat_interleave by a
 * symbolic count writes its repeats so: GCViT's q_global.repeat_interleave(B // b, 0)): a known
 * value, the values integers (a symbol's multiple too) or floats; an index below 0 counts from the
 * end, one outside [-depth, depth) is all off. Of indices computed at run time: one_hot_of_data. */
tf_status ox_convert_one_hot(ox_import *im, const ox_node *node) {
  const ox_known *indices, *depth, *values;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &depth));
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 2, &values));
  if (values->count != 2)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "OneHot's values hold %" PRId64 " elements, not [off, on]",
                   values->count);
  if (!ox_is_known(im, ox_input(node, 0))) {
    const double n = depth->count != 1 ? -1 : depth->is_float ? depth->reals[0] : (double)depth->ints[0].size;
    if (depth->count != 1 || (!depth->is_float && depth->ints[0].symbol >= 0) || !(n >= 1 && n < OX_INDEX_EXACT_LIMIT))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "OneHot of data: the depth must be one fixed number from 1 to 2^24 - 1");
    return one_hot_of_data(im, node, (int64_t)n, values);
  }
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 0, &indices));
  if (indices->is_float || ox_known_has_symbol(indices) || indices->rank >= TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "OneHot's indices must be fixed integers of rank below %d",
                   TF_MAX_RANK);
  const double d = depth->count != 1 ? -1 : depth->is_float ? depth->reals[0] : (double)depth->ints[0].size;
  if (depth->count != 1 || (!depth->is_float && depth->ints[0].symbol >= 0) || !(d >= 1 && d <= OX_KNOWN_FILL))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "OneHot's depth must be one fixed number from 1 to %" PRId64,
                   OX_KNOWN_FILL);
  const int64_t n = (int64_t)d, rank = indices->rank + 1;
  int64_t axis = ox_attr_int(node, "axis", -1);
  if (axis < -rank || axis >= rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "axis %" PRId64 " of a rank-%" PRId64 " output", axis, rank);
  axis = axis < 0 ? axis + rank : axis;
  if (indices->count > OX_KNOWN_FILL / n)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "OneHot of more than %" PRId64 " elements", OX_KNOWN_FILL);
  int64_t shape[TF_MAX_RANK], outer = 1, inner = 1;
  for (int64_t i = 0, j = 0; i < rank; i++) {
    shape[i] = i == axis ? n : indices->shape[j++];
    if (i < axis)
      outer *= shape[i];
    else if (i > axis)
      inner *= shape[i];
  }
  ox_known *k = ox_known_new(values->is_float, values->dtype, (int32_t)rank, shape);
  if (!k)
    return ox_at(im, node, ox_known_refusal((int32_t)rank, shape, "a OneHot"));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < n; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t index = indices->ints[o * inner + i].size;
        index = index < 0 ? index + n : index;
        const int64_t at = (o * n + c) * inner + i, pick = index == c ? 1 : 0;
        if (values->is_float)
          k->reals[at] = values->reals[pick];
        else
          k->ints[at] = values->ints[pick];
      }
  return ox_set_known(im, node, 0, k);
}

/* The dtype of input 0: its known value's, or its tensor's. */
static tf_status input_dtype(ox_import *im, const ox_node *node, tf_dtype *dtype) {
  if (ox_is_known(im, ox_input(node, 0))) {
    *dtype = ox_value_find(im, ox_input(node, 0))->known->dtype;
    return NULL;
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  *dtype = ox_dtype_of(im, x);
  return NULL;
}

/* EyeLike of a symbolic (or large) shape [R, C] (SigLIP's torch.eye(N) over a batch of N): a graph
 * computation, relu(1 - |i + k - j|) of the row positions [R, 1] and the column positions [1, C]
 * (arange constants of f32, exact below 2^24), a 0/1 mask of f32 (the form a bool takes here, see
 * onnx_mask.c), cast to an integer or half `dtype`. */
static tf_status eye_of_symbolic_shape(ox_import *im, const ox_node *node, const tf_dim *dims, int64_t diagonal,
                                       tf_dtype dtype, bool is_bool) {
  char name[300];
  snprintf(name, sizeof(name), "%s.rows", node->proto->output[0]);
  tf_tensor_id rows = tf_graph_constant(im->graph, name, TF_F32, TF_SHAPE(dims[0], tf_fixed(1)),
                                        tf_init_make(TF_INIT_ARANGE, (double)diagonal, 1));
  snprintf(name, sizeof(name), "%s.columns", node->proto->output[0]);
  tf_tensor_id columns =
      tf_graph_constant(im->graph, name, TF_F32, TF_SHAPE(tf_fixed(1), dims[1]), tf_init_make(TF_INIT_ARANGE, 0, 1));
  tf_tensor_id apart[2] = {rows, columns};
  tf_tensor_id distance = tf_unary(im->graph, TF_OP_ABS, tf_graph_node(im->graph, TF_OP_SUB, apart, 2, NULL));
  tf_tensor_id minus[2] = {ox_scalar(im, node, TF_F32, 1.0), distance};
  tf_tensor_id eye = tf_unary(im->graph, TF_OP_RELU, tf_graph_node(im->graph, TF_OP_SUB, minus, 2, NULL));
  if (!is_bool && dtype != TF_F32)
    eye = tf_cast(im->graph, eye, dtype);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, eye);
}

tf_status ox_convert_eye_like(ox_import *im, const ox_node *node) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(ox_input_dims(im, node, &rank, dims));
  if (rank != 2)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "EyeLike of a rank-%" PRId32 " input (ONNX: rank 2)", rank);
  const bool symbolic = dims[0].symbol >= 0 || dims[1].symbol >= 0 || dims[0].size > OX_KNOWN_FILL ||
                        dims[1].size > OX_KNOWN_FILL / (dims[0].size > 0 ? dims[0].size : 1);
  if (symbolic && (dims[0].size < 0 || dims[1].size < 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "EyeLike of an input whose axis is a product of symbols");
  tf_dtype dtype;
  const Onnx__AttributeProto *attr = ox_attr(node, "dtype");
  if (attr) {
    const int64_t code = ox_attr_int(node, "dtype", 0);
    if (!ox_dtype((int32_t)code, &dtype))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "EyeLike of dtype %s (%" PRId64 ")", ox_dtype_name((int32_t)code),
                     code);
  } else {
    TF_RETURN_IF_ERROR(input_dtype(im, node, &dtype));
  }
  const bool is_float = dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16;
  const int64_t shape[2] = {dims[0].size, dims[1].size}, diagonal = ox_attr_int(node, "k", 0);
  if (symbolic)
    return eye_of_symbolic_shape(im, node, dims, diagonal, dtype,
                                 attr ? ox_attr_int(node, "dtype", 0) == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
                                      : dtype == TF_U8);
  ox_known *k = ox_known_new(is_float, dtype, 2, shape);
  if (!k)
    return ox_at(im, node, ox_known_refusal(2, shape, "an EyeLike"));
  for (int64_t i = 0; i < shape[0]; i++)
    for (int64_t j = 0; j < shape[1]; j++) {
      const int64_t one = j - i == diagonal ? 1 : 0;
      if (is_float)
        k->reals[i * shape[1] + j] = (double)one;
      else
        k->ints[i * shape[1] + j] = tf_fixed(one);
    }
  return ox_set_known(im, node, 0, k);
}
