/* The fused loss head on f16/bf16 data (the CPU target's half kernel of linear_cross_entropy, its
 * gradient and its single pass, with or without a bias; core/linear_loss.h): x, the weight (and the
 * bias) in one half type, labels, an f32 loss and dloss, and dx, dweight (and dbias) in the half type.
 *
 * The f32 kernel (linear_loss.c) walks row chunks outside and all classes inside, so the whole
 * weight and the whole weight gradient are read and written by every chunk: on half data they would
 * need whole f32 copies (147 MiB each for GPT-2's tied head). This kernel walks the classes in spans
 * of TF_LINEAR_LOSS_HALF_SPAN outside and the row chunks inside. A span of the weight is widened
 * once into the workspace; a span of dweight is summed over every chunk in f32 there and rounded
 * once into its half output. The softmax needs each row's log-sum-exp over all classes before any
 * gradient, so a first pass over the spans keeps, per row, the running max and the sum of
 * exp(logit - max) (in double, rescaled when the max grows) and the label's logit: the loss comes
 * from it, and the gradient pass computes each chunk's logits again (4 products per chunk and span
 * where the f32 single pass takes 3). dx is summed over the spans in an f32 copy of its rows and
 * rounded once at the end.
 *
 * Within the f32 kernel's tolerance of it, not bit for bit: the exponentials are taken against the
 * running max and the log-sum-exp, and sums run in another order. Every product is split into tasks
 * of fixed sizes (class sub-spans, feature spans), each one single-threaded gemm, so results do not
 * depend on the thread count. Built for f32 only (the f64 build runs the f32-type kernel's f64 twin
 * on widened copies as the reference). */
#ifndef TF_REAL_F64

#include <math.h>
#include <string.h>

#include "core/linear_loss.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/half_value.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops are a request (clang under sanitizers may not vectorise them): no warning.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define SUB_SPAN 256     /* classes of a task in the logits and dweight products */
#define FEATURE_SPAN 128 /* dx columns of a task */
#define ROW_BLOCK 16     /* rows of a task in the statistics and gradients */

typedef struct head {
  tf_linear_loss_geometry g;
  tf_dtype half;
  const uint16_t *x, *weight, *bias; /* bias: NULL without one */
  const tf_cpu_tensor *labels;
  int64_t ignore_index;
  int threads;
  tf_linear_loss_half_workspace at; /* the workspace's parts */
  char *workspace;
} head;

static float *floats_at(const head *h, int64_t offset) { return (float *)(h->workspace + offset); }
static double *doubles_at(const head *h, int64_t offset) { return (double *)(h->workspace + offset); }

static int64_t label_of(const head *h, int64_t row) {
  const int64_t label =
      h->labels->dtype == TF_I32 ? ((const int32_t *)h->labels->data)[row] : ((const int64_t *)h->labels->data)[row];
  return label == h->ignore_index || label < 0 || label >= h->g.classes ? -1 : label;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t tasks(int64_t n, int64_t span) { return (n + span - 1) / span; }

/* The weight's classes [first, first + n) widened into the span buffer: rows of d features ([V, d]
 * weight) or d rows of h->at.span columns ([d, V]). */
static void widen_weight_span(const head *h, int64_t first, int64_t n) {
  const tf_linear_loss_geometry *g = &h->g;
  float *w = floats_at(h, h->at.weight_span);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, n * g->features > 65536), for (int64_t f = 0; f < g->features; f++) {
        for (int64_t j = 0; j < n; j++) {
          if (g->transpose_weight)
            w[j * g->features + f] = tf_cpu_half_widen(h->half, h->weight[(first + j) * g->features + f]);
          else
            w[f * h->at.span + j] = tf_cpu_half_widen(h->half, h->weight[f * g->classes + first + j]);
        }
      });
}

/* Rows [first, first + rows) of x widened into the chunk buffer. */
static void widen_rows(const head *h, int64_t first, int64_t rows) {
  float *x = floats_at(h, h->at.x_chunk);
  const int64_t n = rows * h->g.features;
  const uint16_t *from = h->x + first * h->g.features;
  for (int64_t i = 0; i < n; i++)
    x[i] = tf_cpu_half_widen(h->half, from[i]);
}

