/* The CUDA kernels: one launcher per op, forward and backward, that enqueues the op's work on a
 * stream over device memory. Launchers never allocate (but the tf_status they return on failure),
 * never synchronise and never read device memory on the host, so a whole block of steps can be
 * captured into a CUDA graph and replayed.
 *
 * Semantics are those of the CPU kernels (the .c files of kernels/cpu), op by op; the comments in each .cu
 * file say where the order of floating-point additions differs. Floating tensors are f32, or all
 * f16 or all bf16 for the half kernels (tf_cuda_kernel_takes_half); cast also reads and writes f16,
 * bf16 and the integer dtypes; the layout ops and max move any dtype.
 *
 * This header is plain C (no CUDA headers): the backend (C) and the tests include it. */
#ifndef TIGHTFIT_KERNELS_CUDA_KERNELS_H
#define TIGHTFIT_KERNELS_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "core/workspace_cuda.h"
#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef tf_tensor_ref tf_cuda_tensor;

/* Per-run values (tf_run_state), in memory the device reads while the steps run: the backend keeps
 * them in mapped pinned host memory, written before each replay, so captured graphs stay valid. */
typedef struct tf_cuda_run_values {
  int64_t optimizer_step;  /* 1 for the first optimizer step (AdamW bias correction) */
  int64_t micro_step;      /* the dropout RNG's step */
  uint64_t seed;           /* the session's RNG seed */
  int64_t loss_scale_log2; /* sgd/adamw multiply the gradients by 2^-loss_scale_log2 (0: unscaled) */
} tf_cuda_run_values;
#ifdef __cplusplus
static_assert(sizeof(tf_cuda_run_values) == TF_CUDA_RUN_VALUES_BYTES, "core/workspace_cuda.h plans this size");
#else
_Static_assert(sizeof(tf_cuda_run_values) == TF_CUDA_RUN_VALUES_BYTES, "core/workspace_cuda.h plans this size");
#endif

typedef struct tf_cuda_args {
  tf_op op;
  const tf_attrs *attrs;
  int32_t n_inputs;
  const tf_cuda_tensor *inputs;
  int32_t n_outputs;
  const tf_cuda_tensor *outputs;
  void *workspace; /* device memory of tf_cuda_workspace_bytes() bytes, 256-byte aligned; NULL when 0 */
  int64_t workspace_bytes;
  const tf_cuda_run_values *run; /* a device-readable pointer */
  void *stream;                  /* cudaStream_t */
  void *cublas;                  /* cublasHandle_t bound to `stream`, pedantic math (no TF32) */
  tf_dtype math;                 /* the plan's matmul_math: TF_F32, or TF_BF16 / TF_F16 (tensor cores) */
} tf_cuda_args;

/* Whether the CUDA kernels implement `op` at all. */
bool tf_cuda_kernel_exists(tf_op op);

/* Whether `op`'s kernel also runs on f16/bf16 data (a half kernel: every floating operand of one
 * half type, computed in f32, each result rounded once); the cuda target's half-kernel ops
 * (targets/target.c) must be such ops or moves of bytes. */
bool tf_cuda_kernel_takes_half(tf_op op);

/* ---- attention on tensor cores (attention_mma.cu): which path an attention step takes ---- */

/* TIGHTFIT_CUDA_TENSOR_ATTENTION: "0" off (the CUDA-core kernels run); "split": the wmma kernels with
 * P and dS as two half terms each (the f32 kernels' result up to f32 summation order); "rounded": the
 * wmma kernels with P and dS rounded once to the half type (2^-9 relative error per bf16 term);
 * anything else, unset included: FlashAttention-2-style kernels (attention_fast*.cu: mma.sync, scores
 * in registers, cp.async) at the rounded precision, 3.7x faster than "split" on an H200
 * (bench/results/2026-12-04-gpu-h200-lend5). */
typedef enum tf_cuda_attention_mode {
  TF_CUDA_ATTENTION_OFF = 0,
  TF_CUDA_ATTENTION_SPLIT = 1,
  TF_CUDA_ATTENTION_ROUNDED = 2,
  TF_CUDA_ATTENTION_FAST = 3,
} tf_cuda_attention_mode;

/* The mode an environment value selects (NULL: unset). */
tf_cuda_attention_mode tf_cuda_attention_mode_of(const char *value);

/* A device's limits as the kernels choose their paths by them. */
typedef struct tf_cuda_limits {
  int major, minor;     /* compute capability */
  int64_t shared_optin; /* the shared memory one block may opt in to, bytes */
} tf_cuda_limits;

/* Lowers `limits` (never raises them) to those `value` names, TIGHTFIT_CUDA_LIMITS's syntax: a card
 * or architecture (t4/sm75, v100/sm70, a100/sm80, a10/sm86, l4/sm89) or MAJOR.MINOR[:BYTES]. NULL
 * when done (or `value` is NULL or empty), else a constant string saying why `value` is not valid. */
