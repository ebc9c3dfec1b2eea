/* The fused loss head's single pass (linear_cross_entropy_train: the loss and its gradients in one
 * step of the forward pass, each chunk's logits computed once; compiler/fuse_loss.c) against the
 * two steps it replaces, on every backend present (cpu always, vulkan on lavapipe when the build has
 * it, cuda when a GPU is there; a backend without a device prints SKIP):
 *   - a gpt2-small cut to 1 layer (its head tied to the token embedding) compiles with the single
 *     pass, once with AdamW and once with updates in the backward pass, and the same graph whose loss
 *     is multiplied by a constant 1 compiles with the two steps (the head's dloss is then not the
 *     loss seed); the plans say so;
 *   - the weights match bit for bit: 4 AdamW steps of each pair on the same data leave parameters
 *     and optimizer state equal byte for byte, and the losses equal;
 *   - the zoo mlp, whose head has a bias and its own weight (fused with --fuse-loss on):
 *     linear_cross_entropy_bias_train, the same;
 * and forward-only evaluation after those steps gives both plans the same loss and changes no
 * weight (with updates in the backward pass, none may run inside the forward pass, where the single
 * pass writes the head's gradients). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "check.h"
#include "session_compare.h"
#include "tightfit/compiler.h"
#include "tightfit/graph.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

#define STEPS 4

static tf_target_kind target_of(const char *backend) {
  return strcmp(backend, "vulkan") == 0 ? TF_TARGET_VULKAN
         : strcmp(backend, "cuda") == 0 ? TF_TARGET_CUDA
                                        : TF_TARGET_CPU;
}

typedef struct model {
  const char *preset, *knobs[6], *bindings;
  int32_t n_knobs;
  tf_op single_op, forward_op, gradient_op;
} model;

/* gpt2-small cut to one small layer (a head tied to the token embedding, no bias) and the mlp (a
 * head of its own with a bias: its updates could run right after the single pass, inside the
 * forward pass, which evaluation runs alone). */
static const model models[] = {
    {"gpt2-small",
     {"layers=1", "d_model=32", "heads=2", "vocab=300", "ctx=64", "seq=16"},
     "N=2,T=16",
     6,
     TF_OP_LINEAR_CROSS_ENTROPY_TRAIN,
     TF_OP_LINEAR_CROSS_ENTROPY,
     TF_OP_LINEAR_CROSS_ENTROPY_GRAD},
    {"mlp",
     {"hidden=32"},
     "N=24",
     1,
     TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN,
     TF_OP_LINEAR_CROSS_ENTROPY,
     TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD},
};

/* The model; with `times_one`, its loss multiplied by a constant 1. */
static tf_graph *build(const model *m, bool times_one) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(m->preset, m->knobs, m->n_knobs, &g);
  CHECK(&counts, status == NULL, "zoo %s: %s", m->preset, tf_status_message(status));
  tf_status_free(status);
  if (g && times_one) {
    tf_tensor_id one = tf_graph_constant(g, "one", TF_F32, tf_shape_from(NULL, 0), tf_init_make(TF_INIT_ONES, 0, 0));
    tf_graph_set_loss(g, tf_mul(g, tf_graph_loss(g), one));
    CHECK(&counts, tf_graph_status(g) == NULL, "loss x 1: %s", tf_status_message(tf_graph_status(g)));
  }
  return g;
}

static int32_t count_op(const tf_plan *plan, tf_op op) {
  int32_t n = 0;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    n += plan->steps[s].op == op;
  return n;
}

static tf_plan *compile(const model *m, tf_graph *g, tf_target_kind target, bool in_backward) {
  tf_compile_options o = tf_compile_options_default(target);
  o.bindings = m->bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 1e-2;
  o.accumulate = 1;
  o.clip_norm = 0;
  o.fuse_loss = TF_FUSE_LOSS_ON;
  o.loss_chunk_rows = 10; /* 32 or 24 rows: chunks that do not divide them */
  o.update_in_backward = in_backward;
  tf_plan *plan = NULL;
  tf_status status = g ? tf_compile(g, &o, &plan) : tf_status_new(TF_ERR_INTERNAL, "no graph");
  CHECK(&counts, status == NULL, "compile: %s", tf_status_message(status));
  tf_status_free(status);
  return plan;
}

/* A session, or NULL: a failure, except that a backend that cannot open a device is a SKIP. */
static tf_session *open_session(const tf_plan *plan, const char *backend) {
  tf_session_options o = tf_session_options_default();
  o.backend = backend;
  o.seed = 9;
  tf_session *session = NULL;
  tf_status status = tf_session_create(plan, &o, &session);
  if (status && strcmp(backend, "cpu") != 0)
    printf("SKIP %s: %s\n", backend, tf_status_message(status));
  else
    CHECK(&counts, status == NULL, "session on %s: %s", backend, tf_status_message(status));
  tf_status_free(status);
  return session;
}

