/* The backend contract: what the runtime needs from a device, and nothing more. A backend never
 * sees the graph, only the plan's regions and steps. Every backend is a table of these functions
 * (one header, one screen); the runtime counts its allocations so tests can prove the promise:
 * after tf_session_create(), no device allocation happens until the session is destroyed. */
#ifndef TIGHTFIT_BACKENDS_BACKEND_H
#define TIGHTFIT_BACKENDS_BACKEND_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tightfit/plan.h"
#include "tightfit/target.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-run values the steps may read (dropout keys, AdamW's step count, the loss scale). */
typedef struct tf_run_state {
  int64_t optimizer_step; /* 1 for the first optimizer step */
  int64_t micro_step;     /* global micro-batch counter */
  uint64_t seed;
  int32_t loss_scale_log2; /* the loss was scaled by 2^this: updates multiply the gradients by 2^-this */
} tf_run_state;

typedef struct tf_backend_options {
  int32_t device;  /* index among the backend's devices */
  int32_t threads; /* CPU: worker threads (<= the plan's target threads) */
  /* A device from open_shared that the state uses instead of opening its own (NULL: its own);
   * `device` is then the shared device's. */
  void *shared;
} tf_backend_options;

/* What a device offers before any session exists (tf_backend_vtable.capacity): what `tightfit check
 * --device cuda:N` compares a plan with. -1 where the backend cannot tell. */
typedef struct tf_device_capacity {
  char name[256];        /* the device's name as the driver gives it */
  int64_t total_bytes;   /* the device's memory */
  int64_t free_bytes;    /* what a new process could allocate now, before its own context exists */
  int64_t context_bytes; /* measured: the driver context this process creates (CUDA) */
  int64_t library_bytes; /* measured: library handles and their default workspaces (cuBLAS) */
  int64_t granularity;   /* measured: the allocation granularity regions are rounded up to */
} tf_device_capacity;

typedef struct tf_backend_vtable {
  const char *name;
  /* Opens a device; *state is the backend's own. */
  tf_status (*create)(const tf_backend_options *options, void **state);
  void (*destroy)(void *state);
  /* The capabilities the compiler plans for (alignment, threads, cost model). */
  tf_target (*target)(void *state);
  /* Allocates one region of `bytes` device bytes (zeroed); the only allocation a session makes. */
  tf_status (*alloc_region)(void *state, int64_t bytes, void **region);
  void (*free_region)(void *state, void *region);
  /* Host <-> device copies into a region at an offset. */
  tf_status (*upload)(void *state, void *region, int64_t offset, const void *host, int64_t bytes);
  tf_status (*download)(void *state, void *region, int64_t offset, void *host, int64_t bytes);
  /* Called once after the regions exist: build pipelines, record command buffers, check that the
   * backend has a kernel for every step. Must not allocate device memory. */
  tf_status (*prepare)(void *state, const tf_plan *plan, void *const regions[TF_REGION_COUNT]);
  /* Runs steps [begin, end) of the prepared plan; io_slot selects the double-buffer half. */
  tf_status (*run)(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run);
  /* Waits for submitted work. */
  tf_status (*synchronize)(void *state);
  /* What the device measured of its memory (tf_device_memory); NULL when the backend cannot say. */
  tf_status (*memory)(void *state, tf_device_memory *out);
  /* Opens device options->device, measures what it offers (tf_device_capacity), and closes it
   * again; NULL when the backend cannot say (cpu). Needs no plan. */
  tf_status (*capacity)(const tf_backend_options *options, tf_device_capacity *out);
  /* Page-locked host memory of `bytes` (zeroed) for what the runtime keeps on the host beside the
   * device (an offloaded plan's host region and staging), which the device then copies at the link's
   * full speed (CUDA: page-locked; Vulkan: a host-visible buffer its copies reach); NULL (cpu): the
   * runtime takes ordinary host memory, as it does when this fails. */
  tf_status (*alloc_host)(void *state, int64_t bytes, void **host);
  void (*free_host)(void *state, void *host);
  /* Optional (NULL: the runtime runs every host step itself): takes into run() the micro-batch
   * block's host steps marked in `copies` (an offloaded activation's copy between the host region and
   * a device region, runtime/host_steps.h), each run before device step host_at, or after the block's
   * last step when host_at ends the block, ordered among the steps without the host waiting for the
   * device. `host` is the host region, from this backend's alloc_host. Called once, before prepare;
   * `copies` (n_host_steps flags) stays valid until the state is destroyed. */
  tf_status (*take_host_copies)(void *state, const tf_plan *plan, void *host, const bool *copies);
  /* Device-side collectives for a data-parallel job (tools/dist.c), all NULL where the backend has
   * none (cpu, vulkan: the job sums on the host over MPI). CUDA: NCCL, loaded at the first call
   * (backends/cuda/cuda_nccl.c). The job's launcher (MPI) carries what they exchange. */
  /* The device's identity, equal in every process that opens it (CUDA: its PCI bus id), so that a
   * job can see two of its ranks on one device (NCCL refuses them). Every rank calls it before the
   * job decides how to sum, so it also loads the library: an error says this rank cannot join (the
   * job then sums over MPI rather than leave the other ranks waiting in collective_init). */
  tf_status (*collective_device)(void *state, char *key, size_t size);
  /* A new communicator id (rank 0 makes it, the job sends it to every rank): at most
   * TF_COLLECTIVE_ID_BYTES into id, its length in *bytes. Loads the library first: an error when it
   * is missing. */
  tf_status (*collective_id)(void *state, void *id, size_t *bytes);
  /* Joins the communicator `id` as `rank` of `size` (collective: every rank calls it, with the id
   * rank 0 made); once per state. */
  tf_status (*collective_init)(void *state, int32_t rank, int32_t size, const void *id, size_t bytes);
  /* Sums `count` elements of `dtype` (f32, bf16, f16) at region + offset across the communicator's
   * ranks, in place, ordered on the stream the steps run on: the next run or copy sees the sum. */
  tf_status (*allreduce_sum)(void *state, void *region, int64_t offset, int64_t count, tf_dtype dtype);
  /* Optional (NULL where a backend keeps nothing per device worth sharing): opens device
   * options->device once for the states created with options->shared set to it, which then share
   * the device, its queue and (Vulkan) the pipelines compiled for any of them, each state keeping its
   * own memory, command buffers and settings. close_shared after the last of those states is
   * destroyed. Their calls are serialised where they meet (the queue, the pipelines); a message of
   * Vulkan's validation layer fails the next fallible call that any of them makes. */
  tf_status (*open_shared)(const tf_backend_options *options, void **shared);
  void (*close_shared)(void *shared);
} tf_backend_vtable;

