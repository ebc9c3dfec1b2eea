#version 450
// batch_norm and its gradient over the channels of x [N, C, S...] (kernels/cpu/batch_norm.c).
//
// A workgroup per channel c (grid-stride past 65,535 channels). x is viewed as [N, C, S]: the
// channel's M = N x S elements i = n S + s sit at (n C + c) S + s. Both modes first take the
// channel's statistics the same way (the mean, then the centred variance, by tree sums), so the
// gradient's equal the forward's bit for bit, as on the CPU. The gradient then sums dy and dy xhat
// in one more walk, writes dx, and invocation 0 writes dgamma[c] and dbeta[c]. No atomics and no
// workspace: each invocation's sums are compensated, then combined in a fixed order.
#extension GL_GOOGLE_include_directive : require
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

#define WG 256u // a channel usually holds thousands of elements (a batch of images)
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Gamma { ELEMENT gamma[]; };
layout(std430, set = 0, binding = 2) readonly buffer Third { ELEMENT third[]; }; // beta, or dy
layout(std430, set = 0, binding = 3) writeonly buffer Out { ELEMENT out_data[]; }; // y, or dx
layout(std430, set = 0, binding = 4) writeonly buffer DGamma { ELEMENT dgamma[]; };
layout(std430, set = 0, binding = 5) writeonly buffer DBeta { ELEMENT dbeta[]; };

layout(push_constant) uniform Push {
  uint batch;    // N
  uint channels; // C
  uint spatial;  // S: the product of the axes after the channels (1 for rank 2)
  float epsilon;
  uint backward; // 0: (x, gamma, beta) -> y; 1: (x, gamma, dy) -> (dx, dgamma, dbeta)
} pc;

// Two sums reduced at once: the gradient's dy and dy xhat share one tree.
shared vec2 partial[WG];

#if SUBGROUP
// subgroupAdd within each subgroup, then the subgroups' partials added in subgroup order by every
// invocation: one barrier instead of eight, a fixed order on a device (as norm.comp).
vec2 tree(vec2 value) {
  vec2 reduced = subgroupAdd(value);
  if (subgroupElect())
    partial[gl_SubgroupID] = reduced;
  barrier();
  vec2 result = partial[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++)
    result += partial[i];
  barrier();
  return result;
}
#else
vec2 tree(vec2 value) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  vec2 result = partial[0];
  barrier(); // the next tree overwrites partial[0]
  return result;
}
#endif

// Where element i of channel c lies in x, dy, y and dx.
uint at(uint c, uint i) {
  uint n = i / pc.spatial;
  return (n * pc.channels + c) * pc.spatial + (i - n * pc.spatial);
}

// (mean, rstd) of channel c's `count` elements, by the whole workgroup.
vec2 channel_stats(uint c, uint count) {
  uint t = gl_LocalInvocationID.x;
  float sum = 0.0, carry = 0.0;
  for (uint i = t; i < count; i += WG)
    kahan_add(sum, carry, TO_F32(x[at(c, i)]));
  float mean = tree(vec2(sum, 0.0)).x / float(count);
  float squares = 0.0;
  carry = 0.0;
  for (uint i = t; i < count; i += WG) {
    float centred = TO_F32(x[at(c, i)]) - mean;
    kahan_add(squares, carry, centred * centred);
  }
  return vec2(mean, 1.0 / sqrt(tree(vec2(squares, 0.0)).x / float(count) + pc.epsilon));
}

void forward(uint c, uint count) {
  vec2 s = channel_stats(c, count);
  float g = TO_F32(gamma[c]), b = TO_F32(third[c]);
  for (uint i = gl_LocalInvocationID.x; i < count; i += WG) {
    uint a = at(c, i);
    out_data[a] = FROM_F32((TO_F32(x[a]) - s.x) * s.y * g + b);
  }
}

// Each invocation reads x and dy at a before it writes dx at a, and only its own elements: dx may
// share its buffer with either.
void backward(uint c, uint count) {
  uint t = gl_LocalInvocationID.x;
  vec2 s = channel_stats(c, count);
  float dy_sum = 0.0, dy_carry = 0.0, dy_xhat_sum = 0.0, dy_xhat_carry = 0.0;
  for (uint i = t; i < count; i += WG) {
    uint a = at(c, i);
    float dy = TO_F32(third[a]);
    kahan_add(dy_sum, dy_carry, dy);
    kahan_add(dy_xhat_sum, dy_xhat_carry, dy * ((TO_F32(x[a]) - s.x) * s.y));
  }
  vec2 sums = tree(vec2(dy_sum, dy_xhat_sum)); // (dbeta, dgamma)
  float scale = TO_F32(gamma[c]) * s.y;
  float dy_mean = sums.x / float(count), dy_xhat_mean = sums.y / float(count);
  for (uint i = t; i < count; i += WG) {
    uint a = at(c, i);
    float xhat = (TO_F32(x[a]) - s.x) * s.y;
    out_data[a] = FROM_F32(scale * (TO_F32(third[a]) - dy_mean - xhat * dy_xhat_mean));
  }
  // No elements (N or S is 0): the sums of nothing, 0, as on the CPU.
  if (t == 0u) {
    dgamma[c] = FROM_F32(sums.y);
    dbeta[c] = FROM_F32(sums.x);
  }
}

// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  uint count = pc.batch * pc.spatial;
  for (uint c = gl_WorkGroupID.x; c < pc.channels; c += gl_NumWorkGroups.x) {
    if (pc.backward != 0u)
      backward(c, count);
    else
      forward(c, count);
  }
}
