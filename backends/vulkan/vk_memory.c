/* Device memory: one VkBuffer + one VkDeviceMemory per plan region (device-local, storage and
 * transfer usage, zeroed at allocation), the two host-visible buffers of the fixed overhead
 * (vulkan.h): staging for upload/download, and the run state; and an offloaded plan's host memory
 * (host-visible, cached buffers in the host's memory, which the recorded copies reach). Copies go
 * through the staging buffer in chunks, each a one-shot submission of the transfer command buffer that waits on its
 * fence; a barrier at its start orders it after any compute work submitted before it. */
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

/* A memory type allowed by `bits` with all of `wanted` and none of `unwanted`, or UINT32_MAX. */
static uint32_t memory_type(const vk_state *vk, uint32_t bits, VkMemoryPropertyFlags wanted,
                            VkMemoryPropertyFlags unwanted) {
  for (uint32_t i = 0; i < vk->memory_properties.memoryTypeCount; i++) {
    const VkMemoryPropertyFlags flags = vk->memory_properties.memoryTypes[i].propertyFlags;
    if ((bits & (1u << i)) && (flags & wanted) == wanted && (flags & unwanted) == 0)
      return i;
  }
  return UINT32_MAX;
}

/* Refuses `bytes` that no heap holding a memory type of the first available preference could hold,
 * naming the largest such heap (asked before vkCreateBuffer, which fails with no size named). */
static tf_status check_heaps(const vk_state *vk, int64_t bytes, const VkMemoryPropertyFlags *preferences,
                             int n_preferences) {
  const VkPhysicalDeviceMemoryProperties *m = &vk->memory_properties;
  for (int p = 0; p < n_preferences; p++) {
    uint32_t largest = UINT32_MAX;
    for (uint32_t i = 0; i < m->memoryTypeCount; i++) {
      uint32_t heap = m->memoryTypes[i].heapIndex;
      if ((m->memoryTypes[i].propertyFlags & preferences[p]) == preferences[p] &&
          (largest == UINT32_MAX || m->memoryHeaps[heap].size > m->memoryHeaps[largest].size))
        largest = heap;
    }
    if (largest == UINT32_MAX)
      continue;
    if ((VkDeviceSize)bytes <= m->memoryHeaps[largest].size)
      return NULL;
    return tf_status_new(TF_ERR_OUT_OF_MEMORY,
                         "vulkan: %lld bytes do not fit device '%s': its memory heap %u has %lld bytes (%.2f GiB)",
                         (long long)bytes, vk->properties.deviceName, largest, (long long)m->memoryHeaps[largest].size,
                         (double)m->memoryHeaps[largest].size / 1073741824.0);
  }
  return NULL;
}

/* A buffer of `bytes` with its own memory, of the first type in `preferences` that exists without
 * any of `unwanted`. */
static tf_status create_buffer(vk_state *vk, int64_t bytes, VkBufferUsageFlags usage,
                               const VkMemoryPropertyFlags *preferences, int n_preferences,
                               VkMemoryPropertyFlags unwanted, VkBuffer *buffer, VkDeviceMemory *memory,
                               int64_t *allocated) {
  VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = (VkDeviceSize)bytes;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  TF_RETURN_IF_ERROR(check_heaps(vk, bytes, preferences, n_preferences));
  VkResult created = vk->fn.CreateBuffer(vk->device, &info, NULL, buffer);
  if (created == VK_ERROR_OUT_OF_DEVICE_MEMORY || created == VK_ERROR_OUT_OF_HOST_MEMORY)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: device '%s' cannot create a buffer of %lld bytes (%s)",
                         vk->properties.deviceName, (long long)bytes,
                         created == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "out of device memory" : "out of host memory");
  TF_RETURN_IF_ERROR(vk_check(created, "vkCreateBuffer"));
  VkMemoryRequirements requirements;
  vk->fn.GetBufferMemoryRequirements(vk->device, *buffer, &requirements);
  uint32_t type = UINT32_MAX;
  for (int i = 0; i < n_preferences && type == UINT32_MAX; i++)
    type = memory_type(vk, requirements.memoryTypeBits, preferences[i], unwanted);
  if (type == UINT32_MAX)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: device '%s' has no suitable memory type for a buffer of %lld bytes",
                         vk->properties.deviceName, (long long)bytes);
  VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = requirements.size;
  allocate.memoryTypeIndex = type;
  VkResult result = vk->fn.AllocateMemory(vk->device, &allocate, NULL, memory);
  if (result != VK_SUCCESS)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY,
                         "vulkan: cannot allocate %lld bytes of device memory on '%s' (VkResult %d)",
                         (long long)requirements.size, vk->properties.deviceName, (int)result);
  vk->allocations++;
  vk->live_allocations++;
  *allocated = (int64_t)requirements.size;
  return vk_check(vk->fn.BindBufferMemory(vk->device, *buffer, *memory, 0), "vkBindBufferMemory");
}

