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
// The scores and dO . v are `precise` (no FMA contraction): each pass recomputes them and must get
// the bits the statistics were taken from. NVIDIA's compiler fused `scale * s - max` into one FMA
// where the score met the row's maximum, so a query row with one visible key got P = exp(ulp)
// and dS of an ulp instead of 0, which AdamW turned into a step of lr (test_vulkan_ops with no
// subgroups on the H200, 2026-11-27: 237x the tolerance; precise dot sums alone did not fix it).
//
// The subgroup variant (-DSUBGROUP=1) gives each row to a cluster of 8 consecutive subgroup lanes
// (shaders/cluster.glsl) instead of one invocation: lane l owns the head-width elements
// d = l, l + 8, ... (each load of the cluster is 8 consecutive words), a dot product is the lanes'
// partial sums added by a butterfly of shuffles (xor 4, 2, 1), and every lane then holds the same
// score and runs the same online softmax, so the walks over keys (queries) and their sums over
// keys are the plain shader's, done by all 8 lanes at once. A lane's loops over the head width run
// ceil(depth / 8) times: 8x fewer loop iterations per invocation (lavapipe's limit), 8 lanes per row.
// 64 invocations: 8 rows per workgroup.
// -DINPUT_F16 / -DINPUT_BF16 (the gradient only): q, k and v stored in that half type, dy and the
// gradients f32 (common.glsl, IN_ELEMENT): a --precision plan's backward reads the q, k, v it stored
// in half without f32 copies, computing the f32 shader's bits.
// attention_tiled.comp computes the same passes in tiles through shared memory (a workgroup per
// block of 16 rows, flash-attention style); the lowering (backends/vulkan/vk_lower_attention.c)
// picks it for heads of 8 to 128 where the device's shared memory holds the tiles, and this shader
// otherwise or under TIGHTFIT_VULKAN_TILED_ATTENTION=0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

