/* Workspace of every CUDA kernel: the bytes the compiler plans in the arena for a step on the cuda
 * target (compiler/workspace.c) and the layout the launchers carve out of it (the .cu files of kernels/cuda).
 * Header-only and plain C (also valid C++): the compiler, which never links CUDA code, and the
 * kernels read the same formulas, so the planned bytes and the touched bytes cannot drift apart.
 *
 * What needs scratch, and why:
 *   - matmul and every convolution: a cuBLAS workspace of TF_CUDA_CUBLAS_WORKSPACE bytes, handed to
 *     cublasSetWorkspace() so that cuBLAS never allocates memory of its own; convolutions first hold
 *     an im2col column block of up to TF_CUDA_CONV_COLUMN_LIMIT floats (several images at once), on
 *     f16/bf16 data with the f32 response block and weight (tf_cuda_conv_layout);
 *   - reductions to few outputs (sum, mean, max, sum_to, global_norm_sq, the losses, the norms'
 *     dgamma/dbeta): per-block partial sums in double, added in a fixed order by a second kernel,
 *     so the results are deterministic without floating-point atomics;
 *   - layer_norm_grad / rms_norm_grad: each row's statistics (mean, rstd in double);
 *   - embedding_grad: the (id, position) keys, sorted so that each table row sums its positions in
 *     order (deterministic, no atomics);
 *   - attention_grad: each query row's log-sum-exp and dO.O (O(T), never [T, T]);
 *   - sgd / adamw: the update's scalar coefficients, computed once on the device per run;
 *   - dropout: a device copy of the run values (seed, micro-step), which live in host memory;
 *   - ctc_loss, ctc_loss_grad: each sequence's log alpha and log beta [T, 2S + 1], its frames'
 *     log-sum-exp and its loss, in f32 (core/ctc.h).
 * Every section starts at a multiple of TF_CUDA_WORKSPACE_ALIGN bytes (cuBLAS wants 256). */
#ifndef TIGHTFIT_CORE_WORKSPACE_CUDA_H
#define TIGHTFIT_CORE_WORKSPACE_CUDA_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/conv_geometry.h"
#include "core/ctc.h"
#include "core/linear_loss.h"
#include "core/tensor.h"
#include "core/workspace.h"

#define TF_CUDA_WORKSPACE_ALIGN 256
#define TF_CUDA_CUBLAS_WORKSPACE ((int64_t)4 << 20)  /* cuBLAS's recommended size before Hopper */
#define TF_CUDA_CONV_COLUMN_LIMIT ((int64_t)1 << 22) /* floats in one im2col block (16 MiB) */
#define TF_CUDA_REDUCE_BLOCK_ELEMENTS 8192           /* elements per partial of a full reduction, at least */
#define TF_CUDA_REDUCE_MAX_PARTIALS 512
#define TF_CUDA_COLUMN_MIN_RUN 128   /* rows one thread sums in a split column reduction, at least */
#define TF_CUDA_COLUMN_THREADS 65536 /* threads a split column reduction aims for */
#define TF_CUDA_COLUMN_MAX_SPLITS 1024
#define TF_CUDA_OPTIMIZER_COEFFICIENTS 64 /* bytes: sgd/adamw scalars */
#define TF_CUDA_RUN_VALUES_BYTES 32       /* bytes: tf_cuda_run_values (kernels/cuda/kernels.h checks) */

static inline int64_t tf_cuda_round_up(int64_t bytes) {
  return (bytes + TF_CUDA_WORKSPACE_ALIGN - 1) / TF_CUDA_WORKSPACE_ALIGN * TF_CUDA_WORKSPACE_ALIGN;
}

static inline int64_t tf_cuda_ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

/* Partial sums of a full reduction of n contiguous elements. */
static inline int64_t tf_cuda_full_partials(int64_t n) {
  int64_t partials = tf_cuda_ceil_div(n, TF_CUDA_REDUCE_BLOCK_ELEMENTS);
  if (partials < 1)
    partials = 1;
  return partials > TF_CUDA_REDUCE_MAX_PARTIALS ? TF_CUDA_REDUCE_MAX_PARTIALS : partials;
}

/* Row ranges a column reduction (outputs columns, each summing `length` rows) is split into. */
static inline int64_t tf_cuda_column_splits(int64_t outputs, int64_t length) {
  if (outputs <= 0 || length <= 0)
    return 1;
  int64_t by_length = tf_cuda_ceil_div(length, TF_CUDA_COLUMN_MIN_RUN);
  int64_t by_threads = TF_CUDA_COLUMN_THREADS / outputs;
  int64_t splits = by_length < by_threads ? by_length : by_threads;
  if (splits < 1)
    splits = 1;
  return splits > TF_CUDA_COLUMN_MAX_SPLITS ? TF_CUDA_COLUMN_MAX_SPLITS : splits;
}

