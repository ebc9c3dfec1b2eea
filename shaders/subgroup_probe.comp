#version 450
// The subgroup variants' contract checked on the device (backends/vulkan/vk_subgroup_probe.c runs it
// once per session, into the 64 words of the run-state buffer; 64 invocations as matmul.comp's
// workgroup). Invocation i writes one word: its cluster number and lane (cluster.glsl) as
// 8 * cluster + lane in bits 0..7, and bit 8 when every exchange it makes stays in its cluster and
// names the lane it should (lane 5's value through cluster_read_bits, the partners of
// subgroupShuffleXor by 1, 2 and 4), subgroupAdd(1) counts gl_SubgroupSize lanes, and that size is a
// power of two of at least 8. The host checks that all 64 words have bit 8 and name 64 distinct
// (cluster, lane) pairs; a driver that breaks it (Mesa 22.3's lavapipe at LP_NATIVE_VECTOR_WIDTH=1024
// reports subgroups of 32 but runs them 16 wide) gets the plain shaders.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "cluster.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { uint words[]; };

void main() {
  // Every exchange runs on every lane (no short-circuit around a subgroup operation).
  uint cluster = cluster_number(), lane = cluster_lane(), me = 8u * cluster + lane;
  uint read5 = cluster_read_bits(me, 5u);
  uint xor1 = subgroupShuffleXor(me, 1u), xor2 = subgroupShuffleXor(me, 2u), xor4 = subgroupShuffleXor(me, 4u);
  uint lanes = subgroupAdd(1u);
  bool ok = cluster < 8u && gl_SubgroupSize >= 8u && (gl_SubgroupSize & (gl_SubgroupSize - 1u)) == 0u;
  ok = ok && read5 == 8u * cluster + 5u && xor1 == (me ^ 1u) && xor2 == (me ^ 2u) && xor4 == (me ^ 4u);
  ok = ok && lanes == gl_SubgroupSize;
  words[gl_LocalInvocationIndex] = (me & 255u) | (ok ? 256u : 0u);
}
