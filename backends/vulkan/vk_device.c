/* Opening a device: the loader (dlopen'ed), the instance (with the validation layer and a
 * messenger that counts its messages when TIGHTFIT_VULKAN_VALIDATION=1), the physical device by
 * index, a check of the limits the shaders rely on, the logical device and one compute queue; or
 * borrowing all of that from a shared device (tf_backend_vtable.open_shared), whose lock then
 * serialises the borrowers' use of the queue. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/vulkan/vk_internal.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

tf_status vk_check(VkResult result, const char *what) {
  if (result == VK_SUCCESS)
    return NULL;
  return tf_status_new(result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY
                           ? TF_ERR_OUT_OF_MEMORY
                           : TF_ERR_BACKEND,
                       "vulkan: %s failed (VkResult %d)", what, (int)result);
}

/* The validation counters of `vk` (a shared device's, or a state's own) are used under its
 * log_lock where it has one: states sharing a device may run on several threads. */
static void log_lock(vk_state *vk) {
  if (vk->has_lock)
    pthread_mutex_lock(&vk->log_lock);
}

static void log_unlock(vk_state *vk) {
  if (vk->has_lock)
    pthread_mutex_unlock(&vk->log_lock);
}

/* Counts warnings and errors; keeps the first that no status has carried yet, for the status that will. */
static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  vk_state *vk = user;
  if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
    return VK_FALSE;
  log_lock(vk);
  if (vk->validation_messages++ == vk->reported_messages)
    snprintf(vk->first_message, sizeof(vk->first_message), "%s", data && data->pMessage ? data->pMessage : "?");
  log_unlock(vk);
  return VK_FALSE;
}

tf_status vk_validation_status(vk_state *vk, tf_status status) {
  vk = vk->shared ? vk->shared : vk; // a borrowing state's messages are counted by the shared device's messenger
  log_lock(vk);
  const int32_t fresh = vk->validation_messages - vk->reported_messages;
  if (fresh == 0) {
    log_unlock(vk);
    return status;
  }
  vk->reported_messages = vk->validation_messages;
  tf_status reported =
      tf_status_new(status ? tf_status_code(status) : TF_ERR_INTERNAL,
                    "vulkan: the validation layer reported %d message(s); the first: %s%s%s", fresh, vk->first_message,
                    status ? "; and the call failed: " : "", tf_status_message(status));
  log_unlock(vk);
  tf_status_free(status);
  return reported;
}

/* Validation messages that no status carried, over every device this process closed
 * (tf_vulkan_validation_unreported). Process-wide, unlike everything else, because the backend's
 * destroy returns nothing and frees the state that counted them; the lock because sessions may be
 * destroyed on any thread. */
static pthread_mutex_t unreported_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t unreported_count;
static char unreported_first[sizeof(((vk_state *)NULL)->first_message)];

void vk_validation_keep(vk_state *vk) {
  vk = vk->shared ? vk->shared : vk;
  log_lock(vk);
  const int32_t fresh = vk->validation_messages - vk->reported_messages;
  vk->reported_messages = vk->validation_messages;
  if (fresh > 0) {
    pthread_mutex_lock(&unreported_lock);
    if (unreported_count == 0)
      snprintf(unreported_first, sizeof(unreported_first), "%s", vk->first_message);
    unreported_count += fresh;
    pthread_mutex_unlock(&unreported_lock);
  }
  log_unlock(vk);
}

int32_t tf_vulkan_validation_unreported(char *first, size_t size) {
  pthread_mutex_lock(&unreported_lock);
  const int32_t count = unreported_count;
  if (first && size > 0)
    snprintf(first, size, "%s", count ? unreported_first : "");
  pthread_mutex_unlock(&unreported_lock);
  return count;
}

