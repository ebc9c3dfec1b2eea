/* Element-by-element steps: the broadcasting binaries and accumulate (shaders/binary.comp), the
 * float unaries and activation gradients (shaders/unary.comp), dropout (shaders/dropout.comp) and
 * zero (a fill). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"

typedef struct binary_push {
  uint32_t count, op, rank, reserved;
  uint32_t shape[8], a_stride[8], b_stride[8];
} binary_push;

/* op: the tf_op number (shaders switch on op_codes.glsl, generated from the op table); approximate:
 * gelu's tanh form; gradient: 1, dx = dy f'(v), with dy at binding 1; 2, f'(v) alone (gelu_pair);
 * slope: leaky_relu's alpha; lo, hi: clip's bounds. */
typedef struct unary_push {
  uint32_t count, op, approximate, gradient;
  float slope, lo, hi;
} unary_push;

typedef struct dropout_push {
  uint32_t count;
  float rate, scale;
  uint32_t stream_lo, stream_hi;
} dropout_push;

_Static_assert(sizeof(binary_push) <= VK_PUSH_WORDS * 4, "binary push constants");

tf_status vk_lower_binary(vk_lower *l) {
  tf_op op = l->step->op;
  // accumulate(sum, x) is sum = sum + x in place.
  int32_t a = vk_in(l, 0), b = vk_in(l, 1), y = op == TF_OP_ACCUMULATE ? vk_in(l, 0) : vk_out(l, 0);
  const tf_plan_buffer *out = vk_buffer(l, y);
  int64_t count = vk_count(out);
  if (count == 0)
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, out->name));
  binary_push push;
  memset(&push, 0, sizeof(push));
  push.count = (uint32_t)count;
  push.op = op == TF_OP_ACCUMULATE ? TF_OP_ADD : op; // the tf_op number: shaders/binary.comp switches on it
  int32_t rank = out->rank;
  int64_t shape[TF_MAX_RANK], strides[2][TF_MAX_RANK];
  for (int32_t i = 0; i < rank; i++)
    shape[i] = out->shape[i];
  vk_broadcast_strides(vk_buffer(l, a), rank, shape, strides[0]);
  vk_broadcast_strides(vk_buffer(l, b), rank, shape, strides[1]);
  vk_collapse(&rank, shape, 2, strides);
  push.rank = (uint32_t)rank;
  for (int32_t i = 0; i < rank; i++) {
    push.shape[i] = (uint32_t)shape[i];
    push.a_stride[i] = (uint32_t)strides[0][i];
    push.b_stride[i] = (uint32_t)strides[1][i];
  }
  int32_t buffers[3] = {a, b, y};
  return vk_emit_dispatch(l, VK_SHADER_binary, 3, buffers, 0x4, &push, sizeof(push), vk_groups(count, 256), 1, 1);
}

/* One dispatch of shaders/unary.comp over `count` elements: op's f(x) into y (gradient 0), dy f'(x)
 * (1) or f'(x) alone (2); gelu's form, leaky_relu's slope and clip's bounds from the step's attributes. */
static tf_status unary_dispatch(vk_lower *l, tf_op op, uint32_t gradient, int32_t x, int32_t dy, int32_t y,
                                int64_t count) {
  const tf_attrs *attrs = &l->step->attrs;
  unary_push push = {.count = (uint32_t)count,
                     .op = (uint32_t)op,
                     .approximate = attrs->kind == TF_ATTR_GELU && attrs->u.gelu.approximate,
                     .gradient = gradient,
                     .slope = attrs->kind == TF_ATTR_LEAKY_RELU ? attrs->u.leaky_relu.alpha : 0.0f,
                     .lo = attrs->kind == TF_ATTR_CLIP ? attrs->u.clip.lo : 0.0f,
                     .hi = attrs->kind == TF_ATTR_CLIP ? attrs->u.clip.hi : 0.0f};
  int32_t buffers[3] = {x, dy, y};
  return vk_emit_dispatch(l, VK_SHADER_unary, 3, buffers, 0x4, &push, sizeof(push), vk_groups(count, 256), 1, 1);
}

/* The element count of output 0, checked against the shaders' limit; 0: nothing to dispatch. */
static tf_status output_count(vk_lower *l, int64_t *count) {
  const tf_plan_buffer *out = vk_buffer(l, vk_out(l, 0));
  *count = vk_count(out);
  return *count == 0 ? NULL : vk_check_count(l, *count, out->name);
}

tf_status vk_lower_unary(vk_lower *l) {
  int64_t count;
  TF_RETURN_IF_ERROR(output_count(l, &count));
  const bool gradient = l->step->n_inputs == 2;
  return count == 0
             ? NULL
             : unary_dispatch(l, l->step->op, gradient, vk_in(l, 0), gradient ? vk_in(l, 1) : -1, vk_out(l, 0), count);
}

/* gelu_pair(x) -> (y, dydx): the derivative first (gelu_grad's case of shaders/unary.comp, without
 * dy), then gelu, whose y may be x's own memory (the op table's alias). */
tf_status vk_lower_gelu_pair(vk_lower *l) {
  int64_t count;
  TF_RETURN_IF_ERROR(output_count(l, &count));
  if (count == 0)
    return NULL;
  TF_RETURN_IF_ERROR(unary_dispatch(l, TF_OP_GELU_GRAD, 2, vk_in(l, 0), -1, vk_out(l, 1), count));
  return unary_dispatch(l, TF_OP_GELU, 0, vk_in(l, 0), -1, vk_out(l, 0), count);
}

tf_status vk_lower_zero(vk_lower *l) { return vk_emit_fill(l, vk_in(l, 0)); }

tf_status vk_lower_dropout(vk_lower *l) {
  const tf_plan_buffer *out = vk_buffer(l, vk_out(l, 0));
  int64_t count = vk_count(out);
  float rate = l->step->attrs.u.dropout.rate;
  if (count == 0)
    return NULL;
  if (!(rate > 0.0f))
    return vk_emit_copy(l, vk_in(l, 0), vk_out(l, 0), out->bytes);
  TF_RETURN_IF_ERROR(vk_check_count(l, count, out->name));
  uint64_t stream = l->step->attrs.u.dropout.seed;
  dropout_push push = {.count = (uint32_t)count,
                       .rate = rate,
                       .scale = (float)(1.0 / (1.0 - (double)rate)),
                       .stream_lo = (uint32_t)stream,
                       .stream_hi = (uint32_t)(stream >> 32)};
  int32_t buffers[2] = {vk_in(l, 0), vk_out(l, 0)};
  return vk_emit_dispatch(l, VK_SHADER_dropout, 2, buffers, 0x2, &push, sizeof(push), vk_groups(count, 256), 1, 1);
}
