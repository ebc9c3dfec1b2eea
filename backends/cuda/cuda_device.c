/* The CUDA backend: device selection, the streams and the cuBLAS handle, one cudaMalloc per plan
 * region, the memory accounting behind tf_cuda_memory_use(), and the capacity measurement (what a
 * device offers before any session exists). Preparing and running the plan is cuda_graphs.c (and
 * cuda_warmup.c); copies are cuda_transfer.c.
 *
 * Two driver libraries are dlopen'ed when present, never linked, so that a build with CUDA still
 * starts on a machine without a driver: NVML (libnvidia-ml.so.1) to measure the context's memory,
 * and the driver API (libcuda.so.1, which the CUDA runtime loads anyway) for the allocation
 * granularity and whether a primary context exists already. <cuda.h> is included for its types
 * only. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

tf_status tf_cuda_status(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return NULL;
  return tf_status_new(TF_ERR_BACKEND, "cuda backend: %s: %s (%s)", what, cudaGetErrorString(error),
                       cudaGetErrorName(error));
}

static tf_status cublas_check(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return NULL;
  return tf_status_new(TF_ERR_BACKEND, "cuda backend: %s: %s", what, cublasGetStatusString(status));
}

/* ---- the device ---- */

/* Why there is no device to use: no driver, a driver too old for this runtime, or no device. Any
 * other error is not an absence but a broken setup (a driver/library mismatch, a device that
 * failed or is in use), reported as a backend error so that it is never mistaken for "no GPU". */
static tf_status no_device(cudaError_t error) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (error == cudaErrorNoDevice)
    return tf_status_new(TF_ERR_UNSUPPORTED, "cuda backend: no CUDA device (the driver reports none)");
  if (error == cudaErrorStubLibrary)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda backend: no NVIDIA driver (only the CUDA toolkit's stub "
                         "libcuda.so was found: %s)",
                         cudaGetErrorString(error));
  if (driver == 0)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda backend: no NVIDIA driver (libcuda.so.1 is missing or did not load): %s",
                         cudaGetErrorString(error));
  if (error == cudaErrorInsufficientDriver)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda backend: the NVIDIA driver supports CUDA %d.%d, this build's runtime needs %d.%d",
                         driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return tf_status_new(TF_ERR_BACKEND, "cuda backend: CUDA failed to initialise (driver %d.%d): %s (%s)", driver / 1000,
                       driver % 1000 / 10, cudaGetErrorString(error), cudaGetErrorName(error));
}

static tf_status select_device(cuda_state *s, int32_t device) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess)
    return no_device(error);
  if (count == 0)
    return no_device(cudaErrorNoDevice);
  if (device < 0 || device >= count)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "cuda backend: device %d does not exist (this machine has %d)",
                         device, count);
  struct cudaDeviceProp props;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties"));
  snprintf(s->name, sizeof(s->name), "%s", props.name);
  if (props.major * 10 + props.minor < 75)
    return tf_status_new(
        TF_ERR_UNSUPPORTED,
        "cuda backend: device %d (%s) has compute capability %d.%d; the CUDA kernels need 7.5 or newer", device,
        props.name, props.major, props.minor);
  s->device = device;
  s->memory.device_total = (int64_t)props.totalGlobalMem;
  return NULL;
}

/* TIGHTFIT_CUDA_LIMITS, when set, must name limits the kernels can be lowered to (kernels.h). */
static tf_status check_limits_variable(void) {
  tf_cuda_limits limits = {99, 9, INT64_MAX};
  const char *value = getenv("TIGHTFIT_CUDA_LIMITS");
  const char *why = tf_cuda_limits_cap(value, &limits);
  return why ? tf_status_new(TF_ERR_INVALID_ARGUMENT, "cuda backend: TIGHTFIT_CUDA_LIMITS='%s': %s", value, why) : NULL;
}

