/* Frozen parameters (issue 43 item 1; compiler/freeze.c, autodiff.c): an MLP x [4, 16] -> fc1
 * [16, 32] -> relu -> fc2 [32, 4] -> mse, AdamW, compiled with fc1 frozen (by the builder, by
 * freeze patterns, by train-only patterns) against the plan with everything trained: the exact byte
 * differences of the gradients and optimizer state (fc1's 2,176 bytes of gradients and 4,352 of
 * AdamW moments go, nothing else), a backward pass that reads neither x nor fc2's weight (no
 * gradient toward the frozen layer, where the trained plan reads both), plans that stay verified
 * with accumulation, clipping, SGD and updates in the backward pass, three CPU steps that leave
 * the frozen weights bit for bit and move the others, a frozen bf16 weight kept in bf16 (no f32
 * master), the .tfg round trip of the flag, and each bad pattern refused with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

static tf_test_counts counts;

enum { BATCH = 4, IN = 16, HIDDEN = 32, OUT = 4 };
/* f32 bytes of fc1 (weight + bias) and fc2 */
#define FC1_BYTES ((int64_t)4 * (IN * HIDDEN + HIDDEN))
#define FC2_BYTES ((int64_t)4 * (HIDDEN * OUT + OUT))

/* The MLP; fc1's weight in `w1_dtype` (read through a cast to f32 when half). */
static tf_graph *mlp(tf_dtype w1_dtype) {
  tf_graph *g = tf_test_graph_begin(&counts, "mlp");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(BATCH), d(IN)));
  tf_tensor_id y = tf_graph_label(g, "y", TF_F32, TF_SHAPE(d(BATCH), d(OUT)));
  tf_tensor_id w1 = tf_graph_parameter(g, "fc1.weight", w1_dtype, TF_SHAPE(d(IN), d(HIDDEN)),
                                       tf_init_make(TF_INIT_NORMAL, 0.0, 0.25));
  tf_tensor_id b1 = tf_test_param(g, "fc1.bias", TF_SHAPE(d(HIDDEN)));
  tf_tensor_id w2 = tf_test_param(g, "fc2.weight", TF_SHAPE(d(HIDDEN), d(OUT)));
  tf_tensor_id b2 = tf_test_param(g, "fc2.bias", TF_SHAPE(d(OUT)));
  tf_graph_set_scope(g, "fc1");
  if (w1_dtype != TF_F32)
    w1 = tf_cast(g, w1, TF_F32);
  tf_tensor_id h = tf_add(g, tf_matmul(g, x, w1, false, false), b1);
  tf_graph_set_scope(g, "act");
  h = tf_unary(g, TF_OP_RELU, h);
  tf_graph_set_scope(g, "fc2");
  tf_tensor_id out = tf_add(g, tf_matmul(g, h, w2, false, false), b2);
  tf_graph_set_scope(g, "loss");
  tf_test_finish_loss(g, tf_mse(g, out, y));
  tf_training_config config = {0};
  config.optimizer = TF_OPTIMIZER_ADAMW;
  config.learning_rate = 1e-2;
  config.beta1 = 0.9;
  config.beta2 = 0.999;
  config.epsilon = 1e-8;
  config.weight_decay = 0.01;
  config.accumulate_steps = 1;
  tf_graph_set_training(g, &config);
  return g;
}

static void freeze_fc1(tf_graph *g) {
  CHECK_OK(&counts, tf_graph_set_trainable(g, tf_graph_find_tensor(g, "fc1.weight"), false));
  CHECK_OK(&counts, tf_graph_set_trainable(g, tf_graph_find_tensor(g, "fc1.bias"), false));
}

static tf_plan *compile(const tf_graph *g, const tf_compile_options *o, const char *label) {
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, o, &plan);
  CHECK(&counts, status == NULL, "%s: %s", label, tf_status_message(status));
  tf_status_free(status);
  return plan;
}

static int64_t role(const tf_plan *plan, tf_buffer_role r) { return plan ? plan->report.role_bytes[r] : -1; }

/* Whether a backward step reads the buffer named `name`. */
static bool backward_reads(const tf_plan *plan, const char *name) {
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    for (int32_t k = 0; plan->steps[s].phase == TF_PHASE_BACKWARD && k < plan->steps[s].n_inputs; k++)
      if (strcmp(plan->buffers[plan->steps[s].inputs[k]].name, name) == 0)
        return true;
  return false;
}

