/* The Vulkan target's half kernels (targets/target.c, tf_target_half_kernel): a bf16 (and an f16)
 * model, its activations declared half (matmul, bias, embedding, gelu, two slices and a concat, layer
 * norm, causal attention, a mean, matmul, softmax), compiled for the vulkan target runs those ops
 * and their gradients on half data itself (the f16/bf16 shader variants, shaders/common.glsl; the
 * bias gradient's sum_to and embedding's gradient between casts), and the plan compiled with
 * --no-half-kernels runs every one of them on f32 copies between casts. Each half kernel widens
 * exactly, computes the f32 shader's arithmetic and rounds once as the cast does (the same integer
 * conversions, shaders/half.glsl; the norms' and attention's gradients keep their row statistics as
 * exact f32 bits), so three training steps give the same losses and the same weights bit for bit,
 * with the subgroup shaders and without them (each setting against itself: the two matmul variants
 * sum in different orders). (The plan between casts reads, for the backward pass of an op like
 * softmax, its output as stored in half, cast back, as the half kernel does, and sums a tensor's
 * gradient parts from one node in input order: half_ops.c, precision.c.) The half-kernel plan has
 * fewer casts and a matmul reading half data; without storageBuffer16BitAccess
 * (TIGHTFIT_VULKAN_16BIT=0) its session is refused, naming --no-half-kernels, and the other plan
 * runs; a plan file putting a gradient that keeps sums in its output (embedding_grad) on half data
 * is refused. Under the validation layer; exits 77 without a Vulkan device. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_graphs.h"
#include "parity.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define ROWS 6
#define WIDTH 20
#define HIDDEN 24
#define CLASSES 10
#define VOCAB 7
#define STEPS 3

static tf_test_counts counts;

/* x -> cast -> matmul(W1) + b1 + embedding(ids) -> gelu -> concat(two slices) -> layer_norm ->
 * causal attention (2 heads over sequences of 3) -> + its mean over the features -> matmul(W2) ->
 * softmax -> cast f32 -> cross_entropy of its log (the log and the loss on f32). */
static tf_graph *build(tf_dtype half) {
  tf_graph *g = tf_test_graph_begin(&counts, "half_kernels");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_cast(g, tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(ROWS), d(WIDTH))), half);
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I32, TF_SHAPE(d(ROWS)));
  tf_tensor_id labels = tf_graph_input(g, "labels", TF_I32, TF_SHAPE(d(ROWS)));
  tf_tensor_id w1 = tf_cast(g, tf_test_param(g, "W1", TF_SHAPE(d(WIDTH), d(HIDDEN))), half);
  tf_tensor_id b1 = tf_cast(g, tf_test_param(g, "b1", TF_SHAPE(d(HIDDEN))), half);
  tf_tensor_id table = tf_cast(g, tf_test_param(g, "table", TF_SHAPE(d(VOCAB), d(HIDDEN))), half);
  tf_tensor_id h = tf_add(g, tf_matmul(g, x, w1, false, false), b1);
  h = tf_gelu(g, tf_add(g, h, tf_embedding(g, ids, table)), true);
  tf_tensor_id halves[2] = {tf_slice(g, h, 1, HIDDEN / 2, HIDDEN, 1), tf_slice(g, h, 1, 0, HIDDEN / 2, 1)};
  tf_tensor_id swapped = tf_concat(g, halves, 2, 1);
  tf_tensor_id gamma = tf_cast(g, tf_test_positive(g, "gamma", TF_SHAPE(d(HIDDEN))), half);
  tf_tensor_id normed = tf_layer_norm(g, swapped, gamma, TF_NO_TENSOR, 1e-5f);
  tf_tensor_id sequences = tf_reshape(g, normed, TF_SHAPE(d(ROWS / 3), d(3), d(HIDDEN)));
  tf_tensor_id attended = tf_attention(g, sequences, sequences, sequences, 2, true);
  const int32_t features = 2;
  attended = tf_add(g, attended, tf_reduce(g, TF_OP_MEAN, attended, &features, 1, true));
  tf_tensor_id w2 = tf_cast(g, tf_test_param(g, "W2", TF_SHAPE(d(HIDDEN), d(CLASSES))), half);
  tf_tensor_id rows = tf_reshape(g, attended, TF_SHAPE(d(ROWS), d(HIDDEN)));
  tf_tensor_id p = tf_softmax(g, tf_matmul(g, rows, w2, false, false), 1);
  tf_graph_set_loss(g, tf_cross_entropy(g, tf_unary(g, TF_OP_LOG, tf_cast(g, p, TF_F32)), labels, -1));
  return g;
}