/* Floats in [-1, 1) and integers 0..9 from a counter, for every input and label. */
static tf_status feed(tf_session *session, const tf_plan *plan, int64_t batch) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    const int64_t n = b->bytes / 4;
    int32_t *data = malloc((size_t)b->bytes);
    if (!data)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed");
    for (int64_t e = 0; e < n; e++) {
      const uint64_t u = (uint64_t)(batch * 7919 + e * 104729 + i * 31);
      if (b->dtype == TF_F32)
        ((float *)data)[e] = (float)(u % 2000) / 1000.0f - 1.0f;
      else
        data[e] = (int32_t)(u % 10);
    }
    tf_status status = tf_session_write(session, b->name, data, b->bytes);
    free(data);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

static void same_training(const model *m, const char *backend, bool in_backward) {
  tf_graph *g1 = build(m, false), *g2 = build(m, true);
  tf_plan *single = compile(m, g1, target_of(backend), in_backward);
  tf_plan *two = compile(m, g2, target_of(backend), in_backward);
  char label[64];
  snprintf(label, sizeof(label), "%s, %s", m->preset, in_backward ? "updates in backward" : "adamw");
  if (single && two && strcmp(backend, "cpu") == 0) {
    const bool shapes = count_op(single, m->single_op) == 1 && count_op(single, m->forward_op) == 0 &&
                        count_op(single, m->gradient_op) == 0 && count_op(two, m->single_op) == 0 &&
                        count_op(two, m->forward_op) == 1 && count_op(two, m->gradient_op) == 1;
    CHECK(&counts, shapes, "%s: the single-pass plan has %d %s, %d forward, %d gradient steps; the other %d, %d, %d",
          label, count_op(single, m->single_op), tf_op_name(m->single_op), count_op(single, m->forward_op),
          count_op(single, m->gradient_op), count_op(two, m->single_op), count_op(two, m->forward_op),
          count_op(two, m->gradient_op));
    printf("%-4s %-32s plans: one %s step; with the loss x 1, the forward and gradient steps\n", shapes ? "ok" : "FAIL",
           label, tf_op_name(m->single_op));
  }
  tf_session *a = single ? open_session(single, backend) : NULL;
  tf_session *b = two && a ? open_session(two, backend) : NULL;
  int64_t differ = 0;
  double la = NAN, lb = NAN;
  for (int64_t step = 0; a && b && step < STEPS && differ == 0; step++) {
    CHECK_OK(&counts, feed(a, single, step));
    CHECK_OK(&counts, feed(b, two, step));
    CHECK_OK(&counts, tf_session_micro_step(a, &la));
    CHECK_OK(&counts, tf_session_micro_step(b, &lb));
    CHECK_OK(&counts, tf_session_optimizer_step(a));
    CHECK_OK(&counts, tf_session_optimizer_step(b));
    differ = tf_test_state_difference(&counts, a, single, b, two);
  }
  if (a && b) {
    const bool ok = differ == 0 && isfinite(la) && la == lb;
    CHECK(&counts, ok, "%s on %s: %" PRId64 " bytes differ; losses %.9g and %.9g", label, backend, differ, la, lb);
    /* evaluation: the forward prefix alone gives the loss and changes no weight */
    double before = NAN, again = NAN;
    CHECK_OK(&counts, feed(a, single, 99));
    CHECK_OK(&counts, feed(b, two, 99));
    CHECK_OK(&counts, tf_session_forward(a, &before));
    CHECK_OK(&counts, tf_session_forward(b, &again));
    const int64_t after_eval = tf_test_state_difference(&counts, a, single, b, two);
    CHECK(&counts, before == again && after_eval == 0,
          "%s on %s: forward-only losses %.9g and %.9g, %" PRId64 " bytes differ after it", label, backend, before,
          again, after_eval);
    printf("%-4s %-32s %-6s %d steps: parameters and AdamW state %s, loss %.6f; forward only: loss %.6f, no update\n",
           ok && after_eval == 0 ? "ok" : "FAIL", label, backend, STEPS, differ == 0 ? "equal bit for bit" : "DIFFER",
           la, before);
  }
  tf_session_destroy(a);
  tf_session_destroy(b);
  tf_plan_destroy(single);
  tf_plan_destroy(two);
  tf_graph_destroy(g1);
  tf_graph_destroy(g2);
}

int main(void) {
  static const char *const backends[] = {"cpu", "vulkan", "cuda"};
  for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
    if (!tf_backend_find(backends[i])) {
      printf("SKIP %s: not in this build\n", backends[i]);
      continue;
    }
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
      same_training(&models[m], backends[i], false);
      same_training(&models[m], backends[i], true);
    }
  }
  return tf_test_finish("loss_single_pass", &counts);
}
