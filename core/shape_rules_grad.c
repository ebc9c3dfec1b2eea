/* Shape rules of the training-only ops. A gradient op is checked by running its forward op's rule
 * on the forward operands it names and requiring the incoming gradient to have exactly the forward
 * output's shape: a hand-edited plan cannot make a kernel read past a buffer. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/ops.h"
#include "core/shape_rules_internal.h"

/* An operand read for its shape only (tf_op_info.shape_only) lends its shape, never its dtype: `x`
 * as if it had `dtype` (a bf16 graph's gradient computed in f32 between casts reads the half
 * tensor's shape without an f32 copy of it). */
static tf_shape_operand shape_of(const tf_shape_operand *x, tf_dtype dtype) {
  tf_shape_operand y = *x;
  y.dtype = dtype;
  return y;
}

/* Runs the rule of forward op `op` on `inputs` and checks that `dy` has its output's shape. */
static tf_status check_forward(const tf_shape_query *q, tf_op op, const tf_shape_operand *inputs, int32_t n,
                               const tf_shape_operand *dy) {
  const tf_op_info *info = tf_op_info_get(op);
  tf_shape_query forward = {op, q->attrs, n, inputs, q->dim_value, q->context};
  tf_attrs none;
  memset(&none, 0, sizeof(none));
  if (info->attrs == TF_ATTR_NONE)
    forward.attrs = &none;
  tf_shape_result result[TF_MAX_OUTPUTS];
  memset(result, 0, sizeof(result));
  tf_status status = info->shape_rule(&forward, result);
  if (status)
    return tf_status_prefix(status, "forward %s", info->name);
  if (result[0].rank != dy->rank || memcmp(result[0].shape, dy->shape, sizeof(int64_t) * (size_t)dy->rank) != 0)
    return tf_status_new(TF_ERR_SHAPE, "the gradient %s does not have the forward %s output's shape %s",
                         tf_rules_describe(dy).text, info->name,
                         tf_rules_shape_text(result[0].shape, result[0].rank).text);
  if (result[0].dtype != dy->dtype)
    return tf_status_new(TF_ERR_SHAPE, "the gradient %s is %s; the forward %s output is %s", tf_rules_describe(dy).text,
                         tf_dtype_name(dy->dtype), info->name, tf_dtype_name(result[0].dtype));
  return NULL;
}

