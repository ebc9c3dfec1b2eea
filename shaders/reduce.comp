#version 450
// Reductions over axes (kernels/cpu/reduce.c): sum, mean, max, sum_to, max_grad, and one input's
// share of global_norm_sq.
//
// The host collapses x's axes into at most 4 kept and 4 reduced runs; output o's elements are
// x[base(o) + offset(j)] for j in [0, group). Either each invocation owns outputs and walks their
// groups serially (per_thread: many short groups), or a workgroup owns neighbouring outputs and
// splits their groups between lanes (columns: many long groups, e.g. a bias gradient), or a
// workgroup owns an output and reduces a tree in shared memory (few, long groups). Long columns of
// sums are split (core/workspace.h, tf_vulkan_reduce_chunk_rows): SPLIT_PARTIALS, a workgroup per
// (64 outputs, chunk of their groups), writes f32 partials to the workspace; SPLIT_COMBINE adds
// each output's partials in chunk order. Sums are compensated (Kahan). Every order is fixed, so
// results do not depend on scheduling.
#extension GL_GOOGLE_include_directive : require
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Yin { ELEMENT y_in[]; };   // max_grad: max(x)
layout(std430, set = 0, binding = 2) readonly buffer DY { ELEMENT dy[]; };      // max_grad: dy
layout(std430, set = 0, binding = 3) buffer Out { ELEMENT out_data[]; };
#if SPLIT // reduce_split: the split's two passes only; the partials [chunk][output]
layout(std430, set = 0, binding = 4) buffer Partials { float partials[]; };
#endif

#define SUM 0
#define MAX 1
#define MAX_GRAD 2
#define NORM_SQ 3

layout(push_constant) uniform Push {
  uint outputs;
  uint group;
  uint mode;
  uint per_thread;
  uint n_kept;
  uint n_reduced;
  float divisor;    // mean: the group size; else 1
  uint accumulate;  // NORM_SQ: add to out[0] (every input of global_norm_sq after the first)
  uint kept_shape[4];
  uint kept_stride[4];
  uint reduced_shape[4];
  uint reduced_stride[4];
  uint chunk_rows; // split: a chunk's elements of each group
  uint chunks;
} pc;

shared float partial[256];
shared uint tally[256];

uint base_of(uint o) {
  uint offset = 0;
  for (int d = int(pc.n_kept) - 1; d >= 0; d--) {
    offset += (o % pc.kept_shape[d]) * pc.kept_stride[d];
    o /= pc.kept_shape[d];
  }
  return offset;
}

uint offset_of(uint j) {
  if (pc.n_reduced == 1u)
    return j * pc.reduced_stride[0]; // one reduced run (a bias gradient's rows): no division
  uint offset = 0;
  for (int d = int(pc.n_reduced) - 1; d >= 0; d--) {
    offset += (j % pc.reduced_shape[d]) * pc.reduced_stride[d];
    j /= pc.reduced_shape[d];
  }
  return offset;
}

// NaN wins, as in torch.amax.
float max_of(float best, float value) { return (value > best || isnan(value)) ? value : best; }
bool is_maximum(float value, float best) { return value == best || (isnan(value) && isnan(best)); }

// This invocation's part of output o's group: elements first, first + step, ... before end.
float walk_to(uint base, uint first, uint end, uint step) {
  if (pc.mode == MAX) {
    float best = -1.0 / 0.0;
    for (uint j = first; j < end; j += step)
      best = max_of(best, TO_F32(x[base + offset_of(j)]));
    return best;
  }
  float sum = 0.0, carry = 0.0;
  for (uint j = first; j < end; j += step) {
    float v = TO_F32(x[base + offset_of(j)]);
    kahan_add(sum, carry, pc.mode == NORM_SQ ? v * v : v);
  }
  return sum;
}

float walk(uint base, uint first, uint step) { return walk_to(base, first, pc.group, step); }

#if SUBGROUP
// The subgroup variant: each subgroup reduces its lanes (subgroupAdd / subgroupMax, NaN counted
// apart because subgroupMax need not propagate it), then every invocation combines the subgroups'
// partials in subgroup order: one barrier instead of eight, and still a fixed order on a device.
float tree(float value) {
  float reduced;
  if (pc.mode == MAX) {
    uint nans = subgroupAdd(isnan(value) ? 1u : 0u);
    reduced = nans > 0u ? uintBitsToFloat(0x7fc00000u) : subgroupMax(value);
  } else {
    reduced = subgroupAdd(value);
  }
  if (subgroupElect())
    partial[gl_SubgroupID] = reduced;
  barrier();
  float result = partial[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++)
    result = pc.mode == MAX ? max_of(result, partial[i]) : result + partial[i];
  barrier();
  return result;
}

uint tree_count(uint value) {
  uint reduced = subgroupAdd(value);
  if (subgroupElect())
    tally[gl_SubgroupID] = reduced;
  barrier();
  uint result = 0u;
  for (uint i = 0u; i < gl_NumSubgroups; i++)
    result += tally[i];
  barrier();
  return result;
}
#else
float tree(float value) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] = pc.mode == MAX ? max_of(partial[t], partial[t + s]) : partial[t] + partial[t + s];
    barrier();
  }
  float result = partial[0];
  barrier();
  return result;
}

uint tree_count(uint value) {
  uint t = gl_LocalInvocationID.x;
  tally[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      tally[t] += tally[t + s];
    barrier();
  }
  uint result = tally[0];
  barrier();
  return result;
}
#endif

