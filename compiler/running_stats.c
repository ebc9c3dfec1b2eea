/* Pass 4c, running statistics: a batch_norm that tracks them (inputs 3 and 4, running_mean and
 * running_var) loses those inputs, and in a training plan gains a batch_norm_running node placed
 * right after it in the forward pass (t->follows), which updates both in place once per
 * micro-batch, as PyTorch's BatchNorm does at each forward call in training mode. Runs after remat:
 * its recomputed copies of a batch_norm lose the inputs too and update nothing, so recompute never
 * counts a micro-batch twice (torch.utils.checkpoint does). An inference plan updates nothing.
 *
 * The running statistics become buffers of role state: persistent (region parameters), written by
 * the micro-batch block, saved in checkpoints. Each must be an f32 constant of the graph that its
 * batch_norm alone reads: another reader would see it change within a step. */
#include <stdio.h>

#include "compiler/training.h"
#include "core/ops.h"

/* Every reader of constant `id` is a batch_norm (or a recompute copy of one) reading it as input
 * `slot`, and exactly one of them runs in the forward pass. */
static tf_status check_readers(const tf_training *t, int32_t n, int32_t id, int32_t slot) {
  const tf_graph *g = t->g;
  const tf_ir_tensor *tensor = &g->tensors[id];
  const char *what = slot == 3 ? "running mean" : "running variance";
  if (tensor->kind != TF_CONSTANT)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "node '%s' (batch_norm): its %s '%s' is a %s; running statistics are constants (their "
                         "initial values), updated by training",
                         g->nodes[n].name, what, tensor->name, tf_kind_name(tensor->kind));
  int32_t forward = 0;
  for (int32_t r = 0; r < g->n_nodes; r++) {
    const tf_ir_node *reader = &g->nodes[r];
    for (int32_t k = 0; k < reader->n_inputs; k++) {
      if (reader->inputs[k] != id)
        continue;
      if (reader->op != TF_OP_BATCH_NORM || k != slot)
        return tf_status_new(TF_ERR_INVALID_INPUT,
                             "node '%s' (batch_norm): its %s '%s' is also read by node '%s' (%s) as input %d; "
                             "running statistics change during training, so only their batch_norm may read them",
                             g->nodes[n].name, what, tensor->name, reader->name, tf_op_name(reader->op), (int)k);
      forward += t->phase[r] == TF_PHASE_FORWARD;
    }
  }
  if (forward != 1)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "node '%s' (batch_norm): its %s '%s' is tracked by %d batch_norm nodes; each needs its own",
                         g->nodes[n].name, what, tensor->name, (int)forward);
  return NULL;
}

/* The update of forward batch_norm n, right after it: the node (and any cast of half x before it,
 * tf_training_emit_half) follow n. */
static tf_status add_update(tf_training *t, int32_t n, int32_t mean, int32_t var) {
  const tf_ir_node *node = &t->g->nodes[n];
  const tf_attrs attrs = node->attrs;
  const int32_t inputs[3] = {node->inputs[0], mean, var};
  char name[560];
  snprintf(name, sizeof(name), "%s/running", node->name);
  const int32_t first = t->g->n_nodes;
  TF_RETURN_IF_ERROR(
      tf_training_emit_half(t, TF_OP_BATCH_NORM_RUNNING, inputs, 3, &attrs, TF_PHASE_FORWARD, name, NULL));
  for (int32_t added = first; added < t->g->n_nodes; added++)
    t->follows[added] = n;
  t->role[mean] = t->role[var] = TF_ROLE_STATE;
  return NULL;
}

static bool tracks(const tf_ir_node *node) { return node->op == TF_OP_BATCH_NORM && node->n_inputs == 5; }

tf_status tf_running_stats_pass(tf_training *t) {
  tf_graph *g = t->g;
  const int32_t n_nodes = g->n_nodes;
  t->running_stats_nodes = 0;
  /* every batch_norm checked before any is stripped: one sharing another's statistics is seen */
  for (int32_t n = 0; n < n_nodes; n++)
    if (tracks(&g->nodes[n]) && t->phase[n] == TF_PHASE_FORWARD) {
      TF_RETURN_IF_ERROR(check_readers(t, n, g->nodes[n].inputs[3], 3));
      TF_RETURN_IF_ERROR(check_readers(t, n, g->nodes[n].inputs[4], 4));
    }
  for (int32_t n = 0; n < n_nodes; n++) {
    tf_ir_node *node = &g->nodes[n];
    if (!tracks(node))
      continue;
    const int32_t mean = node->inputs[3], var = node->inputs[4];
    const bool update = t->options.training && t->phase[n] == TF_PHASE_FORWARD;
    node->n_inputs = 3;
    if (update) {
      TF_RETURN_IF_ERROR(add_update(t, n, mean, var));
      t->running_stats_nodes++;
    }
  }
  return NULL;
}