/* logits[0 .. rows) x [0 .. n) = x_chunk · span (+ the bias), SUB_SPAN classes a task. */
static void span_logits(const head *h, int64_t first_class, int64_t n, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->g;
  const float *x = floats_at(h, h->at.x_chunk), *w = floats_at(h, h->at.weight_span);
  float *logits = floats_at(h, h->at.logits);
  const int64_t count = tasks(n, SUB_SPAN);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, count > 1), for (int64_t t = 0; t < count; t++) {
        const int64_t begin = t * SUB_SPAN, end = min64(begin + SUB_SPAN, n);
        if (g->transpose_weight)
          tf_cpu_gemm(false, true, rows, end - begin, g->features, 1, x, g->features, w + begin * g->features,
                      g->features, 0, logits + begin, h->at.span);
        else
          tf_cpu_gemm(false, false, rows, end - begin, g->features, 1, x, g->features, w + begin, h->at.span, 0,
                      logits + begin, h->at.span);
        for (int64_t r = 0; h->bias && r < rows; r++)
          for (int64_t c = begin; c < end; c++)
            logits[r * h->at.span + c] += tf_cpu_half_widen(h->half, h->bias[first_class + c]);
      });
}

/* One row's running max, sum of exp(logit - max) and label logit (s[0..3)), updated by its logits l
 * of classes [first_class, first_class + n). As xent_row.h: the max starts from class 0, so a NaN
 * there makes the loss NaN. */
static void row_statistics(const float *l, int64_t n, int64_t first_class, int64_t label, double *s) {
  const float old = first_class == 0 ? l[0] : (float)s[0];
  float best = old;
  for (int64_t c = 0; c < n; c++)
    best = l[c] > best ? l[c] : best;
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t c = 0; c < n; c++)
    total += (double)TF_CPU_VECTOR_EXP(l[c] - best);
  s[1] = first_class == 0 ? total : s[1] * exp((double)old - (double)best) + total;
  s[0] = best;
  if (label >= first_class && label < first_class + n)
    s[2] = l[label - first_class];
}

/* Each row's statistics updated by this span's logits (rows [first, first + rows)). */
static void span_statistics(const head *h, int64_t first, int64_t rows, int64_t first_class, int64_t n) {
  const float *logits = floats_at(h, h->at.logits);
  double *stats = doubles_at(h, h->at.statistics);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, rows * n > 65536), for (int64_t r = 0; r < rows; r++) {
        row_statistics(logits + r * h->at.span, n, first_class, label_of(h, first + r), stats + (first + r) * 3);
      });
}

/* Pass 1: every row's statistics over every span. */
static void statistics_pass(const head *h) {
  const tf_linear_loss_geometry *g = &h->g;
  for (int64_t first_class = 0; first_class < g->classes; first_class += TF_LINEAR_LOSS_HALF_SPAN) {
    const int64_t n = min64(TF_LINEAR_LOSS_HALF_SPAN, g->classes - first_class);
    widen_weight_span(h, first_class, n);
    for (int64_t first = 0; first < g->rows; first += g->chunk_rows) {
      const int64_t rows = min64(g->chunk_rows, g->rows - first);
      widen_rows(h, first, rows);
      span_logits(h, first_class, n, rows);
      span_statistics(h, first, rows, first_class, n);
    }
  }
}

/* The mean loss over the rows that count (log-sum-exp minus the label's logit, in double, rows in
 * order), and their count. */
static double mean_loss(const head *h, int64_t *count) {
  const double *stats = doubles_at(h, h->at.statistics);
  double total = 0;
  *count = 0;
  for (int64_t row = 0; row < h->g.rows; row++) {
    if (label_of(h, row) < 0)
      continue;
    const double *s = stats + row * 3;
    total += log(s[1]) + (s[0] - s[2]);
    (*count)++;
  }
  return *count > 0 ? total / (double)*count : 0.0;
}