tf_status tf_cuda_list_devices(tf_device_list *list) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess)
    return no_device(error);
  if (count == 0)
    return no_device(cudaErrorNoDevice);
  TF_RETURN_IF_ERROR(check_limits_variable());
  const char *lowered = getenv("TIGHTFIT_CUDA_LIMITS");
  for (int device = 0; device < count; device++) {
    struct cudaDeviceProp props;
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties"));
    const bool usable = props.major * 10 + props.minor >= 75;
    char name[32], attention[160], f32_attention[160], limits_note[96] = "";
    snprintf(name, sizeof(name), "cuda:%d", device);
    /* the kernels' choices see the limits TIGHTFIT_CUDA_LIMITS lowers them to (kernels/cuda/device_limits.cu) */
    tf_cuda_limits limits = {props.major, props.minor, (int64_t)props.sharedMemPerBlockOptin};
    tf_cuda_limits_cap(lowered, &limits);
    if (lowered && *lowered)
      snprintf(limits_note, sizeof(limits_note), "; kernels chosen as on %d.%d with %lld KiB of shared memory (%s)",
               limits.major, limits.minor, (long long)(limits.shared_optin / 1024), "TIGHTFIT_CUDA_LIMITS");
    /* which attention kernels f16/bf16 plans take here (kernels/cuda/attention_mma.cu decides alike) */
    tf_cuda_tensor_attention_describe(attention, sizeof(attention), limits.major, limits.minor, limits.shared_optin,
                                      tf_cuda_attention_mode_of(getenv("TIGHTFIT_CUDA_TENSOR_ATTENTION")));
    tf_cuda_f32_attention_describe(f32_attention, sizeof(f32_attention), limits.major, limits.minor,
                                   limits.shared_optin,
                                   tf_cuda_f32_attention_on(getenv("TIGHTFIT_CUDA_F32_ATTENTION")));
    tf_device_list_add(list, "cuda", name, "%s, compute capability %d.%d, %.1f GiB%s%s; half-precision %s; %s",
                       props.name, props.major, props.minor, (double)props.totalGlobalMem / (1 << 30),
                       usable ? "" : " (unusable: the kernels need compute capability 7.5)", limits_note, attention,
                       f32_attention);
  }
  return NULL;
}

/* ---- NVML (optional): device memory in use before and after the context exists ---- */

typedef struct nvml_memory {
  unsigned long long total, free, used;
} nvml_memory;

typedef struct nvml_api {
  void *library;
  int (*shutdown)(void);
  int (*memory_info)(void *device, nvml_memory *memory);
  void *device;
} nvml_api;

static bool nvml_open(nvml_api *nvml, int32_t device) {
  memset(nvml, 0, sizeof(*nvml));
  char bus_id[64];
  if (cudaDeviceGetPCIBusId(bus_id, (int)sizeof(bus_id), device) != cudaSuccess) {
    cudaGetLastError(); /* NVML is optional: leave no error behind for a later check to find */
    return false;
  }
  nvml->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml->library)
    return false;
  int (*init)(void);
  int (*by_bus_id)(const char *, void **);
  *(void **)&init = dlsym(nvml->library, "nvmlInit_v2");
  *(void **)&by_bus_id = dlsym(nvml->library, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void **)&nvml->shutdown = dlsym(nvml->library, "nvmlShutdown");
  *(void **)&nvml->memory_info = dlsym(nvml->library, "nvmlDeviceGetMemoryInfo");
  if (!init || !by_bus_id || !nvml->shutdown || !nvml->memory_info || init() != 0) {
    dlclose(nvml->library);
    nvml->library = NULL;
    return false;
  }
  if (by_bus_id(bus_id, &nvml->device) != 0) {
    nvml->shutdown();
    dlclose(nvml->library);
    nvml->library = NULL;
    return false;
  }
  return true;
}

static int64_t nvml_used(const nvml_api *nvml) {
  nvml_memory memory;
  if (!nvml->library || nvml->memory_info(nvml->device, &memory) != 0)
    return -1;
  return (int64_t)memory.used;
}

