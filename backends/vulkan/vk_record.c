/* Recording and running the lowered program.
 *
 * Descriptors: every dispatch gets its own descriptor set (two when it reads an io buffer: one per
 * half of the double buffer), written once in prepare. Each operand is bound as the sub-range
 * [offset, offset + bytes) of its region's VkBuffer, so a region may be larger than
 * maxStorageBufferRange: only one operand must fit under it (lowering refuses one that does not).
 *
 * Command buffers: the micro-batch block [0, micro_steps), the optimizer block and the forward
 * phase are each recorded once per io half in prepare and resubmitted by run(); any other range is
 * recorded on first use and kept (VK_MAX_RECORDINGS of them). Per-run values reach the shaders
 * through the host-visible run-state buffer, which run() writes after the previous submission has
 * finished (so a recorded command buffer never changes).
 *
 * Barriers: a command waits for earlier ones only when it must. The recorder tracks the byte ranges
 * read and written since the last barrier and puts a compute/transfer memory barrier before a
 * command that reads or writes what a pending command wrote, or writes what one reads. Each command
 * buffer starts with a barrier against everything submitted before it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

/* The run-state buffer as shaders/common.glsl declares it. */
typedef struct run_state_layout {
  uint32_t optimizer_step;
  uint32_t step_mix[2]; /* micro_step x 0x9E3779B97F4A7C15 (the dropout counter's mix) */
  uint32_t seed[2];
  float gradient_unscale; /* 2^-e for a loss scaled by 2^e: sgd/adamw take it out of the gradients */
  uint32_t reserved[2];
  float adam[VK_ADAM_SLOTS][2]; /* lr / (1 - beta1^t), sqrt(1 - beta2^t) */
} run_state_layout;

_Static_assert(sizeof(run_state_layout) <= TF_VULKAN_RUN_STATE_BYTES, "the run state must fit its buffer");

typedef struct byte_range {
  int32_t region;
  int64_t begin, end;
} byte_range;

typedef struct hazards {
  byte_range *reads, *writes;
  int32_t n_reads, n_writes, capacity;
} hazards;

/* The plan buffer a binding names on io half `half`, or -1 for the dummy. */
static int32_t buffer_on_half(const tf_plan *plan, int32_t id, int32_t half) {
  if (id < 0)
    return -1;
  if (half == 1 && plan->buffers[id].io_twin >= 0)
    id = plan->buffers[id].io_twin;
  return plan->buffers[id].bytes > 0 ? id : -1;
}

static bool uses_io_twin(const tf_plan *plan, const vk_command *c) {
  int32_t n = c->kind == VK_COMMAND_DISPATCH ? c->n_bindings : c->kind == VK_COMMAND_COPY ? 2 : 1;
  for (int32_t i = 0; i < n; i++)
    if (c->buffers[i] >= 0 && plan->buffers[c->buffers[i]].io_twin >= 0)
      return true;
  return false;
}

static void descriptor_of(const vk_state *vk, int32_t id, VkDescriptorBufferInfo *info) {
  if (id < 0) {
    info->buffer = vk->run_state.buffer;
    info->offset = 0;
    info->range = (VkDeviceSize)TF_VULKAN_RUN_STATE_BYTES;
    return;
  }
  const tf_plan_buffer *b = &vk->plan->buffers[id];
  info->buffer = vk->regions[b->region]->buffer;
  info->offset = (VkDeviceSize)b->offset;
  info->range = (VkDeviceSize)((b->bytes + 3) / 4 * 4);
  if (vk->wide_bindings && b->region < TF_REGION_COUNT) { // to the region's end (vk_region_alloc rounds it to 16 bytes)
    const uint64_t to_end = (uint64_t)(vk->regions[b->region]->bytes + 15) / 16 * 16 - (uint64_t)b->offset;
    const uint64_t most = vk->properties.limits.maxStorageBufferRange;
    if (to_end > info->range)
      info->range = (VkDeviceSize)(to_end < most ? to_end : most);
  }
}

