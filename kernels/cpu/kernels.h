/* The CPU kernels: one function per op, forward and backward, over host memory. Every kernel is
 * written once, type-generically (kernels/cpu/real.h), and compiled twice: for f32 (what the CPU
 * backend runs) and for f64 (the reference every backend and every gradient is checked against).
 *
 * A kernel trusts its arguments: the plan verifier has checked shapes, dtypes and arity before any
 * kernel runs. Floating tensors of one call all have the kernel's compute type; index tensors
 * (embedding ids, labels) are i32 or i64. */
#ifndef TIGHTFIT_KERNELS_CPU_KERNELS_H
#define TIGHTFIT_KERNELS_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef tf_tensor_ref tf_cpu_tensor;

/* Per-run state a kernel may read. */
typedef struct tf_cpu_context {
  int32_t threads;         /* kernels may use up to this many threads (OpenMP) */
  int64_t optimizer_step;  /* 1 for the first optimizer step (AdamW bias correction) */
  int64_t micro_step;      /* global micro-batch counter: the RNG's "step" (dropout) */
  uint64_t seed;           /* the session's RNG seed */
  int32_t loss_scale_log2; /* sgd/adamw multiply the gradients by 2^-loss_scale_log2 (0: unscaled) */
} tf_cpu_context;

typedef struct tf_cpu_args {
  tf_op op;
  const tf_attrs *attrs;
  int32_t n_inputs;
  const tf_cpu_tensor *inputs;
  int32_t n_outputs;
  const tf_cpu_tensor *outputs;
  void *workspace; /* tf_cpu_workspace_bytes() bytes, 64-byte aligned, or NULL when 0 */
  int64_t workspace_bytes;
  const tf_cpu_context *context;
  /* On a half slice (backends/cpu/cpu_half.c): the first axis of the step's operands before the cut,
   * so that a product tiles the slice as it tiles the whole (kernels/cpu/matmul.c); 0 otherwise. */
  int64_t whole_rows;
} tf_cpu_args;

typedef void (*tf_cpu_kernel)(const tf_cpu_args *args);

/* The kernel of `op` in f32 (f64 == false) or f64 (f64 == true); NULL when none exists. */
tf_cpu_kernel tf_cpu_kernel_get(tf_op op, bool f64);

/* The fused loss head (linear_cross_entropy, its gradient and single pass, with or without a bias)
 * on f16/bf16 x, weight and bias, f32 loss and dloss: class spans outside, row chunks inside, in the
 * workspace tf_linear_loss_half_workspace_of() lays out (kernels/cpu/linear_loss_half.c). */
void tf_cpu_linear_cross_entropy_half(const tf_cpu_args *args);

/* Embedding and embedding_grad on an f16/bf16 table and dy (kernels/cpu/embedding_half.c): rows
 * copied as stored; each gradient row summed in f32 over its ids in order and rounded once, in the
 * workspace tf_cpu_embedding_grad_half_layout_of() lays out. */
void tf_cpu_embedding_half(const tf_cpu_args *args);
void tf_cpu_embedding_grad_half(const tf_cpu_args *args);
/* batch_norm_running on f16/bf16 x (its running statistics f32): the statistics of x widened
 * exactly, as the f32 kernel's on an f32 copy (kernels/cpu/batch_norm_half.c). */
void tf_cpu_batch_norm_running_half(const tf_cpu_args *args);

/* The CPU half kernel of its own of `op` (core/half_slices.h, tf_cpu_half_own_kernel), or NULL. */
tf_cpu_kernel tf_cpu_half_kernel_get(tf_op op);

#ifdef __cplusplus
}
#endif
#endif