static void nvml_close(nvml_api *nvml) {
  if (!nvml->library)
    return;
  nvml->shutdown();
  dlclose(nvml->library);
}

/* NVML's free bytes of the device (what any process could allocate now), or -1 without NVML. */
static int64_t nvml_free(int32_t device) {
  nvml_api nvml;
  if (!nvml_open(&nvml, device))
    return -1;
  nvml_memory memory;
  const int64_t free_bytes = nvml.memory_info(nvml.device, &memory) == 0 ? (int64_t)memory.free : -1;
  nvml_close(&nvml);
  return free_bytes;
}

/* ---- the driver API (optional): allocation granularity, primary context state ---- */

typedef struct driver_api {
  void *library;
  CUresult (*device_get)(CUdevice *device, int ordinal);
  CUresult (*primary_context_state)(CUdevice device, unsigned int *flags, int *active);
  CUresult (*granularity)(size_t *granularity, const CUmemAllocationProp *prop,
                          CUmemAllocationGranularity_flags option);
} driver_api;

/* false (and every entry NULL) when libcuda.so.1 or cuInit/cuDeviceGet are missing; the other two
 * entries may be NULL on an old driver. */
static bool driver_open(driver_api *driver) {
  memset(driver, 0, sizeof(*driver));
  driver->library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver->library)
    return false;
  CUresult (*init)(unsigned int);
  *(void **)&init = dlsym(driver->library, "cuInit");
  *(void **)&driver->device_get = dlsym(driver->library, "cuDeviceGet");
  *(void **)&driver->primary_context_state = dlsym(driver->library, "cuDevicePrimaryCtxGetState");
  *(void **)&driver->granularity = dlsym(driver->library, "cuMemGetAllocationGranularity");
  if (!init || !driver->device_get || init(0) != CUDA_SUCCESS) {
    dlclose(driver->library);
    memset(driver, 0, sizeof(*driver));
    return false;
  }
  return true;
}

static void driver_close(driver_api *driver) {
  if (driver->library)
    dlclose(driver->library);
  memset(driver, 0, sizeof(*driver));
}

/* 1 when the device's primary context (the one the runtime uses) exists, 0 when not, -1 when
 * unknown. Runtime device indices are driver ordinals (both follow CUDA_VISIBLE_DEVICES). */
static int primary_context_active(const driver_api *driver, int32_t device) {
  CUdevice handle;
  unsigned int flags = 0;
  int active = 0;
  if (!driver->primary_context_state || driver->device_get(&handle, device) != CUDA_SUCCESS ||
      driver->primary_context_state(handle, &flags, &active) != CUDA_SUCCESS)
    return -1;
  return active ? 1 : 0;
}

/* The minimum granularity of device memory allocations (what the VMM API rounds a physical
 * allocation to, and cudaMalloc a large one: typically 2 MiB), or -1. */
