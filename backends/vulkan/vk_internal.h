/* Shared by the Vulkan backend's files: the backend state, the lowered program (what a plan step
 * becomes: dispatches, fills, copies) and the functions each file offers the others.
 *
 * Files, one concern each:
 *   vk_device.c    instance, validation messenger, physical device choice, logical device, queue
 *                  (or those of a shared device, borrowed)
 *   vk_memory.c    regions (one VkBuffer + VkDeviceMemory each), staging, upload/download
 *   vk_pipelines.c shader modules and compute pipelines from the embedded SPIR-V, the layouts
 *   vk_lower*.c    plan step -> commands (pure host logic, no Vulkan calls), one op family a file
 *   vk_record.c    descriptor sets, barriers, command buffers recorded in prepare, run()
 *   vk_backend.c   the vtable */
#ifndef TIGHTFIT_BACKENDS_VULKAN_VK_INTERNAL_H
#define TIGHTFIT_BACKENDS_VULKAN_VK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "backends/vulkan/vulkan.h"

/* Vulkan entry points, loaded at run time from the loader (libvulkan.so.1, dlopen'ed) so that a
 * machine without one gets an error naming it instead of a binary that does not start. They live
 * in the state (no global mutable state): call them as vk->fn.CreateBuffer(...). */
// clang-format off
#define VK_GLOBAL_FUNCTIONS(X) \
  X(CreateInstance) X(EnumerateInstanceLayerProperties) X(EnumerateInstanceExtensionProperties)
#define VK_INSTANCE_FUNCTIONS(X) \
  X(DestroyInstance) X(EnumeratePhysicalDevices) X(GetPhysicalDeviceProperties) \
  X(GetPhysicalDeviceMemoryProperties) X(GetPhysicalDeviceQueueFamilyProperties) X(CreateDevice) \
  X(GetDeviceProcAddr) X(GetPhysicalDeviceProperties2) X(GetPhysicalDeviceMemoryProperties2) \
  X(EnumerateDeviceExtensionProperties) X(GetPhysicalDeviceFeatures2)
#define VK_DEVICE_FUNCTIONS(X) \
  X(DestroyDevice) X(GetDeviceQueue) X(CreateCommandPool) X(DestroyCommandPool) \
  X(AllocateCommandBuffers) X(FreeCommandBuffers) X(BeginCommandBuffer) X(EndCommandBuffer) \
  X(ResetCommandBuffer) X(QueueSubmit) X(CreateFence) X(DestroyFence) \
  X(WaitForFences) X(ResetFences) X(CreateBuffer) X(DestroyBuffer) \
  X(GetBufferMemoryRequirements) X(AllocateMemory) X(FreeMemory) X(BindBufferMemory) \
  X(MapMemory) X(UnmapMemory) X(CmdCopyBuffer) X(CmdFillBuffer) \
  X(CmdPipelineBarrier) X(CmdBindPipeline) X(CmdBindDescriptorSets) X(CmdPushConstants) \
  X(CmdDispatch) X(CreateShaderModule) X(DestroyShaderModule) X(CreateComputePipelines) \
  X(DestroyPipeline) X(CreatePipelineLayout) X(DestroyPipelineLayout) X(CreateDescriptorSetLayout) \
  X(DestroyDescriptorSetLayout) X(CreateDescriptorPool) X(DestroyDescriptorPool) X(AllocateDescriptorSets) \
  X(UpdateDescriptorSets) X(DeviceWaitIdle) X(CreateQueryPool) X(DestroyQueryPool) \
  X(CmdResetQueryPool) X(CmdWriteTimestamp) X(GetQueryPoolResults)
// clang-format on