void finish(uint o, float value) {
  if (pc.mode == NORM_SQ)
    out_data[0] = FROM_F32((pc.accumulate != 0u ? TO_F32(out_data[0]) : 0.0) + value);
  else
    out_data[o] = FROM_F32(pc.mode == SUM ? value / pc.divisor : value);
}

// dx = dy / (number of maxima) at every maximum of the group, 0 elsewhere (workgroup per output).
void max_grad(uint o) {
  uint base = base_of(o), t = gl_LocalInvocationID.x;
  float best = TO_F32(y_in[o]);
  uint mine = 0u;
  for (uint j = t; j < pc.group; j += 256u)
    mine += is_maximum(TO_F32(x[base + offset_of(j)]), best) ? 1u : 0u;
  uint maxima = tree_count(mine);
  float share = maxima > 0u ? TO_F32(dy[o]) / float(maxima) : 0.0;
  for (uint j = t; j < pc.group; j += 256u) {
    uint at = base + offset_of(j);
    out_data[at] = FROM_F32(is_maximum(TO_F32(x[at]), best) ? share : 0.0);
  }
}

// The same by one invocation per output (short groups: Clip's and Max's stacks of 2).
void max_grad_alone(uint o) {
  uint base = base_of(o);
  float best = TO_F32(y_in[o]);
  uint maxima = 0u;
  for (uint j = 0u; j < pc.group; j++)
    maxima += is_maximum(TO_F32(x[base + offset_of(j)]), best) ? 1u : 0u;
  float share = maxima > 0u ? TO_F32(dy[o]) / float(maxima) : 0.0;
  for (uint j = 0u; j < pc.group; j++) {
    uint at = base + offset_of(j);
    out_data[at] = FROM_F32(is_maximum(TO_F32(x[at]), best) ? share : 0.0);
  }
}

// Many outputs with long groups (a bias gradient: 768 columns over 8,192 rows): a workgroup owns
// COLUMNS neighbouring outputs, LANES invocations each walk every LANES-th element of one output's
// group, and the lanes' partials are added in lane order: 16 times the invocations of one per output
// (whose serial walks took 8 ms a bias gradient on an H100), still a fixed order.
#define COLUMNS 16u
#define LANES 16u // COLUMNS x LANES = the workgroup
void columns() {
  uint t = gl_LocalInvocationID.x, c = t % COLUMNS, lane = t / COLUMNS;
  for (uint first = gl_WorkGroupID.x * COLUMNS; first < pc.outputs; first += gl_NumWorkGroups.x * COLUMNS) {
    uint o = first + c;
    partial[t] = o < pc.outputs ? walk(base_of(o), lane, LANES) : 0.0;
    barrier();
    if (lane == 0u && o < pc.outputs) {
      float result = partial[c];
      for (uint i = 1u; i < LANES; i++)
        result = pc.mode == MAX ? max_of(result, partial[c + i * COLUMNS]) : result + partial[c + i * COLUMNS];
      finish(o, result);
    }
    barrier();
  }
}

#if SPLIT
// SPLIT_PARTIALS (sums only): workgroup (x, y) owns outputs [64x, 64x + 64) and elements
// [y chunk_rows, (y + 1) chunk_rows) of their groups; SPLIT_LANES invocations each walk every
// SPLIT_LANES-th element of one output's chunk, added in lane order into partials[y][o].
#define SPLIT_COLUMNS 64u
#define SPLIT_LANES 4u // SPLIT_COLUMNS x SPLIT_LANES = the workgroup
void split_partials() {
  uint t = gl_LocalInvocationID.x, c = t % SPLIT_COLUMNS, lane = t / SPLIT_COLUMNS;
  uint o = gl_WorkGroupID.x * SPLIT_COLUMNS + c, first = gl_WorkGroupID.y * pc.chunk_rows;
  uint end = min(first + pc.chunk_rows, pc.group);
  partial[t] = o < pc.outputs ? walk_to(base_of(o), first + lane, end, SPLIT_LANES) : 0.0;
  barrier();
  if (lane == 0u && o < pc.outputs) {
    float sum = partial[c];
    for (uint i = 1u; i < SPLIT_LANES; i++)
      sum += partial[c + i * SPLIT_COLUMNS];
    partials[gl_WorkGroupID.y * pc.outputs + o] = sum;
  }
}

// SPLIT_COMBINE: an invocation per output adds its chunks' partials in chunk order.
void split_combine() {
  for (uint o = gl_GlobalInvocationID.x; o < pc.outputs; o += grid_size()) {
    float sum = 0.0, carry = 0.0;
    for (uint k = 0u; k < pc.chunks; k++)
      kahan_add(sum, carry, partials[k * pc.outputs + o]);
    finish(o, sum);
  }
}

#define SPLIT_PARTIALS 3u

// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  if (pc.per_thread == SPLIT_PARTIALS)
    split_partials();
  else
    split_combine();
}
#else
// No early return from main in shaders with barriers (lavapipe leaks a coroutine frame then).
void main() {
  if (pc.per_thread == 2u) {
    columns();
  } else if (pc.per_thread != 0u) {
    for (uint o = gl_GlobalInvocationID.x; o < pc.outputs; o += grid_size())
      if (pc.mode == MAX_GRAD)
        max_grad_alone(o);
      else
        finish(o, walk(base_of(o), 0u, 1u));
  } else {
    for (uint o = gl_WorkGroupID.x; o < pc.outputs; o += gl_NumWorkGroups.x) {
      if (pc.mode == MAX_GRAD) {
        max_grad(o);
        continue;
      }
      float value = tree(walk(base_of(o), gl_LocalInvocationID.x, 256u));
      if (gl_LocalInvocationID.x == 0u)
        finish(o, value);
    }
  }
}
#endif