/* d = exp(d - lse) scale, in place. */
static void row_gradient(float *d, int64_t n, float lse, float scale) {
#pragma omp simd
  for (int64_t c = 0; c < n; c++)
    d[c] = TF_CPU_VECTOR_EXP(d[c] - lse) * scale;
}

/* The chunk's logits, in place, become dlogits = (softmax - onehot) scale, 0 on rows that do not
 * count; with a bias, each class's sum over the chunk's rows is added to dbias_span (double). */
static void span_gradient(const head *h, int64_t first, int64_t rows, int64_t first_class, int64_t n, float scale) {
  float *logits = floats_at(h, h->at.logits);
  const double *stats = doubles_at(h, h->at.statistics);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, rows * n > 65536), for (int64_t r = 0; r < rows; r++) {
        float *d = logits + r * h->at.span;
        const int64_t label = label_of(h, first + r);
        if (label < 0) {
          for (int64_t c = 0; c < n; c++)
            d[c] = 0;
          continue;
        }
        const double *s = stats + (first + r) * 3;
        row_gradient(d, n, (float)(s[0] + log(s[1])), scale);
        if (label >= first_class && label < first_class + n)
          d[label - first_class] -= scale;
      });
  if (!h->bias)
    return;
  double *dbias = doubles_at(h, h->at.dbias_span);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++)
      dbias[c] += (double)logits[r * h->at.span + c];
}

/* dx_sum[first ..] (+)= dlogits · span (beta 0 on the first span), FEATURE_SPAN columns a task;
 * dweight_span (+)= dlogitsᵀ x_chunk (beta 0 on the first chunk), SUB_SPAN classes a task. */
static void span_products(const head *h, int64_t first, int64_t rows, int64_t first_class, int64_t n) {
  const tf_linear_loss_geometry *g = &h->g;
  const float *d = floats_at(h, h->at.logits), *w = floats_at(h, h->at.weight_span);
  const float *x = floats_at(h, h->at.x_chunk);
  float *dx = floats_at(h, h->at.dx_sum) + first * g->features, *dw = floats_at(h, h->at.dweight_span);
  const float dx_beta = first_class == 0 ? 0.0f : 1.0f, dw_beta = first == 0 ? 0.0f : 1.0f;
  const int64_t feature_tasks = tasks(g->features, FEATURE_SPAN), class_tasks = tasks(n, SUB_SPAN);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, feature_tasks > 1), for (int64_t t = 0; t < feature_tasks; t++) {
        const int64_t begin = t * FEATURE_SPAN, end = min64(begin + FEATURE_SPAN, g->features);
        if (g->transpose_weight)
          tf_cpu_gemm(false, false, rows, end - begin, n, 1, d, h->at.span, w + begin, g->features, dx_beta, dx + begin,
                      g->features);
        else
          tf_cpu_gemm(false, true, rows, end - begin, n, 1, d, h->at.span, w + begin * h->at.span, h->at.span, dx_beta,
                      dx + begin, g->features);
      });
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(h->threads, class_tasks > 1), for (int64_t t = 0; t < class_tasks; t++) {
        const int64_t begin = t * SUB_SPAN, end = min64(begin + SUB_SPAN, n);
        if (g->transpose_weight) /* dweight_span[c] (d features) = dlogits[:, c]ᵀ x */
          tf_cpu_gemm(true, false, end - begin, g->features, rows, 1, d + begin, h->at.span, x, g->features, dw_beta,
                      dw + begin * g->features, g->features);
        else /* dweight_span[:, c] = xᵀ dlogits[:, c] */
          tf_cpu_gemm(true, false, g->features, end - begin, rows, 1, x, g->features, d + begin, h->at.span, dw_beta,
                      dw + begin, h->at.span);
      });
}

