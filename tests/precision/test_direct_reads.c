/* A --precision plan's backward reading the activations it stored in half directly
 * (compiler/precision.c, read_stored_directly): attention's gradient takes bf16/f16 q, k, v beside
 * an f32 dy and writes f32 gradients (CPU: half slices; Vulkan: attention.comp's INPUT_F16/INPUT_BF16
 * variants; CUDA: the attention kernels' half-input instantiations), so the plan has no f32 copies of
 * them. The kernel widens q, k, v exactly, as the cast back does, so training must give the same
 * bits as the plan that casts them back (compiled with the target's half kernels off, which turns the
 * direct reads off and nothing else in an f32 graph).
 *
 * For the 2-layer zoo gpt (N=2, T=64, AdamW, clipping), under bf16 and f16, without recompute and with
 * --remat checkpoints (q, k, v then recomputed and stored), on every backend present
 * (cpu always, vulkan when the build has it and a device opens, cuda when a GPU is there, else SKIP):
 *   - the direct plan's attention gradients (one per layer) read half q, k, v and write f32; the other
 *     plan's read f32; the direct plan has 3 casts fewer per layer (q, k, v are slices: 3 stored
 *     tensors), and its notes say how many steps read directly;
 *   - 4 AdamW steps: the same losses and every parameter the same, bit for bit.
 * Breaking the half-input widening on purpose (bf16 read as f16 in common.glsl's IN_TO_F32) fails the
 * Vulkan rows. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "check.h"
#include "gpt_steps.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "zoo_plans.h"

static tf_test_counts counts;

#define STEPS 4

/* The gpt compiled for `backend`'s target under `precision`, with its half kernels (direct reads) or
 * without; NULL (failure recorded) on error. */
static tf_plan *compile_gpt(const tf_graph *g, const char *backend, tf_precision precision, tf_remat_mode remat,
                            bool direct) {
  tf_compile_options o = tf_test_adamw_options(gpt_target_of(backend), "N=2");
  o.remat = remat;
  o.set_precision = true;
  o.precision = precision;
  if (!direct)
    memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "compiling gpt for %s (%s): %s", backend, direct ? "direct" : "casts",
        tf_status_message(status));
  tf_status_free(status);
  return plan;
}

/* The attention gradients of `plan` reading q, k, v of `dtype` (with f32 dy and gradients when
 * dtype is half), and its casts. */
typedef struct plan_counts {
  int32_t attention_grads, casts;
} plan_counts;

static plan_counts count(const tf_plan *plan, tf_dtype dtype) {
  plan_counts c = {0, 0};
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    c.casts += step->op == TF_OP_CAST;
    if (step->op != TF_OP_ATTENTION_GRAD)
      continue;
    bool as_said = plan->buffers[step->inputs[3]].dtype == TF_F32;
    for (int32_t k = 0; k < 3; k++)
      as_said = as_said && plan->buffers[step->inputs[k]].dtype == dtype;
    for (int32_t k = 0; k < step->n_outputs; k++)
      as_said = as_said && plan->buffers[step->outputs[k]].dtype == TF_F32;
    c.attention_grads += as_said;
  }
  return c;
}

/* What STEPS training steps give: the losses and every parameter, concatenated. */
typedef struct outcome {
  double losses[STEPS];
  unsigned char *params;
  int64_t bytes;
  bool ran, skipped;
} outcome;

static tf_status read_params(tf_session *s, const tf_plan *plan, outcome *out) {
  for (int32_t b = 0; b < plan->n_buffers; b++)
    if (plan->buffers[b].role == TF_ROLE_PARAMETER)
      out->bytes += plan->buffers[b].bytes;
  out->params = malloc((size_t)out->bytes);
  if (!out->params)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "out of memory");
  int64_t at = 0;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    const tf_plan_buffer *buffer = &plan->buffers[b];
    if (buffer->role != TF_ROLE_PARAMETER)
      continue;
    TF_RETURN_IF_ERROR(tf_session_read(s, buffer->name, out->params + at, buffer->bytes));
    at += buffer->bytes;
  }
  return NULL;
}