/* Gradients and AdamW state: fc1's go when it is frozen, however it is frozen. */
static void check_bytes(void) {
  tf_graph *g = mlp(TF_F32);
  if (!g)
    return;
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  tf_plan *all = compile(g, &o, "everything trained");
  const char *fc1[] = {"fc1.*"}, *fc2[] = {"fc2.*"}, *question[] = {"fc?.*"}, *bias[] = {"fc1.bias"};
  o.freeze = fc1;
  o.freeze_count = 1;
  tf_plan *by_freeze = compile(g, &o, "freeze fc1.*");
  o.freeze_count = 0;
  o.train_only = fc2;
  o.train_only_count = 1;
  tf_plan *by_train_only = compile(g, &o, "train-only fc2.*");
  o.train_only = question;
  o.freeze = bias;
  o.freeze_count = 1;
  tf_plan *one_bias = compile(g, &o, "train-only fc?.* and freeze fc1.bias");
  tf_compile_options plain = tf_compile_options_default(TF_TARGET_CPU);
  freeze_fc1(g);
  tf_plan *by_builder = compile(g, &plain, "fc1 frozen by tf_graph_set_trainable");
  const int64_t grads = role(all, TF_ROLE_GRADIENT), state = role(all, TF_ROLE_OPTIMIZER_STATE);
  printf("everything trained: parameters %lld, gradients %lld, optimizer state %lld bytes\n",
         (long long)role(all, TF_ROLE_PARAMETER), (long long)grads, (long long)state);
  CHECK(&counts, grads == FC1_BYTES + FC2_BYTES && state == 2 * (FC1_BYTES + FC2_BYTES),
        "everything trained: gradients %lld, state %lld bytes", (long long)grads, (long long)state);
  const struct {
    const char *label;
    const tf_plan *plan;
    int64_t frozen;
  } cases[] = {{"builder", by_builder, FC1_BYTES},
               {"--freeze fc1.*", by_freeze, FC1_BYTES},
               {"--train-only fc2.*", by_train_only, FC1_BYTES},
               {"--train-only fc?.* --freeze fc1.bias", one_bias, 4 * HIDDEN}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const tf_plan *p = cases[i].plan;
    printf("%s: gradients %lld bytes (%lld fewer), optimizer state %lld (%lld fewer), parameters %lld\n",
           cases[i].label, (long long)role(p, TF_ROLE_GRADIENT), (long long)(grads - role(p, TF_ROLE_GRADIENT)),
           (long long)role(p, TF_ROLE_OPTIMIZER_STATE), (long long)(state - role(p, TF_ROLE_OPTIMIZER_STATE)),
           (long long)role(p, TF_ROLE_PARAMETER));
    CHECK(&counts, grads - role(p, TF_ROLE_GRADIENT) == cases[i].frozen, "%s: %lld gradient bytes fewer, expected %lld",
          cases[i].label, (long long)(grads - role(p, TF_ROLE_GRADIENT)), (long long)cases[i].frozen);
    CHECK(&counts, state - role(p, TF_ROLE_OPTIMIZER_STATE) == 2 * cases[i].frozen,
          "%s: %lld optimizer state bytes fewer, expected %lld", cases[i].label,
          (long long)(state - role(p, TF_ROLE_OPTIMIZER_STATE)), (long long)(2 * cases[i].frozen));
    CHECK(&counts, role(p, TF_ROLE_PARAMETER) == role(all, TF_ROLE_PARAMETER), "%s: parameters %lld bytes, not %lld",
          cases[i].label, (long long)role(p, TF_ROLE_PARAMETER), (long long)role(all, TF_ROLE_PARAMETER));
  }
  /* the trained plan's backward reads x (fc1's weight gradient) and fc2.weight (the gradient toward fc1) */
  CHECK(&counts, backward_reads(all, "x") && backward_reads(all, "fc2.weight"),
        "everything trained: the backward pass should read x and fc2.weight");
  CHECK(&counts, by_builder && !backward_reads(by_builder, "x") && !backward_reads(by_builder, "fc2.weight"),
        "fc1 frozen: a backward step reads x or fc2.weight: a gradient is computed toward the frozen layer");
  int32_t backward[2] = {0, 0};
  for (int32_t s = 0; all && by_builder && s < all->n_steps; s++)
    backward[0] += all->steps[s].phase == TF_PHASE_BACKWARD;
  for (int32_t s = 0; by_builder && s < by_builder->n_steps; s++)
    backward[1] += by_builder->steps[s].phase == TF_PHASE_BACKWARD;
  printf("backward steps: %d trained, %d with fc1 frozen; the frozen plan's backward reads x: %s, fc2.weight: %s\n",
         backward[0], backward[1], backward_reads(by_builder, "x") ? "yes" : "no",
         backward_reads(by_builder, "fc2.weight") ? "yes" : "no");
  tf_plan_destroy(all);
  tf_plan_destroy(by_freeze);
  tf_plan_destroy(by_train_only);
  tf_plan_destroy(one_bias);
  tf_plan_destroy(by_builder);
  tf_graph_destroy(g);
}

