/* The fused loss head: linear_cross_entropy (one workgroup) and its gradients (three dispatches,
 * four with a bias: each row's log sum exp parked in dx, then dweight, then dbias, then dx); the
 * single-pass forms are the loss dispatch followed by the gradient's,
 * shaders/linear_loss.comp. No workspace: the logits are recomputed as dot products where they are
 * needed. */
#include "backends/vulkan/vk_lower.h"
#include "core/linear_loss.h"

enum { MODE_LOSS = 0, MODE_STATS, MODE_DWEIGHT, MODE_DX, MODE_DBIAS };

typedef struct linear_loss_push {
  uint32_t rows, features, classes, transposed;
  int32_t ignore_low, ignore_high;
  uint32_t mode, has_bias, accumulate;
} linear_loss_push;

/* Bindings: x, weight, labels, dloss, the loss or dx, dweight, bias, dbias (-1 where the step has
 * none). The single-pass forms (loss, dx, dweight [, dbias]) run the loss mode on output 0 and the
 * gradient modes on the outputs after it: this shader recomputes the logits in every mode anyway. */
static tf_status dispatch(vk_lower *l, linear_loss_push push, uint32_t mode, int64_t items, int64_t loops) {
  push.mode = mode;
  const bool gradient = l->step->op != TF_OP_LINEAR_CROSS_ENTROPY && mode != MODE_LOSS;
  const int32_t bias = tf_linear_loss_bias_input(l->step->op, l->step->n_inputs);
  const int32_t dx = gradient ? tf_linear_loss_dx_output(l->step->op) : 0;
  /* dweight and dbias: outputs after dx, or the accumulators the _accumulate forms take */
  const int32_t sum = tf_linear_loss_dweight_input(l->step->op, l->step->n_inputs);
  const int32_t dweight = !gradient ? -1 : push.accumulate ? vk_in(l, sum) : vk_out(l, dx + 1);
  const int32_t dbias = !gradient || bias < 0 ? -1 : push.accumulate ? vk_in(l, sum + 1) : vk_out(l, dx + 2);
  int32_t buffers[8] = {vk_in(l, 0),
                        vk_in(l, 1),
                        vk_in(l, 2),
                        gradient ? vk_in(l, 3) : -1,
                        vk_out(l, dx),
                        dweight,
                        bias >= 0 ? vk_in(l, bias) : -1,
                        dbias};
  uint32_t writes = mode == MODE_DWEIGHT ? 0x20 : mode == MODE_DBIAS ? 0x80 : 0x10;
  uint32_t groups = mode == MODE_LOSS ? 1 : vk_groups(items, 256);
  int64_t rounds = mode == MODE_LOSS ? (items + 255) / 256 : vk_grid_rounds(items, 256);
  TF_RETURN_IF_ERROR(vk_check_loops(l, rounds * loops));
  return vk_emit_dispatch(l, VK_SHADER_linear_loss, 8, buffers, writes, &push, sizeof(push), groups, 1, 1);
}

tf_status vk_lower_linear_cross_entropy(vk_lower *l) {
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0)), *weight = vk_buffer(l, vk_in(l, 1));
  const tf_plan_buffer *labels = vk_buffer(l, vk_in(l, 2));
  if (labels->dtype != TF_I32)
    return vk_refuse(l, "labels '%s' are %s; the vulkan backend reads i32 labels", labels->name,
                     tf_dtype_name(labels->dtype));
  const bool transposed = l->step->attrs.u.cross_entropy.transpose_weight;
  const int64_t features = x->shape[x->rank - 1], classes = weight->shape[transposed ? 0 : 1];
  const int64_t rows = features > 0 ? vk_count(x) / features : 0;
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(x), x->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(weight), weight->name));
  const int64_t ignore = l->step->attrs.u.cross_entropy.ignore_index;
  linear_loss_push push = {.rows = (uint32_t)rows,
                           .features = (uint32_t)features,
                           .classes = (uint32_t)classes,
                           .transposed = transposed,
                           .ignore_low = (int32_t)(uint32_t)ignore,
                           .ignore_high = (int32_t)(uint32_t)((uint64_t)ignore >> 32),
                           .mode = 0,
                           .has_bias = tf_linear_loss_bias_input(l->step->op, l->step->n_inputs) >= 0,
                           .accumulate = tf_linear_loss_accumulates(l->step->op)};
  /* loop iterations of one invocation, from above: a row's log sum exp walks the classes three
   * times over the features; counting the labels walks the rows */
  const int64_t row_walk = 3 * classes * (features + 1) + features;
  if (l->step->op == TF_OP_LINEAR_CROSS_ENTROPY || tf_linear_loss_is_train(l->step->op))
    TF_RETURN_IF_ERROR(dispatch(l, push, MODE_LOSS, rows, row_walk + 16));
  if (l->step->op == TF_OP_LINEAR_CROSS_ENTROPY)
    return NULL;
  const int32_t dx = tf_linear_loss_dx_output(l->step->op);
  if (rows > 0 && features == 0 && push.has_bias) /* the logits are the bias: dbias is not 0 */
    return vk_refuse(l, "x '%s' has no features; the vulkan backend needs d >= 1 for a head with a bias", x->name);
  if ((rows == 0 || features == 0) && push.accumulate)
    return NULL; /* nothing to add */
  if (rows == 0 || features == 0) {
    TF_RETURN_IF_ERROR(vk_emit_fill(l, vk_out(l, dx + 1)));
    if (push.has_bias)
      TF_RETURN_IF_ERROR(vk_emit_fill(l, vk_out(l, dx + 2)));
    return NULL;
  }
  TF_RETURN_IF_ERROR(dispatch(l, push, MODE_STATS, rows, row_walk));
  TF_RETURN_IF_ERROR(dispatch(l, push, MODE_DWEIGHT, classes * features, rows + rows * (features + 2)));
  if (push.has_bias) /* reads the statistics parked in dx, before DX overwrites them */
    TF_RETURN_IF_ERROR(dispatch(l, push, MODE_DBIAS, classes, rows + rows * (features + 2)));
  return dispatch(l, push, MODE_DX, rows * features, rows + row_walk + classes * (features + 2));
}
