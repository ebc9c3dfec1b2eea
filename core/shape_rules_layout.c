/* Shape rules of the ops that move or select elements without computing: reshape, transpose,
 * concat, slice, expand. Targets of reshape/expand may use symbols, resolved through the graph. */
#include <inttypes.h>

#include "core/shape_rules_internal.h"
#include "core/slice_bounds.h"

#define UNRESOLVED (-1) /* a target dim {-1,-1}: "infer" for reshape, "keep" for expand */

/* Resolves the target dims of reshape/expand attributes into values[] (UNRESOLVED for {-1,-1}). */
static tf_status resolve_target(const tf_shape_query *q, int64_t values[TF_MAX_RANK], int32_t *rank) {
  const tf_shape *target = &q->attrs->u.shape.shape;
  const tf_shape_operand *x = &q->inputs[0];
  if (target->rank < 0 || target->rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "target of %s for %s has rank %" PRId32 "; ranks are 0 to %d", tf_op_name(q->op),
                         tf_rules_describe(x).text, target->rank, TF_MAX_RANK);
  for (int32_t i = 0; i < target->rank; i++) {
    tf_dim dim = target->dims[i];
    if (dim.size == -1 && dim.symbol == -1) {
      values[i] = UNRESOLVED;
      continue;
    }
    // Without a symbol table (a plan's shapes are concrete) a symbol cannot be resolved.
    if (dim.symbol >= 0 && !q->dim_value)
      return tf_status_new(TF_ERR_SHAPE, "target dim %" PRId32 " of %s uses symbol %" PRId32 " but no graph binds it",
                           i, tf_op_name(q->op), dim.symbol);
    values[i] = q->dim_value ? q->dim_value(q->context, dim) : dim.size;
    if (values[i] < 0) {
      if (dim.symbol >= 0)
        return tf_status_new(TF_ERR_SHAPE,
                             "target dim %" PRId32 " of %s (%" PRId64 " x symbol %" PRId32 ") is invalid: "
                             "unknown symbol, size < 1, negative value or int64 overflow",
                             i, tf_op_name(q->op), dim.size, dim.symbol);
      return tf_status_new(TF_ERR_SHAPE, "target dim %" PRId32 " of %s is %" PRId64 "; dims must be >= 0 or -1", i,
                           tf_op_name(q->op), dim.size);
    }
  }
  *rank = target->rank;
  return NULL;
}

tf_status tf_shape_reshape(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_reshape));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(resolve_target(q, out->shape, &out->rank));
  tf_rules_text target = tf_rules_shape_text(out->shape, out->rank);
  int64_t known[TF_MAX_RANK];
  int32_t n_known = 0, infer_axis = -1;
  for (int32_t i = 0; i < out->rank; i++) {
    if (out->shape[i] != UNRESOLVED) {
      known[n_known++] = out->shape[i];
    } else if (infer_axis >= 0) {
      return tf_status_new(TF_ERR_SHAPE, "target %s for %s has more than one -1", target.text,
                           tf_rules_describe(x).text);
    } else {
      infer_axis = i;
    }
  }
  int64_t x_count, known_count;
  tf_rules_element_count(x->shape, x->rank, &x_count); // cannot overflow: checked by tf_rules_begin
  if (!tf_rules_element_count(known, n_known, &known_count))
    return tf_status_new(TF_ERR_SHAPE, "target %s for %s has more elements than int64 can count", target.text,
                         tf_rules_describe(x).text);
  if (infer_axis >= 0) {
    if (known_count == 0)
      return tf_status_new(TF_ERR_SHAPE, "cannot infer the -1 in target %s for %s: the other dims multiply to 0",
                           target.text, tf_rules_describe(x).text);
    if (x_count % known_count != 0)
      return tf_status_new(TF_ERR_SHAPE,
                           "element counts differ: %s has %" PRId64 " elements, not a multiple of %" PRId64
                           " (the known dims of target %s)",
                           tf_rules_describe(x).text, x_count, known_count, target.text);
    out->shape[infer_axis] = x_count / known_count;
  } else if (known_count != x_count) {
    return tf_status_new(TF_ERR_SHAPE, "element counts differ: %s has %" PRId64 ", target %s has %" PRId64,
                         tf_rules_describe(x).text, x_count, target.text, known_count);
  }
  out->dtype = x->dtype;
  return tf_rules_finish(out);
}

