/* The cuda target's half kernels, checked without a GPU: every op the target leaves on f16/bf16
 * data (targets/target.c) is one the CUDA kernels run on half data (tf_cuda_kernel_takes_half) or a
 * move of bytes; the half-kernel model (tests/half_model.h) compiled for the cuda target puts its
 * matmuls, attention, norm, softmax, gelu, embedding and their gradients on half data, with fewer
 * casts and a smaller arena than with --no-half-kernels (no step but a cast on half data there);
 * and every step of both plans passes tf_cuda_kernel_check as the CUDA backend's prepare calls it
 * (host logic: the operands' dtypes and shapes). The kernels themselves run on a GPU in
 * test_cuda_half_kernels and, step by step against the f64 reference, in test_cuda_ops. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/ops.h"
#include "half_model.h"
#include "kernels/cuda/kernels.h"

#define MAX_STEP_INPUTS 16 /* more than any op takes (the optimizer's updates) */

static tf_test_counts counts;

static void target_list(void) {
  const tf_target target = tf_target_default(TF_TARGET_CUDA);
  int32_t listed = 0;
  for (int op = 0; op < TF_OP_COUNT; op++) {
    if (!tf_target_half_kernel(&target, (tf_op)op))
      continue;
    listed++;
    CHECK(&counts, tf_op_moves_elements((tf_op)op) || tf_cuda_kernel_takes_half((tf_op)op),
          "%s is a half kernel of the cuda target, but its CUDA kernel computes on f32 only", tf_op_name((tf_op)op));
  }
  CHECK(&counts, !tf_cuda_kernel_takes_half(TF_OP_MATMUL_ACCUMULATE) && !tf_cuda_kernel_takes_half(TF_OP_EMBEDDING_GRAD),
        "an op that keeps sums in its output takes half data");
  printf("ok   cuda target: %d half-kernel ops, each one the CUDA kernels run on half data or a move\n", listed);
}

/* tf_cuda_kernel_check on every step of `plan`, its operands at no memory; the number refused. */
static int32_t refused_steps(const tf_plan *plan, const char *label) {
  int32_t refused = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    tf_cuda_tensor inputs[MAX_STEP_INPUTS], outputs[TF_MAX_OUTPUTS];
    if (step->n_inputs > MAX_STEP_INPUTS) {
      CHECK(&counts, false, "%s: step %d '%s' has %d inputs", label, s, step->name, step->n_inputs);
      continue;
    }
    for (int32_t k = 0; k < step->n_inputs; k++) {
      const tf_plan_buffer *b = &plan->buffers[step->inputs[k]];
      inputs[k] = tf_tensor_ref_make(NULL, b->dtype, b->rank, b->shape);
    }
    for (int32_t k = 0; k < step->n_outputs; k++) {
      const tf_plan_buffer *b = &plan->buffers[step->outputs[k]];
      outputs[k] = tf_tensor_ref_make(NULL, b->dtype, b->rank, b->shape);
    }
    const tf_cuda_args args = {.op = step->op,
                               .attrs = &step->attrs,
                               .n_inputs = step->n_inputs,
                               .inputs = inputs,
                               .n_outputs = step->n_outputs,
                               .outputs = outputs,
                               .math = TF_F32};
    tf_status status = tf_cuda_kernel_check(&args);
    if (status) {
      refused++;
      CHECK(&counts, false, "%s: step %d '%s' refused: %s", label, s, step->name, tf_status_message(status));
      tf_status_free(status);
    }
  }
  return refused;
}

static void plans(tf_dtype half) {
  tf_plan *kernels = tf_half_model_compile(&counts, half, TF_TARGET_CUDA, true);
  tf_plan *casts = tf_half_model_compile(&counts, half, TF_TARGET_CUDA, false);
  if (kernels && casts) {
    const tf_half_model_counts k = tf_half_model_count(kernels, half), c = tf_half_model_count(casts, half);
    const int64_t arena_k = kernels->region_bytes[TF_REGION_ARENA], arena_c = casts->region_bytes[TF_REGION_ARENA];
    const bool ok = c.half_steps == 0 && k.half_matmuls >= 3 && k.half_steps >= 15 && k.casts < c.casts &&
                    arena_k < arena_c;
    CHECK(&counts, ok,
          "%s: half kernels %d steps on half data (%d matmuls), %d casts, arena %lld B; between casts %d steps on "
          "half data, %d casts, arena %lld B",
          tf_dtype_name(half), k.half_steps, k.half_matmuls, k.casts, (long long)arena_k, c.half_steps, c.casts,
          (long long)arena_c);
    printf("%-4s %s cuda plans: half kernels %d steps on half data (%d matmuls), %d casts, arena %lld B; between "
           "casts %d casts, arena %lld B\n",
           ok ? "ok" : "FAIL", tf_dtype_name(half), k.half_steps, k.half_matmuls, k.casts, (long long)arena_k, c.casts,
           (long long)arena_c);
    char label[64];
    snprintf(label, sizeof(label), "%s, half kernels", tf_dtype_name(half));
    const int32_t refused = refused_steps(kernels, label);
    snprintf(label, sizeof(label), "%s, between casts", tf_dtype_name(half));
    const int32_t refused_casts = refused_steps(casts, label);
    printf("%-4s %s: the CUDA kernels' checks accept all %d + %d steps of both plans\n",
           refused + refused_casts == 0 ? "ok" : "FAIL", tf_dtype_name(half), kernels->n_steps, casts->n_steps);
  }
  tf_plan_destroy(kernels);
  tf_plan_destroy(casts);
}

int main(void) {
  target_list();
  plans(TF_BF16);
  plans(TF_F16);
  return tf_test_finish("cuda half plans", &counts);
}
