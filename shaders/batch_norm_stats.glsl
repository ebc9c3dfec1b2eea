// What batch_norm.comp and batch_norm_running.comp share: how the channels are covered, the
// fixed-order sums, and the channel's statistics, taken the same way by the forward, the gradient
// and the running statistics' update, so all three see the same bits.
//
// x [N, C, S...] is viewed as [N, C, S]: channel c's M = N x S elements i = n S + s sit at
// (n C + c) S + s. The channels are covered one of two ways, which the lowering chooses from M for
// all three shaders alike (pc.alone; backends/vulkan/vk_lower_batch_norm.c):
//   - a workgroup per channel (alone 0): its invocations walk the elements WG apart, each summing
//     its share compensated, and the shares are combined by a tree (fixed order);
//   - an invocation per channel (alone 1: channels of a few elements, where a workgroup would
//     idle, and lavapipe would run tens of thousands of workgroups with barriers): it walks its
//     channel in order, compensated, alone; no trees and no barriers.
// Both grid-stride past the dispatch's 65,535 workgroups.
//
// The includer declares, before including this (after common.glsl, with the subgroup extensions
// when SUBGROUP is set): the binding `x` (ELEMENT x[]) and a push constant block `pc` with
// `uint channels` (C), `uint spatial` (S: 1 for rank 2) and `uint alone`.

#define WG 256u // a channel usually holds thousands of elements (a batch of images)
layout(local_size_x = 256) in;

// Two sums reduced at once: the gradient's dy and dy xhat share one tree.
shared vec2 partial[WG];

#if SUBGROUP
// subgroupAdd within each subgroup, then the subgroups' partials added in subgroup order by every
// invocation: one barrier instead of eight, a fixed order on a device (as norm.comp).
vec2 tree(vec2 value) {
  vec2 reduced = subgroupAdd(value);
  if (subgroupElect())
    partial[gl_SubgroupID] = reduced;
  barrier();
  vec2 result = partial[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++)
    result += partial[i];
  barrier();
  return result;
}
#else
vec2 tree(vec2 value) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  vec2 result = partial[0];
  barrier(); // the next tree overwrites partial[0]
  return result;
}
#endif

bool alone() { return pc.alone != 0u; }

// The channels of this invocation: from first_channel(), channel_stride() apart.
uint first_channel() { return alone() ? gl_GlobalInvocationID.x : gl_WorkGroupID.x; }
uint channel_stride() { return alone() ? grid_size() : gl_NumWorkGroups.x; }

// The elements of its channel an invocation walks: from walk_first(), walk_stride() apart.
uint walk_first() { return alone() ? 0u : gl_LocalInvocationID.x; }
uint walk_stride() { return alone() ? 1u : WG; }

// Each invocation's sums combined into the channel's (by every invocation of a workgroup at once).
vec2 combine(vec2 value) {
  if (alone())
    return value;
  return tree(value);
}

// Whether this invocation writes its channel's own values (dgamma, dbeta; the running statistics).
bool writes_channel() { return alone() || gl_LocalInvocationID.x == 0u; }

// Where element i of channel c lies in x (and in dy, y and dx, of x's shape).
uint at(uint c, uint i) {
  uint n = i / pc.spatial;
  return (n * pc.channels + c) * pc.spatial + (i - n * pc.spatial);
}

// (mean, biased variance) of channel c's `count` elements: the mean, then the centred squares,
// each sum compensated, then combined.
vec2 channel_moments(uint c, uint count) {
  uint first = walk_first(), stride = walk_stride();
  float sum = 0.0, carry = 0.0;
  for (uint i = first; i < count; i += stride)
    kahan_add(sum, carry, TO_F32(x[at(c, i)]));
  float mean = combine(vec2(sum, 0.0)).x / float(count);
  float squares = 0.0;
  carry = 0.0;
  for (uint i = first; i < count; i += stride) {
    float centred = TO_F32(x[at(c, i)]) - mean;
    kahan_add(squares, carry, centred * centred);
  }
  return vec2(mean, combine(vec2(squares, 0.0)).x / float(count));
}
