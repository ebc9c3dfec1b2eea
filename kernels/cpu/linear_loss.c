/* The fused loss head: linear_cross_entropy(x, weight, labels), the mean cross-entropy of the
 * logits x weightᵀ (or x weight), and its gradient (dx, dweight), computed chunk_rows rows at a time
 * so the [rows, V] logits never exist: one chunk of logits lives in the workspace
 * (core/linear_loss.h), is reduced to the chunk's loss terms (forward) or turned in place into its
 * gradient dlogits = (softmax - onehot) dloss / count, which two products take to dx (rows of the
 * chunk) and dweight (summed over chunks) (backward).
 *
 * Every product is cut into blocks of rows (or, for dweight, of classes) that the threads share,
 * each block one single-threaded gemm; loss terms are summed in double in blocks that depend only
 * on the chunk's rows, in order: results do not depend on the thread count. */
#include "core/linear_loss.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

#define ROW_BLOCK 16 /* rows of a chunk per task: products and loss partials */

typedef struct head {
  tf_linear_loss_geometry g;
  const real *x, *weight;
  const tf_cpu_tensor *labels;
  int64_t ignore_index;
  real *logits; /* the workspace: chunk_rows x classes */
  int threads;
} head;

static head head_of(const tf_cpu_args *args) {
  head h = {.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]),
            .x = args->inputs[0].data,
            .weight = args->inputs[1].data,
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

/* logits[0 .. rows) = x[first .. first + rows) weightᵀ, ROW_BLOCK rows a task. */
static void chunk_logits(const head *h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->g;
  const int64_t blocks = row_blocks(rows), ldw = g->transpose_weight ? g->features : g->classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t begin = b * ROW_BLOCK, end = begin + ROW_BLOCK < rows ? begin + ROW_BLOCK : rows;
        tf_cpu_gemm(false, g->transpose_weight, end - begin, g->classes, g->features, 1,
                    h->x + (first + begin) * g->features, g->features, h->weight, ldw, 0,
                    h->logits + begin * g->classes, g->classes);
      });
}

static real row_max(const real *row, int64_t classes) {
  real best = row[0];
  for (int64_t c = 1; c < classes; c++)
    best = row[c] > best ? row[c] : best;
  return best;
}

/* -log softmax(row)[label] = log(sum(exp(row - max))) + max - row[label]. */
static double row_loss(const real *row, int64_t classes, int64_t label) {
  const real best = row_max(row, classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; c++)
    sum += (double)TF_REAL_EXP(row[c] - best);
  return log(sum) + ((double)best - (double)row[label]);
}

/* The chunk's loss terms, summed in double per ROW_BLOCK rows and the blocks in order. */
static double chunk_loss(const head *h, int64_t first, int64_t rows) {
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
            if (label >= 0)
              sum += row_loss(h->logits + r * h->g.classes, h->g.classes, label);
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
    total += chunk_loss(&h, first, rows);
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
        const int64_t label = label_of(h, first + r);
        if (label < 0) {
          for (int64_t c = 0; c < classes; c++)
            d[c] = 0;
          continue;
        }
        const real best = row_max(d, classes);
        double sum = 0;
        for (int64_t c = 0; c < classes; c++) {
          d[c] = TF_REAL_EXP(d[c] - best);
          sum += (double)d[c];
        }
        const real total = (real)sum;
        for (int64_t c = 0; c < classes; c++)
          d[c] = d[c] / total * scale;
        d[label] -= scale;
      });
}

/* dx[first .. first + rows) = dlogits weight (or weightᵀ), ROW_BLOCK rows a task. */
static void chunk_dx(const head *h, int64_t first, int64_t rows, real *dx) {
  const tf_linear_loss_geometry *g = &h->g;
  const int64_t blocks = row_blocks(rows), ldw = g->transpose_weight ? g->features : g->classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t begin = b * ROW_BLOCK, end = begin + ROW_BLOCK < rows ? begin + ROW_BLOCK : rows;
        tf_cpu_gemm(false, !g->transpose_weight, end - begin, g->features, g->classes, 1,
                    h->logits + begin * g->classes, g->classes, h->weight, ldw, 0, dx + (first + begin) * g->features,
                    g->features);
      });
}

/* dweight (+)= dlogitsᵀ x[first ..] ([V, d]) or x[first ..]ᵀ dlogits ([d, V]): blocks of classes
 * (rows of [V, d]) or of features (rows of [d, V]), a task each; beta 0 on the first chunk. */
static void chunk_dweight(const head *h, int64_t first, int64_t rows, real beta, real *dweight) {
  const tf_linear_loss_geometry *g = &h->g;
  const real *x = h->x + first * g->features;
  const int64_t out_rows = g->transpose_weight ? g->classes : g->features;
  const int64_t width = g->transpose_weight ? g->features : g->classes;
  const int64_t blocks = (out_rows + ROW_BLOCK * 4 - 1) / (ROW_BLOCK * 4);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, blocks > 1), for (int64_t b = 0; b < blocks; b++) {
        const int64_t begin = b * ROW_BLOCK * 4;
        const int64_t end = begin + ROW_BLOCK * 4 < out_rows ? begin + ROW_BLOCK * 4 : out_rows;
        if (g->transpose_weight) /* dweight[begin..end) = dlogits[:, begin..end)ᵀ x */
          tf_cpu_gemm(true, false, end - begin, width, rows, 1, h->logits + begin, g->classes, x, g->features, beta,
                      dweight + begin * width, width);
        else /* dweight[begin..end) = x[:, begin..end)ᵀ dlogits */
          tf_cpu_gemm(true, false, end - begin, width, rows, 1, x + begin, g->features, h->logits, g->classes, beta,
                      dweight + begin * width, width);
      });
}

void TF_REAL_NAME(tf_cpu_linear_cross_entropy_grad)(const tf_cpu_args *args) {
  const head h = head_of(args);
  real *dx = args->outputs[0].data, *dweight = args->outputs[1].data;
  const int64_t count = counted_labels(&h);
  const real dloss = *(const real *)args->inputs[3].data;
  const real scale = count > 0 ? (real)((double)dloss / (double)count) : (real)0;
  if (count == 0) { /* nothing counts: both gradients are 0 */
    for (int64_t i = 0; i < args->outputs[0].count; i++)
      dx[i] = 0;
    for (int64_t i = 0; i < args->outputs[1].count; i++)
      dweight[i] = 0;
    return;
  }
  for (int64_t first = 0; first < h.g.rows; first += h.g.chunk_rows) {
    const int64_t rows = h.g.rows - first < h.g.chunk_rows ? h.g.rows - first : h.g.chunk_rows;
    chunk_logits(&h, first, rows);
    chunk_gradient(&h, first, rows, scale);
    chunk_dx(&h, first, rows, dx);
    chunk_dweight(&h, first, rows, first == 0 ? (real)0 : (real)1, dweight);
  }
}
