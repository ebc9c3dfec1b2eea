/* Targets: what a backend tells the compiler (capabilities, cost model) and the device memory it
 * needs beyond a plan's regions (the device overhead model). Plain data: `compile` works for any
 * target on any machine. The named-GPU table turns `--gpu t4` into a budget. */
#ifndef TIGHTFIT_TARGET_H
#define TIGHTFIT_TARGET_H

#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The Vulkan backend's host-visible buffers (staging 8 MiB + run state 256 B), which the default
 * Vulkan overhead model counts; backends/vulkan asserts its constants add up to it. */
#define TF_TARGET_VULKAN_STAGING_BYTES (((int64_t)8 << 20) + 256)

typedef enum tf_target_kind { TF_TARGET_CPU = 0, TF_TARGET_VULKAN, TF_TARGET_CUDA, TF_TARGET_COUNT } tf_target_kind;

/* A backend's device overhead, modelled: fixed parts (context, libraries, module code, staging),
 * each region rounded up to the allocation granularity, and device bytes per captured CUDA-graph
 * step. tf_target_plan_overhead() turns it into a plan's named parts. */
typedef struct tf_overhead_model {
  int32_t n_fixed;
  tf_overhead_part fixed[TF_MAX_OVERHEAD_PARTS - 2]; /* two slots stay for rounding and graphs */
  int64_t granularity;                               /* regions round up to a multiple of this; <= 1: no rounding */
  char granularity_source[TF_OVERHEAD_SOURCE_BYTES];
  int64_t graph_base_bytes; /* CUDA graphs: per plan ... */
  int64_t graph_step_bytes; /* ... plus per captured step; both 0: no graphs */
  char graph_source[TF_OVERHEAD_SOURCE_BYTES];
} tf_overhead_model;

/* What a backend tells the compiler, and nothing more. */
typedef struct tf_target {
  tf_target_kind kind;
  int64_t alignment;          /* buffer offsets are multiples of this (bytes, a power of two) */
  int32_t threads;            /* CPU: worker threads kernel workspaces are sized for */
  double flops_per_second;    /* cost model: sustained matmul throughput */
  double bytes_per_second;    /* cost model: memory bandwidth */
  tf_overhead_model overhead; /* the device memory a session needs beyond its regions */
  /* Ops whose kernels read and write f16/bf16 data directly where every floating operand has one
   * half type (bit op % 64 of half_kernels[op / 64]; tf_target_half_kernel): the compiler leaves
   * them on half data and puts every other op on half data between f32 casts. Vulkan: the
   * elementwise ops and activation gradients, softmax, matmul, reductions, norms, attention,
   * embedding, pools, convolutions, dropout, zero and the layout moves (f16/bf16 shader variants,
   * storageBuffer16BitAccess), the fused loss head (its own half shader) and the losses; CPU: every op but the cast and
   * the in-place updates (f32 kernels over half slices, core/half_slices.h); CUDA: matmul (16-bit cuBLAS GEMMs, f32
   * accumulation), the elementwise ops, softmax, reductions, norms, attention, embedding, pools, dropout and the moves
   * (kernels templated on storage, kernels/cuda/common.cuh), the fused loss head (kernels/cuda/linear_loss_half.cu) and
   * the losses. */
  uint64_t half_kernels[2];
  /* The half kernels that also take f32 operands beside those of the half type (the same bits as
   * half_kernels; tf_target_mixed_half_kernel). CPU: all of them (a loss of bf16 logits, its f32
   * result), each f32 operand read and written as it is; Vulkan and CUDA: the fused loss head's forms
   * without accumulators and the losses (half data, an f32 loss and dloss), and attention's gradient
   * (half q, k, v beside an f32 dy: a --precision plan's direct reads, compiler/precision.c). */
  uint64_t mixed_half_kernels[2];
} tf_target;

