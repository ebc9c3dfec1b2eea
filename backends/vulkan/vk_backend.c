/* The Vulkan backend's vtable: a thin layer over the files named in vk_internal.h. Every fallible
 * entry returns through vk_validation_status, so that a message of the validation layer fails the
 * call during which it came (or, when it came during a void call, the next fallible one); those of
 * the final destroy go to tf_vulkan_validation_unreported() (vulkan.h). */
#include <stdlib.h>

#include "backends/vulkan/vk_internal.h"

static void vulkan_destroy(void *state) {
  vk_state *vk = state;
  if (!vk)
    return;
  vk_record_release(vk);
  vk_pipelines_destroy(vk);
  vk_memory_close(vk);
  vk_device_close(vk);
  vk_validation_keep(vk);
  free(vk);
}

static tf_status vulkan_create(const tf_backend_options *options, void **state) {
  *state = NULL;
  vk_state *vk = calloc(1, sizeof(vk_state));
  if (!vk)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan backend: cannot allocate its state");
  tf_status status = options && options->shared ? vk_device_borrow(vk, options->shared)
                                                : vk_device_open(vk, options ? options->device : 0);
  if (!status)
    status = vk_memory_open(vk);
  if (!status)
    status = vk_subgroup_probe(vk);
  status = vk_validation_status(vk, status);
  if (status) {
    vulkan_destroy(vk);
    return status;
  }
  *state = vk;
  return NULL;
}

static void vulkan_close_shared(void *shared);

/* A device for several states (tf_backend_vtable.open_shared): opened as a state opens its own,
 * without the memory and the subgroup probe each borrowing state still makes for itself. */
static tf_status vulkan_open_shared(const tf_backend_options *options, void **shared) {
  *shared = NULL;
  vk_state *vk = calloc(1, sizeof(vk_state));
  if (!vk)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan backend: cannot allocate a shared device");
  tf_status status = vk_device_open(vk, options ? options->device : 0);
  if (!status && pthread_mutex_init(&vk->lock, NULL) != 0)
    status = tf_status_new(TF_ERR_INTERNAL, "vulkan backend: cannot create the shared device's lock");
  else if (!status && pthread_mutex_init(&vk->log_lock, NULL) != 0) {
    pthread_mutex_destroy(&vk->lock);
    status = tf_status_new(TF_ERR_INTERNAL, "vulkan backend: cannot create the shared device's lock");
  }
  vk->has_lock = !status;
  status = vk_validation_status(vk, status);
  if (status) {
    vulkan_close_shared(vk);
    return status;
  }
  *shared = vk;
  return NULL;
}

static void vulkan_close_shared(void *shared) {
  vk_state *vk = shared;
  if (!vk)
    return;
  if (vk->has_lock) { // no borrowing state is left to take them
    pthread_mutex_destroy(&vk->lock);
    pthread_mutex_destroy(&vk->log_lock);
  }
  vk->has_lock = false;
  vulkan_destroy(vk);
}

static tf_target vulkan_target(void *state) {
  const vk_state *vk = state;
  tf_target target = tf_target_default(TF_TARGET_VULKAN);
  // Offsets must suit the device's storage-buffer binding alignment (at least the default's).
  int64_t align = (int64_t)vk->properties.limits.minStorageBufferOffsetAlignment;
  if (align > target.alignment)
    target.alignment = align;
  return target;
}

/* The regions' VkDeviceMemory sizes and the fixed overhead (vulkan.h); the context is the driver's. */
static tf_status vulkan_memory(void *state, tf_device_memory *out) {
  vk_state *vk = state;
  tf_vulkan_memory m = tf_vulkan_memory_use(state);
  *out = (tf_device_memory){.region_bytes = vk->region_asked,
                            .region_device_bytes = m.region_bytes,
                            .overhead_bytes = m.overhead_bytes,
                            .context_bytes = -1};
  return vk_validation_status(vk, NULL);
}

static tf_status vulkan_alloc_region(void *state, int64_t bytes, void **region) {
  vk_region *out = NULL;
  tf_status status = vk_region_alloc(state, bytes, &out);
  *region = out;
  return vk_validation_status(state, status);
}

static void vulkan_free_region(void *state, void *region) { vk_region_free(state, region); }

