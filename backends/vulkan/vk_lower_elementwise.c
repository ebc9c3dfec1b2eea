/* Element-by-element steps: the broadcasting binaries and accumulate (shaders/binary.comp), the
 * float unaries and activation gradients (shaders/unary.comp), dropout (shaders/dropout.comp) and
 * zero (a fill). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"

typedef struct binary_push {
  uint32_t count, op, rank, reserved;
  uint32_t shape[8], a_stride[8], b_stride[8];
} binary_push;

typedef struct unary_push {
  uint32_t count, op;
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
  push.op = op == TF_OP_SUB ? 1 : op == TF_OP_MUL ? 2 : op == TF_OP_DIV ? 3 : 0;
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

/* shaders/unary.comp's op codes. */
static int unary_code(const tf_plan_step *step) {
  bool approximate = step->attrs.kind == TF_ATTR_GELU && step->attrs.u.gelu.approximate;
  switch (step->op) {
  case TF_OP_NEG: return 0;
  case TF_OP_EXP: return 1;
  case TF_OP_LOG: return 2;
  case TF_OP_SQRT: return 3;
  case TF_OP_RSQRT: return 4;
  case TF_OP_RELU: return 5;
  case TF_OP_GELU: return approximate ? 7 : 6;
  case TF_OP_SILU: return 8;
  case TF_OP_SIGMOID: return 9;
  case TF_OP_TANH: return 10;
  case TF_OP_RELU_GRAD: return 16;
  case TF_OP_GELU_GRAD: return approximate ? 18 : 17;
  case TF_OP_SILU_GRAD: return 19;
  case TF_OP_SIGMOID_GRAD: return 20;
  case TF_OP_TANH_GRAD: return 21;
  default: return -1;
  }
}

tf_status vk_lower_unary(vk_lower *l) {
  int code = unary_code(l->step);
  if (code < 0)
    return vk_refuse(l, "not a unary op");
  const tf_plan_buffer *out = vk_buffer(l, vk_out(l, 0));
  int64_t count = vk_count(out);
  if (count == 0)
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, out->name));
  unary_push push = {.count = (uint32_t)count, .op = (uint32_t)code};
  int32_t buffers[3] = {vk_in(l, 0), code >= 16 ? vk_in(l, 1) : -1, vk_out(l, 0)};
  return vk_emit_dispatch(l, VK_SHADER_unary, 3, buffers, 0x4, &push, sizeof(push), vk_groups(count, 256), 1, 1);
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
