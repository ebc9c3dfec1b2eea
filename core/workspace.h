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

/* Vulkan: sums over long columns split into chunks of their groups (shaders/reduce.comp's sum_to,
 * sum and mean in columns; shaders/norm.comp's dgamma and dbeta): a workgroup per (block of 64
 * neighbouring outputs, chunk) writes each output's f32 partial sum of the chunk to the workspace,
 * then one invocation per output adds its partials in chunk order (fixed: deterministic). Without
 * the split a bias gradient of gpt2-small (768 columns over 8,192 rows) had 48 workgroups walking
 * 512 rows each on a GPU of 132 multiprocessors. The chunk's rows: about 1,024 workgroups in all,
 * at least 64 rows a chunk; 0 (not split) for groups under 128, more than 65,535 blocks, or under
 * two chunks. */
enum { TF_VULKAN_SPLIT_COLUMNS = 64, TF_VULKAN_SPLIT_MIN_ROWS = 64, TF_VULKAN_SPLIT_WORKGROUPS = 1024 };

static inline int64_t tf_vulkan_column_chunk_rows(int64_t outputs, int64_t group) {
  const int64_t blocks = (outputs + TF_VULKAN_SPLIT_COLUMNS - 1) / TF_VULKAN_SPLIT_COLUMNS;
  if (outputs <= 0 || group < 2 * TF_VULKAN_SPLIT_MIN_ROWS || blocks > 65535)
    return 0;
  int64_t chunks = (TF_VULKAN_SPLIT_WORKGROUPS + blocks - 1) / blocks;
  if (chunks > group / TF_VULKAN_SPLIT_MIN_ROWS)
    chunks = group / TF_VULKAN_SPLIT_MIN_ROWS;
  return chunks < 2 ? 0 : (group + chunks - 1) / chunks;
}

/* The chunks of `group` at `rows` a chunk (the last may be shorter). */
static inline int64_t tf_vulkan_column_chunks(int64_t group, int64_t rows) {
  return rows > 0 ? (group + rows - 1) / rows : 1;
}

/* How reduce.comp (vk_lower_reduce.c) reduces `outputs` groups of `group` elements: a workgroup per
 * output (a tree) for fewer than 256 outputs over 1,024 or more elements; else in columns (lanes
 * sharing each output's group) for groups of 64 or more; else an invocation per output. */
static inline bool tf_vulkan_reduce_tree(int64_t outputs, int64_t group) { return outputs < 256 && group >= 1024; }
static inline bool tf_vulkan_reduce_in_columns(int64_t outputs, int64_t group) {
  return !tf_vulkan_reduce_tree(outputs, group) && group >= 64;
}

/* Vulkan sum_to, sum and mean (the other reductions: 0): out_count outputs, each the sum of
 * in_count / out_count elements; the sums reduce.comp takes in columns may split. */
static inline int64_t tf_vulkan_reduce_chunk_rows(tf_op op, int64_t in_count, int64_t out_count) {
  if ((op != TF_OP_SUM_TO && op != TF_OP_SUM && op != TF_OP_MEAN) || out_count <= 0)
    return 0;
  const int64_t group = in_count / out_count;
  return tf_vulkan_reduce_in_columns(out_count, group) ? tf_vulkan_column_chunk_rows(out_count, group) : 0;
}
static inline int64_t tf_vulkan_reduce_workspace_bytes(tf_op op, int64_t in_count, int64_t out_count) {
  const int64_t rows = tf_vulkan_reduce_chunk_rows(op, in_count, out_count);
  return rows > 0 ? 4 * out_count * tf_vulkan_column_chunks(in_count / out_count, rows) : 0;
}

/* Vulkan layer_norm_grad and rms_norm_grad: dgamma's and dbeta's partials, two f32 per (chunk, feature). */
static inline int64_t tf_vulkan_norm_grad_workspace_bytes(int64_t rows, int64_t features) {
  const int64_t chunk = tf_vulkan_column_chunk_rows(features, rows);
  return chunk > 0 ? 8 * features * tf_vulkan_column_chunks(rows, chunk) : 0;
}

#endif
