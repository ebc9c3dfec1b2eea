#version 450
// Moving elements without computing (kernels/cpu/layout.c): transpose, expand, slice, concat (one
// dispatch per input) and slice_grad's placement are all dst[dst_base + sum(i_d dst_stride_d)] =
// src[src_base + sum(i_d src_stride_d)] over an iteration shape of at most 6 axes. Elements are
// 32-bit words: the host describes an 8-byte element as an extra innermost axis of 2 words, so
// any dtype of 4 or 8 bytes moves bit for bit. cast between f32 and i32 is the same walk with a
// conversion (kernels/cpu/cast.c: truncation toward zero, saturated, NaN to 0; to f32 rounded).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };

layout(push_constant) uniform Push {
  uint count;
  uint rank;
  uint src_base;
  uint dst_base;
  uint shape[6];
  uint src_stride[6];
  uint dst_stride[6];
  uint convert;    // 0: copy, 1: f32 -> i32, 2: i32 -> f32
} pc;

uint converted(uint word) {
  if (pc.convert == 1u) {
    float v = uintBitsToFloat(word);
    int r = isnan(v) ? 0 : v >= 2147483648.0 ? 2147483647 : v <= -2147483648.0 ? int(0x80000000u) : int(v);
    return uint(r);
  }
  if (pc.convert == 2u)
    return floatBitsToUint(float(int(word)));
  return word;
}

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    uint rest = i, s = pc.src_base, d = pc.dst_base;
    for (int axis = int(pc.rank) - 1; axis >= 0; axis--) {
      uint index = rest % pc.shape[axis];
      rest /= pc.shape[axis];
      s += index * pc.src_stride[axis];
      d += index * pc.dst_stride[axis];
    }
    dst[d] = converted(src[s]);
  }
}