static tf_plan *compile(tf_dtype half, bool half_kernels) {
  tf_graph *g = build(half);
  tf_plan *plan = NULL;
  if (g) {
    tf_compile_options o = tf_compile_options_default(TF_TARGET_VULKAN);
    o.loss_scale = 1.0;
    o.optimizer = TF_OPTIMIZER_ADAMW;
    o.learning_rate = 0.01;
    if (!half_kernels)
      memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
    CHECK_OK(&counts, tf_compile(g, &o, &plan));
  }
  tf_graph_destroy(g);
  return plan;
}

typedef struct plan_counts {
  int32_t casts, half_steps, half_matmuls;
} plan_counts;

static plan_counts count_steps(const tf_plan *plan, tf_dtype half) {
  plan_counts c = {0, 0, 0};
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op == TF_OP_CAST) {
      c.casts++;
      continue;
    }
    bool on_half = false;
    for (int32_t k = 0; k < step->n_inputs; k++)
      on_half = on_half || plan->buffers[step->inputs[k]].dtype == half;
    c.half_steps += on_half;
    c.half_matmuls += on_half && step->op == TF_OP_MATMUL;
  }
  return c;
}

/* What STEPS training steps give: each loss, then every parameter's bytes after the last. */
typedef struct outcome {
  double losses[STEPS];
  float params[WIDTH * HIDDEN + HIDDEN * 2 + HIDDEN * CLASSES + VOCAB * HIDDEN];
  bool ran;
} outcome;

