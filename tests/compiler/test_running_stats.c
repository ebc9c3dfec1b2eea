/* Running statistics of batch_norm (compiler/running_stats.c): x [4, 3, 5] (an input) through a
 * batch_norm that tracks its running mean and variance (momentum 0.3) into sum(y^2 * probe), compiled
 * with 2 accumulated micro-batches of 4 and y recomputed (so the plan holds a recomputed batch_norm).
 * The plan: the two statistics are state buffers in the parameters region, one batch_norm_running
 * step right after the forward batch_norm, none in the recompute; an inference plan has neither.
 * On the CPU each micro-step updates them once, equal to a double reference computed here. Then
 * the plan verifier is shown each rule failing on a plan broken on purpose: the update moved to
 * the recompute phase, the statistics made constants, a second reader. Graphs that share the
 * statistics between two batch_norm nodes, read them elsewhere or make them parameters are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define N 4
#define C 3
#define S 5
#define MOMENTUM 0.3f

static tf_test_counts counts;
static char y_name[256]; /* the batch_norm's output, which the training plan recomputes */

static tf_graph *tracked_graph(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "running_stats");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(N), d(C), d(S)));
  tf_tensor_id gamma = tf_test_param(g, "gamma", TF_SHAPE(d(C)));
  tf_tensor_id beta = tf_test_param(g, "beta", TF_SHAPE(d(C)));
  tf_tensor_id mean =
      tf_graph_constant(g, "bn.running_mean", TF_F32, TF_SHAPE(d(C)), tf_init_make(TF_INIT_FILL, 0.25, 0));
  tf_tensor_id var = tf_graph_constant(g, "bn.running_var", TF_F32, TF_SHAPE(d(C)), tf_init_make(TF_INIT_FILL, 1.5, 0));
  tf_tensor_id y = tf_batch_norm_tracked(g, x, gamma, beta, mean, var, 1e-5f, MOMENTUM);
  tf_tensor_info info;
  if (tf_graph_tensor(g, y, &info))
    snprintf(y_name, sizeof(y_name), "%s", info.name);
  tf_test_finish_probe(g, tf_mul(g, y, y)); /* y squared: the backward pass reads y, saved or recomputed */
  return g;
}

/* The plan's steps of op `op` in phase `phase`. */
static int32_t count_steps(const tf_plan *plan, tf_op op, tf_phase phase) {
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    n += plan->steps[s].op == op && plan->steps[s].phase == phase;
  return n;
}

static int32_t find_step(const tf_plan *plan, tf_op op, tf_phase phase) {
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (plan->steps[s].op == op && plan->steps[s].phase == phase)
      return s;
  return -1;
}

static void check_plan(const tf_plan *plan) {
  int32_t states = 0;
  for (int32_t i = 0; i < plan->n_buffers; i++)
    if (plan->buffers[i].role == TF_ROLE_STATE)
      states += plan->buffers[i].region == TF_REGION_PARAMETERS;
  const int32_t forward = find_step(plan, TF_OP_BATCH_NORM, TF_PHASE_FORWARD);
  const int32_t update = find_step(plan, TF_OP_BATCH_NORM_RUNNING, TF_PHASE_FORWARD);
  const int32_t recomputed = count_steps(plan, TF_OP_BATCH_NORM, TF_PHASE_RECOMPUTE);
  int32_t updates = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    updates += plan->steps[s].op == TF_OP_BATCH_NORM_RUNNING;
  CHECK(&counts, states == 2, "%d state buffers in the parameters region, expected 2", states);
  CHECK(&counts, updates == 1 && update == forward + 1 && update < plan->micro_steps,
        "%d batch_norm_running steps, the one at %d, the forward batch_norm at %d", updates, update, forward);
  CHECK(&counts, recomputed == 1, "%d recomputed batch_norm steps, expected 1 (y is recomputed)", recomputed);
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (plan->steps[s].op == TF_OP_BATCH_NORM)
      CHECK(&counts, plan->steps[s].n_inputs == 3, "batch_norm step %d has %d inputs; the plan's take 3", s,
            plan->steps[s].n_inputs);
  printf("ok   plan: 2 state buffers, batch_norm_running at step %d right after batch_norm, %d recomputed "
         "batch_norm without it\n",
         update, recomputed);
}

