/* The Vulkan backend's public face: its vtable (for backends/registry.c) and the one query that
 * backend.h has no slot for, the device memory it holds (tests prove the memory promise with it).
 *
 * Fixed overhead: besides one VkDeviceMemory per plan region (exactly the region's bytes, rounded up
 * to a multiple of 16 only when the plan's size is not one), the backend allocates two host-visible
 * buffers when it is created, and nothing else, ever:
 *   - a staging buffer of TF_VULKAN_STAGING_BYTES through which upload() and download() move data in
 *     chunks (a copy larger than it takes several submissions);
 *   - the run-state buffer of TF_VULKAN_RUN_STATE_BYTES that carries the per-run values (AdamW's step
 *     corrections, the dropout key) to the shaders, written by the host before each submission.
 * Pipelines, descriptor sets and command buffers are driver objects in host memory. */
#ifndef TIGHTFIT_BACKENDS_VULKAN_VULKAN_H
#define TIGHTFIT_BACKENDS_VULKAN_VULKAN_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_VULKAN_STAGING_BYTES ((int64_t)8 << 20)
#define TF_VULKAN_RUN_STATE_BYTES ((int64_t)256)

extern const tf_backend_vtable tf_backend_vulkan;

typedef struct tf_vulkan_memory {
  int64_t region_bytes;     /* sum of the regions' VkDeviceMemory sizes */
  int64_t overhead_bytes;   /* the fixed overhead above (staging + run state) */
  int64_t allocations;      /* vkAllocateMemory calls so far (regions + 2) */
  int64_t live_allocations; /* ... not yet freed */
} tf_vulkan_memory;

/* The device memory a Vulkan backend state (from tf_backend_vulkan.create) holds now. */
tf_vulkan_memory tf_vulkan_memory_use(void *state);

/* The subgroup size the backend's subgroup shader variants (shaders/README.md) run with on this
 * state's device, or 0 when they are off (the device lacks them, TIGHTFIT_VULKAN_SUBGROUPS=0, or
 * the subgroup probe found the lanes unlike what the driver reports). */
uint32_t tf_vulkan_subgroup_size(void *state);
/* Why the subgroup probe (backends/vulkan/vk_subgroup_probe.c) turned the variants off on this
 * state's device, or NULL when it did not. */
const char *tf_vulkan_subgroup_refusal(void *state);

/* Whether attention steps on this state's device run the tiled shaders (shaders/attention_tiled.comp)
 * where they apply: its shared memory holds their tiles and TIGHTFIT_VULKAN_TILED_ATTENTION is not 0. */
bool tf_vulkan_tiled_attention(void *state);

/* Which products on this state's device run the big-tile matmul (128 x 128 tiles): 0 none, 1 the
 * large ones (the default), 2 every one (TIGHTFIT_VULKAN_BIG_MATMUL=0, 1, all). */
int tf_vulkan_big_matmul(void *state);

/* The device's name (VkPhysicalDeviceProperties::deviceName) for this state. */
const char *tf_vulkan_device_name(void *state);

/* For tests, which must fail on any message of the validation layer (TIGHTFIT_VULKAN_VALIDATION=1):
 * a message fails the backend call during which it came, or the next fallible one, as an error
 * status naming it. Those no status could carry (reported while a backend state was destroyed, such
 * as leaked objects, or after its last fallible call) are counted here, over every Vulkan backend
 * state this process has destroyed: returns their number (0: none) and copies the first into
 * `first` (`size` bytes, may be NULL). The library itself never prints them. */
int32_t tf_vulkan_validation_unreported(char *first, size_t size);

/* Adds every Vulkan device to `list` ("vulkan:N": name, type, API version, memory heaps, subgroups,
 * 16-bit storage); an error says what is missing (no loader, no device). */
tf_status tf_vulkan_list_devices(tf_device_list *list) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
