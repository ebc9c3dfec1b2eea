/* The model the half-kernel tests of the GPU backends share (tests/vulkan/test_vulkan_half_kernels,
 * tests/cuda/test_cuda_half_kernels): a small bf16 (or f16) network whose activations are declared
 * half, touching most ops a half kernel serves, compiled for a target with its half kernels and with
 * --no-half-kernels (every op between casts), trained a few AdamW steps on fixed data. */
#ifndef TIGHTFIT_TESTS_HALF_MODEL_H
#define TIGHTFIT_TESTS_HALF_MODEL_H

#include <stdbool.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define TF_HALF_MODEL_ROWS 6
#define TF_HALF_MODEL_WIDTH 20
#define TF_HALF_MODEL_HIDDEN 24
#define TF_HALF_MODEL_CLASSES 10
#define TF_HALF_MODEL_VOCAB 7
#define TF_HALF_MODEL_STEPS 3
#define TF_HALF_MODEL_PARAMS                                                                                           \
  (TF_HALF_MODEL_WIDTH * TF_HALF_MODEL_HIDDEN + 2 * TF_HALF_MODEL_HIDDEN +                                             \
   TF_HALF_MODEL_HIDDEN * TF_HALF_MODEL_CLASSES + TF_HALF_MODEL_VOCAB * TF_HALF_MODEL_HIDDEN)

/* x -> cast -> matmul(W1) + b1 + embedding(ids) -> gelu -> concat(two slices) -> layer_norm ->
 * causal attention (2 heads over sequences of 3) -> + its mean over the features -> matmul(W2) ->
 * softmax -> cross_entropy of its log (an f32 loss of half logits), all in `half`.
 * Compiled for `target` (AdamW, lr 0.01, loss scale 1) with its half kernels, or with none; NULL
 * (the failure recorded in counts) when it does not compile. */
tf_plan *tf_half_model_compile(tf_test_counts *counts, tf_dtype half, tf_target_kind target, bool half_kernels);

/* Compiles `g` (a half model: this one or test_cpu_half_kernels') for `target` as
 * tf_half_model_compile does, then destroys it; NULL (the failure recorded) when it does not compile
 * or when g is NULL. */
tf_plan *tf_half_model_compile_graph(tf_test_counts *counts, tf_graph *g, tf_target_kind target, bool half_kernels);

/* The first layers of the half models (this one and test_cpu_half_kernels'): inputs x [rows, width]
 * (f32, cast to `half`), ids and labels [rows] (i32; labels into *labels), parameters W1, b1 and
 * table [vocab, hidden] read through casts, -> gelu(x W1 + b1 + embedding(ids)) [rows, hidden]. */
tf_tensor_id tf_half_model_stem(tf_graph *g, tf_dtype half, int64_t rows, int64_t width, int64_t hidden, int64_t vocab,
                                tf_tensor_id *labels);

/* A plan's casts and its non-cast steps reading `half` data (matmuls among them). */
typedef struct tf_half_model_counts {
  int32_t casts, half_steps, half_matmuls;
} tf_half_model_counts;
tf_half_model_counts tf_half_model_count(const tf_plan *plan, tf_dtype half);

/* What TF_HALF_MODEL_STEPS training steps give: each loss, then every parameter after the last
 * (W1, b1, gamma, W2, table, concatenated). */
typedef struct tf_half_model_outcome {
  double losses[TF_HALF_MODEL_STEPS];
  float params[TF_HALF_MODEL_PARAMS];
  bool ran;
} tf_half_model_outcome;

/* Reads the parameters W1 [width, hidden], b1 [hidden], gamma [hidden], W2 [hidden, classes] and
 * table [vocab, hidden] of a session of this model (or of another of the same parameters, such as
 * test_cpu_half_kernels') into `params`, in that order. */
tf_status tf_half_model_read_params(tf_session *s, int64_t width, int64_t hidden, int64_t classes, int64_t vocab,
                                    float *params);

/* Trains `plan` on `backend` (seed 3, the model's fixed data) into *out; out->ran when all went well. */
tf_status tf_half_model_train(tf_test_counts *counts, const tf_plan *plan, const char *backend,
                              tf_half_model_outcome *out);

#endif
