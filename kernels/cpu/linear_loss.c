/* The fused loss head: linear_cross_entropy(x, weight, labels [, bias]), the mean cross-entropy of
 * the logits x weightᵀ (or x weight) plus the bias, and its gradient (dx, dweight [, dbias]),
 * computed chunk_rows rows at a time so the [rows, V] logits never exist: one chunk of logits lives
 * in the workspace (core/linear_loss.h), is reduced to the chunk's loss terms (forward) or turned
 * in place into its gradient dlogits = (softmax - onehot) dloss / count, which two products take to
 * dx (rows of the chunk) and dweight (summed over chunks), and a sum over its rows to dbias (summed
 * over chunks) (backward).
 *
 * Every product is cut into the tiles the plain plan's matmul uses (tiled_run below), each one
 * single-threaded gemm; loss terms are summed in double in blocks that depend only on the chunk's
 * rows, in order: results do not depend on the thread count, and match the unfused plan's. */
#include "core/linear_loss.h"
#include "core/workspace_cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/xent_row.h"

#define ROW_BLOCK 16   /* rows of a chunk per task of the loss partials */
#define DBIAS_SPAN 256 /* classes per task of the bias gradient (each a sum of its own, in order) */

typedef struct head {
  tf_linear_loss_geometry g;
  const real *x, *weight;
  const real *bias; /* [classes], or NULL */
  const tf_cpu_tensor *labels;
  int64_t ignore_index;
  real *logits; /* the workspace: chunk_rows x classes */
  int threads;
} head;

static head head_of(const tf_cpu_args *args) {
  const int32_t bias = tf_linear_loss_bias_input(args->op, args->n_inputs);
  head h = {.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]),
            .x = args->inputs[0].data,
            .weight = args->inputs[1].data,
            .bias = bias >= 0 ? args->inputs[bias].data : NULL,
            .labels = &args->inputs[2],
            .ignore_index = args->attrs->u.cross_entropy.ignore_index,
            .logits = args->workspace,
            .threads = tf_cpu_threads(args)};
  return h;
}

/* The label of `row`, or -1 when it does not count: ignore_index, or outside [0, classes). */
static int64_t label_of(const head *h, int64_t row) {
  const int64_t label =
      h->labels->dtype == TF_I32 ? ((const int32_t *)h->labels->data)[row] : ((const int64_t *)h->labels->data)[row];
  return label == h->ignore_index || label < 0 || label >= h->g.classes ? -1 : label;
}

static int64_t counted_labels(const head *h) {
  int64_t count = 0;
  for (int64_t row = 0; row < h->g.rows; row++)
    count += label_of(h, row) >= 0;
  return count;
}

static int64_t row_blocks(int64_t rows) { return (rows + ROW_BLOCK - 1) / ROW_BLOCK; }

/* A product of the head cut exactly as kernels/cpu/matmul.c cuts the plain plan's matmul of the
 * whole head: tiles of TF_CPU_MATMUL_ROW_TILE rows by tf_cpu_matmul_column_tile columns (chosen by
 * the whole product's shape: all rows, or for a weight's gradient all of its depth), a transposed A's
 * depth in tiles of TF_CPU_MATMUL_DEPTH_TILE summed in order, one BLAS call per tile and depth tile.
 * OpenBLAS's kernels sum an element in an order that depends on its place in the call (the Haswell
 * and Zen ones by column, an AVX2 host showed), so the same cuts give the plain plan's bits: the
 * smallest plan (compiler's fused head) trains to the plain plan's weights, chunk after chunk where
 * chunk_rows is a multiple of the row and depth tiles. Each tile is one task, whatever the threads. */
typedef struct tiled {
  bool transpose_a, transpose_b;
  int64_t m, n, k;     /* op(A) [m, k], op(B) [k, n] */
  int64_t column_tile; /* tf_cpu_matmul_column_tile of the whole product */
  const real *a, *b;
  int64_t lda, ldb, ldc;
  real beta; /* of the first depth tile */
  real *c;
} tiled;

