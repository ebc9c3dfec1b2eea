/* The rewrites chosen by the smaller plan (TF_CHOICE_SMALLEST, TF_FUSE_LOSS_SMALLEST; issue 48 item 1;
 * compiler/compile.c compile_smallest): for the character gpt cut to 2 layers, the mlp and a gpt with
 * accumulation, the plan compiled with both choices left to SMALLEST has the smallest device total
 * of the four explicit variants (updates after / in the backward pass x head as AUTO leaves it /
 * fused) that are legal, its notes name what was kept and what it saved, updates in the backward
 * pass are never taken where they are illegal (accumulation: no optimizer step in the micro-batch
 * block), an inference plan is the plain one, and every plan verifies (tf_compile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

typedef struct model {
  const char *name, *preset;
  const char *overrides[4];
  const char *bindings;
  int32_t accumulate;
} model;

static const model models[] = {
    {"gpt 2 layers", "gpt", {"layers=2", NULL}, "N=4,T=64", 1},
    {"mlp", "mlp", {NULL}, "N=32", 1},
    {"gpt k=2", "gpt", {"layers=2", NULL}, "N=4,T=64", 2},
};

static tf_graph *build(const model *m) {
  int32_t n = 0;
  while (m->overrides[n])
    n++;
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(m->preset, m->overrides, n, &g);
  CHECK(&counts, !status, "%s: build: %s", m->name, tf_status_message(status));
  tf_status_free(status);
  return g;
}

/* The device total of `g` compiled with these choices, or -1 where the compiler refuses them. */
static int64_t total_of(const tf_graph *g, const model *m, tf_choice updates, tf_fuse_loss fuse, tf_plan **keep) {
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.bindings = m->bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.accumulate = m->accumulate;
  o.update_in_backward = updates;
  o.fuse_loss = fuse;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  int64_t total = status ? -1 : tf_plan_device_total(plan);
  tf_status_free(status);
  if (keep)
    *keep = plan;
  else
    tf_plan_destroy(plan);
  return total;
}

static bool moves_updates(const tf_plan *plan) {
  for (int32_t s = 0; s < plan->micro_steps; s++)
    if (plan->steps[s].phase == TF_PHASE_OPTIMIZER)
      return true;
  return false;
}

static void check_model(const model *m) {
  tf_graph *g = build(m);
  if (!g)
    return;
  int64_t smallest = -1;
  const tf_choice updates[2] = {TF_CHOICE_OFF, TF_CHOICE_ON};
  const tf_fuse_loss fuses[2] = {TF_FUSE_LOSS_AUTO, TF_FUSE_LOSS_ON};
  printf("%s:", m->name);
  for (int u = 0; u < 2; u++)
    for (int f = 0; f < 2; f++) {
      int64_t total = total_of(g, m, updates[u], fuses[f], NULL);
      printf(" %s/%s %lld", u ? "in-backward" : "after", f ? "fused" : "auto", (long long)total);
      if (total >= 0 && (smallest < 0 || total < smallest))
        smallest = total;
    }
  tf_plan *chosen = NULL;
  const int64_t total = total_of(g, m, TF_CHOICE_SMALLEST, TF_FUSE_LOSS_SMALLEST, &chosen);
  printf(" -> smallest %lld\n", (long long)total);
  CHECK(&counts, total == smallest, "%s: SMALLEST gave %lld bytes, the smallest variant %lld", m->name,
        (long long)total, (long long)smallest);
  if (chosen) {
    const char *notes = chosen->report.notes ? chosen->report.notes : "";
    const char *line = strstr(notes, "smallest plan:");
    CHECK(&counts, line != NULL, "%s: the notes say what SMALLEST chose: %s", m->name, notes);
    if (line)
      printf("  %.*s\n", (int)strcspn(line, "\n"), line);
    const bool moved = moves_updates(chosen);
    CHECK(&counts, m->accumulate == 1 || !moved, "%s: updates in the backward pass with accumulation", m->name);
    CHECK(&counts, !line || (strstr(line, "updates in the backward pass (saves") != NULL) == moved,
          "%s: the notes and the plan disagree on where the updates run", m->name);
  }
  tf_plan_destroy(chosen);
  tf_graph_destroy(g);
}

static void check_inference(void) {
  tf_graph *g = build(&models[0]);
  if (!g)
    return;
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.bindings = models[0].bindings;
  o.training = false;
  tf_plan *plain = NULL, *chosen = NULL;
  tf_status status = tf_compile(g, &o, &plain);
  o.update_in_backward = TF_CHOICE_SMALLEST;
  o.fuse_loss = TF_FUSE_LOSS_SMALLEST;
  if (!status)
    status = tf_compile(g, &o, &chosen);
  CHECK(&counts, !status, "inference: %s", tf_status_message(status));
  if (!status)
    CHECK(&counts, tf_plan_device_total(plain) == tf_plan_device_total(chosen) && plain->n_steps == chosen->n_steps,
          "inference: SMALLEST changed the plan (%lld -> %lld bytes)", (long long)tf_plan_device_total(plain),
          (long long)tf_plan_device_total(chosen));
  tf_status_free(status);
  tf_plan_destroy(plain);
  tf_plan_destroy(chosen);
  tf_graph_destroy(g);
}

int main(void) {
  for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
    check_model(&models[i]);
  check_inference();
  return tf_test_finish("smallest", &counts);
}