static int64_t allocation_granularity(const driver_api *driver, int32_t device) {
  if (!driver->granularity)
    return -1;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  size_t granularity = 0;
  if (driver->granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    return -1;
  return granularity > 0 ? (int64_t)granularity : -1;
}

static int64_t free_now(void) {
  size_t free_bytes = 0, total = 0;
  return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? (int64_t)free_bytes : -1;
}

int64_t tf_cuda_memory_free_now(void *state) {
  cuda_state *s = state;
  if (cudaSetDevice(s->device) != cudaSuccess)
    return -1;
  return free_now();
}

tf_cuda_memory tf_cuda_memory_use(void *state) { return ((cuda_state *)state)->memory; }

/* ---- create and destroy ---- */

static void cuda_destroy(void *state);

/* The context, streams, cuBLAS (no TF32, no workspace of its own), events and run-value slots. */
static tf_status open_device(cuda_state *s) {
  nvml_api nvml;
  bool have_nvml = nvml_open(&nvml, s->device);
  int64_t used_before = have_nvml ? nvml_used(&nvml) : -1;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  tf_status status = tf_cuda_status(cudaFree(NULL), "creating the context");
  int64_t used_after = have_nvml ? nvml_used(&nvml) : -1;
  nvml_close(&nvml);
  TF_RETURN_IF_ERROR(status);
  s->memory.context_bytes = used_before >= 0 && used_after >= 0 ? used_after - used_before : -1;
  const int64_t free_before = free_now();
  s->memory.used_after_context = free_before >= 0 ? s->memory.device_total - free_before : -1;

  TF_RETURN_IF_ERROR(
      tf_cuda_status(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking), "creating a stream"));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking), "creating a stream"));
  TF_RETURN_IF_ERROR(cublas_check(cublasCreate(&s->cublas), "cublasCreate"));
  TF_RETURN_IF_ERROR(cublas_check(cublasSetStream(s->cublas, s->compute), "cublasSetStream"));
  TF_RETURN_IF_ERROR(cublas_check(cublasSetMathMode(s->cublas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"));
  TF_RETURN_IF_ERROR(cublas_check(cublasSetWorkspace(s->cublas, NULL, 0), "cublasSetWorkspace"));
  for (int i = 0; i < CUDA_SLOT_COUNT; i++)
    TF_RETURN_IF_ERROR(
        tf_cuda_status(cudaEventCreateWithFlags(&s->slot_read[i], cudaEventDisableTiming), "creating an event"));
  for (int half = 0; half < 2; half++) {
    TF_RETURN_IF_ERROR(
        tf_cuda_status(cudaEventCreateWithFlags(&s->uploaded[half], cudaEventDisableTiming), "creating an event"));
    TF_RETURN_IF_ERROR(
        tf_cuda_status(cudaEventCreateWithFlags(&s->consumed[half], cudaEventDisableTiming), "creating an event"));
  }
  const size_t slot_bytes = sizeof(tf_cuda_run_values) * CUDA_SLOT_COUNT;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaHostAlloc((void **)&s->slots_host, slot_bytes, cudaHostAllocMapped),
                                    "allocating the run values (pinned host memory)"));
  memset(s->slots_host, 0, slot_bytes);
  s->memory.pinned_host_bytes += (int64_t)slot_bytes;
  TF_RETURN_IF_ERROR(
      tf_cuda_status(cudaHostGetDevicePointer((void **)&s->slots_device, s->slots_host, 0), "mapping the run values"));
  const int64_t free_after = free_now();
  s->memory.library_bytes = free_before >= 0 && free_after >= 0 ? free_before - free_after : -1;
  return NULL;
}

static tf_status cuda_create(const tf_backend_options *options, void **state) {
  *state = NULL;
  TF_RETURN_IF_ERROR(check_limits_variable());
  cuda_state *s = calloc(1, sizeof(cuda_state));
  if (!s)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot allocate its state");
  s->memory.context_bytes = s->memory.used_after_context = s->memory.library_bytes = -1;
  s->memory.free_after_prepare = -1;
  tf_status status = select_device(s, options ? options->device : 0);
  if (!status)
    status = open_device(s);
  if (status) {
    cuda_destroy(s);
    return status;
  }
  *state = s;
  return NULL;
}

static void cuda_destroy(void *state) {
  cuda_state *s = state;
  if (!s)
    return;
  if (s->compute || s->copy)
    cudaSetDevice(s->device);
  if (s->compute)
    cudaStreamSynchronize(s->compute);
  if (s->copy)
    cudaStreamSynchronize(s->copy);
  if (s->offload)
    cudaStreamSynchronize(s->offload);
  tf_cuda_release_plan(s);
  tf_cuda_host_copies_release(s);
  tf_cuda_nccl_close(s->nccl); /* the communicator before the streams it ran on */
  for (int i = 0; i < CUDA_SLOT_COUNT; i++)
    if (s->slot_read[i])
      cudaEventDestroy(s->slot_read[i]);
  for (int half = 0; half < 2; half++) {
    if (s->uploaded[half])
      cudaEventDestroy(s->uploaded[half]);
    if (s->consumed[half])
      cudaEventDestroy(s->consumed[half]);
  }
  if (s->slots_host)
    cudaFreeHost(s->slots_host);
  if (s->cublas)
    cublasDestroy(s->cublas);
  if (s->copy)
    cudaStreamDestroy(s->copy);
  if (s->compute)
    cudaStreamDestroy(s->compute);
  free(s);
}

