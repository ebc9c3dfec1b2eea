#version 450
// Fused scaled-dot-product attention and its gradient (kernels/cpu/attention.c): q [N, Tq, H*D],
// k and v [N, Tk, H*D]; causal: key j is visible to query i when j <= i. Nothing [Tq, Tk] is stored.
//
// FORWARD: an invocation per (n, h, query row) streams the keys with an online softmax.
// The gradient, with P = softmax(scale q k^T), dP = dO v^T, delta_i = sum_j P_ij dP_ij,
// dS = P (dP - delta): STATS writes each query row's (max, sum, delta) into the first three floats
// of its head's slice of dq (no workspace); KV, an invocation per (n, h, key row), sums
// dk_j = scale sum_i dS_ij q_i and dv_j = sum_i P_ij dO_i; Q overwrites dq with scale sum_j dS_ij k_j.
// Heads narrower than 3 recompute the statistics instead. Head width D <= 128.
// Later: a workgroup per block of query rows with K/V tiles in shared memory (flash-attention).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define MAX_DEPTH 128

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { ELEMENT q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { ELEMENT k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { ELEMENT v[]; };
layout(std430, set = 0, binding = 3) readonly buffer DO { ELEMENT d_out[]; };
layout(std430, set = 0, binding = 4) buffer Out { ELEMENT out_data[]; };      // y, or dq
layout(std430, set = 0, binding = 5) writeonly buffer DK { ELEMENT dk[]; };
layout(std430, set = 0, binding = 6) writeonly buffer DV { ELEMENT dv[]; };

#define FORWARD 0
#define STATS 1
#define KV 2
#define QUERY 3

layout(push_constant) uniform Push {
  uint batch, queries, keys, heads, depth, width;
  float scale;
  uint causal;
  uint mode;
  uint keep;      // gradient: statistics kept in dq
} pc;

uint q_at(uint n, uint i, uint h) { return (n * pc.queries + i) * pc.width + h * pc.depth; }
uint k_at(uint n, uint j, uint h) { return (n * pc.keys + j) * pc.width + h * pc.depth; }
uint visible(uint i) { return pc.causal != 0u ? min(i + 1u, pc.keys) : pc.keys; }

float score(uint qi, uint kj) {
  float s = 0.0;
  for (uint d = 0u; d < pc.depth; d++)
    s += TO_F32(q[qi + d]) * TO_F32(k[kj + d]);
  return pc.scale * s;
}

float dot_do_v(uint qi, uint kj) {
  float s = 0.0;
  for (uint d = 0u; d < pc.depth; d++)
    s += TO_F32(d_out[qi + d]) * TO_F32(v[kj + d]);
  return s;
}

// (max, sum of exp(s - max), delta) of query row i.
vec3 statistics(uint n, uint h, uint i) {
  uint qi = q_at(n, i, h), last = visible(i);
  float best = -1.0 / 0.0, sum = 0.0;
  for (uint j = 0u; j < last; j++) {
    float s = score(qi, k_at(n, j, h));
    if (s > best) {
      sum *= exp(best - s);
      best = s;
    }
    sum += exp(s - best);
  }
  float delta = 0.0, carry = 0.0;
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    kahan_add(delta, carry, exp(score(qi, kj) - best) / sum * dot_do_v(qi, kj));
  }
  return vec3(best, sum, delta);
}

vec3 kept(uint n, uint h, uint i) {
  if (pc.keep == 0u)
    return statistics(n, h, i);
  uint at = q_at(n, i, h);
  return vec3(TO_F32(out_data[at]), TO_F32(out_data[at + 1u]), TO_F32(out_data[at + 2u]));
}

void forward(uint n, uint h, uint i) {
  float query[MAX_DEPTH], acc[MAX_DEPTH];
  uint qi = q_at(n, i, h), last = visible(i);
  for (uint d = 0u; d < pc.depth; d++) {
    query[d] = TO_F32(q[qi + d]);
    acc[d] = 0.0;
  }
  float best = -1.0 / 0.0, sum = 0.0;
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    float s = 0.0;
    for (uint d = 0u; d < pc.depth; d++)
      s += query[d] * TO_F32(k[kj + d]);
    s *= pc.scale;
    if (s > best) {
      float correction = exp(best - s);
      sum *= correction;
      for (uint d = 0u; d < pc.depth; d++)
        acc[d] *= correction;
      best = s;
    }
    float p = exp(s - best);
    sum += p;
    for (uint d = 0u; d < pc.depth; d++)
      acc[d] += p * TO_F32(v[kj + d]);
  }
  float inverse = sum > 0.0 ? 1.0 / sum : 0.0;
  for (uint d = 0u; d < pc.depth; d++)
    out_data[qi + d] = FROM_F32(acc[d] * inverse);
}

void key_gradients(uint n, uint h, uint j) {
  float gk[MAX_DEPTH], gv[MAX_DEPTH];
  for (uint d = 0u; d < pc.depth; d++)
    gk[d] = gv[d] = 0.0;
  uint kj = k_at(n, j, h);
  for (uint i = pc.causal != 0u ? j : 0u; i < pc.queries; i++) {
    uint qi = q_at(n, i, h);
    vec3 s = kept(n, h, i);
    float p = exp(score(qi, kj) - s.x) / s.y;
    float ds = p * (dot_do_v(qi, kj) - s.z);
    for (uint d = 0u; d < pc.depth; d++) {
      gk[d] += pc.scale * ds * TO_F32(q[qi + d]);
      gv[d] += p * TO_F32(d_out[qi + d]);
    }
  }
  for (uint d = 0u; d < pc.depth; d++) {
    dk[kj + d] = FROM_F32(gk[d]);
    dv[kj + d] = FROM_F32(gv[d]);
  }
}

void query_gradient(uint n, uint h, uint i) {
  float acc[MAX_DEPTH];
  for (uint d = 0u; d < pc.depth; d++)
    acc[d] = 0.0;
  uint qi = q_at(n, i, h), last = visible(i);
  vec3 s = kept(n, h, i);
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    float p = exp(score(qi, kj) - s.x) / s.y;
    float ds = pc.scale * p * (dot_do_v(qi, kj) - s.z);
    for (uint d = 0u; d < pc.depth; d++)
      acc[d] += ds * TO_F32(k[kj + d]);
  }
  for (uint d = 0u; d < pc.depth; d++)
    out_data[qi + d] = FROM_F32(acc[d]);
}

void main() {
  uint rows = pc.mode == KV ? pc.keys : pc.queries;
  uint items = pc.batch * pc.heads * rows;
  for (uint item = gl_GlobalInvocationID.x; item < items; item += grid_size()) {
    uint row = item % rows, h = (item / rows) % pc.heads, n = item / (rows * pc.heads);
    if (pc.mode == FORWARD) {
      forward(n, h, row);
    } else if (pc.mode == STATS) {
      vec3 s = statistics(n, h, row);
      uint at = q_at(n, row, h);
      out_data[at] = FROM_F32(s.x);
      out_data[at + 1u] = FROM_F32(s.y);
      out_data[at + 2u] = FROM_F32(s.z);
    } else if (pc.mode == KV) {
      key_gradients(n, h, row);
    } else {
      query_gradient(n, h, row);
    }
  }
}
