/* The backends this build has. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
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

/* "<backend>: unavailable: <why>", without the message's own "<backend>: " prefix. */
static void describe_failure(char *text, size_t size, const char *backend, tf_status status) {
  const char *why = tf_status_message(status);
  size_t length = strlen(backend);
  if (strncmp(why, backend, length) == 0 && why[length] == ':' && why[length + 1] == ' ')
    why += length + 2;
  snprintf(text, size, "%s: unavailable: %s\n", backend, why);
}

void tf_backend_describe_devices(char *text, size_t size) {
  size_t used =
      (size_t)snprintf(text, size, "cpu:0  this machine's CPU, %ld cores online (OpenBLAS + OpenMP kernels)\n",
                       sysconf(_SC_NPROCESSORS_ONLN));
#ifdef TIGHTFIT_VULKAN
  if (used < size) {
    tf_status status = tf_vulkan_describe_devices(text + used, size - used);
    if (status)
      describe_failure(text + used, size - used, "vulkan", status);
    tf_status_free(status);
    used = strlen(text);
  }
#else
  if (used < size)
    used += (size_t)snprintf(text + used, size - used, "vulkan: not in this build\n");
#endif
#ifdef TIGHTFIT_CUDA
  if (used < size) {
    const tf_cuda_module *module = NULL;
    tf_status status = tf_cuda_module_load(&module);
    if (!status)
      status = module->describe_devices(text + used, size - used);
    if (status)
      describe_failure(text + used, size - used, "cuda", status);
    tf_status_free(status);
  }
#else
  if (used < size)
    snprintf(text + used, size - used, "cuda: not in this build\n");
#endif
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
