#version 450
// adamw8bit (kernels/cpu/optimizer8bit.c has the design): AdamW over moments stored as u8 codes with
// an f32 scale per block of 256 elements. One workgroup per block (looping when there are more
// blocks than workgroups), one invocation per element: dequantize, optimizer.comp's AdamW update,
// the block's new scales from a shared-memory maximum, then the codes, four to a uint (the codes are
// bound as uint arrays: the range is rounded up to 4 bytes, and a block starts at a multiple of 4).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Param { float param[]; };
layout(std430, set = 0, binding = 1) readonly buffer Grad { float grad[]; };
layout(std430, set = 0, binding = 2) buffer MCodes { uint m_codes[]; };
layout(std430, set = 0, binding = 3) buffer MScales { float m_scales[]; };
layout(std430, set = 0, binding = 4) buffer VCodes { uint v_codes[]; };
layout(std430, set = 0, binding = 5) buffer VScales { float v_scales[]; };
layout(std430, set = 0, binding = 6) readonly buffer NormSq { float norm_sq[]; };

layout(push_constant) uniform Push {
  uint count;
  uint blocks;
  uint has_norm;
  uint slot;
  float decay;  // (float)(1 - lr wd)
  float beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon;
  float clip_norm;
  float grad_scale;
} pc;

shared float m_max[256];
shared float v_max[256];
shared uint m_byte[256];
shared uint v_byte[256];

float gradient_factor() {
  float grad_scale = pc.grad_scale * run_state.gradient_unscale; // exact: a power of two
  if (!(pc.clip_norm > 0.0) || pc.has_norm == 0u)
    return grad_scale;
  float norm = sqrt(norm_sq[0]) * grad_scale;
  float clip = pc.clip_norm / (norm + 1e-6);
  return clip < 1.0 ? grad_scale * clip : grad_scale;
}

uint byte_of(uint word, uint i) { return (word >> (8u * (i & 3u))) & 0xffu; }

void main() {
  if (pc.has_norm != 0u && (isnan(norm_sq[0]) || isinf(norm_sq[0])))
    return; // uniform over the dispatch: no invocation reaches a barrier
  float factor = gradient_factor();
  vec2 adam = run_state.adam[pc.slot];
  uint t = gl_LocalInvocationID.x;
  for (uint b = gl_WorkGroupID.x; b < pc.blocks; b += gl_NumWorkGroups.x) {
    uint i = b * 256u + t;
    bool inside = i < pc.count;
    float m_step = m_scales[b] / 127.0, v_step = v_scales[b] / 255.0;
    float m = 0.0, v = 0.0;
    if (inside) {
      int q = int(byte_of(m_codes[i >> 2], i));
      q = q >= 128 ? q - 256 : q; // int8 two's complement
      float r = float(byte_of(v_codes[i >> 2], i)) * v_step;
      float m_old = float(q) * m_step, v_old = (r * r) * (r * r);
      float g = grad[i] * factor;
      float p = param[i] * pc.decay;
      m = m_old * pc.beta1 + pc.one_minus_beta1 * g;
      v = v_old * pc.beta2 + pc.one_minus_beta2 * g * g;
      param[i] = p - adam.x * (m / (sqrt(v) / adam.y + pc.epsilon));
    }
    m_max[t] = abs(m);
    v_max[t] = v;
    memoryBarrierBuffer(); // buffers: barrier() alone orders shared memory only
    barrier();             // every invocation has read the old scales and codes
    for (uint half_size = 128u; half_size > 0u; half_size /= 2u) {
      if (t < half_size) {
        m_max[t] = max(m_max[t], m_max[t + half_size]);
        v_max[t] = max(v_max[t], v_max[t + half_size]);
      }
      barrier();
    }
    float m_scale = m_max[0], root_max = sqrt(sqrt(v_max[0]));
    float m_inverse = m_scale > 0.0 ? 127.0 / m_scale : 0.0;
    float v_inverse = root_max > 0.0 ? 255.0 / root_max : 0.0;
    float q = min(floor(abs(m) * m_inverse + 0.5), 127.0);
    m_byte[t] = uint(m < 0.0 ? -int(q) : int(q)) & 0xffu;
    v_byte[t] = uint(min(floor(sqrt(sqrt(v)) * v_inverse + 0.5), 255.0));
    barrier();
    if (t == 0u) {
      m_scales[b] = m_scale;
      v_scales[b] = root_max;
    }
    uint first = b * 256u + 4u * t;
    if (t < 64u && first < pc.count) {
      uint k = 4u * t;
      m_codes[first >> 2] = m_byte[k] | (m_byte[k + 1u] << 8) | (m_byte[k + 2u] << 16) | (m_byte[k + 3u] << 24);
      v_codes[first >> 2] = v_byte[k] | (v_byte[k + 1u] << 8) | (v_byte[k + 2u] << 16) | (v_byte[k + 3u] << 24);
    }
    barrier(); // the shared arrays are read before the next block writes them
  }
}
