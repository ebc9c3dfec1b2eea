#define _POSIX_C_SOURCE 200809L
#include "tools/evaluate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/half_bits.h"
#include "runtime/feed.h"
#include "runtime/npy.h"
#include "tools/cli.h"

typedef struct scores {
  const tf_plan_buffer *logits, *labels;
  float *values;
  void *truth;    /* the labels as the plan holds them: i32 or i64 */
  int64_t ignore; /* cross_entropy's ignore_index: such rows are not scored */
  int64_t classes, rows, per_sample;
  double correct, counted;
} scores;

/* The logits and labels that cross-entropy reads; the logits are live until the backward pass in
 * a training plan (or to the end in an inference plan), so intact after the forward steps. */
static void find_scores(const tf_plan *plan, scores *sc) {
  memset(sc, 0, sizeof(*sc));
  for (int32_t s = 0; s < plan->n_steps; s++) {
    if (plan->steps[s].op != TF_OP_CROSS_ENTROPY)
      continue;
    sc->logits = &plan->buffers[plan->steps[s].inputs[0]];
    sc->labels = &plan->buffers[plan->steps[s].inputs[1]];
    sc->ignore = plan->steps[s].attrs.u.cross_entropy.ignore_index;
    break;
  }
  /* i64 labels too: what an imported model's --loss cross_entropy adds (PyTorch's dtype) */
  if (!sc->logits || (sc->labels->dtype != TF_I32 && sc->labels->dtype != TF_I64) || sc->logits->dtype != TF_F32)
    return;
  sc->values = malloc((size_t)sc->logits->bytes);
  sc->truth = malloc((size_t)sc->labels->bytes);
  sc->classes = sc->logits->shape[sc->logits->rank - 1];
  sc->rows = sc->logits->bytes / 4 / (sc->classes ? sc->classes : 1);
  sc->per_sample = sc->rows / (plan->micro_batch ? plan->micro_batch : 1);
}

static tf_status count_correct(tf_session *session, scores *sc, int64_t first_sample, int64_t samples) {
  if (!sc->values || !sc->truth)
    return NULL;
  TF_RETURN_IF_ERROR(tf_session_read(session, sc->logits->name, sc->values, sc->logits->bytes));
  TF_RETURN_IF_ERROR(tf_session_read(session, sc->labels->name, sc->truth, sc->labels->bytes));
  for (int64_t r = 0; r < sc->rows; r++) {
    if (first_sample + r / (sc->per_sample ? sc->per_sample : 1) >= samples)
      break; /* the wrapped tail of the last batch */
    const int64_t truth =
        sc->labels->dtype == TF_I32 ? ((const int32_t *)sc->truth)[r] : ((const int64_t *)sc->truth)[r];
    if (truth == sc->ignore)
      continue; /* a padded position: no class to get right */
    int64_t best = 0;
    for (int64_t c = 1; c < sc->classes; c++)
      if (sc->values[r * sc->classes + c] > sc->values[r * sc->classes + best])
        best = c;
    sc->correct += best == truth;
    sc->counted++;
  }
  return NULL;
}

/* Accumulates output `index` of every batch into one host array, written at the end. */
typedef struct collected {
  const tf_plan_buffer *buffer;
  char *data;
  int64_t per_sample_bytes;
  int64_t rows_per_sample; /* of its first axis; 0: no batch axis, written whole */
} collected;

/* An output whose first dim is a multiple of the micro-batch holds each sample's rows in turn
 * ([N, C], or [N*T, C] after a reshape): the batches' rows are concatenated, the wrapped tail of the
 * last batch dropped. Any other output (a scalar, a reduction over the batch) is one tensor per
 * micro-batch: written as it is, which needs the data to be one micro-batch. */
static tf_status plan_output(const tf_plan *plan, int32_t index, int64_t batch, int64_t batches, collected *out) {
  const tf_plan_buffer *b = &plan->buffers[plan->outputs[index]];
  out->buffer = b;
  out->rows_per_sample = b->rank >= 1 && b->shape[0] % batch == 0 ? b->shape[0] / batch : 0;
  if (!out->rows_per_sample && batches > 1) {
    char shape[256];
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "output '%s' %s has no batch axis (its first dim is not a multiple of the micro-batch %" PRId64
                         "), so each of the %" PRId64
                         " micro-batches gives another one: give --output data of one micro-batch",
                         b->name, tf_format_shape(b->shape, b->rank, shape, sizeof(shape)), batch, batches);
  }
  out->per_sample_bytes = out->rows_per_sample ? b->bytes / batch : b->bytes;
  out->data = malloc((size_t)(out->rows_per_sample ? out->per_sample_bytes * batches * batch : b->bytes) + 1);
  if (!out->data)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "evaluate: cannot hold output '%s'", b->name);
  return NULL;
}