/* Accumulation, clipping, SGD, updates in the backward pass: each plan verified by tf_compile. */
static void check_variants(void) {
  tf_graph *g = mlp(TF_F32);
  if (!g)
    return;
  freeze_fc1(g);
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.accumulate = 2;
  o.clip_norm = 1.0;
  tf_plan_destroy(compile(g, &o, "accumulate 2, clip 1"));
  o = tf_compile_options_default(TF_TARGET_CPU);
  o.optimizer = TF_OPTIMIZER_SGD;
  tf_plan *sgd = compile(g, &o, "sgd");
  CHECK(&counts, role(sgd, TF_ROLE_OPTIMIZER_STATE) == FC2_BYTES, "sgd: optimizer state %lld bytes, expected %lld",
        (long long)role(sgd, TF_ROLE_OPTIMIZER_STATE), (long long)FC2_BYTES);
  tf_plan_destroy(sgd);
  o = tf_compile_options_default(TF_TARGET_CPU);
  o.update_in_backward = true;
  tf_plan_destroy(compile(g, &o, "update in backward"));
  o = tf_compile_options_default(TF_TARGET_VULKAN);
  o.remat = TF_REMAT_CHECKPOINTS;
  tf_plan_destroy(compile(g, &o, "vulkan target, checkpoints"));
  tf_graph_destroy(g);
}

/* Three AdamW steps (weight decay 0.01) on the CPU: fc1 bit for bit as initialised, fc2 moved. */
static void check_training(tf_dtype w1_dtype) {
  tf_graph *g = mlp(w1_dtype);
  if (!g)
    return;
  freeze_fc1(g);
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  tf_plan *plan = compile(g, &o, w1_dtype == TF_F32 ? "f32 training" : "bf16 frozen weight");
  tf_graph_destroy(g);
  tf_session *s = NULL;
  tf_session_options so = tf_session_options_default();
  if (plan)
    CHECK_OK(&counts, tf_session_create(plan, &so, &s));
  if (!s) {
    tf_plan_destroy(plan);
    return;
  }
  const int64_t w1_bytes = (w1_dtype == TF_F32 ? 4 : 2) * IN * HIDDEN;
  if (w1_dtype != TF_F32)
    CHECK(&counts, role(plan, TF_ROLE_PARAMETER) == w1_bytes + 4 * HIDDEN + FC2_BYTES,
          "a frozen bf16 weight: parameters %lld bytes, expected %lld (bf16, no f32 master)",
          (long long)role(plan, TF_ROLE_PARAMETER), (long long)(w1_bytes + 4 * HIDDEN + FC2_BYTES));
  static unsigned char w1_before[4 * IN * HIDDEN], w1_after[4 * IN * HIDDEN];
  float b1_before[HIDDEN], b1_after[HIDDEN], w2_before[HIDDEN * OUT], w2_after[HIDDEN * OUT];
  CHECK_OK(&counts, tf_session_read(s, "fc1.weight", w1_before, w1_bytes));
  CHECK_OK(&counts, tf_session_read(s, "fc1.bias", b1_before, sizeof(b1_before)));
  CHECK_OK(&counts, tf_session_read(s, "fc2.weight", w2_before, sizeof(w2_before)));
  float x[BATCH * IN], y[BATCH * OUT];
  for (int i = 0; i < BATCH * IN; i++)
    x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < BATCH * OUT; i++)
    y[i] = (float)((i * 5) % 7) / 7.0f;
  double losses[3] = {0, 0, 0};
  for (int step = 0; step < 3; step++) {
    CHECK_OK(&counts, tf_session_write(s, "x", x, sizeof(x)));
    CHECK_OK(&counts, tf_session_write(s, "y", y, sizeof(y)));
    CHECK_OK(&counts, tf_session_micro_step(s, &losses[step]));
    CHECK_OK(&counts, tf_session_optimizer_step(s));
  }
  CHECK_OK(&counts, tf_session_read(s, "fc1.weight", w1_after, w1_bytes));
  CHECK_OK(&counts, tf_session_read(s, "fc1.bias", b1_after, sizeof(b1_after)));
  CHECK_OK(&counts, tf_session_read(s, "fc2.weight", w2_after, sizeof(w2_after)));
  const bool fc1_same =
      memcmp(w1_before, w1_after, (size_t)w1_bytes) == 0 && memcmp(b1_before, b1_after, sizeof(b1_after)) == 0;
  const bool fc2_moved = memcmp(w2_before, w2_after, sizeof(w2_after)) != 0;
  printf("%s fc1: 3 AdamW steps, loss %.6f -> %.6f; fc1 %s, fc2.weight %s\n", tf_dtype_name(w1_dtype), losses[0],
         losses[2], fc1_same ? "bit for bit as initialised" : "CHANGED", fc2_moved ? "moved" : "unchanged");
  CHECK(&counts, fc1_same, "a frozen parameter changed in training");
  CHECK(&counts, fc2_moved && losses[2] < losses[0], "the trainable layer did not train: loss %g -> %g", losses[0],
        losses[2]);
  tf_session_destroy(s);
  tf_plan_destroy(plan);
}

