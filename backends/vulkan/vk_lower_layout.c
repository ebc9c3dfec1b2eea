/* Steps that move elements without computing (kernels/cpu/layout.c): reshape is a buffer copy;
 * transpose, expand, slice, slice_grad and concat are strided gathers (shaders/layout.comp) of
 * 32-bit words, an 8-byte element being two of them, of 16-bit elements (f16, bf16: the layout16
 * module, which needs storageBuffer16BitAccess, vk_lower.c checks it) or of bytes (u8: layout8, which
 * needs storageBuffer8BitAccess); cast between f32 and i32 is a gather that
 * converts, cast between f32 and f16 or bf16 a walk over element pairs (one 32-bit word of the
 * 16-bit side each), so no 16-bit storage feature is needed. */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/slice_bounds.h"

#define GATHER_RANK 9 /* 8 axes (TF_MAX_RANK), and the two words of an 8-byte element: 128 push bytes */

typedef struct layout_push {
  uint32_t count, rank, src_base, dst_base;
  uint32_t shape[GATHER_RANK], src_stride[GATHER_RANK], dst_stride[GATHER_RANK];
  uint32_t convert; /* a layout_convert */
} layout_push;

/* shaders/layout.comp's conversions (its pc.convert). */
typedef enum layout_convert {
  CONVERT_NONE = 0,
  CONVERT_F32_TO_I32 = 1,
  CONVERT_I32_TO_F32 = 2,
  CONVERT_F32_TO_F16 = 3,
  CONVERT_F16_TO_F32 = 4,
  CONVERT_F32_TO_BF16 = 5,
  CONVERT_BF16_TO_F32 = 6,
  CONVERT_I64_TO_F32 = 7,
  CONVERT_U8_TO_F32 = 8,
  CONVERT_F32_TO_U8 = 9,
  CONVERT_F32_TO_I64 = 10,
  CONVERT_I32_TO_I64 = 11,
  CONVERT_I64_TO_I32 = 12,
  CONVERT_U8_TO_I32 = 13,
  CONVERT_U8_TO_I64 = 14,
  CONVERT_I32_TO_U8 = 15,
  CONVERT_I64_TO_U8 = 16,
} layout_convert;

/* Whether `convert` reads or writes bytes (shaders/layout.comp's cast_bytes: 32-bit words, four
 * bytes each). */
static bool converts_bytes(layout_convert convert) {
  return convert == CONVERT_U8_TO_F32 || convert == CONVERT_F32_TO_U8 || convert >= CONVERT_U8_TO_I32;
}

/* Whether `convert` writes bytes: one invocation a word of four. */
static bool writes_bytes(layout_convert convert) {
  return convert == CONVERT_F32_TO_U8 || convert == CONVERT_I32_TO_U8 || convert == CONVERT_I64_TO_U8;
}

/* dst[dst_base + sum i_d dst_stride_d] = src[src_base + sum i_d src_stride_d] over `shape`, all in
 * elements of `size` bytes (2, 4 or 8), converted by `convert` (4-byte elements). The shader walks
 * units of 4 bytes (layout) or, for 2-byte elements, of 2 (layout16). */
static tf_status gather_converting(vk_lower *l, int32_t src, int32_t dst, int32_t rank, const int64_t *shape_in,
                                   const int64_t *src_stride, const int64_t *dst_stride, int64_t src_base,
                                   int64_t dst_base, int64_t size, uint32_t convert) {
  int64_t shape[TF_MAX_RANK], strides[2][TF_MAX_RANK];
  int64_t words = size <= 2 ? 1 : size / 4, count = 1;
  for (int32_t i = 0; i < rank; i++) {
    shape[i] = shape_in[i];
    strides[0][i] = src_stride[i] * words;
    strides[1][i] = dst_stride[i] * words;
    count *= shape[i];
  }
  if (count == 0)
    return NULL;
  vk_collapse(&rank, shape, 2, strides);
  if (words == 2) {
    if (rank >= TF_MAX_RANK) /* the iteration arrays hold TF_MAX_RANK axes */
      return vk_refuse(l, "the copy of 8-byte elements needs %d strided axes with their words; at most %d", rank + 1,
                       TF_MAX_RANK);
    // The two words of an element: an innermost axis walked contiguously by both sides.
    shape[rank] = 2;
    strides[0][rank] = strides[1][rank] = 1;
    rank++;
    vk_collapse(&rank, shape, 2, strides);
  }
  if (rank > GATHER_RANK)
    return vk_refuse(l, "the copy needs %d strided axes; the layout shader walks %d", rank, GATHER_RANK);
  count *= words;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, "the copy"));
  layout_push push;
  memset(&push, 0, sizeof(push));
  push.count = (uint32_t)count;
  push.rank = (uint32_t)rank;
  push.src_base = (uint32_t)(src_base * words);
  push.dst_base = (uint32_t)(dst_base * words);
  push.convert = convert;
  for (int32_t i = 0; i < rank; i++) {
    push.shape[i] = (uint32_t)shape[i];
    push.src_stride[i] = (uint32_t)strides[0][i];
    push.dst_stride[i] = (uint32_t)strides[1][i];
  }
  int32_t buffers[2] = {src, dst};
  const vk_shader shader = size == 1 ? VK_SHADER_layout8 : size == 2 ? VK_SHADER_layout16 : VK_SHADER_layout;
  return vk_emit_dispatch(l, shader, 2, buffers, 0x2, &push, sizeof(push), vk_groups(count, 256), 1, 1);
}