static void feed(tf_session *s) {
  float x[ROWS * WIDTH];
  int32_t labels[ROWS], ids[ROWS];
  for (int i = 0; i < ROWS * WIDTH; i++)
    x[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
  for (int i = 0; i < ROWS; i++) {
    labels[i] = (i * 7) % CLASSES;
    ids[i] = (i * 5) % VOCAB;
  }
  CHECK_OK(&counts, tf_session_write(s, "ids", ids, sizeof(ids)));
  CHECK_OK(&counts, tf_session_write(s, "x", x, sizeof(x)));
  CHECK_OK(&counts, tf_session_write(s, "labels", labels, sizeof(labels)));
}

static tf_status train(const tf_plan *plan, outcome *out) {
  memset(out, 0, sizeof(*out));
  tf_session_options so = tf_session_options_default();
  so.backend = "vulkan";
  so.seed = 3;
  tf_session *s = NULL;
  TF_RETURN_IF_ERROR(tf_session_create(plan, &so, &s));
  feed(s);
  tf_status status = NULL;
  for (int i = 0; i < STEPS && !status; i++) {
    status = tf_session_micro_step(s, &out->losses[i]);
    if (!status)
      status = tf_session_optimizer_step(s);
  }
  static const struct {
    const char *name;
    int64_t count, at;
  } params[] = {{"W1", WIDTH * HIDDEN, 0},
                {"b1", HIDDEN, WIDTH * HIDDEN},
                {"gamma", HIDDEN, WIDTH * HIDDEN + HIDDEN},
                {"W2", HIDDEN * CLASSES, WIDTH * HIDDEN + 2 * HIDDEN},
                {"table", VOCAB * HIDDEN, WIDTH * HIDDEN + 2 * HIDDEN + HIDDEN * CLASSES}};
  for (size_t p = 0; p < sizeof(params) / sizeof(params[0]) && !status; p++)
    status = tf_session_read(s, params[p].name, out->params + params[p].at, params[p].count * 4);
  tf_session_destroy(s);
  out->ran = status == NULL;
  return status;
}

static void compare(tf_dtype half, const char *setting, const outcome *kernels, const outcome *casts) {
  if (!kernels->ran || !casts->ran)
    return;
  CHECK(&counts, memcmp(kernels->losses, casts->losses, sizeof(kernels->losses)) == 0,
        "%s, %s: losses %.9g %.9g %.9g with half kernels, %.9g %.9g %.9g between casts", tf_dtype_name(half), setting,
        kernels->losses[0], kernels->losses[1], kernels->losses[2], casts->losses[0], casts->losses[1],
        casts->losses[2]);
  int64_t differ = 0, n = (int64_t)(sizeof(kernels->params) / sizeof(float));
  for (int64_t i = 0; i < n; i++)
    differ += memcmp(&kernels->params[i], &casts->params[i], 4) != 0;
  CHECK(&counts, differ == 0, "%s, %s: %lld of %lld weights differ after %d steps", tf_dtype_name(half), setting,
        (long long)differ, (long long)n, STEPS);
  printf("%s   %s, %s: %d steps, losses %.6f %.6f %.6f, %lld weights: bit for bit the plan between casts\n",
         differ == 0 && !memcmp(kernels->losses, casts->losses, sizeof(kernels->losses)) ? "ok" : "FAIL",
         tf_dtype_name(half), setting, STEPS, kernels->losses[0], kernels->losses[1], kernels->losses[2], (long long)n);
}

/* A plan file whose gradient step keeps sums in its half output (embedding_grad on bf16 data: the
 * compiler puts it between casts) is refused, not run with rounded partial sums: the embedding step
 * of the half-kernel plan relabelled as its gradient (same operands). */
static void refuse_partials(tf_plan *plan, tf_dtype half) {
  int32_t s = 0;
  while (s < plan->n_steps && plan->steps[s].op != TF_OP_EMBEDDING)
    s++;
  CHECK(&counts, s < plan->n_steps, "%s: no embedding step on half data", tf_dtype_name(half));
  if (s == plan->n_steps)
    return;
  plan->steps[s].op = TF_OP_EMBEDDING_GRAD;
  outcome refused;
  tf_status status = train(plan, &refused);
  CHECK(&counts,
        tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "keeps statistics or sums"),
        "%s embedding_grad on half data: %s", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  printf("ok   %s embedding_grad on half data: %s\n", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  tf_status_free(status);
}

static void run(tf_dtype half) {
  tf_plan *kernels = compile(half, true), *casts = compile(half, false);
  if (!kernels || !casts) {
    tf_plan_destroy(kernels);
    tf_plan_destroy(casts);
    return;
  }
  const plan_counts k = count_steps(kernels, half), c = count_steps(casts, half);
  CHECK(&counts, c.half_steps == 0, "%s: %d non-cast steps read half data in the plan between casts",
        tf_dtype_name(half), c.half_steps);
  CHECK(&counts, k.half_matmuls >= 3 && k.half_steps >= 10 && k.casts < c.casts,
        "%s: half kernels: %d steps on half data (%d matmuls), %d casts; between casts: %d casts", tf_dtype_name(half),
        k.half_steps, k.half_matmuls, k.casts, c.casts);
  printf("ok   %s plans: half kernels %d steps on half data (%d matmuls), %d casts, arena %lld B; between casts %d "
         "casts, arena %lld B\n",
         tf_dtype_name(half), k.half_steps, k.half_matmuls, k.casts, (long long)kernels->region_bytes[TF_REGION_ARENA],
         c.casts, (long long)casts->region_bytes[TF_REGION_ARENA]);
  static const char *const settings[2] = {"subgroup shaders", "no subgroup shaders"};
  for (int setting = 0; setting < 2; setting++) {
    if (setting == 1)
      setenv("TIGHTFIT_VULKAN_SUBGROUPS", "0", 1);
    outcome with, without;
    CHECK_OK(&counts, train(kernels, &with));
    CHECK_OK(&counts, train(casts, &without));
    compare(half, settings[setting], &with, &without);
    unsetenv("TIGHTFIT_VULKAN_SUBGROUPS");
  }
  setenv("TIGHTFIT_VULKAN_16BIT", "0", 1);
  outcome refused, fallback;
  tf_status status = train(kernels, &refused);
  CHECK(&counts, tf_status_code(status) == TF_ERR_UNSUPPORTED && strstr(tf_status_message(status), "--no-half-kernels"),
        "%s without 16-bit storage: %s", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  printf("ok   %s without 16-bit storage: %s\n", tf_dtype_name(half), status ? tf_status_message(status) : "ran");
  tf_status_free(status);
  CHECK_OK(&counts, train(casts, &fallback));
  unsetenv("TIGHTFIT_VULKAN_16BIT");
  refuse_partials(kernels, half);
  tf_plan_destroy(kernels);
  tf_plan_destroy(casts);
}

int main(void) {
  int available = parity_vulkan_available();
  if (available != 0)
    return available;
  run(TF_BF16);
  run(TF_F16);
  parity_check_validation(&counts);
  return tf_test_finish("vulkan half kernels", &counts);
}