typedef struct vk_functions {
  PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
#define VK_FUNCTION_FIELD(name) PFN_vk##name name;
  VK_GLOBAL_FUNCTIONS(VK_FUNCTION_FIELD)
  VK_INSTANCE_FUNCTIONS(VK_FUNCTION_FIELD)
  VK_DEVICE_FUNCTIONS(VK_FUNCTION_FIELD)
#undef VK_FUNCTION_FIELD
  PFN_vkCreateDebugUtilsMessengerEXT CreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT DestroyDebugUtilsMessengerEXT;
  PFN_vkSetDebugUtilsObjectNameEXT SetDebugUtilsObjectNameEXT; /* validation mode only */
} vk_functions;

/* Operand bindings 0..VK_OPERANDS-1 of descriptor set 0; the run-state buffer is binding VK_OPERANDS. */
#define VK_OPERANDS 8
#define VK_RUN_STATE_BINDING VK_OPERANDS
#define VK_PUSH_WORDS 32      /* 128 bytes: the minimum maxPushConstantsSize */
#define VK_ADAM_SLOTS 8       /* distinct (beta1, beta2) pairs whose corrections the run state carries */
#define VK_GROUP_LIMIT 65535u /* workgroups per dimension every device allows */
#define VK_INVOCATIONS 256u   /* invocations per workgroup the shaders use at most */

/* Every embedded shader (a SPIR-V module per variant; see backends/vulkan/CMakeLists.txt). */
// clang-format off
#define VK_SHADER_LIST(X) \
  X(binary) X(unary) X(layout) X(reduce) X(softmax) X(norm) X(embedding) X(matmul) \
  X(conv_forward) X(conv_grad_weight) X(conv_grad_input) X(attention) X(pool) X(loss) X(optimizer) X(dropout) \
  X(matmul_sg) X(conv_forward_sg) X(conv_grad_weight_sg) X(conv_grad_input_sg) X(softmax_sg) X(loss_sg) \
  X(norm_sg) X(reduce_sg) X(attention_sg) X(linear_loss) X(layout16) \
  X(binary_f16) X(binary_bf16) X(unary_f16) X(unary_bf16) X(softmax_f16) X(softmax_bf16) \
  X(softmax_sg_f16) X(softmax_sg_bf16) X(matmul_f16) X(matmul_bf16) X(matmul_sg_f16) X(matmul_sg_bf16) \
  X(dropout_f16) X(dropout_bf16) X(reduce_f16) X(reduce_bf16) X(reduce_sg_f16) X(reduce_sg_bf16) X(norm_f16) \
  X(norm_bf16) X(norm_sg_f16) X(norm_sg_bf16) X(attention_f16) X(attention_bf16) X(attention_sg_f16) \
  X(attention_sg_bf16) X(embedding_f16) X(embedding_bf16) X(conv_forward_f16) X(conv_forward_bf16) \
  X(conv_forward_sg_f16) X(conv_forward_sg_bf16) X(conv_grad_weight_f16) X(conv_grad_weight_bf16) \
  X(conv_grad_weight_sg_f16) X(conv_grad_weight_sg_bf16) X(conv_grad_input_f16) X(conv_grad_input_bf16) \
  X(conv_grad_input_sg_f16) X(conv_grad_input_sg_bf16) X(pool_f16) X(pool_bf16) \
  X(linear_loss_half_f16) X(linear_loss_half_bf16) X(loss_half_f16) X(loss_half_bf16) \
  X(loss_sg_half_f16) X(loss_sg_half_bf16) X(attention_in_f16) X(attention_in_bf16) X(attention_sg_in_f16) \
  X(attention_sg_in_bf16) X(batch_norm) X(batch_norm_sg) X(batch_norm_f16) X(batch_norm_bf16) X(batch_norm_sg_f16) \
  X(batch_norm_sg_bf16) X(batch_norm_running) X(batch_norm_running_sg) X(batch_norm_running_f16) \
  X(batch_norm_running_bf16) X(batch_norm_running_sg_f16) X(batch_norm_running_sg_bf16) X(ctc) X(adamw8bit) \
  X(attention_tiled) X(attention_tiled_f16) X(attention_tiled_bf16) X(attention_tiled_in_f16) X(attention_tiled_in_bf16) \
  X(matmul_big) X(matmul_big_f16) X(matmul_big_bf16) X(subgroup_probe) X(reduce_split) X(reduce_split_f16) \
  X(reduce_split_bf16) X(norm_split) X(norm_split_f16) X(norm_split_bf16) X(attention_tiled_d64) \
  X(attention_tiled_d64_f16) X(attention_tiled_d64_bf16) X(attention_tiled_d64_in_f16) X(attention_tiled_d64_in_bf16) \
  X(attention_tiled_d32) X(attention_tiled_d32_f16) X(attention_tiled_d32_bf16) X(attention_tiled_d32_in_f16) \
  X(attention_tiled_d32_in_bf16) X(layout8)