static tf_target cuda_target(void *state) { return tf_target_default(TF_TARGET_CUDA); }

/* ---- regions ---- */

static tf_status cuda_alloc_region(void *state, int64_t bytes, void **region) {
  cuda_state *s = state;
  *region = NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  const int64_t free_before = free_now();
  cudaError_t error = cudaMalloc(region, (size_t)(bytes > 0 ? bytes : 1));
  if (error != cudaSuccess) {
    *region = NULL;
    cudaGetLastError(); /* an allocation failure is not sticky: clear it */
    return tf_status_new(
        TF_ERR_BACKEND, "cuda backend: cudaMalloc of a %lld-byte region failed: %s (free: %lld of %lld)",
        (long long)bytes, cudaGetErrorString(error), (long long)free_before, (long long)s->memory.device_total);
  }
  s->memory.allocations++;
  s->memory.live_allocations++;
  // On the compute stream, and waited for: the legacy stream's cudaMemset would not be ordered
  // before the uploads that follow on our non-blocking streams.
  tf_status status = tf_cuda_status(cudaMemsetAsync(*region, 0, (size_t)bytes, s->compute), "zeroing a region");
  if (!status)
    status = tf_cuda_status(cudaStreamSynchronize(s->compute), "zeroing a region");
  if (status) {
    cudaFree(*region);
    *region = NULL;
    s->memory.live_allocations--;
    return status;
  }
  const int64_t free_after = free_now();
  s->memory.region_bytes += bytes;
  if (free_before >= 0 && free_after >= 0 && s->memory.region_device_bytes >= 0)
    s->memory.region_device_bytes += free_before - free_after;
  else
    s->memory.region_device_bytes = -1;
  return NULL;
}

/* Page-locked host memory (cudaHostAlloc, portable across contexts), zeroed. */
static tf_status cuda_alloc_host(void *state, int64_t bytes, void **host) {
  cuda_state *s = state;
  *host = NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaHostAlloc(host, (size_t)(bytes > 0 ? bytes : 1), cudaHostAllocPortable),
                                    "allocating pinned host memory for the host steps"));
  memset(*host, 0, (size_t)(bytes > 0 ? bytes : 1));
  s->memory.pinned_host_bytes += bytes;
  return NULL;
}

static void cuda_free_host(void *state, void *host) {
  (void)state;
  if (host)
    cudaFreeHost(host);
}

static void cuda_free_region(void *state, void *region) {
  cuda_state *s = state;
  if (!region)
    return;
  cudaSetDevice(s->device);
  if (cudaFree(region) == cudaSuccess)
    s->memory.live_allocations--;
}

/* From the cudaMemGetInfo snapshots (tf_cuda_memory): the backend's overhead is what creating cuBLAS,
 * streams and events and instantiating the graphs took; the context's is NVML's measure. */
static tf_status cuda_memory(void *state, tf_device_memory *out) {
  const tf_cuda_memory *m = &((const cuda_state *)state)->memory;
  *out = (tf_device_memory){.region_bytes = m->region_bytes,
                            .region_device_bytes = m->region_device_bytes,
                            .overhead_bytes = m->library_bytes + m->graph_bytes,
                            .context_bytes = m->context_bytes};
  return NULL;
}

/* ---- capacity: what a device offers before any session exists ---- */

/* Fills `out` from state `s` just opened (open_device) on a device whose primary context existed
 * already (`existed` 1), did not (0) or may have (-1); `free_before` is NVML's free bytes taken
 * before the context. */
