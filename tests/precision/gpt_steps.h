/* The small gpt that test_autocast.c and test_direct_reads.c train on every backend: its batches of
 * ROWS x SEQ tokens and labels below VOCAB, made from a counter, the loop that trains on them, and
 * the target of a backend's plans. */
#ifndef TIGHTFIT_TESTS_PRECISION_GPT_STEPS_H
#define TIGHTFIT_TESTS_PRECISION_GPT_STEPS_H

#include <string.h>

#include "session_compare.h"
#include "tightfit/runtime.h"
#include "tightfit/target.h"

#define ROWS 2
#define SEQ 64
#define VOCAB 128

/* The target whose plans `backend` ("cpu", "vulkan", "cuda") runs. */
static inline tf_target_kind gpt_target_of(const char *backend) {
  return strcmp(backend, "vulkan") == 0 ? TF_TARGET_VULKAN
         : strcmp(backend, "cuda") == 0 ? TF_TARGET_CUDA
                                        : TF_TARGET_CPU;
}

/* Writes step `step`'s tokens and labels into the session. */
static inline tf_status gpt_feed(tf_session *s, int64_t step) {
  int32_t tokens[ROWS * SEQ], labels[ROWS * SEQ];
  for (int64_t i = 0; i < ROWS * SEQ; i++) {
    tokens[i] = (int32_t)((i * 37 + step * 11) % VOCAB);
    labels[i] = (int32_t)((i * 53 + step * 7 + 5) % VOCAB);
  }
  TF_RETURN_IF_ERROR(tf_session_write(s, "tokens", tokens, sizeof(tokens)));
  return tf_session_write(s, "labels", labels, sizeof(labels));
}

/* gpt_feed as a tf_test_feed_fn. */
static inline tf_status gpt_feed_step(void *state, tf_session *s, int64_t step) {
  (void)state;
  return gpt_feed(s, step);
}

/* `steps` optimizer steps of one micro-batch each, step i on gpt_feed's batch i; losses[i] is its loss. */
static inline tf_status gpt_train(tf_session *s, int64_t steps, double *losses) {
  return tf_test_train(s, steps, gpt_feed_step, NULL, losses);
}

#endif
