#version 450
// softmax and log_softmax along one axis and their gradients (kernels/cpu/softmax.c). x is viewed
// as [outer, classes, inner]; each invocation owns one (outer, inner) line and walks it: the max,
// a compensated sum of exponentials, then the outputs.
//
// The subgroup variant (-DSUBGROUP=1) handles rows only (inner == 1: vk_lower_softmax sends lines
// with inner > 1 to the plain shader, whose neighbouring invocations already read neighbouring
// columns). There a walk would read addresses `classes` apart in neighbouring invocations and
// serialise a long row (a 50,257-word vocabulary) on one invocation. Instead a cluster of 8
// consecutive subgroup lanes owns a row: lane l reads classes l, l + 8, ... (each load of the
// cluster is 8 consecutive words), keeps its own max and compensated sum, and the cluster combines
// them with a butterfly of shuffles (xor 4, 2, 1). 64 invocations: 8 rows per workgroup.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

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
  uint inner;     // 1 in the subgroup variant
  uint mode;
} pc;

#if SUBGROUP
// Every loop over a row's classes runs to the same bound on all lanes of its cluster (loads and
// stores are guarded instead), so the whole cluster reaches each shuffle together.
#define ROWS_PER_GROUP 8u  // 64 invocations / CLUSTER
#include "cluster_rows.glsl"

// The row max with the CPU's NaN rule (it starts from the first class): NaN exactly when the first
// class is, other NaNs skipped.
float row_max(uint base, uint lane) {
  float best = cluster_max(lane_max(base)), first = TO_F32(x[base]);
  return isnan(first) ? first : best;
}

// sum(dy) for log_softmax_grad, sum(dy y) for softmax_grad.
float row_dot(uint base, uint lane, bool log_output) {
  float sum = 0.0, carry = 0.0;
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER) {
    uint at = base + c0 + lane;
    if (c0 + lane < pc.classes)
      kahan_add(sum, carry, log_output ? TO_F32(dy[at]) : TO_F32(dy[at]) * TO_F32(x[at]));
  }
  return cluster_sum(sum, carry);
}

void gradient_row(uint base, uint lane) {
  bool log_output = pc.mode == LOG_SOFTMAX_GRAD;
  float total = row_dot(base, lane, log_output);
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER) {
    uint at = base + c0 + lane;
    if (c0 + lane < pc.classes) {
      float y = TO_F32(x[at]), g = TO_F32(dy[at]);
      out_data[at] = FROM_F32(log_output ? g - exp(y) * total : y * (g - total));
    }
  }
}

void forward_row(uint base, uint lane) {
  float best = row_max(base, lane), sum = row_sum_of_exps(base, best);
  float log_sum = log(sum);
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER) {
    uint at = base + c0 + lane;
    if (c0 + lane < pc.classes) {
      float v = TO_F32(x[at]);
      out_data[at] = FROM_F32(pc.mode == LOG_SOFTMAX ? (v - best) - log_sum : exp(v - best) / sum);
    }
  }
}

void main() {
  uint lane = cluster_lane(), cluster = cluster_number();
  // The loop is workgroup-uniform and the row test cluster-uniform: shuffles see whole clusters.
  uint stride = gl_NumWorkGroups.x * ROWS_PER_GROUP;
  for (uint first = gl_WorkGroupID.x * ROWS_PER_GROUP; first < pc.lines; first += stride) {
    uint row = first + cluster;
    if (row < pc.lines && pc.classes > 0u) {
      if (pc.mode == SOFTMAX_GRAD || pc.mode == LOG_SOFTMAX_GRAD)
        gradient_row(row * pc.classes, lane);
      else
        forward_row(row * pc.classes, lane);
    }
  }
}
#else
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
#endif
