/* Pass 9, liveness: each arena tensor's interval [the step that writes it, the last step that reads
 * it] over the schedule, and each step's kernel workspace. Shape-only inputs are not reads. The
 * loss (and, in inference plans, the graph's outputs) stays live to the end of the micro-batch
 * block, where the runtime reads it; the overflow check to the end of the program. */
#include <stdlib.h>
#include <string.h>

#include "compiler/stages.h"
#include "core/ops.h"

static bool in_arena(const tf_training *t, int32_t id) { return tf_training_in_arena(t, id); }

tf_status tf_lifetimes_find(const tf_training *t, const tf_order *order, tf_lifetimes *lifetimes) {
  const tf_graph *g = t->g;
  int32_t n = g->n_tensors;
  tf_lifetimes_free(lifetimes);
  int32_t *first = lifetimes->first = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  int32_t *last = lifetimes->last = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  int64_t *workspace = lifetimes->workspace_bytes =
      calloc((size_t)(order->n_steps ? order->n_steps : 1), sizeof(int64_t));
  if (!first || !last || !workspace)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "liveness: cannot allocate for %d tensors", n);
  for (int32_t i = 0; i < n; i++)
    first[i] = last[i] = -1;
  const tf_target host = tf_target_default(TF_TARGET_CPU);
  for (int32_t s = 0; s < order->n_steps; s++) {
    const tf_ir_node *node = &g->nodes[order->steps[s]];
    for (int32_t k = 0; k < node->n_outputs; k++) {
      int32_t out = node->outputs[k];
      if (in_arena(t, out))
        first[out] = last[out] = s;
    }
    for (int32_t k = 0; k < node->n_inputs; k++) {
      int32_t in = node->inputs[k];
      bool shape_only = tf_op_input_shape_only(node->op, k);
      if (!shape_only && in_arena(t, in)) {
        if (first[in] < 0)
          return tf_status_new(TF_ERR_INTERNAL, "step %d (%s) reads '%s' before any step writes it", s, node->name,
                               g->tensors[in].name);
        last[in] = s;
      }
    }
    /* An offloaded update runs on the host (compiler/offload.c), and with the gradients offloaded so does
     * the whole optimizer block (and below ZeRO stage 2 their accumulation): the CPU kernel's scratch,
     * not the target's. */
    const tf_phase phase = t->phase[order->steps[s]];
    const bool on_host =
        ((t->options.offload_optimizer || t->options.offload_gradients) && tf_op_is_update(node->op)) ||
        (t->options.offload_gradients && phase == TF_PHASE_OPTIMIZER) ||
        (tf_training_host_accumulates(&t->options) && phase == TF_PHASE_ACCUMULATE);
    workspace[s] = tf_workspace_bytes(on_host ? &host : &t->options.target, g, node);
    if (workspace[s] < 0)
      return tf_status_new(TF_ERR_INTERNAL, "step %d (%s): negative workspace", s, node->name);
  }
  int32_t end = order->micro_steps > 0 ? order->micro_steps - 1 : 0;
  if (t->loss >= 0 && in_arena(t, t->loss) && last[t->loss] < end)
    last[t->loss] = end;
  /* The runtime reads the overflow check after the whole optimizer block. */
  if (t->overflow_check >= 0 && in_arena(t, t->overflow_check) && first[t->overflow_check] >= 0)
    last[t->overflow_check] = order->n_steps - 1;
  /* Training plans keep only the loss: holding, say, the logits through the backward pass would
   * cost their full size at the peak. Inference plans keep every output. */
  for (int32_t i = 0; i < g->n_outputs && !t->options.training; i++) {
    int32_t out = g->outputs[i];
    if (in_arena(t, out) && first[out] >= 0 && last[out] < end)
      last[out] = end;
  }
  return NULL;
}

void tf_lifetimes_free(tf_lifetimes *lifetimes) {
  free(lifetimes->first);
  free(lifetimes->last);
  free(lifetimes->workspace_bytes);
  lifetimes->first = lifetimes->last = NULL;
  lifetimes->workspace_bytes = NULL;
}