static int64_t tiles_of(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

static void tiled_task(const tiled *p, int64_t task) {
  const int64_t column_tiles = tiles_of(p->n, p->column_tile);
  const int64_t first_row = task / column_tiles * TF_CPU_MATMUL_ROW_TILE;
  const int64_t first_column = task % column_tiles * p->column_tile;
  const int64_t m = p->m - first_row < TF_CPU_MATMUL_ROW_TILE ? p->m - first_row : TF_CPU_MATMUL_ROW_TILE;
  const int64_t n = p->n - first_column < p->column_tile ? p->n - first_column : p->column_tile;
  const real *a = p->a + (p->transpose_a ? first_row : first_row * p->lda);
  const real *b = p->b + (p->transpose_b ? first_column * p->ldb : first_column);
  real *c = p->c + first_row * p->ldc + first_column;
  if (!p->transpose_a) {
    tf_cpu_gemm(false, p->transpose_b, m, n, p->k, 1, a, p->lda, b, p->ldb, p->beta, c, p->ldc);
    return;
  }
  for (int64_t first = 0; first < p->k; first += TF_CPU_MATMUL_DEPTH_TILE) { /* depth tiles, in order */
    const int64_t depth = p->k - first < TF_CPU_MATMUL_DEPTH_TILE ? p->k - first : TF_CPU_MATMUL_DEPTH_TILE;
    tf_cpu_gemm(true, p->transpose_b, m, n, depth, 1, a + first * p->lda, p->lda,
                b + (p->transpose_b ? first : first * p->ldb), p->ldb, first == 0 ? p->beta : 1, c, p->ldc);
  }
}

static void tiled_run(const head *h, const tiled *p) {
  const int64_t tasks = tiles_of(p->m, TF_CPU_MATMUL_ROW_TILE) * tiles_of(p->n, p->column_tile);
  TF_CPU_PARALLEL_FOR_DYNAMIC(
      tf_cpu_team(h->threads, tasks > 1), for (int64_t task = 0; task < tasks; task++) { tiled_task(p, task); });
}

/* logits[0 .. rows) = x[first .. first + rows) weightᵀ (or weight) (+ bias): the plain plan's
 * product x Wᵀ of all rows, then its add of the bias. */
static void chunk_logits(const head *h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->g;
  const tiled p = {.transpose_b = g->transpose_weight,
                   .m = rows,
                   .n = g->classes,
                   .k = g->features,
                   .column_tile = tf_cpu_matmul_column_tile(g->rows, g->classes, g->features),
                   .a = h->x + first * g->features,
                   .lda = g->features,
                   .b = h->weight,
                   .ldb = g->transpose_weight ? g->features : g->classes,
                   .c = h->logits,
                   .ldc = g->classes};
  tiled_run(h, &p);
  if (h->bias)
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(h->threads, rows * g->classes > TF_CPU_CHUNK), for (int64_t r = 0; r < rows; r++) {
          for (int64_t c = 0; c < g->classes; c++)
            h->logits[r * g->classes + c] += h->bias[c];
        });
}

/* The chunk's loss terms, summed in double per ROW_BLOCK rows and the blocks in order. With `train`,
 * each row's logits become their gradient in the same pass (tf_cpu_xent_row_train: the loss and the
 * gradient of the two-pass form, bit for bit), scaled by `scale`, rows that do not count zeroed. */
