/* matmul: C = op(A) op(B) over numpy-broadcast batch dims, with BLAS gemms; matmul_accumulate:
 * C += op(A) op(B) (2-D), the same gemms with beta = 1 (C is the gradient accumulator).
 *
 * The work is cut into tasks of one gemm each: per batch entry, tiles of TF_CPU_MATMUL_ROW_TILE
 * rows by TF_CPU_MATMUL_COLUMN_TILE columns of C (core/workspace_cpu.h), fixed whatever the thread
 * count, so every element of C comes from a BLAS call of the same shape, at the same place in it, on
 * any number of threads and in any row slice cut at a tile boundary (the CPU's half slices). With
 * A transposed (a weight's gradient x^T dy, whose depth is the rows of x and dy), each task also
 * sums the depth in tiles of TF_CPU_MATMUL_DEPTH_TILE, in order, so that those rows can be cut at a
 * tile boundary and accumulated (matmul_accumulate) slice after slice with the same bits. A
 * product whose B has no batch (a linear layer, x[..., K] W[K, N]) is one gemm over the flattened
 * rows of A, tiled the same way. A product of few tiles (a small weight's gradient, a product of a
 * few hundred rows) takes narrower column tiles, chosen by the whole product's shape alone
 * (core/workspace_cpu.h). Every output element is computed by exactly one task, so results do not
 * depend on scheduling; the tasks are handed out one at a time (the last row tile is often short).
 * BLAS itself is expected to run single-threaded (workspace.h). */
#include <string.h>

#include "core/workspace_cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

typedef struct product {
  bool transpose_a, transpose_b;
  int64_t m, n, k;       /* op(A) is [m, k], op(B) is [k, n] */
  int64_t lda, ldb, ldc; /* row strides as stored */
  int32_t batch_rank;    /* batch axes of the output */
  int64_t batch_shape[TF_MAX_RANK];
  int64_t a_stride[TF_MAX_RANK], b_stride[TF_MAX_RANK]; /* per output batch axis, 0 where broadcast */
  int64_t batches;
  int64_t row_tiles, column_tiles; /* tiles of C per product */
  int64_t column_tile;             /* columns of C per tile */
  real beta;                       /* 0: C = op(A) op(B); 1: C += op(A) op(B) */
} product;

/* Element strides of operand x's batch axes, aligned to the output's batch axes from the right. */
static void batch_strides(const tf_cpu_tensor *x, const product *p, int64_t *strides) {
  int32_t x_batch_rank = x->rank - 2;
  int64_t stride = x->shape[x->rank - 2] * x->shape[x->rank - 1];
  for (int32_t i = p->batch_rank - 1; i >= 0; i--) {
    int32_t axis = i - (p->batch_rank - x_batch_rank);
    if (axis < 0) {
      strides[i] = 0;
      continue;
    }
    strides[i] = x->shape[axis] == 1 ? 0 : stride;
    stride *= x->shape[axis];
  }
}

static int64_t product_of(const int64_t *dims, int32_t n) {
  int64_t result = 1;
  for (int32_t i = 0; i < n; i++)
    result *= dims[i];
  return result;
}

/* The operands: matmul (a, b) -> c; matmul_accumulate (c, a, b), c updated in place. */
static void operands(const tf_cpu_args *args, const tf_cpu_tensor **a, const tf_cpu_tensor **b,
                     const tf_cpu_tensor **c) {
  const bool accumulate = args->op == TF_OP_MATMUL_ACCUMULATE;
  *a = &args->inputs[accumulate ? 1 : 0];
  *b = &args->inputs[accumulate ? 2 : 1];
  *c = accumulate ? &args->inputs[0] : &args->outputs[0];
}

static int64_t tiles_of(int64_t length, int64_t tile) { return (length + tile - 1) / tile; }

/* The rows and depth the tiles are chosen for: the product's own, or on a half slice (whole_rows, the
 * first axis of A before the cut) the whole product's: its rows where A's rows are C's (A not
 * transposed, batch entries flattened into rows), its depth where A is a transposed matrix (a weight's
 * gradient cut along its depth). A cut of batch entries leaves each entry's product whole. */
static void whole_shape_of(const tf_cpu_args *args, const tf_cpu_tensor *a, const product *p, int64_t *m, int64_t *k) {
  *m = p->m;
  *k = p->k;
  if (args->whole_rows <= 0 || p->batch_rank != 0 || a->shape[0] <= 0)
    return;
  if (!p->transpose_a)
    *m = p->m / a->shape[0] * args->whole_rows;
  else if (a->rank == 2)
    *k = args->whole_rows;
}

