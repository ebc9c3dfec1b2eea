/* The CUDA backend as a module of its own (libtightfit_cuda.so, loaded with dlopen when a CUDA device
 * is first asked for: backends/cuda_loader.c), so that the CLI and libtightfit.so need neither the CUDA
 * runtime nor cuBLAS to start: a build with CUDA runs on a machine without them (AMD, Intel, CI
 * runners), and commands that never touch CUDA do not map cuBLAS. The module exports one symbol,
 * tf_cuda_module_get (cuda_module.map); everything else in it is local. */
#ifndef TIGHTFIT_BACKENDS_CUDA_CUDA_MODULE_H
#define TIGHTFIT_BACKENDS_CUDA_CUDA_MODULE_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever this struct or the vtable changes: a module of another build is refused. */
#define TF_CUDA_MODULE_ABI 3

typedef struct tf_cuda_module {
  int32_t abi;                                     /* TF_CUDA_MODULE_ABI of the build that made the module */
  size_t vtable_size;                              /* sizeof(tf_backend_vtable) there */
  const tf_backend_vtable *backend;                /* tf_backend_cuda */
  tf_status (*list_devices)(tf_device_list *list); /* tf_cuda_list_devices */
} tf_cuda_module;

/* The module's entry point, its one exported symbol. */
const tf_cuda_module *tf_cuda_module_get(void);

/* backends/cuda_loader.c (in the program or libtightfit.so, not in the module): loads the module
 * once (dlopen keeps it; it is never unloaded) and gives its table. Where it looks, in order:
 * $TIGHTFIT_CUDA_MODULE (that path only); beside the program or library it is in; <that>/../<libdir>;
 * the install libdir; the build tree. An error names where it looked, or why the module would not
 * load (dlerror: a missing libcudart or libcublas). */
tf_status tf_cuda_module_load(const tf_cuda_module **out);

/* The name dlsym looks up. */
#define TF_CUDA_MODULE_ENTRY "tf_cuda_module_get"
/* The module's file name. */
#define TF_CUDA_MODULE_FILE "libtightfit_cuda.so"

#ifdef __cplusplus
}
#endif
#endif