static void destroy_buffer(vk_state *vk, VkBuffer buffer, VkDeviceMemory memory) {
  if (buffer)
    vk->fn.DestroyBuffer(vk->device, buffer, NULL);
  if (memory) {
    vk->fn.FreeMemory(vk->device, memory, NULL);
    vk->live_allocations--;
  }
}

static tf_status create_host_buffer(vk_state *vk, int64_t bytes, VkBufferUsageFlags usage, vk_host_buffer *out) {
  // Device-local and host-visible (resizable BAR, unified memory) first, plain host memory else.
  const VkMemoryPropertyFlags preferences[] = {
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT};
  int64_t allocated;
  // Staging is read by the host only after a copy: the device-local host-visible types are often
  // uncached for reads, so staging asks for plain host memory.
  int first = usage & VK_BUFFER_USAGE_STORAGE_BUFFER_BIT ? 0 : 1;
  TF_RETURN_IF_ERROR(
      create_buffer(vk, bytes, usage, preferences + first, 2 - first, 0, &out->buffer, &out->memory, &allocated));
  out->bytes = bytes;
  return vk_check(vk->fn.MapMemory(vk->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped), "vkMapMemory");
}

tf_status vk_memory_open(vk_state *vk) {
  TF_RETURN_IF_ERROR(create_host_buffer(
      vk, TF_VULKAN_STAGING_BYTES, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, &vk->staging));
  TF_RETURN_IF_ERROR(
      create_host_buffer(vk, TF_VULKAN_RUN_STATE_BYTES, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, &vk->run_state));
  memset(vk->run_state.mapped, 0, (size_t)TF_VULKAN_RUN_STATE_BYTES);
  VkCommandBufferAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  info.commandPool = vk->command_pool;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.AllocateCommandBuffers(vk->device, &info, &vk->transfer), "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  return vk_check(vk->fn.CreateFence(vk->device, &fence, NULL, &vk->transfer_fence), "vkCreateFence");
}

static void close_host_buffer(vk_state *vk, vk_host_buffer *b) {
  if (b->mapped)
    vk->fn.UnmapMemory(vk->device, b->memory);
  destroy_buffer(vk, b->buffer, b->memory);
  memset(b, 0, sizeof(*b));
}

void vk_memory_close(vk_state *vk) {
  if (!vk->device)
    return;
  while (vk->n_hosts > 0)
    vk_host_free(vk, vk->hosts[vk->n_hosts - 1].mapped);
  if (vk->transfer_fence)
    vk->fn.DestroyFence(vk->device, vk->transfer_fence, NULL);
  if (vk->transfer)
    vk->fn.FreeCommandBuffers(vk->device, vk->command_pool, 1, &vk->transfer);
  close_host_buffer(vk, &vk->staging);
  close_host_buffer(vk, &vk->run_state);
}

/* ---- one-shot transfers ---- */

tf_status vk_transfer_begin(vk_state *vk) {
  TF_RETURN_IF_ERROR(vk_check(vk->fn.ResetCommandBuffer(vk->transfer, 0), "vkResetCommandBuffer"));
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.BeginCommandBuffer(vk->transfer, &begin), "vkBeginCommandBuffer"));
  // Earlier submissions (compute or transfer) finish their reads and writes before this copy.
  VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vk->fn.CmdPipelineBarrier(vk->transfer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
  return NULL;
}

tf_status vk_transfer_submit(vk_state *vk, bool to_host) {
  if (to_host) {
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk->fn.CmdPipelineBarrier(vk->transfer, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier,
                              0, NULL, 0, NULL);
  }
  TF_RETURN_IF_ERROR(vk_check(vk->fn.EndCommandBuffer(vk->transfer), "vkEndCommandBuffer"));
  VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &vk->transfer;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.ResetFences(vk->device, 1, &vk->transfer_fence), "vkResetFences"));
  TF_RETURN_IF_ERROR(vk_queue_submit(vk, &submit, vk->transfer_fence));
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.WaitForFences(vk->device, 1, &vk->transfer_fence, VK_TRUE, UINT64_MAX), "vkWaitForFences"));
  return NULL;
}

/* ---- regions ---- */

tf_status vk_region_alloc(vk_state *vk, int64_t bytes, vk_region **out) {
  *out = NULL;
  // vkCmdFillBuffer works in 4-byte words and a buffer cannot be empty: round to 16 bytes.
  int64_t size = bytes > 0 ? (bytes + 15) / 16 * 16 : 16;
  vk_region *region = calloc(1, sizeof(vk_region));
  if (!region)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot allocate a region record");
  region->bytes = bytes;
  const VkMemoryPropertyFlags preferences[] = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
  tf_status status = create_buffer(vk, size,
                                   VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                   preferences, 2, 0, &region->buffer, &region->memory, &region->allocated);
  if (!status) {
    vk->region_bytes += region->allocated;
    vk->region_asked += bytes;
    status = vk_transfer_begin(vk);
  }
  if (!status) {
    vk->fn.CmdFillBuffer(vk->transfer, region->buffer, 0, VK_WHOLE_SIZE, 0);
    status = vk_transfer_submit(vk, false);
  }
  if (status) {
    vk_region_free(vk, region);
    return tf_status_prefix(status, "vulkan: a region of %lld bytes", (long long)bytes);
  }
  *out = region;
  return NULL;
}

