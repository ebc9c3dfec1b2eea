/* The Vulkan target's half kernels (targets/target.c, tf_target_half_kernel): a bf16 (and an f16)
 * model, its activations declared half (matmul, bias, embedding, gelu, two slices and a concat, layer
 * norm, causal attention, a mean, matmul, softmax, log, cross_entropy: its loss f32), compiled for
 * the vulkan target runs those ops
 * and their gradients on half data itself (the f16/bf16 shader variants, shaders/common.glsl; the
 * bias gradient's sum_to between casts), and the plan compiled with
 * --no-half-kernels runs every one of them on f32 copies between casts. Each half kernel widens
 * exactly, computes the f32 shader's arithmetic and rounds once as the cast does (the same integer
 * conversions, shaders/half.glsl; the norms' and attention's gradients keep their row statistics as
 * exact f32 bits), so three training steps give the same losses and the same weights bit for bit,
 * with the subgroup shaders and without them (each setting against itself: the two matmul variants
 * sum in different orders). (The plan between casts reads, for the backward pass of an op like
 * softmax, its output as stored in half, cast back, as the half kernel does, and sums a tensor's
 * gradient parts from one node in input order: half_ops.c, precision.c.) The half-kernel plan has
 * fewer casts and a matmul reading half data; without storageBuffer16BitAccess
 * (TIGHTFIT_VULKAN_16BIT=0) its session is refused, naming --no-half-kernels, and the other plan
 * runs; a plan file putting an accumulation on half data (embedding_grad_accumulate), or
 * embedding's gradient on half data without its workspace, is refused. Under the validation layer;
 * exits 77 without a Vulkan device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "half_model.h"
#include "parity.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

static tf_test_counts counts;

static void compare(tf_dtype half, const char *setting, const tf_half_model_outcome *kernels,
                    const tf_half_model_outcome *casts) {
  if (!kernels->ran || !casts->ran)
    return;
  CHECK(&counts, memcmp(kernels->losses, casts->losses, sizeof(kernels->losses)) == 0,
        "%s, %s: losses %.9g %.9g %.9g with half kernels, %.9g %.9g %.9g between casts", tf_dtype_name(half), setting,
        kernels->losses[0], kernels->losses[1], kernels->losses[2], casts->losses[0], casts->losses[1],
        casts->losses[2]);
  int64_t differ = 0, n = (int64_t)(sizeof(kernels->params) / sizeof(float));
  for (int64_t i = 0; i < n; i++)
    differ += memcmp(&kernels->params[i], &casts->params[i], 4) != 0;
  CHECK(&counts, differ == 0, "%s, %s: %lld of %lld weights differ after %d steps", tf_dtype_name(half), setting,
        (long long)differ, (long long)n, TF_HALF_MODEL_STEPS);
  printf("%s   %s, %s: %d steps, losses %.6f %.6f %.6f, %lld weights: bit for bit the plan between casts\n",
         differ == 0 && !memcmp(kernels->losses, casts->losses, sizeof(kernels->losses)) ? "ok" : "FAIL",
         tf_dtype_name(half), setting, TF_HALF_MODEL_STEPS, kernels->losses[0], kernels->losses[1], kernels->losses[2],
         (long long)n);
}

/* The first step of `plan` running `op` with a half output 0, or -1. */
static int32_t half_step(const tf_plan *plan, tf_op op) {
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op == op && step->n_outputs > 0 &&
        (plan->buffers[step->outputs[0]].dtype == TF_BF16 || plan->buffers[step->outputs[0]].dtype == TF_F16))
      return s;
  }
  return -1;
}

static void expect_refusal(tf_plan *plan, tf_dtype half, const char *what, const char *says) {
  tf_half_model_outcome refused;
  tf_status status = tf_half_model_train(&counts, plan, "vulkan", &refused);
  CHECK(&counts, tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), says), "%s %s: %s",
        tf_dtype_name(half), what, status ? tf_status_message(status) : "ran");
  printf("ok   %s %s: %s\n", tf_dtype_name(half), what, status ? tf_status_message(status) : "ran");
  tf_status_free(status);
}

