/* Updates in the backward pass (compile option update_in_backward, compiler/schedule_updates.c),
 * on every backend present (cpu always, vulkan on lavapipe when the build has it, cuda when a GPU
 * is there; a backend without a device prints SKIP for its part):
 *   (a) the same weights: for each case below, a plan with its updates in the backward pass and
 *       the plan without, trained STEPS steps on the same data from the same seed, hold parameters
 *       and optimizer state equal bit for bit after every step. Cases: the character gpt (tied
 *       embedding) with AdamW and with SGD + momentum, the mlp, a gpt2-small cut to 2 layers with
 *       recompute (checkpoints: recompute reads the weights again) and bf16 storage;
 *   (b) the plan says so and holds less: optimizer steps inside the micro-batch block, a smaller
 *       gradients region, and less in the arena and the gradients region together;
 *   (c) refusals, each with its reason: accumulation, clipping, f16 storage (loss scaling);
 *   (d) the budget search uses it for one micro-batch per step only;
 *   (e) the verifier rejects an update inside the micro-batch block of a plan of two micro-batches.
 *   (f) the verifier, which re-checks the order of every compiled plan, rejects a compiled plan
 *       with an update moved, on purpose, before its parameter's last reader, and one with the tied
 *       embedding's update moved before the last part added to its gradient, each with its message. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "check.h"
#include "core/ops.h"
#include "session_compare.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

#define STEPS 4

typedef struct test_case {
  const char *name, *preset;
  const char *overrides[7];
  const char *bindings;
  tf_optimizer optimizer;
  tf_remat_mode remat;
  tf_precision precision;
} test_case;

static const test_case cases[] = {
    {"gpt adamw",
     "gpt",
     {"layers=2", "d_model=32", "heads=2", NULL},
     "N=2,T=16",
     TF_OPTIMIZER_ADAMW,
     TF_REMAT_NONE,
     TF_PRECISION_F32},
    {"gpt sgd",
     "gpt",
     {"layers=2", "d_model=32", "heads=2", NULL},
     "N=2,T=16",
     TF_OPTIMIZER_SGD,
     TF_REMAT_NONE,
     TF_PRECISION_F32},
    {"mlp adamw", "mlp", {NULL}, "N=8", TF_OPTIMIZER_ADAMW, TF_REMAT_NONE, TF_PRECISION_F32},
    {"gpt2-small checkpoints bf16",
     "gpt2-small",
     {"layers=2", "d_model=64", "heads=2", "vocab=300", "ctx=64", "seq=16", NULL},
     "N=2,T=16",
     TF_OPTIMIZER_ADAMW,
     TF_REMAT_CHECKPOINTS,
     TF_PRECISION_BF16},
};

static tf_target_kind target_of(const char *backend) {
  return strcmp(backend, "vulkan") == 0 ? TF_TARGET_VULKAN
         : strcmp(backend, "cuda") == 0 ? TF_TARGET_CUDA
                                        : TF_TARGET_CPU;
}

static tf_graph *build(const test_case *c) {
  int32_t n = 0;
  while (c->overrides[n])
    n++;
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(c->preset, c->overrides, n, &g);
  CHECK(&counts, status == NULL, "%s: build: %s", c->name, tf_status_message(status));
  tf_status_free(status);
  return g;
}

static tf_compile_options options_of(const test_case *c, tf_target_kind target, bool in_backward) {
  tf_compile_options o = tf_compile_options_default(target);
  o.bindings = c->bindings;
  o.optimizer = c->optimizer;
  o.learning_rate = 1e-2;
  o.accumulate = 1;
  o.clip_norm = 0;
  o.remat = c->remat;
  o.set_precision = true;
  o.precision = c->precision;
  o.update_in_backward = in_backward;
  return o;
}

/* The case compiled for `target`, with or without updates in the backward pass; NULL on failure. */
static tf_plan *compile_case(const test_case *c, tf_target_kind target, bool in_backward) {
  tf_graph *g = build(c);
  if (!g)
    return NULL;
  tf_compile_options o = options_of(c, target, in_backward);
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "%s%s: compile: %s", c->name, in_backward ? " (update in backward)" : "",
        tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

/* A session, or NULL: a failure, except that a backend that cannot open a device is a SKIP. */
static tf_session *open_session(const tf_plan *plan, const char *backend, bool *skipped) {
  tf_session_options o = tf_session_options_default();
  o.backend = backend;
  o.seed = 5;
  tf_session *session = NULL;
  tf_status status = tf_session_create(plan, &o, &session);
  *skipped = status && strcmp(backend, "cpu") != 0;
  if (*skipped)
    printf("SKIP %s: %s\n", backend, tf_status_message(status));
  else
    CHECK(&counts, status == NULL, "session on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  return session;
}

static int64_t arena_and_gradients(const tf_plan *plan) {
  return plan->region_bytes[TF_REGION_ARENA] + plan->region_bytes[TF_REGION_GRADIENTS];
}

/* (b) */
static void check_plans(const test_case *c, const tf_plan *plain, const tf_plan *moved) {
  CHECK(&counts, !tf_plan_updates_in_backward(plain) && tf_plan_updates_in_backward(moved),
        "%s: updates in the micro-batch block: plain %d, moved %d", c->name, tf_plan_updates_in_backward(plain),
        tf_plan_updates_in_backward(moved));
  CHECK(&counts, moved->micro_steps == moved->n_steps && moved->n_steps == plain->n_steps,
        "%s: %d of %d steps in the micro-batch block (the plain plan has %d steps)", c->name, moved->micro_steps,
        moved->n_steps, plain->n_steps);
  const int64_t g0 = plain->region_bytes[TF_REGION_GRADIENTS], g1 = moved->region_bytes[TF_REGION_GRADIENTS];
  const int64_t s0 = arena_and_gradients(plain), s1 = arena_and_gradients(moved);
  CHECK(&counts, g1 < g0 && s1 < s0,
        "%s: gradients region %" PRId64 " -> %" PRId64 " bytes, arena + gradients %" PRId64 " -> %" PRId64, c->name, g0,
        g1, s0, s1);
  printf("%-4s %-28s (b) gradients region %" PRId64 " -> %" PRId64 " bytes; arena + gradients %" PRId64 " -> %" PRId64
         " (%.1f%%)\n",
         g1 < g0 && s1 < s0 ? "ok" : "FAIL", c->name, g0, g1, s0, s1, 100.0 * (double)(s1 - s0) / (double)s0);
}

/* (a) on one backend */
static void same_weights(const test_case *c, const char *backend) {
  tf_plan *plain = compile_case(c, target_of(backend), false), *moved = compile_case(c, target_of(backend), true);
  bool skipped[2] = {false, false};
  tf_session *s0 = plain ? open_session(plain, backend, &skipped[0]) : NULL;
  tf_session *s1 = moved && s0 ? open_session(moved, backend, &skipped[1]) : NULL;
  if (plain && moved && strcmp(backend, "cpu") == 0)
    check_plans(c, plain, moved);
  int64_t differ = 0;
  double loss0 = NAN, loss1 = NAN;
  for (int64_t step = 0; step < STEPS && s0 && s1 && differ == 0; step++) {
    CHECK_OK(&counts, tf_test_train_step(s0, plain, step, &loss0));
    CHECK_OK(&counts, tf_test_train_step(s1, moved, step, &loss1));
    differ = tf_test_state_difference(&counts, s0, plain, s1, moved);
  }
  if (s0 && s1) {
    CHECK(&counts, differ == 0 && isfinite(loss0) && memcmp(&loss0, &loss1, sizeof(double)) == 0,
          "%s on %s: %" PRId64 " bytes of parameters and optimizer state differ (-1: layouts differ); losses %.9g "
          "and %.9g",
          c->name, backend, differ, loss0, loss1);
    printf("%-4s %-28s (a) %-6s %d steps: parameters and optimizer state %s, last loss %.6f\n",
           differ == 0 ? "ok" : "FAIL", c->name, backend, STEPS, differ == 0 ? "equal bit for bit" : "DIFFER", loss1);
  }
  tf_session_destroy(s0);
  tf_session_destroy(s1);
  tf_plan_destroy(plain);
  tf_plan_destroy(moved);
}

/* (c) */
static void refusal(const char *what, int32_t accumulate, double clip, tf_precision precision, const char *reason) {
  tf_graph *g = build(&cases[2]);
  if (!g)
    return;
  tf_compile_options o = options_of(&cases[2], TF_TARGET_CPU, true);
  o.accumulate = accumulate;
  o.clip_norm = clip;
  o.precision = precision;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  const char *message = tf_status_message(status);
  const bool ok = status && tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && strstr(message, reason) &&
                  strstr(message, "--update-in-backward");
  CHECK(&counts, ok, "%s: expected a refusal naming '%s', got: %s", what, reason, status ? message : "a plan");
  printf("%-4s (c) %s: %s\n", ok ? "ok" : "FAIL", what, status ? message : "(compiled)");
  tf_status_free(status);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* (d) */
static void budget_search(void) {
  tf_graph *g = build(&cases[0]);
  if (!g)
    return;
  tf_budget_options o;
  memset(&o, 0, sizeof(o));
  o.base = options_of(&cases[0], TF_TARGET_CPU, true);
  o.base.bindings = "T=16";
  o.budget = (int64_t)1 << 40;
  o.global_batch = 4;
  o.allow_remat = true;
  tf_plan *plan = NULL;
  tf_budget_result result;
  tf_status status = tf_compile_budget(g, &o, &plan, &result);
  CHECK(&counts, status == NULL, "budget search: %s", tf_status_message(status));
  if (!status) {
    /* One line per candidate: "N=4 x k=1, ..., updates in backward: ..." and "N=2 x k=2, ...: ...". */
    const char *k1 = strstr(result.summary, "x k=1,"), *k2 = strstr(result.summary, "x k=2,");
    const char *k1_end = k1 ? strchr(k1, '\n') : NULL, *k2_end = k2 ? strchr(k2, '\n') : NULL;
    const char *mark = "updates in backward";
    const char *in_k1 = k1 ? strstr(k1, mark) : NULL, *in_k2 = k2 ? strstr(k2, mark) : NULL;
    const bool ok = k1_end && k2_end && in_k1 && in_k1 < k1_end && (!in_k2 || in_k2 > k2_end);
    CHECK(&counts, ok, "budget search: k = 1 should update in backward and k = 2 not:\n%s", result.summary);
    printf("%-4s (d) budget search: updates in backward for k = 1 only\n", ok ? "ok" : "FAIL");
  }
  tf_status_free(status);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* (e) */
static void verifier_refuses_two_micro_batches(void) {
  tf_plan *plan = compile_case(&cases[2], TF_TARGET_CPU, true);
  if (!plan)
    return;
  plan->accumulate = 2;
  plan->global_batch = 2 * plan->micro_batch;
  tf_status status = tf_plan_verify(plan);
  const char *message = tf_status_message(status);
  const bool ok = status && strstr(message, "is an optimizer step inside the micro-batch block");
  CHECK(&counts, ok, "verify of a k = 2 plan with updates in its micro-batch block: %s", status ? message : "passed");
  printf("%-4s (e) verifier: %s\n", ok ? "ok" : "FAIL", status ? message : "passed");
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* Moves plan step `from` to place `to` (< from), the steps between one later, every buffer's live
 * interval following its steps, as if the compiler had scheduled it there. */
static void move_step(tf_plan *plan, int32_t from, int32_t to) {
  tf_plan_step moved = plan->steps[from];
  memmove(&plan->steps[to + 1], &plan->steps[to], sizeof(tf_plan_step) * (size_t)(from - to));
  plan->steps[to] = moved;
  for (int32_t b = 0; b < plan->n_buffers; b++) {
    int32_t *ends[2] = {&plan->buffers[b].first_step, &plan->buffers[b].last_step};
    for (int e = 0; e < 2; e++)
      *ends[e] = *ends[e] == from ? to : *ends[e] >= to && *ends[e] < from ? *ends[e] + 1 : *ends[e];
  }
}

/* Whether `step` reads `buffer` (in_place_only: adds to it in place). */
static bool step_reads(const tf_plan_step *step, int32_t buffer, bool in_place_only) {
  const tf_op_info *info = tf_op_info_get(step->op);
  for (int32_t i = 0; i < step->n_inputs; i++)
    if (step->inputs[i] == buffer &&
        ((info->in_place >> i) & 1u || (!in_place_only && !((info->shape_only >> i) & 1u))))
      return true;
  return false;
}

static bool step_writes(const tf_plan_step *step, int32_t buffer) {
  for (int32_t k = 0; k < step->n_outputs; k++)
    if (step->outputs[k] == buffer)
      return true;
  return step_reads(step, buffer, true);
}

/* (f): breakage 1 moves an update whose gradient is complete before its parameter's last reader
 * (a weight read for the input gradient after its own gradient) to just before that reader;
 * breakage 2 moves one whose gradient gets a part after its parameter's last reader (the tied
 * embedding) to just before that part. */
static void verifier_refuses_moved_update(int breakage, const char *expected) {
  tf_plan *plan = compile_case(&cases[0], TF_TARGET_CPU, true);
  if (!plan)
    return;
  int32_t from = -1, to = -1;
  for (int32_t u = 0; u < plan->micro_steps && to < 0; u++) {
    const tf_plan_step *update = &plan->steps[u];
    if (update->phase != TF_PHASE_OPTIMIZER || update->op == TF_OP_ZERO)
      continue;
    const int32_t weight = update->inputs[0], gradient = update->inputs[1];
    int32_t last_reader = -1, last_write = -1;
    for (int32_t s = 0; s < u; s++) {
      last_reader = step_reads(&plan->steps[s], weight, false) ? s : last_reader;
      last_write = step_writes(&plan->steps[s], gradient) ? s : last_write;
    }
    const bool fits = breakage == 1 ? last_write < last_reader
                                    : last_reader < last_write && plan->buffers[gradient].region == TF_REGION_GRADIENTS;
    if (fits && last_reader >= 0 && last_write >= 0) {
      from = u;
      to = breakage == 1 ? last_reader : last_write;
    }
  }
  CHECK(&counts, to >= 0, "(f) breakage %d: no update in the plan to move", breakage);
  if (to >= 0) {
    move_step(plan, from, to);
    tf_status status = tf_plan_verify(plan);
    const char *message = tf_status_message(status);
    const bool ok = status && strstr(message, expected);
    CHECK(&counts, ok, "verify of the update moved from step %d to %d: %s", from, to, status ? message : "passed");
    printf("%-4s (f) verifier, update moved from step %d to %d: %s\n", ok ? "ok" : "FAIL", from, to,
           status ? message : "passed");
    tf_status_free(status);
  }
  tf_plan_destroy(plan);
}

int main(void) {
  static const char *const backends[] = {"cpu", "vulkan", "cuda"};
  for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
    if (!tf_backend_find(backends[b])) {
      printf("SKIP %s: not in this build\n", backends[b]);
      continue;
    }
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
      same_weights(&cases[c], backends[b]);
  }
  refusal("accumulate 2", 2, 0, TF_PRECISION_F32, "accumulates micro-batches");
  refusal("clip 1.0", 1, 1.0, TF_PRECISION_F32, "clips the global gradient norm");
  refusal("fp16 storage", 1, 0, TF_PRECISION_F16, "stores f16 activations");
  budget_search();
  verifier_refuses_two_micro_batches();
  verifier_refuses_moved_update(1, "(an update moved before a reader)");
  verifier_refuses_moved_update(2, "(an update moved before its gradient is complete)");
  return tf_test_finish("update_in_backward", &counts);
}
