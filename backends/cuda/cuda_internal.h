/* The CUDA backend's state, shared by its files: cuda_device.c (device, streams, cuBLAS, regions,
 * memory accounting, the capacity measurement), cuda_transfer.c (uploads, downloads,
 * synchronisation), cuda_graphs.c (prepare: the step table and the CUDA graphs; run) and
 * cuda_warmup.c (every step run once eagerly in prepare, the regions restored afterwards) and
 * cuda_nccl.c (a data-parallel job's all-reduce over NCCL). */
#ifndef TIGHTFIT_BACKENDS_CUDA_CUDA_INTERNAL_H
#define TIGHTFIT_BACKENDS_CUDA_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_copies.h"
#include "backends/cuda/cuda_fuse.h"
#include "kernels/cuda/kernels.h"

/* Run-value slots, each read by the graphs of one kind: the micro-batch block on io half 0 and 1,
 * and everything else (the optimizer block, partial ranges). */
enum { CUDA_SLOT_HALF0 = 0, CUDA_SLOT_HALF1, CUDA_SLOT_OTHER, CUDA_SLOT_COUNT };
/* Captured ranges: [0, micro_steps), [0, forward_end) per io half; [micro_steps, n_steps). */
enum { CUDA_GRAPH_MICRO = 0, CUDA_GRAPH_FORWARD, CUDA_GRAPH_OPTIMIZER, CUDA_GRAPH_KINDS };

typedef struct cuda_step {
  tf_cuda_tensor *inputs[2]; /* per io half: inputs and labels come from that half */
  tf_cuda_tensor outputs[TF_MAX_OUTPUTS];
  tf_cuda_args args[2];
} cuda_step;

/* A fused group (cuda_fuse.h) as prepared: its cuBLASLt call (cuda_lt.c) for GEMM groups. */
typedef struct cuda_lt_call cuda_lt_call;
typedef struct cuda_fused {
  tf_cuda_fusion group;
  bool active;      /* false: its steps launch as compiled (refused at prepare, or failed in the warm-up) */
  char why[256];    /* why it is not active */
  cuda_lt_call *lt; /* GEMM groups, while active */
} cuda_fused;

typedef struct cuda_io_buffer {
  int64_t offset, bytes;
  int32_t half;
} cuda_io_buffer;

/* NCCL, loaded and its communicator made by the first collective call (cuda_nccl.c). */
typedef struct cuda_nccl cuda_nccl;

typedef struct cuda_state {
  int32_t device;
  char name[256];
  cudaStream_t compute, copy; /* steps run on compute; io uploads on copy */
  cublasHandle_t cublas;
  tf_cuda_memory memory;

  /* Per-run values: CUDA_SLOT_COUNT entries of mapped pinned memory, and when each was last read. */
  tf_cuda_run_values *slots_host, *slots_device;
  cudaEvent_t slot_read[CUDA_SLOT_COUNT];

  /* io double buffer: a pinned mirror of the io region; per half, when its upload finished and when
   * the steps that read it finished. */
  unsigned char *io_mirror;
  cudaEvent_t uploaded[2], consumed[2];
  cuda_io_buffer *io_buffers;
  int32_t n_io_buffers;

  /* The prepared plan. */
  const tf_plan *plan;
  void *regions[TF_REGION_COUNT];
  bool prepared;
  cuda_step *steps;
  int32_t n_steps, forward_end;
  bool use_graphs; /* TIGHTFIT_CUDA_GRAPHS unset or not 0, and not sync_steps */
  bool sync_steps; /* TIGHTFIT_CUDA_SYNC=1: run() waits for each step and names the one that failed */
  cudaGraphExec_t graphs[CUDA_GRAPH_KINDS][2];
  /* Fusion (cuda_fused.c): the groups found at prepare, and per step the group it belongs to or -1. */
  cuda_fused *fused;
  int32_t n_fused;
  int32_t *fused_of_step;
  void *cublaslt; /* cublasLtHandle_t, created at the first prepare that has a GEMM group */
  bool unfused;   /* the current run() cuts a group's span: its steps launch as compiled */
  /* TIGHTFIT_CUDA_PROFILE (cuda_profile.c): per-step elapsed totals; NULL when off */
  double *profile_ms;
  int64_t *profile_calls;      /* per step: how many runs timed it */
  cudaEvent_t *profile_events; /* n_steps + 1 */
  int64_t profile_runs;
  cuda_nccl *nccl; /* NULL until a collective is asked for */
  /* An offloaded activation's copies run among the steps (take_host_copies, cuda_copies.h): the host
   * region (pinned, alloc_host's), the schedule, and the side stream the copies down run on
   * (TIGHTFIT_CUDA_COPY_OVERLAP=0: on the compute stream), with the events that fork it from the
   * compute stream and join it back. copies_side/copies_pending live while a range is launched. */
  char *host_region;
  const bool *host_copies;
  tf_cuda_copy_schedule copies;
  cudaStream_t offload;
  cudaEvent_t offload_fork, offload_done;
  bool copies_side, copies_pending;
} cuda_state;

