/* The backends this build has. */
#include <string.h>

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