tf_status tf_shape_elementwise_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_elementwise_grad));
  const tf_shape_operand *x = &q->inputs[0], *dy = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(x, dy));
  TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(x, dy));
  TF_RETURN_IF_ERROR(tf_rules_check_activation(q, x));
  if (q->op == TF_OP_SOFTMAX_GRAD || q->op == TF_OP_LOG_SOFTMAX_GRAD) {
    int32_t axis;
    TF_RETURN_IF_ERROR(tf_rules_normalize_axis(x, q->attrs->u.axis.axis, &axis));
  }
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_sum_to(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_sum_to));
  const tf_shape_operand *dy = &q->inputs[0], *like = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, dy));
  int64_t broadcast[TF_MAX_RANK];
  int32_t rank = 0, bad_axis = 0;
  bool fits = like->rank <= dy->rank &&
              tf_rules_broadcast(like->shape, like->rank, dy->shape, dy->rank, broadcast, &rank, &bad_axis) &&
              rank == dy->rank && memcmp(broadcast, dy->shape, sizeof(int64_t) * (size_t)rank) == 0;
  if (!fits)
    return tf_status_new(TF_ERR_SHAPE, "sum_to: %s does not broadcast to %s", tf_rules_describe(like).text,
                         tf_rules_describe(dy).text);
  tf_rules_copy_shape(out, like, dy->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_max_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_max_grad));
  const tf_shape_operand *x = &q->inputs[0], *y = &q->inputs[1], *dy = &q->inputs[2];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_MAX, x, 1, y));
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_MAX, x, 1, dy));
  tf_rules_copy_shape(out, x, x->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_norm_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_norm_grad));
  const tf_shape_operand *x = &q->inputs[0], *gamma = &q->inputs[1], *dy = &q->inputs[2];
  tf_op forward = q->op == TF_OP_LAYER_NORM_GRAD ? TF_OP_LAYER_NORM : TF_OP_RMS_NORM;
  TF_RETURN_IF_ERROR(check_forward(q, forward, q->inputs, 2, dy));
  tf_rules_copy_shape(&out[0], x, x->dtype);
  tf_rules_copy_shape(&out[1], gamma, gamma->dtype);
  if (q->op == TF_OP_LAYER_NORM_GRAD)
    tf_rules_copy_shape(&out[2], gamma, gamma->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_batch_norm_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_batch_norm_grad));
  const tf_shape_operand *x = &q->inputs[0], *gamma = &q->inputs[1], *dy = &q->inputs[2];
  const tf_shape_operand forward[3] = {*x, *gamma, *gamma}; /* beta: gamma's shape, which dbeta takes */
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_BATCH_NORM, forward, 3, dy));
  tf_rules_copy_shape(&out[0], x, x->dtype);
  tf_rules_copy_shape(&out[1], gamma, gamma->dtype);
  tf_rules_copy_shape(&out[2], gamma, gamma->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_embedding_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_embedding_grad));
  const tf_shape_operand *ids = &q->inputs[0], *dy = &q->inputs[1], *table = &q->inputs[2];
  if (q->op == TF_OP_EMBEDDING_GRAD_ACCUMULATE) { /* the sum is updated in place: no output */
    tf_shape_operand forward[2] = {*ids, *table};
    TF_RETURN_IF_ERROR(check_forward(q, TF_OP_EMBEDDING, forward, 2, dy));
    return tf_rules_check_same_dtype(dy, table);
  }
  tf_shape_operand forward[2] = {*ids, shape_of(table, dy->dtype)}; /* the table: its shape only */
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_EMBEDDING, forward, 2, dy));
  tf_rules_copy_shape(out, table, dy->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_slice_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_slice_grad));
  const tf_shape_operand *dy = &q->inputs[0];
  const tf_shape_operand x = shape_of(&q->inputs[1], dy->dtype); /* its shape only */
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_SLICE, &x, 1, dy));
  tf_rules_copy_shape(out, &x, dy->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_conv_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_conv_grad));
  bool is_1d = q->op == TF_OP_CONV1D_GRAD_INPUT || q->op == TF_OP_CONV1D_GRAD_WEIGHT;
  bool is_input = q->op == TF_OP_CONV1D_GRAD_INPUT || q->op == TF_OP_CONV2D_GRAD_INPUT;
  tf_op forward_op = is_1d ? TF_OP_CONV1D : TF_OP_CONV2D;
  /* grad_input: (dy, w, x); grad_weight: (x, dy, w). */
  const tf_shape_operand *x = is_input ? &q->inputs[2] : &q->inputs[0];
  const tf_shape_operand *w = is_input ? &q->inputs[1] : &q->inputs[2];
  const tf_shape_operand *dy = is_input ? &q->inputs[0] : &q->inputs[1];
  /* input 2 (x of grad_input, w of grad_weight) is read for its shape only: it takes the other's dtype */
  tf_shape_operand forward[2] = {is_input ? shape_of(x, w->dtype) : *x, is_input ? *w : shape_of(w, x->dtype)};
  TF_RETURN_IF_ERROR(check_forward(q, forward_op, forward, 2, dy));
  tf_rules_copy_shape(out, is_input ? x : w, dy->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_pool_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_pool_grad));
  bool is_max = q->op == TF_OP_MAX_POOL2D_GRAD;
  const tf_shape_operand *dy = is_max ? &q->inputs[1] : &q->inputs[0];
  /* avg_pool2d_grad reads x for its shape only */
  const tf_shape_operand x = is_max ? q->inputs[0] : shape_of(&q->inputs[1], dy->dtype);
  TF_RETURN_IF_ERROR(check_forward(q, is_max ? TF_OP_MAX_POOL2D : TF_OP_AVG_POOL2D, &x, 1, dy));
  tf_rules_copy_shape(out, &x, dy->dtype);
  return tf_rules_finish(out);
}

/* attention_grad(q, k, v, dy) -> dq, dk, dv of dy's dtype: dy has the forward output's dtype, or is
 * f32 beside f16/bf16 q, k, v (a mixed-precision plan's backward reading the half copies it stored,
 * compiler/precision.c), whose gradients are then f32. */
tf_status tf_shape_attention_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_attention_grad));
  const tf_shape_operand *dy = &q->inputs[3];
  const tf_dtype x = q->inputs[0].dtype;
  const bool half_x = x == TF_F16 || x == TF_BF16;
  const tf_shape_operand as_forward = shape_of(dy, x);
  TF_RETURN_IF_ERROR(check_forward(q, TF_OP_ATTENTION, q->inputs, 3, half_x && dy->dtype == TF_F32 ? &as_forward : dy));
  for (int32_t i = 0; i < 3; i++)
    tf_rules_copy_shape(&out[i], &q->inputs[i], dy->dtype);
  return tf_rules_finish(out);
}

static tf_status check_scalar_f32(const tf_shape_operand *x) {
  if (x->rank != 0 || x->dtype != TF_F32)
    return tf_status_new(TF_ERR_SHAPE, "%s must be an f32 scalar", tf_rules_describe(x).text);
  return NULL;
}