/* The Vulkan loader: TIGHTFIT_VULKAN_LOADER (a path) when set, else libvulkan.so.1 from the system. */
static tf_status open_loader(vk_state *vk) {
  const char *chosen = getenv("TIGHTFIT_VULKAN_LOADER");
  const char *names[] = {"libvulkan.so.1", "libvulkan.so"};
  if (chosen && chosen[0])
    vk->loader = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !vk->loader && !(chosen && chosen[0]); i++)
    vk->loader = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!vk->loader)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: no Vulkan loader (%s could not be opened: %s); install libvulkan1 and a driver "
                         "(e.g. mesa-vulkan-drivers)",
                         chosen && chosen[0] ? chosen : "libvulkan.so.1", dlerror());
  // POSIX guarantees that a function pointer survives the round trip through void *.
  void *symbol = dlsym(vk->loader, "vkGetInstanceProcAddr");
  memcpy(&vk->fn.GetInstanceProcAddr, &symbol, sizeof(symbol));
  if (!vk->fn.GetInstanceProcAddr)
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: the loader has no vkGetInstanceProcAddr");
#define LOAD_GLOBAL(name)                                                                                              \
  vk->fn.name = (PFN_vk##name)vk->fn.GetInstanceProcAddr(NULL, "vk" #name);                                            \
  if (!vk->fn.name)                                                                                                    \
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: the loader lacks vk" #name);
  VK_GLOBAL_FUNCTIONS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
  return NULL;
}

static bool has_layer(vk_state *vk, const char *name) {
  uint32_t count = 0;
  if (vk->fn.EnumerateInstanceLayerProperties(&count, NULL) != VK_SUCCESS || count == 0)
    return false;
  VkLayerProperties *layers = calloc(count, sizeof(VkLayerProperties));
  bool found = false;
  if (layers && vk->fn.EnumerateInstanceLayerProperties(&count, layers) == VK_SUCCESS)
    for (uint32_t i = 0; i < count && !found; i++)
      found = strcmp(layers[i].layerName, name) == 0;
  free(layers);
  return found;
}

static tf_status create_instance(vk_state *vk) {
  const char *requested = getenv("TIGHTFIT_VULKAN_VALIDATION");
  vk->validation = requested && strcmp(requested, "1") == 0;
  if (vk->validation && !has_layer(vk, VALIDATION_LAYER))
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: TIGHTFIT_VULKAN_VALIDATION=1 but the layer %s is not installed "
                         "(vulkan-validationlayers)",
                         VALIDATION_LAYER);
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "tightfit",
                           .applicationVersion = 1,
                           .pEngineName = "tightfit",
                           .engineVersion = 1,
                           .apiVersion = VK_API_VERSION_1_1};
  const char *layers[] = {VALIDATION_LAYER};
  const char *extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
  VkDebugUtilsMessengerCreateInfoEXT messenger = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = on_message;
  messenger.pUserData = vk;
  // Synchronization validation too: it checks the barriers vk_record.c places between commands. Not
  // with wide bindings: its hazards are the descriptors' ranges, which then overlap the neighbours'.
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.pNext = &messenger;
  features.enabledValidationFeatureCount = vk->wide_bindings ? 0 : 1;
  features.pEnabledValidationFeatures = enables;
  VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  if (vk->validation) {
    // Chained, the messenger also hears vkCreateInstance and vkDestroyInstance.
    info.pNext = &features;
    info.enabledLayerCount = 1;
    info.ppEnabledLayerNames = layers;
    info.enabledExtensionCount = 2;
    info.ppEnabledExtensionNames = extensions;
  }
  VkResult result = vk->fn.CreateInstance(&info, NULL, &vk->instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: no Vulkan 1.1 driver is installed (VK_ERROR_INCOMPATIBLE_DRIVER)");
  TF_RETURN_IF_ERROR(vk_check(result, "vkCreateInstance"));
#define LOAD_INSTANCE(name)                                                                                            \
  vk->fn.name = (PFN_vk##name)vk->fn.GetInstanceProcAddr(vk->instance, "vk" #name);                                    \
  if (!vk->fn.name)                                                                                                    \
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: the instance lacks vk" #name);
  VK_INSTANCE_FUNCTIONS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
  if (vk->validation) {
    vk->fn.CreateDebugUtilsMessengerEXT =
        (PFN_vkCreateDebugUtilsMessengerEXT)vk->fn.GetInstanceProcAddr(vk->instance, "vkCreateDebugUtilsMessengerEXT");
    vk->fn.DestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)vk->fn.GetInstanceProcAddr(
        vk->instance, "vkDestroyDebugUtilsMessengerEXT");
    vk->fn.SetDebugUtilsObjectNameEXT =
        (PFN_vkSetDebugUtilsObjectNameEXT)vk->fn.GetInstanceProcAddr(vk->instance, "vkSetDebugUtilsObjectNameEXT");
    if (!vk->fn.CreateDebugUtilsMessengerEXT || !vk->fn.DestroyDebugUtilsMessengerEXT ||
        !vk->fn.SetDebugUtilsObjectNameEXT)
      return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: %s lacks the debug messenger",
                           VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    TF_RETURN_IF_ERROR(vk_check(vk->fn.CreateDebugUtilsMessengerEXT(vk->instance, &messenger, NULL, &vk->messenger),
                                "vkCreateDebugUtilsMessengerEXT"));
  }
  return NULL;
}

