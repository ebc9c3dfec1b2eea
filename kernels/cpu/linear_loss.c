/* The fused loss head: linear_cross_entropy(x, weight, labels [, bias]), the mean cross-entropy of
 * the logits x weightᵀ (or x weight) plus the bias, and its gradient (dx, dweight [, dbias]),
 * computed chunk_rows rows at a time so the [rows, V] logits never exist: one chunk of logits lives
 * in the workspace (core/linear_loss.h), is reduced to the chunk's loss terms (forward) or turned
 * in place into its gradient dlogits = (softmax - onehot) dloss / count, which two products take to
 * dx (rows of the chunk) and dweight (summed over chunks), and a sum over its rows to dbias (summed
 * over chunks) (backward).
 *
 * Every product is cut into spans of its output of fixed sizes that the threads share, each span one
 * single-threaded gemm over its own slice of the weight; loss terms are summed in double in blocks
 * that depend only on the chunk's rows, in order: results do not depend on the thread count. */
#include "core/linear_loss.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/xent_row.h"

#define ROW_BLOCK 16 /* rows of a chunk per task of the loss partials */

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

/* Spans of a product's output the threads share, each one gemm: sizes fixed by the head's shape
 * alone, so every element is computed by the same call whatever the thread count, and each span
 * reads its own slice of the weight, so a chunk reads the weight once per product (16-row tasks read
 * all of it each). A dimension that would give fewer than FEW_SPANS spans (a vocabulary of a few
 * hundred classes, a narrow model) is cut into narrower spans, down to NARROW_SPAN: one span would
 * keep one thread busy. */
#define CLASS_SPAN 2048  /* logits columns, dweight rows ([V, d]) or columns ([d, V]) */
#define FEATURE_SPAN 128 /* dx columns, dweight rows ([d, V]) */
#define FEW_SPANS 4
#define NARROW_SPAN 64

static int64_t spans(int64_t n, int64_t span) { return (n + span - 1) / span; }

/* The span of a dimension of n: `widest` halved while n would make fewer than FEW_SPANS of it. */
static int64_t span_of(int64_t n, int64_t widest) {
  int64_t span = widest;
  while (span > NARROW_SPAN && spans(n, span) < FEW_SPANS)
    span /= 2;
  return span;
}

/* logits[0 .. rows) = x[first .. first + rows) weightᵀ (or weight) (+ bias), a class span of columns
 * a task; the bias is added after the product, as the unfused add does. */
static void chunk_logits(const head *h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->g;
  const int64_t span = span_of(g->classes, CLASS_SPAN), n = spans(g->classes, span);
  const int64_t ldw = g->transpose_weight ? g->features : g->classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, n > 1), for (int64_t b = 0; b < n; b++) {
        const int64_t begin = b * span, end = begin + span < g->classes ? begin + span : g->classes;
        const real *w = h->weight + (g->transpose_weight ? begin * g->features : begin);
        tf_cpu_gemm(false, g->transpose_weight, rows, end - begin, g->features, 1, h->x + first * g->features,
                    g->features, w, ldw, 0, h->logits + begin, g->classes);
        if (h->bias)
          for (int64_t r = 0; r < rows; r++)
            for (int64_t c = begin; c < end; c++)
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

/* dx[first .. first + rows) = dlogits weight (or weightᵀ), a feature span of columns a task. */
static void chunk_dx(const head *h, int64_t first, int64_t rows, real *dx) {
  const tf_linear_loss_geometry *g = &h->g;
  const int64_t span = span_of(g->features, FEATURE_SPAN), n = spans(g->features, span);
  const int64_t ldw = g->transpose_weight ? g->features : g->classes;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, n > 1), for (int64_t b = 0; b < n; b++) {
        const int64_t begin = b * span, end = begin + span < g->features ? begin + span : g->features;
        const real *w = h->weight + (g->transpose_weight ? begin : begin * g->classes);
        tf_cpu_gemm(false, !g->transpose_weight, rows, end - begin, g->classes, 1, h->logits, g->classes, w, ldw, 0,
                    dx + first * g->features + begin, g->features);
      });
}

/* dweight (+)= dlogitsᵀ x[first ..] ([V, d]) or x[first ..]ᵀ dlogits ([d, V]), a span of its rows a
 * task (a class span, or a feature span); beta 0 on the first chunk. */
static void chunk_dweight(const head *h, int64_t first, int64_t rows, real beta, real *dweight) {
  const tf_linear_loss_geometry *g = &h->g;
  const real *x = h->x + first * g->features;
  const int64_t out_rows = g->transpose_weight ? g->classes : g->features;
  const int64_t width = g->transpose_weight ? g->features : g->classes;
  const int64_t span = g->transpose_weight ? span_of(out_rows, CLASS_SPAN) : span_of(out_rows, FEATURE_SPAN);
  const int64_t n = spans(out_rows, span);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, n > 1), for (int64_t b = 0; b < n; b++) {
        const int64_t begin = b * span, end = begin + span < out_rows ? begin + span : out_rows;
        if (g->transpose_weight) /* dweight[begin..end) = dlogits[:, begin..end)ᵀ x */
          tf_cpu_gemm(true, false, end - begin, width, rows, 1, h->logits + begin, g->classes, x, g->features, beta,
                      dweight + begin * width, width);
        else /* dweight[begin..end) = x[:, begin..end)ᵀ dlogits */
          tf_cpu_gemm(true, false, end - begin, width, rows, 1, x + begin, g->features, h->logits, g->classes, beta,
                      dweight + begin * width, width);
      });
}

/* dbias[c] (+)= the sum over the chunk's rows of dlogits[., c], in double, rows in order, a class
 * span a task; the first chunk overwrites. */
static void chunk_dbias(const head *h, int64_t rows, bool first_chunk, real *dbias) {
  const int64_t classes = h->g.classes, span = span_of(classes, CLASS_SPAN), n = spans(classes, span);
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
