/* libtightfit_cuda.so's entry point (backends/cuda/cuda_module.h). */
#include "backends/cuda/cuda_module.h"

#include "backends/cuda/cuda.h"

const tf_cuda_module *tf_cuda_module_get(void) {
  static const tf_cuda_module module = {
      .abi = TF_CUDA_MODULE_ABI,
      .vtable_size = sizeof(tf_backend_vtable),
      .backend = &tf_backend_cuda,
      .list_devices = tf_cuda_list_devices,
  };
  return &module;
}
