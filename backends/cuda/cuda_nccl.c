/* The CUDA backend's device-side collectives (tf_backend_vtable.collective_*, allreduce_sum): NCCL,
 * which a data-parallel job's ranks sum their gradients with on the device instead of staging them
 * through the host (tools/dist.c). libnccl.so.2 is dlopen'ed at the first call, never linked: the
 * module loads, and every single-device run works, on a machine without NCCL; a job that asks for
 * it there gets an error naming what was looked for. Only the few NCCL types used are declared
 * here (NCCL's ABI, stable since 2.0), so the build needs no nccl.h; where the toolkit has one,
 * they are pinned to it. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

/* NCCL's ABI: results, data types and ops as nccl.h numbers them. */
typedef struct nccl_comm *nccl_comm_t;
typedef int nccl_result_t;
enum { NCCL_SUCCESS = 0, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7, NCCL_BFLOAT16 = 9, NCCL_SUM = 0, NCCL_ID_BYTES = 128 };
typedef struct nccl_unique_id {
  char internal[NCCL_ID_BYTES];
} nccl_unique_id;

#if defined(__has_include)
#if __has_include(<nccl.h>)
#include <nccl.h>
_Static_assert(NCCL_SUCCESS == (int)ncclSuccess && NCCL_SUM == (int)ncclSum, "NCCL's result and op numbers");
_Static_assert(NCCL_FLOAT16 == (int)ncclFloat16 && NCCL_FLOAT32 == (int)ncclFloat32 &&
                   NCCL_BFLOAT16 == (int)ncclBfloat16,
               "NCCL's data type numbers");
_Static_assert(sizeof(nccl_unique_id) == sizeof(ncclUniqueId), "NCCL's unique id");
#endif
#endif

_Static_assert(NCCL_ID_BYTES <= TF_COLLECTIVE_ID_BYTES, "a communicator id fits TF_COLLECTIVE_ID_BYTES");

struct cuda_nccl {
  void *library; /* kept loaded: NCCL's threads may outlive a communicator's destruction */
  char path[512];
  int version;
  nccl_result_t (*get_version)(int *version);
  nccl_result_t (*get_unique_id)(nccl_unique_id *id);
  nccl_result_t (*comm_init_rank)(nccl_comm_t *comm, int size, nccl_unique_id id, int rank);
  nccl_result_t (*all_reduce)(const void *send, void *receive, size_t count, int dtype, int op, nccl_comm_t comm,
                              cudaStream_t stream);
  nccl_result_t (*comm_destroy)(nccl_comm_t comm);
  const char *(*error_string)(nccl_result_t result);
  nccl_comm_t comm; /* NULL until collective_init */
  int32_t rank, size;
};

/* A status for a failed NCCL call, naming it and NCCL's reason. */
static tf_status nccl_check(const cuda_nccl *n, nccl_result_t result, const char *call) {
  if (result == NCCL_SUCCESS)
    return NULL;
  return tf_status_new(TF_ERR_BACKEND, "cuda backend: %s failed: %s (NCCL error %d, %s)", call,
                       n->error_string ? n->error_string(result) : "no reason given", result, n->path);
}

/* The folder libcudart was loaded from (NCCL ships beside it in the toolkit), or false. */
static bool runtime_folder(char *dir, size_t size) {
  Dl_info info;
  if (!dladdr((void *)cudaGetDeviceCount, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
    return false;
  const char *slash = strrchr(info.dli_fname, '/');
  return (size_t)snprintf(dir, size, "%.*s", (int)(slash - info.dli_fname), info.dli_fname) < size;
}

/* dlopen's handle of NCCL: $TIGHTFIT_NCCL_LIBRARY alone when set, else the usual names, then beside
 * the CUDA runtime; NULL with `why` (every place and dlerror's reason) when none loads. */
static void *load_library(char *path, size_t path_size, char *why, size_t why_size) {
  const char *chosen = getenv("TIGHTFIT_NCCL_LIBRARY");
  if (chosen && *chosen) {
    snprintf(path, path_size, "%s", chosen);
    void *handle = dlopen(chosen, RTLD_NOW | RTLD_LOCAL);
    const char *error = handle ? NULL : dlerror();
    snprintf(why, why_size, "TIGHTFIT_NCCL_LIBRARY names %s: %s", chosen, error ? error : "");
    return handle;
  }
  char beside[512] = "", dir[400];
  if (runtime_folder(dir, sizeof(dir)))
    snprintf(beside, sizeof(beside), "%s/libnccl.so.2", dir);
  const char *names[] = {"libnccl.so.2", "libnccl.so", beside};
  int used = snprintf(why, why_size, "looked for");
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (!*names[i])
      continue;
    void *handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      snprintf(path, path_size, "%s", names[i]);
      return handle;
    }
    const char *error = dlerror();
    if (used > 0 && (size_t)used < why_size)
      used += snprintf(why + used, why_size - (size_t)used, "%s %s (%s)", i ? ";" : "", names[i],
                       error ? error : "not loaded");
  }
  return NULL;
}