static void fill_capacity(const cuda_state *s, int existed, int64_t free_before, const driver_api *driver,
                          tf_device_capacity *out) {
  const tf_cuda_memory *m = &s->memory;
  // A context that existed before was not created here: what creating one costs is unknown, and
  // NVML's difference (about 0) would understate it.
  out->context_bytes = existed == 1 ? -1 : m->context_bytes;
  const int64_t free_after_context = m->used_after_context >= 0 ? m->device_total - m->used_after_context : -1;
  if (free_before >= 0)
    out->free_bytes = free_before;
  else if (free_after_context >= 0 && out->context_bytes >= 0)
    out->free_bytes = free_after_context + out->context_bytes;
  out->library_bytes = m->library_bytes;
  out->granularity = allocation_granularity(driver, s->device);
}

/* Makes `previous` the calling thread's device again after measuring `device`, where that cannot
 * cost anything: since CUDA 12, cudaSetDevice() creates the device's primary context, so a device
 * whose context does not exist (the thread never used it, or only by default) is left alone. */
static void restore_current_device(const driver_api *driver, int previous, int32_t device) {
  if (previous >= 0 && previous != device && primary_context_active(driver, previous) == 1 &&
      cudaSetDevice(previous) != cudaSuccess)
    cudaGetLastError(); /* best effort: the measurement itself succeeded */
}

/* Opens device options->device exactly as a session does (select_device, open_device: context,
 * streams, cuBLAS, events, run values) and reads what that measured; then destroys what it created
 * (cuda_destroy: cuBLAS, streams, events, pinned memory). The primary context is kept, not reset:
 * cudaDeviceReset() would destroy every allocation and handle of any other session of this process
 * on the device, and a session opened next reuses the context. Its memory stays in use until the
 * process exits; a later session's context_bytes is then 0 (it found the context there). */
static tf_status cuda_capacity(const tf_backend_options *options, tf_device_capacity *out) {
  memset(out, 0, sizeof(*out));
  out->total_bytes = out->free_bytes = out->context_bytes = out->library_bytes = out->granularity = -1;
  cuda_state *s = calloc(1, sizeof(cuda_state));
  if (!s)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot allocate its state");
  s->memory.context_bytes = s->memory.used_after_context = s->memory.library_bytes = -1;
  tf_status status = select_device(s, options ? options->device : 0);
  if (status) {
    free(s);
    return status;
  }
  snprintf(out->name, sizeof(out->name), "%s", s->name);
  out->total_bytes = s->memory.device_total;
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    previous = -1;
  }
  driver_api driver;
  driver_open(&driver);
  const int existed = primary_context_active(&driver, s->device);
  const int64_t free_before = nvml_free(s->device); /* before open_device creates the context */
  status = open_device(s);
  if (!status)
    fill_capacity(s, existed, free_before, &driver, out);
  cuda_destroy(s);
  restore_current_device(&driver, previous, options ? options->device : 0);
  driver_close(&driver);
  return status ? tf_status_prefix(status, "measuring cuda:%d", options ? options->device : 0) : NULL;
}

const tf_backend_vtable tf_backend_cuda = {
    .name = "cuda",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .target = cuda_target,
    .alloc_region = cuda_alloc_region,
    .free_region = cuda_free_region,
    .upload = tf_cuda_upload,
    .download = tf_cuda_download,
    .prepare = tf_cuda_prepare,
    .run = tf_cuda_run,
    .synchronize = tf_cuda_synchronize,
    .memory = cuda_memory,
    .capacity = cuda_capacity,
    .alloc_host = cuda_alloc_host,
    .free_host = cuda_free_host,
    .take_host_copies = tf_cuda_take_host_copies,
    .collective_device = tf_cuda_collective_device,
    .collective_id = tf_cuda_collective_id,
    .collective_init = tf_cuda_collective_init,
    .allreduce_sum = tf_cuda_allreduce_sum,
};