/* An output as .npy: bf16 widened to float32 (exact; NumPy has no bfloat16), else as it is. */
static tf_status write_output(const char *path, const tf_plan_buffer *out, const int64_t *shape, const char *data) {
  if (out->dtype != TF_BF16)
    return tf_npy_write(path, out->dtype, out->rank, shape, data);
  int64_t count = 1;
  for (int32_t d = 0; d < out->rank; d++)
    count *= shape[d];
  uint32_t *wide = malloc(sizeof(uint32_t) * (size_t)(count ? count : 1));
  if (!wide)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot widen output '%s' to float32", path, out->name);
  tf_f32_from_half_array(data, wide, count, 1);
  tf_status status = tf_npy_write(path, TF_F32, out->rank, shape, wide);
  free(wide);
  return status;
}

/* The progress of the batch loop on stderr (see evaluate.h): a long `run` or `--eval` over a large
 * data set is not silent for minutes. */
typedef struct progress {
  const char *name;
  int64_t every, total;
  bool tty, shown;
  double last;
} progress;

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void progress_after(progress *p, int64_t done) {
  if (!p->name || done >= p->total)
    return;
  if (!p->tty) {
    if (done % p->every == 0) {
      fprintf(tf_cli_err(), "%s: batch %" PRId64 "/%" PRId64 " (%d%%)\n", p->name, done, p->total,
              (int)(100 * done / p->total));
      fflush(tf_cli_err());
    }
    return;
  }
  const double now = seconds_now();
  if (now - p->last < 2.0)
    return;
  p->last = now;
  p->shown = true;
  fprintf(tf_cli_err(), "\r%s: batch %" PRId64 "/%" PRId64 " (%d%%) ", p->name, done, p->total,
          (int)(100 * done / p->total));
  fflush(tf_cli_err());
}

static void progress_end(const progress *p) {
  if (p->shown) /* the line rewritten in place is erased: the result follows on stdout */
    fprintf(tf_cli_err(), "\r%*s\r", 60, "");
}

tf_status tf_tool_evaluate(tf_session *session, const char *data_dir, uint64_t seed, const char *outputs_dir,
                           const char *progress_name, int64_t progress_every, double *loss, double *accuracy) {
  const tf_plan *plan = tf_session_plan(session);
  tf_feed *feed;
  TF_RETURN_IF_ERROR(tf_feed_open(plan, data_dir, seed, &feed));
  scores sc;
  find_scores(plan, &sc);
  int64_t samples = tf_feed_samples(feed), batch = plan->micro_batch ? plan->micro_batch : 1;
  int64_t batches = (samples + batch - 1) / batch;
  collected *outputs = calloc((size_t)(plan->n_outputs ? plan->n_outputs : 1), sizeof(collected));
  tf_status status = outputs ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
  for (int32_t i = 0; outputs_dir && i < plan->n_outputs && !status; i++)
    status = plan_output(plan, i, batch, batches, &outputs[i]);
  progress shown = {.name = progress_name,
                    .every = progress_every > 0 ? progress_every : TF_TOOL_PROGRESS_EVERY,
                    .total = batches,
                    .tty = isatty(fileno(tf_cli_err())),
                    .last = seconds_now()};
  double loss_sum = 0;
  for (int64_t b = 0; b < batches && !status; b++) {
    double batch_loss;
    status = tf_feed_batch_in_order(feed, session, b);
    if (!status)
      status = tf_session_forward(session, &batch_loss);
    if (!status)
      status = count_correct(session, &sc, b * batch, samples);
    for (int32_t i = 0; outputs_dir && i < plan->n_outputs && !status; i++)
      status = tf_session_read(session, outputs[i].buffer->name,
                               outputs[i].data + b * batch * outputs[i].per_sample_bytes, outputs[i].buffer->bytes);
    loss_sum += batch_loss;
    progress_after(&shown, b + 1);
  }
  progress_end(&shown);
  for (int32_t i = 0; outputs_dir && i < plan->n_outputs && !status; i++) {
    const tf_plan_buffer *out = outputs[i].buffer;
    int64_t shape[TF_MAX_RANK];
    memcpy(shape, out->shape, sizeof(shape));
    if (outputs[i].rows_per_sample)
      shape[0] = samples * outputs[i].rows_per_sample; /* without the wrapped tail */
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.npy", outputs_dir, out->name);
    status = write_output(path, out, shape, outputs[i].data);
  }
  *loss = batches && plan->loss >= 0 ? loss_sum / (double)batches : NAN;
  *accuracy = sc.counted ? sc.correct / sc.counted : NAN;
  for (int32_t i = 0; outputs && i < plan->n_outputs; i++)
    free(outputs[i].data);
  free(outputs);
  free(sc.values);
  free(sc.truth);
  tf_feed_close(feed);
  return status;
}