/* dweight's (and dbias's) classes [first_class, first_class + n) rounded from the span's sums. */
static void store_span(const head *h, int64_t first_class, int64_t n, uint16_t *dweight, uint16_t *dbias) {
  const tf_linear_loss_geometry *g = &h->g;
  const float *dw = floats_at(h, h->at.dweight_span);
  for (int64_t f = 0; f < g->features; f++)
    for (int64_t j = 0; j < n; j++) {
      if (g->transpose_weight)
        dweight[(first_class + j) * g->features + f] = tf_cpu_half_narrow(h->half, dw[j * g->features + f]);
      else
        dweight[f * g->classes + first_class + j] = tf_cpu_half_narrow(h->half, dw[f * h->at.span + j]);
    }
  const double *sums = doubles_at(h, h->at.dbias_span);
  for (int64_t j = 0; dbias && j < n; j++)
    dbias[first_class + j] = tf_cpu_half_narrow(h->half, (float)sums[j]);
}

/* Pass 2: dx, dweight and dbias (NULL: no bias) from dlogits scaled by dloss / count. */
static void gradient_pass(const head *h, float scale, uint16_t *dx, uint16_t *dweight, uint16_t *dbias) {
  const tf_linear_loss_geometry *g = &h->g;
  for (int64_t first_class = 0; first_class < g->classes; first_class += TF_LINEAR_LOSS_HALF_SPAN) {
    const int64_t n = min64(TF_LINEAR_LOSS_HALF_SPAN, g->classes - first_class);
    widen_weight_span(h, first_class, n);
    if (dbias)
      memset(doubles_at(h, h->at.dbias_span), 0, sizeof(double) * (size_t)n);
    for (int64_t first = 0; first < g->rows; first += g->chunk_rows) {
      const int64_t rows = min64(g->chunk_rows, g->rows - first);
      widen_rows(h, first, rows);
      span_logits(h, first_class, n, rows);
      span_gradient(h, first, rows, first_class, n, scale);
      span_products(h, first, rows, first_class, n);
    }
    store_span(h, first_class, n, dweight, dbias);
  }
  const float *sums = floats_at(h, h->at.dx_sum);
  const int64_t n_x = g->rows * g->features;
  for (int64_t i = 0; i < n_x; i++)
    dx[i] = tf_cpu_half_narrow(h->half, g->classes > 0 ? sums[i] : 0.0f);
}

static void zero_gradients(const head *h, uint16_t *dx, uint16_t *dweight, uint16_t *dbias) {
  memset(dx, 0, sizeof(uint16_t) * (size_t)(h->g.rows * h->g.features));
  memset(dweight, 0, sizeof(uint16_t) * (size_t)(h->g.features * h->g.classes));
  if (dbias)
    memset(dbias, 0, sizeof(uint16_t) * (size_t)h->g.classes);
}

void tf_cpu_linear_cross_entropy_half(const tf_cpu_args *args) {
  const int32_t bias = tf_linear_loss_bias_input(args->op, args->n_inputs);
  head h = {.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]),
            .half = args->inputs[0].dtype,
            .x = args->inputs[0].data,
            .weight = args->inputs[1].data,
            .bias = bias >= 0 ? args->inputs[bias].data : NULL,
            .labels = &args->inputs[2],
            .ignore_index = args->attrs->u.cross_entropy.ignore_index,
            .threads = tf_cpu_threads(args),
            .workspace = args->workspace};
  const bool forward = args->op == TF_OP_LINEAR_CROSS_ENTROPY, train = tf_linear_loss_is_train(args->op);
  h.at = tf_linear_loss_half_workspace_of(&h.g, !forward, bias >= 0);
  int64_t count = 0;
  double loss = 0;
  if (h.g.rows > 0 && h.g.classes > 0) {
    statistics_pass(&h);
    loss = mean_loss(&h, &count);
  }
  if (forward || train)
    *(float *)args->outputs[0].data = (float)loss;
  if (forward)
    return;
  const int32_t out = tf_linear_loss_dx_output(args->op);
  uint16_t *dx = args->outputs[out].data, *dweight = args->outputs[out + 1].data;
  uint16_t *dbias = bias >= 0 ? args->outputs[out + 2].data : NULL;
  if (count == 0) {
    zero_gradients(&h, dx, dweight, dbias);
    return;
  }
  const float scale = (float)((double)*(const float *)args->inputs[3].data / (double)count);
  gradient_pass(&h, scale, dx, dweight, dbias);
}

#endif
