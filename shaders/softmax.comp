#version 450
// softmax and log_softmax along one axis and their gradients (kernels/cpu/softmax.c). x is viewed
// as [outer, classes, inner]; each invocation owns one (outer, inner) line and walks it: the max,
// a compensated sum of exponentials, then the outputs.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };    // x, or y for the gradients
layout(std430, set = 0, binding = 1) readonly buffer DY { ELEMENT dy[]; };  // gradients only
layout(std430, set = 0, binding = 2) writeonly buffer Out { ELEMENT out_data[]; };

#define SOFTMAX 0
#define LOG_SOFTMAX 1
#define SOFTMAX_GRAD 2
#define LOG_SOFTMAX_GRAD 3

layout(push_constant) uniform Push {
  uint lines;     // outer x inner
  uint classes;
  uint inner;
  uint mode;
} pc;

void main() {
  for (uint line = gl_GlobalInvocationID.x; line < pc.lines; line += grid_size()) {
    uint base = (line / pc.inner) * pc.classes * pc.inner + line % pc.inner, step = pc.inner;
    if (pc.classes == 0u)
      continue;
    float sum = 0.0, carry = 0.0;
    if (pc.mode == SOFTMAX_GRAD || pc.mode == LOG_SOFTMAX_GRAD) {
      bool log_output = pc.mode == LOG_SOFTMAX_GRAD;
      for (uint c = 0u; c < pc.classes; c++) {
        uint at = base + c * step;
        kahan_add(sum, carry, log_output ? TO_F32(dy[at]) : TO_F32(dy[at]) * TO_F32(x[at]));
      }
      for (uint c = 0u; c < pc.classes; c++) {
        uint at = base + c * step;
        float y = TO_F32(x[at]), g = TO_F32(dy[at]);
        out_data[at] = FROM_F32(log_output ? g - exp(y) * sum : y * (g - sum));
      }
      continue;
    }
    float best = TO_F32(x[base]);
    for (uint c = 1u; c < pc.classes; c++)
      best = max(best, TO_F32(x[base + c * step]));
    for (uint c = 0u; c < pc.classes; c++)
      kahan_add(sum, carry, exp(TO_F32(x[base + c * step]) - best));
    if (pc.mode == LOG_SOFTMAX) {
      float log_sum = log(sum);
      for (uint c = 0u; c < pc.classes; c++)
        out_data[base + c * step] = FROM_F32((TO_F32(x[base + c * step]) - best) - log_sum);
    } else {
      for (uint c = 0u; c < pc.classes; c++)
        out_data[base + c * step] = FROM_F32(exp(TO_F32(x[base + c * step]) - best) / sum);
    }
  }
}