static tf_status gather(vk_lower *l, int32_t src, int32_t dst, int32_t rank, const int64_t *shape,
                        const int64_t *src_stride, const int64_t *dst_stride, int64_t src_base, int64_t dst_base,
                        int64_t size) {
  return gather_converting(l, src, dst, rank, shape, src_stride, dst_stride, src_base, dst_base, size, CONVERT_NONE);
}

static tf_status lower_transpose(vk_lower *l, const tf_plan_buffer *x, const tf_plan_buffer *out, int64_t size) {
  int64_t x_strides[TF_MAX_RANK], src[TF_MAX_RANK], dst[TF_MAX_RANK];
  vk_contiguous_strides(x, x_strides);
  vk_contiguous_strides(out, dst);
  for (int32_t i = 0; i < out->rank; i++)
    src[i] = x_strides[l->step->attrs.u.transpose.perm[i]];
  return gather(l, vk_in(l, 0), vk_out(l, 0), out->rank, out->shape, src, dst, 0, 0, size);
}

static tf_status lower_expand(vk_lower *l, const tf_plan_buffer *x, const tf_plan_buffer *out, int64_t size) {
  int64_t src[TF_MAX_RANK], dst[TF_MAX_RANK];
  vk_broadcast_strides(x, out->rank, out->shape, src);
  vk_contiguous_strides(out, dst);
  return gather(l, vk_in(l, 0), vk_out(l, 0), out->rank, out->shape, src, dst, 0, 0, size);
}

/* slice: out = x[..., start::step (length), ...]; slice_grad: dx = 0, dx[..., start::step, ...] = dy.
 * `whole` is x (dx), `part` the sliced tensor (out, dy). */
static tf_status lower_slice(vk_lower *l, const tf_plan_buffer *whole, const tf_plan_buffer *part, int64_t size,
                             bool gradient) {
  const tf_slice_attrs *a = &l->step->attrs.u.slice;
  int32_t axis = a->axis < 0 ? a->axis + whole->rank : a->axis;
  int64_t whole_strides[TF_MAX_RANK], part_strides[TF_MAX_RANK];
  vk_contiguous_strides(whole, whole_strides);
  vk_contiguous_strides(part, part_strides);
  int64_t base = tf_slice_bound(a->start, whole->shape[axis]) * whole_strides[axis];
  whole_strides[axis] *= a->step;
  if (!gradient)
    return gather(l, vk_in(l, 0), vk_out(l, 0), part->rank, part->shape, whole_strides, part_strides, base, 0, size);
  TF_RETURN_IF_ERROR(vk_emit_fill(l, vk_out(l, 0)));
  return gather(l, vk_in(l, 0), vk_out(l, 0), part->rank, part->shape, part_strides, whole_strides, 0, base, size);
}

static tf_status lower_concat(vk_lower *l, const tf_plan_buffer *out, int64_t size) {
  int32_t axis = l->step->attrs.u.axis.axis < 0 ? l->step->attrs.u.axis.axis + out->rank : l->step->attrs.u.axis.axis;
  int64_t out_strides[TF_MAX_RANK], before = 0;
  vk_contiguous_strides(out, out_strides);
  for (int32_t k = 0; k < l->step->n_inputs; k++) {
    const tf_plan_buffer *x = vk_buffer(l, vk_in(l, k));
    int64_t x_strides[TF_MAX_RANK];
    vk_contiguous_strides(x, x_strides);
    TF_RETURN_IF_ERROR(gather(l, vk_in(l, k), vk_out(l, 0), x->rank, x->shape, x_strides, out_strides, 0,
                              before * out_strides[axis], size));
    before += x->shape[axis];
  }
  return NULL;
}

tf_status vk_lower_layout(vk_lower *l) {
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0)), *out = vk_buffer(l, vk_out(l, 0));
  int64_t size = tf_dtype_size(out->dtype);
  if (l->step->op == TF_OP_RESHAPE)
    return vk_emit_copy(l, vk_in(l, 0), vk_out(l, 0), out->bytes);
  if (size != 1 && size != 2 && size != 4 && size != 8) /* the walk moves bytes, 16-bit halves or 32-bit words */
    return vk_refuse(l, "the layout shaders move elements of 1, 2, 4 or 8 bytes; '%s' is %s", out->name,
                     tf_dtype_name(out->dtype));
  switch (l->step->op) {
  case TF_OP_TRANSPOSE: return lower_transpose(l, x, out, size);
  case TF_OP_EXPAND: return lower_expand(l, x, out, size);
  case TF_OP_SLICE: return lower_slice(l, x, out, size, false);
  case TF_OP_SLICE_GRAD: return lower_slice(l, out, x, size, true);
  case TF_OP_CONCAT: return lower_concat(l, out, size);
  default: return vk_refuse(l, "not a layout op");
  }
}

