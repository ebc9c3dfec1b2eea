/* The cuda target's half kernels on a GPU: the half-kernel model (tests/half_model.h, bf16 and f16)
 * trained three AdamW steps on the CUDA backend with its half kernels (matmuls as 16-bit cuBLAS
 * GEMMs, the rest f32 arithmetic on half storage) and with --no-half-kernels (every op on f32 copies
 * between casts). Not bit for bit: the 16-bit GEMMs sum in another order than the f32 SGEMM, so a
 * product may round to the neighbouring half value. The losses agree within 2% (bf16; 1% f16), every
 * weight is finite and at most 5% of them differ by more than half a learning rate (AdamW moves a
 * weight by about lr a step whatever its gradient's size, so weights differ only where a gradient
 * changed sign; a kernel reading the wrong type or rounding twice moves far more). Each step's
 * result against the f64 reference is test_cuda_ops' (the conformance table in bf16 and f16).
 * Exits 77 without a CUDA device. */
#include <math.h>
#include <stdio.h>

#include "check.h"
#include "cuda_test.h"
#include "half_model.h"

#define LEARNING_RATE 0.01 /* tf_half_model_compile's */

static tf_test_counts counts;

static void compare(tf_dtype half, const tf_half_model_outcome *kernels, const tf_half_model_outcome *casts) {
  if (!kernels->ran || !casts->ran)
    return;
  const double loss_tolerance = half == TF_BF16 ? 0.02 : 0.01;
  bool losses_ok = true;
  for (int i = 0; i < TF_HALF_MODEL_STEPS; i++)
    losses_ok = losses_ok && isfinite(kernels->losses[i]) &&
                fabs(kernels->losses[i] - casts->losses[i]) <= loss_tolerance * fabs(casts->losses[i]);
  int64_t far = 0, non_finite = 0;
  double worst = 0;
  for (int64_t i = 0; i < TF_HALF_MODEL_PARAMS; i++) {
    const double difference = fabs((double)kernels->params[i] - (double)casts->params[i]);
    non_finite += !isfinite(kernels->params[i]);
    far += difference > LEARNING_RATE / 2;
    worst = difference > worst ? difference : worst;
  }
  const bool ok = losses_ok && non_finite == 0 && far * 20 <= TF_HALF_MODEL_PARAMS;
  CHECK(&counts, ok,
        "%s: losses %.7g %.7g %.7g with half kernels, %.7g %.7g %.7g between casts; %lld of %d weights differ by "
        "more than lr/2, %lld not finite",
        tf_dtype_name(half), kernels->losses[0], kernels->losses[1], kernels->losses[2], casts->losses[0],
        casts->losses[1], casts->losses[2], (long long)far, TF_HALF_MODEL_PARAMS, (long long)non_finite);
  printf("%-4s %s: losses %.6f %.6f %.6f (between casts %.6f %.6f %.6f); %lld of %d weights differ by more than "
         "lr/2 (largest difference %.3g)\n",
         ok ? "ok" : "FAIL", tf_dtype_name(half), kernels->losses[0], kernels->losses[1], kernels->losses[2],
         casts->losses[0], casts->losses[1], casts->losses[2], (long long)far, TF_HALF_MODEL_PARAMS, worst);
}

static void run(tf_dtype half) {
  tf_plan *kernels = tf_half_model_compile(&counts, half, TF_TARGET_CUDA, true);
  tf_plan *casts = tf_half_model_compile(&counts, half, TF_TARGET_CUDA, false);
  if (kernels && casts) {
    tf_half_model_outcome with, without;
    CHECK_OK(&counts, tf_half_model_train(&counts, kernels, "cuda", &with));
    CHECK_OK(&counts, tf_half_model_train(&counts, casts, "cuda", &without));
    compare(half, &with, &without);
  }
  tf_plan_destroy(kernels);
  tf_plan_destroy(casts);
}

int main(void) {
  int available = cuda_test_device();
  if (available != 0)
    return available;
  run(TF_BF16);
  run(TF_F16);
  return tf_test_finish("cuda half kernels", &counts);
}
