/* Pass 2b, master weights (options.param_dtype bf16 or f16): every f32 parameter is stored in the
 * half type and read as before: each reader gets its own cast of it back to f32 (exact), so the
 * forward pass computes on the rounded weights in f32 and its activations keep their dtypes. A
 * reader that autocast (which runs before) made cast the weight down to this very type reads the
 * stored parameter instead, with no copy at all. The gradient of a half parameter is half (its
 * casts' backward), and a trained one keeps an f32 master copy in its optimizer state (optimizer.c,
 * `master(name)`, drawn from the parameter's own initialiser at full precision): its update
 * changes the master from the widened gradient, then writes the parameter from it (cast_into), as
 * DeepSpeed's bf16 training does. Runs on the bound graph after autocast and fuse_loss (the fused
 * head reads the weight like any reader), before half_ops.
 *
 * A graph's own half parameters (a bf16 model) are trained through masters too. Data parallel plans
 * sum the gradients in f32 (optimizer.c); ZeRO shards the masters as optimizer state, and each
 * owner writes and sends its range of the parameter (compiler/zero.c); offloading moves the masters
 * to host memory with the moments, and the host's cast_into writes the parameter it sends up. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "graph/passes.h"

bool tf_master_weights_needed(const tf_training *t, int32_t param) {
  const tf_ir_tensor *p = &t->g->tensors[param];
  return p->kind == TF_PARAMETER && (p->dtype == TF_F16 || p->dtype == TF_BF16);
}

/* Node n casts converted parameter x to x's new type (autocast's copy for a half product): an
 * identity now. */
static bool casts_to_own_type(const tf_graph *g, int32_t n, const bool *converted) {
  const tf_ir_node *node = &g->nodes[n];
  const int32_t x = node->n_inputs == 1 ? node->inputs[0] : -1;
  return node->op == TF_OP_CAST && x >= 0 && converted[x] && node->attrs.u.cast.to == g->tensors[x].dtype;
}

/* Node n's reads: of an identity cast's output (`stored` says whose), the parameter itself; of a
 * converted parameter, each through its own new cast to f32 (pushed on the order). */
static tf_status rewire_reads(tf_training *t, int32_t n, const bool *converted, const int32_t *stored,
                              tf_node_order *order) {
  tf_graph *g = t->g;
  for (int32_t k = 0; k < g->nodes[n].n_inputs; k++) {
    const int32_t x = g->nodes[n].inputs[k];
    if (x >= 0 && stored[x] >= 0) {
      g->nodes[n].inputs[k] = stored[x];
      continue;
    }
    if (x < 0 || !converted[x] || tf_op_input_shape_only(g->nodes[n].op, k))
      continue;
    char name[600];
    snprintf(name, sizeof(name), "%s/input%d_f32", g->nodes[n].name, k);
    int32_t wide;
    TF_RETURN_IF_ERROR(tf_training_emit_cast(t, x, TF_F32, TF_PHASE_FORWARD, name, &wide));
    g->nodes[n].inputs[k] = wide;
    TF_RETURN_IF_ERROR(tf_node_order_push(order, g->tensors[wide].producer, "master weights"));
  }
  return tf_node_order_push(order, n, "master weights");
}

/* The new id of node `old` after tf_ir_reorder_nodes(order). */
static int32_t moved_to(const tf_node_order *order, int32_t old) {
  for (int32_t n = 0; n < order->n; n++)
    if (order->ids[n] == old)
      return n;
  return -1;
}

/* Every reader of a converted parameter rewired: identity casts bypassed (then removed), the others
 * reading f32 copies. */
static tf_status rewire(tf_training *t, const bool *converted) {
  TF_RETURN_IF_ERROR(tf_training_reserve(t));
  tf_graph *g = t->g;
  const int32_t n_nodes = g->n_nodes, n_tensors = g->n_tensors;
  int32_t *identities = malloc(sizeof(int32_t) * (size_t)(n_nodes ? n_nodes : 1));
  int32_t *stored = malloc(sizeof(int32_t) * (size_t)(n_tensors ? n_tensors : 1));
  tf_node_order order = {NULL, 0, 0};
  tf_status status = identities && stored ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "master weights: out of memory");
  int32_t n_identities = 0;
  for (int32_t i = 0; i < n_tensors && !status; i++)
    stored[i] = -1;
  for (int32_t n = 0; n < n_nodes && !status; n++)
    if (casts_to_own_type(g, n, converted)) {
      stored[g->nodes[n].outputs[0]] = g->nodes[n].inputs[0];
      identities[n_identities++] = n;
    }
  for (int32_t n = 0; n < n_nodes && !status; n++)
    status = casts_to_own_type(g, n, converted) ? tf_node_order_push(&order, n, "master weights")
                                                : rewire_reads(t, n, converted, stored, &order);
  if (!status && order.n != g->n_nodes)
    status = tf_status_new(TF_ERR_INTERNAL, "master weights: ordered %d of %d nodes", order.n, g->n_nodes);
  if (!status)
    status = tf_ir_reorder_nodes(g, order.ids);
  for (int32_t i = 0; i < n_identities && !status; i++)
    identities[i] = moved_to(&order, identities[i]);
  if (!status && n_identities > 0)
    status = tf_training_remove_nodes(t, identities, n_identities);
  free(order.ids);
  free(identities);
  free(stored);
  return status;
}

tf_status tf_master_weights_pass(tf_training *t) {
  tf_graph *g = t->g;
  t->half_parameters = 0;
  if (t->options.param_dtype == TF_F32)
    return NULL;
  bool *converted = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(bool));
  if (!converted)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "master weights: cannot allocate for %d tensors", g->n_tensors);
  const int64_t size = tf_dtype_size(t->options.param_dtype);
  for (int32_t i = 0; i < g->n_tensors; i++) {
    tf_ir_tensor *p = &g->tensors[i];
    if (p->kind != TF_PARAMETER || p->dtype != TF_F32)
      continue;
    p->dtype = t->options.param_dtype;
    p->bytes = p->bytes / 4 * size;
    converted[i] = true;
    t->half_parameters++;
  }
  tf_status status = t->half_parameters > 0 ? rewire(t, converted) : NULL;
  free(converted);
  return status;
}
