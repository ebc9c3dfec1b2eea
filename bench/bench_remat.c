/* The memory / recompute trade-off: peak plan bytes against extra forward FLOPs for recompute none,
 * checkpoints, and auto at 10 budgets between them, on gpt2-small (N=8, T=1024) and asr-256-12-6
 * (N=8, T=750 encoder frames, U=448 tokens), training with AdamW in fp32. Auto must dominate
 * checkpoints: no more recompute at equal or lower memory. Not a test: prints a table. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static tf_plan *compile(const tf_graph *g, const char *bindings, tf_remat_mode mode, int64_t budget, double *ms) {
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.remat = mode;
  o.remat_budget = budget;
  tf_plan *plan = NULL;
  double start = now();
  tf_status status = tf_compile(g, &o, &plan);
  *ms = (now() - start) * 1e3;
  if (status) {
    fprintf(stderr, "%s\n", tf_status_message(status));
    tf_status_free(status);
  }
  return plan;
}

static void row(const char *mode, int64_t budget, const tf_plan *plan, double forward, double ms) {
  double extra = plan->report.flops[TF_PHASE_RECOMPUTE];
  printf("  %-12s %12.2f %12.2f %14.1f %10.1f%% %9.1f\n", mode, budget > 0 ? (double)budget / 1073741824.0 : 0.0,
         (double)tf_plan_total_bytes(plan) / 1073741824.0, extra / 1e9, 100.0 * extra / forward, ms);
}

static void curve(const char *preset, const char *bindings) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(preset, NULL, 0, &g);
  if (status) {
    fprintf(stderr, "%s\n", tf_status_message(status));
    tf_status_free(status);
    return;
  }
  double ms;
  tf_plan *none = compile(g, bindings, TF_REMAT_NONE, 0, &ms);
  double forward = none->report.flops[TF_PHASE_FORWARD];
  printf("%s (%s): forward %.1f GFLOP per micro-batch\n", preset, bindings, forward / 1e9);
  printf("  %-12s %12s %12s %14s %11s %9s\n", "recompute", "budget GiB", "peak GiB", "extra GFLOP", "of forward",
         "compile ms");
  row("none", 0, none, forward, ms);
  tf_plan *all = compile(g, bindings, TF_REMAT_CHECKPOINTS, 0, &ms);
  row("checkpoints", 0, all, forward, ms);
  int64_t high = tf_plan_total_bytes(none), low = tf_plan_total_bytes(all);
  bool dominates = true;
  for (int i = 0; i < 10; i++) {
    int64_t budget = low + (high - low) * i / 9;
    tf_plan *plan = compile(g, bindings, TF_REMAT_AUTO, budget, &ms);
    row("auto", budget, plan, forward, ms);
    /* Dominance: wherever auto's peak is at least checkpoints', it recomputes no more. */
    if (tf_plan_total_bytes(plan) >= low &&
        plan->report.flops[TF_PHASE_RECOMPUTE] > all->report.flops[TF_PHASE_RECOMPUTE] * (1 + 1e-9))
      dominates = false;
    tf_plan_destroy(plan);
  }
  printf("  auto dominates checkpoints: %s\n\n", dominates ? "yes" : "NO");
  tf_plan_destroy(none);
  tf_plan_destroy(all);
  tf_graph_destroy(g);
}

int main(void) {
  curve("gpt2-small", "N=8,T=1024");
  curve("asr-256-12-6", "N=8,T=750,U=448");
  return 0;
}
