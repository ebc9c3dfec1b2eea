/* `tightfit check --device vulkan:N`: what a Vulkan device offers before any session, measured.
 * The device's largest device-local heap is its memory; with VK_EXT_memory_budget the driver also
 * says how much of it this process may use (heapBudget) and how much the process already uses once
 * its logical device exists (the driver's own share: `context_bytes`, with what a driver we measured
 * keeps outside that usage).
 * Without the extension only the heap's size is known. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

/* The largest DEVICE_LOCAL heap (any heap when none is: lavapipe's is host memory). */
static uint32_t largest_device_heap(const VkPhysicalDeviceMemoryProperties *m) {
  uint32_t best = UINT32_MAX;
  for (int pass = 0; pass < 2 && best == UINT32_MAX; pass++)
    for (uint32_t i = 0; i < m->memoryHeapCount; i++) {
      bool local = (m->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
      if ((pass == 0 && !local) || (best != UINT32_MAX && m->memoryHeaps[i].size <= m->memoryHeaps[best].size))
        continue;
      best = i;
    }
  return best;
}

static bool has_memory_budget(vk_state *vk) {
  return vk_has_device_extension(vk, vk->physical, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
}

/* What the driver keeps on the device beyond the heap usage VK_EXT_memory_budget reports once the
 * logical device exists, or -1 where unmeasured (the target's default driver part then stays).
 * NVIDIA (580.159, H100, sixth lend): gpt2-small's step peaked 56 MiB device-wide above its regions,
 * staging and that usage (22 MiB in the process's own nvidia-smi row); the H200 had shown 57 MiB
 * besides the staging: 80 MiB. lavapipe's heap is host memory the usage counts: 0. */
#define NVIDIA_VENDOR_ID 0x10DEu
static int64_t unreported_driver_bytes(const VkPhysicalDeviceProperties *p) {
  if (p->vendorID == NVIDIA_VENDOR_ID)
    return (int64_t)80 << 20;
  return p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : -1;
}

static void read_budget(vk_state *vk, uint32_t heap, tf_device_capacity *out) {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 properties = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                                  .pNext = &budget};
  vk->fn.GetPhysicalDeviceMemoryProperties2(vk->physical, &properties);
  /* heapBudget is what this process may use in the heap, its own usage included; the logical device
   * exists and nothing else of ours does, so the usage is the driver's share for the device. */
  out->free_bytes = (int64_t)budget.heapBudget[heap];
  const int64_t unreported = unreported_driver_bytes(&vk->properties);
  out->context_bytes = unreported >= 0 ? (int64_t)budget.heapUsage[heap] + unreported : -1;
}

static tf_status vulkan_capacity_of(vk_state *vk, int32_t device, tf_device_capacity *out) {
  TF_RETURN_IF_ERROR(vk_device_open(vk, device));
  snprintf(out->name, sizeof(out->name), "%s", vk->properties.deviceName);
  uint32_t heap = largest_device_heap(&vk->memory_properties);
  if (heap == UINT32_MAX)
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: device '%s' reports no memory heap", vk->properties.deviceName);
  out->total_bytes = (int64_t)vk->memory_properties.memoryHeaps[heap].size;
  if (has_memory_budget(vk))
    read_budget(vk, heap, out);
  return NULL;
}

tf_status vk_capacity(const tf_backend_options *options, tf_device_capacity *out) {
  memset(out, 0, sizeof(*out));
  out->total_bytes = out->free_bytes = out->context_bytes = out->library_bytes = out->granularity = -1;
  vk_state *vk = calloc(1, sizeof(vk_state));
  if (!vk)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot allocate a device query");
  tf_status status = vulkan_capacity_of(vk, options ? options->device : 0, out);
  vk_device_close(vk);
  status = vk_validation_status(vk, status);
  free(vk);
  return status;
}
