#version 450
// batch_norm and its gradient over the channels of x [N, C, S...] (kernels/cpu/batch_norm.c).
//
// A workgroup per channel c, or an invocation per channel of a few elements, x viewed as [N, C, S]
// (batch_norm_stats.glsl, shared with batch_norm_running.comp). Both modes first take the
// channel's statistics the same way (the mean, then the centred variance), so the gradient's equal
// the forward's bit for bit, as on the CPU. The gradient then sums dy and dy xhat in one more walk,
// writes dx, and the channel's writer writes dgamma[c] and dbeta[c]. No atomics and no workspace:
// each invocation's sums are compensated, then combined in a fixed order.
#extension GL_GOOGLE_include_directive : require
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

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
  uint alone;    // 1: an invocation per channel (batch_norm_stats.glsl)
} pc;

#include "batch_norm_stats.glsl"

// (mean, rstd) of channel c's `count` elements.
vec2 channel_stats(uint c, uint count) {
  vec2 moments = channel_moments(c, count);
  return vec2(moments.x, 1.0 / sqrt(moments.y + pc.epsilon));
}

void forward(uint c, uint count) {
  vec2 s = channel_stats(c, count);
  float g = TO_F32(gamma[c]), b = TO_F32(third[c]);
  for (uint i = walk_first(); i < count; i += walk_stride()) {
    uint a = at(c, i);
    out_data[a] = FROM_F32((TO_F32(x[a]) - s.x) * s.y * g + b);
  }
}

// Each invocation reads x and dy at a before it writes dx at a, and only its own elements: dx may
// share its buffer with either.
void backward(uint c, uint count) {
  uint first = walk_first(), stride = walk_stride();
  vec2 s = channel_stats(c, count);
  float dy_sum = 0.0, dy_carry = 0.0, dy_xhat_sum = 0.0, dy_xhat_carry = 0.0;
  for (uint i = first; i < count; i += stride) {
    uint a = at(c, i);
    float dy = TO_F32(third[a]);
    kahan_add(dy_sum, dy_carry, dy);
    kahan_add(dy_xhat_sum, dy_xhat_carry, dy * ((TO_F32(x[a]) - s.x) * s.y));
  }
  vec2 sums = combine(vec2(dy_sum, dy_xhat_sum)); // (dbeta, dgamma)
  float scale = TO_F32(gamma[c]) * s.y;
  float dy_mean = sums.x / float(count), dy_xhat_mean = sums.y / float(count);
  for (uint i = first; i < count; i += stride) {
    uint a = at(c, i);
    float xhat = (TO_F32(x[a]) - s.x) * s.y;
    out_data[a] = FROM_F32(scale * (TO_F32(third[a]) - dy_mean - xhat * dy_xhat_mean));
  }
  // No elements (N or S is 0): the sums of nothing, 0, as on the CPU.
  if (writes_channel()) {
    dgamma[c] = FROM_F32(sums.y);
    dbeta[c] = FROM_F32(sums.x);
  }
}

// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  uint count = pc.batch * pc.spatial;
  for (uint c = first_channel(); c < pc.channels; c += channel_stride()) {
    if (pc.backward != 0u)
      backward(c, count);
    else
      forward(c, count);
  }
}
