/* The CTC loss and its gradient (ctc_loss, ctc_loss_grad): Graves' forward-backward recursions in
 * log space over each sequence's extended target (a blank before, between and after its labels),
 * in the workspace core/ctc.h lays out, one sequence per thread.
 *
 * As PyTorch's ctc_loss(log_softmax(logits), reduction='mean'): the loss of sequence n is
 * -log p(target | frames [0, T_n)), divided by its target length (at least 1), and the output is
 * the mean over the batch, summed in double in sequence order (independent of the thread count).
 * What the shapes cannot rule out is handled here: input lengths are clamped to [0, T]; a label
 * >= C has probability 0 (its alignments are impossible, the loss infinite) and is never read as a
 * class; a label equal to blank is scored as the blank class, as PyTorch does. An impossible
 * alignment gives an infinite loss and a NaN gradient, or 0 for both under zero_infinity. */
#include "core/ctc.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

#define NEG_INF ((real)-INFINITY)

typedef struct ctc_view {
  tf_ctc_geometry g;
  const real *logits;
  const tf_cpu_tensor *labels, *lengths; /* lengths NULL: every sequence is T frames */
  int64_t blank;
  bool zero_infinity;
  real *work;
} ctc_view;

static ctc_view ctc_view_of(const tf_cpu_args *args, int32_t lengths_input) {
  ctc_view v;
  v.g = tf_ctc_geometry_of(&args->inputs[0], &args->inputs[1]);
  v.logits = args->inputs[0].data;
  v.labels = &args->inputs[1];
  v.lengths = args->n_inputs > lengths_input ? &args->inputs[lengths_input] : NULL;
  v.blank = args->attrs->u.ctc.blank;
  v.zero_infinity = args->attrs->u.ctc.zero_infinity;
  v.work = args->workspace;
  return v;
}

static int64_t integer_at(const tf_cpu_tensor *t, int64_t i) {
  return t->dtype == TF_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* S_n: the labels of sequence n before its first negative one. */
static int64_t target_length(const ctc_view *v, int64_t n) {
  int64_t s = 0;
  while (s < v->g.label_length && integer_at(v->labels, n * v->g.label_length + s) >= 0)
    s++;
  return s;
}

/* T_n, clamped to [0, T]. */
static int64_t input_length(const ctc_view *v, int64_t n) {
  if (!v->lengths)
    return v->g.frames;
  const int64_t length = integer_at(v->lengths, n);
  return length < 0 ? 0 : length > v->g.frames ? v->g.frames : length;
}

/* The class at extended position s (blank at even s), or -1 for a label outside [0, C). */
static int64_t extended_class(const ctc_view *v, int64_t n, int64_t s) {
  if (s % 2 == 0)
    return v->blank;
  const int64_t label = integer_at(v->labels, n * v->g.label_length + (s - 1) / 2);
  return label < v->g.classes ? label : -1;
}

static real log_add(real a, real b) {
  if (a == NEG_INF)
    return b;
  if (b == NEG_INF)
    return a;
  const real high = a > b ? a : b, low = a > b ? b : a;
  return high + TF_REAL_LOG1P(TF_REAL_EXP(low - high));
}

/* Whether the recursion may skip from s - 2 to s (or back): s is a label unlike the one before. */
static bool may_skip(const ctc_view *v, int64_t n, int64_t s, int64_t c) {
  return s >= 2 && s % 2 == 1 && c != extended_class(v, n, s - 2);
}

static real emission(const ctc_view *v, const real *x, const real *lse, int64_t t, int64_t c) {
  return c < 0 ? NEG_INF : x[t * v->g.classes + c] - lse[t];
}

/* Fills frame sums and log alpha of sequence n; returns its loss -log p (inf when impossible). */
static double forward_sequence(const ctc_view *v, int64_t n, int64_t frames, int64_t length) {
  const int64_t classes = v->g.classes, width = v->g.extended, used = 2 * length + 1;
  const real *x = v->logits + n * v->g.frames * classes;
  real *lse = v->work + tf_ctc_lse_offset(&v->g, n), *alpha = v->work + tf_ctc_alpha_offset(&v->g, n);
  for (int64_t t = 0; t < frames; t++) {
    real high = x[t * classes];
    for (int64_t c = 1; c < classes; c++)
      high = x[t * classes + c] > high ? x[t * classes + c] : high;
    double sum = 0;
    for (int64_t c = 0; c < classes; c++)
      sum += (double)TF_REAL_EXP(x[t * classes + c] - high);
    lse[t] = high + (real)log(sum);
  }
  if (frames == 0)
    return length == 0 ? 0.0 : INFINITY;
  for (int64_t s = 0; s < used; s++)
    alpha[s] = s < 2 ? emission(v, x, lse, 0, extended_class(v, n, s)) : NEG_INF;
  for (int64_t t = 1; t < frames; t++) {
    const real *previous = alpha + (t - 1) * width;
    real *current = alpha + t * width;
    for (int64_t s = 0; s < used; s++) {
      const int64_t c = extended_class(v, n, s);
      real sum = previous[s];
      if (s >= 1)
        sum = log_add(sum, previous[s - 1]);
      if (may_skip(v, n, s, c))
        sum = log_add(sum, previous[s - 2]);
      current[s] = sum == NEG_INF ? NEG_INF : sum + emission(v, x, lse, t, c);
    }
  }
  const real *last = alpha + (frames - 1) * width;
  const real total = used > 1 ? log_add(last[used - 1], last[used - 2]) : last[0];
  return -(double)total;
}

/* Fills log beta of sequence n (after forward_sequence). */
static void backward_sequence(const ctc_view *v, int64_t n, int64_t frames, int64_t length) {
  const int64_t width = v->g.extended, used = 2 * length + 1;
  const real *x = v->logits + n * v->g.frames * v->g.classes, *lse = v->work + tf_ctc_lse_offset(&v->g, n);
  real *beta = v->work + tf_ctc_beta_offset(&v->g, n);
  for (int64_t s = 0; s < used; s++)
    beta[(frames - 1) * width + s] = s >= used - 2 ? emission(v, x, lse, frames - 1, extended_class(v, n, s)) : NEG_INF;
  for (int64_t t = frames - 2; t >= 0; t--) {
    const real *next = beta + (t + 1) * width;
    real *current = beta + t * width;
    for (int64_t s = 0; s < used; s++) {
      const int64_t c = extended_class(v, n, s);
      real sum = next[s];
      if (s + 1 < used)
        sum = log_add(sum, next[s + 1]);
      if (s + 2 < used && may_skip(v, n, s + 2, extended_class(v, n, s + 2)))
        sum = log_add(sum, next[s + 2]);
      current[s] = sum == NEG_INF ? NEG_INF : sum + emission(v, x, lse, t, c);
    }
  }
}

/* Every sequence's loss into the workspace (zero_infinity applied), in parallel over the batch. */
static void sequence_losses(const ctc_view *v, const tf_cpu_args *args, bool with_beta) {
  real *losses = v->work + tf_ctc_loss_offset(&v->g, 0);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), v->g.batch > 1), for (int64_t n = 0; n < v->g.batch; n++) {
        const int64_t frames = input_length(v, n), length = target_length(v, n);
        double loss = forward_sequence(v, n, frames, length);
        if (with_beta && frames > 0)
          backward_sequence(v, n, frames, length);
        if (isinf(loss) && v->zero_infinity)
          loss = 0;
        losses[n] = (real)loss;
      });
}

