/* Autocast (compile --autocast bf16|fp16, compiler/autocast.c): an f32 model's forward pass computes
 * on half activations as torch.autocast does, with f32 master weights, gradients, optimizer state
 * and loss.
 *
 * For the 2-layer zoo gpt (N=2, T=64, AdamW), on the cpu, vulkan and cuda targets:
 *   - structure: every forward matmul and attention computes on half values (its operands half, or
 *     on the cpu target widened from half where its half slices would not pay); every
 *     layer_norm reads and writes f32 (autocast's fp32 list); every parameter, gradient and
 *     optimizer state buffer and the loss are f32; an fp16 plan checks for overflow (loss scaling);
 *     an inference plan's output keeps its declared f32 (cuda target); the notes say what the pass did;
 *   - training on every backend present, 4 AdamW steps: each loss within 2^-5 relative of the f32
 *     plan's on the same backend (bf16 operands: 8 significant bits), and the losses of the
 *     backends within 1e-3 relative of the cpu's (the same half roundings, other summation orders).
 * Emptying the lower-precision list on purpose fails the structure (every product on f32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "check.h"
#include "gpt_steps.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

#define STEPS 4

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

static tf_plan *compile_gpt(const tf_graph *g, tf_target_kind target, tf_dtype autocast, bool training) {
  tf_compile_options o = tf_compile_options_default(target);
  o.bindings = "N=2";
  o.training = training;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 1e-3;
  o.weight_decay = 0.01;
  o.autocast = autocast;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "compiling gpt (autocast %s, %s): %s", tf_dtype_name(autocast),
        training ? "training" : "inference", tf_status_message(status));
  tf_status_free(status);
  return plan;
}

/* Whether every floating operand of step s (inputs and outputs) is `want` (half: either half type). */
static bool operands_are(const tf_plan *plan, int32_t s, tf_dtype want) {
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    const int32_t b = k < step->n_inputs ? step->inputs[k] : step->outputs[k - step->n_inputs];
    if (b < 0)
      continue;
    const tf_dtype dtype = plan->buffers[b].dtype;
    if (dtype != TF_F32 && !is_half(dtype))
      continue; /* token ids */
    if (dtype != want)
      return false;
  }
  return true;
}

/* Whether buffer b is written by a cast from a half buffer (the cpu target's half_ops.c puts a product
 * whose half slices would not pay between casts: it still computes on the half values). */
static bool widened_from_half(const tf_plan *plan, int32_t b) {
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op == TF_OP_CAST && step->n_outputs == 1 && step->outputs[0] == b)
      return is_half(plan->buffers[step->inputs[0]].dtype);
  }
  return false;
}

/* Step s computes on half values: its floating inputs half, or widened from half into f32 copies. */
static bool on_half_values(const tf_plan *plan, int32_t s, tf_dtype half) {
  if (operands_are(plan, s, half))
    return true;
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs; k++) {
    const int32_t b = step->inputs[k];
    const tf_dtype dtype = b >= 0 ? plan->buffers[b].dtype : TF_I32;
    if ((dtype == TF_F32 && !widened_from_half(plan, b)) || (is_half(dtype) && dtype != half))
      return false;
  }
  return true;
}

typedef struct plan_facts {
  int32_t products, half_products, norms, f32_norms, casts, wide_state, state;
} plan_facts;

static plan_facts facts_of(const tf_plan *plan, tf_dtype half) {
  plan_facts f;
  memset(&f, 0, sizeof(f));
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    f.casts += step->op == TF_OP_CAST;
    if (step->phase != TF_PHASE_FORWARD)
      continue;
    if (step->op == TF_OP_MATMUL || step->op == TF_OP_ATTENTION) {
      f.products++;
      f.half_products += on_half_values(plan, s, half);
    } else if (step->op == TF_OP_LAYER_NORM) {
      f.norms++;
      f.f32_norms += operands_are(plan, s, TF_F32);
    }
  }
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    const tf_buffer_role role = plan->buffers[b].role;
    if (role == TF_ROLE_PARAMETER || role == TF_ROLE_GRADIENT || role == TF_ROLE_OPTIMIZER_STATE) {
      f.state++;
      f.wide_state += plan->buffers[b].dtype == TF_F32;
    }
  }
  return f;
}

static void check_structure(const char *backend, const tf_plan *plan, tf_dtype half) {
  const plan_facts f = facts_of(plan, half);
  const char *notes = plan->report.notes ? plan->report.notes : "";
  char said[64];
  snprintf(said, sizeof(said), "autocast %s:", tf_dtype_name(half));
  /* 2 layers: 4 products each (qkv, proj, fc, proj) and one attention, and the head (128 classes:
   * not fused) */
  const bool ok = f.products == 11 && f.half_products == f.products && f.norms == 5 && f.f32_norms == f.norms &&
                  f.state > 0 && f.wide_state == f.state && plan->buffers[plan->loss].dtype == TF_F32 &&
                  strstr(notes, said) != NULL && (half != TF_F16 || plan->overflow_check >= 0);
  CHECK(&counts, ok,
        "%s autocast %s: %d of %d forward products on %s, %d of %d layer norms on f32, %d of %d parameter/"
        "gradient/state buffers f32, loss %s, overflow check %d, notes: %s",
        backend, tf_dtype_name(half), f.half_products, f.products, tf_dtype_name(half), f.f32_norms, f.norms,
        f.wide_state, f.state, tf_dtype_name(plan->buffers[plan->loss].dtype), plan->overflow_check, notes);
  if (ok)
    printf("ok   %s autocast %s: %d forward products on %s, %d layer norms on f32, %d master/gradient/state "
           "buffers f32, %d casts per step\n",
           backend, tf_dtype_name(half), f.products, tf_dtype_name(half), f.norms, f.state, f.casts);
}

