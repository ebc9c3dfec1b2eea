/* Training sessions in tests: the plain training loop, and two sessions side by side with the same
 * counter-made micro-batches into each and their weights compared byte for byte (updates in the
 * backward pass, loss scaling). */
#ifndef TIGHTFIT_TESTS_SESSION_COMPARE_H
#define TIGHTFIT_TESTS_SESSION_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tightfit/runtime.h"

/* Writes step `step`'s micro-batch into the session (`state` is the caller's). */
typedef tf_status (*tf_test_feed_fn)(void *state, tf_session *session, int64_t step);

/* `steps` optimizer steps of one micro-batch each: feed(state, session, step), the micro-step (its loss
 * into losses[step]), the update. Returns the first failure. */
static inline tf_status tf_test_train(tf_session *session, int64_t steps, tf_test_feed_fn feed, void *state,
                                      double *losses) {
  tf_status status = NULL;
  for (int64_t i = 0; i < steps && !status; i++) {
    status = feed(state, session, i);
    if (!status)
      status = tf_session_micro_step(session, &losses[i]);
    if (!status)
      status = tf_session_optimizer_step(session);
  }
  return status;
}

/* Uniform in [0, 1) from a counter (splitmix64). */
static inline double tf_test_uniform(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (double)((x ^ (x >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

/* Writes micro-batch `batch` into the session's io buffers: floats in [-1, 1), integers in 0..9;
 * `poison` sets the first element of each float input to 1e7. */
static inline tf_status tf_test_feed(tf_session *session, const tf_plan *plan, int64_t batch, bool poison) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    const int64_t n = b->bytes / tf_dtype_size(b->dtype);
    void *data = malloc((size_t)b->bytes);
    if (!data)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed: out of memory");
    for (int64_t e = 0; e < n; e++) {
      const double u = tf_test_uniform(((uint64_t)batch << 32) + (uint64_t)(i * 4096 + e));
      if (b->dtype == TF_F32)
        ((float *)data)[e] = (float)(2 * u - 1);
      else if (b->dtype == TF_I32)
        ((int32_t *)data)[e] = (int32_t)(u * 10);
      else
        ((int64_t *)data)[e] = (int64_t)(u * 10);
    }
    if (poison && b->role == TF_ROLE_INPUT && b->dtype == TF_F32)
      ((float *)data)[0] = 1e7f;
    tf_status status = tf_session_write(session, b->name, data, b->bytes);
    free(data);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

/* One optimizer step of one micro-batch: micro-batch `step` fed (tf_test_feed), its loss to *loss. */
static inline tf_status tf_test_train_step(tf_session *session, const tf_plan *plan, int64_t step, double *loss) {
  TF_RETURN_IF_ERROR(tf_test_feed(session, plan, step, false));
  TF_RETURN_IF_ERROR(tf_session_micro_step(session, loss));
  return tf_session_optimizer_step(session);
}

/* Bytes of parameters and optimizer state that differ between session a (plan pa) and session b
 * (plan pb), buffers matched by name; -1 when a buffer of a is missing from b or of another size. */
static inline int64_t tf_test_state_difference(tf_test_counts *counts, tf_session *a, const tf_plan *pa, tf_session *b,
                                               const tf_plan *pb) {
  int64_t differ = 0;
  for (int32_t i = 0; i < pa->n_buffers; i++) {
    const tf_plan_buffer *x = &pa->buffers[i];
    if (x->role != TF_ROLE_PARAMETER && x->role != TF_ROLE_OPTIMIZER_STATE)
      continue;
    int32_t j = 0;
    while (j < pb->n_buffers && strcmp(pb->buffers[j].name, x->name) != 0)
      j++;
    if (j == pb->n_buffers || pb->buffers[j].bytes != x->bytes)
      return -1;
    unsigned char *u = malloc((size_t)x->bytes), *v = malloc((size_t)x->bytes);
    CHECK(counts, u && v, "out of memory comparing '%s'", x->name);
    if (u && v) {
      CHECK_OK(counts, tf_session_read_range(a, i, 0, u, x->bytes));
      CHECK_OK(counts, tf_session_read_range(b, j, 0, v, x->bytes));
      for (int64_t e = 0; e < x->bytes; e++)
        differ += u[e] != v[e];
    }
    free(u);
    free(v);
  }
  return differ;
}

#endif