/* A contiguous cast of shaders/layout.comp's own walk: between f32 and f16/bf16 by element pairs,
 * one 32-bit word of the 16-bit side per invocation, or i64 -> f32 one element per invocation.
 * With an odd count the pairs' cast down also writes the 2 bytes after the last element (as 0);
 * they lie in the binding (its range is rounded up to 4 bytes) and belong to no other buffer as long
 * as every buffer starts at a multiple of 4, which the plan's alignment ensures. */
static tf_status contiguous_cast(vk_lower *l, int32_t from, int32_t to, layout_convert convert) {
  const tf_plan_buffer *out = vk_buffer(l, to);
  const bool pairs = convert >= CONVERT_F32_TO_F16 && convert <= CONVERT_BF16_TO_F32;
  if ((converts_bytes(convert) || pairs) && l->plan->alignment % 4 != 0)
    return vk_refuse(l,
                     "a cast to or from a 16-bit or 8-bit type works in 32-bit words, so buffers must start at "
                     "multiples of 4 bytes; the plan's alignment is %lld",
                     (long long)l->plan->alignment);
  int64_t count = vk_count(out);
  if (count == 0)
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, "the cast"));
  layout_push push;
  memset(&push, 0, sizeof(push));
  push.count = (uint32_t)count;
  push.convert = convert;
  int32_t buffers[2] = {from, to};
  return vk_emit_dispatch(l, VK_SHADER_layout, 2, buffers, 0x2, &push, sizeof(push),
                          vk_groups(pairs                   ? (count + 1) / 2
                                    : writes_bytes(convert) ? (count + 3) / 4
                                                            : count,
                                    256),
                          1, 1);
}

/* Buffer `to` = buffer `from` cast to to's dtype. */
static tf_status cast_between(vk_lower *l, int32_t from, int32_t to) {
  const tf_plan_buffer *x = vk_buffer(l, from), *out = vk_buffer(l, to);
  if (x->dtype == out->dtype)
    return vk_emit_copy(l, from, to, out->bytes);
  static const struct {
    tf_dtype from, to;
    layout_convert convert;
  } pairs[] = {
      {TF_F32, TF_I32, CONVERT_F32_TO_I32},   {TF_I32, TF_F32, CONVERT_I32_TO_F32},
      {TF_F32, TF_F16, CONVERT_F32_TO_F16},   {TF_F16, TF_F32, CONVERT_F16_TO_F32},
      {TF_F32, TF_BF16, CONVERT_F32_TO_BF16}, {TF_BF16, TF_F32, CONVERT_BF16_TO_F32},
      {TF_I64, TF_F32, CONVERT_I64_TO_F32},   {TF_U8, TF_F32, CONVERT_U8_TO_F32},
      {TF_F32, TF_U8, CONVERT_F32_TO_U8},     {TF_F32, TF_I64, CONVERT_F32_TO_I64},
      {TF_I32, TF_I64, CONVERT_I32_TO_I64},   {TF_I64, TF_I32, CONVERT_I64_TO_I32},
      {TF_U8, TF_I32, CONVERT_U8_TO_I32},     {TF_U8, TF_I64, CONVERT_U8_TO_I64},
      {TF_I32, TF_U8, CONVERT_I32_TO_U8},     {TF_I64, TF_U8, CONVERT_I64_TO_U8},
  };
  for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
    if (pairs[i].from != x->dtype || pairs[i].to != out->dtype)
      continue;
    if (pairs[i].convert >= CONVERT_F32_TO_F16)
      return contiguous_cast(l, from, to, pairs[i].convert);
    int64_t strides[TF_MAX_RANK];
    vk_contiguous_strides(out, strides);
    return gather_converting(l, from, to, out->rank, out->shape, strides, strides, 0, 0, 4, pairs[i].convert);
  }
  return vk_refuse(l,
                   "cast %s -> %s: the Vulkan shaders cast f32 to and from i32, i64, f16, bf16 and u8, and between the "
                   "integer types only",
                   tf_dtype_name(x->dtype), tf_dtype_name(out->dtype));
}

tf_status vk_lower_cast(vk_lower *l) { return cast_between(l, vk_in(l, 0), vk_out(l, 0)); }

tf_status vk_lower_cast_into(vk_lower *l) { return cast_between(l, vk_in(l, 1), vk_in(l, 0)); }
