#version 450
// dropout (kernels/cpu/random.c): element i is kept when the counter-based RNG's uniform for
// (session seed, micro-step, node seed, i) is >= rate, and scaled by 1 / (1 - rate). The same
// Philox4x32-10 as common/rng.c, so masks equal the CPU's bit for bit.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { ELEMENT y[]; };

layout(push_constant) uniform Push {
  uint count;
  float rate;
  float scale;      // (float)(1 / (1 - rate)), computed in double on the host
  uint stream_lo;   // the node's seed
  uint stream_hi;
} pc;

uvec4 philox(uvec4 c, uvec2 k) {
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
    c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

void main() {
  uvec2 key = uvec2(run_state.seed_lo, run_state.seed_hi);
  uint mix_lo = run_state.step_mix_lo ^ pc.stream_lo, mix_hi = run_state.step_mix_hi ^ pc.stream_hi;
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    uvec4 words = philox(uvec4(i, 0u, mix_lo, mix_hi), key);
    float uniform_value = float(words.x >> 8) * (1.0 / 16777216.0);
    y[i] = FROM_F32(uniform_value >= pc.rate ? TO_F32(x[i]) * pc.scale : 0.0);
  }
}