/* Embedding's gradient runs on half data (its half variant sums in f32 registers over the ids
 * linked in its workspace). Plan files that would have a shader round partial sums or write past
 * its workspace are refused, not run: the gradient step relabelled as embedding_grad_accumulate
 * (its sums added to a half accumulator in place), and the embedding step relabelled as its
 * gradient (the same operands, no workspace). */
static void refuse_partials(tf_plan *plan, tf_dtype half) {
  const int32_t gradient = half_step(plan, TF_OP_EMBEDDING_GRAD), lookup = half_step(plan, TF_OP_EMBEDDING);
  CHECK(&counts, gradient >= 0 && lookup >= 0, "%s: embedding (step %d) or its gradient (step %d) not on half data",
        tf_dtype_name(half), lookup, gradient);
  if (gradient < 0 || lookup < 0)
    return;
  tf_plan_step *step = &plan->steps[gradient];
  const tf_plan_step saved = *step;
  const int32_t saved_input = step->inputs[2];
  step->op = TF_OP_EMBEDDING_GRAD_ACCUMULATE;
  step->inputs[2] = step->outputs[0];
  step->n_outputs = 0;
  expect_refusal(plan, half, "embedding_grad_accumulate on half data", "keeps statistics or sums");
  step->inputs[2] = saved_input;
  *step = saved;
  plan->steps[lookup].op = TF_OP_EMBEDDING_GRAD;
  expect_refusal(plan, half, "embedding_grad on half data without its workspace", "workspace bytes");
}

static void run(tf_dtype half) {
  tf_plan *kernels = tf_half_model_compile(&counts, half, TF_TARGET_VULKAN, true);
  tf_plan *casts = tf_half_model_compile(&counts, half, TF_TARGET_VULKAN, false);
  if (!kernels || !casts) {
    tf_plan_destroy(kernels);
    tf_plan_destroy(casts);
    return;
  }
  const tf_half_model_counts k = tf_half_model_count(kernels, half), c = tf_half_model_count(casts, half);
  CHECK(&counts, c.half_steps == 0, "%s: %d non-cast steps read half data in the plan between casts",
        tf_dtype_name(half), c.half_steps);
  CHECK(&counts, k.half_matmuls >= 3 && k.half_steps >= 10 && k.casts < c.casts,
        "%s: half kernels: %d steps on half data (%d matmuls), %d casts; between casts: %d casts", tf_dtype_name(half),
        k.half_steps, k.half_matmuls, k.casts, c.casts);
  printf("ok   %s plans: half kernels %d steps on half data (%d matmuls), %d casts, arena %lld B; between casts %d "
         "casts, arena %lld B\n",
         tf_dtype_name(half), k.half_steps, k.half_matmuls, k.casts, (long long)kernels->region_bytes[TF_REGION_ARENA],
         c.casts, (long long)casts->region_bytes[TF_REGION_ARENA]);
  static const char *const settings[2] = {"subgroup shaders", "no subgroup shaders"};
  for (int setting = 0; setting < 2; setting++) {
    if (setting == 1)
      setenv("TIGHTFIT_VULKAN_SUBGROUPS", "0", 1);
    tf_half_model_outcome with, without;
    CHECK_OK(&counts, tf_half_model_train(&counts, kernels, "vulkan", &with));
    CHECK_OK(&counts, tf_half_model_train(&counts, casts, "vulkan", &without));
    compare(half, settings[setting], &with, &without);
    unsetenv("TIGHTFIT_VULKAN_SUBGROUPS");
  }
  setenv("TIGHTFIT_VULKAN_16BIT", "0", 1);
  tf_half_model_outcome refused, fallback;
  tf_status status = tf_half_model_train(&counts, kernels, "vulkan", &refused);
  CHECK(&counts, tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "--no-half-kernels"),
        "%s without 16-bit storage: %s", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  printf("ok   %s without 16-bit storage: %s\n", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  tf_status_free(status);
  CHECK_OK(&counts, tf_half_model_train(&counts, casts, "vulkan", &fallback));
  unsetenv("TIGHTFIT_VULKAN_16BIT");
  refuse_partials(kernels, half);
  tf_plan_destroy(kernels);
  tf_plan_destroy(casts);
}

int main(void) {
  int available = parity_vulkan_available();
  if (available != 0)
    return available;
  run(TF_BF16);
  run(TF_F16);
  parity_check_validation(&counts);
  return tf_test_finish("vulkan half kernels", &counts);
}