/* The default capabilities and overhead model of a target kind (CPU: 64-byte alignment, 2 threads,
 * no overhead; CUDA and Vulkan: conservative defaults, each part's source named; docs/memory.md). */
tf_target tf_target_default(tf_target_kind kind);
/* Whether `target` runs `op` on f16/bf16 data directly (tf_target.half_kernels). */
bool tf_target_half_kernel(const tf_target *target, tf_op op);
/* Whether that kernel also takes f32 operands beside the half ones (tf_target.mixed_half_kernels). */
bool tf_target_mixed_half_kernel(const tf_target *target, tf_op op);
/* Parses "cpu", "vulkan", "cuda"; false when unknown. */
bool tf_target_parse(const char *name, tf_target_kind *kind);
const char *tf_target_name(tf_target_kind kind);

/* The overhead parts of a plan with these region sizes and CUDA-graph steps (graph_steps: the
 * steps a backend captures, see tf_plan_graph_steps) on `target`: the fixed parts, then
 * "rounding" and "graphs" where they are not zero. */
void tf_target_plan_overhead(const tf_target *target, const int64_t region_bytes[TF_REGION_COUNT], int64_t graph_steps,
                             tf_device_overhead *out);
/* Adds the "collectives" part to `out` for a plan of `ranks` > 1 processes on the cuda target: the
 * device memory of NCCL's communicator (TF_TARGET_COLLECTIVES_BYTES, not measured yet). */
void tf_target_plan_collectives(const tf_target *target, int32_t ranks, tf_device_overhead *out);
/* NCCL's buffers (NCCL_BUFFSIZE, 4 MiB by default, per channel, connection and protocol: a ring's
 * and a tree's over up to 32 channels) and its kernels, modelled as 1 GiB until two GPUs measure it. */
#define TF_TARGET_COLLECTIVES_BYTES ((int64_t)1 << 30)
/* Replaces the fixed part `name` (adding it when absent) with a measured figure; false when the
 * model has no room left. */
bool tf_target_set_part(tf_target *target, const char *name, int64_t bytes, const char *source);

/* A named GPU: the memory it reports to a process (the conservative figure of docs/gpus.md), and the
 * target it is used through. */
typedef struct tf_gpu {
  const char *name;        /* "t4", "a100-80gb", ... */
  const char *description; /* "NVIDIA Tesla T4 16 GB" */
  tf_target_kind target;
  int64_t bytes;          /* the memory the card reports to processes */
  const char *source;     /* where the figure comes from */
  int32_t sms;            /* CUDA cards: streaming multiprocessors (0: not modelled) */
  int32_t threads_per_sm; /* ... and the most threads one SM keeps resident */
} tf_gpu;

/* The CUDA context a process creates on `gpu`, modelled (docs/gpus.md, "The CUDA context"): a
 * fixed part fitted to a measurement plus the local-memory reserve of 1 KiB of stack per resident
 * thread (SMs x threads per SM); -1 for a card without SM figures (the target's default stays). */
int64_t tf_gpu_context_bytes(const tf_gpu *gpu);
/* That model for a card of `sms` SMs keeping `threads_per_sm` threads each resident. */
int64_t tf_cuda_context_model(int32_t sms, int32_t threads_per_sm);

/* The GPU named `name` (case-insensitive), or NULL. */
const tf_gpu *tf_gpu_find(const char *name);
/* The table: *count entries. */
const tf_gpu *tf_gpu_list(int32_t *count);

/* What the device measured for a session (tf_session_device_memory); -1 where the backend cannot
 * tell. */
typedef struct tf_device_memory {
  int64_t region_bytes;        /* asked for by the session's regions: the plan's bytes */
  int64_t region_device_bytes; /* the device's measure of them (its allocation rounding included) */
  int64_t overhead_bytes;      /* the backend's own device memory: staging, libraries, CUDA graphs */
  int64_t context_bytes;       /* the driver context's (CUDA) */
} tf_device_memory;

#ifdef __cplusplus
}
#endif
#endif
