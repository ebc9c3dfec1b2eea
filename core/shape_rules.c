/* What every shape rule checks before and after its own op's semantics. The rules themselves live
 * in shape_rules_<family>.c; graphs reach them from untrusted files, so nothing here assumes that
 * an operand, an attribute or even the query's op is sane. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "core/ops.h"
#include "core/shape_rules_internal.h"

tf_rules_text tf_rules_shape_text(const int64_t *shape, int32_t rank) {
  tf_rules_text t = {{0}};
  if (rank < 0 || rank > TF_MAX_RANK || (rank > 0 && !shape))
    snprintf(t.text, sizeof(t.text), "<rank %" PRId32 ">", rank);
  else
    tf_format_shape(shape, rank, t.text, sizeof(t.text));
  return t;
}

tf_rules_text tf_rules_describe(const tf_shape_operand *x) {
  tf_rules_text t;
  tf_rules_text shape = tf_rules_shape_text(x->shape, x->rank);
  snprintf(t.text, sizeof(t.text), "'%.300s' %.200s", x->name ? x->name : "?", shape.text);
  return t;
}

bool tf_rules_element_count(const int64_t *shape, int32_t rank, int64_t *count) {
  // A zero anywhere makes the tensor empty even when the other dims alone would overflow.
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] == 0) {
      *count = 0;
      return true;
    }
  }
  int64_t product = 1;
  for (int32_t i = 0; i < rank; i++)
    if (__builtin_mul_overflow(product, shape[i], &product))
      return false;
  *count = product;
  return true;
}

static tf_status check_operand(const tf_shape_operand *x, int32_t index) {
  const char *name = x->name ? x->name : "?";
  if ((int)x->dtype < 0 || x->dtype >= TF_DTYPE_COUNT)
    return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " '%s' has an unknown dtype %d", index, name, (int)x->dtype);
  if (x->rank < 0 || x->rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " '%s' has rank %" PRId32 "; ranks are 0 to %d", index, name,
                         x->rank, TF_MAX_RANK);
  if (x->rank > 0 && !x->shape)
    return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " '%s' of rank %" PRId32 " has no shape", index, name, x->rank);
  for (int32_t i = 0; i < x->rank; i++)
    if (x->shape[i] < 0)
      return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " %s has a negative dim at axis %" PRId32, index,
                           tf_rules_describe(x).text, i);
  int64_t count;
  if (!tf_rules_element_count(x->shape, x->rank, &count))
    return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " %s has more elements than int64 can count", index,
                         tf_rules_describe(x).text);
  return NULL;
}

tf_status tf_rules_begin(const tf_shape_query *q, const tf_shape_result *out, tf_shape_rule rule) {
  // A NULL here or a rule called for a foreign op is a bug in the caller, not bad input.
  if (!q || !out || (q->n_inputs > 0 && !q->inputs))
    return tf_status_new(TF_ERR_INTERNAL, "shape rule called without a query or its inputs");
  const tf_op_info *info = tf_op_info_get(q->op);
  if (!info || info->shape_rule != rule)
    return tf_status_new(TF_ERR_INTERNAL, "shape rule called for op %d (%s), which uses another rule", (int)q->op,
                         tf_op_name(q->op));
  if (q->n_inputs < info->min_inputs || q->n_inputs > info->max_inputs)
    return tf_status_new(TF_ERR_INTERNAL, "%s takes %d to %d inputs, the rule got %" PRId32, info->name,
                         info->min_inputs, info->max_inputs, q->n_inputs);
  if (info->attrs != TF_ATTR_NONE) {
    if (!q->attrs)
      return tf_status_new(TF_ERR_SHAPE, "%s needs '%s' attributes, it has none", info->name,
                           tf_attr_kind_name(info->attrs));
    if (q->attrs->kind != info->attrs)
      return tf_status_new(TF_ERR_SHAPE, "%s needs '%s' attributes, it has '%s' (kind %d)", info->name,
                           tf_attr_kind_name(info->attrs), tf_attr_kind_name(q->attrs->kind), (int)q->attrs->kind);
  }
  for (int32_t i = 0; i < q->n_inputs; i++)
    TF_RETURN_IF_ERROR(check_operand(&q->inputs[i], i));
  return tf_op_check_dtypes(q);
}

tf_status tf_rules_finish(const tf_shape_result *out) {
  if (out->rank < 0 || out->rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "the output would have rank %" PRId32 "; the most is %d", out->rank,
                         TF_MAX_RANK);
  for (int32_t i = 0; i < out->rank; i++)
    if (out->shape[i] < 0)
      return tf_status_new(TF_ERR_INTERNAL, "the output %s has a negative dim",
                           tf_rules_shape_text(out->shape, out->rank).text);
  int64_t count;
  if (!tf_rules_element_count(out->shape, out->rank, &count))
    return tf_status_new(TF_ERR_SHAPE, "the output %s would have more elements than int64 can count",
                         tf_rules_shape_text(out->shape, out->rank).text);
  return NULL;
}

bool tf_rules_is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

bool tf_rules_is_integer(tf_dtype dtype) { return dtype == TF_I32 || dtype == TF_I64; }

tf_status tf_rules_check_floating(const tf_shape_query *q, const tf_shape_operand *x) {
  if (tf_rules_is_floating(x->dtype))
    return NULL;
  return tf_status_new(TF_ERR_SHAPE, "%s is %s; %s needs a floating dtype (f32, f16 or bf16)",
                       tf_rules_describe(x).text, tf_dtype_name(x->dtype), tf_op_name(q->op));
}

tf_status tf_rules_check_activation(const tf_shape_query *q, const tf_shape_operand *x) {
  if (q->attrs && q->attrs->kind == TF_ATTR_LEAKY_RELU && !isfinite(q->attrs->u.leaky_relu.alpha))
    return tf_status_new(TF_ERR_SHAPE, "%s's slope alpha %g on %s must be finite", tf_op_name(q->op),
                         (double)q->attrs->u.leaky_relu.alpha, tf_rules_describe(x).text);
  const tf_clip_attrs *clip = q->attrs && q->attrs->kind == TF_ATTR_CLIP ? &q->attrs->u.clip : NULL;
  if (clip && ((!isfinite(clip->lo) && clip->lo != -INFINITY) || (!isfinite(clip->hi) && clip->hi != INFINITY)))
    return tf_status_new(TF_ERR_SHAPE, "%s's bounds [%g, %g] on %s must be finite (-inf and inf: no bound)",
                         tf_op_name(q->op), (double)clip->lo, (double)clip->hi, tf_rules_describe(x).text);
  return NULL;
}

tf_status tf_rules_check_same_dtype(const tf_shape_operand *a, const tf_shape_operand *b) {
  if (a->dtype == b->dtype)
    return NULL;
  return tf_status_new(TF_ERR_SHAPE, "dtypes differ: %s is %s, %s is %s", tf_rules_describe(a).text,
                       tf_dtype_name(a->dtype), tf_rules_describe(b).text, tf_dtype_name(b->dtype));
}

tf_status tf_rules_check_rank(const tf_shape_operand *x, int32_t rank, const char *layout) {
  if (x->rank == rank)
    return NULL;
  return tf_status_new(TF_ERR_SHAPE, "%s has rank %" PRId32 "; expected rank %" PRId32 " %s", tf_rules_describe(x).text,
                       x->rank, rank, layout);
}

tf_status tf_rules_check_shape_equal(const tf_shape_operand *a, const tf_shape_operand *b) {
  bool same = a->rank == b->rank;
  for (int32_t i = 0; same && i < a->rank; i++)
    same = a->shape[i] == b->shape[i];
  if (same)
    return NULL;
  return tf_status_new(TF_ERR_SHAPE, "shapes differ: %s and %s", tf_rules_describe(a).text, tf_rules_describe(b).text);
}

tf_status tf_rules_normalize_axis(const tf_shape_operand *x, int64_t axis, int32_t *normalized) {
  if (axis < -(int64_t)x->rank || axis >= (int64_t)x->rank)
    return tf_status_new(TF_ERR_SHAPE, "axis %" PRId64 " is out of range for %s (rank %" PRId32 ")", axis,
                         tf_rules_describe(x).text, x->rank);
  *normalized = (int32_t)(axis < 0 ? axis + x->rank : axis);
  return NULL;
}

bool tf_rules_broadcast(const int64_t *a, int32_t ra, const int64_t *b, int32_t rb, int64_t *out, int32_t *rank,
                        int32_t *bad_axis) {
  int32_t r = ra > rb ? ra : rb;
  for (int32_t i = 0; i < r; i++) {
    // Right-aligned: output axis i meets a's axis i - (r - ra), when that exists.
    int32_t ia = i - (r - ra), ib = i - (r - rb);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      *bad_axis = i;
      return false;
    }
    out[i] = da == 1 ? db : da;
  }
  *rank = r;
  return true;
}

void tf_rules_copy_shape(tf_shape_result *out, const tf_shape_operand *x, tf_dtype dtype) {
  out->dtype = dtype;
  out->rank = x->rank;
  for (int32_t i = 0; i < x->rank; i++)
    out->shape[i] = x->shape[i];
}