/* ---- reductions over axes ---- */

typedef enum tf_cuda_reduce_kind {
  TF_CUDA_REDUCE_FULL = 0, /* one output: the input is one contiguous group */
  TF_CUDA_REDUCE_ROWS,     /* the innermost axis is reduced: a warp per output, lanes along it */
  TF_CUDA_REDUCE_COLUMNS   /* the innermost axis is kept: a thread per output, split over rows */
} tf_cuda_reduce_kind;

/* A reduction's geometry after dropping size-1 axes and merging neighbours of the same kind (x
 * is contiguous, so merging always works), as kernels/cpu/reduce.c does. */
typedef struct tf_cuda_reduction {
  int32_t rank;
  int64_t shape[TF_MAX_RANK], stride[TF_MAX_RANK];
  bool reduced[TF_MAX_RANK];
  int64_t outputs, group;
  tf_cuda_reduce_kind kind;
  int64_t splits; /* columns: row ranges (1: no partials) */
  int64_t length; /* columns: the rows each output sums when the reduced axes are one run; else 0 */
} tf_cuda_reduction;

static inline void tf_cuda_reduction_init(tf_cuda_reduction *r, int32_t rank, const int64_t *shape,
                                          const bool *reduced_axes) {
  memset(r, 0, sizeof(*r));
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] == 1)
      continue;
    if (r->rank > 0 && r->reduced[r->rank - 1] == reduced_axes[i]) {
      r->shape[r->rank - 1] *= shape[i];
      continue;
    }
    r->shape[r->rank] = shape[i];
    r->reduced[r->rank] = reduced_axes[i];
    r->rank++;
  }
  int64_t stride = 1;
  int32_t reduced_runs = 0;
  r->outputs = r->group = 1;
  for (int32_t i = r->rank - 1; i >= 0; i--) {
    r->stride[i] = stride;
    stride *= r->shape[i];
    if (r->reduced[i]) {
      r->group *= r->shape[i];
      reduced_runs++;
    } else {
      r->outputs *= r->shape[i];
    }
  }
  r->splits = 1;
  if (r->outputs == 1) {
    r->kind = TF_CUDA_REDUCE_FULL;
  } else if (r->rank > 0 && r->reduced[r->rank - 1]) {
    r->kind = TF_CUDA_REDUCE_ROWS;
  } else {
    r->kind = TF_CUDA_REDUCE_COLUMNS;
    if (reduced_runs == 1) {
      r->length = r->group;
      r->splits = tf_cuda_column_splits(r->outputs, r->group);
    }
  }
}

/* sum, mean, max, max_grad (reduce attrs on x) and sum_to (dy onto like's shape). */
static inline void tf_cuda_reduction_of(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *inputs,
                                        tf_cuda_reduction *r) {
  bool reduced[TF_MAX_RANK];
  const tf_tensor_ref *x = &inputs[0];
  if (op == TF_OP_SUM_TO) {
    const int32_t offset = x->rank - inputs[1].rank;
    for (int32_t i = 0; i < x->rank; i++)
      reduced[i] = i < offset || inputs[1].shape[i - offset] == 1;
  } else {
    const tf_reduce_attrs *a = &attrs->u.reduce;
    for (int32_t i = 0; i < TF_MAX_RANK; i++)
      reduced[i] = a->n_axes == 0;
    for (int32_t i = 0; i < a->n_axes; i++)
      reduced[a->axes[i] < 0 ? a->axes[i] + x->rank : a->axes[i]] = true;
  }
  tf_cuda_reduction_init(r, x->rank, x->shape, reduced);
}

static inline int64_t tf_cuda_reduction_workspace(const tf_cuda_reduction *r, tf_op op) {
  if (op == TF_OP_MAX_GRAD)
    return r->kind == TF_CUDA_REDUCE_FULL ? 8 : 0; /* the count of maxima */
  if (r->kind == TF_CUDA_REDUCE_FULL)
    return 8 * tf_cuda_full_partials(r->group);
  if (r->kind == TF_CUDA_REDUCE_COLUMNS && r->splits > 1)
    return 8 * r->splits * r->outputs;
  return 0;
}

/* ---- convolutions ---- */

