/* The CUDA backend's public face: its vtable (for backends/registry.c) and the memory report that
 * backend.h has no slot for (the memory promise, measured on the device).
 *
 * Device memory a session on CUDA holds, and nothing else, ever:
 *   - one cudaMalloc per plan region, exactly the region's bytes (the driver rounds each allocation
 *     up to its page granularity, typically 2 MiB: region_device_bytes measures that);
 *   - the CUDA context (the driver's, created or retained when the backend is created) and the
 *     cuBLAS handle, whose workspace is never its own: every cuBLAS call gets a slice of the plan's
 *     arena through cublasSetWorkspace();
 *   - what the first launch of each kernel and cuBLAS call loads (modules, cuBLAS's state) and what
 *     instantiating the CUDA graphs costs: prepare() runs every step once before it captures, so
 *     both happen, and are measured, inside prepare().
 * Per-run values (AdamW's step, the dropout RNG's step and seed) live in mapped pinned host memory,
 * and input micro-batches are staged in a pinned host mirror of the io region: host memory, not
 * device memory. Nothing is allocated after tf_session_create() returns. */
#ifndef TIGHTFIT_BACKENDS_CUDA_CUDA_H
#define TIGHTFIT_BACKENDS_CUDA_CUDA_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const tf_backend_vtable tf_backend_cuda;

/* Bytes, from cudaMemGetInfo() (and NVML for the context, when libnvidia-ml.so.1 loads) taken around
 * each step of creating a session; a figure is -1 when it could not be measured. Other processes
 * allocating on the same device at the same time distort these numbers. */
typedef struct tf_cuda_memory {
  int64_t device_total;        /* the device's memory */
  int64_t context_bytes;       /* device memory used by the context creation this backend did (NVML); 0 when it
                                * found the context already there; -1 without NVML */
  int64_t used_after_context;  /* total - free once the context exists: context + every other process */
  int64_t library_bytes;       /* cuBLAS handle, streams, events: the drop in free memory across creating them */
  int64_t region_bytes;        /* asked for by alloc_region(): the plan's bytes */
  int64_t region_device_bytes; /* the drop in free memory across the region allocations */
  int64_t graph_bytes;         /* the drop in free memory across prepare(): kernel modules and cuBLAS state loaded
                                * by the warm-up, CUDA graph instantiation and upload */
  int64_t free_after_prepare;  /* free device memory when prepare() returned */
  int64_t pinned_host_bytes;   /* pinned host memory: io mirror, run values, alloc_host */
  int64_t warmup_host_bytes;   /* host memory prepare()'s warm-up held at its peak for its copy of the regions
                                * (cuda_warmup.c), freed before prepare() returned */
  int64_t allocations;         /* cudaMalloc calls so far (one per region) */
  int64_t live_allocations;    /* ... not yet freed */
  int32_t graphs;              /* CUDA graphs instantiated (0 with TIGHTFIT_CUDA_GRAPHS=0 or TIGHTFIT_CUDA_SYNC=1:
                                * step-by-step launches, no stream capture at all) */
} tf_cuda_memory;

/* The memory report of a CUDA backend state (from tf_backend_cuda.create). */
tf_cuda_memory tf_cuda_memory_use(void *state);

/* Adds every CUDA device to `list` ("cuda:0": "NVIDIA H100 ..., compute capability 9.0, 79.1 GiB"),
 * without creating a context; an error says why there is none (no driver, a driver too old, no
 * device). */
tf_status tf_cuda_list_devices(tf_device_list *list);

/* Free device memory now (cudaMemGetInfo on the backend's device), or -1 on error. */
int64_t tf_cuda_memory_free_now(void *state);

#ifdef __cplusplus
}
#endif
#endif
