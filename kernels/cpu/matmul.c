/* matmul: C = op(A) op(B) over numpy-broadcast batch dims, with BLAS gemms; matmul_accumulate:
 * C += op(A) op(B) (2-D), the same gemms with beta = 1 (C is the gradient accumulator).
 *
 * The threads split the work into tasks of one gemm each: whole batch entries when there are at
 * least as many as threads, otherwise each product is also cut into row (or column) blocks. A
 * product whose B has no batch (a linear layer, x[..., K] W[K, N]) is one gemm over the flattened
 * rows of A, cut the same way. Every output element is computed by exactly one task, so results
 * do not depend on scheduling. BLAS itself is expected to run single-threaded (workspace.h). */
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

/* Below this many multiply-adds a product is not cut across threads. */
#define SPLIT_MIN_WORK ((int64_t)1 << 16)

typedef struct product {
  bool transpose_a, transpose_b;
  int64_t m, n, k;       /* op(A) is [m, k], op(B) is [k, n] */
  int64_t lda, ldb, ldc; /* row strides as stored */
  int32_t batch_rank;    /* batch axes of the output */
  int64_t batch_shape[TF_MAX_RANK];
  int64_t a_stride[TF_MAX_RANK], b_stride[TF_MAX_RANK]; /* per output batch axis, 0 where broadcast */
  int64_t batches;
  int64_t splits;  /* blocks per product */
  bool split_rows; /* blocks of rows of C (else of columns) */
  real beta;       /* 0: C = op(A) op(B); 1: C += op(A) op(B) */
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
  int64_t threads = args->context->threads > 0 ? args->context->threads : 1;
  p.split_rows = p.m >= p.n;
  int64_t longest = p.split_rows ? p.m : p.n;
  p.splits = 1;
  if (p.batches < threads && p.m * p.n * p.k >= SPLIT_MIN_WORK)
    p.splits = (threads + p.batches - 1) / p.batches;
  if (p.splits > longest)
    p.splits = longest;
  return p;
}

static void run_task(const product *p, int64_t task, const real *a, const real *b, real *c) {
  int64_t batch = task / p->splits, split = task % p->splits;
  int64_t a_offset = 0, b_offset = 0, rest = batch;
  for (int32_t i = p->batch_rank - 1; i >= 0; i--) {
    int64_t index = rest % p->batch_shape[i];
    rest /= p->batch_shape[i];
    a_offset += index * p->a_stride[i];
    b_offset += index * p->b_stride[i];
  }
  a += a_offset;
  b += b_offset;
  c += batch * p->m * p->n;
  int64_t m = p->m, n = p->n;
  if (p->split_rows) {
    int64_t first = p->m * split / p->splits, last = p->m * (split + 1) / p->splits;
    m = last - first;
    a += p->transpose_a ? first : first * p->lda;
    c += first * p->ldc;
  } else {
    int64_t first = p->n * split / p->splits, last = p->n * (split + 1) / p->splits;
    n = last - first;
    b += p->transpose_b ? first * p->ldb : first;
    c += first;
  }
  tf_cpu_gemm(p->transpose_a, p->transpose_b, m, n, p->k, 1, a, p->lda, b, p->ldb, p->beta, c, p->ldc);
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
  int64_t tasks = p.batches * p.splits;
  TF_CPU_PARALLEL_FOR(
      team_size(args, tasks), for (int64_t task = 0; task < tasks; task++) { run_task(&p, task, a_data, b_data, c); });
}

void TF_REAL_NAME(tf_cpu_matmul)(const tf_cpu_args *args) { run_product(args); }

/* matmul_accumulate(sum, a, b): sum += op(a) op(b), in the gemm itself (beta = 1): no temporary. */
void TF_REAL_NAME(tf_cpu_matmul_accumulate)(const tf_cpu_args *args) { run_product(args); }
