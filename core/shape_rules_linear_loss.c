/* Shape rules of the fused loss head: linear_cross_entropy (x [.., d], weight [V, d] or [d, V],
 * labels [..] [, bias [V]]) -> f32 scalar, and its gradients (x, weight, labels, dloss) -> (dx,
 * dweight) and, with a bias, (x, weight, labels, dloss, bias) -> (dx, dweight, dbias). */
#include <inttypes.h>
#include <string.h>

#include "core/linear_loss.h"
#include "core/shape_rules.h"
#include "core/shape_rules_internal.h"

/* The vocabulary of weight under transpose_weight, after checking it against x's last dim d. */
static tf_status check_weight(const tf_shape_operand *x, const tf_shape_operand *weight, bool transpose_weight) {
  TF_RETURN_IF_ERROR(tf_rules_check_rank(weight, 2, transpose_weight ? "[V, d]" : "[d, V]"));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(x, weight));
  const int64_t d = x->shape[x->rank - 1], weight_d = weight->shape[transpose_weight ? 1 : 0];
  if (weight_d != d)
    return tf_status_new(TF_ERR_SHAPE, "weight %s must be %s with d = %" PRId64 ", the last dim of %s",
                         tf_rules_describe(weight).text, transpose_weight ? "[V, d]" : "[d, V]", d,
                         tf_rules_describe(x).text);
  if (weight->shape[transpose_weight ? 0 : 1] < 1)
    return tf_status_new(TF_ERR_SHAPE, "weight %s has no classes", tf_rules_describe(weight).text);
  return NULL;
}

static tf_status check_labels(const tf_shape_operand *x, const tf_shape_operand *labels) {
  if (!tf_rules_is_integer(labels->dtype))
    return tf_status_new(TF_ERR_SHAPE, "labels %s are %s; class indices must be i32 or i64",
                         tf_rules_describe(labels).text, tf_dtype_name(labels->dtype));
  bool match = labels->rank == x->rank - 1;
  for (int32_t i = 0; match && i < labels->rank; i++)
    match = labels->shape[i] == x->shape[i];
  if (!match)
    return tf_status_new(TF_ERR_SHAPE, "labels %s must have the shape of x %s without the last (feature) dim",
                         tf_rules_describe(labels).text, tf_rules_describe(x).text);
  return NULL;
}

/* The bias: [V], x's dtype, V the weight's classes. */
static tf_status check_bias(const tf_shape_operand *x, const tf_shape_operand *weight, const tf_shape_operand *bias,
                            bool transpose_weight) {
  const int64_t classes = weight->shape[transpose_weight ? 0 : 1];
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(x, bias));
  if (bias->rank != 1 || bias->shape[0] != classes)
    return tf_status_new(TF_ERR_SHAPE, "bias %s must be [V] with V = %" PRId64 ", the classes of weight %s",
                         tf_rules_describe(bias).text, classes, tf_rules_describe(weight).text);
  return NULL;
}

static tf_status check_operands(const tf_shape_query *q) {
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  if (x->rank < 1)
    return tf_status_new(TF_ERR_SHAPE, "x %s is a scalar; features must be on the last axis",
                         tf_rules_describe(x).text);
  const tf_cross_entropy_attrs *a = &q->attrs->u.cross_entropy;
  if (a->chunk_rows < 0)
    return tf_status_new(TF_ERR_SHAPE, "chunk_rows %" PRId64 " must be >= 0 (0: every row at once)", a->chunk_rows);
  TF_RETURN_IF_ERROR(check_weight(x, &q->inputs[1], a->transpose_weight));
  TF_RETURN_IF_ERROR(check_labels(x, &q->inputs[2]));
  const int32_t bias = tf_linear_loss_bias_input(q->op, q->n_inputs);
  return bias >= 0 ? check_bias(x, &q->inputs[1], &q->inputs[bias], a->transpose_weight) : NULL;
}

tf_status tf_shape_linear_cross_entropy(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_linear_cross_entropy));
  TF_RETURN_IF_ERROR(check_operands(q));
  out->dtype = TF_F32;
  out->rank = 0;
  return tf_rules_finish(out);
}

/* (dx, dweight [, dbias]) into out[0..], after the operands and dloss are checked. */
static tf_status gradient_shapes(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(check_operands(q));
  const tf_shape_operand *dloss = &q->inputs[3];
  if (dloss->rank != 0 || dloss->dtype != TF_F32)
    return tf_status_new(TF_ERR_SHAPE, "the gradient %s must be an f32 scalar", tf_rules_describe(dloss).text);
  tf_rules_copy_shape(&out[0], &q->inputs[0], q->inputs[0].dtype);
  tf_rules_copy_shape(&out[1], &q->inputs[1], q->inputs[1].dtype);
  const int32_t bias = tf_linear_loss_bias_input(q->op, q->n_inputs);
  if (bias >= 0)
    tf_rules_copy_shape(&out[2], &q->inputs[bias], q->inputs[bias].dtype);
  return NULL;
}

tf_status tf_shape_linear_cross_entropy_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_linear_cross_entropy_grad));
  TF_RETURN_IF_ERROR(gradient_shapes(q, out));
  return tf_rules_finish(out);
}

tf_status tf_shape_linear_cross_entropy_train(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_linear_cross_entropy_train));
  TF_RETURN_IF_ERROR(gradient_shapes(q, out + 1));
  out[0].dtype = TF_F32;
  out[0].rank = 0;
  return tf_rules_finish(out);
}

tf_status tf_shape_linear_cross_entropy_grad_accumulate(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_linear_cross_entropy_grad_accumulate));
  tf_shape_result gradients[3];
  memset(gradients, 0, sizeof(gradients));
  TF_RETURN_IF_ERROR(gradient_shapes(q, gradients));
  /* the accumulators: exactly dweight's (and dbias's) shape and dtype */
  const int32_t first = tf_linear_loss_dweight_input(q->op, q->n_inputs);
  const int32_t n = tf_linear_loss_bias_input(q->op, q->n_inputs) >= 0 ? 2 : 1;
  for (int32_t i = 0; i < n; i++) {
    const tf_shape_operand *sum = &q->inputs[first + i];
    const tf_shape_result *part = &gradients[1 + i];
    if (sum->dtype != part->dtype || sum->rank != part->rank ||
        memcmp(sum->shape, part->shape, sizeof(int64_t) * (size_t)part->rank) != 0)
      return tf_status_new(TF_ERR_SHAPE, "the accumulator %s must have the shape and dtype of the gradient it sums",
                           tf_rules_describe(sum).text);
  }
  out[0] = gradients[0];
  return tf_rules_finish(out);
}
