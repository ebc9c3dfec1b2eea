/* Pass 5b, offload activations (options.offload_activations; the activation offloading of
 * ZeRO-Offload and Unsloth): each activation the forward pass keeps for the backward pass waits in
 * host memory instead of the arena. Runs after precision, so it moves what recompute keeps (the
 * checkpoints) in the type precision stores it in.
 *
 * For each such activation x: a copy down, reshape(x) to x's own shape into a tensor in host memory
 * (t->host), placed right after x's producer (t->follows) in the forward pass; and a copy back, a
 * recompute-phase reshape of the host tensor into a new arena tensor, which the schedule places just
 * before x's first backward reader; the backward readers read it instead of x (the recompute readers
 * read a second copy back, made just before theirs, as precision.c does for its casts back). x then
 * dies with its last forward reader. The copies move bytes only, so the numbers are those of the
 * plan without them; compiler/offload.c makes them host steps. Not moved: the loss node's inputs (the
 * first backward step reads them: a copy would only add the transfer) and the gradients a fused loss
 * head's single pass writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/linear_loss.h"
#include "core/ops.h"

/* Whether x is an input of the loss node. */
static bool feeds_loss(const tf_training *t, int32_t x) {
  const int32_t loss_node = t->loss >= 0 ? t->g->tensors[t->loss].producer : -1;
  if (loss_node < 0 || x == t->loss)
    return x == t->loss;
  const tf_ir_node *node = &t->g->nodes[loss_node];
  for (int32_t k = 0; k < node->n_inputs; k++)
    if (node->inputs[k] == x)
      return true;
  return false;
}

/* Whether activation x is kept for the backward pass and moves: written by a forward node (not a
 * fused head's gradient), in the arena, read by a backward or recompute node among [0, n_nodes). */
static bool moves(const tf_training *t, int32_t x, int32_t n_nodes) {
  const tf_graph *g = t->g;
  const int32_t producer = g->tensors[x].producer;
  if (producer < 0 || t->phase[producer] != TF_PHASE_FORWARD || !tf_training_in_arena(t, x) || feeds_loss(t, x))
    return false;
  if (tf_linear_loss_is_train(g->nodes[producer].op) && g->nodes[producer].outputs[0] != x)
    return false;
  for (int32_t n = 0; n < n_nodes; n++)
    if (tf_training_reads(t, n, x, (1u << TF_PHASE_BACKWARD) | (1u << TF_PHASE_RECOMPUTE)))
      return true;
  return false;
}

/* The reshape of x to its own shape (a copy of its bytes). */
static tf_attrs same_shape(const tf_ir_tensor *x) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_SHAPE;
  attrs.u.shape.shape.rank = x->rank;
  for (int32_t d = 0; d < x->rank; d++)
    attrs.u.shape.shape.dims[d] = (tf_dim){x->shape[d], -1};
  return attrs;
}

/* A copy of host tensor `kept` back into the arena, for the readers of activation x (copy_back_for). */
typedef struct copy_back {
  int32_t x, kept;
  const char *suffix;
} copy_back;

static tf_status make_copy_back(tf_training *t, const void *context, int32_t *back) {
  const copy_back *c = context;
  char name[600];
  snprintf(name, sizeof(name), "%s/from_host%s", t->g->tensors[c->x].name, c->suffix);
  const tf_attrs attrs = same_shape(&t->g->tensors[c->kept]);
  int32_t kept = c->kept;
  return tf_training_emit(t, TF_OP_RESHAPE, &kept, 1, &attrs, TF_PHASE_RECOMPUTE, name, back);
}

/* The readers of x among nodes [0, n_nodes) of a phase in `phases` read a new copy of host tensor
 * `kept` back in the arena (a recompute node: placed just before the first of them). */
static tf_status copy_back_for(tf_training *t, int32_t x, int32_t kept, int32_t n_nodes, uint32_t phases,
                               const char *suffix) {
  const copy_back c = {x, kept, suffix};
  int32_t back;
  return tf_training_reroute_reads(t, x, n_nodes, phases, make_copy_back, &c, &back);
}

/* Moves x: the copy down after its producer, the copies back for its backward and recompute readers. */
static tf_status move(tf_training *t, int32_t x, int32_t n_nodes) {
  tf_graph *g = t->g;
  char name[600];
  snprintf(name, sizeof(name), "%s/in_host", g->tensors[x].name);
  const tf_attrs attrs = same_shape(&g->tensors[x]);
  int32_t kept;
  TF_RETURN_IF_ERROR(tf_training_emit(t, TF_OP_RESHAPE, &x, 1, &attrs, TF_PHASE_FORWARD, name, &kept));
  t->host[kept] = true;
  /* right after x's producer, or after the node that one follows (precision's cast down follows the
   * activation it stores: the schedules place followers of a node, not followers of followers) */
  int32_t leader = g->tensors[x].producer;
  while (t->follows[leader] >= 0)
    leader = t->follows[leader];
  t->follows[g->tensors[kept].producer] = leader;
  TF_RETURN_IF_ERROR(copy_back_for(t, x, kept, n_nodes, 1u << TF_PHASE_BACKWARD, ""));
  return copy_back_for(t, x, kept, n_nodes, 1u << TF_PHASE_RECOMPUTE, "_for_recompute");
}

tf_status tf_offload_activations_pass(tf_training *t) {
  if (!t->options.offload_activations || !t->options.training)
    return NULL;
  const int32_t n_nodes = t->g->n_nodes, n_tensors = t->g->n_tensors;
  int32_t moved = 0;
  for (int32_t x = 0; x < n_tensors; x++) {
    if (!moves(t, x, n_nodes))
      continue;
    TF_RETURN_IF_ERROR(move(t, x, n_nodes));
    moved++;
  }
  if (moved == 0)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "--offload activations: graph '%s' keeps no activation from the forward pass for the "
                         "backward pass but the loss head's inputs (nothing to move)",
                         t->g->name);
  return NULL;
}
