#version 450
// batch_norm_running: the running statistics of a batch_norm updated in place with the batch's
// (kernels/cpu/batch_norm.c, running_channel): per channel c of x [N, C, S...], over its M = N x S
// elements,
//
//   running_mean[c] = (1 - momentum) running_mean[c] + momentum mean,
//   running_var[c]  = (1 - momentum) running_var[c]  + momentum var M / (M - 1)   (var when M = 1),
//
// mean and the biased var taken exactly as batch_norm.comp takes them (batch_norm_stats.glsl: a
// workgroup per channel, compensated walks, fixed-order trees), so they are the forward's own bits.
// x is ELEMENT (f32, or f16/bf16 in the half variants); the running statistics are f32 in every
// variant (PyTorch keeps them in f32 under autocast too). One invocation per channel (invocation 0
// of its workgroup, or the one that owns it alone) reads and writes its two statistics once: no
// races, and no workspace.
#extension GL_GOOGLE_include_directive : require
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) buffer RunningMean { float running_mean[]; };
layout(std430, set = 0, binding = 2) buffer RunningVar { float running_var[]; };

layout(push_constant) uniform Push {
  uint batch;    // N
  uint channels; // C
  uint spatial;  // S: the product of the axes after the channels (1 for rank 2)
  float momentum;
  uint alone; // 1: an invocation per channel (batch_norm_stats.glsl)
} pc;

#include "batch_norm_stats.glsl"

// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  uint count = pc.batch * pc.spatial;
  for (uint c = first_channel(); c < pc.channels; c += channel_stride()) {
    vec2 moments = channel_moments(c, count);
    if (writes_channel()) {
      // The CPU's order: var M, then / (M - 1).
      float unbiased = count > 1u ? moments.y * float(count) / float(count - 1u) : moments.y;
      float keep = 1.0 - pc.momentum;
      running_mean[c] = keep * running_mean[c] + pc.momentum * moments.x;
      running_var[c] = keep * running_var[c] + pc.momentum * unbiased;
    }
  }
}