#define MAX_DEPTH 128

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { IN_ELEMENT q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { IN_ELEMENT k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { IN_ELEMENT v[]; };
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

#if SUBGROUP
#include "cluster.glsl"
#define ROWS_PER_GROUP 8u // 64 invocations / CLUSTER
#define SHARE (MAX_DEPTH / 8) // the most head-width elements a lane owns

// Every loop over a lane's share runs to the same bound on all lanes (parts() = ceil(depth / 8))
// and guards its loads and stores with d < depth, so the whole cluster reaches each shuffle, and
// a lane's registers past the head hold zeros.
uint parts() { return (pc.depth + CLUSTER - 1u) / CLUSTER; }

float score(uint qi, uint kj, uint lane) {
  precise float s = 0.0;
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
    if (d < pc.depth)
      s += IN_TO_F32(q[qi + d]) * IN_TO_F32(k[kj + d]);
  precise float scaled = pc.scale * cluster_add(s);
  return scaled;
}

// (score, dO . v) of query qi and key kj in one walk over the lane's share.
vec2 scores(uint qi, uint kj, uint lane) {
  precise float s = 0.0, g = 0.0;
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER) {
    if (d < pc.depth) {
      s += IN_TO_F32(q[qi + d]) * IN_TO_F32(k[kj + d]);
      g += TO_F32(d_out[qi + d]) * IN_TO_F32(v[kj + d]);
    }
  }
  precise float scaled = pc.scale * cluster_add(s);
  return vec2(scaled, cluster_add(g));
}

// (max, sum of exp(s - max), delta) of query row i, the same on every lane of the cluster.
vec3 statistics(uint n, uint h, uint i, uint lane) {
  uint qi = q_at(n, i, h), last = visible(i);
  float best = -1.0 / 0.0, sum = 0.0;
  for (uint j = 0u; j < last; j++) {
    float s = score(qi, k_at(n, j, h), lane);
    if (s > best) {
      sum *= exp(best - s);
      best = s;
    }
    sum += exp(s - best);
  }
  float delta = 0.0, carry = 0.0;
  for (uint j = 0u; j < last; j++) {
    vec2 s = scores(qi, k_at(n, j, h), lane);
    kahan_add(delta, carry, exp(s.x - best) / sum * s.y);
  }
  return vec3(best, sum, delta);
}

// The statistics kept in dq's first three f32s of row i (STAT_ELEMENTS elements each): lane
// l < 3 x STAT_ELEMENTS reads element l, which is in its own share (depth >= 3 x STAT_ELEMENTS when
// kept), and the cluster shares them by shuffles of their bits. No lane reads an element another
// lane of the row overwrites in the QUERY pass.
#if !STAT_SPLIT
float kept_stat(uint mine, uint k) { return uintBitsToFloat(cluster_read_bits(mine, k)); }
#else
float kept_stat(uint mine, uint k) {
  return uintBitsToFloat(cluster_read_bits(mine, 2u * k) | (cluster_read_bits(mine, 2u * k + 1u) << 16));
}
#endif

vec3 kept(uint n, uint h, uint i, uint lane) {
  if (pc.keep == 0u)
    return statistics(n, h, i, lane);
#if !STAT_SPLIT
  uint mine = lane < 3u ? floatBitsToUint(out_data[q_at(n, i, h) + lane]) : 0u;
#else
  uint mine = lane < 6u ? uint(out_data[q_at(n, i, h) + lane]) : 0u;
#endif
  return vec3(kept_stat(mine, 0u), kept_stat(mine, 1u), kept_stat(mine, 2u));
}

void forward(uint n, uint h, uint i, uint lane) {
  float query[SHARE], acc[SHARE];
  uint qi = q_at(n, i, h), last = visible(i);
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER) {
    query[e] = d < pc.depth ? IN_TO_F32(q[qi + d]) : 0.0;
    acc[e] = 0.0;
  }
  float best = -1.0 / 0.0, sum = 0.0;
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    float s = 0.0;
    for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
      if (d < pc.depth)
        s += query[e] * IN_TO_F32(k[kj + d]);
    s = pc.scale * cluster_add(s);
    if (s > best) { // cluster-uniform: every lane holds the same s
      float correction = exp(best - s);
      sum *= correction;
      for (uint e = 0u; e < parts(); e++)
        acc[e] *= correction;
      best = s;
    }
    float p = exp(s - best);
    sum += p;
    for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
      if (d < pc.depth)
        acc[e] += p * IN_TO_F32(v[kj + d]);
  }
  float inverse = sum > 0.0 ? 1.0 / sum : 0.0;
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
    if (d < pc.depth)
      out_data[qi + d] = FROM_F32(acc[e] * inverse);
}

void key_gradients(uint n, uint h, uint j, uint lane) {
  float gk[SHARE], gv[SHARE];
  for (uint e = 0u; e < parts(); e++)
    gk[e] = gv[e] = 0.0;
  uint kj = k_at(n, j, h);
  for (uint i = pc.causal != 0u ? j : 0u; i < pc.queries; i++) {
    uint qi = q_at(n, i, h);
    vec3 s = kept(n, h, i, lane);
    vec2 sg = scores(qi, kj, lane);
    float p = exp(sg.x - s.x) / s.y;
    float ds = p * (sg.y - s.z);
    for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER) {
      if (d < pc.depth) {
        gk[e] += pc.scale * ds * IN_TO_F32(q[qi + d]);
        gv[e] += p * TO_F32(d_out[qi + d]);
      }
    }
  }
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER) {
    if (d < pc.depth) {
      dk[kj + d] = FROM_F32(gk[e]);
      dv[kj + d] = FROM_F32(gv[e]);
    }
  }
}

