/* Pass 7c, updates in the backward pass (options.update_in_backward): each step of the optimizer
 * block moves into the micro-batch block, right after the last step that touches one of its
 * operands: the step that completes its gradient (the writer, or the last part added in place) and
 * the last step that reads its parameter (the backward pass reads a weight for the input gradient,
 * recompute reads it again). Its gradient then dies at once: the optimizer pass made the gradients
 * that one step writes whole arena temporaries (optimizer.c), so the gradients region no longer
 * holds them all at the end of the backward pass, which is what PyTorch's "optimizer step in
 * backward" (a post-accumulate-grad hook per parameter) saves. A parameter is updated only after
 * its last reader, and from the same gradient, so every weight ends bit for bit as in the
 * unmoved plan.
 *
 * Only plans of one micro-batch per step without clipping or loss scaling get here (compile.c
 * refuses the others): each of those needs every gradient before the first update. The zeroing of
 * a gradients-region accumulator follows its update. The plan verifier re-checks the order
 * (plan_verify.c: no step reads an updated parameter or adds to a gradient after its update). */
#include <stdlib.h>

#include "compiler/stages.h"
#include "core/ops.h"

/* The last micro-batch step that reads or writes each tensor (-1: none). */
static void last_touches(const tf_training *t, const tf_order *order, int32_t *last) {
  const tf_graph *g = t->g;
  for (int32_t i = 0; i < g->n_tensors; i++)
    last[i] = -1;
  for (int32_t s = 0; s < order->micro_steps; s++) {
    const tf_ir_node *node = &g->nodes[order->steps[s]];
    for (int32_t k = 0; k < node->n_inputs; k++)
      last[node->inputs[k]] = s;
    for (int32_t k = 0; k < node->n_outputs; k++)
      last[node->outputs[k]] = s;
  }
}

/* The micro-batch step after which optimizer node n may run: the last to touch any operand. */
static int32_t ready_after(const tf_training *t, const int32_t *last, int32_t n) {
  const tf_ir_node *node = &t->g->nodes[n];
  int32_t after = -1;
  for (int32_t k = 0; k < node->n_inputs; k++)
    after = last[node->inputs[k]] > after ? last[node->inputs[k]] : after;
  return after;
}

/* Optimizer node n placed after micro-batch step `after`: a later step of the block that touches
 * one of its operands goes no earlier (a zero after the update that read its gradient, the update
 * after the cast that widened its gradient, cast_into after the update of its master). */
static void touched_by_update(const tf_graph *g, int32_t n, int32_t after, int32_t *last) {
  const tf_ir_node *node = &g->nodes[n];
  for (int32_t k = 0; k < node->n_inputs; k++)
    last[node->inputs[k]] = after > last[node->inputs[k]] ? after : last[node->inputs[k]];
  for (int32_t k = 0; k < node->n_outputs; k++)
    last[node->outputs[k]] = after > last[node->outputs[k]] ? after : last[node->outputs[k]];
}

static tf_status check_movable(const tf_training *t, int32_t n) {
  const tf_ir_node *node = &t->g->nodes[n];
  if (node->op == TF_OP_SGD || node->op == TF_OP_ADAMW || node->op == TF_OP_ADAMW8BIT || node->op == TF_OP_ZERO ||
      node->op == TF_OP_CAST || node->op == TF_OP_CAST_INTO)
    return NULL; /* the casts: a half parameter's gradient widened, the parameter written from its master */
  return tf_status_new(TF_ERR_INTERNAL,
                       "update in backward: optimizer step '%s' (%s) cannot move into the backward "
                       "pass",
                       node->name, tf_op_name(node->op));
}

tf_status tf_order_move_updates(const tf_training *t, tf_order *order) {
  if (!t->options.update_in_backward || !t->options.training || order->micro_steps == order->n_steps ||
      order->micro_steps == 0)
    return NULL;
  const tf_graph *g = t->g;
  const int32_t n_micro = order->micro_steps, n_updates = order->n_steps - order->micro_steps;
  int32_t *last = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  int32_t *after = malloc(sizeof(int32_t) * (size_t)n_updates);
  int32_t *moved = malloc(sizeof(int32_t) * (size_t)order->n_steps);
  tf_status status = NULL;
  if (!last || !after || !moved)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "update in backward: cannot allocate for %d steps", order->n_steps);
  if (!status)
    last_touches(t, order, last);
  int32_t forward_end = 0;
  while (forward_end < n_micro && t->phase[order->steps[forward_end]] == TF_PHASE_FORWARD)
    forward_end++;
  for (int32_t u = 0; u < n_updates && !status; u++) {
    const int32_t n = order->steps[n_micro + u];
    status = check_movable(t, n);
    /* An operand no micro-batch step touches leaves the step at the end of the block. */
    after[u] = ready_after(t, last, n);
    if (after[u] < 0)
      after[u] = n_micro - 1;
    /* never inside the forward prefix, which evaluation runs alone (the fused loss head's single
     * pass writes its weight's gradient there) */
    if (after[u] < forward_end - 1)
      after[u] = forward_end - 1;
    touched_by_update(g, n, after[u], last);
  }
  /* Merge: after micro-batch step s come the optimizer steps ready after s, in their block order
   * (a stable bucket sort on `after`; fill[s] is the next free place of bucket s in `moved`). */
  int32_t count = 0;
  int32_t *fill = status ? NULL : calloc((size_t)n_micro, sizeof(int32_t));
  if (!status && !fill)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "update in backward: cannot allocate for %d steps", n_micro);
  if (!status) {
    for (int32_t u = 0; u < n_updates; u++)
      fill[after[u]]++;
    for (int32_t s = 0; s < n_micro; s++) {
      const int32_t in_bucket = fill[s];
      moved[count] = order->steps[s];
      fill[s] = count + 1;
      count += 1 + in_bucket;
    }
    for (int32_t u = 0; u < n_updates; u++)
      moved[fill[after[u]]++] = order->steps[n_micro + u];
  }
  free(fill);
  if (!status && count != order->n_steps)
    status = tf_status_new(TF_ERR_INTERNAL, "update in backward: placed %d of %d steps", count, order->n_steps);
  if (!status) {
    for (int32_t s = 0; s < count; s++)
      order->steps[s] = moved[s];
    order->micro_steps = count;
  }
  free(last);
  free(after);
  free(moved);
  return status;
}
