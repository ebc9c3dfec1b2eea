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
#include "backends/cuda/cuda.h"
#endif

const tf_backend_vtable *tf_backend_find(const char *name) {
  static const tf_backend_vtable *const backends[] = {
      &tf_backend_cpu,
#ifdef TIGHTFIT_VULKAN
      &tf_backend_vulkan,
#endif
#ifdef TIGHTFIT_CUDA
      &tf_backend_cuda,
#endif
  };
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
    if (strcmp(backends[i]->name, name) == 0)
      return backends[i];
  return NULL;
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
    tf_status status = tf_cuda_describe_devices(text + used, size - used);
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