void query_gradient(uint n, uint h, uint i, uint lane) {
  float acc[SHARE];
  for (uint e = 0u; e < parts(); e++)
    acc[e] = 0.0;
  uint qi = q_at(n, i, h), last = visible(i);
  vec3 s = kept(n, h, i, lane);
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    vec2 sg = scores(qi, kj, lane);
    float p = exp(sg.x - s.x) / s.y;
    float ds = pc.scale * p * (sg.y - s.z);
    for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
      if (d < pc.depth)
        acc[e] += ds * IN_TO_F32(k[kj + d]);
  }
  for (uint e = 0u, d = lane; e < parts(); e++, d += CLUSTER)
    if (d < pc.depth)
      out_data[qi + d] = FROM_F32(acc[e]);
}

void main() {
  uint lane = cluster_lane(), cluster = cluster_number();
  uint rows = pc.mode == KV ? pc.keys : pc.queries;
  uint items = pc.batch * pc.heads * rows;
  // The loop is workgroup-uniform and the item test cluster-uniform: shuffles see whole clusters.
  uint stride = gl_NumWorkGroups.x * ROWS_PER_GROUP;
  for (uint first = gl_WorkGroupID.x * ROWS_PER_GROUP; first < items; first += stride) {
    uint item = first + cluster;
    if (item >= items)
      continue;
    uint row = item % rows, h = (item / rows) % pc.heads, n = item / (rows * pc.heads);
    if (pc.mode == FORWARD) {
      forward(n, h, row, lane);
    } else if (pc.mode == STATS) {
      vec3 s = statistics(n, h, row, lane);
      // lane l writes element l, in its own share (see kept()): the whole f32 of statistic l, or
      // its low (l even) or high half
      uint k = lane / STAT_ELEMENTS, bits = floatBitsToUint(k == 0u ? s.x : k == 1u ? s.y : s.z);
#if !STAT_SPLIT
      if (lane < 3u)
        out_data[q_at(n, row, h) + lane] = uintBitsToFloat(bits);
#else
      if (lane < 6u)
        out_data[q_at(n, row, h) + lane] = uint16_t((lane & 1u) != 0u ? bits >> 16 : bits & 0xFFFFu);
#endif
    } else if (pc.mode == KV) {
      key_gradients(n, h, row, lane);
    } else {
      query_gradient(n, h, row, lane);
    }
  }
}
#else

float score(uint qi, uint kj) {
  precise float s = 0.0;
  for (uint d = 0u; d < pc.depth; d++)
    s += IN_TO_F32(q[qi + d]) * IN_TO_F32(k[kj + d]);
  s *= pc.scale;
  return s;
}

float dot_do_v(uint qi, uint kj) {
  precise float s = 0.0;
  for (uint d = 0u; d < pc.depth; d++)
    s += TO_F32(d_out[qi + d]) * IN_TO_F32(v[kj + d]);
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
  return vec3(LOAD_STAT(out_data, at), LOAD_STAT(out_data, at + STAT_ELEMENTS),
              LOAD_STAT(out_data, at + 2u * STAT_ELEMENTS));
}

void forward(uint n, uint h, uint i) {
  float query[MAX_DEPTH], acc[MAX_DEPTH];
  uint qi = q_at(n, i, h), last = visible(i);
  for (uint d = 0u; d < pc.depth; d++) {
    query[d] = IN_TO_F32(q[qi + d]);
    acc[d] = 0.0;
  }
  float best = -1.0 / 0.0, sum = 0.0;
  for (uint j = 0u; j < last; j++) {
    uint kj = k_at(n, j, h);
    float s = 0.0;
    for (uint d = 0u; d < pc.depth; d++)
      s += query[d] * IN_TO_F32(k[kj + d]);
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
      acc[d] += p * IN_TO_F32(v[kj + d]);
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
      gk[d] += pc.scale * ds * IN_TO_F32(q[qi + d]);
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
      acc[d] += ds * IN_TO_F32(k[kj + d]);
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
      STORE_STAT(out_data, at, s.x);
      STORE_STAT(out_data, at + STAT_ELEMENTS, s.y);
      STORE_STAT(out_data, at + 2u * STAT_ELEMENTS, s.z);
    } else if (pc.mode == KV) {
      key_gradients(n, h, row);
    } else {
      query_gradient(n, h, row);
    }
  }
}
#endif