static void check_inference(const tf_graph *g, tf_dtype half) {
  /* the cuda target (compiled, not run): its half kernels take every product, where the cpu's
   * half slices would not pay for some at this size and half_ops.c puts those between casts */
  tf_plan *plan = compile_gpt(g, TF_TARGET_CUDA, half, false);
  if (!plan)
    return;
  bool outputs_f32 = plan->n_outputs > 0;
  for (int32_t i = 0; i < plan->n_outputs; i++)
    outputs_f32 = outputs_f32 && plan->buffers[plan->outputs[i]].dtype == TF_F32;
  const plan_facts f = facts_of(plan, half);
  CHECK(&counts, outputs_f32 && f.half_products == f.products && f.products > 0,
        "inference autocast %s: outputs f32: %d, %d of %d products on half", tf_dtype_name(half), outputs_f32,
        f.half_products, f.products);
  printf("ok   cuda inference autocast %s: %d products on half, the %d output(s) still f32\n", tf_dtype_name(half),
         f.products, plan->n_outputs);
  tf_plan_destroy(plan);
}

/* STEPS AdamW steps on `backend`; false (nothing recorded) when the backend has no device here. */
static bool train(const tf_plan *plan, const char *backend, double *losses) {
  tf_session_options so = tf_session_options_default();
  so.backend = backend;
  so.seed = 5;
  tf_session *s = NULL;
  tf_status status = tf_session_create(plan, &so, &s);
  if (status && strcmp(backend, "cpu") != 0) {
    printf("SKIP %s: %s\n", backend, tf_status_message(status));
    tf_status_free(status);
    return false;
  }
  if (!status)
    status = gpt_train(s, STEPS, losses);
  CHECK(&counts, status == NULL, "training on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  tf_session_destroy(s);
  return status == NULL;
}

static double relative(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-30); }

int main(void) {
  const char *overrides[] = {"layers=2", "seq=64"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build("gpt", overrides, 2, &g));
  if (!g)
    return tf_test_finish("autocast", &counts);
  const char *backends[] = {"cpu", "vulkan", "cuda"};
  const tf_dtype halves[] = {TF_BF16, TF_F16};
  double cpu_losses[2][STEPS];
  for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
    for (size_t h = 0; h < 2; h++) {
      tf_plan *plan = compile_gpt(g, gpt_target_of(backends[b]), halves[h], true);
      if (plan)
        check_structure(backends[b], plan, halves[h]);
      tf_plan *wide = compile_gpt(g, gpt_target_of(backends[b]), TF_F32, true);
      double losses[STEPS], wide_losses[STEPS];
      if (plan && wide && tf_backend_find(backends[b]) && train(plan, backends[b], losses) &&
          train(wide, backends[b], wide_losses)) {
        double worst = 0, worst_backend = 0;
        for (int i = 0; i < STEPS; i++) {
          worst = fmax(worst, relative(losses[i], wide_losses[i]));
          if (b == 0)
            cpu_losses[h][i] = losses[i];
          else
            worst_backend = fmax(worst_backend, relative(losses[i], cpu_losses[h][i]));
        }
        CHECK(&counts, worst <= 0x1p-5 && worst_backend <= 1e-3,
              "%s autocast %s: losses %.6f .. %.6f, f32 %.6f .. %.6f (worst relative %.3g, allowed 2^-5); "
              "against cpu %.3g (allowed 1e-3)",
              backends[b], tf_dtype_name(halves[h]), losses[0], losses[STEPS - 1], wide_losses[0],
              wide_losses[STEPS - 1], worst, worst_backend);
        printf("ok   %s autocast %s: %d steps, losses %.6f -> %.6f (f32 %.6f -> %.6f, worst relative %.2g%s)\n",
               backends[b], tf_dtype_name(halves[h]), STEPS, losses[0], losses[STEPS - 1], wide_losses[0],
               wide_losses[STEPS - 1], worst, b == 0 ? "" : " ; the cpu's within 1e-3");
      } else if (!tf_backend_find(backends[b])) {
        printf("SKIP %s: not in this build (plans checked, not run)\n", backends[b]);
      }
      tf_plan_destroy(plan);
      tf_plan_destroy(wide);
    }
  }
  check_inference(g, TF_BF16);
  tf_graph_destroy(g);
  return tf_test_finish("autocast", &counts);
}