tf_status tf_shape_loss_grad(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_loss_grad));
  tf_op forward = q->op == TF_OP_CROSS_ENTROPY_GRAD ? TF_OP_CROSS_ENTROPY
                  : q->op == TF_OP_MSE_GRAD         ? TF_OP_MSE
                                                    : TF_OP_BCE_WITH_LOGITS;
  TF_RETURN_IF_ERROR(check_forward(q, forward, q->inputs, 2, &q->inputs[2]));
  TF_RETURN_IF_ERROR(check_scalar_f32(&q->inputs[2]));
  tf_rules_copy_shape(out, &q->inputs[0], q->inputs[0].dtype);
  return tf_rules_finish(out);
}

static tf_status check_optimizer_attrs(const tf_optimizer_attrs *a) {
  float values[] = {a->learning_rate, a->momentum,     a->beta1,     a->beta2,
                    a->epsilon,       a->weight_decay, a->clip_norm, a->grad_scale};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
    if (!isfinite(values[i]) || values[i] < 0)
      return tf_status_new(TF_ERR_SHAPE, "optimizer hyper-parameter %zu is %g; each must be finite and >= 0", i,
                           (double)values[i]);
  if (a->beta1 >= 1 || a->beta2 >= 1)
    return tf_status_new(TF_ERR_SHAPE, "optimizer betas %g/%g must be < 1", (double)a->beta1, (double)a->beta2);
  return NULL;
}

/* accumulate (sum, x), zero (x), sgd (param, grad, momentum [, norm_sq]),
 * adamw (param, grad, m, v [, norm_sq]): no outputs; the state operands match the first. */
tf_status tf_shape_update(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_update));
  const tf_shape_operand *first = &q->inputs[0];
  int32_t states = q->op == TF_OP_ZERO ? 1 : q->op == TF_OP_ACCUMULATE ? 2 : q->op == TF_OP_SGD ? 3 : 4;
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, first));
  for (int32_t i = 1; i < states; i++) {
    TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(first, &q->inputs[i]));
    TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(first, &q->inputs[i]));
  }
  if (q->n_inputs > states)
    TF_RETURN_IF_ERROR(check_scalar_f32(&q->inputs[states]));
  if (q->op == TF_OP_SGD || q->op == TF_OP_ADAMW)
    TF_RETURN_IF_ERROR(check_optimizer_attrs(&q->attrs->u.optimizer));
  out->rank = 0;
  out->dtype = TF_F32;
  return NULL;
}

/* cast_into (param, master): no outputs; master f32, param floating, of master's shape. */
tf_status tf_shape_cast_into(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_cast_into));
  const tf_shape_operand *param = &q->inputs[0], *master = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, param));
  if (master->dtype != TF_F32)
    return tf_status_new(TF_ERR_SHAPE, "master weights %s must be f32", tf_rules_describe(master).text);
  TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(param, master));
  out->rank = 0;
  out->dtype = TF_F32;
  return NULL;
}

/* adamw8bit (param, grad, m_codes, m_scales, v_codes, v_scales [, norm_sq]): grad as param; each
 * moment's codes u8 of param's shape, its scales f32 [ceil(count / TF_ADAMW8BIT_BLOCK)]. */
tf_status tf_shape_adamw8bit(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_adamw8bit));
  const tf_shape_operand *param = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, param));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(param, &q->inputs[1]));
  TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(param, &q->inputs[1]));
  int64_t count = 0;
  if (!tf_rules_element_count(param->shape, param->rank, &count))
    return tf_status_new(TF_ERR_SHAPE, "%s has too many elements", tf_rules_describe(param).text);
  const int64_t blocks = tf_adamw8bit_blocks(count);
  for (int32_t i = 2; i < 6; i += 2) {
    const tf_shape_operand *codes = &q->inputs[i], *scales = &q->inputs[i + 1];
    if (codes->dtype != TF_U8)
      return tf_status_new(TF_ERR_SHAPE, "input %d %s must be u8 codes, not %s", i, tf_rules_describe(codes).text,
                           tf_dtype_name(codes->dtype));
    TF_RETURN_IF_ERROR(tf_rules_check_shape_equal(param, codes));
    if (scales->dtype != TF_F32 || scales->rank != 1 || scales->shape[0] != blocks)
      return tf_status_new(TF_ERR_SHAPE,
                           "input %d %s must be f32 scales [%" PRId64 "] (one per %d elements of %" PRId64 ")", i + 1,
                           tf_rules_describe(scales).text, blocks, TF_ADAMW8BIT_BLOCK, count);
  }
  if (q->n_inputs > 6)
    TF_RETURN_IF_ERROR(check_scalar_f32(&q->inputs[6]));
  TF_RETURN_IF_ERROR(check_optimizer_attrs(&q->attrs->u.optimizer));
  out->rank = 0;
  out->dtype = TF_F32;
  return NULL;
}

tf_status tf_shape_global_norm_sq(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_global_norm_sq));
  for (int32_t i = 0; i < q->n_inputs; i++)
    TF_RETURN_IF_ERROR(tf_rules_check_floating(q, &q->inputs[i]));
  out->rank = 0;
  out->dtype = TF_F32;
  return tf_rules_finish(out);
}