tf_status tf_shape_transpose(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_transpose));
  const tf_shape_operand *x = &q->inputs[0];
  const tf_transpose_attrs *attrs = &q->attrs->u.transpose;
  if (attrs->rank != x->rank)
    return tf_status_new(TF_ERR_SHAPE, "perm has %" PRId32 " entries but %s has rank %" PRId32, attrs->rank,
                         tf_rules_describe(x).text, x->rank);
  // Later passes index with perm directly, so negative entries are refused rather than normalised.
  bool seen[TF_MAX_RANK] = {false};
  for (int32_t i = 0; i < x->rank; i++) {
    int32_t axis = attrs->perm[i];
    if (axis < 0 || axis >= x->rank || seen[axis])
      return tf_status_new(TF_ERR_SHAPE,
                           "perm entry %" PRId32 " is %" PRId32 "; perm must be a permutation of 0..%" PRId32 " for %s",
                           i, axis, x->rank - 1, tf_rules_describe(x).text);
    seen[axis] = true;
    out->shape[i] = x->shape[axis];
  }
  out->rank = x->rank;
  out->dtype = x->dtype;
  return tf_rules_finish(out);
}

tf_status tf_shape_concat(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_concat));
  const tf_shape_operand *first = &q->inputs[0];
  int32_t axis;
  TF_RETURN_IF_ERROR(tf_rules_normalize_axis(first, q->attrs->u.axis.axis, &axis));
  tf_rules_copy_shape(out, first, first->dtype);
  for (int32_t i = 1; i < q->n_inputs; i++) {
    const tf_shape_operand *x = &q->inputs[i];
    TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(first, x));
    if (x->rank != first->rank)
      return tf_status_new(TF_ERR_SHAPE, "ranks differ: %s and %s", tf_rules_describe(first).text,
                           tf_rules_describe(x).text);
    for (int32_t d = 0; d < x->rank; d++)
      if (d != axis && x->shape[d] != first->shape[d])
        return tf_status_new(TF_ERR_SHAPE, "%s and %s differ at axis %" PRId32 " (concatenating on axis %" PRId32 ")",
                             tf_rules_describe(first).text, tf_rules_describe(x).text, d, axis);
    if (__builtin_add_overflow(out->shape[axis], x->shape[axis], &out->shape[axis]))
      return tf_status_new(TF_ERR_SHAPE, "concatenating %s on axis %" PRId32 " overflows int64 after input %" PRId32,
                           tf_rules_describe(x).text, axis, i);
  }
  return tf_rules_finish(out);
}

/* Python's rule for one slice bound: negative counts from the end, then clamp to [0, dim]. */

tf_status tf_shape_slice(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_slice));
  const tf_shape_operand *x = &q->inputs[0];
  const tf_slice_attrs *attrs = &q->attrs->u.slice;
  int32_t axis;
  TF_RETURN_IF_ERROR(tf_rules_normalize_axis(x, attrs->axis, &axis));
  if (attrs->step < 1)
    return tf_status_new(TF_ERR_SHAPE, "slice step %" PRId64 " of %s must be >= 1", attrs->step,
                         tf_rules_describe(x).text);
  int64_t dim = x->shape[axis];
  int64_t start = tf_slice_bound(attrs->start, dim), end = tf_slice_bound(attrs->end, dim);
  // ceil((end - start) / step) written so that a huge step cannot overflow.
  int64_t length = end > start ? (end - start - 1) / attrs->step + 1 : 0;
  if (length == 0)
    return tf_status_new(TF_ERR_SHAPE,
                         "empty slice: [%" PRId64 ":%" PRId64 ":%" PRId64 "] on axis %" PRId32 " of %s selects nothing",
                         attrs->start, attrs->end, attrs->step, axis, tf_rules_describe(x).text);
  tf_rules_copy_shape(out, x, x->dtype);
  out->shape[axis] = length;
  return tf_rules_finish(out);
}

tf_status tf_shape_expand(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_expand));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(resolve_target(q, out->shape, &out->rank));
  tf_rules_text target = tf_rules_shape_text(out->shape, out->rank);
  if (out->rank < x->rank)
    return tf_status_new(TF_ERR_SHAPE, "cannot expand %s to target %s of lower rank", tf_rules_describe(x).text,
                         target.text);
  int32_t offset = out->rank - x->rank; // right-aligned: target axis i meets x's axis i - offset
  for (int32_t i = 0; i < out->rank; i++) {
    if (i < offset) {
      if (out->shape[i] == UNRESOLVED)
        return tf_status_new(TF_ERR_SHAPE, "target %s for %s keeps (-1) axis %" PRId32 ", which %s lacks", target.text,
                             tf_rules_describe(x).text, i, x->name ? x->name : "?");
      continue;
    }
    int64_t have = x->shape[i - offset];
    if (out->shape[i] == UNRESOLVED)
      out->shape[i] = have;
    else if (have != 1 && have != out->shape[i])
      return tf_status_new(TF_ERR_SHAPE,
                           "cannot expand %s to %s: axis %" PRId32 " has %" PRId64 ", which is neither 1 nor %" PRId64,
                           tf_rules_describe(x).text, target.text, i - offset, have, out->shape[i]);
  }
  out->dtype = x->dtype;
  return tf_rules_finish(out);
}
