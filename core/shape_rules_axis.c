/* Shape rules of ops that work along axes: reductions, softmax, the normalisations (over the last
 * axis) and cross-entropy (classes on the last axis). */
#include <inttypes.h>
#include <math.h>

#include "core/shape_rules_internal.h"

/* Marks the axes that attrs reduce in reduced[]; n_axes == 0 means every axis. */
static tf_status reduced_axes(const tf_shape_operand *x, const tf_reduce_attrs *attrs, bool reduced[TF_MAX_RANK]) {
  if (attrs->n_axes < 0 || attrs->n_axes > TF_MAX_RANK)
    return tf_status_new(TF_ERR_SHAPE, "reduction over %" PRId32 " axes of %s; the most is %d", attrs->n_axes,
                         tf_rules_describe(x).text, TF_MAX_RANK);
  for (int32_t i = 0; i < TF_MAX_RANK; i++)
    reduced[i] = attrs->n_axes == 0 && i < x->rank;
  for (int32_t i = 0; i < attrs->n_axes; i++) {
    int32_t axis;
    TF_RETURN_IF_ERROR(tf_rules_normalize_axis(x, attrs->axes[i], &axis));
    if (reduced[axis])
      return tf_status_new(TF_ERR_SHAPE, "axis %" PRId32 " (axis %" PRId32 " of %s) is reduced twice", attrs->axes[i],
                           axis, tf_rules_describe(x).text);
    reduced[axis] = true;
  }
  return NULL;
}

tf_status tf_shape_reduce(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_reduce));
  const tf_shape_operand *x = &q->inputs[0];
  // max only compares; sum and mean accumulate, which integer and u8 kernels do not do.
  if (q->op != TF_OP_MAX)
    TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  const tf_reduce_attrs *attrs = &q->attrs->u.reduce;
  bool reduced[TF_MAX_RANK] = {false};
  TF_RETURN_IF_ERROR(reduced_axes(x, attrs, reduced));
  out->dtype = x->dtype;
  out->rank = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (!reduced[i])
      out->shape[out->rank++] = x->shape[i];
    else if (attrs->keepdims)
      out->shape[out->rank++] = 1;
  }
  return tf_rules_finish(out);
}

tf_status tf_shape_softmax(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_softmax));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  int32_t axis;
  TF_RETURN_IF_ERROR(tf_rules_normalize_axis(x, q->attrs->u.axis.axis, &axis));
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

/* A norm's output: x's shape and dtype, once its epsilon keeps 1/sqrt(variance + epsilon) finite
 * for constant rows (or channels). */
static tf_status finish_norm(const tf_shape_query *q, const tf_shape_operand *x, tf_shape_result *out) {
  float epsilon = q->attrs->u.norm.epsilon;
  if (!isfinite(epsilon) || epsilon <= 0.0f)
    return tf_status_new(TF_ERR_SHAPE, "epsilon %g for %s must be finite and > 0", (double)epsilon,
                         tf_rules_describe(x).text);
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

/* gamma and beta: rank 1, as long as x's last axis, x's dtype. */
static tf_status check_scale_vector(const tf_shape_operand *x, const tf_shape_operand *v) {
  int64_t features = x->shape[x->rank - 1];
  if (v->rank != 1 || v->shape[0] != features)
    return tf_status_new(TF_ERR_SHAPE, "%s must have shape [%" PRId64 "], the last dim of %s",
                         tf_rules_describe(v).text, features, tf_rules_describe(x).text);
  return tf_rules_check_same_dtype(x, v);
}

tf_status tf_shape_norm(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_norm));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  if (x->rank < 1)
    return tf_status_new(TF_ERR_SHAPE, "%s is a scalar; %s normalises over the last axis", tf_rules_describe(x).text,
                         tf_op_name(q->op));
  for (int32_t i = 1; i < q->n_inputs; i++)
    TF_RETURN_IF_ERROR(check_scale_vector(x, &q->inputs[i]));
  return finish_norm(q, x, out);
}

/* gamma and beta of batch_norm: [C], C = x's axis 1, x's dtype. */
static tf_status check_channel_vector(const tf_shape_operand *x, const tf_shape_operand *v) {
  if (v->rank != 1 || v->shape[0] != x->shape[1])
    return tf_status_new(TF_ERR_SHAPE, "%s must have shape [%" PRId64 "], the channels (axis 1) of %s",
                         tf_rules_describe(v).text, x->shape[1], tf_rules_describe(x).text);
  return tf_rules_check_same_dtype(x, v);
}