// clang-format on

typedef enum vk_shader {
#define VK_SHADER_ENUM(name) VK_SHADER_##name,
  VK_SHADER_LIST(VK_SHADER_ENUM)
#undef VK_SHADER_ENUM
      VK_SHADER_COUNT
} vk_shader;

typedef enum vk_command_kind {
  VK_COMMAND_DISPATCH = 0, /* a compute dispatch */
  VK_COMMAND_FILL,         /* buffers[0] = 0 (vkCmdFillBuffer) */
  VK_COMMAND_COPY          /* buffers[1] = buffers[0], `bytes` bytes (vkCmdCopyBuffer) */
} vk_command_kind;

/* One command of a lowered step. Bindings name plan buffers (the primary of an io pair; the
 * recorder substitutes the twin for io half 1), or -1 for the dummy binding. */
typedef struct vk_command {
  vk_command_kind kind;
  vk_shader shader;
  int32_t n_bindings;
  int32_t buffers[VK_OPERANDS];
  uint32_t writes; /* bit i: binding i is written */
  uint32_t push[VK_PUSH_WORDS];
  uint32_t groups[3];
  int64_t bytes;  /* COPY */
  bool host_copy; /* COPY: an offloaded activation's copy (a host step the backend took), not a step's */
} vk_command;

/* The lowered plan: the commands of step s are [step_first[s], step_first[s + 1]). */
typedef struct vk_program {
  vk_command *commands;
  int32_t n_commands, capacity;
  int32_t *step_first;
  int32_t n_adam_slots;
  float adam_key[VK_ADAM_SLOTS][3]; /* (learning rate, beta1, beta2) of each AdamW slot */
} vk_program;

/* Which products run matmul.comp's big-tile variant (128 x 128 tiles; TIGHTFIT_VULKAN_BIG_MATMUL,
 * vk_device.c): none, those with enough tiles to fill a large GPU (vk_lower_dense.c), or every one. */
typedef enum vk_big_matmul { VK_BIG_MATMUL_OFF = 0, VK_BIG_MATMUL_LARGE, VK_BIG_MATMUL_ALL } vk_big_matmul;

/* What lowering may assume about the device. `subgroup_size` is nonzero when the *_sg shader
 * variants may run: compute-stage subgroups with basic, arithmetic and shuffle operations, a
 * power-of-two size of at least 8 (see vk_device.c), and TIGHTFIT_VULKAN_SUBGROUPS not 0. */
typedef struct vk_limits {
  uint64_t max_storage_range;
  uint32_t max_shared_bytes;
  uint32_t subgroup_size;
  int64_t loop_limit;    /* loop iterations one invocation may run in all, 0: no limit (lavapipe: 65535) */
  bool storage16;        /* storageBuffer16BitAccess enabled: steps on f16/bf16 data may run (vk_device.c) */
  bool storage8;         /* storageBuffer8BitAccess enabled: layout ops may move u8 data (a mask; vk_device.c) */
  bool tiled_attention;  /* attention may run shaders/attention_tiled.comp (TIGHTFIT_VULKAN_TILED_ATTENTION not 0) */
  bool tiled_wide;       /* ... in its 32-row blocks (TIGHTFIT_VULKAN_TILED_ATTENTION not 0 nor 16) */
  bool split_dx;         /* the loss head's dx products may run in slices (TIGHTFIT_VULKAN_SPLIT_DX not 0) */
  bool split_columns;    /* long column sums may run split in chunks (TIGHTFIT_VULKAN_SPLIT_COLUMNS not 0) */
  bool matmul_subgroups; /* products may take matmul.comp's subgroup variant (vk_device.c, matmul_subgroups_of) */
  bool matmul_quads; /* the big-tile variant may read aligned operands as vec4 (TIGHTFIT_VULKAN_MATMUL_QUADS not 0) */
  vk_big_matmul big_matmul;
} vk_limits;