/* The double reference of one update, as PyTorch: unbiased variance, momentum blend. */
static void reference_update(const float *x, double *mean, double *var) {
  for (int32_t c = 0; c < C; c++) {
    double sum = 0, squares = 0;
    for (int32_t n = 0; n < N; n++)
      for (int32_t s = 0; s < S; s++)
        sum += x[(n * C + c) * S + s];
    const double m = N * S, mu = sum / m;
    for (int32_t n = 0; n < N; n++)
      for (int32_t s = 0; s < S; s++)
        squares += (x[(n * C + c) * S + s] - mu) * (x[(n * C + c) * S + s] - mu);
    mean[c] = (1 - (double)MOMENTUM) * mean[c] + (double)MOMENTUM * mu;
    var[c] = (1 - (double)MOMENTUM) * var[c] + (double)MOMENTUM * squares / (m - 1);
  }
}

static void check_training(const tf_plan *plan) {
  tf_session_options so = tf_session_options_default();
  tf_session *session = NULL;
  CHECK_OK(&counts, tf_session_create(plan, &so, &session));
  if (!session)
    return;
  double mean[C], var[C], worst = 0;
  for (int32_t c = 0; c < C; c++) {
    mean[c] = 0.25;
    var[c] = 1.5;
  }
  float x[N * C * S], probe[N * C * S], got_mean[C], got_var[C];
  for (int32_t micro = 0; micro < 2; micro++) {
    for (int32_t e = 0; e < N * C * S; e++) {
      x[e] = (float)sin(0.7 * e + micro) * (1.0f + (float)(e % C)) + 0.5f * (float)(e % C);
      probe[e] = 0.01f * (float)e;
    }
    CHECK_OK(&counts, tf_session_write(session, "x", x, sizeof(x)));
    CHECK_OK(&counts, tf_session_write(session, "probe", probe, sizeof(probe)));
    double loss;
    CHECK_OK(&counts, tf_session_micro_step(session, &loss));
    reference_update(x, mean, var);
    CHECK_OK(&counts, tf_session_read(session, "bn.running_mean", got_mean, sizeof(got_mean)));
    CHECK_OK(&counts, tf_session_read(session, "bn.running_var", got_var, sizeof(got_var)));
    for (int32_t c = 0; c < C; c++) {
      worst = fmax(worst, fabs(got_mean[c] - mean[c]) / fmax(fabs(mean[c]), 1e-3));
      worst = fmax(worst, fabs(got_var[c] - var[c]) / fmax(fabs(var[c]), 1e-3));
    }
  }
  CHECK(&counts, worst <= 1e-6, "running statistics after 2 micro-steps off the double reference by %.2e", worst);
  printf("%-4s cpu: 2 micro-steps update the running statistics twice, within %.1e of the double reference "
         "(mean %.6f, var %.6f)\n",
         worst <= 1e-6 ? "ok" : "FAIL", worst, (double)got_mean[0], (double)got_var[0]);
  tf_session_destroy(session);
}

/* tf_plan_verify on the plan after `breakage`, which must fail with `words` in its message; the
 * plan is restored by the caller (each breakage undoes itself). */
static void expect_invalid(const tf_plan *plan, const char *label, const char *words) {
  tf_status status = tf_plan_verify(plan);
  const char *message = tf_status_message(status);
  CHECK(&counts, status && strstr(message, words), "%s: verifier said '%s', expected '%s'", label,
        status ? message : "nothing", words);
  printf("%-4s verifier, %s: %s\n", status && strstr(message, words) ? "ok" : "FAIL", label,
         status ? message : "accepted");
  tf_status_free(status);
}