static void expect_error(const tf_graph *g, const tf_compile_options *o, const char *label, const char *phrase) {
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, o, &plan);
  const char *message = status ? tf_status_message(status) : "(compiled)";
  printf("%s: %s\n", label, message);
  CHECK(&counts, status && strstr(message, phrase), "%s: expected an error saying '%s', got: %s", label, phrase,
        message);
  tf_status_free(status);
  tf_plan_destroy(plan);
}

static void check_refusals(void) {
  tf_graph *g = mlp(TF_F32);
  if (!g)
    return;
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  const char *none[] = {"enc*"}, *every[] = {"*"}, *bracket[] = {"fc[1.*"}, *empty[] = {""}, *nothing[] = {"head.*"};
  o.freeze = none;
  o.freeze_count = 1;
  expect_error(g, &o, "freeze enc*",
               "freeze pattern 'enc*' names no parameter of graph 'mlp'; its parameters: "
               "'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias' (4 parameters)");
  o.freeze = every;
  expect_error(g, &o, "freeze *", "every parameter of graph 'mlp' is frozen (4 of 4): nothing to train");
  o.freeze = bracket;
  expect_error(g, &o, "freeze fc[1.*", "freeze pattern 'fc[1.*' has a '[' without its ']' (at byte 2)");
  o.freeze = empty;
  expect_error(g, &o, "freeze ''", "freeze pattern is empty");
  o.freeze_count = 0;
  o.train_only = nothing;
  o.train_only_count = 1;
  expect_error(g, &o, "train-only head.*", "train-only pattern 'head.*' names no parameter");
  tf_status status = tf_graph_set_trainable(g, tf_graph_find_tensor(g, "x"), false);
  printf("tf_graph_set_trainable(x): %s\n", status ? tf_status_message(status) : "(accepted)");
  CHECK(&counts, status && strstr(tf_status_message(status), "'x' is an input; only a parameter can be frozen"),
        "freezing an input: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  status = tf_graph_set_trainable(g, 99, false);
  CHECK(&counts, status && strstr(tf_status_message(status), "tensor id 99 is outside"), "a bad id: %s",
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  tf_graph_destroy(g);
}

/* The flag survives the .tfg; a graph without frozen parameters encodes as before (no field). */
static void check_file(void) {
  tf_graph *g = mlp(TF_F32);
  if (!g)
    return;
  void *plain = NULL, *frozen = NULL;
  size_t plain_size = 0, frozen_size = 0;
  CHECK_OK(&counts, tf_graph_serialize(g, &plain, &plain_size));
  CHECK_OK(&counts, tf_graph_set_trainable(g, tf_graph_find_tensor(g, "fc2.bias"), false));
  CHECK_OK(&counts, tf_graph_set_trainable(g, tf_graph_find_tensor(g, "fc2.bias"), true));
  void *again = NULL;
  size_t again_size = 0;
  CHECK_OK(&counts, tf_graph_serialize(g, &again, &again_size));
  CHECK(&counts, plain && again && plain_size == again_size && memcmp(plain, again, plain_size) == 0,
        "unfreezing should give back the same bytes (%zu vs %zu)", plain_size, again_size);
  freeze_fc1(g);
  CHECK_OK(&counts, tf_graph_serialize(g, &frozen, &frozen_size));
  tf_graph *back = NULL;
  if (frozen)
    CHECK_OK(&counts, tf_graph_parse(frozen, frozen_size, "frozen.tfg", &back));
  if (back) {
    const bool kept = !tf_graph_is_trainable(back, tf_graph_find_tensor(back, "fc1.weight")) &&
                      !tf_graph_is_trainable(back, tf_graph_find_tensor(back, "fc1.bias")) &&
                      tf_graph_is_trainable(back, tf_graph_find_tensor(back, "fc2.weight")) &&
                      tf_graph_is_trainable(back, tf_graph_find_tensor(back, "fc2.bias"));
    printf(".tfg: %zu bytes trained, %zu with fc1 frozen; read back: fc1 frozen, fc2 trained: %s\n", plain_size,
           frozen_size, kept ? "yes" : "NO");
    CHECK(&counts, kept, "the frozen flags did not survive the .tfg");
    CHECK(&counts, !tf_graph_is_trainable(back, tf_graph_find_tensor(back, "x")), "an input reads as trainable");
  }
  tf_graph_destroy(back);
  free(plain);
  free(again);
  free(frozen);
  tf_graph_destroy(g);
}

int main(void) {
  check_bytes();
  check_variants();
  check_training(TF_F32);
  check_training(TF_BF16);
  check_refusals();
  check_file();
  return tf_test_finish("test_freeze", &counts);
}