/* ---- vk_lower.c: plan -> program ---- */

/* Lowers every step of `plan`; refuses (naming the step) what no shader implements. The host steps
 * marked in `host_copies` (may be NULL) become copies among the commands of the step they run before
 * (after the micro-batch block's last step when they end it). The caller frees the program with
 * vk_program_free(). */
tf_status vk_program_build(const tf_plan *plan, const vk_limits *limits, const bool *host_copies, vk_program *program);
void vk_program_free(vk_program *program);
/* Whether a device with `limits` runs attention in tiles (shaders/attention_tiled.comp) where the
 * heads allow: its shared memory holds the tiles and TIGHTFIT_VULKAN_TILED_ATTENTION is not 0
 * (vk_lower_attention.c). */
bool vk_attention_tiled(const vk_limits *limits);

/* ---- the state ---- */

typedef struct vk_region {
  VkBuffer buffer;
  VkDeviceMemory memory;
  int64_t bytes;     /* the plan's size */
  int64_t allocated; /* the VkDeviceMemory's size */
} vk_region;

typedef struct vk_host_buffer {
  VkBuffer buffer;
  VkDeviceMemory memory;
  void *mapped;
  int64_t bytes;
} vk_host_buffer;

/* A command buffer recorded for steps [begin, end) on one io half. */
typedef struct vk_recording {
  int32_t begin, end, io_slot;
  VkCommandBuffer commands;
} vk_recording;

#define VK_MAX_RECORDINGS 8
#define VK_MAX_HOST_BUFFERS 4 /* an offloaded plan's host region and staging (runtime/host_steps.h) */