/* The convolution geometry (core/conv_geometry.h); CUDA blocks it by images (chunk_images). On
 * f16/bf16 data (`half`: the half kernel, kernels/cuda/conv.cu) no convolution is direct (im2col
 * widens even a 1x1 image to f32) and a chunk's images hold their f32 response block beside their
 * column block within the same limit. */
typedef tf_conv_geometry tf_cuda_conv_geometry;

static inline bool tf_cuda_conv_geometry_get(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *inputs,
                                             const tf_tensor_ref *outputs, tf_cuda_conv_geometry *g) {
  if (!tf_conv_geometry_fill(op, attrs, inputs, outputs, g))
    return false;
  g->half = inputs[0].dtype == TF_F16 || inputs[0].dtype == TF_BF16;
  if (g->half)
    g->direct = false;
  int64_t per_image = g->column_rows * g->positions;
  if (g->half)
    per_image += g->response_channels / g->groups * g->positions;
  g->chunk_images = per_image > 0 ? TF_CUDA_CONV_COLUMN_LIMIT / per_image : g->batch;
  if (g->chunk_images < 1)
    g->chunk_images = 1;
  if (g->chunk_images > g->batch)
    g->chunk_images = g->batch > 0 ? g->batch : 1;
  return true;
}

/* A convolution step's workspace, byte offsets: the im2col column block (f32; none for a direct
 * convolution), on half data the chunk's f32 response block (a forward's products before the bias
 * and the rounding, a backward's widened dy) and the f32 weight (widened, or the weight gradient
 * summed before its rounding), then the cuBLAS workspace; each part 256-byte aligned. On f32 the
 * response and weight parts are empty: the f32 kernel's layout. */
typedef struct tf_cuda_conv_layout {
  int64_t column, response, weight, cublas, total;
} tf_cuda_conv_layout;

static inline tf_cuda_conv_layout tf_cuda_conv_layout_of(const tf_cuda_conv_geometry *g) {
  tf_cuda_conv_layout l;
  const int64_t out_per_group = g->groups > 0 ? g->response_channels / g->groups : 0;
  l.column = 0;
  l.response = g->direct ? 0 : tf_cuda_round_up(4 * g->chunk_images * g->column_rows * g->positions);
  l.weight = l.response + (g->half ? tf_cuda_round_up(4 * g->chunk_images * out_per_group * g->positions) : 0);
  l.cublas = l.weight + (g->half ? tf_cuda_round_up(4 * g->response_channels * g->column_rows) : 0);
  l.total = l.cublas + TF_CUDA_CUBLAS_WORKSPACE;
  return l;
}

/* ---- the rest ---- */

/* Rows x classes of a cross-entropy's logits, as partial blocks. */
static inline int64_t tf_cuda_loss_partials(const tf_tensor_ref *x) { return tf_cuda_full_partials(x->count); }

/* The sort keys of embedding_grad: the ids' count rounded up to a power of two. */
static inline int64_t tf_cuda_embedding_keys(int64_t ids) {
  int64_t n = 1;
  while (n < ids)
    n <<= 1;
  return ids > 0 ? n : 0;
}

/* linear_cross_entropy and its gradient (kernels/cuda/linear_loss.cu): one chunk of logits, each
 * row's loss (double), the count of labels, then the cuBLAS workspace; each part 256-byte aligned.
 * A chunk's rows of logits lie `ld` floats apart: the classes rounded up to a multiple of 8, so that
 * every row starts 32-byte aligned and the products read and write it in vector loads (gpt2-small's
 * 50,257 classes leave each row but the first misaligned); the padding is never read or written. */
typedef struct tf_cuda_linear_loss_layout {
  int64_t ld; /* floats from one row of logits to the next */
  int64_t logits, row_losses, count, cublas, total;
} tf_cuda_linear_loss_layout;

/* The padded leading dimension of a chunk of logits over `classes` (see above). */
static inline int64_t tf_cuda_linear_loss_ld(int64_t classes) { return (classes + 7) / 8 * 8; }

static inline tf_cuda_linear_loss_layout tf_cuda_linear_loss_layout_of(const tf_linear_loss_geometry *g) {
  tf_cuda_linear_loss_layout l;
  l.ld = tf_cuda_linear_loss_ld(g->classes);
  l.logits = 0;
  l.row_losses = tf_cuda_round_up(4 * g->chunk_rows * l.ld);
  l.count = l.row_losses + tf_cuda_round_up(8 * g->rows);
  l.cublas = l.count + tf_cuda_round_up(8);
  l.total = l.cublas + TF_CUDA_CUBLAS_WORKSPACE;
  return l;
}