static double chunk_loss(const head *h, int64_t first, int64_t rows, bool train, real scale) {
  const int64_t blocks = row_blocks(rows);
  double partial[(TF_CPU_CHUNK + ROW_BLOCK - 1) / ROW_BLOCK + 1];
  double total = 0;
  /* at most this many blocks at once, so the partials stay on the stack */
  const int64_t per_pass = (int64_t)(sizeof(partial) / sizeof(partial[0]));
  for (int64_t pass = 0; pass < blocks; pass += per_pass) {
    const int64_t n = blocks - pass < per_pass ? blocks - pass : per_pass;
    TF_CPU_PARALLEL_FOR(
        tf_cpu_team(h->threads, n > 1), for (int64_t b = 0; b < n; b++) {
          const int64_t begin = (pass + b) * ROW_BLOCK, end = begin + ROW_BLOCK < rows ? begin + ROW_BLOCK : rows;
          double sum = 0;
          for (int64_t r = begin; r < end; r++) {
            const int64_t label = label_of(h, first + r);
            real *row = h->logits + r * h->g.classes;
            if (label < 0 && train)
              tf_cpu_xent_row_gradient(row, row, h->g.classes, label, scale); /* zeroes it: it does not count */
            else if (label >= 0)
              sum += train ? tf_cpu_xent_row_train(row, h->g.classes, label, scale)
                           : tf_cpu_xent_row_loss(row, h->g.classes, label);
          }
          partial[b] = sum;
        });
    for (int64_t b = 0; b < n; b++)
      total += partial[b];
  }
  return total;
}

void TF_REAL_NAME(tf_cpu_linear_cross_entropy)(const tf_cpu_args *args) {
  const head h = head_of(args);
  const int64_t count = counted_labels(&h);
  double total = 0;
  for (int64_t first = 0; first < h.g.rows && count > 0; first += h.g.chunk_rows) {
    const int64_t rows = h.g.rows - first < h.g.chunk_rows ? h.g.rows - first : h.g.chunk_rows;
    chunk_logits(&h, first, rows);
    total += chunk_loss(&h, first, rows, false, 0);
  }
  *(real *)args->outputs[0].data = count > 0 ? (real)(total / (double)count) : (real)0;
}

/* The chunk's logits, in place, become their gradient: (softmax - onehot) scale, 0 on rows that
 * do not count. */
static void chunk_gradient(const head *h, int64_t first, int64_t rows, real scale) {
  const int64_t classes = h->g.classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, rows * classes > TF_CPU_CHUNK), for (int64_t r = 0; r < rows; r++) {
        real *d = h->logits + r * classes;
        tf_cpu_xent_row_gradient(d, d, classes, label_of(h, first + r), scale);
      });
}

/* dx[first .. first + rows) = dlogits weight (or weightᵀ): the plain plan's dlogits W. */
static void chunk_dx(const head *h, int64_t first, int64_t rows, real *dx) {
  const tf_linear_loss_geometry *g = &h->g;
  const tiled p = {.transpose_b = !g->transpose_weight,
                   .m = rows,
                   .n = g->features,
                   .k = g->classes,
                   .column_tile = tf_cpu_matmul_column_tile(g->rows, g->features, g->classes),
                   .a = h->logits,
                   .lda = g->classes,
                   .b = h->weight,
                   .ldb = g->transpose_weight ? g->features : g->classes,
                   .c = dx + first * g->features,
                   .ldc = g->features};
  tiled_run(h, &p);
}

/* dweight (+)= dlogitsᵀ x[first ..] ([V, d]) or x[first ..]ᵀ dlogits ([d, V]): the plain plan's
 * weight gradient, its depth (the rows) in tiles; beta 0 on the first chunk. */
static void chunk_dweight(const head *h, int64_t first, int64_t rows, real beta, real *dweight) {
  const tf_linear_loss_geometry *g = &h->g;
  const real *x = h->x + first * g->features;
  const int64_t out_rows = g->transpose_weight ? g->classes : g->features;
  const int64_t width = g->transpose_weight ? g->features : g->classes;
  const tiled p = {.transpose_a = true,
                   .m = out_rows,
                   .n = width,
                   .k = rows,
                   .column_tile = tf_cpu_matmul_column_tile(out_rows, width, g->rows),
                   .a = g->transpose_weight ? h->logits : x,
                   .lda = g->transpose_weight ? g->classes : g->features,
                   .b = g->transpose_weight ? x : h->logits,
                   .ldb = g->transpose_weight ? g->features : g->classes,
                   .beta = beta,
                   .c = dweight,
                   .ldc = width};
  tiled_run(h, &p);
}

/* dbias[c] (+)= the sum over the chunk's rows of dlogits[., c], in double, rows in order, a class
 * span a task; the first chunk overwrites. */