/* x of batch_norm and batch_norm_running: floating, [N, C, ...]. */
static tf_status check_channels_input(const tf_shape_query *q, const tf_shape_operand *x) {
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  if (x->rank < 2)
    return tf_status_new(TF_ERR_SHAPE, "%s has rank %" PRId32 "; %s needs [N, C, ...] (channels on axis 1)",
                         tf_rules_describe(x).text, x->rank, tf_op_name(q->op));
  return NULL;
}

/* The running statistics of x, from `first`: [C] f32 each (kept in f32 whatever x's dtype), and a
 * momentum in [0, 1]. Without them the momentum is not read (the compiler strips the statistics from
 * a plan's batch_norm steps, and its gradient keeps the attributes). */
static tf_status check_running(const tf_shape_query *q, const tf_shape_operand *x, int32_t first) {
  for (int32_t i = first; i < q->n_inputs; i++) {
    const tf_shape_operand *v = &q->inputs[i];
    if (v->rank != 1 || v->shape[0] != x->shape[1] || v->dtype != TF_F32)
      return tf_status_new(TF_ERR_SHAPE,
                           "running %s %s is %s; it must be f32 [%" PRId64 "], the channels (axis 1) of %s",
                           i == first ? "mean" : "variance", tf_rules_describe(v).text, tf_dtype_name(v->dtype),
                           x->shape[1], tf_rules_describe(x).text);
  }
  const float momentum = q->attrs->u.norm.momentum;
  int64_t values = x->shape[0]; /* per channel: N x S */
  for (int32_t d = 2; d < x->rank && values < 2; d++)
    values *= x->shape[d];
  if (q->n_inputs > first && values == 1 && x->shape[1] > 0)
    return tf_status_new(TF_ERR_SHAPE, "%s has one value per channel: the running variance (unbiased) needs 2 or more",
                         tf_rules_describe(x).text);
  if (q->n_inputs > first && !(momentum >= 0.0f && momentum <= 1.0f))
    return tf_status_new(TF_ERR_SHAPE, "momentum %g of the running statistics of %s must be in [0, 1]",
                         (double)momentum, tf_rules_describe(x).text);
  return NULL;
}

tf_status tf_shape_batch_norm(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_batch_norm));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(check_channels_input(q, x));
  if (q->n_inputs == 4)
    return tf_status_new(TF_ERR_SHAPE, "batch_norm takes the running mean with the running variance (5 inputs), "
                                       "not alone");
  for (int32_t i = 1; i < q->n_inputs && i < 3; i++)
    TF_RETURN_IF_ERROR(check_channel_vector(x, &q->inputs[i]));
  TF_RETURN_IF_ERROR(check_running(q, x, q->n_inputs == 5 ? 3 : q->n_inputs));
  return finish_norm(q, x, out);
}

tf_status tf_shape_batch_norm_running(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_batch_norm_running));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(check_channels_input(q, x));
  return check_running(q, x, 1);
}

tf_status tf_shape_cross_entropy(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_cross_entropy));
  const tf_shape_operand *logits = &q->inputs[0], *labels = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, logits));
  if (logits->rank < 1)
    return tf_status_new(TF_ERR_SHAPE, "logits %s are a scalar; classes must be on the last axis",
                         tf_rules_describe(logits).text);
  if (!tf_rules_is_integer(labels->dtype))
    return tf_status_new(TF_ERR_SHAPE, "labels %s are %s; class indices must be i32 or i64",
                         tf_rules_describe(labels).text, tf_dtype_name(labels->dtype));
  bool match = labels->rank == logits->rank - 1;
  for (int32_t i = 0; match && i < labels->rank; i++)
    match = labels->shape[i] == logits->shape[i];
  if (!match)
    return tf_status_new(TF_ERR_SHAPE, "labels %s must have the shape of logits %s without the last (class) dim",
                         tf_rules_describe(labels).text, tf_rules_describe(logits).text);
  out->dtype = TF_F32;
  out->rank = 0;
  return tf_rules_finish(out);
}