typedef struct vk_state {
  /* vk_device.c */
  /* The shared device (tf_backend_vtable.open_shared) this state borrows its loader, instance,
   * device, queue, validation log and pipelines from; NULL when it opened its own. */
  struct vk_state *shared;
  /* A shared device's: `lock` serialises its borrowers' queue submissions and pipeline creation,
   * `log_lock` their use of the validation counters below (the messenger may report during a
   * submission, under `lock`); both initialised when has_lock. */
  pthread_mutex_t lock, log_lock;
  bool has_lock;
  void *loader; /* dlopen handle of libvulkan.so.1, never closed (vk_device_close) */
  vk_functions fn;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  bool validation;
  bool wide_bindings;          /* TIGHTFIT_VULKAN_WIDE_BINDINGS=1: operands bound to their region's end (vk_record.c) */
  int32_t validation_messages; /* errors and warnings the layer reported */
  char first_message[2048];    /* the first of those not yet reported */
  int32_t reported_messages;   /* how many of them an error status has carried already */
  VkPhysicalDevice physical;
  VkPhysicalDeviceProperties properties;
  VkPhysicalDeviceMemoryProperties memory_properties;
  uint32_t subgroup_size;     /* 0: the subgroup shader variants are not used (vk_limits) */
  char subgroup_refusal[256]; /* why the subgroup probe turned them off; "" when it did not */
  int64_t loop_limit;         /* see vk_limits */
  bool storage16;             /* see vk_limits */
  bool storage8;              /* see vk_limits */
  bool tiled_attention;       /* see vk_limits */
  bool tiled_wide;            /* see vk_limits */
  bool split_dx;              /* see vk_limits */
  bool split_columns;         /* see vk_limits */
  bool matmul_subgroups;      /* see vk_limits */
  bool matmul_quads;          /* see vk_limits */
  vk_big_matmul big_matmul;   /* see vk_limits */
  VkDevice device;
  uint32_t queue_family;
  uint32_t timestamp_bits; /* the queue family's timestampValidBits (0: no timestamps) */
  VkQueue queue;
  VkCommandPool command_pool;
  /* vk_memory.c */
  vk_host_buffer staging, run_state;
  VkCommandBuffer transfer;
  VkFence transfer_fence;
  int64_t region_bytes, region_asked, allocations, live_allocations; /* region_asked: the plan's bytes */
  vk_host_buffer hosts[VK_MAX_HOST_BUFFERS];                         /* alloc_host's, mapped */
  int32_t n_hosts;
  /* vk_pipelines.c */
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipeline_layout;
  VkShaderModule modules[VK_SHADER_COUNT];
  VkPipeline pipelines[VK_SHADER_COUNT];
  /* vk_record.c */
  const tf_plan *plan;
  vk_region *regions[TF_REGION_COUNT + 1]; /* [TF_REGION_HOST]: host_region when copies were taken */
  vk_region host_region;                   /* the host buffer holding the plan's host region */
  const bool *host_copies;                 /* per host step: recorded among the steps (take_host_copies) */
  vk_program program;
  VkDescriptorPool descriptor_pool;
  VkDescriptorSet *sets; /* per command and io half: sets[2 * command + half] */
  vk_recording recordings[VK_MAX_RECORDINGS];
  int32_t n_recordings;
  VkFence run_fence;
  bool run_pending;
  int32_t run_first, run_end; /* the commands [run_first, run_end) of the submission in flight */
  /* vk_profile.c (TIGHTFIT_VULKAN_PROFILE): timestamps around every command; NULL pool when off */
  VkQueryPool profile_pool;
  double *profile_ms;       /* per step, added over the runs */
  int64_t *profile_calls;   /* per step: how many runs timed it */
  uint64_t *profile_ticks;  /* 2 per command: where a run's timestamps are read */
  int32_t *profile_step;    /* per command: its step, or -1 for a host copy */
  double profile_copies_ms; /* the host copies' time, added over the runs */
  int32_t profile_copies;   /* how many host copies the program records */
  int64_t profile_runs;
} vk_state;

/* ---- vk_device.c ---- */
tf_status vk_device_open(vk_state *vk, int32_t device_index);
/* Makes `vk` use `shared`'s device (opened by vk_device_open, `shared->has_lock` set): the handles
 * are copied, the settings read from the environment as vk_device_open reads them (16-bit storage
 * only where the shared device has it), and a command pool of its own created. */
tf_status vk_device_borrow(vk_state *vk, vk_state *shared);
/* vkQueueSubmit of one batch, and vkDeviceWaitIdle, under the shared device's lock where `vk`
 * borrows one (its queue is externally synchronised). */
tf_status vk_queue_submit(vk_state *vk, const VkSubmitInfo *submit, VkFence fence);
void vk_device_idle(vk_state *vk);
/* Destroys the device and the instance (a borrowing state: its command pool only). Messages the
 * validation layer reports meanwhile (leaked objects) stay counted for vk_validation_status or
 * vk_validation_keep. */
void vk_device_close(vk_state *vk);
/* The backend contract's `capacity`: opens device options->device, measures it, closes it. */
tf_status vk_capacity(const tf_backend_options *options, tf_device_capacity *out);
/* An error status for a failed Vulkan call `what`, or NULL when result is VK_SUCCESS. */
tf_status vk_check(VkResult result, const char *what);
/* The validation layer's messages surface through this: every fallible entry point (vk_backend.c's
 * vtable, vk_capacity, tf_vulkan_list_devices) returns vk_validation_status(vk, its status).
 * It returns `status` when the layer reported nothing since the last call; else (freeing `status`)
 * an error naming how many messages and the first, with `status`'s code and message when the call
 * failed too, TF_ERR_INTERNAL when it did not. */