static tf_status vulkan_upload(void *state, void *region, int64_t offset, const void *host, int64_t bytes) {
  return vk_validation_status(state, vk_region_upload(state, region, offset, host, bytes));
}

static tf_status vulkan_download(void *state, void *region, int64_t offset, void *host, int64_t bytes) {
  return vk_validation_status(state, vk_region_download(state, region, offset, host, bytes));
}

static tf_status vulkan_alloc_host(void *state, int64_t bytes, void **host) {
  return vk_validation_status(state, vk_host_alloc(state, bytes, host));
}

static void vulkan_free_host(void *state, void *host) { vk_host_free(state, host); }

/* The copies are recorded by prepare (vk_program_build) from the host region's buffer. */
static tf_status vulkan_take_host_copies(void *state, const tf_plan *plan, void *host, const bool *copies) {
  vk_state *vk = state;
  const vk_host_buffer *b = vk_host_find(vk, host);
  if (!b || b->bytes < plan->host_bytes)
    return tf_status_new(TF_ERR_INTERNAL, "vulkan: the host region (%lld bytes) is not this backend's host memory",
                         (long long)plan->host_bytes);
  vk->host_region = (vk_region){.buffer = b->buffer, .memory = VK_NULL_HANDLE, .bytes = plan->host_bytes};
  vk->host_copies = copies;
  return NULL;
}

static tf_status vulkan_prepare(void *state, const tf_plan *plan, void *const regions[TF_REGION_COUNT]) {
  return tf_status_prefix(vk_validation_status(state, vk_record_prepare(state, plan, regions)),
                          "vulkan backend on '%s'", ((vk_state *)state)->properties.deviceName);
}

static tf_status vulkan_run(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  return vk_validation_status(state, vk_record_run(state, begin, end, io_slot, run));
}

static tf_status vulkan_synchronize(void *state) { return vk_validation_status(state, vk_record_wait(state)); }

tf_vulkan_memory tf_vulkan_memory_use(void *state) {
  const vk_state *vk = state;
  tf_vulkan_memory m = {.region_bytes = vk->region_bytes,
                        .overhead_bytes = vk->staging.bytes + vk->run_state.bytes,
                        .allocations = vk->allocations,
                        .live_allocations = vk->live_allocations};
  return m;
}

_Static_assert(TF_VULKAN_STAGING_BYTES + TF_VULKAN_RUN_STATE_BYTES == TF_TARGET_VULKAN_STAGING_BYTES,
               "the Vulkan target's overhead model counts exactly the buffers this backend creates");

const tf_backend_vtable tf_backend_vulkan = {
    .name = "vulkan",
    .create = vulkan_create,
    .destroy = vulkan_destroy,
    .target = vulkan_target,
    .alloc_region = vulkan_alloc_region,
    .free_region = vulkan_free_region,
    .upload = vulkan_upload,
    .download = vulkan_download,
    .prepare = vulkan_prepare,
    .run = vulkan_run,
    .synchronize = vulkan_synchronize,
    .memory = vulkan_memory,
    .capacity = vk_capacity,
    .alloc_host = vulkan_alloc_host,
    .free_host = vulkan_free_host,
    .take_host_copies = vulkan_take_host_copies,
    .open_shared = vulkan_open_shared,
    .close_shared = vulkan_close_shared,
};

uint32_t tf_vulkan_subgroup_size(void *state) { return ((const vk_state *)state)->subgroup_size; }

const char *tf_vulkan_subgroup_refusal(void *state) {
  const vk_state *vk = state;
  return vk->subgroup_refusal[0] ? vk->subgroup_refusal : NULL;
}

bool tf_vulkan_tiled_attention(void *state) {
  const vk_state *vk = state;
  const vk_limits limits = {.max_shared_bytes = vk->properties.limits.maxComputeSharedMemorySize,
                            .tiled_attention = vk->tiled_attention,
                            .tiled_wide = vk->tiled_wide};
  return vk_attention_tiled(&limits);
}

int tf_vulkan_big_matmul(void *state) { return (int)((const vk_state *)state)->big_matmul; }

const char *tf_vulkan_device_name(void *state) { return ((const vk_state *)state)->properties.deviceName; }