static void check_verifier(tf_plan *plan) {
  CHECK_OK(&counts, tf_plan_verify(plan));
  const int32_t update = find_step(plan, TF_OP_BATCH_NORM_RUNNING, TF_PHASE_FORWARD);
  if (update < 0)
    return;
  tf_plan_step *step = &plan->steps[update];
  step->phase = TF_PHASE_RECOMPUTE;
  expect_invalid(plan, "the update in the recompute phase", "updated in the forward pass of the micro-batch block");
  step->phase = TF_PHASE_FORWARD;
  const int32_t mean = step->inputs[1];
  plan->buffers[mean].role = TF_ROLE_CONSTANT;
  expect_invalid(plan, "the running mean a constant", "in-place operands are parameters");
  plan->buffers[mean].role = TF_ROLE_STATE;
  /* the recomputed batch_norm reading the running mean as its input 3 (as if the pass left it) */
  const int32_t copy = find_step(plan, TF_OP_BATCH_NORM, TF_PHASE_RECOMPUTE);
  if (copy >= 0) {
    tf_plan_step *recomputed = &plan->steps[copy];
    int32_t *inputs = malloc(sizeof(int32_t) * 5);
    if (!inputs)
      return;
    int32_t *kept = recomputed->inputs;
    memcpy(inputs, kept, sizeof(int32_t) * 3);
    inputs[3] = mean;
    inputs[4] = step->inputs[2];
    recomputed->inputs = inputs;
    recomputed->n_inputs = 5;
    expect_invalid(plan, "a recomputed batch_norm reading them", "only the step that updates them may read them");
    recomputed->inputs = kept;
    recomputed->n_inputs = 3;
    free(inputs);
  }
  CHECK_OK(&counts, tf_plan_verify(plan));
}

/* A graph whose running statistics are shared or read elsewhere is refused at compile, naming the
 * node and the tensor. `shape`: 0, two batch_norm nodes tracking the same statistics; 1, the
 * running mean also added to the output; 2, a parameter as the running variance. */
static void check_refusal(int shape, const char *words) {
  tf_graph *g = tf_test_graph_begin(&counts, "running_refused");
  if (!g)
    return;
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(N), d(C)));
  tf_tensor_id gamma = tf_test_param(g, "gamma", TF_SHAPE(d(C)));
  tf_tensor_id beta = tf_test_param(g, "beta", TF_SHAPE(d(C)));
  tf_tensor_id mean = tf_graph_constant(g, "mean", TF_F32, TF_SHAPE(d(C)), tf_init_make(TF_INIT_FILL, 0, 0));
  tf_tensor_id var = shape == 2 ? tf_test_param(g, "var", TF_SHAPE(d(C)))
                                : tf_graph_constant(g, "var", TF_F32, TF_SHAPE(d(C)), tf_init_make(TF_INIT_FILL, 1, 0));
  tf_tensor_id y = tf_batch_norm_tracked(g, x, gamma, beta, mean, var, 1e-5f, MOMENTUM);
  if (shape == 0)
    y = tf_batch_norm_tracked(g, y, gamma, beta, mean, var, 1e-5f, MOMENTUM);
  if (shape == 1)
    y = tf_add(g, y, mean);
  tf_test_finish_probe(g, y);
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &o, &plan);
  const char *message = tf_status_message(status);
  const bool refused = status && strstr(message, words) && strstr(message, "batch_norm");
  CHECK(&counts, refused, "compile said '%s', expected '%s'", status ? message : "nothing", words);
  printf("%-4s refused: %s\n", refused ? "ok" : "FAIL", status ? message : "compiled");
  tf_status_free(status);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

static void check_inference(void) {
  tf_graph *g = tracked_graph();
  if (!g)
    return;
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.training = false;
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  tf_graph_destroy(g);
  if (!plan)
    return;
  int32_t states = 0, updates = 0;
  for (int32_t i = 0; i < plan->n_buffers; i++)
    states += plan->buffers[i].role == TF_ROLE_STATE;
  for (int32_t s = 0; s < plan->n_steps; s++)
    updates += plan->steps[s].op == TF_OP_BATCH_NORM_RUNNING;
  CHECK(&counts, states == 0 && updates == 0, "inference plan: %d state buffers, %d updates", states, updates);
  printf("%-4s inference plan: no state buffers, no update\n", states == 0 && updates == 0 ? "ok" : "FAIL");
  tf_plan_destroy(plan);
}

int main(void) {
  tf_graph *g = tracked_graph();
  if (!g)
    return tf_test_finish("running statistics", &counts);
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  o.accumulate = 2;
  o.remat = TF_REMAT_LIST;
  const char *recompute[] = {y_name};
  o.remat_list = recompute;
  o.remat_list_count = 1;
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  tf_graph_destroy(g);
  if (plan) {
    check_plan(plan);
    check_training(plan);
    check_verifier(plan);
  }
  tf_plan_destroy(plan);
  check_inference();
  check_refusal(0, "is tracked by 2 batch_norm nodes");
  check_refusal(1, "is also read by node");
  check_refusal(2, "running statistics are constants");
  return tf_test_finish("running statistics", &counts);
}