static tf_status check_bindings(const vk_state *vk) {
  const tf_plan *plan = vk->plan;
  uint64_t align = vk->properties.limits.minStorageBufferOffsetAlignment;
  if (plan->alignment <= 0 || (uint64_t)plan->alignment % align != 0)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: the plan aligns buffers to %lld bytes but device '%s' binds storage buffers at "
                         "multiples of %llu; compile the plan for the vulkan target",
                         (long long)plan->alignment, vk->properties.deviceName, (unsigned long long)align);
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (plan->region_bytes[r] > 0 && !vk->regions[r])
      return tf_status_new(TF_ERR_INTERNAL, "vulkan: region %s was not allocated", tf_region_name((tf_region)r));
  return NULL;
}

/* In validation mode, names descriptor set `set` after its step, so that messages say which. */
static void name_set(const vk_state *vk, VkDescriptorSet set, int32_t command, int32_t half) {
  if (!vk->fn.SetDebugUtilsObjectNameEXT)
    return;
  int32_t step = 0;
  while (step + 1 < vk->plan->n_steps && vk->program.step_first[step + 1] <= command)
    step++;
  char name[256];
  snprintf(name, sizeof(name), "step %d '%s' (%s), command %d, io half %d", step, vk->plan->steps[step].name,
           tf_op_name(vk->plan->steps[step].op), command - vk->program.step_first[step], half);
  VkDebugUtilsObjectNameInfoEXT info = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT};
  info.objectType = VK_OBJECT_TYPE_DESCRIPTOR_SET;
  info.objectHandle = (uint64_t)set;
  info.pObjectName = name;
  vk->fn.SetDebugUtilsObjectNameEXT(vk->device, &info);
}

static tf_status allocate_sets(vk_state *vk) {
  const vk_program *program = &vk->program;
  uint32_t n_sets = 0;
  for (int32_t c = 0; c < program->n_commands; c++)
    if (program->commands[c].kind == VK_COMMAND_DISPATCH)
      n_sets += uses_io_twin(vk->plan, &program->commands[c]) ? 2 : 1;
  vk->sets = calloc((size_t)(program->n_commands > 0 ? 2 * program->n_commands : 1), sizeof(VkDescriptorSet));
  if (!vk->sets)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot hold %d descriptor sets", 2 * program->n_commands);
  if (n_sets == 0)
    return NULL;
  VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = n_sets * (VK_OPERANDS + 1)};
  VkDescriptorPoolCreateInfo pool = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool.maxSets = n_sets;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &size;
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.CreateDescriptorPool(vk->device, &pool, NULL, &vk->descriptor_pool), "vkCreateDescriptorPool"));
  for (int32_t c = 0; c < program->n_commands; c++) {
    const vk_command *command = &program->commands[c];
    if (command->kind != VK_COMMAND_DISPATCH)
      continue;
    int32_t halves = uses_io_twin(vk->plan, command) ? 2 : 1;
    for (int32_t half = 0; half < halves; half++) {
      VkDescriptorSetAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      info.descriptorPool = vk->descriptor_pool;
      info.descriptorSetCount = 1;
      info.pSetLayouts = &vk->set_layout;
      TF_RETURN_IF_ERROR(vk_check(vk->fn.AllocateDescriptorSets(vk->device, &info, &vk->sets[2 * c + half]),
                                  "vkAllocateDescriptorSets"));
      VkDescriptorBufferInfo buffers[VK_OPERANDS + 1];
      VkWriteDescriptorSet writes[VK_OPERANDS + 1];
      for (int32_t i = 0; i <= VK_OPERANDS; i++) {
        int32_t id =
            i < VK_OPERANDS && i < command->n_bindings ? buffer_on_half(vk->plan, command->buffers[i], half) : -1;
        descriptor_of(vk, i == VK_RUN_STATE_BINDING ? -1 : id, &buffers[i]);
        if (buffers[i].range > vk->properties.limits.maxStorageBufferRange)
          return tf_status_new(TF_ERR_UNSUPPORTED,
                               "vulkan: buffer '%s' (%llu bytes) exceeds the device's maxStorageBufferRange (%u)",
                               vk->plan->buffers[id].name, (unsigned long long)buffers[i].range,
                               vk->properties.limits.maxStorageBufferRange);
        VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = vk->sets[2 * c + half];
        w.dstBinding = (uint32_t)i;
        w.descriptorCount = 1;
        w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w.pBufferInfo = &buffers[i];
        writes[i] = w;
      }
      vk->fn.UpdateDescriptorSets(vk->device, VK_OPERANDS + 1, writes, 0, NULL);
      name_set(vk, vk->sets[2 * c + half], c, half);
    }
    if (halves == 1)
      vk->sets[2 * c + 1] = vk->sets[2 * c];
  }
  return NULL;
}