/* The limits the shaders and the recorder rely on, each named when a device falls short. */
static tf_status check_limits(const VkPhysicalDeviceProperties *p) {
  const VkPhysicalDeviceLimits *l = &p->limits;
  struct {
    const char *name;
    uint64_t have, need;
  } checks[] = {
      {.name = "maxPerStageDescriptorStorageBuffers",
       .have = l->maxPerStageDescriptorStorageBuffers,
       .need = VK_OPERANDS + 1},
      {.name = "maxDescriptorSetStorageBuffers", .have = l->maxDescriptorSetStorageBuffers, .need = VK_OPERANDS + 1},
      {.name = "maxPushConstantsSize", .have = l->maxPushConstantsSize, .need = VK_PUSH_WORDS * 4},
      {.name = "maxComputeWorkGroupInvocations", .have = l->maxComputeWorkGroupInvocations, .need = VK_INVOCATIONS},
      {.name = "maxComputeWorkGroupSize[0]", .have = l->maxComputeWorkGroupSize[0], .need = VK_INVOCATIONS},
      {.name = "maxComputeWorkGroupSize[1]", .have = l->maxComputeWorkGroupSize[1], .need = 16},
      {.name = "maxComputeSharedMemorySize", .have = l->maxComputeSharedMemorySize, .need = 16384},
      {.name = "maxComputeWorkGroupCount[0]", .have = l->maxComputeWorkGroupCount[0], .need = VK_GROUP_LIMIT},
      {.name = "maxComputeWorkGroupCount[1]", .have = l->maxComputeWorkGroupCount[1], .need = VK_GROUP_LIMIT},
      {.name = "maxComputeWorkGroupCount[2]", .have = l->maxComputeWorkGroupCount[2], .need = VK_GROUP_LIMIT},
  };
  for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
    if (checks[i].have < checks[i].need)
      return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: device '%s' has %s = %llu; tightfit's shaders need %llu",
                           p->deviceName, checks[i].name, (unsigned long long)checks[i].have,
                           (unsigned long long)checks[i].need);
  return NULL;
}

