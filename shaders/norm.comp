#version 450
// layer_norm and rms_norm over the last axis and their gradients (kernels/cpu/norm.c).
//
// Forward: a workgroup per row (mean, then the centred variance, by tree sums). Backward, three
// dispatches like the CPU's phases: (1) STATS: a workgroup per row writes the row's mean and rstd
// into the first two floats of its dx row; (2) PARAMS: 8 invocations per column sum dgamma and
// dbeta over the rows, reading the kept statistics, or, where the plan gives the step its
// workspace (core/workspace.h, tf_vulkan_norm_grad_workspace_bytes), two dispatches:
// PARAM_PARTIALS, a workgroup per (64 columns, chunk of rows) writing each column's sums of the
// chunk to the workspace, and PARAM_COMBINE adding each column's partials in chunk order; (3)
// INPUT: a workgroup per row reads its statistics back, then overwrites the row with dx. Rows too
// short to keep them (layer_norm with one feature) recompute them instead.
#extension GL_GOOGLE_include_directive : require
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

#define WG 64u // rows are usually a few hundred to a few thousand features
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Gamma { ELEMENT gamma[]; };
layout(std430, set = 0, binding = 2) readonly buffer Third { ELEMENT third[]; }; // beta, or dy
layout(std430, set = 0, binding = 3) buffer Out { ELEMENT out_data[]; };         // y, or dx
layout(std430, set = 0, binding = 4) writeonly buffer DGamma { ELEMENT dgamma[]; };
layout(std430, set = 0, binding = 5) writeonly buffer DBeta { ELEMENT dbeta[]; };
#if SPLIT // norm_split: PARAM_PARTIALS and PARAM_COMBINE only; dgamma's [chunk][feature], then dbeta's
layout(std430, set = 0, binding = 6) buffer Partials { float partials[]; };
#endif

#define FORWARD 0
#define STATS 1
#define PARAMS 2
#define INPUT 3
#define PARAM_PARTIALS 4
#define PARAM_COMBINE 5

layout(push_constant) uniform Push {
  uint rows;
  uint features;
  float epsilon;
  uint mode;
  uint rms;       // rms_norm: no mean, no beta
  uint has_beta;  // forward: a beta operand; backward: a dbeta output
  uint keep;      // backward: statistics kept in dx rows
  uint chunk_rows; // the split: rows a chunk
  uint chunks;
} pc;

shared float partial[WG];

#if SUBGROUP
// The subgroup variant: subgroupAdd within each subgroup, then the subgroups' partials added in
// subgroup order by every invocation (one barrier instead of six; a fixed order on a device).
float tree(float value) {
  float reduced = subgroupAdd(value);
  if (subgroupElect())
    partial[gl_SubgroupID] = reduced;
  barrier();
  float result = partial[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++)
    result += partial[i];
  barrier();
  return result;
}
#else
float tree(float value) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  float result = partial[0];
  barrier();
  return result;
}
#endif

// (mean, rstd) of a row by the whole workgroup.
vec2 row_stats(uint base) {
  uint t = gl_LocalInvocationID.x;
  float mean = 0.0;
  if (pc.rms == 0u) {
    float sum = 0.0, carry = 0.0;
    for (uint j = t; j < pc.features; j += WG)
      kahan_add(sum, carry, TO_F32(x[base + j]));
    mean = tree(sum) / float(pc.features);
  }
  float squares = 0.0, carry = 0.0;
  for (uint j = t; j < pc.features; j += WG) {
    float centred = TO_F32(x[base + j]) - mean;
    kahan_add(squares, carry, centred * centred);
  }
  return vec2(mean, 1.0 / sqrt(tree(squares) / float(pc.features) + pc.epsilon));
}

// The same statistics by one invocation (rows too short to keep them).
vec2 row_stats_serial(uint base) {
  float mean = 0.0;
  if (pc.rms == 0u) {
    for (uint j = 0u; j < pc.features; j++)
      mean += TO_F32(x[base + j]);
    mean /= float(pc.features);
  }
  float squares = 0.0;
  for (uint j = 0u; j < pc.features; j++) {
    float centred = TO_F32(x[base + j]) - mean;
    squares += centred * centred;
  }
  return vec2(mean, 1.0 / sqrt(squares / float(pc.features) + pc.epsilon));
}

vec2 kept_stats(uint row) {
  uint base = row * pc.features;
  if (pc.rms != 0u)
    return vec2(0.0, LOAD_STAT(out_data, base));
  return vec2(LOAD_STAT(out_data, base), LOAD_STAT(out_data, base + STAT_ELEMENTS));
}

// PARAMS: a workgroup owns PARAM_COLUMNS neighbouring columns; PARAM_LANES invocations each sum
// every PARAM_LANES-th row of one column, and the lanes' partials are added in lane order (fixed,
// so the result does not depend on scheduling). An invocation per column walking every row took
// 28 ms a layer norm of gpt2-small on an H100 (8,192 rows, 768 columns on 3 workgroups).
#define PARAM_COLUMNS 8u
#define PARAM_LANES 8u // PARAM_COLUMNS x PARAM_LANES = WG
shared float partial_beta[WG];