void vk_region_free(vk_state *vk, vk_region *region) {
  if (!region)
    return;
  if (region->memory) {
    vk->region_bytes -= region->allocated;
    vk->region_asked -= region->bytes;
  }
  destroy_buffer(vk, region->buffer, region->memory);
  free(region);
}

static tf_status check_range(const vk_region *region, int64_t offset, int64_t bytes, const char *what) {
  if (!region)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: %s of %lld bytes from no region", what, (long long)bytes);
  if (offset < 0 || bytes < 0 || offset > region->bytes || bytes > region->bytes - offset)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "vulkan: %s of %lld bytes at offset %lld lies outside a region of %lld", what,
                         (long long)bytes, (long long)offset, (long long)region->bytes);
  return NULL;
}

tf_status vk_region_upload(vk_state *vk, vk_region *region, int64_t offset, const void *host, int64_t bytes) {
  TF_RETURN_IF_ERROR(check_range(region, offset, bytes, "upload"));
  for (int64_t done = 0; done < bytes;) {
    int64_t chunk = bytes - done < vk->staging.bytes ? bytes - done : vk->staging.bytes;
    memcpy(vk->staging.mapped, (const char *)host + done, (size_t)chunk);
    TF_RETURN_IF_ERROR(vk_transfer_begin(vk));
    VkBufferCopy copy = {.srcOffset = 0, .dstOffset = (VkDeviceSize)(offset + done), .size = (VkDeviceSize)chunk};
    vk->fn.CmdCopyBuffer(vk->transfer, vk->staging.buffer, region->buffer, 1, &copy);
    TF_RETURN_IF_ERROR(vk_transfer_submit(vk, false));
    done += chunk;
  }
  return NULL;
}

tf_status vk_region_download(vk_state *vk, vk_region *region, int64_t offset, void *host, int64_t bytes) {
  TF_RETURN_IF_ERROR(check_range(region, offset, bytes, "download"));
  for (int64_t done = 0; done < bytes;) {
    int64_t chunk = bytes - done < vk->staging.bytes ? bytes - done : vk->staging.bytes;
    TF_RETURN_IF_ERROR(vk_transfer_begin(vk));
    VkBufferCopy copy = {.srcOffset = (VkDeviceSize)(offset + done), .dstOffset = 0, .size = (VkDeviceSize)chunk};
    vk->fn.CmdCopyBuffer(vk->transfer, region->buffer, vk->staging.buffer, 1, &copy);
    TF_RETURN_IF_ERROR(vk_transfer_submit(vk, true));
    memcpy((char *)host + done, vk->staging.mapped, (size_t)chunk);
    done += chunk;
  }
  return NULL;
}

/* ---- host memory (tf_backend_vtable.alloc_host) ---- */

tf_status vk_host_alloc(vk_state *vk, int64_t bytes, void **host) {
  *host = NULL;
  if (vk->n_hosts == VK_MAX_HOST_BUFFERS)
    return tf_status_new(TF_ERR_INTERNAL, "vulkan: more than %d host buffers asked for", VK_MAX_HOST_BUFFERS);
  // The host's own memory, cached: the host steps compute on it (uncached memory would make their
  // reads crawl; without a cached type the runtime takes ordinary memory). A device-local type only
  // where the device's memory is the host's (an integrated GPU, a CPU).
  const VkMemoryPropertyFlags preferences[] = {
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT};
  const VkPhysicalDeviceType type = vk->properties.deviceType;
  const bool shared = type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const int64_t size = bytes > 0 ? (bytes + 15) / 16 * 16 : 16;
  vk_host_buffer b = {.buffer = VK_NULL_HANDLE, .memory = VK_NULL_HANDLE, .mapped = NULL, .bytes = size};
  int64_t allocated;
  tf_status status =
      create_buffer(vk, size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, preferences, 1,
                    shared ? 0 : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &b.buffer, &b.memory, &allocated);
  if (!status)
    status = vk_check(vk->fn.MapMemory(vk->device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  if (status) {
    destroy_buffer(vk, b.buffer, b.memory);
    return tf_status_prefix(status, "vulkan: host memory of %lld bytes", (long long)bytes);
  }
  memset(b.mapped, 0, (size_t)size);
  vk->hosts[vk->n_hosts++] = b;
  *host = b.mapped;
  return NULL;
}

const vk_host_buffer *vk_host_find(const vk_state *vk, const void *host) {
  for (int32_t i = 0; i < vk->n_hosts; i++)
    if (vk->hosts[i].mapped == host)
      return &vk->hosts[i];
  return NULL;
}

void vk_host_free(vk_state *vk, void *host) {
  for (int32_t i = 0; i < vk->n_hosts; i++)
    if (vk->hosts[i].mapped == host) {
      close_host_buffer(vk, &vk->hosts[i]);
      vk->hosts[i] = vk->hosts[--vk->n_hosts];
      return;
    }
}