const char *tf_cuda_limits_cap(const char *value, tf_cuda_limits *limits);

/* The current device's limits, lowered by TIGHTFIT_CUDA_LIMITS; false when CUDA cannot say. */
bool tf_cuda_current_limits(tf_cuda_limits *limits);

/* The shared memory per block the tensor-core kernels of `mode` need for heads of `depth` features:
 * the forward's, or (backward) the largest of the gradient's three kernels; 0 for a depth they do
 * not take. */
int64_t tf_cuda_tensor_attention_shared(int64_t depth, bool backward, tf_cuda_attention_mode mode);

/* Why the attention or attention_grad step `args` would not run on tensor cores on a device of
 * compute capability major.minor giving `shared_optin` bytes of shared memory per block, under
 * `mode`: NULL when it would, else a constant string naming the reason. Host logic only. */
const char *tf_cuda_tensor_attention_refusal(const tf_cuda_args *args, int major, int minor, int64_t shared_optin,
                                             tf_cuda_attention_mode mode);

/* The line `tightfit devices` prints for half-precision attention on such a device, into
 * text[0..size): "attention: tensor cores (...)" or "attention: CUDA cores (why)". */
void tf_cuda_tensor_attention_describe(char *text, size_t size, int major, int minor, int64_t shared_optin,
                                       tf_cuda_attention_mode mode);

/* Runs the step on tensor cores under `mode` on the current device, never falling back (for tests
 * comparing the paths): NULL, TF_ERR_UNSUPPORTED naming the refusal, or the failed call's status. */
tf_status tf_cuda_tensor_attention_launch(const tf_cuda_args *args, tf_cuda_attention_mode mode);

/* f32 attention on tensor cores (attention_f32*.cu): FlashAttention-2-style kernels whose products are
 * three TF32 products each (3xTF32, f32 accuracy; PyTorch's memory-efficient attention does the same
 * for f32 on sm_80+). The default where tf_cuda_f32_attention_refusal allows since the sixth lend (H100:
 * within 0.12 of an f32 tolerance against float64, gpt2-small's f32 step 210 -> 193 ms);
 * TIGHTFIT_CUDA_F32_ATTENTION=cores (or 0) keeps the CUDA-core kernels. */
bool tf_cuda_f32_attention_on(const char *value);
/* The shared memory per block the f32 kernels need for heads of `depth` (forward, or the larger of
 * the gradient's kernels); 0 for a depth they do not take. */
int64_t tf_cuda_f32_attention_shared(int64_t depth, bool backward);
/* Why the f32 attention or attention_grad step `args` would not run on the f32 tensor-core kernels on
 * such a device: NULL when it would, else a constant string naming the reason. Host logic only. */
const char *tf_cuda_f32_attention_refusal(const tf_cuda_args *args, int major, int minor, int64_t shared_optin);
/* The line `tightfit devices` prints for f32 attention (`on`: the switch is set), into text[0..size). */
void tf_cuda_f32_attention_describe(char *text, size_t size, int major, int minor, int64_t shared_optin, bool on);
/* Runs the f32 step on the tensor-core kernels, never falling back (for tests): NULL, TF_ERR_UNSUPPORTED
 * naming the refusal, or the failed call's status. */
tf_status tf_cuda_f32_attention_launch(const tf_cuda_args *args);

/* Checks what the launcher cannot do for these operands (an unsupported dtype, a head width
 * above the attention kernels' limit, a size above cuBLAS's int range); NULL when it can, else a
 * TF_ERR_UNSUPPORTED status (the caller frees it) naming the op and the numbers involved. The plan
 * verifier has already checked shapes and arity. */
tf_status tf_cuda_kernel_check(const tf_cuda_args *args);

/* Enqueues the op on args->stream; NULL on success, else a TF_ERR_BACKEND status (the caller frees
 * it) naming the op, the CUDA or cuBLAS call that failed with its sizes, and the error's text and
 * name. Sets the cuBLAS workspace to args->workspace before any cuBLAS call. Capturable: no
 * allocation but the status on the error path, no synchronisation. */
tf_status tf_cuda_kernel_launch(const tf_cuda_args *args);

/* Enqueues `count` adamw (or sgd) steps of one op, identical attributes and the same norm_sq input
 * (the backend's fusion checks this) as one coefficient kernel, written into steps[0]->workspace,
 * and one multi-tensor update launch per 512 tensors: the same rounded operations as each step's
 * own launch, bit for bit, skipped as a whole when norm_sq is not finite. With zero_grads each
 * gradient is then set to 0.0f (as the zero step after each update does), skipped or not.
 * Capturable; NULL or a TF_ERR_BACKEND status naming the failed launch (the caller frees it). */
tf_status tf_cuda_optimizer_launch_multi(const tf_cuda_args *const *steps, int32_t count, bool zero_grads);

#ifdef __cplusplus
}
#endif
#endif
