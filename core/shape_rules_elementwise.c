/* Shape rules of element-by-element ops: broadcasting binaries, float unaries, dropout, cast, and
 * the losses that compare two same-shaped tensors element by element (mse, bce_with_logits). */
#include <inttypes.h>
#include <math.h>

#include "core/shape_rules_internal.h"

tf_status tf_shape_broadcast(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_broadcast));
  const tf_shape_operand *a = &q->inputs[0], *b = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(a, b));
  int32_t bad_axis;
  if (!tf_rules_broadcast(a->shape, a->rank, b->shape, b->rank, out->shape, &out->rank, &bad_axis)) {
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    int32_t from_end = r - bad_axis; // 1 = last axis, shared by both operands
    return tf_status_new(TF_ERR_SHAPE, "cannot broadcast %s with %s: axis -%" PRId32 " has %" PRId64 " vs %" PRId64,
                         tf_rules_describe(a).text, tf_rules_describe(b).text, from_end, a->shape[a->rank - from_end],
                         b->shape[b->rank - from_end]);
  }
  out->dtype = a->dtype;
  return tf_rules_finish(out);
}

tf_status tf_shape_unary_float(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_unary_float));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  TF_RETURN_IF_ERROR(tf_rules_check_activation(q, x));
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

/* Two outputs of x's shape and dtype: a float unary and its derivative (gelu_pair). */
tf_status tf_shape_unary_pair(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_unary_pair));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  tf_rules_copy_shape(&out[0], x, x->dtype);
  tf_rules_copy_shape(&out[1], x, x->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_dropout(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_dropout));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  float rate = q->attrs->u.dropout.rate;
  // rate 1 would scale the kept elements by 1/(1-rate) = inf.
  if (!isfinite(rate) || rate < 0.0f || rate >= 1.0f)
    return tf_status_new(TF_ERR_SHAPE, "dropout rate %g on %s must be in [0, 1)", (double)rate,
                         tf_rules_describe(x).text);
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_cast(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_cast));
  const tf_shape_operand *x = &q->inputs[0];
  tf_dtype to = q->attrs->u.cast.to;
  if ((int)to < 0 || to >= TF_DTYPE_COUNT)
    return tf_status_new(TF_ERR_SHAPE, "cast of %s to unknown dtype %d", tf_rules_describe(x).text, (int)to);
  tf_rules_copy_shape(out, x, to);
  return tf_rules_finish(out);
}

tf_status tf_shape_pair_loss(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_pair_loss));
  const tf_shape_operand *prediction = &q->inputs[0], *target = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, prediction));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(prediction, target));
  TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(prediction, target));
  // Losses are accumulated and reported in f32 whatever the compute precision.
  out->dtype = TF_F32;
  out->rank = 0;
  return tf_rules_finish(out);
}
