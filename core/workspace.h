/* The workspace column of the op table (core/op_table.h): which scratch formula an op's kernels
 * use. core/workspace_cpu.c and core/workspace_cuda.h switch on it; the rules that need no scratch
 * on a backend fall to that backend's default of 0 bytes. Header-only and plain C (also valid C++):
 * the CUDA kernels include it through core/workspace_cuda.h without linking the core library. */
#ifndef TIGHTFIT_CORE_WORKSPACE_H
#define TIGHTFIT_CORE_WORKSPACE_H

#include "tightfit/types.h"

typedef enum tf_workspace_rule {
  TF_WORKSPACE_NONE = 0,             /* the kernels work in their operands */
  TF_WORKSPACE_MATMUL,               /* CUDA: a cuBLAS workspace */
  TF_WORKSPACE_CONV,                 /* im2col column blocks (and the weight gradient's partials, CPU; cuBLAS, CUDA) */
  TF_WORKSPACE_REDUCE,               /* CUDA: partial sums of sum, mean, max, sum_to; max_grad's count of maxima */
  TF_WORKSPACE_GLOBAL_NORM_SQ,       /* CUDA: partial sums of every input */
  TF_WORKSPACE_NORM_GRAD,            /* CUDA: row statistics and dgamma/dbeta partials */
  TF_WORKSPACE_EMBEDDING_GRAD,       /* CUDA: the sorted (id, position) keys */
  TF_WORKSPACE_ATTENTION,            /* CPU: each thread's score block */
  TF_WORKSPACE_ATTENTION_GRAD,       /* CPU: score and gradient blocks; CUDA: each query row's statistics */
  TF_WORKSPACE_CROSS_ENTROPY,        /* CUDA: loss and count partials */
  TF_WORKSPACE_PAIR_LOSS,            /* CUDA: loss partials (mse, bce_with_logits) */
  TF_WORKSPACE_CROSS_ENTROPY_GRAD,   /* CUDA: the count of labels not ignored */
  TF_WORKSPACE_OPTIMIZER,            /* CUDA: the update's scalar coefficients */
  TF_WORKSPACE_DROPOUT,              /* CUDA: a device copy of the run values */
  TF_WORKSPACE_LINEAR_CROSS_ENTROPY, /* one chunk of logits (core/linear_loss.h) and its row statistics */
  TF_WORKSPACE_CTC                   /* every backend: log alpha, log beta, frame sums, losses (core/ctc.h) */
} tf_workspace_rule;

/* The workspace rule of `op` (TF_WORKSPACE_NONE when out of range). */
static inline tf_workspace_rule tf_op_workspace_rule(tf_op op) {
  switch (op) {
#define TF_WORKSPACE_CASE(ID, op_name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias,    \
                          workspace, ...)                                                                              \
  case TF_OP_##ID: return TF_WORKSPACE_##workspace;
    TF_OP_TABLE(TF_WORKSPACE_CASE)
#undef TF_WORKSPACE_CASE
  default: return TF_WORKSPACE_NONE;
  }
}

/* Vulkan: embedding_grad on f16/bf16 data (shaders/embedding.comp, modes 3 and 4): two int32 words
 * per id, its next position with the same id and whether it is the first. */
static inline int64_t tf_vulkan_embedding_grad_half_workspace_bytes(int64_t ids) { return 8 * ids; }

#endif
