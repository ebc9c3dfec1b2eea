/* The half loss head the fused-head tests share (tests/precision/test_half_loss_head on the CPU,
 * tests/vulkan/test_vulkan_half_head): logits = x W^T over a vocabulary of TF_HALF_HEAD_CLASSES
 * (several of the half kernels' class spans), x and W cast to f16/bf16 (or left f32), -> cross_entropy;
 * fixed data, and the check of a half kernel's loss and grad(W) against the f32 head on the same
 * half-rounded inputs. */
#ifndef TIGHTFIT_TESTS_HALF_HEAD_H
#define TIGHTFIT_TESTS_HALF_HEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define TF_HALF_HEAD_ROWS 512
#define TF_HALF_HEAD_WIDTH 32
#define TF_HALF_HEAD_CLASSES 9000

/* The head on `rows` rows in `dtype` compiled for `target` (fuse, loss scale 1, two micro-batches
 * a step so grad(W) is an accumulator read after the first; no half kernels when !half_kernels);
 * NULL (the failure recorded) when it does not compile. */
tf_plan *tf_half_head_compile(tf_test_counts *counts, tf_target_kind target, tf_dtype dtype, tf_fuse_loss fuse,
                              int64_t rows, bool half_kernels);

/* The head's fixed data: x [ROWS, WIDTH] and W [CLASSES, WIDTH] in f32 and rounded to `half` (x_h,
 * w_h), labels in [0, CLASSES). */
typedef struct tf_half_head_data {
  float *x, *x_h, *w, *w_h;
  int32_t labels[TF_HALF_HEAD_ROWS];
} tf_half_head_data;
bool tf_half_head_data_make(tf_half_head_data *data, tf_dtype half);
void tf_half_head_data_free(tf_half_head_data *data);

/* One micro-step of `plan` on `backend` with x, the labels and W: the loss (NaN on failure, recorded),
 * grad(W) into grad_w [CLASSES x WIDTH]. */
double tf_half_head_run(tf_test_counts *counts, const tf_plan *plan, const char *backend, const float *x,
                        const int32_t *labels, const float *w, float *grad_w);

/* The name of a buffer of `plan` shaped [rows, cols], or NULL. */
const char *tf_half_head_buffer(const tf_plan *plan, int64_t rows, int64_t cols, tf_dtype dtype);

/* Checks the head's plans for a GPU target, compiled with half kernels (`fused`) and without
 * (`between`): the fused head step reads x in `half` (and in f32 between casts), no step of the head
 * reads or writes an f32 [CLASSES, WIDTH] buffer (between casts: the widened weight, its f32
 * gradient), and the arena is smaller. Prints a line naming `target`. */
void tf_half_head_check_plans(tf_test_counts *counts, const char *target, tf_dtype half, const tf_plan *fused,
                              const tf_plan *between);

/* The GPU tests' whole check for `target` (vulkan or cuda) in `half`: the head compiled with and
 * without half kernels, tf_half_head_check_plans, then (when `run`) one micro-step of the fused plan
 * on `backend` against the f32 head on the CPU (tf_half_head_check). */
void tf_half_head_check_target(tf_test_counts *counts, tf_target_kind target, const char *backend, tf_dtype half,
                               bool run);

/* Checks a half kernel's loss and grad(W) against the f32 head on the rounded inputs (expected,
 * grad_ref): the loss within 1e-6 relative, no gradient element beyond one unit of the half type
 * (plus 1e-6 of the largest; f16's subnormal spacing), at most 1% another rounding. Prints a line
 * naming `what`; returns whether it passed. */
bool tf_half_head_check(tf_test_counts *counts, const char *what, tf_dtype half, double loss, const float *grad,
                        double expected, const float *grad_ref);

#endif