/* The largest communicator id tf_backend_vtable.collective_id makes (NCCL's is 128 bytes). */
#define TF_COLLECTIVE_ID_BYTES 512

/* The backend named `name` ("cpu", "vulkan", "cuda") in *out, or an error saying why there is none:
 * not in this build, or (cuda) its module would not load (backends/cuda/cuda_module.h). */
tf_status tf_backend_load(const char *name, const tf_backend_vtable **out);
/* tf_backend_load's backend, or NULL. */
const tf_backend_vtable *tf_backend_find(const char *name);

/* One device a backend of this build can run plans on, or a backend without one and why. */
typedef struct tf_device_entry {
  char backend[16]; /* "cpu", "vulkan", "cuda" */
  char device[24];  /* "cpu:0", "vulkan:1", "cuda:0"; "" for a backend without a device */
  bool available;   /* a device (true), or a backend without one (false) */
  char text[488];   /* the device's description, or why the backend has none */
} tf_device_entry;

#define TF_MAX_DEVICE_ENTRIES 32

/* Every backend's devices, in backend order (cpu, vulkan, cuda); entries past the limit are dropped. */
typedef struct tf_device_list {
  int32_t count;
  tf_device_entry entries[TF_MAX_DEVICE_ENTRIES];
} tf_device_list;

/* Appends an entry (a device when `device` is not empty, else a backend without one); false when
 * the list is full. Inline: the CUDA module (which links no backends code) fills lists too. */
static inline TF_PRINTF(4, 5) bool tf_device_list_add(tf_device_list *list, const char *backend, const char *device,
                                                      const char *fmt, ...) {
  if (list->count >= TF_MAX_DEVICE_ENTRIES)
    return false;
  tf_device_entry *e = &list->entries[list->count++];
  memset(e, 0, sizeof(*e));
  snprintf(e->backend, sizeof(e->backend), "%s", backend);
  snprintf(e->device, sizeof(e->device), "%s", device ? device : "");
  e->available = device && *device;
  va_list args;
  va_start(args, fmt);
  vsnprintf(e->text, sizeof(e->text), fmt, args);
  va_end(args);
  return true;
}

/* The devices of every backend in this build, or for a backend without one, why. */
void tf_backend_list_devices(tf_device_list *list);

/* tf_backend_list_devices() as text, one line each: "<device>  <description>" or "<backend>:
 * unavailable: <why>" ("<backend>: not in this build"). */
void tf_backend_describe_devices(char *text, size_t size);

/* Parses "cpu", "vulkan", "vulkan:1", "cuda:0" into a backend name (copied into `name`) and a device
 * index; false when malformed. */
bool tf_backend_parse_device(const char *text, char *name, size_t size, int32_t *device);

/* backends/cpu */
extern const tf_backend_vtable tf_backend_cpu;

#ifdef __cplusplus
}
#endif
#endif
