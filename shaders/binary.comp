#version 450
// add, sub, mul, div, keep with numpy broadcasting (kernels/cpu/elementwise.c), and accumulate (an add
// whose output is its first input). The host collapses the output's axes with both operands'
// strides (0 where broadcast) to at most 8.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "op_codes.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer A { ELEMENT a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { ELEMENT b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { ELEMENT y[]; };

layout(push_constant) uniform Push {
  uint count;
  uint op;        // the tf_op number (op_codes.glsl): add, sub, mul, div or keep
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
    case TF_OP_ADD: r = x + z; break;
    case TF_OP_SUB: r = x - z; break;
    case TF_OP_MUL: r = x * z; break;
    case TF_OP_DIV: r = x / z; break;
    case TF_OP_KEEP: r = z == 0.0 ? 0.0 : x; break; // a select: 0 where z is 0 (a NaN of x too); a NaN z keeps x
    default: r = uintBitsToFloat(0x7fc00000u); break; // NaN: an op without a case here
    }
    y[i] = FROM_F32(r);
  }
}
