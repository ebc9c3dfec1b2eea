/* GELU's derivative from its forward evaluation (cpu target, training plans): autodiff gives
 * gelu(x) -> y in the forward pass and gelu_grad(x, dy) -> dx in the backward, which evaluates the
 * whole function (an exponential, erfc's polynomial, a division) again for its derivative. Where
 * those two nodes are the only readers of an f32 x, this pass makes the forward node
 * gelu_pair(x) -> (y, dydx) and the backward one mul(dy, dydx): the kernels compute y and dydx as
 * gelu and gelu_grad did, and gelu_grad's dx was dy times that dydx, so every value keeps its bits.
 * dydx takes x's place between the passes (x now dies at the forward node), so the plan's bytes
 * do not change; the step loses one evaluation per element (35% of the GELU's time on a Zen 2
 * core: bench/results/2026-12-05-cpu-zen2-gelu-pair). On a GPU the GELU is bound by memory, where
 * the second output would cost more than the evaluation saves: by default (TF_GELU_PAIR_AUTO) the
 * cpu target only.
 *
 * It runs after recompute (compile.c), which assumes one output per forward node: a recomputed
 * gelu pairs with its gelu_grad the same way. */
#include <stdio.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "graph/passes.h"

/* The gelu that reads x beside gelu_grad node `n`, when those two are x's only readers and x is an
 * f32 activation no graph output names; else -1. */
static int32_t paired_gelu(const tf_training *t, int32_t n) {
  const tf_graph *g = t->g;
  const tf_ir_node *grad = &g->nodes[n];
  const int32_t x = grad->inputs[0];
  if (g->tensors[x].dtype != TF_F32 || t->role[x] != TF_ROLE_ACTIVATION || tf_training_readers(g, x) != 2)
    return -1;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == x)
      return -1;
  for (int32_t f = 0; f < g->n_nodes; f++) {
    const tf_ir_node *node = &g->nodes[f];
    if (f == n || node->op != TF_OP_GELU || node->inputs[0] != x)
      continue;
    const bool same_form = node->attrs.u.gelu.approximate == grad->attrs.u.gelu.approximate;
    return same_form && node->precision == TF_PRECISION_INHERIT && t->phase[f] != TF_PHASE_BACKWARD ? f : -1;
  }
  return -1;
}

/* gelu node f becomes gelu_pair with a second output, dydx; gelu_grad node n becomes mul(dy, dydx). */
static tf_status pair(tf_training *t, int32_t f, int32_t n) {
  char name[512];
  snprintf(name, sizeof(name), "%s:derivative", t->g->nodes[f].name);
  tf_status status = NULL;
  const int32_t x = t->g->nodes[f].inputs[0];
  const int32_t derivative = tf_training_tensor_like(t, x, TF_ROLE_ACTIVATION, name, &status);
  if (status)
    return status;
  tf_graph *g = t->g; /* the arrays may have moved */
  tf_ir_node *gelu = &g->nodes[f];
  gelu->op = TF_OP_GELU_PAIR;
  gelu->outputs[gelu->n_outputs++] = derivative;
  g->tensors[derivative].producer = f;
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, f, true));
  tf_ir_node *grad = &g->nodes[n];
  grad->op = TF_OP_MUL;
  grad->inputs[0] = grad->inputs[1]; /* dy: gelu_grad's dx was dy times the derivative */
  grad->inputs[1] = derivative;
  memset(&grad->attrs, 0, sizeof(grad->attrs));
  return tf_shapes_infer_node(g, n, true);
}

tf_status tf_gelu_pair_pass(tf_training *t) {
  /* half storage of the saved activations would round dydx rather than x: keep gelu_grad there */
  const tf_gelu_pair choice = t->options.gelu_pair;
  const bool wanted =
      choice == TF_GELU_PAIR_ON || (choice == TF_GELU_PAIR_AUTO && t->options.target.kind == TF_TARGET_CPU);
  if (!t->options.training || !wanted || t->config.precision != TF_PRECISION_F32)
    return NULL;
  for (int32_t n = 0; n < t->g->n_nodes; n++) {
    if (t->g->nodes[n].op != TF_OP_GELU_GRAD)
      continue;
    const int32_t f = paired_gelu(t, n);
    if (f >= 0)
      TF_RETURN_IF_ERROR(pair(t, f, n));
  }
  return NULL;
}
