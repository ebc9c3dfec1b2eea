/* The backends this build has. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "kernels/cpu/blas_info.h"
#ifdef TIGHTFIT_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef TIGHTFIT_CUDA
#include "backends/cuda/cuda_module.h"
#endif

tf_status tf_backend_load(const char *name, const tf_backend_vtable **out) {
  static const tf_backend_vtable *const backends[] = {
      &tf_backend_cpu,
#ifdef TIGHTFIT_VULKAN
      &tf_backend_vulkan,
#endif
  };
  *out = NULL;
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
    if (strcmp(backends[i]->name, name) == 0) {
      *out = backends[i];
      return NULL;
    }
#ifdef TIGHTFIT_CUDA
  if (strcmp(name, "cuda") == 0) { /* a module of its own (backends/cuda/cuda_module.h) */
    const tf_cuda_module *module = NULL;
    TF_RETURN_IF_ERROR(tf_cuda_module_load(&module));
    *out = module->backend;
    return NULL;
  }
#endif
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "backend '%s' is not in this build (run `tightfit devices` to list what it has)", name);
}

const tf_backend_vtable *tf_backend_find(const char *name) {
  const tf_backend_vtable *backend = NULL;
  tf_status_free(tf_backend_load(name, &backend));
  return backend;
}

#if defined(TIGHTFIT_VULKAN) || defined(TIGHTFIT_CUDA)
/* An entry for `backend` without a device: why (the message without its own "<backend>: " prefix). */
static void add_failure(tf_device_list *list, const char *backend, tf_status status) {
  const char *why = tf_status_message(status);
  size_t length = strlen(backend);
  if (strncmp(why, backend, length) == 0 && why[length] == ':' && why[length + 1] == ' ')
    why += length + 2;
  tf_device_list_add(list, backend, NULL, "%s", why);
}
#endif

void tf_backend_list_devices(tf_device_list *list) {
  memset(list, 0, sizeof(*list));
  char blas[256];
  tf_cpu_blas_describe(blas, sizeof(blas));
  tf_device_list_add(list, "cpu", "cpu:0", "this machine's CPU, %ld cores online (OpenMP kernels; %s)",
                     sysconf(_SC_NPROCESSORS_ONLN), blas);
#ifdef TIGHTFIT_VULKAN
  const int32_t before = list->count;
  tf_status status = tf_vulkan_list_devices(list);
  if (status) {
    list->count = before; /* the devices listed before the failure, if any, are dropped with it */
    add_failure(list, "vulkan", status);
  }
  tf_status_free(status);
#else
  tf_device_list_add(list, "vulkan", NULL, "not in this build");
#endif
#ifdef TIGHTFIT_CUDA
  const tf_cuda_module *module = NULL;
  tf_status failure = tf_cuda_module_load(&module);
  const int32_t listed = list->count;
  if (!failure)
    failure = module->list_devices(list);
  if (failure) {
    list->count = listed;
    add_failure(list, "cuda", failure);
  }
  tf_status_free(failure);
#else
  tf_device_list_add(list, "cuda", NULL, "not in this build");
#endif
}

void tf_backend_describe_devices(char *text, size_t size) {
  tf_device_list list;
  tf_backend_list_devices(&list);
  size_t used = 0;
  if (size > 0)
    text[0] = '\0';
  for (int32_t i = 0; i < list.count && used < size; i++) {
    const tf_device_entry *e = &list.entries[i];
    if (e->available)
      used += (size_t)snprintf(text + used, size - used, "%s  %s\n", e->device, e->text);
    else if (strcmp(e->text, "not in this build") == 0)
      used += (size_t)snprintf(text + used, size - used, "%s: not in this build\n", e->backend);
    else
      used += (size_t)snprintf(text + used, size - used, "%s: unavailable: %s\n", e->backend, e->text);
  }
}

bool tf_backend_parse_device(const char *text, char *name, size_t size, int32_t *device) {
  const char *colon = strchr(text, ':');
  size_t length = colon ? (size_t)(colon - text) : strlen(text);
  if (length == 0 || length >= size)
    return false;
  memcpy(name, text, length);
  name[length] = '\0';
  *device = 0;
  if (colon) {
    char *end;
    long index = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || index < 0 || index > 1024)
      return false;
    *device = (int32_t)index;
  }
  return true;
}
