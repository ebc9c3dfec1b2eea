/* The cuda target's half kernels, checked without a GPU: every op the target leaves on f16/bf16
 * data (targets/target.c) is one the CUDA kernels run on half data (tf_cuda_kernel_takes_half) or a
 * move of bytes; the half-kernel model (tests/half_model.h) compiled for the cuda target puts its
 * matmuls, attention, norm, softmax, gelu, embedding and their gradients on half data, with fewer
 * casts and a smaller arena than with --no-half-kernels (no step but a cast on half data there);
 * and every step of both plans passes tf_cuda_kernel_check as the CUDA backend's prepare calls it
 * (host logic: the operands' dtypes and shapes); and so does every step of the conformance table's
 * bf16 and f16 rows compiled for cuda, each half-kernel op of the target among them on half data,
 * and every step of a --precision gpt plan whose attention gradients read the half q, k, v it stored.
 * The kernels themselves run on a GPU in
 * test_cuda_half_kernels and, step by step against the f64 reference, in test_cuda_ops. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "conformance.h"
#include "core/ops.h"
#include "half_model.h"
#include "kernels/cuda/kernels.h"
#include "tightfit/zoo.h"

#define MAX_STEP_INPUTS 64 /* more than any step here takes (the global norm of a model's gradients: 28) */

static tf_test_counts counts;

static bool cuda_claims(tf_op op) { return tf_cuda_kernel_exists(op); }

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
  CHECK(&counts,
        !tf_cuda_kernel_takes_half(TF_OP_MATMUL_ACCUMULATE) &&
            !tf_cuda_kernel_takes_half(TF_OP_EMBEDDING_GRAD_ACCUMULATE),
        "an op that keeps sums in its output takes half data");
  printf("ok   cuda target: %d half-kernel ops, each one the CUDA kernels run on half data or a move\n", listed);
}

/* tf_cuda_kernel_check on step s of `plan` as the CUDA backend's prepare calls it, the operands at
 * no memory (the checks read dtypes and shapes only). */
static tf_status check_step(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  tf_cuda_tensor inputs[MAX_STEP_INPUTS], outputs[TF_MAX_OUTPUTS];
  if (step->n_inputs > MAX_STEP_INPUTS)
    return tf_status_new(TF_ERR_INTERNAL, "step %d '%s' has %d inputs, above the test's %d", s, step->name,
                         step->n_inputs, MAX_STEP_INPUTS);
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
  return tf_cuda_kernel_check(&args);
}

/* The steps of `plan` the kernels' checks refuse (each a recorded failure). */
static int32_t refused_steps(const tf_plan *plan, const char *label) {
  int32_t refused = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    tf_status status = check_step(plan, s);
    if (status) {
      refused++;
      CHECK(&counts, false, "%s: step %d '%s' refused: %s", label, s, plan->steps[s].name, tf_status_message(status));
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
    const bool ok =
        c.half_steps == 0 && k.half_matmuls >= 3 && k.half_steps >= 15 && k.casts < c.casts && arena_k < arena_c;
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

/* A --precision plan (the 2-layer zoo gpt) for the cuda target: its attention gradients read the
 * q, k, v it stored in half beside an f32 dy (compiler/precision.c), and every step passes the
 * kernels' checks, that one included (table.cu, attention_grad_on_half_qkv). */
static void policy_plan(tf_precision precision) {
  const char *overrides[] = {"layers=2", "seq=64"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build("gpt", overrides, 2, &g));
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = "N=2";
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.set_precision = true;
  o.precision = precision;
  tf_plan *plan = NULL;
  if (g)
    CHECK_OK(&counts, tf_compile(g, &o, &plan));
  if (plan) {
    const tf_dtype half = precision == TF_PRECISION_F16 ? TF_F16 : TF_BF16;
    int32_t direct = 0;
    for (int32_t s = 0; s < plan->n_steps; s++) {
      const tf_plan_step *step = &plan->steps[s];
      direct += step->op == TF_OP_ATTENTION_GRAD && plan->buffers[step->inputs[0]].dtype == half &&
                plan->buffers[step->inputs[3]].dtype == TF_F32 && plan->buffers[step->outputs[0]].dtype == TF_F32;
    }
    CHECK(&counts, direct == 2, "%s policy: %d attention gradients read half q, k, v (expected 2)", tf_dtype_name(half),
          direct);
    char label[64];
    snprintf(label, sizeof(label), "%s policy", tf_dtype_name(half));
    const int32_t refused = refused_steps(plan, label);
    printf("%-4s %s policy gpt plan: %d attention gradients read %s q, k, v beside f32; the kernels' checks accept "
           "all %d steps\n",
           direct == 2 && refused == 0 ? "ok" : "FAIL", tf_dtype_name(half), direct, tf_dtype_name(half),
           plan->n_steps);
  }
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* The conformance table's rows on bf16 and f16 data compiled for the cuda target, every step of
 * every plan through the kernels' checks, and every half-kernel op of the target seen on half
 * data (conf_check_half_coverage): the refusals a GPU run would meet first, found here. */
static void table(void) {
  const conf_backend cuda = {
      .name = "cuda", .target = TF_TARGET_CUDA, .claims = cuda_claims, .refuses = 0, .check_step = check_step};
  static conf_coverage coverage;
  conf_run_table_half(&counts, &cuda, &coverage, TF_BF16);
  conf_run_table_half(&counts, &cuda, &coverage, TF_F16);
  conf_check_half_coverage(&counts, &cuda, &coverage);
}

int main(void) {
  target_list();
  plans(TF_BF16);
  plans(TF_F16);
  policy_plan(TF_PRECISION_BF16);
  policy_plan(TF_PRECISION_F16);
  table();
  return tf_test_finish("cuda half plans", &counts);
}
