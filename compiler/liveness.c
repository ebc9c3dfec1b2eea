/* Pass 9, liveness: each arena tensor's interval [the step that writes it, the last step that reads
 * it] over the schedule, and each step's kernel workspace. Shape-only inputs are not reads. The
 * loss (and, in inference plans, the graph's outputs) stays live to the end of the micro-batch
 * block, where the runtime reads it; the overflow check to the end of the program. */
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"

static bool in_arena(const tf_training *t, int32_t id) {
  return t->role[id] == TF_ROLE_ACTIVATION && t->g->tensors[id].kind == TF_ACTIVATION;
}

tf_status tf_liveness(tf_training *t) {
  const tf_graph *g = t->g;
  int32_t n = g->n_tensors;
  free(t->first);
  free(t->last);
  free(t->workspace_bytes);
  t->first = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  t->last = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  t->workspace_bytes = calloc((size_t)(t->n_schedule ? t->n_schedule : 1), sizeof(int64_t));
  if (!t->first || !t->last || !t->workspace_bytes)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "liveness: cannot allocate for %d tensors", n);
  for (int32_t i = 0; i < n; i++)
    t->first[i] = t->last[i] = -1;
  for (int32_t s = 0; s < t->n_schedule; s++) {
    const tf_ir_node *node = &g->nodes[t->schedule[s]];
    for (int32_t k = 0; k < node->n_outputs; k++) {
      int32_t out = node->outputs[k];
      if (in_arena(t, out))
        t->first[out] = t->last[out] = s;
    }
    for (int32_t k = 0; k < node->n_inputs; k++) {
      int32_t in = node->inputs[k];
      bool shape_only = tf_op_input_shape_only(node->op, k);
      if (!shape_only && in_arena(t, in)) {
        if (t->first[in] < 0)
          return tf_status_new(TF_ERR_INTERNAL, "step %d (%s) reads '%s' before any step writes it", s, node->name,
                               g->tensors[in].name);
        t->last[in] = s;
      }
    }
    t->workspace_bytes[s] = tf_workspace_bytes(&t->options.target, g, node);
    if (t->workspace_bytes[s] < 0)
      return tf_status_new(TF_ERR_INTERNAL, "step %d (%s): negative workspace", s, node->name);
  }
  int32_t end = t->micro_steps > 0 ? t->micro_steps - 1 : 0;
  if (t->loss >= 0 && in_arena(t, t->loss) && t->last[t->loss] < end)
    t->last[t->loss] = end;
  /* The runtime reads the overflow check after the whole optimizer block. */
  if (t->overflow_check >= 0 && in_arena(t, t->overflow_check) && t->first[t->overflow_check] >= 0)
    t->last[t->overflow_check] = t->n_schedule - 1;
  /* Training plans keep only the loss: holding, say, the logits through the backward pass would
   * cost their full size at the peak. Inference plans keep every output. */
  for (int32_t i = 0; i < g->n_outputs && !t->options.training; i++) {
    int32_t out = g->outputs[i];
    if (in_arena(t, out) && t->first[out] >= 0 && t->last[out] < end)
      t->last[out] = end;
  }
  return NULL;
}