static void train(const tf_plan *plan, const char *backend, outcome *out) {
  memset(out, 0, sizeof(*out));
  tf_session_options so = tf_session_options_default();
  so.backend = backend;
  so.seed = 5;
  tf_session *s = NULL;
  tf_status status = tf_session_create(plan, &so, &s);
  if (status && strcmp(backend, "cuda") == 0) {
    printf("SKIP cuda: %s\n", tf_status_message(status));
    out->skipped = true;
    tf_status_free(status);
    return;
  }
  if (!status)
    status = gpt_train(s, STEPS, out->losses);
  if (!status)
    status = read_params(s, plan, out);
  CHECK(&counts, status == NULL, "training on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  tf_session_destroy(s);
  out->ran = status == NULL;
}

/* The plans' structure, then both trained: the same losses and parameters, bit for bit. */
static void compare(const char *backend, tf_precision precision, tf_remat_mode remat, tf_plan *plans[2]) {
  const tf_dtype half = precision == TF_PRECISION_F16 ? TF_F16 : TF_BF16;
  char name[64];
  snprintf(name, sizeof(name), "%s%s", tf_dtype_name(half), remat == TF_REMAT_CHECKPOINTS ? " checkpoints" : "");
  const plan_counts direct = count(plans[0], half), casts = count(plans[1], half), casts_f32 = count(plans[1], TF_F32);
  const char *notes = plans[0]->report.notes ? plans[0]->report.notes : "";
  if (remat == TF_REMAT_CHECKPOINTS && strstr(notes, " and 0 recomputed ones it reads")) {
    /* the compiler kept the variant whose recomputed q, k, v stay f32 (smaller on the cuda target
     * for this small model: each cast step costs its CUDA-graph node): nothing stored to read */
    CHECK(&counts, direct.attention_grads == 0, "%s %s: q, k, v recomputed in f32, yet %d direct reads", backend, name,
          direct.attention_grads);
    printf("ok   %s %s: q, k, v recomputed in f32 (the smaller plan here): nothing stored in half to read\n", backend,
           name);
    return;
  }
  CHECK(&counts, direct.attention_grads == 2 && casts.attention_grads == 0 && casts_f32.attention_grads == 2,
        "%s %s: attention gradients on %s q, k, v: %d direct, %d with casts (%d on f32 copies)", backend, name,
        tf_dtype_name(half), direct.attention_grads, casts.attention_grads, casts_f32.attention_grads);
  CHECK(&counts, casts.casts - direct.casts == 6, "%s %s: %d casts direct, %d with casts (expected 6 fewer)", backend,
        name, direct.casts, casts.casts);
  CHECK(&counts, strstr(notes, "2 backward steps read the stored half tensors directly") != NULL,
        "%s %s: the notes do not say so: %s", backend, name, notes);
  outcome runs[2];
  train(plans[0], backend, &runs[0]);
  train(plans[1], backend, &runs[1]);
  if (runs[0].ran && runs[1].ran) {
    const bool losses = memcmp(runs[0].losses, runs[1].losses, sizeof(runs[0].losses)) == 0;
    CHECK(&counts, losses, "%s %s: losses %.9g %.9g ... direct, %.9g %.9g ... with casts", backend, name,
          runs[0].losses[0], runs[0].losses[1], runs[1].losses[0], runs[1].losses[1]);
    int64_t differ = 0, n = runs[0].bytes / 4;
    for (int64_t i = 0; runs[0].bytes == runs[1].bytes && i < n; i++)
      differ += memcmp(runs[0].params + 4 * i, runs[1].params + 4 * i, 4) != 0;
    CHECK(&counts, runs[0].bytes == runs[1].bytes && differ == 0, "%s %s: %" PRId64 " of %" PRId64 " weights differ",
          backend, name, differ, n);
    printf("%s   %s %s: %d attention gradients read %s q, k, v (%d casts, %d with the copies); %d steps, losses %.6f "
           "-> %.6f, %" PRId64 " weights: bit for bit the plan with the copies\n",
           losses && differ == 0 ? "ok" : "FAIL", backend, name, direct.attention_grads, tf_dtype_name(half),
           direct.casts, casts.casts, STEPS, runs[0].losses[0], runs[0].losses[STEPS - 1], n);
  }
  free(runs[0].params);
  free(runs[1].params);
}

int main(void) {
  const char *overrides[] = {"layers=2", "seq=64"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build("gpt", overrides, 2, &g));
  if (!g)
    return tf_test_finish("direct reads", &counts);
  const char *backends[] = {"cpu", "vulkan", "cuda"};
  const tf_precision precisions[] = {TF_PRECISION_BF16, TF_PRECISION_F16};
  for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
    if (!tf_backend_find(backends[b])) {
      printf("SKIP %s: not in this build\n", backends[b]);
      continue;
    }
    for (size_t p = 0; p < sizeof(precisions) / sizeof(precisions[0]); p++)
      for (int remat = TF_REMAT_NONE; remat <= TF_REMAT_CHECKPOINTS; remat++) {
        tf_plan *plans[2] = {compile_gpt(g, backends[b], precisions[p], (tf_remat_mode)remat, true),
                             compile_gpt(g, backends[b], precisions[p], (tf_remat_mode)remat, false)};
        if (plans[0] && plans[1])
          compare(backends[b], precisions[p], (tf_remat_mode)remat, plans);
        tf_plan_destroy(plans[0]);
        tf_plan_destroy(plans[1]);
      }
  }
  tf_graph_destroy(g);
  return tf_test_finish("direct reads", &counts);
}
