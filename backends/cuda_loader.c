/* Finds and loads the CUDA backend's module, libtightfit_cuda.so (backends/cuda/cuda_module.h): the
 * program and libtightfit.so link no CUDA library, so they start on machines without one. Built
 * into the backends layer when the build has CUDA (TIGHTFIT_CUDA); empty otherwise. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cuda/cuda_module.h"

#ifdef TIGHTFIT_CUDA

#define MAX_PLACES 5

typedef struct places {
  char path[MAX_PLACES][PATH_MAX];
  int n;
} places;

static void add_place(places *p, const char *dir, const char *rest) {
  if (p->n < MAX_PLACES && (size_t)snprintf(p->path[p->n], PATH_MAX, "%s%s", dir, rest) < PATH_MAX)
    p->n++;
}

/* The folder of the file this code was loaded from: libtightfit.so, or the program (dladdr names the
 * program as it was started, or not at all: /proc/self/exe then). */
static bool own_folder(char *dir) {
  Dl_info info;
  char file[PATH_MAX];
  const bool named = dladdr((void *)tf_cuda_module_load, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
                     realpath(info.dli_fname, file);
  if (!named) {
    const ssize_t n = readlink("/proc/self/exe", file, sizeof(file) - 1);
    if (n <= 0)
      return false;
    file[n] = '\0';
  }
  char *slash = strrchr(file, '/');
  if (!slash)
    return false;
  *slash = '\0';
  memcpy(dir, file, strlen(file) + 1);
  return true;
}

static void list_places(places *p) {
  const char *chosen = getenv("TIGHTFIT_CUDA_MODULE");
  if (chosen && *chosen) {
    add_place(p, chosen, "");
    return;
  }
  char dir[PATH_MAX];
  if (own_folder(dir)) {
    add_place(p, dir, "/" TF_CUDA_MODULE_FILE);
    add_place(p, dir, "/../" TF_CUDA_MODULE_LIBDIR "/" TF_CUDA_MODULE_FILE);
  }
  add_place(p, TF_CUDA_MODULE_INSTALLED, "");
  add_place(p, TF_CUDA_MODULE_BUILT, "");
}

/* The module's table from a loaded handle; an error when it is not one of this build's. */
static tf_status table_of(void *handle, const char *path, const tf_cuda_module **out) {
  const tf_cuda_module *(*get)(void) = NULL;
  *(void **)&get = dlsym(handle, TF_CUDA_MODULE_ENTRY);
  const tf_cuda_module *module = get ? get() : NULL;
  if (!module)
    return tf_status_new(TF_ERR_UNSUPPORTED, "cuda: %s has no %s: not tightfit's CUDA module", path,
                         TF_CUDA_MODULE_ENTRY);
  if (module->abi != TF_CUDA_MODULE_ABI || module->vtable_size != sizeof(tf_backend_vtable))
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda: %s is another tightfit build's CUDA module (interface %d, this build's %d); install "
                         "the module built with this tightfit or point TIGHTFIT_CUDA_MODULE at it",
                         path, (int)module->abi, TF_CUDA_MODULE_ABI);
  *out = module;
  return NULL;
}

tf_status tf_cuda_module_load(const tf_cuda_module **out) {
  *out = NULL;
  places p = {.n = 0};
  list_places(&p);
  for (int i = 0; i < p.n; i++) {
    if (access(p.path[i], R_OK) != 0)
      continue;
    void *handle = dlopen(p.path[i], RTLD_NOW | RTLD_LOCAL); /* kept: never dlclose'd */
    if (!handle) {
      const char *why = dlerror();
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "cuda: the CUDA backend's module %s does not load: %s (it needs the CUDA runtime and "
                           "cuBLAS of the toolkit it was built with; the cpu and vulkan backends need neither)",
                           p.path[i], why ? why : "no reason given");
    }
    return table_of(handle, p.path[i], out);
  }
  const char *chosen = getenv("TIGHTFIT_CUDA_MODULE");
  if (chosen && *chosen)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda: TIGHTFIT_CUDA_MODULE names %s, which is not there (or not readable); it should name "
                         "this build's %s",
                         chosen, TF_CUDA_MODULE_FILE);
  char looked[MAX_PLACES * (PATH_MAX + 2)] = "";
  for (int i = 0; i < p.n; i++) {
    strcat(looked, i ? "; " : "");
    strcat(looked, p.path[i]);
  }
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "cuda: this build's CUDA backend is a module, %s, and it is not installed (looked in: %s); "
                       "set TIGHTFIT_CUDA_MODULE to its path",
                       TF_CUDA_MODULE_FILE, looked);
}

#endif
