/* Compute pipelines from the SPIR-V embedded at build time (backends/vulkan/CMakeLists.txt turns
 * each shader variant of shaders/ into a C array). Every pipeline shares one layout: descriptor set 0
 * with VK_OPERANDS storage buffers plus the run state, and 128 bytes of push constants. Only the
 * shaders a plan uses are compiled, once, in prepare; on a shared device (open_shared) once for all
 * the states that borrow it. */
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define VK_SHADER_EXTERN(name)                                                                                         \
  extern const uint32_t tf_vk_spirv_##name[];                                                                          \
  extern const size_t tf_vk_spirv_##name##_bytes;
VK_SHADER_LIST(VK_SHADER_EXTERN)
#undef VK_SHADER_EXTERN

typedef struct embedded_shader {
  const char *name;
  const uint32_t *code;
  const size_t *bytes;
} embedded_shader;

static const embedded_shader shaders[VK_SHADER_COUNT] = {
#define VK_SHADER_ROW(shader)                                                                                          \
  [VK_SHADER_##shader] = {.name = #shader, .code = tf_vk_spirv_##shader, .bytes = &tf_vk_spirv_##shader##_bytes},
    VK_SHADER_LIST(VK_SHADER_ROW)
#undef VK_SHADER_ROW
};

const char *vk_shader_name(vk_shader shader) {
  return (int)shader >= 0 && shader < VK_SHADER_COUNT ? shaders[shader].name : "?";
}

static tf_status create_layouts(vk_state *vk) {
  VkDescriptorSetLayoutBinding bindings[VK_OPERANDS + 1];
  memset(bindings, 0, sizeof(bindings));
  for (uint32_t i = 0; i <= VK_OPERANDS; i++) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set.bindingCount = VK_OPERANDS + 1;
  set.pBindings = bindings;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.CreateDescriptorSetLayout(vk->device, &set, NULL, &vk->set_layout),
                              "vkCreateDescriptorSetLayout"));
  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = VK_PUSH_WORDS * 4};
  VkPipelineLayoutCreateInfo layout = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &vk->set_layout;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  return vk_check(vk->fn.CreatePipelineLayout(vk->device, &layout, NULL, &vk->pipeline_layout),
                  "vkCreatePipelineLayout");
}

static tf_status create_pipeline(vk_state *vk, vk_shader shader) {
  VkShaderModuleCreateInfo module = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module.codeSize = *shaders[shader].bytes;
  module.pCode = shaders[shader].code;
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.CreateShaderModule(vk->device, &module, NULL, &vk->modules[shader]), "vkCreateShaderModule"));
  VkComputePipelineCreateInfo info = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = vk->modules[shader];
  info.stage.pName = "main";
  info.layout = vk->pipeline_layout;
  tf_status status =
      vk_check(vk->fn.CreateComputePipelines(vk->device, VK_NULL_HANDLE, 1, &info, NULL, &vk->pipelines[shader]),
               "vkCreateComputePipelines");
  if (status) { // a later try creates the module again
    vk->fn.DestroyShaderModule(vk->device, vk->modules[shader], NULL);
    vk->modules[shader] = VK_NULL_HANDLE;
    vk->pipelines[shader] = VK_NULL_HANDLE;
  }
  return tf_status_prefix(status, "shader '%s'", shaders[shader].name);
}

/* The layouts, and `shader`'s pipeline unless `shader` is VK_SHADER_COUNT, in `vk` itself. */
static tf_status ensure_own(vk_state *vk, vk_shader shader) {
  if (!vk->pipeline_layout)
    TF_RETURN_IF_ERROR(create_layouts(vk));
  return shader == VK_SHADER_COUNT || vk->pipelines[shader] ? NULL : create_pipeline(vk, shader);
}

/* A borrowing state takes the shared device's layouts and pipelines: each compiled once for all
 * the states that borrow it. */
tf_status vk_pipeline_ensure(vk_state *vk, vk_shader shader) {
  if (!vk->shared)
    return ensure_own(vk, shader);
  if (vk->pipeline_layout && (shader == VK_SHADER_COUNT || vk->pipelines[shader]))
    return NULL;
  vk_state *shared = vk->shared;
  pthread_mutex_lock(&shared->lock);
  tf_status status = ensure_own(shared, shader);
  pthread_mutex_unlock(&shared->lock);
  TF_RETURN_IF_ERROR(status);
  vk->set_layout = shared->set_layout;
  vk->pipeline_layout = shared->pipeline_layout;
  if (shader != VK_SHADER_COUNT)
    vk->pipelines[shader] = shared->pipelines[shader];
  return NULL;
}

tf_status vk_pipelines_create(vk_state *vk) {
  TF_RETURN_IF_ERROR(vk_pipeline_ensure(vk, VK_SHADER_COUNT));
  bool used[VK_SHADER_COUNT] = {false};
  for (int32_t c = 0; c < vk->program.n_commands; c++)
    if (vk->program.commands[c].kind == VK_COMMAND_DISPATCH)
      used[vk->program.commands[c].shader] = true;
  for (int s = 0; s < VK_SHADER_COUNT; s++)
    if (used[s])
      TF_RETURN_IF_ERROR(vk_pipeline_ensure(vk, (vk_shader)s));
  return NULL;
}

void vk_pipelines_destroy(vk_state *vk) {
  if (vk->shared) { // the handles are the shared device's, destroyed by close_shared
    memset(vk->pipelines, 0, sizeof(vk->pipelines));
    vk->pipeline_layout = VK_NULL_HANDLE;
    vk->set_layout = VK_NULL_HANDLE;
    return;
  }
  if (!vk->device)
    return;
  for (int s = 0; s < VK_SHADER_COUNT; s++) {
    if (vk->pipelines[s])
      vk->fn.DestroyPipeline(vk->device, vk->pipelines[s], NULL);
    if (vk->modules[s])
      vk->fn.DestroyShaderModule(vk->device, vk->modules[s], NULL);
    vk->pipelines[s] = VK_NULL_HANDLE;
    vk->modules[s] = VK_NULL_HANDLE;
  }
  if (vk->pipeline_layout)
    vk->fn.DestroyPipelineLayout(vk->device, vk->pipeline_layout, NULL);
  if (vk->set_layout)
    vk->fn.DestroyDescriptorSetLayout(vk->device, vk->set_layout, NULL);
  vk->pipeline_layout = VK_NULL_HANDLE;
  vk->set_layout = VK_NULL_HANDLE;
}