tf_status tf_cuda_nccl_open(cuda_nccl **out) {
  *out = NULL;
  cuda_nccl *n = calloc(1, sizeof(cuda_nccl));
  if (!n)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: no memory for NCCL's state");
  char why[2048];
  n->library = load_library(n->path, sizeof(n->path), why, sizeof(why));
  if (!n->library) {
    free(n);
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda backend: NCCL (libnccl.so.2), which sums a data-parallel job's gradients on the "
                         "device, does not load: %s; install NCCL (the CUDA toolkit's, or libnccl2) or point "
                         "TIGHTFIT_NCCL_LIBRARY at it, or set TIGHTFIT_DIST_NCCL=0 to sum over MPI on the host",
                         why);
  }
  struct {
    const char *name;
    void **entry;
  } symbols[] = {{"ncclGetVersion", (void **)&n->get_version},      {"ncclGetUniqueId", (void **)&n->get_unique_id},
                 {"ncclCommInitRank", (void **)&n->comm_init_rank}, {"ncclAllReduce", (void **)&n->all_reduce},
                 {"ncclCommDestroy", (void **)&n->comm_destroy},    {"ncclGetErrorString", (void **)&n->error_string}};
  for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
    *symbols[i].entry = dlsym(n->library, symbols[i].name);
    if (!*symbols[i].entry) {
      tf_status status = tf_status_new(TF_ERR_UNSUPPORTED, "cuda backend: %s has no %s: it is not NCCL (%s)", n->path,
                                       symbols[i].name, "TIGHTFIT_NCCL_LIBRARY should name libnccl.so.2");
      dlclose(n->library);
      free(n);
      return status;
    }
  }
  tf_status status = nccl_check(n, n->get_version(&n->version), "ncclGetVersion");
  if (status) {
    dlclose(n->library);
    free(n);
    return status;
  }
  *out = n;
  return NULL;
}

int tf_cuda_nccl_version(const cuda_nccl *nccl) { return nccl->version; }

const char *tf_cuda_nccl_path(const cuda_nccl *nccl) { return nccl->path; }

tf_status tf_cuda_nccl_unique_id(cuda_nccl *nccl, void *id, size_t *bytes) {
  nccl_unique_id made;
  memset(&made, 0, sizeof(made));
  TF_RETURN_IF_ERROR(nccl_check(nccl, nccl->get_unique_id(&made), "ncclGetUniqueId"));
  memcpy(id, &made, sizeof(made));
  *bytes = sizeof(made);
  return NULL;
}

void tf_cuda_nccl_close(cuda_nccl *nccl) {
  if (!nccl)
    return;
  if (nccl->comm)
    nccl->comm_destroy(nccl->comm);
  free(nccl); /* the library stays loaded (struct cuda_nccl) */
}

/* ---- the vtable's entries ---- */

static tf_status nccl_of(cuda_state *s, cuda_nccl **out);

tf_status tf_cuda_collective_device(void *state, char *key, size_t size) {
  cuda_state *s = state;
  cuda_nccl *nccl; // loaded on every rank before the job's decision (backend.h)
  TF_RETURN_IF_ERROR(nccl_of(s, &nccl));
  char bus_id[64];
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaDeviceGetPCIBusId(bus_id, (int)sizeof(bus_id), s->device),
                                    "cudaDeviceGetPCIBusId (the device a data-parallel rank runs on)"));
  snprintf(key, size, "%s", bus_id);
  return NULL;
}

/* s->nccl, loaded at the first call. */
static tf_status nccl_of(cuda_state *s, cuda_nccl **out) {
  if (!s->nccl)
    TF_RETURN_IF_ERROR(tf_cuda_nccl_open(&s->nccl));
  *out = s->nccl;
  return NULL;
}

tf_status tf_cuda_collective_id(void *state, void *id, size_t *bytes) {
  cuda_nccl *nccl;
  TF_RETURN_IF_ERROR(nccl_of(state, &nccl));
  return tf_cuda_nccl_unique_id(nccl, id, bytes);
}

tf_status tf_cuda_collective_init(void *state, int32_t rank, int32_t size, const void *id, size_t bytes) {
  cuda_state *s = state;
  cuda_nccl *nccl;
  TF_RETURN_IF_ERROR(nccl_of(s, &nccl));
  if (nccl->comm)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "cuda backend: the NCCL communicator exists already (rank %d of %d)",
                         nccl->rank, nccl->size);
  if (bytes != sizeof(nccl_unique_id) || rank < 0 || rank >= size)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "cuda backend: ncclCommInitRank needs a %d-byte id and a rank below the size (got %zu bytes, "
                         "rank %d of %d)",
                         NCCL_ID_BYTES, bytes, rank, size);
  nccl_unique_id unique;
  memcpy(&unique, id, sizeof(unique));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  char call[96];
  snprintf(call, sizeof(call), "ncclCommInitRank (rank %d of %d)", rank, size);
  nccl_comm_t comm = NULL;
  TF_RETURN_IF_ERROR(nccl_check(nccl, nccl->comm_init_rank(&comm, size, unique, rank), call));
  nccl->comm = comm;
  nccl->rank = rank;
  nccl->size = size;
  return NULL;
}

tf_status tf_cuda_allreduce_sum(void *state, void *region, int64_t offset, int64_t count, tf_dtype dtype) {
  cuda_state *s = state;
  if (!s->nccl || !s->nccl->comm)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "cuda backend: an all-reduce before collective_init");
  const int nccl_dtype = dtype == TF_F32 ? NCCL_FLOAT32 : dtype == TF_BF16 ? NCCL_BFLOAT16 : NCCL_FLOAT16;
  if (dtype != TF_F32 && dtype != TF_BF16 && dtype != TF_F16)
    return tf_status_new(TF_ERR_UNSUPPORTED, "cuda backend: the all-reduce sums f32, bf16 or f16, not %s",
                         tf_dtype_name(dtype));
  void *at = (char *)region + offset;
  char call[96];
  snprintf(call, sizeof(call), "ncclAllReduce (%lld %s elements, rank %d of %d)", (long long)count,
           tf_dtype_name(dtype), s->nccl->rank, s->nccl->size);
  /* On the compute stream: after the backward pass that wrote the gradients, before the update. */
  return nccl_check(s->nccl,
                    s->nccl->all_reduce(at, at, (size_t)count, nccl_dtype, NCCL_SUM, s->nccl->comm, s->compute), call);
}