void TF_REAL_NAME(tf_cpu_ctc_loss)(const tf_cpu_args *args) {
  const ctc_view v = ctc_view_of(args, 2);
  sequence_losses(&v, args, false);
  double total = 0;
  for (int64_t n = 0; n < v.g.batch; n++) {
    const int64_t length = target_length(&v, n);
    total += (double)v.work[tf_ctc_loss_offset(&v.g, n)] / (double)(length > 1 ? length : 1);
  }
  *(real *)args->outputs[0].data = v.g.batch > 0 ? (real)(total / (double)v.g.batch) : (real)0;
}

/* dlogits[t, c] = (softmax - exp(log sum over s with class c of alpha beta + loss - log y)) dloss /
 * (N S_n) for t < T_n, 0 after (PyTorch's ctc_loss_backward through log_softmax). The row of
 * dlogits first holds the per-class log sums. */
static void gradient_sequence(const ctc_view *v, int64_t n, real scale, real *dx) {
  const int64_t classes = v->g.classes, width = v->g.extended, frames = input_length(v, n);
  const int64_t length = target_length(v, n), used = 2 * length + 1;
  const real loss = v->work[tf_ctc_loss_offset(&v->g, n)];
  const real *x = v->logits + n * v->g.frames * classes, *lse = v->work + tf_ctc_lse_offset(&v->g, n);
  const real *alpha = v->work + tf_ctc_alpha_offset(&v->g, n), *beta = v->work + tf_ctc_beta_offset(&v->g, n);
  real *out = dx + n * v->g.frames * classes;
  for (int64_t i = frames * classes; i < v->g.frames * classes; i++)
    out[i] = 0;
  for (int64_t t = 0; t < frames; t++) {
    real *row = out + t * classes;
    for (int64_t c = 0; c < classes; c++)
      row[c] = NEG_INF;
    for (int64_t s = 0; s < used; s++) {
      const int64_t c = extended_class(v, n, s);
      if (c >= 0)
        row[c] = log_add(row[c], alpha[t * width + s] + beta[t * width + s]);
    }
    for (int64_t c = 0; c < classes; c++) {
      const real log_y = x[t * classes + c] - lse[t];
      row[c] = (TF_REAL_EXP(log_y) - TF_REAL_EXP(row[c] + loss - log_y)) * scale;
    }
  }
}

void TF_REAL_NAME(tf_cpu_ctc_loss_grad)(const tf_cpu_args *args) {
  ctc_view v = ctc_view_of(args, 3);
  const real dloss = *(const real *)args->inputs[2].data;
  real *dx = args->outputs[0].data;
  /* the losses before zero_infinity: which sequences it zeroes */
  const bool zero_infinity = v.zero_infinity;
  v.zero_infinity = false;
  sequence_losses(&v, args, true);
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), v.g.batch > 1), for (int64_t n = 0; n < v.g.batch; n++) {
        const int64_t length = target_length(&v, n);
        const real loss = v.work[tf_ctc_loss_offset(&v.g, n)];
        if (zero_infinity && isinf(loss)) {
          for (int64_t i = 0; i < v.g.frames * v.g.classes; i++)
            dx[n * v.g.frames * v.g.classes + i] = 0;
          continue;
        }
        const real scale = (real)((double)dloss / (double)v.g.batch / (double)(length > 1 ? length : 1));
        gradient_sequence(&v, n, scale, dx);
      });
}
