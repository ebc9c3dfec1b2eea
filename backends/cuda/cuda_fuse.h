/* Fusion in the CUDA backend: a peephole over a compiled plan's steps, done at prepare time. The
 * plan, its buffers, their offsets and its memory report stay exactly as compiled: a fused launch
 * only skips writing intermediate buffers that no other step reads, so every planned byte keeps
 * its bound. Plain C over a tf_plan (no CUDA): the tests check the groups found without a GPU.
 *
 * Groups (each step in at most one group; the spans [first member, last member] of two groups
 * never intersect):
 *   - BIAS: matmul(x, W) -> y, add(y, b) -> z, b an [n] (or [1, n]) vector written before the matmul
 *     (a parameter, or its cast to bf16), y read by no other step: one cuBLASLt GEMM with the bias
 *     epilogue writes z.
 *   - BIAS_GELU / BIAS_GELU_AUX: the same followed by gelu(z) -> a with the tanh approximation
 *     (cuBLASLt's GELU): D = a; z also written as the epilogue's aux output when another step
 *     reads it (the gradient), else not written at all. Only on products of the types the options
 *     name (f16 by default); on others the group stops at BIAS.
 *   - BGRADB: sum_to(dz, b) -> db and the weight gradient matmul(dzᵀ, x) -> dW (or
 *     matmul_accumulate), dz read directly or through a reshape view: one GEMM whose epilogue
 *     reduces dz into db (CUBLASLT_EPILOGUE_BGRADB); BGRADA: the same with weights stored [in, out],
 *     matmul(xᵀ, dz) -> dW (CUBLASLT_EPILOGUE_BGRADA).
 *   - OPTIMIZER: consecutive adamw (or sgd) steps with identical attributes and norm_sq input, each
 *     maybe followed by the zero step of its gradient (gradient accumulation): one coefficient
 *     kernel and one multi-tensor update launch (or a few, when the list is long).
 * A GEMM group is kept only if moving its writes and reads to the launch step changes nothing any
 * other step, or copy to or from the host (host_steps), sees (byte ranges checked against every step
 * in between); it uses the matmul step's workspace only where that is free at the launch step. */
#ifndef TIGHTFIT_BACKENDS_CUDA_CUDA_FUSE_H
#define TIGHTFIT_BACKENDS_CUDA_CUDA_FUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tightfit/plan.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tf_cuda_fusion_kind {
  TF_CUDA_FUSION_BIAS = 0,
  TF_CUDA_FUSION_BIAS_GELU,
  TF_CUDA_FUSION_BIAS_GELU_AUX,
  TF_CUDA_FUSION_BGRADB,
  TF_CUDA_FUSION_OPTIMIZER,
  TF_CUDA_FUSION_BGRADA, /* BGRADB with the weights stored [in, out]: matmul(xᵀ, dz), dz the second operand */
} tf_cuda_fusion_kind;

enum { TF_CUDA_FUSION_MAX_MEMBERS = 3 };

typedef struct tf_cuda_fusion {
  tf_cuda_fusion_kind kind;
  int32_t launch_step; /* the fused launch runs in place of this step; the other members launch nothing */
  int32_t first, last; /* the span: the first and last member */
  /* GEMM groups */
  int32_t matmul_step;                                    /* the matmul (or matmul_accumulate) */
  int32_t n_members, members[TF_CUDA_FUSION_MAX_MEMBERS]; /* in step order */
  int32_t bias;                                           /* BIAS*: the bias read; BGRADB: the bias gradient written */
  int32_t output; /* D: z or the gelu output (BIAS*), the matmul's output (BGRADB) */
  int32_t aux;    /* BIAS_GELU_AUX: z, written beside D; else -1 */
  /* GEMM groups: whether the launch may use the matmul step's planned workspace (free at the launch
   * step too); else cuBLASLt is asked for an algorithm without one */
  bool workspace;
  /* OPTIMIZER: steps [first, last]; with zero_grads every update is followed by the zero step of its
   * gradient (gradient accumulation), which the same launch does (0.0f over the gradient) */
  bool zero_grads;
} tf_cuda_fusion;

typedef struct tf_cuda_fusion_options {
  bool epilogues;    /* GEMM groups; TIGHTFIT_CUDA_EPILOGUES=0 turns them off */
  bool multi_tensor; /* OPTIMIZER groups; TIGHTFIT_CUDA_MULTI_TENSOR=0 turns them off */
  /* BIAS_GELU*: bit (1u << dtype) set where products of that type take the GELU into the epilogue;
   * the others stop at BIAS and their gelu launches as compiled (TIGHTFIT_CUDA_GELU_EPILOGUE) */
  uint32_t gelu_dtypes;
} tf_cuda_fusion_options;

/* The GELU epilogue's default types: f16 only. cuBLASLt's GELU epilogues on f32 and bf16 products
 * run a slower kernel than the plain GEMM and a separate GELU together (llm.c PR 338, 2024; an H100
 * f32 gpt2-small c_fc product with it: 1.79 ms, 21.5 TFLOP/s, where the model's other products ran
 * at 52.7 TFLOP/s, bench/results/2026-12-05-gpu-h100-lend6). */
#define TF_CUDA_GELU_EPILOGUE_DEFAULT (1u << TF_F16)

/* The GELU epilogue's types for a TIGHTFIT_CUDA_GELU_EPILOGUE value: NULL or "" the default,
 * "all" every floating type, "0" or "off" none, else a comma list of "f32", "bf16", "f16". A bad
 * value is an invalid-argument status naming it. */
tf_status tf_cuda_gelu_epilogue_parse(const char *value, uint32_t *dtypes) TF_MUST_USE;

/* The options from the environment into *options: each switch on unless its variable is "0", the
 * GELU epilogue's types from TIGHTFIT_CUDA_GELU_EPILOGUE (an invalid value: its status). */
tf_status tf_cuda_fusion_options_from_env(tf_cuda_fusion_options *options) TF_MUST_USE;

/* Finds the groups of `plan` that `options` allow, in order of their first step: *out is malloc'ed
 * (the caller frees it; NULL when none) and *count set. NULL, or an out-of-memory status. */
tf_status tf_cuda_fusion_find(const tf_plan *plan, tf_cuda_fusion_options options, tf_cuda_fusion **out,
                              int32_t *count) TF_MUST_USE;

/* The kind's name: "bias", "bias+gelu", "bias+gelu(aux)", "bgradb", "optimizer", "bgrada". */
const char *tf_cuda_fusion_kind_name(tf_cuda_fusion_kind kind);

/* One line describing group f ("bias+gelu(aux) steps 14,15,16 at 14", "... (no workspace)"),
 * truncated to `size`. */
void tf_cuda_fusion_describe(const tf_cuda_fusion *f, char *text, size_t size);

#ifdef __cplusplus
}
#endif
#endif
