/* gelu_pair (compiler/gelu_pair.c): a gelu whose gradient reads the same f32 x becomes gelu_pair,
 * the gradient dy times its second output.
 *   (a) the same weights: the character gpt (tanh GELU), a small asr (exact GELU, encoder and
 *       decoder) and a gpt2-small cut to 2 layers with recompute (checkpoints: the recomputed gelu
 *       pairs with its gradient), each compiled for the cpu target with the pairing (the default)
 *       and without (TF_GELU_PAIR_OFF), trained STEPS steps on the same data from the same seed:
 *       parameters, optimizer state and losses equal bit for bit after every step;
 *   (b) the plans: every gelu_grad of the plain plan is a gelu_pair of the paired one (none left),
 *       and the paired plan's device total is no larger;
 *   (c) where it does not pair: the vulkan and cuda targets by default (ON pairs them), bf16
 *       storage of the saved activations, and inference plans. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "session_compare.h"
#include "zoo_plans.h"

static tf_test_counts counts;

#define STEPS 3

typedef struct test_case {
  const char *name, *preset;
  const char *overrides[9];
  const char *bindings;
  tf_remat_mode remat;
} test_case;

static const test_case cases[] = {
    {"gpt", "gpt", {"layers=2", "d_model=32", "heads=2", NULL}, "N=2,T=16", TF_REMAT_NONE},
    {"asr",
     "asr-128-6-3",
     {"d_model=32", "enc_layers=1", "dec_layers=1", "vocab=40", "mels=8", NULL},
     "N=2,T=8,U=5",
     TF_REMAT_NONE},
    {"gpt2-small checkpoints",
     "gpt2-small",
     {"layers=2", "d_model=64", "heads=2", "vocab=300", "ctx=64", "seq=16", NULL},
     "N=2,T=16",
     TF_REMAT_CHECKPOINTS},
};

/* The case compiled for `target` with `pairing`; NULL on failure. */
static tf_plan *compile_case(const test_case *c, tf_target_kind target, tf_gelu_pair pairing, tf_precision precision,
                             bool training) {
  int32_t n = 0;
  while (c->overrides[n])
    n++;
  tf_compile_options o = tf_compile_options_default(target);
  o.bindings = c->bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 1e-2;
  o.remat = c->remat;
  o.set_precision = true;
  o.precision = precision;
  o.gelu_pair = pairing;
  o.training = training;
  return tf_test_zoo_plan(&counts, c->name, c->preset, c->overrides, n, &o);
}

static int32_t steps_of(const tf_plan *plan, tf_op op) {
  int32_t count = 0;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    count += plan->steps[s].op == op;
  return count;
}

/* (a) and (b) */
static void same_weights(const test_case *c) {
  tf_plan *plain = compile_case(c, TF_TARGET_CPU, TF_GELU_PAIR_OFF, TF_PRECISION_F32, true);
  tf_plan *paired = compile_case(c, TF_TARGET_CPU, TF_GELU_PAIR_AUTO, TF_PRECISION_F32, true);
  if (!plain || !paired) {
    tf_plan_destroy(plain);
    tf_plan_destroy(paired);
    return;
  }
  const int32_t grads = steps_of(plain, TF_OP_GELU_GRAD), pairs = steps_of(paired, TF_OP_GELU_PAIR);
  const int64_t total0 = tf_plan_device_total(plain), total1 = tf_plan_device_total(paired);
  CHECK(&counts,
        grads > 0 && pairs == grads && steps_of(paired, TF_OP_GELU_GRAD) == 0 && steps_of(plain, TF_OP_GELU_PAIR) == 0,
        "%s (b): %d gelu_grad steps in the plain plan, %d gelu_pair and %d gelu_grad in the paired one", c->name, grads,
        pairs, steps_of(paired, TF_OP_GELU_GRAD));
  CHECK(&counts, total1 <= total0, "%s (b): device total %" PRId64 " bytes paired, %" PRId64 " plain", c->name, total1,
        total0);
  printf("%-4s %-24s (b) %d gelu_grad -> %d gelu_pair; device total %" PRId64 " -> %" PRId64 " bytes\n",
         pairs == grads && total1 <= total0 ? "ok" : "FAIL", c->name, grads, pairs, total0, total1);
  tf_session *s0 = tf_test_session(&counts, plain, "cpu", 5);
  tf_session *s1 = s0 ? tf_test_session(&counts, paired, "cpu", 5) : NULL;
  int64_t differ = 0;
  double loss0 = NAN, loss1 = NAN;
  for (int64_t step = 0; step < STEPS && s0 && s1 && differ == 0; step++) {
    CHECK_OK(&counts, tf_test_train_step(s0, plain, step, &loss0));
    CHECK_OK(&counts, tf_test_train_step(s1, paired, step, &loss1));
    differ = tf_test_state_difference(&counts, s0, plain, s1, paired);
    differ += memcmp(&loss0, &loss1, sizeof(double)) != 0;
  }
  if (s0 && s1) {
    CHECK(&counts, differ == 0 && isfinite(loss0),
          "%s (a): %" PRId64 " bytes of parameters and optimizer state (or the loss) differ; losses %.9g and %.9g",
          c->name, differ, loss0, loss1);
    printf("%-4s %-24s (a) %d steps: parameters, optimizer state and loss %s, last loss %.6f\n",
           differ == 0 ? "ok" : "FAIL", c->name, STEPS, differ == 0 ? "equal bit for bit" : "DIFFER", loss1);
  }
  tf_session_destroy(s0);
  tf_session_destroy(s1);
  tf_plan_destroy(plain);
  tf_plan_destroy(paired);
}

/* (c): a plan of case `c` compiled this way holds `expected` gelu_pair steps (-1: some). */
static void pairs_where(const test_case *c, const char *how, tf_target_kind target, tf_gelu_pair pairing,
                        tf_precision precision, bool training, bool expected) {
  tf_plan *plan = compile_case(c, target, pairing, precision, training);
  if (!plan)
    return;
  const int32_t pairs = steps_of(plan, TF_OP_GELU_PAIR);
  CHECK(&counts, (pairs > 0) == expected, "%s, %s: %d gelu_pair steps, expected %s", c->name, how, pairs,
        expected ? "some" : "none");
  printf("%-4s %-24s (c) %s: %d gelu_pair steps\n", (pairs > 0) == expected ? "ok" : "FAIL", c->name, how, pairs);
  tf_plan_destroy(plan);
}

int main(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    same_weights(&cases[i]);
  const test_case *gpt = &cases[0];
  pairs_where(gpt, "vulkan target", TF_TARGET_VULKAN, TF_GELU_PAIR_AUTO, TF_PRECISION_F32, true, false);
  pairs_where(gpt, "cuda target", TF_TARGET_CUDA, TF_GELU_PAIR_AUTO, TF_PRECISION_F32, true, false);
  pairs_where(gpt, "vulkan target, ON", TF_TARGET_VULKAN, TF_GELU_PAIR_ON, TF_PRECISION_F32, true, true);
  pairs_where(gpt, "bf16 storage", TF_TARGET_CPU, TF_GELU_PAIR_AUTO, TF_PRECISION_BF16, true, false);
  pairs_where(gpt, "inference", TF_TARGET_CPU, TF_GELU_PAIR_AUTO, TF_PRECISION_F32, false, false);
  return tf_test_finish("test_gelu_pair", &counts);
}
