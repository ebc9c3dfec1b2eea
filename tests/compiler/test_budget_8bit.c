/* The budget search's fallback on 8-bit AdamW state (compiler/budget.c, issue 48 item 4): where
 * nothing fits with AdamW, allow_optimizer_8bit searches again with TF_OPTIMIZER_ADAMW8BIT and keeps
 * the plan that fits; a budget AdamW fits keeps AdamW; LoRA, when also allowed, starts from the 8-bit
 * state; SGD is refused. Every budget is set between device totals of plans compiled here with
 * tf_compile, not numbers the search reports. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

enum { GLOBAL_BATCH = 2, LORA_RANK = 4 };

/* The zoo's character gpt (4 layers, d 128), its own AdamW given a learning rate and epsilon that are
 * not the defaults, so that the 8-bit plan can be seen to keep them. */
static tf_graph *gpt(void) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build("gpt", NULL, 0, &g);
  CHECK(&counts, status == NULL, "gpt: %s", tf_status_message(status));
  tf_status_free(status);
  if (!g)
    return NULL;
  tf_training_config training = *tf_graph_training(g);
  CHECK(&counts, training.optimizer == TF_OPTIMIZER_ADAMW, "the zoo gpt trains with optimizer %d, not AdamW",
        (int)training.optimizer);
  training.learning_rate = 1e-3;
  training.epsilon = 1e-6;
  tf_graph_set_training(g, &training);
  return g;
}

/* The smallest plan the search can reach (micro-batch 1, GLOBAL_BATCH accumulated, f32, no
 * recompute) compiled with `optimizer`; the caller destroys it. */
static tf_plan *smallest_with(const tf_graph *g, tf_optimizer optimizer) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = "N=1";
  options.accumulate = GLOBAL_BATCH;
  options.optimizer = optimizer;
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  return plan;
}

static tf_budget_options budget_options(tf_optimizer optimizer, int64_t budget, bool allow_8bit) {
  tf_budget_options o = {.base = tf_compile_options_default(TF_TARGET_CPU),
                         .budget = budget,
                         .global_batch = GLOBAL_BATCH,
                         .allow_optimizer_8bit = allow_8bit};
  o.base.optimizer = optimizer;
  return o;
}

static tf_plan *search(const tf_graph *g, const tf_budget_options *o, tf_budget_result *r) {
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile_budget(g, o, &plan, r));
  return plan;
}

static bool has(const char *text, const char *part) { return text && strstr(text, part) != NULL; }

static int64_t state_of(const tf_plan *plan) { return plan ? plan->region_bytes[TF_REGION_OPTIMIZER_STATE] : -1; }

/* A budget between the smallest 8-bit plan and the smallest AdamW plan: nothing fits without the
 * flag; with it the 8-bit plan fits, its optimizer state about 2.031/8 of AdamW's. The graph's own
 * AdamW (base optimizer NONE) is the one that falls back, with its learning rate and epsilon. */
static void fits_only_with_8bit_state(const tf_graph *g, const tf_plan *adamw, const tf_plan *eight) {
  const int64_t budget = (tf_plan_device_total(adamw) + tf_plan_device_total(eight)) / 2;
  tf_budget_result r;
  tf_budget_options o = budget_options(TF_OPTIMIZER_NONE, budget, false);
  tf_plan *plan = search(g, &o, &r);
  CHECK(&counts,
        plan && !r.fits && r.optimizer == TF_OPTIMIZER_ADAMW && r.total_bytes == tf_plan_device_total(adamw) &&
            !has(r.summary, "8-bit"),
        "budget %" PRId64 " without the flag: fits %d, optimizer %d, smallest %" PRId64 " (AdamW's: %" PRId64 ")",
        budget, r.fits, (int)r.optimizer, r.total_bytes, tf_plan_device_total(adamw));
  const int32_t tried_alone = r.tried;
  tf_plan_destroy(plan);

  o.allow_optimizer_8bit = true;
  plan = search(g, &o, &r);
  const double ratio = (double)state_of(plan) / (double)state_of(adamw);
  CHECK(&counts,
        plan && r.fits && r.optimizer == TF_OPTIMIZER_ADAMW8BIT &&
            plan->training_config.optimizer == TF_OPTIMIZER_ADAMW8BIT && r.total_bytes == tf_plan_device_total(plan) &&
            r.total_bytes <= budget && r.tried > tried_alone && r.lora_rank == 0,
        "budget %" PRId64 " with the flag: fits %d, optimizer %d, total %" PRId64 ", %d compiled:\n%s", budget, r.fits,
        (int)r.optimizer, r.total_bytes, r.tried, r.summary);
  CHECK(&counts, state_of(plan) == state_of(eight) && fabs(ratio - 2.031 / 8) < 0.01 * (2.031 / 8),
        "optimizer state %" PRId64 " against AdamW's %" PRId64 ": ratio %.5f, expected about %.5f (2.031/8)",
        state_of(plan), state_of(adamw), ratio, 2.031 / 8);
  CHECK(&counts,
        plan && plan->training_config.learning_rate == 1e-3 && plan->training_config.epsilon == 1e-6 &&
            plan->training_config.beta1 == 0.9 && plan->training_config.beta2 == 0.999,
        "the 8-bit plan trains with lr %g, eps %g, betas %g/%g (the graph's AdamW: lr 1e-3, eps 1e-6)",
        plan ? plan->training_config.learning_rate : 0, plan ? plan->training_config.epsilon : 0,
        plan ? plan->training_config.beta1 : 0, plan ? plan->training_config.beta2 : 0);
  char line[256];
  snprintf(line, sizeof(line),
           "nothing fits with AdamW's f32 moments: with 8-bit AdamW state (--allow-optimizer adamw8bit) it fits:\n"
           "  8-bit state saved %.2f MiB of optimizer state at the smallest plans (%.2f MiB against %.2f MiB;",
           (double)(state_of(adamw) - state_of(eight)) / 1048576.0, (double)state_of(eight) / 1048576.0,
           (double)state_of(adamw) / 1048576.0);
  CHECK(&counts, has(r.summary, line), "the summary has no line\n%s\nit says:\n%s", line, r.summary);
  printf("gpt, global batch %d, cpu: smallest AdamW plan %" PRId64 " bytes, smallest 8-bit plan %" PRId64
         "; budget %" PRId64 ": N=%" PRId64 " x k=%d with 8-bit state, %" PRId64 " bytes; optimizer state %" PRId64
         " against %" PRId64 " (ratio %.5f; 2.031/8 = %.5f)\nsummary:\n%s",
         GLOBAL_BATCH, tf_plan_device_total(adamw), tf_plan_device_total(eight), budget, r.micro_batch, r.accumulate,
         r.total_bytes, state_of(plan), state_of(adamw), ratio, 2.031 / 8, r.summary);
  tf_plan_destroy(plan);
}

