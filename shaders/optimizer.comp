#version 450
// sgd and adamw (kernels/cpu/optimizer.c), in place, operation by operation as the CPU kernels.
// The gradient is scaled by grad_scale 2^-e (2^e the run's loss scale, from the run state) and,
// with clipping, min(1, clip / (sqrt(norm_sq) grad_scale 2^-e + 1e-6)). A norm_sq that is not
// finite (an overflowed gradient) skips the update: nothing is written. AdamW's step size lr / (1 - beta1^t) and sqrt(1 - beta2^t) depend on the step t: the
// host computes them in double for each run and passes them in the run state (slot `slot`).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Param { ELEMENT param[]; };
layout(std430, set = 0, binding = 1) readonly buffer Grad { ELEMENT grad[]; };
layout(std430, set = 0, binding = 2) buffer M { ELEMENT m[]; };   // sgd: the momentum buffer
layout(std430, set = 0, binding = 3) buffer V { ELEMENT v[]; };   // adamw
layout(std430, set = 0, binding = 4) readonly buffer NormSq { float norm_sq[]; };

layout(push_constant) uniform Push {
  uint count;
  uint adamw;
  uint has_norm;
  uint slot;
  float learning_rate;  // sgd
  float momentum;       // sgd
  float weight_decay;   // sgd: the L2 coefficient
  float decay;          // adamw: (float)(1 - lr wd)
  float beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon;
  float clip_norm;
  float grad_scale;
} pc;

float gradient_factor() {
  float grad_scale = pc.grad_scale * run_state.gradient_unscale; // exact: a power of two
  if (!(pc.clip_norm > 0.0) || pc.has_norm == 0u)
    return grad_scale;
  float norm = sqrt(norm_sq[0]) * grad_scale;
  float clip = pc.clip_norm / (norm + 1e-6);
  return clip < 1.0 ? grad_scale * clip : grad_scale;
}

void main() {
  if (pc.has_norm != 0u && (isnan(norm_sq[0]) || isinf(norm_sq[0])))
    return; // no barrier in this shader: an early return is safe on lavapipe too
  float factor = gradient_factor();
  vec2 adam = run_state.adam[pc.slot];
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    float g = TO_F32(grad[i]) * factor, p = TO_F32(param[i]);
    if (pc.adamw == 0u) {
      if (pc.weight_decay != 0.0)
        g += pc.weight_decay * p;
      if (pc.momentum != 0.0) {
        float velocity = pc.momentum * TO_F32(m[i]) + g;
        m[i] = FROM_F32(velocity);
        g = velocity;
      }
      param[i] = FROM_F32(p - pc.learning_rate * g);
      continue;
    }
    p *= pc.decay;
    float first = TO_F32(m[i]) * pc.beta1 + pc.one_minus_beta1 * g;
    float second = TO_F32(v[i]) * pc.beta2 + pc.one_minus_beta2 * g * g;
    m[i] = FROM_F32(first);
    v[i] = FROM_F32(second);
    param[i] = FROM_F32(p - adam.x * (first / (sqrt(second) / adam.y + pc.epsilon)));
  }
}
