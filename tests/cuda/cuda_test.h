/* Shared by the CUDA tests: the device check that turns "no GPU here" (and only that) into a
 * visible skip, and test data. The per-op checks are the conformance suite's (tests/conformance). */
#ifndef TIGHTFIT_TESTS_CUDA_CUDA_TEST_H
#define TIGHTFIT_TESTS_CUDA_CUDA_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

/* 0 when device 0 is a usable CUDA device (printing which). Prints "SKIP: <why>" and returns 77
 * (ctest's SKIP_RETURN_CODE) only when there is no NVIDIA driver, the driver is too old for this
 * runtime, or there is no device; any other CUDA error, or a device below compute capability 7.5,
 * prints "FAIL: <why>" and returns 1. Creates no CUDA context. */
int cuda_test_device(void);

/* splitmix64 and the values drawn from it: reproducible on any machine. */
uint64_t cuda_test_random(uint64_t *state);
float cuda_test_normal(uint64_t *state);

/* Inputs and labels: f32 normal; integers in [0, int_high), every 7th replaced by int_special unless
 * that is INT32_MIN. */
typedef struct cuda_test_data {
  uint64_t seed;
  int32_t int_high, int_special;
} cuda_test_data;

/* Writes every input and label of `plan` into the session's next micro-batch. */
tf_status cuda_test_feed(tf_session *session, const tf_plan *plan, const cuda_test_data *data);

/* Whether `buffer` holds the same bytes in sessions a and b (*same); a read error is returned (and
 * *same is false). */
tf_status cuda_test_compare_buffer(tf_session *a, tf_session *b, const tf_plan_buffer *buffer, bool *same);

/* The options the training tests compile with: `bindings`, AdamW (lr 1e-3, weight decay 0.01,
 * epsilon 1e-6), gradients clipped at norm 1, 2 micro-batches per step. */
tf_compile_options cuda_test_training_options(tf_target_kind target, const char *bindings);

/* One optimizer step: plan->accumulate micro-batches fed from batch `first_batch` on (seed 1000 +
 * batch, integers in [0, int_high)), then the update; *loss = the mean micro-batch loss. */
tf_status cuda_test_train_step(tf_session *session, const tf_plan *plan, int32_t int_high, int64_t first_batch,
                               double *loss);

#endif
