#version 450
// add, sub, mul, div with numpy broadcasting (kernels/cpu/elementwise.c), and accumulate (an add
// whose output is its first input). The host collapses the output's axes with both operands'
// strides (0 where broadcast) to at most 8.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer A { ELEMENT a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { ELEMENT b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ELEMENT y[]; };

layout(push_constant) uniform Push {
  uint count;
  uint op;        // 0 add, 1 sub, 2 mul, 3 div
  uint rank;
  uint reserved;
  uint shape[8];
  uint a_stride[8];
  uint b_stride[8];
} pc;

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    uint rest = i, ia = 0, ib = 0;
    for (int d = int(pc.rank) - 1; d >= 0; d--) {
      uint index = rest % pc.shape[d];
      rest /= pc.shape[d];
      ia += index * pc.a_stride[d];
      ib += index * pc.b_stride[d];
    }
    float x = TO_F32(a[ia]), z = TO_F32(b[ib]);
    float r;
    switch (pc.op) {
    case 0: r = x + z; break;
    case 1: r = x - z; break;
    case 2: r = x * z; break;
    default: r = x / z; break;
    }
    y[i] = FROM_F32(r);
  }
}