/* A status for a failed CUDA runtime call (NULL when `error` is cudaSuccess). */
tf_status tf_cuda_status(cudaError_t error, const char *what);

/* cuda_transfer.c */
tf_status tf_cuda_upload(void *state, void *region, int64_t offset, const void *host, int64_t bytes);
tf_status tf_cuda_download(void *state, void *region, int64_t offset, void *host, int64_t bytes);
tf_status tf_cuda_synchronize(void *state);

/* cuda_graphs.c */
tf_status tf_cuda_prepare(void *state, const tf_plan *plan, void *const regions[TF_REGION_COUNT]);
tf_status tf_cuda_run(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run);
/* Environment variable `name`: `unset` when it is unset or empty, else whether it is not "0". */
bool tf_cuda_env_flag(const char *name, bool unset);

/* cuda_host_copies.c: an offloaded activation's copies among the steps (cuda_copies.h). */
/* The backend contract's take_host_copies: keeps them for prepare and makes the side stream. */
tf_status tf_cuda_take_host_copies(void *state, const tf_plan *plan, void *host, const bool *copies);
/* Issues the copies placed before device step `at` on `half` (at == micro_steps: after the block),
 * waiting for the copies down first where the schedule says. */
tf_status tf_cuda_host_copies_at(cuda_state *s, int32_t at, int32_t half);
/* Makes the compute stream wait for the copies down issued so far (none pending: nothing). */
tf_status tf_cuda_host_copies_join(cuda_state *s);
/* Schedules the copies taken (cuda_copies.h) beside the active fused groups, turning off those a
 * copy cannot leave the span of. After tf_cuda_fused_prepare. */
tf_status tf_cuda_host_copies_prepare(cuda_state *s);
/* Frees the schedule, the side stream and its events. */
void tf_cuda_host_copies_release(cuda_state *s);
void tf_cuda_release_plan(cuda_state *s);
/* Launches step `step` for io half `half` on the compute stream and waits for it; on any error
 * (a CUDA error pending before it, its launch, its execution) a status naming the step, its op and
 * every operand's buffer, region, offset and bytes. */
tf_status tf_cuda_step_run_checked(cuda_state *s, int32_t step, int32_t half);

/* cuda_profile.c: TIGHTFIT_CUDA_PROFILE=FILE times each step with events (graphs off) and writes
 * per-op totals and the slowest steps to FILE ("-": stderr) when the plan is released. */
bool tf_cuda_profile_wanted(void);
tf_status tf_cuda_profile_start(cuda_state *s);
/* Launches steps [begin, end) with `launch`, an event before each, waits, adds their times. */
tf_status tf_cuda_profile_run(cuda_state *s, int32_t begin, int32_t end, int32_t half,
                              tf_status (*launch)(cuda_state *, int32_t, int32_t));