tf_status vk_validation_status(vk_state *vk, tf_status status);
/* For the void destroy: adds the messages no status carried to tf_vulkan_validation_unreported(). */
void vk_validation_keep(vk_state *vk);

/* ---- vk_memory.c ---- */
tf_status vk_memory_open(vk_state *vk); /* staging, run state, transfer command buffer */
void vk_memory_close(vk_state *vk);
tf_status vk_region_alloc(vk_state *vk, int64_t bytes, vk_region **out);
void vk_region_free(vk_state *vk, vk_region *region);
tf_status vk_region_upload(vk_state *vk, vk_region *region, int64_t offset, const void *host, int64_t bytes);
tf_status vk_region_download(vk_state *vk, vk_region *region, int64_t offset, void *host, int64_t bytes);
/* The one-off command buffer (vk->transfer): begun after a barrier on earlier compute and transfer
 * writes; ended, submitted and waited for (`to_host`: a copy's writes made visible to host reads). */
tf_status vk_transfer_begin(vk_state *vk);
tf_status vk_transfer_submit(vk_state *vk, bool to_host);
/* Host memory of `bytes` (zeroed, mapped) in a host-visible buffer (tf_backend_vtable.alloc_host). */
tf_status vk_host_alloc(vk_state *vk, int64_t bytes, void **host);
void vk_host_free(vk_state *vk, void *host);
/* The host buffer whose mapping starts at `host`, or NULL. */
const vk_host_buffer *vk_host_find(const vk_state *vk, const void *host);

/* ---- vk_pipelines.c ---- */
tf_status vk_pipelines_create(vk_state *vk);
void vk_pipelines_destroy(vk_state *vk);
const char *vk_shader_name(vk_shader shader);
/* The layouts and `shader`'s pipeline, created unless they exist (kept until vk_pipelines_destroy). */
tf_status vk_pipeline_ensure(vk_state *vk, vk_shader shader);

/* ---- vk_subgroup_probe.c ---- */
/* Where the subgroup variants are on, runs shaders/subgroup_probe.comp once and turns them off
 * (vk->subgroup_size 0, the reason in vk->subgroup_refusal) unless the device's lanes form the
 * clusters they assume. Needs the device, the run-state buffer and the transfer command buffer. */
tf_status vk_subgroup_probe(vk_state *vk);

/* ---- vk_record.c ---- */
tf_status vk_record_prepare(vk_state *vk, const tf_plan *plan, void *const regions[TF_REGION_COUNT]);
tf_status vk_record_run(vk_state *vk, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run);
tf_status vk_record_wait(vk_state *vk);
void vk_record_release(vk_state *vk);

/* ---- vk_profile.c ---- */
/* TIGHTFIT_VULKAN_PROFILE=FILE ("-": stderr): every command of the recordings runs alone (a barrier
 * before each) between two timestamps; after each run the times are added to their steps, and when
 * the plan is released FILE gets the time per op and the slowest steps (plan/step_profile.h). A
 * diagnostic: the barriers serialise what would overlap. */
/* Whether `physical` offers device extension `name`. */
bool vk_has_device_extension(const vk_state *vk, VkPhysicalDevice physical, const char *name);
bool vk_profile_wanted(void);
/* Creates the query pool for the program's commands; a device without timestamps is refused. */
tf_status vk_profile_start(vk_state *vk);
/* In a recording: reset the range's queries (before its first command), then a timestamp before and
 * after each command (vk_profile_mark with after false / true). */
void vk_profile_reset(const vk_state *vk, VkCommandBuffer commands, int32_t first, int32_t end);
void vk_profile_mark(const vk_state *vk, VkCommandBuffer commands, int32_t index, bool after);
/* After the submission of commands [first, end) completed: adds their times to their steps. */
tf_status vk_profile_collect(vk_state *vk, int32_t first, int32_t end);
/* Writes the tables (when any run was timed) and destroys the pool. */
void vk_profile_finish(vk_state *vk);

#endif
