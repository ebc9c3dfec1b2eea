/* Shared by the CUDA tests: the device check that turns "no GPU here" (and only that) into a
 * visible skip, test data, and the step-by-step parity harness: every step of a compiled plan run by
 * the CPU f32 kernel and by the CUDA kernel on the same inputs, outputs compared, the CPU's results
 * carried on (so an error is caught at the step that makes it, not smeared over the steps after). */
#ifndef TIGHTFIT_TESTS_CUDA_CUDA_TEST_H
#define TIGHTFIT_TESTS_CUDA_CUDA_TEST_H

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

/* One optimizer step: plan->accumulate micro-batches fed from batch `first_batch` on (seed 1000 +
 * batch, integers in [0, int_high)), then the update; *loss = the mean micro-batch loss. */
tf_status cuda_test_train_step(tf_session *session, const tf_plan *plan, int32_t int_high, int64_t first_batch,
                               double *loss);

/* Per op: how many steps ran and the worst error seen (a fraction of the op's tolerance). */
typedef struct cuda_op_coverage {
  int32_t steps[TF_OP_COUNT];
  double worst[TF_OP_COUNT];
} cuda_op_coverage;

/* Runs every step of `plan` on both kernels (CPU context and CUDA run values: optimizer step 3,
 * micro-step 5, seed 11) and compares each step's outputs and in-place updates. */
void cuda_test_step_parity(tf_test_counts *counts, const char *label, const tf_plan *plan, const cuda_test_data *data,
                           cuda_op_coverage *coverage);

/* The tolerance of an op's outputs: |cuda - cpu| <= atol * scale + rtol * |cpu|, scale being the
 * largest |cpu| value of the buffer (at least 1): summation order matters in proportion to it. */
typedef struct cuda_tolerance {
  double atol, rtol;
} cuda_tolerance;
cuda_tolerance cuda_test_tolerance(tf_op op);

#endif
