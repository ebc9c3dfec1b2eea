/* Shape rules of the CTC loss: ctc_loss (logits [N, T, C], labels [N, S] [, input_lengths [N]])
 * -> f32 scalar, and ctc_loss_grad (logits, labels, dloss [, input_lengths]) -> dlogits. What the
 * shapes cannot say (label values, lengths) the kernels handle at run time (core/ctc.h). */
#include <inttypes.h>

#include "core/shape_rules.h"
#include "core/shape_rules_internal.h"

/* logits, labels and the optional lengths (NULL when absent) against each other and the attributes. */
static tf_status check_operands(const tf_shape_query *q, const tf_shape_operand *logits, const tf_shape_operand *labels,
                                const tf_shape_operand *lengths) {
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, logits));
  TF_RETURN_IF_ERROR(tf_rules_check_rank(logits, 3, "[N, T, C] (batch, frames, classes)"));
  TF_RETURN_IF_ERROR(tf_rules_check_rank(labels, 2, "[N, S] (batch, target labels)"));
  const int64_t batch = logits->shape[0], frames = logits->shape[1], classes = logits->shape[2];
  if (labels->shape[0] != batch)
    return tf_status_new(TF_ERR_SHAPE, "labels %s must have the batch N = %" PRId64 " of logits %s",
                         tf_rules_describe(labels).text, batch, tf_rules_describe(logits).text);
  if (labels->shape[1] > frames)
    return tf_status_new(TF_ERR_SHAPE,
                         "labels %s are longer (S = %" PRId64 ") than the %" PRId64
                         " frames of logits %s: a target of S labels needs at least S frames",
                         tf_rules_describe(labels).text, labels->shape[1], frames, tf_rules_describe(logits).text);
  const int64_t blank = q->attrs->u.ctc.blank;
  if (blank < 0 || blank >= classes)
    return tf_status_new(TF_ERR_SHAPE,
                         "blank %" PRId64 " is outside the %" PRId64 " classes [0, %" PRId64 ") of logits %s", blank,
                         classes, classes, tf_rules_describe(logits).text);
  if (lengths && (lengths->rank != 1 || lengths->shape[0] != batch))
    return tf_status_new(TF_ERR_SHAPE, "input_lengths %s must be [N] with N = %" PRId64 ", the batch of logits %s",
                         tf_rules_describe(lengths).text, batch, tf_rules_describe(logits).text);
  return NULL;
}

tf_status tf_shape_ctc_loss(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_ctc_loss));
  TF_RETURN_IF_ERROR(check_operands(q, &q->inputs[0], &q->inputs[1], q->n_inputs > 2 ? &q->inputs[2] : NULL));
  out->dtype = TF_F32;
  out->rank = 0;
  return tf_rules_finish(out);
}

tf_status tf_shape_ctc_loss_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_ctc_loss_grad));
  const tf_shape_operand *logits = &q->inputs[0], *dloss = &q->inputs[2];
  TF_RETURN_IF_ERROR(check_operands(q, logits, &q->inputs[1], q->n_inputs > 3 ? &q->inputs[3] : NULL));
  if (dloss->rank != 0 || dloss->dtype != TF_F32)
    return tf_status_new(TF_ERR_SHAPE, "dloss %s (%s) must be an f32 scalar, the gradient of ctc_loss's output",
                         tf_rules_describe(dloss).text, tf_dtype_name(dloss->dtype));
  tf_rules_copy_shape(out, logits, logits->dtype);
  return tf_rules_finish(out);
}