/* ... on f16/bf16 x (kernels/cuda/linear_loss_half.cu: classes in spans outside, row chunks inside,
 * as the CPU's half kernel): the CPU kernel's parts (core/linear_loss.h,
 * tf_linear_loss_half_workspace_of), then the count of labels and the cuBLAS workspace. */
typedef struct tf_cuda_linear_loss_half_layout {
  tf_linear_loss_half_workspace parts;
  int64_t count, cublas, total;
} tf_cuda_linear_loss_half_layout;

static inline tf_cuda_linear_loss_half_layout tf_cuda_linear_loss_half_layout_of(const tf_linear_loss_geometry *g,
                                                                                 bool gradients, bool bias) {
  tf_cuda_linear_loss_half_layout l;
  l.parts = tf_linear_loss_half_workspace_of(g, gradients, bias);
  l.count = tf_cuda_round_up(l.parts.bytes);
  l.cublas = l.count + tf_cuda_round_up(8);
  l.total = l.cublas + TF_CUDA_CUBLAS_WORKSPACE;
  return l;
}

/* ... the tensor-core path of that head (kernels/cuda/linear_loss_tensor.cu): x and the weight multiplied
 * as they are (f16/bf16) into f32 logits, in blocks of chunk_rows x span. The span is at most
 * TF_CUDA_HEAD_TENSOR_SPAN classes (a row block of kThreads threads holds a span's row in registers,
 * 8 values a thread); the rows of a chunk are as many as keep the block within the f32 head's chunk of
 * logits (the plan's chunk_rows x classes, the budget search's knob), at least the plan's chunk_rows,
 * at most every row, balanced over the chunks (GPT-2 at 8 x 1024: 2 chunks of 4,096 rows, not 32 of
 * 256). Parts, each 256-byte aligned: per row its running max, sum and label logit (3 doubles); the
 * block of logits (f32; in the gradient pass its dlogits in place, f32 or rounded to the half type);
 * with the gradients, the f32 x chunk and weight span that f32 gradient products read (widened: only
 * when the plan's matmul_math is not x's half type), a span of dweight (f32) and of dbias (doubles,
 * with a bias), the f32 sums of dx (rows x d); the count of labels, the cuBLAS workspace. */
#define TF_CUDA_HEAD_TENSOR_SPAN 2048

typedef struct tf_cuda_linear_loss_tensor_layout {
  int64_t span, chunk_rows; /* classes of a span, rows of a chunk (the last ones may be fewer) */
  int64_t statistics, logits, x_chunk, weight_span, dweight_span, dbias_span, dx_sum, count, cublas, total;
} tf_cuda_linear_loss_tensor_layout;

/* The rows of a chunk of the tensor-core path for spans of `span` classes (0 without rows). */
static inline int64_t tf_cuda_linear_loss_tensor_rows(const tf_linear_loss_geometry *g, int64_t span) {
  if (g->rows <= 0 || span <= 0)
    return g->rows > 0 ? g->rows : 0;
  int64_t rows = g->chunk_rows * (g->classes / span); /* never above chunk_rows x classes / span */
  rows = rows < g->chunk_rows ? g->chunk_rows : rows;
  rows = rows > g->rows ? g->rows : rows;
  return tf_cuda_ceil_div(g->rows, tf_cuda_ceil_div(g->rows, rows));
}

static inline tf_cuda_linear_loss_tensor_layout tf_cuda_linear_loss_tensor_layout_of(const tf_linear_loss_geometry *g,
                                                                                     bool gradients, bool bias) {
  tf_cuda_linear_loss_tensor_layout l;
  l.span = g->classes < TF_CUDA_HEAD_TENSOR_SPAN ? g->classes : TF_CUDA_HEAD_TENSOR_SPAN;
  l.chunk_rows = tf_cuda_linear_loss_tensor_rows(g, l.span);
  l.statistics = 0;
  l.logits = l.statistics + tf_cuda_round_up(g->rows * 3 * 8);
  l.x_chunk = l.logits + tf_cuda_round_up(l.chunk_rows * l.span * 4);
  l.weight_span = l.x_chunk + (gradients ? tf_cuda_round_up(l.chunk_rows * g->features * 4) : 0);
  l.dweight_span = l.weight_span + (gradients ? tf_cuda_round_up(l.span * g->features * 4) : 0);
  l.dbias_span = l.dweight_span + (gradients ? tf_cuda_round_up(l.span * g->features * 4) : 0);
  l.dx_sum = l.dbias_span + (gradients && bias ? tf_cuda_round_up(l.span * 8) : 0);
  l.count = l.dx_sum + (gradients ? tf_cuda_round_up(g->rows * g->features * 4) : 0);
  l.cublas = l.count + tf_cuda_round_up(8);
  l.total = l.cublas + TF_CUDA_CUBLAS_WORKSPACE;
  return l;
}

