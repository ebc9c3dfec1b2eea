/* The subgroup variants' contract checked on the device itself, once per session: the cluster
 * shaders (shaders/cluster.glsl) assume that gl_SubgroupSize lanes really run together, numbered
 * 0..size-1, so that 8 consecutive lanes form a cluster. A driver can report otherwise than it runs
 * (Mesa 22.3's lavapipe at LP_NATIVE_VECTOR_WIDTH=1024 reports subgroups of 32 and runs them 16 wide:
 * the matmul, softmax, loss and attention variants then computed wrong results, 1,028 failed checks).
 * shaders/subgroup_probe.comp runs one workgroup of 64 invocations into the run-state buffer; unless
 * every invocation vouches for its exchanges and the 64 name distinct (cluster, lane) pairs, the
 * session runs the plain shaders and keeps the reason (tf_vulkan_subgroup_refusal). */
#include <stdio.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define PROBE_INVOCATIONS 64
_Static_assert(TF_VULKAN_RUN_STATE_BYTES >= PROBE_INVOCATIONS * 4,
               "the probe writes a word an invocation into the run state");

/* What the 64 words say; NULL when the contract holds, else the first fault in `why`. */
static const char *judge(const uint32_t *words, uint32_t reported, char *why, size_t size) {
  bool seen[PROBE_INVOCATIONS] = {false};
  for (int i = 0; i < PROBE_INVOCATIONS; i++) {
    const uint32_t me = words[i] & 255u;
    if (!(words[i] & 256u)) {
      snprintf(why, size,
               "the driver reports subgroups of %u, but invocation %d's exchanges left its cluster of 8 lanes",
               reported, i);
      return why;
    }
    if (me >= PROBE_INVOCATIONS || seen[me]) {
      snprintf(why, size, "the driver reports subgroups of %u, but two invocations took cluster %u lane %u", reported,
               me / 8, me % 8);
      return why;
    }
    seen[me] = true;
  }
  return NULL;
}

static tf_status dispatch(vk_state *vk, VkDescriptorSet set) {
  TF_RETURN_IF_ERROR(vk_transfer_begin(vk));
  vk->fn.CmdBindPipeline(vk->transfer, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipelines[VK_SHADER_subgroup_probe]);
  vk->fn.CmdBindDescriptorSets(vk->transfer, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline_layout, 0, 1, &set, 0, NULL);
  vk->fn.CmdDispatch(vk->transfer, 1, 1, 1);
  VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk->fn.CmdPipelineBarrier(vk->transfer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                            &barrier, 0, NULL, 0, NULL);
  return vk_transfer_submit(vk, false);
}

static tf_status run_probe(vk_state *vk, VkDescriptorPool *pool) {
  TF_RETURN_IF_ERROR(vk_pipeline_ensure(vk, VK_SHADER_subgroup_probe));
  VkDescriptorPoolSize sizes = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = VK_OPERANDS + 1};
  VkDescriptorPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  info.maxSets = 1;
  info.poolSizeCount = 1;
  info.pPoolSizes = &sizes;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.CreateDescriptorPool(vk->device, &info, NULL, pool), "vkCreateDescriptorPool"));
  VkDescriptorSetAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  allocate.descriptorPool = *pool;
  allocate.descriptorSetCount = 1;
  allocate.pSetLayouts = &vk->set_layout;
  VkDescriptorSet set;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.AllocateDescriptorSets(vk->device, &allocate, &set), "vkAllocateDescriptorSets"));
  // Every binding of the layout gets the run-state buffer (the probe writes binding 0 only).
  VkDescriptorBufferInfo buffer = {.buffer = vk->run_state.buffer, .offset = 0, .range = PROBE_INVOCATIONS * 4};
  VkWriteDescriptorSet writes[VK_OPERANDS + 1];
  for (uint32_t b = 0; b <= VK_OPERANDS; b++)
    writes[b] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = b,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &buffer};
  vk->fn.UpdateDescriptorSets(vk->device, VK_OPERANDS + 1, writes, 0, NULL);
  return dispatch(vk, set);
}

tf_status vk_subgroup_probe(vk_state *vk) {
  if (!vk->subgroup_size)
    return NULL;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  tf_status status = run_probe(vk, &pool);
  if (pool)
    vk->fn.DestroyDescriptorPool(vk->device, pool, NULL);
  TF_RETURN_IF_ERROR(tf_status_prefix(status, "vulkan: the subgroup probe (shaders/subgroup_probe.comp)"));
  if (judge(vk->run_state.mapped, vk->subgroup_size, vk->subgroup_refusal, sizeof(vk->subgroup_refusal)))
    vk->subgroup_size = 0;
  memset(vk->run_state.mapped, 0, (size_t)TF_VULKAN_RUN_STATE_BYTES); // as vk_memory_open leaves it
  return NULL;
}