/* ---- barriers ---- */

static bool overlaps(const byte_range *list, int32_t n, const byte_range *r) {
  for (int32_t i = 0; i < n; i++)
    if (list[i].region == r->region && list[i].begin < r->end && r->begin < list[i].end)
      return true;
  return false;
}

static bool push_range(hazards *h, bool write, byte_range r) {
  int32_t *n = write ? &h->n_writes : &h->n_reads;
  byte_range **list = write ? &h->writes : &h->reads;
  if (*n == h->capacity) {
    int32_t capacity = h->capacity ? 2 * h->capacity : 64;
    byte_range *reads = realloc(h->reads, sizeof(byte_range) * (size_t)capacity);
    if (reads)
      h->reads = reads;
    byte_range *writes = realloc(h->writes, sizeof(byte_range) * (size_t)capacity);
    if (writes)
      h->writes = writes;
    if (!reads || !writes)
      return false;
    h->capacity = capacity;
  }
  (*list)[(*n)++] = r;
  return true;
}

static void barrier(const vk_state *vk, VkCommandBuffer commands) {
  VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                    VK_ACCESS_TRANSFER_WRITE_BIT;
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk->fn.CmdPipelineBarrier(commands, stages, stages, 0, 1, &b, 0, NULL, 0, NULL);
}

/* Makes the recorded copies' writes to the host region visible to the host's reads after the wait. */
static void host_visible(const vk_state *vk, VkCommandBuffer commands) {
  VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk->fn.CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, NULL, 0,
                            NULL);
}

/* The ranges command `c` touches on io half `half`; returns how many (at most VK_OPERANDS + 1).
 * A dispatch also reads the run-state buffer (binding VK_RUN_STATE_BINDING), which also stands in
 * for absent operands (the dummy binding): a shader that may write such a slot counts as writing it,
 * as the validation layer's synchronisation checks count it, so the next dispatch waits. */
static int32_t ranges_of(const vk_state *vk, const vk_command *c, int32_t half, byte_range *ranges, bool *written) {
  int32_t n = c->kind == VK_COMMAND_DISPATCH ? c->n_bindings : c->kind == VK_COMMAND_COPY ? 2 : 1;
  uint32_t writes = c->kind == VK_COMMAND_DISPATCH ? c->writes : c->kind == VK_COMMAND_COPY ? 0x2u : 0x1u;
  const byte_range run_state = {.region = TF_REGION_HOST + 1, .begin = 0, .end = 1};
  int32_t kept = 0;
  bool dummy_written = false;
  for (int32_t i = 0; i < n; i++) {
    int32_t id = buffer_on_half(vk->plan, c->buffers[i], half);
    if (id < 0) {
      dummy_written = dummy_written || ((writes >> i) & 1u);
      continue;
    }
    const tf_plan_buffer *b = &vk->plan->buffers[id];
    byte_range r = {.region = b->region, .begin = b->offset, .end = b->offset + b->bytes};
    ranges[kept] = r;
    written[kept++] = (writes >> i) & 1u;
  }
  if (c->kind == VK_COMMAND_DISPATCH) {
    ranges[kept] = run_state;
    written[kept++] = dummy_written;
  }
  return kept;
}