/* The planned workspace of the half head: enough for either path (the tensor-core path, or the
 * widening one that TIGHTFIT_CUDA_HEAD_TENSOR=0, a device without the tensor-core types or a refused
 * product runs), since the plan is compiled before the run chooses. */
static inline int64_t tf_cuda_linear_loss_half_bytes(const tf_linear_loss_geometry *g, bool gradients, bool bias) {
  const int64_t widening = tf_cuda_linear_loss_half_layout_of(g, gradients, bias).total;
  const int64_t tensor = tf_cuda_linear_loss_tensor_layout_of(g, gradients, bias).total;
  return widening > tensor ? widening : tensor;
}

/* Workspace bytes of the CUDA kernel of `op` for these operands. */
static inline int64_t tf_cuda_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs,
                                              const tf_tensor_ref *inputs, int32_t n_outputs,
                                              const tf_tensor_ref *outputs) {
  (void)n_outputs;
  tf_cuda_reduction r;
  tf_cuda_conv_geometry g;
  memset(&g, 0, sizeof(g));
  switch (tf_op_workspace_rule(op)) {
  case TF_WORKSPACE_MATMUL: /* matmul_accumulate's product lands in its input 0 */
    return (op == TF_OP_MATMUL_ACCUMULATE ? inputs[0] : outputs[0]).count > 0 ? TF_CUDA_CUBLAS_WORKSPACE : 0;
  case TF_WORKSPACE_CONV:
    tf_cuda_conv_geometry_get(op, attrs, inputs, outputs, &g);
    return tf_cuda_conv_layout_of(&g).total;
  case TF_WORKSPACE_REDUCE: tf_cuda_reduction_of(op, attrs, inputs, &r); return tf_cuda_reduction_workspace(&r, op);
  case TF_WORKSPACE_GLOBAL_NORM_SQ: {
    int64_t partials = 0;
    for (int32_t i = 0; i < n_inputs; i++)
      partials += tf_cuda_full_partials(inputs[i].count);
    return 8 * partials;
  }
  case TF_WORKSPACE_NORM_GRAD: {
    const tf_tensor_ref *x = &inputs[0];
    int64_t features = x->rank > 0 ? x->shape[x->rank - 1] : 1, rows = features > 0 ? x->count / features : 0;
    int64_t splits = tf_cuda_column_splits(features, rows);
    return tf_cuda_round_up(16 * rows) + 16 * splits * features;
  }
  case TF_WORKSPACE_EMBEDDING_GRAD: return 8 * tf_cuda_embedding_keys(inputs[0].count);
  case TF_WORKSPACE_ATTENTION_GRAD: {
    int64_t rows = inputs[0].shape[0] * inputs[0].shape[1] * (int64_t)attrs->u.attention.num_heads;
    return tf_cuda_round_up(4 * rows) + 4 * rows;
  }
  case TF_WORKSPACE_CROSS_ENTROPY: return 16 * tf_cuda_loss_partials(&inputs[0]);
  case TF_WORKSPACE_PAIR_LOSS: return 8 * tf_cuda_loss_partials(&inputs[0]);
  case TF_WORKSPACE_CROSS_ENTROPY_GRAD: return 8;
  case TF_WORKSPACE_OPTIMIZER: return TF_CUDA_OPTIMIZER_COEFFICIENTS;
  case TF_WORKSPACE_LINEAR_CROSS_ENTROPY: {
    tf_linear_loss_geometry lg = tf_linear_loss_geometry_of(attrs, &inputs[0], &inputs[1]);
    if (inputs[0].dtype == TF_F16 || inputs[0].dtype == TF_BF16)
      return tf_cuda_linear_loss_half_bytes(&lg, op != TF_OP_LINEAR_CROSS_ENTROPY,
                                            tf_linear_loss_bias_input(op, n_inputs) >= 0);
    return tf_cuda_linear_loss_layout_of(&lg).total;
  }
  case TF_WORKSPACE_DROPOUT: return attrs->u.dropout.rate > 0.0f ? TF_CUDA_RUN_VALUES_BYTES : 0;
  case TF_WORKSPACE_CTC: {
    const tf_ctc_geometry cg = tf_ctc_geometry_of(&inputs[0], &inputs[1]);
    return tf_cuda_round_up(tf_ctc_mul(4, tf_ctc_workspace_elements(&cg)));
  }
  default: return 0;
  }
}

#endif
