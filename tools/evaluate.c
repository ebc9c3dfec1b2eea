#define _POSIX_C_SOURCE 200809L
#include "tools/evaluate.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/feed.h"
#include "runtime/npy.h"

typedef struct scores {
  const tf_plan_buffer *logits, *labels;
  float *values;
  int32_t *truth;
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
    break;
  }
  if (!sc->logits || sc->labels->dtype != TF_I32 || sc->logits->dtype != TF_F32)
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
    int64_t best = 0;
    for (int64_t c = 1; c < sc->classes; c++)
      if (sc->values[r * sc->classes + c] > sc->values[r * sc->classes + best])
        best = c;
    sc->correct += best == sc->truth[r];
    sc->counted++;
  }
  return NULL;
}

/* Accumulates output `index` of every batch into one host array, written at the end. */
typedef struct collected {
  const tf_plan_buffer *buffer;
  char *data;
  int64_t per_sample_bytes;
} collected;

tf_status tf_tool_evaluate(tf_session *session, const char *data_dir, uint64_t seed, const char *outputs_dir,
                           double *loss, double *accuracy) {
  const tf_plan *plan = tf_session_plan(session);
  tf_feed *feed;
  TF_RETURN_IF_ERROR(tf_feed_open(plan, data_dir, seed, &feed));
  scores sc;
  find_scores(plan, &sc);
  int64_t samples = tf_feed_samples(feed), batch = plan->micro_batch ? plan->micro_batch : 1;
  int64_t batches = (samples + batch - 1) / batch;
  collected *outputs = calloc((size_t)(plan->n_outputs ? plan->n_outputs : 1), sizeof(collected));
  tf_status status = outputs ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
  for (int32_t i = 0; outputs_dir && i < plan->n_outputs && !status; i++) {
    outputs[i].buffer = &plan->buffers[plan->outputs[i]];
    outputs[i].per_sample_bytes = outputs[i].buffer->bytes / batch;
    outputs[i].data = malloc((size_t)(outputs[i].per_sample_bytes * batches * batch + 1));
    if (!outputs[i].data)
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "evaluate: cannot hold output '%s'", outputs[i].buffer->name);
  }
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
  }
  for (int32_t i = 0; outputs_dir && i < plan->n_outputs && !status; i++) {
    const tf_plan_buffer *out = outputs[i].buffer;
    int64_t shape[TF_MAX_RANK];
    memcpy(shape, out->shape, sizeof(shape));
    shape[0] = samples; /* the batch axis, without the wrapped tail */
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.npy", outputs_dir, out->name);
    status = tf_npy_write(path, out->dtype, out->rank, shape, outputs[i].data);
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