static void record_command(const vk_state *vk, VkCommandBuffer commands, int32_t index, int32_t half) {
  const vk_command *c = &vk->program.commands[index];
  const tf_plan *plan = vk->plan;
  if (c->kind == VK_COMMAND_FILL) {
    const tf_plan_buffer *b = &plan->buffers[buffer_on_half(plan, c->buffers[0], half)];
    vk->fn.CmdFillBuffer(commands, vk->regions[b->region]->buffer, (VkDeviceSize)b->offset,
                         (VkDeviceSize)((b->bytes + 3) / 4 * 4), 0);
    return;
  }
  if (c->kind == VK_COMMAND_COPY) {
    const tf_plan_buffer *from = &plan->buffers[buffer_on_half(plan, c->buffers[0], half)];
    const tf_plan_buffer *to = &plan->buffers[buffer_on_half(plan, c->buffers[1], half)];
    VkBufferCopy copy = {
        .srcOffset = (VkDeviceSize)from->offset, .dstOffset = (VkDeviceSize)to->offset, .size = (VkDeviceSize)c->bytes};
    vk->fn.CmdCopyBuffer(commands, vk->regions[from->region]->buffer, vk->regions[to->region]->buffer, 1, &copy);
    return;
  }
  vk->fn.CmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipelines[c->shader]);
  vk->fn.CmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline_layout, 0, 1,
                               &vk->sets[2 * index + half], 0, NULL);
  vk->fn.CmdPushConstants(commands, vk->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_WORDS * 4, c->push);
  vk->fn.CmdDispatch(commands, c->groups[0], c->groups[1], c->groups[2]);
}

static tf_status record(vk_state *vk, int32_t begin, int32_t end, int32_t half, VkCommandBuffer commands) {
  VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  TF_RETURN_IF_ERROR(vk_check(vk->fn.BeginCommandBuffer(commands, &info), "vkBeginCommandBuffer"));
  barrier(vk, commands);
  hazards h = {.reads = NULL, .writes = NULL, .n_reads = 0, .n_writes = 0, .capacity = 0};
  bool ok = true;
  const vk_program *program = &vk->program;
  vk_profile_reset(vk, commands, program->step_first[begin], program->step_first[end]);
  for (int32_t index = program->step_first[begin]; index < program->step_first[end] && ok; index++) {
    byte_range ranges[VK_OPERANDS + 1];
    bool written[VK_OPERANDS + 1];
    int32_t n = ranges_of(vk, &program->commands[index], half, ranges, written);
    bool wait = vk->profile_pool != VK_NULL_HANDLE; /* profiling: every command alone */
    for (int32_t i = 0; i < n && !wait; i++)
      wait = overlaps(h.writes, h.n_writes, &ranges[i]) || (written[i] && overlaps(h.reads, h.n_reads, &ranges[i]));
    if (wait) {
      barrier(vk, commands);
      h.n_reads = h.n_writes = 0;
    }
    vk_profile_mark(vk, commands, index, false);
    record_command(vk, commands, index, half);
    vk_profile_mark(vk, commands, index, true);
    for (int32_t i = 0; i < n && ok; i++)
      ok = push_range(&h, written[i], ranges[i]);
  }
  free(h.reads);
  free(h.writes);
  if (vk->host_copies)
    host_visible(vk, commands);
  if (!ok)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot track the hazards of steps [%d, %d)", begin, end);
  return vk_check(vk->fn.EndCommandBuffer(commands), "vkEndCommandBuffer");
}

/* The io half a range really depends on: 0 when none of its commands reads an io buffer. */
static int32_t effective_half(const vk_state *vk, int32_t begin, int32_t end, int32_t io_slot) {
  if ((io_slot & 1) == 0)
    return 0;
  for (int32_t c = vk->program.step_first[begin]; c < vk->program.step_first[end]; c++)
    if (uses_io_twin(vk->plan, &vk->program.commands[c]))
      return 1;
  return 0;
}