static product plan_product(const tf_cpu_args *args) {
  const tf_cpu_tensor *a, *b, *c;
  operands(args, &a, &b, &c);
  product p;
  memset(&p, 0, sizeof(p));
  p.beta = args->op == TF_OP_MATMUL_ACCUMULATE ? 1 : 0;
  p.transpose_a = args->attrs->u.matmul.transpose_a;
  p.transpose_b = args->attrs->u.matmul.transpose_b;
  p.m = c->shape[c->rank - 2];
  p.n = c->shape[c->rank - 1];
  p.k = p.transpose_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
  p.lda = a->shape[a->rank - 1];
  p.ldb = b->shape[b->rank - 1];
  p.ldc = p.n;
  p.batch_rank = c->rank - 2;
  memcpy(p.batch_shape, c->shape, sizeof(int64_t) * (size_t)p.batch_rank);
  batch_strides(a, &p, p.a_stride);
  batch_strides(b, &p, p.b_stride);
  p.batches = product_of(p.batch_shape, p.batch_rank);
  // One B for every batch entry and A not transposed: the batch entries of A and C are consecutive
  // row blocks of two matrices, so the whole product is one gemm.
  if (!p.transpose_a && product_of(b->shape, b->rank - 2) == 1) {
    p.m *= p.batches;
    p.batches = 1;
    p.batch_rank = 0;
  }
  p.row_tiles = tiles_of(p.m, TF_CPU_MATMUL_ROW_TILE);
  int64_t whole_m, whole_k;
  whole_shape_of(args, a, &p, &whole_m, &whole_k);
  p.column_tile = tf_cpu_matmul_column_tile(whole_m, p.n, whole_k);
  p.column_tiles = tiles_of(p.n, p.column_tile);
  return p;
}

static void run_task(const product *p, int64_t task, const real *a, const real *b, real *c) {
  const int64_t tiles = p->row_tiles * p->column_tiles;
  const int64_t batch = task / tiles, row_tile = task % tiles / p->column_tiles, column_tile = task % p->column_tiles;
  int64_t a_offset = 0, b_offset = 0, rest = batch;
  for (int32_t i = p->batch_rank - 1; i >= 0; i--) {
    int64_t index = rest % p->batch_shape[i];
    rest /= p->batch_shape[i];
    a_offset += index * p->a_stride[i];
    b_offset += index * p->b_stride[i];
  }
  const int64_t first_row = row_tile * TF_CPU_MATMUL_ROW_TILE, first_column = column_tile * p->column_tile;
  const int64_t m = p->m - first_row < TF_CPU_MATMUL_ROW_TILE ? p->m - first_row : TF_CPU_MATMUL_ROW_TILE;
  const int64_t n = p->n - first_column < p->column_tile ? p->n - first_column : p->column_tile;
  a += a_offset + (p->transpose_a ? first_row : first_row * p->lda);
  b += b_offset + (p->transpose_b ? first_column * p->ldb : first_column);
  c += batch * p->m * p->n + first_row * p->ldc + first_column;
  if (!p->transpose_a) {
    tf_cpu_gemm(false, p->transpose_b, m, n, p->k, 1, a, p->lda, b, p->ldb, p->beta, c, p->ldc);
    return;
  }
  for (int64_t first = 0; first < p->k; first += TF_CPU_MATMUL_DEPTH_TILE) { /* depth tiles, in order */
    const int64_t depth = p->k - first < TF_CPU_MATMUL_DEPTH_TILE ? p->k - first : TF_CPU_MATMUL_DEPTH_TILE;
    const real *b_tile = b + (p->transpose_b ? first : first * p->ldb);
    tf_cpu_gemm(true, p->transpose_b, m, n, depth, 1, a + first * p->lda, p->lda, b_tile, p->ldb,
                first == 0 ? p->beta : 1, c, p->ldc);
  }
}

/* Threads for `tasks` tasks: the context's, or fewer when there is less work. */
static int team_size(const tf_cpu_args *args, int64_t tasks) {
  int64_t limit = args->context->threads > 0 ? args->context->threads : 1;
  return (int)(tasks < 1 ? 1 : tasks < limit ? tasks : limit);
}

static void run_product(const tf_cpu_args *args) {
  const tf_cpu_tensor *a, *b, *out;
  operands(args, &a, &b, &out);
  if (out->count == 0)
    return;
  product p = plan_product(args);
  if (p.k == 0) { /* an empty sum: C = 0, or C unchanged */
    if (p.beta == 0)
      memset(out->data, 0, sizeof(real) * (size_t)out->count);
    return;
  }
  const real *a_data = a->data, *b_data = b->data;
  real *c = out->data;
  int64_t tasks = p.batches * p.row_tiles * p.column_tiles;
  TF_CPU_PARALLEL_FOR_DYNAMIC(
      team_size(args, tasks), for (int64_t task = 0; task < tasks; task++) { run_task(&p, task, a_data, b_data, c); });
}

void TF_REAL_NAME(tf_cpu_matmul)(const tf_cpu_args *args) { run_product(args); }

/* matmul_accumulate(sum, a, b): sum += op(a) op(b), in the gemm itself (beta = 1): no temporary. */
void TF_REAL_NAME(tf_cpu_matmul_accumulate)(const tf_cpu_args *args) { run_product(args); }