static void chunk_dbias(const head *h, int64_t rows, bool first_chunk, real *dbias) {
  const int64_t classes = h->g.classes, span = DBIAS_SPAN, n = tiles_of(classes, span);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, n > 1), for (int64_t b = 0; b < n; b++) {
        const int64_t begin = b * span, end = begin + span < classes ? begin + span : classes;
        for (int64_t c = begin; c < end; c++) {
          double sum = first_chunk ? 0.0 : (double)dbias[c];
          for (int64_t r = 0; r < rows; r++)
            sum += (double)h->logits[r * classes + c];
          dbias[c] = (real)sum;
        }
      });
}

/* The gradient pass over every chunk: dx, dweight and dbias (NULL: no bias) from dlogits scaled by
 * dloss / count. With `loss` (the single-pass form), each chunk's loss terms are summed from its
 * logits before they turn into their gradient, in the forward kernel's order, so the loss is bit for
 * bit linear_cross_entropy's and the gradients linear_cross_entropy_grad's. */
static void gradient_pass(const head *h, real dloss, real *loss, real *dx, real *dweight, real *dbias,
                          bool accumulate) {
  const int64_t count = counted_labels(h);
  if (count == 0) { /* nothing counts: the loss and every gradient are 0 (nothing to add) */
    const int64_t n_x = h->g.rows * h->g.features, n_w = h->g.features * h->g.classes;
    for (int64_t i = 0; i < n_x; i++)
      dx[i] = 0;
    for (int64_t i = 0; !accumulate && i < n_w; i++)
      dweight[i] = 0;
    for (int64_t i = 0; !accumulate && dbias && i < h->g.classes; i++)
      dbias[i] = 0;
    if (loss)
      *loss = 0;
    return;
  }
  const real scale = (real)((double)dloss / (double)count);
  double total = 0;
  for (int64_t first = 0; first < h->g.rows; first += h->g.chunk_rows) {
    const int64_t rows = h->g.rows - first < h->g.chunk_rows ? h->g.rows - first : h->g.chunk_rows;
    chunk_logits(h, first, rows);
    if (loss)
      total += chunk_loss(h, first, rows, true, scale);
    else
      chunk_gradient(h, first, rows, scale);
    chunk_dx(h, first, rows, dx);
    chunk_dweight(h, first, rows, first == 0 && !accumulate ? (real)0 : (real)1, dweight);
    if (dbias)
      chunk_dbias(h, rows, first == 0 && !accumulate, dbias);
  }
  if (loss)
    *loss = (real)(total / (double)count);
}

/* linear_cross_entropy_grad (dx, dweight) and linear_cross_entropy_bias_grad (dx, dweight, dbias);
 * their _accumulate forms (dx; dweight and dbias added into the accumulators they take as inputs). */
void TF_REAL_NAME(tf_cpu_linear_cross_entropy_grad)(const tf_cpu_args *args) {
  const head h = head_of(args);
  const real dloss = *(const real *)args->inputs[3].data;
  if (tf_linear_loss_accumulates(args->op)) {
    const int32_t sum = tf_linear_loss_dweight_input(args->op, args->n_inputs);
    gradient_pass(&h, dloss, NULL, args->outputs[0].data, args->inputs[sum].data,
                  h.bias ? args->inputs[sum + 1].data : NULL, true);
    return;
  }
  gradient_pass(&h, dloss, NULL, args->outputs[0].data, args->outputs[1].data, h.bias ? args->outputs[2].data : NULL,
                false);
}

/* linear_cross_entropy_train (loss, dx, dweight) and _bias_train (loss, dx, dweight, dbias): each
 * chunk's logits computed once for the loss and the gradients. */
void TF_REAL_NAME(tf_cpu_linear_cross_entropy_train)(const tf_cpu_args *args) {
  const head h = head_of(args);
  gradient_pass(&h, *(const real *)args->inputs[3].data, args->outputs[0].data, args->outputs[1].data,
                args->outputs[2].data, h.bias ? args->outputs[3].data : NULL, false);
}