/* The recording of [begin, end) on `half`, recorded now if it does not exist. */
static tf_status recording_for(vk_state *vk, int32_t begin, int32_t end, int32_t half, VkCommandBuffer *out) {
  for (int32_t i = 0; i < vk->n_recordings; i++) {
    const vk_recording *r = &vk->recordings[i];
    if (r->begin == begin && r->end == end && r->io_slot == half) {
      *out = r->commands;
      return NULL;
    }
  }
  vk_recording *r;
  if (vk->n_recordings < VK_MAX_RECORDINGS) {
    r = &vk->recordings[vk->n_recordings];
    VkCommandBufferAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    info.commandPool = vk->command_pool;
    info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    info.commandBufferCount = 1;
    TF_RETURN_IF_ERROR(
        vk_check(vk->fn.AllocateCommandBuffers(vk->device, &info, &r->commands), "vkAllocateCommandBuffers"));
    vk->n_recordings++;
  } else {
    // Full: re-record the last ad-hoc one (the blocks recorded in prepare come first and stay).
    TF_RETURN_IF_ERROR(vk_record_wait(vk));
    r = &vk->recordings[VK_MAX_RECORDINGS - 1];
    TF_RETURN_IF_ERROR(vk_check(vk->fn.ResetCommandBuffer(r->commands, 0), "vkResetCommandBuffer"));
  }
  r->begin = begin;
  r->end = end;
  r->io_slot = half;
  tf_status status = record(vk, begin, end, half, r->commands);
  if (status) { // half-recorded: never found again (re-recorded next time)
    r->begin = r->end = -1;
    return status;
  }
  *out = r->commands;
  return NULL;
}

tf_status vk_record_prepare(vk_state *vk, const tf_plan *plan, void *const regions[TF_REGION_COUNT]) {
  vk->plan = plan;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    vk->regions[r] = regions[r];
  vk->regions[TF_REGION_HOST] = vk->host_copies ? &vk->host_region : NULL;
  TF_RETURN_IF_ERROR(check_bindings(vk));
  vk_limits limits = {.max_storage_range = vk->properties.limits.maxStorageBufferRange,
                      .max_shared_bytes = vk->properties.limits.maxComputeSharedMemorySize,
                      .subgroup_size = vk->subgroup_size,
                      .loop_limit = vk->loop_limit,
                      .storage16 = vk->storage16,
                      .storage8 = vk->storage8,
                      .tiled_attention = vk->tiled_attention,
                      .tiled_wide = vk->tiled_wide,
                      .split_dx = vk->split_dx,
                      .split_columns = vk->split_columns,
                      .matmul_subgroups = vk->matmul_subgroups,
                      .matmul_quads = vk->matmul_quads,
                      .big_matmul = vk->big_matmul};
  TF_RETURN_IF_ERROR(vk_program_build(plan, &limits, vk->host_copies, &vk->program));
  if (vk_profile_wanted())
    TF_RETURN_IF_ERROR(vk_profile_start(vk));
  TF_RETURN_IF_ERROR(vk_pipelines_create(vk));
  TF_RETURN_IF_ERROR(allocate_sets(vk));
  VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  TF_RETURN_IF_ERROR(vk_check(vk->fn.CreateFence(vk->device, &fence, NULL, &vk->run_fence), "vkCreateFence"));
  int32_t forward_end = 0;
  while (forward_end < plan->n_steps && plan->steps[forward_end].phase == TF_PHASE_FORWARD)
    forward_end++;
  const int32_t blocks[3][2] = {{0, plan->micro_steps}, {plan->micro_steps, plan->n_steps}, {0, forward_end}};
  for (int b = 0; b < 3; b++)
    for (int32_t half = 0; half < 2; half++) {
      if (blocks[b][0] >= blocks[b][1])
        continue;
      VkCommandBuffer ignored;
      TF_RETURN_IF_ERROR(recording_for(vk, blocks[b][0], blocks[b][1],
                                       effective_half(vk, blocks[b][0], blocks[b][1], half), &ignored));
    }
  return NULL;
}