/* Whether a device's subgroups suit the *_sg shader variants (see usable_subgroup_size). */
static bool subgroup_variants_allowed(const VkPhysicalDeviceSubgroupProperties *subgroup) {
  VkSubgroupFeatureFlags needed =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  uint32_t size = subgroup->subgroupSize;
  return (subgroup->supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
         (subgroup->supportedOperations & needed) == needed && size >= 8 && (size & (size - 1)) == 0;
}

/* The subgroup size the *_sg shader variants may assume, or 0 when they must not run: they need
 * compute-stage subgroups with basic, arithmetic and shuffle operations and a power-of-two size of
 * at least 8 (their clusters of 8 lanes, see shaders/README.md). TIGHTFIT_VULKAN_SUBGROUPS=0 turns
 * them off (the tests run every op both ways). */
static uint32_t usable_subgroup_size(vk_state *vk) {
  const char *requested = getenv("TIGHTFIT_VULKAN_SUBGROUPS");
  if (requested && strcmp(requested, "0") == 0)
    return 0;
  VkPhysicalDeviceSubgroupProperties subgroup = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 properties = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties.pNext = &subgroup;
  vk->fn.GetPhysicalDeviceProperties2(vk->physical, &properties);
  return subgroup_variants_allowed(&subgroup) ? subgroup.subgroupSize : 0;
}

/* Whether the device allows 16-bit storage buffer access (VkPhysicalDevice16BitStorageFeatures), which
 * the f16/bf16 shader variants and the 16-bit layout moves need (shaders/common.glsl): enabled at
 * device creation when present. TIGHTFIT_VULKAN_16BIT=0 leaves it off (tests check the refusal). */
static bool storage16_of(const vk_state *vk, VkPhysicalDevice physical) {
  const char *requested = getenv("TIGHTFIT_VULKAN_16BIT");
  if (requested && strcmp(requested, "0") == 0)
    return false;
  VkPhysicalDevice16BitStorageFeatures storage = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage;
  vk->fn.GetPhysicalDeviceFeatures2(physical, &features);
  return storage.storageBuffer16BitAccess == VK_TRUE;
}

bool vk_has_device_extension(const vk_state *vk, VkPhysicalDevice physical, const char *name) {
  uint32_t count = 0;
  if (vk->fn.EnumerateDeviceExtensionProperties(physical, NULL, &count, NULL) != VK_SUCCESS || count == 0)
    return false;
  VkExtensionProperties *extensions = calloc(count, sizeof(VkExtensionProperties));
  bool found = false;
  if (extensions && vk->fn.EnumerateDeviceExtensionProperties(physical, NULL, &count, extensions) == VK_SUCCESS)
    for (uint32_t i = 0; i < count && !found; i++)
      found = strcmp(extensions[i].extensionName, name) == 0;
  free(extensions);
  return found;
}

/* Whether the device offers VK_KHR_8bit_storage's storageBuffer8BitAccess, which the byte layout moves
 * need (shaders/layout.comp's layout8: a bool mask expanded, sliced or concatenated): the extension is
 * enabled at device creation when present. TIGHTFIT_VULKAN_8BIT=0 leaves it off (a test checks the
 * refusal). */
static bool storage8_of(const vk_state *vk, VkPhysicalDevice physical) {
  const char *requested = getenv("TIGHTFIT_VULKAN_8BIT");
  if ((requested && strcmp(requested, "0") == 0) ||
      !vk_has_device_extension(vk, physical, VK_KHR_8BIT_STORAGE_EXTENSION_NAME))
    return false;
  VkPhysicalDevice8BitStorageFeaturesKHR storage = {.sType =
                                                        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &storage;
  vk->fn.GetPhysicalDeviceFeatures2(physical, &features);
  return storage.storageBuffer8BitAccess == VK_TRUE;
}

/* Whether attention may take the tiled shaders (shaders/attention_tiled.comp) where they apply, and
 * their 32-row blocks: TIGHTFIT_VULKAN_TILED_ATTENTION=0 keeps shaders/attention.comp, =16 the tiled
 * shaders' 16-row blocks only (a GPU run times each, the tests check each). */
static void tiled_attention_of(vk_state *vk) {
  const char *requested = getenv("TIGHTFIT_VULKAN_TILED_ATTENTION");
  vk->tiled_attention = !(requested && strcmp(requested, "0") == 0);
  vk->tiled_wide = vk->tiled_attention && !(requested && strcmp(requested, "16") == 0);
}

/* Whether the fused loss head's dx products may run in slices of the classes where the plan gives
 * them the workspace (core/linear_loss.h): TIGHTFIT_VULKAN_SPLIT_DX=0 runs each as one product (a GPU
 * run times both; the workspace stays reserved either way). */
static bool split_dx_allowed(void) {
  const char *requested = getenv("TIGHTFIT_VULKAN_SPLIT_DX");
  return !(requested && strcmp(requested, "0") == 0);
}

/* Whether long column sums (sum_to's bias gradients, the norms' dgamma and dbeta) may run split in
 * chunks where the plan gives them the workspace (core/workspace.h): TIGHTFIT_VULKAN_SPLIT_COLUMNS=0
 * keeps one pass of lanes per column (a GPU run times both; the workspace stays reserved). */
static bool split_columns_allowed(void) {
  const char *requested = getenv("TIGHTFIT_VULKAN_SPLIT_COLUMNS");
  return !(requested && strcmp(requested, "0") == 0);
}

/* Whether matmul.comp's big-tile variant reads operands whose quads are aligned as vec4 (flag bits 5
 * and 6): TIGHTFIT_VULKAN_MATMUL_QUADS=0 keeps element loads (a GPU run times both), 1 or unset
 * reads quads; another value is refused. */
static tf_status matmul_quads_of(bool *quads) {
  const char *requested = getenv("TIGHTFIT_VULKAN_MATMUL_QUADS");
  *quads = !requested || !*requested || strcmp(requested, "1") == 0;
  if (!*quads && strcmp(requested, "0") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: TIGHTFIT_VULKAN_MATMUL_QUADS='%s'; use 0 or 1", requested);
  return NULL;
}

/* Which products take matmul.comp's big-tile variant (vk_limits): TIGHTFIT_VULKAN_BIG_MATMUL=0 none,
 * =1 or unset the large ones, =all every one (the tests' way to run it over every case). */
static tf_status big_matmul_of(vk_big_matmul *mode) {
  const char *requested = getenv("TIGHTFIT_VULKAN_BIG_MATMUL");
  if (!requested || !*requested)
    *mode = VK_BIG_MATMUL_LARGE;
  else if (strcmp(requested, "0") == 0)
    *mode = VK_BIG_MATMUL_OFF;
  else if (strcmp(requested, "1") == 0)
    *mode = VK_BIG_MATMUL_LARGE;
  else if (strcmp(requested, "all") == 0)
    *mode = VK_BIG_MATMUL_ALL;
  else
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: TIGHTFIT_VULKAN_BIG_MATMUL='%s'; use 0, 1 or all",
                         requested);
  return NULL;
}

/* Whether products take matmul.comp's subgroup variant where the subgroup variants run:
 * TIGHTFIT_VULKAN_MATMUL_SUBGROUPS=1 or 0, else on a CPU device (lavapipe: 7.8-8.3 GFLOP/s against
 * the plain variant's 5.4 at 1024^3) but not on a GPU: on NVIDIA's driver the plain variant was faster
 * at every shape measured, 7,528 GFLOP/s against 2,303 for a weight gradient's 768 x 8192 x 768 on
 * the H100 (sixth lend) and 10,968 against 7,885 for 256 x 768 x 50,257 on the H200. */
static tf_status matmul_subgroups_of(const VkPhysicalDeviceProperties *properties, bool *out) {
  const char *requested = getenv("TIGHTFIT_VULKAN_MATMUL_SUBGROUPS");
  if (!requested || !*requested)
    *out = properties->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  else if (strcmp(requested, "0") == 0 || strcmp(requested, "1") == 0)
    *out = requested[0] == '1';
  else
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: TIGHTFIT_VULKAN_MATMUL_SUBGROUPS='%s'; use 0 or 1",
                         requested);
  return NULL;
}

/* What a state reads from its device and the environment when it is created, whether it opens
 * the device or borrows a shared one (16-bit storage aside: a device feature, set before). */
static tf_status read_settings(vk_state *vk) {
  vk->subgroup_size = usable_subgroup_size(vk);
  tiled_attention_of(vk);
  vk->split_dx = split_dx_allowed();
  vk->split_columns = split_columns_allowed();
  TF_RETURN_IF_ERROR(matmul_quads_of(&vk->matmul_quads));
  TF_RETURN_IF_ERROR(big_matmul_of(&vk->big_matmul));
  TF_RETURN_IF_ERROR(matmul_subgroups_of(&vk->properties, &vk->matmul_subgroups));
  // llvmpipe (lavapipe) ends every loop of a shader invocation once the invocation has run 65,535
  // loop iterations in all (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), silently: the lowering refuses
  // steps that could need more (vk_check_loops) rather than compute wrong results. (Measured: with
  // the refusal lifted, softmax over 30,000 classes by one invocation a row gives zeros past
  // class ~25,000.)
  vk->loop_limit = strncmp(vk->properties.deviceName, "llvmpipe", 8) == 0 ? 65535 : 0;
  return NULL;
}

static tf_status choose_device(vk_state *vk, int32_t index) {
  uint32_t count = 0;
  TF_RETURN_IF_ERROR(
      vk_check(vk->fn.EnumeratePhysicalDevices(vk->instance, &count, NULL), "vkEnumeratePhysicalDevices"));
  if (count == 0)
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: the loader found no Vulkan device (is a driver such as "
                                             "mesa-vulkan-drivers installed?)");
  VkPhysicalDevice *devices = calloc(count, sizeof(VkPhysicalDevice));
  if (!devices)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot list %u devices", count);
  tf_status status =
      vk_check(vk->fn.EnumeratePhysicalDevices(vk->instance, &count, devices), "vkEnumeratePhysicalDevices");
  if (!status && (index < 0 || (uint32_t)index >= count)) {
    char names[1024] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < count && used < sizeof(names); i++) {
      VkPhysicalDeviceProperties p;
      vk->fn.GetPhysicalDeviceProperties(devices[i], &p);
      used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%u: %s", i ? ", " : "", i, p.deviceName);
    }
    status =
        tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: no device %d; this machine has %u (%s)", index, count, names);
  }
  if (!status)
    vk->physical = devices[index];
  free(devices);
  TF_RETURN_IF_ERROR(status);
  vk->fn.GetPhysicalDeviceProperties(vk->physical, &vk->properties);
  vk->fn.GetPhysicalDeviceMemoryProperties(vk->physical, &vk->memory_properties);
  if (vk->properties.apiVersion < VK_API_VERSION_1_1)
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: device '%s' supports Vulkan %u.%u; tightfit needs 1.1",
                         vk->properties.deviceName, VK_API_VERSION_MAJOR(vk->properties.apiVersion),
                         VK_API_VERSION_MINOR(vk->properties.apiVersion));
  TF_RETURN_IF_ERROR(check_limits(&vk->properties));
  vk->storage16 = storage16_of(vk, vk->physical);
  vk->storage8 = storage8_of(vk, vk->physical);
  TF_RETURN_IF_ERROR(read_settings(vk));
  uint32_t families = 0;
  vk->fn.GetPhysicalDeviceQueueFamilyProperties(vk->physical, &families, NULL);
  VkQueueFamilyProperties *family = calloc(families ? families : 1, sizeof(VkQueueFamilyProperties));
  if (!family)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot list queue families");
  vk->fn.GetPhysicalDeviceQueueFamilyProperties(vk->physical, &families, family);
  // Prefer a compute queue without graphics (a dedicated compute engine), else any compute queue.
  uint32_t chosen = UINT32_MAX;
  for (uint32_t i = 0; i < families; i++) {
    if (!(family[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || family[i].queueCount == 0)
      continue;
    if (chosen == UINT32_MAX || !(family[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      chosen = i;
  }
  if (chosen != UINT32_MAX)
    vk->timestamp_bits = family[chosen].timestampValidBits;
  free(family);
  if (chosen == UINT32_MAX)
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: device '%s' has no compute queue", vk->properties.deviceName);
  vk->queue_family = chosen;
  return NULL;
}

static tf_status create_command_pool(vk_state *vk) {
  VkCommandPoolCreateInfo pool = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = vk->queue_family;
  return vk_check(vk->fn.CreateCommandPool(vk->device, &pool, NULL, &vk->command_pool), "vkCreateCommandPool");
}

static tf_status create_device(vk_state *vk) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = vk->queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDevice16BitStorageFeatures storage = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  storage.storageBuffer16BitAccess = vk->storage16 ? VK_TRUE : VK_FALSE;
  VkPhysicalDevice8BitStorageFeaturesKHR bytes = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR};
  bytes.storageBuffer8BitAccess = VK_TRUE;
  const char *extensions[] = {VK_KHR_8BIT_STORAGE_EXTENSION_NAME};
  VkDeviceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &storage;
  if (vk->storage8) {
    storage.pNext = &bytes;
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
  }
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  TF_RETURN_IF_ERROR(vk_check(vk->fn.CreateDevice(vk->physical, &info, NULL, &vk->device), "vkCreateDevice"));
#define LOAD_DEVICE(name)                                                                                              \
  vk->fn.name = (PFN_vk##name)vk->fn.GetDeviceProcAddr(vk->device, "vk" #name);                                        \
  if (!vk->fn.name)                                                                                                    \
    return tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: device '%s' lacks vk" #name, vk->properties.deviceName);
  VK_DEVICE_FUNCTIONS(LOAD_DEVICE)
#undef LOAD_DEVICE
  vk->fn.GetDeviceQueue(vk->device, vk->queue_family, 0, &vk->queue);
  return create_command_pool(vk);
}

/* TIGHTFIT_VULKAN_WIDE_BINDINGS=1: each operand bound from its offset to its region's end (vk_record.c),
 * a testing switch. lavapipe checks every storage access against its binding (a read past it gives 0,
 * a write past it is dropped); a GPU without robust buffer access reads and writes the neighbouring
 * buffers there. Bound wide, lavapipe does as such a GPU would, and a shader that strays past its
 * operand fails the parity tests (with TIGHTFIT_POISON_ARENA=1 its reads meet NaNs). */
static tf_status wide_bindings_of(bool *wide) {
  const char *requested = getenv("TIGHTFIT_VULKAN_WIDE_BINDINGS");
  *wide = requested && strcmp(requested, "1") == 0;
  if (requested && *requested && strcmp(requested, "0") != 0 && strcmp(requested, "1") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: TIGHTFIT_VULKAN_WIDE_BINDINGS='%s'; use 0 or 1", requested);
  return NULL;
}

tf_status vk_device_open(vk_state *vk, int32_t device_index) {
  TF_RETURN_IF_ERROR(wide_bindings_of(&vk->wide_bindings));
  TF_RETURN_IF_ERROR(open_loader(vk));
  TF_RETURN_IF_ERROR(create_instance(vk));
  TF_RETURN_IF_ERROR(choose_device(vk, device_index));
  return create_device(vk);
}

tf_status vk_device_borrow(vk_state *vk, vk_state *shared) {
  if (!shared->device || !shared->has_lock)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "vulkan: the shared device given is not open");
  vk->shared = shared;
  TF_RETURN_IF_ERROR(wide_bindings_of(&vk->wide_bindings));
  // The shared instance chose its validation for its own setting (synchronisation checks are off
  // under wide bindings): a state asking otherwise would be checked wrongly.
  if (vk->wide_bindings != shared->wide_bindings)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "vulkan: TIGHTFIT_VULKAN_WIDE_BINDINGS is %d here but was %d when the shared device opened",
                         vk->wide_bindings, shared->wide_bindings);
  vk->loader = shared->loader;
  vk->fn = shared->fn;
  vk->instance = shared->instance;
  vk->validation = shared->validation;
  vk->physical = shared->physical;
  vk->properties = shared->properties;
  vk->memory_properties = shared->memory_properties;
  vk->queue_family = shared->queue_family;
  vk->timestamp_bits = shared->timestamp_bits;
  vk->device = shared->device;
  vk->queue = shared->queue;
  vk->storage16 = shared->storage16 && storage16_of(vk, vk->physical);
  vk->storage8 = shared->storage8 && storage8_of(vk, vk->physical);
  TF_RETURN_IF_ERROR(read_settings(vk));
  return create_command_pool(vk);
}

tf_status vk_queue_submit(vk_state *vk, const VkSubmitInfo *submit, VkFence fence) {
  if (vk->shared)
    pthread_mutex_lock(&vk->shared->lock);
  tf_status status = vk_check(vk->fn.QueueSubmit(vk->queue, 1, submit, fence), "vkQueueSubmit");
  if (vk->shared)
    pthread_mutex_unlock(&vk->shared->lock);
  return status;
}

void vk_device_idle(vk_state *vk) {
  if (vk->shared)
    pthread_mutex_lock(&vk->shared->lock);
  vk->fn.DeviceWaitIdle(vk->device);
  if (vk->shared)
    pthread_mutex_unlock(&vk->shared->lock);
}

void vk_device_close(vk_state *vk) {
  if (vk->shared) {
    // The device, instance and messenger are the shared device's (closed by close_shared).
    if (vk->command_pool)
      vk->fn.DestroyCommandPool(vk->device, vk->command_pool, NULL);
    vk->command_pool = VK_NULL_HANDLE;
    return;
  }
  if (vk->device) {
    vk->fn.DeviceWaitIdle(vk->device);
    if (vk->command_pool)
      vk->fn.DestroyCommandPool(vk->device, vk->command_pool, NULL);
    vk->fn.DestroyDevice(vk->device, NULL);
  }
  if (vk->messenger)
    vk->fn.DestroyDebugUtilsMessengerEXT(vk->instance, vk->messenger, NULL);
  if (vk->instance)
    vk->fn.DestroyInstance(vk->instance, NULL);
  // The loader stays loaded (dlopen counts references, so this is not a growing leak): unloading it
  // would unload the driver too, whose worker threads and caches may outlive the device (lavapipe's
  // do), and leak reports inside it could no longer be attributed to the driver's library.
}

tf_status tf_vulkan_list_devices(tf_device_list *list) {
  vk_state vk;
  memset(&vk, 0, sizeof(vk));
  tf_status status = open_loader(&vk);
  if (!status)
    status = create_instance(&vk);
  uint32_t count = 0;
  if (!status)
    status = vk_check(vk.fn.EnumeratePhysicalDevices(vk.instance, &count, NULL), "vkEnumeratePhysicalDevices");
  VkPhysicalDevice *devices = !status && count ? calloc(count, sizeof(VkPhysicalDevice)) : NULL;
  if (!status && count && devices)
    status = vk_check(vk.fn.EnumeratePhysicalDevices(vk.instance, &count, devices), "vkEnumeratePhysicalDevices");
  static const char *const types[] = {"other", "integrated GPU", "discrete GPU", "virtual GPU", "CPU"};
  for (uint32_t i = 0; !status && devices && i < count; i++) {
    VkPhysicalDeviceProperties p;
    VkPhysicalDeviceMemoryProperties m;
    vk.fn.GetPhysicalDeviceProperties(devices[i], &p);
    vk.fn.GetPhysicalDeviceMemoryProperties(devices[i], &m);
    char text[sizeof(list->entries[0].text)], device[32];
    size_t used = (size_t)snprintf(text, sizeof(text), "%s (%s, Vulkan %u.%u)", p.deviceName,
                                   p.deviceType <= 4 ? types[p.deviceType] : "?", VK_API_VERSION_MAJOR(p.apiVersion),
                                   VK_API_VERSION_MINOR(p.apiVersion));
    for (uint32_t h = 0; h < m.memoryHeapCount && used < sizeof(text); h++)
      used += (size_t)snprintf(text + used, sizeof(text) - used, "%s heap %u: %.2f GiB%s", h ? "," : ";", h,
                               (double)m.memoryHeaps[h].size / 1073741824.0,
                               (m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " device-local" : "");
    VkPhysicalDeviceSubgroupProperties subgroup = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 properties = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    properties.pNext = &subgroup;
    vk.fn.GetPhysicalDeviceProperties2(devices[i], &properties);
    vk_big_matmul big = VK_BIG_MATMUL_OFF;
    status = big_matmul_of(&big);
    static const char *const big_text[] = {"", "; large products in 128 x 128 tiles",
                                           "; every product in 128 x 128 tiles"};
    // What a session would find: one is opened where the variants would run, so that the subgroup
    // probe (vk_subgroup_probe.c) runs as in any session.
    const bool allowed = subgroup_variants_allowed(&subgroup);
    char off[300] = "";
    if (!status && allowed) {
      void *session = NULL;
      tf_backend_options options = {.device = (int32_t)i, .threads = 1};
      tf_status probe = tf_backend_vulkan.create(&options, &session);
      const char *refusal = probe ? tf_status_message(probe) : tf_vulkan_subgroup_refusal(session);
      if (refusal)
        snprintf(off, sizeof(off), " (subgroup shaders off: %s%s)", probe ? "the subgroup probe could not run: " : "",
                 refusal);
      tf_status_free(probe);
      if (session)
        tf_backend_vulkan.destroy(session);
    } else if (!allowed) {
      snprintf(off, sizeof(off), " (subgroup shaders off)");
    }
    if (!status && used < sizeof(text))
      snprintf(text + used, sizeof(text) - used, "; subgroups of %u%s; %s; %s%s", subgroup.subgroupSize, off,
               storage16_of(&vk, devices[i]) ? "16-bit storage (half kernels)"
                                             : "no 16-bit storage (compile with --no-half-kernels)",
               storage8_of(&vk, devices[i]) ? "8-bit storage (bool masks move)" : "no 8-bit storage (no u8 moves)",
               big_text[big]);
    snprintf(device, sizeof(device), "vulkan:%u", i);
    tf_device_list_add(list, "vulkan", device, "%s", text);
  }
  if (!status && count == 0)
    status = tf_status_new(TF_ERR_UNSUPPORTED, "vulkan: the loader found no Vulkan device (is a driver such as "
                                               "mesa-vulkan-drivers installed?)");
  free(devices);
  vk_device_close(&vk);
  return vk_validation_status(&vk, status);
}
