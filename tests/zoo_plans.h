/* Zoo models as the tests use them: the usual training options, a preset's graph, compiled to a
 * plan, a session on it; each records a failure in `counts` (naming what failed) and returns NULL
 * instead of stopping the test. */
#ifndef TIGHTFIT_TESTS_ZOO_PLANS_H
#define TIGHTFIT_TESTS_ZOO_PLANS_H

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

/* The options most training tests compile with: `bindings`, AdamW at learning rate 1e-3 with weight
 * decay 0.01, gradients clipped at norm 1. */
static inline tf_compile_options tf_test_adamw_options(tf_target_kind target, const char *bindings) {
  tf_compile_options o = tf_compile_options_default(target);
  o.bindings = bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 1e-3;
  o.weight_decay = 0.01;
  o.clip_norm = 1.0;
  return o;
}

/* Preset `preset` with n overrides (KNOB=V); the caller destroys it. */
static inline tf_graph *tf_test_zoo_graph(tf_test_counts *counts, const char *preset, const char *const *overrides,
                                          int32_t n) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n, &g);
  CHECK(counts, status == NULL, "%s: %s", preset, tf_status_message(status));
  tf_status_free(status);
  return g;
}

/* Preset `preset` with n overrides compiled with `options` (`label` names it in a failure); the
 * caller destroys the plan. */
static inline tf_plan *tf_test_zoo_plan(tf_test_counts *counts, const char *label, const char *preset,
                                        const char *const *overrides, int32_t n, const tf_compile_options *options) {
  tf_graph *g = NULL;
  tf_plan *plan = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n, &g);
  if (!status)
    status = tf_compile(g, options, &plan);
  CHECK(counts, status == NULL, "%s: %s", label, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

/* A session on `backend` for `plan`, initialised from `seed`; the caller destroys it. */
static inline tf_session *tf_test_session(tf_test_counts *counts, const tf_plan *plan, const char *backend,
                                          uint64_t seed) {
  tf_session_options o = tf_session_options_default();
  o.backend = backend;
  o.seed = seed;
  tf_session *session = NULL;
  tf_status status = tf_session_create(plan, &o, &session);
  CHECK(counts, status == NULL, "session on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  return session;
}

#endif