void tf_cuda_profile_finish(cuda_state *s);

/* cuda_fused.c: the fused groups of the prepared plan. */
/* Finds the groups (TIGHTFIT_CUDA_EPILOGUES, TIGHTFIT_CUDA_MULTI_TENSOR) and prepares each GEMM
 * group's cuBLASLt call; a group cuBLASLt refuses stays inactive with its reason. Errors: memory. */
tf_status tf_cuda_fused_prepare(cuda_state *s);
/* Launches step i for `half` when it belongs to an active group: the fused launch at its launch
 * step, nothing at the others; *handled false when the step launches as compiled. */
tf_status tf_cuda_fused_launch(const cuda_state *s, int32_t i, int32_t half, bool *handled);
/* Whether step i is the launch step of an active group; that group's index in *group. */
bool tf_cuda_fused_leads(const cuda_state *s, int32_t i, int32_t *group);
/* Turns group g off (its steps launch as compiled from now on), keeping `why`. */
void tf_cuda_fused_disable(cuda_state *s, int32_t g, const char *why);
/* Frees the groups and their cuBLASLt calls; destroys the cuBLASLt handle. */
void tf_cuda_fused_release(cuda_state *s);

/* cuda_lt.c: one cuBLASLt matmul with an epilogue per GEMM group. */
/* Builds group g's descriptors and picks its algorithm (the heuristic's first whose workspace fits
 * the matmul step's planned workspace); NULL with *call set, or a status saying why not (the
 * caller keeps it as the group's reason and frees it). */
tf_status tf_cuda_lt_prepare(cuda_state *s, const tf_cuda_fusion *g, cuda_lt_call **call);
/* Enqueues group g's GEMM for io half `half` on the compute stream. */
tf_status tf_cuda_lt_launch(const cuda_state *s, const tf_cuda_fusion *g, const cuda_lt_call *call, int32_t half);
void tf_cuda_lt_free(cuda_lt_call *call);

/* cuda_warmup.c */
/* Runs every step of the prepared plan once, eagerly and step by step (tf_cuda_step_run_checked),
 * then puts every region back byte for byte as it was: module loading, cuBLAS's first-call setup
 * and any other first-launch cost happen here, outside stream capture. */
tf_status tf_cuda_warm_up(cuda_state *s);

/* cuda_nccl.c: the device-side collectives (tf_backend_vtable.collective_*, allreduce_sum). */
/* Loads NCCL (needs no device): $TIGHTFIT_NCCL_LIBRARY alone when set, else libnccl.so.2,
 * libnccl.so, then beside the CUDA runtime. An error names every place tried and why, or the
 * missing symbol of a library that is not NCCL. The caller closes *out (tf_cuda_nccl_close). */
tf_status tf_cuda_nccl_open(cuda_nccl **out);
/* NCCL's version number (ncclGetVersion: 22803 for 2.28.3) and the file it was loaded as. */
int tf_cuda_nccl_version(const cuda_nccl *nccl);
const char *tf_cuda_nccl_path(const cuda_nccl *nccl);
/* A new communicator id (ncclGetUniqueId) into id (TF_COLLECTIVE_ID_BYTES), its length in *bytes. */
tf_status tf_cuda_nccl_unique_id(cuda_nccl *nccl, void *id, size_t *bytes);
/* Destroys the communicator, if any, and frees the state (the library stays loaded). */
void tf_cuda_nccl_close(cuda_nccl *nccl);
tf_status tf_cuda_collective_device(void *state, char *key, size_t size);
tf_status tf_cuda_collective_id(void *state, void *id, size_t *bytes);
tf_status tf_cuda_collective_init(void *state, int32_t rank, int32_t size, const void *id, size_t bytes);
tf_status tf_cuda_allreduce_sum(void *state, void *region, int64_t offset, int64_t count, tf_dtype dtype);

#endif