static void write_run_state(vk_state *vk, const tf_run_state *run) {
  run_state_layout state;
  memset(&state, 0, sizeof(state));
  int64_t t = run->optimizer_step > 0 ? run->optimizer_step : 1;
  state.optimizer_step = (uint32_t)t;
  uint64_t mix = (uint64_t)run->micro_step * 0x9E3779B97F4A7C15ull;
  state.step_mix[0] = (uint32_t)mix;
  state.step_mix[1] = (uint32_t)(mix >> 32);
  state.seed[0] = (uint32_t)run->seed;
  state.seed[1] = (uint32_t)(run->seed >> 32);
  state.gradient_unscale = (float)ldexp(1.0, -run->loss_scale_log2);
  // As kernels/cpu/optimizer.c: lr / (1 - beta1^t) and sqrt(1 - beta2^t) in double from the float
  // attributes, then rounded once.
  for (int32_t s = 0; s < vk->program.n_adam_slots; s++) {
    const float *key = vk->program.adam_key[s];
    state.adam[s][0] = (float)((double)key[0] / (1.0 - pow((double)key[1], (double)t)));
    state.adam[s][1] = (float)sqrt(1.0 - pow((double)key[2], (double)t));
  }
  memcpy(vk->run_state.mapped, &state, sizeof(state));
}

tf_status vk_record_run(vk_state *vk, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  if (!vk->plan || begin < 0 || end > vk->plan->n_steps || begin > end)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: cannot run steps [%d, %d) of a plan of %d steps", begin, end,
                         vk->plan ? vk->plan->n_steps : 0);
  if (vk->program.step_first[begin] == vk->program.step_first[end])
    return NULL;
  VkCommandBuffer commands;
  TF_RETURN_IF_ERROR(recording_for(vk, begin, end, effective_half(vk, begin, end, io_slot), &commands));
  // The run state is read by the previous submission until it completes.
  TF_RETURN_IF_ERROR(vk_record_wait(vk));
  write_run_state(vk, run);
  VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.ResetFences(vk->device, 1, &vk->run_fence), "vkResetFences"));
  TF_RETURN_IF_ERROR(vk_queue_submit(vk, &submit, vk->run_fence));
  vk->run_pending = true;
  vk->run_first = vk->program.step_first[begin];
  vk->run_end = vk->program.step_first[end];
  return NULL;
}

tf_status vk_record_wait(vk_state *vk) {
  if (!vk->run_pending)
    return NULL;
  vk->run_pending = false;
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.WaitForFences(vk->device, 1, &vk->run_fence, VK_TRUE, UINT64_MAX), "vkWaitForFences"));
  return vk_profile_collect(vk, vk->run_first, vk->run_end);
}

void vk_record_release(vk_state *vk) {
  if (!vk->device)
    return;
  tf_status_free(vk_record_wait(vk)); // the last run's timestamps collected before the profile is written
  vk_device_idle(vk);
  vk_profile_finish(vk);
  for (int32_t i = 0; i < vk->n_recordings; i++)
    vk->fn.FreeCommandBuffers(vk->device, vk->command_pool, 1, &vk->recordings[i].commands);
  vk->n_recordings = 0;
  if (vk->run_fence)
    vk->fn.DestroyFence(vk->device, vk->run_fence, NULL);
  vk->run_fence = VK_NULL_HANDLE;
  if (vk->descriptor_pool)
    vk->fn.DestroyDescriptorPool(vk->device, vk->descriptor_pool, NULL);
  vk->descriptor_pool = VK_NULL_HANDLE;
  free(vk->sets);
  vk->sets = NULL;
  vk_program_free(&vk->program);
}