void params() {
  uint t = gl_LocalInvocationID.x, c = t % PARAM_COLUMNS, lane = t / PARAM_COLUMNS;
  for (uint first = gl_WorkGroupID.x * PARAM_COLUMNS; first < pc.features;
       first += gl_NumWorkGroups.x * PARAM_COLUMNS) {
    uint column = first + c;
    float g_sum = 0.0, g_carry = 0.0, b_sum = 0.0, b_carry = 0.0;
    for (uint row = lane; column < pc.features && row < pc.rows; row += PARAM_LANES) {
      uint at = row * pc.features + column;
      vec2 s = pc.keep != 0u ? kept_stats(row) : row_stats_serial(row * pc.features);
      float d = TO_F32(third[at]);
      kahan_add(g_sum, g_carry, d * ((TO_F32(x[at]) - s.x) * s.y));
      kahan_add(b_sum, b_carry, d);
    }
    partial[t] = g_sum;
    partial_beta[t] = b_sum;
    barrier();
    if (lane == 0u && column < pc.features) {
      float g = partial[c], b = partial_beta[c];
      for (uint i = 1u; i < PARAM_LANES; i++) {
        g += partial[c + i * PARAM_COLUMNS];
        b += partial_beta[c + i * PARAM_COLUMNS];
      }
      dgamma[column] = FROM_F32(g);
      if (pc.has_beta != 0u)
        dbeta[column] = FROM_F32(b);
    }
    barrier();
  }
}

#if SPLIT
// PARAM_PARTIALS: workgroup (x, y) owns columns [64x, 64x + 64) and rows [y chunk_rows, ...): an
// invocation per column walks the chunk's rows in order (neighbouring invocations read neighbouring
// columns of a row).
void param_partials() {
  uint column = gl_WorkGroupID.x * WG + gl_LocalInvocationID.x, chunk = gl_WorkGroupID.y;
  uint first = chunk * pc.chunk_rows, end = column < pc.features ? min(first + pc.chunk_rows, pc.rows) : first;
  float g_sum = 0.0, g_carry = 0.0, b_sum = 0.0, b_carry = 0.0;
  for (uint row = first; row < end; row++) {
    uint at = row * pc.features + column;
    vec2 s = pc.keep != 0u ? kept_stats(row) : row_stats_serial(row * pc.features);
    float d = TO_F32(third[at]);
    kahan_add(g_sum, g_carry, d * ((TO_F32(x[at]) - s.x) * s.y));
    kahan_add(b_sum, b_carry, d);
  }
  if (column < pc.features) {
    partials[chunk * pc.features + column] = g_sum;
    partials[(pc.chunks + chunk) * pc.features + column] = b_sum;
  }
}

// PARAM_COMBINE: an invocation per column adds its chunks' partials in chunk order.
void param_combine() {
  for (uint column = gl_GlobalInvocationID.x; column < pc.features; column += grid_size()) {
    float g_sum = 0.0, g_carry = 0.0, b_sum = 0.0, b_carry = 0.0;
    for (uint k = 0u; k < pc.chunks; k++) {
      kahan_add(g_sum, g_carry, partials[k * pc.features + column]);
      kahan_add(b_sum, b_carry, partials[(pc.chunks + k) * pc.features + column]);
    }
    dgamma[column] = FROM_F32(g_sum);
    if (pc.has_beta != 0u)
      dbeta[column] = FROM_F32(b_sum);
  }
}

void main() {
  if (pc.mode == PARAM_PARTIALS)
    param_partials();
  else
    param_combine();
}
#else
void rows() {
  uint t = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    uint base = row * pc.features;
    if (pc.mode == FORWARD) {
      vec2 s = row_stats(base);
      for (uint j = t; j < pc.features; j += WG) {
        float value = (TO_F32(x[base + j]) - s.x) * s.y * TO_F32(gamma[j]);
        out_data[base + j] = FROM_F32(pc.has_beta != 0u ? value + TO_F32(third[j]) : value);
      }
    } else if (pc.mode == STATS) {
      vec2 s = row_stats(base);
      if (t == 0u) {
        if (pc.rms != 0u) {
          STORE_STAT(out_data, base, s.y);
        } else {
          STORE_STAT(out_data, base, s.x);
          STORE_STAT(out_data, base + STAT_ELEMENTS, s.y);
        }
      }
    } else {
      // Every invocation reads the statistics before the tree's barriers; only then is the row written.
      vec2 s = pc.keep != 0u ? kept_stats(row) : row_stats(base);
      float g_sum = 0.0, g_carry = 0.0, gx_sum = 0.0, gx_carry = 0.0;
      for (uint j = t; j < pc.features; j += WG) {
        float g = TO_F32(third[base + j]) * TO_F32(gamma[j]);
        kahan_add(g_sum, g_carry, g);
        kahan_add(gx_sum, gx_carry, g * ((TO_F32(x[base + j]) - s.x) * s.y));
      }
      memoryBarrierBuffer(); // with the tree's barrier: the kept statistics read before they are overwritten
      float g_mean = pc.rms != 0u ? 0.0 : tree(g_sum) / float(pc.features);
      float gx_mean = tree(gx_sum) / float(pc.features);
      for (uint j = t; j < pc.features; j += WG) {
        float xhat = (TO_F32(x[base + j]) - s.x) * s.y;
        // precise: g rounded before g_mean is taken from it, as on the CPU. NVIDIA's compiler fused
        // the product into fma(dy, gamma, -g_mean), whose kept rounding error rstd magnified: a
        // one-column row's dx came out 1.3e-5 instead of 0 (H200, 2026-11-27).
        precise float g = TO_F32(third[base + j]) * TO_F32(gamma[j]);
        out_data[base + j] = FROM_F32(s.y * (g - g_mean - xhat * gx_mean));
      }
    }
  }
}

// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  if (pc.mode == PARAMS) {
    params();
  } else {
    rows();
  }
}
#endif