/* A budget the AdamW plan fits keeps AdamW: no second search. */
static void adamw_kept_where_it_fits(const tf_graph *g, const tf_plan *adamw) {
  tf_budget_options o = budget_options(TF_OPTIMIZER_ADAMW, tf_plan_device_total(adamw), true);
  tf_budget_result r;
  tf_plan *plan = search(g, &o, &r);
  CHECK(&counts,
        plan && r.fits && r.optimizer == TF_OPTIMIZER_ADAMW && plan->training_config.optimizer == TF_OPTIMIZER_ADAMW &&
            state_of(plan) == state_of(adamw) && !has(r.summary, "8-bit"),
        "budget = the AdamW plan: fits %d, optimizer %d, optimizer state %" PRId64 " (AdamW's %" PRId64 "):\n%s",
        r.fits, (int)r.optimizer, state_of(plan), state_of(adamw), r.summary);
  tf_plan_destroy(plan);
}

/* One byte under the smallest 8-bit plan with LoRA allowed too: the 8-bit search fits nowhere, LoRA
 * starts from it, and the chosen plan has both. */
static void lora_on_top_of_8bit(const tf_graph *g, const tf_plan *eight) {
  tf_budget_options o = budget_options(TF_OPTIMIZER_ADAMW, tf_plan_device_total(eight) - 1, true);
  o.allow_lora_rank = LORA_RANK;
  tf_budget_result r;
  tf_plan *plan = search(g, &o, &r);
  CHECK(&counts,
        plan && r.fits && r.lora_rank == LORA_RANK && r.optimizer == TF_OPTIMIZER_ADAMW8BIT &&
            plan->training_config.optimizer == TF_OPTIMIZER_ADAMW8BIT &&
            has(r.summary, "with 8-bit AdamW state (--allow-optimizer adamw8bit) it does not fit either\n") &&
            has(r.summary, "training every parameter fits nowhere: with LoRA rank 4 (--allow-lora) it fits:\n"),
        "one byte under the 8-bit plan, LoRA rank %d allowed: fits %d, LoRA rank %d, optimizer %d:\n%s", LORA_RANK,
        r.fits, r.lora_rank, (int)r.optimizer, r.summary);
  printf("one byte under the 8-bit plan: LoRA rank %d on 8-bit state fits in %" PRId64 " bytes (%d compiled)\n",
         r.lora_rank, r.total_bytes, r.tried);
  tf_plan_destroy(plan);
}

/* SGD keeps no Adam moments: the flag is refused, not ignored. */
static void sgd_refused(const tf_graph *g) {
  tf_budget_options o = budget_options(TF_OPTIMIZER_SGD, (int64_t)1 << 40, true);
  tf_budget_result r;
  tf_plan *plan = NULL;
  tf_status status = tf_compile_budget(g, &o, &plan, &r);
  CHECK(&counts,
        status && tf_status_code(status) == TF_ERR_INVALID_ARGUMENT && plan == NULL &&
            has(tf_status_message(status), "graph 'gpt' trains with SGD, which keeps no Adam moments"),
        "allow_optimizer_8bit with SGD: %s", status ? tf_status_message(status) : "accepted");
  printf("with SGD: %s\n", tf_status_message(status));
  tf_status_free(status);
  tf_plan_destroy(plan);
}

int main(void) {
  tf_graph *g = gpt();
  if (g) {
    tf_plan *adamw = smallest_with(g, TF_OPTIMIZER_ADAMW), *eight = smallest_with(g, TF_OPTIMIZER_ADAMW8BIT);
    if (adamw && eight) {
      CHECK(&counts, tf_plan_device_total(eight) < tf_plan_device_total(adamw),
            "the 8-bit plan (%" PRId64 ") is not smaller than AdamW's (%" PRId64 ")", tf_plan_device_total(eight),
            tf_plan_device_total(adamw));
      fits_only_with_8bit_state(g, adamw, eight);
      adamw_kept_where_it_fits(g, adamw);
      lora_on_top_of_8bit(g, eight);
    }
    sgd_refused(g);
    tf_plan_destroy(adamw);
    tf_plan_destroy(eight);
  }
  tf_graph_destroy(g);
  return tf_test_finish("budget_8bit", &counts);
}
