/* Pass 7, schedule: the execution order. The micro-batch block is the forward pass in model order,
 * then the backward pass in the order autodiff emitted it (reverse model order), with each
 * gradient accumulation placed right after the node that completes that gradient, so the
 * temporary dies at once (and so is each node that names another in t->follows: precision's casts). Recompute nodes
 * (remat) are placed just before their first reader. The optimizer block follows. */
#include <stdbool.h>
#include <stdlib.h>

#include "compiler/stages.h"

/* The follower lists of tf_order_model: per node, the accumulates and t->follows nodes placed after it. */
typedef struct followers {
  const int32_t *first, *next;
} followers;

/* Appends the recompute nodes that node n's inputs need (depth first), each followed by the nodes
 * that follow it (precision's cast down of a recomputed activation), then nothing else. */
static void place_recompute(const tf_training *t, int32_t n, followers f, bool *placed, int32_t *schedule,
                            int32_t *count) {
  const tf_ir_node *node = &t->g->nodes[n];
  for (int32_t k = 0; k < node->n_inputs; k++) {
    int32_t producer = t->g->tensors[node->inputs[k]].producer;
    if (producer >= 0 && t->phase[producer] == TF_PHASE_RECOMPUTE && !placed[producer]) {
      place_recompute(t, producer, f, placed, schedule, count);
      if (placed[producer])
        continue; /* a follower, placed with the node it follows */
      placed[producer] = true;
      schedule[(*count)++] = producer;
      for (int32_t a = f.first[producer]; a >= 0; a = f.next[a])
        if (!placed[a] && t->phase[a] == TF_PHASE_RECOMPUTE) {
          placed[a] = true;
          schedule[(*count)++] = a;
        }
    }
  }
}

/* Appends the nodes placed right after node n (its accumulates, the nodes that follow it), each
 * followed by its own (a half gradient's widening cast, then the accumulate that reads it). */
static void place_followers(int32_t n, followers f, int32_t *schedule, int32_t *count) {
  for (int32_t a = f.first[n]; a >= 0; a = f.next[a]) {
    schedule[(*count)++] = a;
    place_followers(a, f, schedule, count);
  }
}

tf_status tf_order_model(const tf_training *t, tf_order *out) {
  const tf_graph *g = t->g;
  tf_order_free(out);
  out->steps = malloc(sizeof(int32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
  /* For each node, the accumulate nodes whose source it produces (as a linked list through next). */
  int32_t *first_accumulate = malloc(sizeof(int32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
  int32_t *next = malloc(sizeof(int32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
  if (!out->steps || !first_accumulate || !next) {
    free(first_accumulate);
    free(next);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "schedule: cannot allocate for %d nodes", g->n_nodes);
  }
  bool *placed = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(bool));
  if (!placed) {
    free(first_accumulate);
    free(next);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "schedule: cannot allocate for %d nodes", g->n_nodes);
  }
  for (int32_t n = 0; n < g->n_nodes; n++)
    first_accumulate[n] = next[n] = -1;
  for (int32_t n = g->n_nodes - 1; n >= 0; n--) {
    int32_t producer = t->follows[n];
    if (producer < 0 && t->phase[n] == TF_PHASE_ACCUMULATE)
      producer = g->tensors[g->nodes[n].inputs[1]].producer;
    if (producer < 0)
      continue; /* a gradient that is a constant: schedule it first, below */
    next[n] = first_accumulate[producer];
    first_accumulate[producer] = n;
  }
  int32_t count = 0;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (t->phase[n] == TF_PHASE_ACCUMULATE && g->tensors[g->nodes[n].inputs[1]].producer < 0)
      out->steps[count++] = n;
  }
  for (int32_t n = 0; n < g->n_nodes; n++) {
    tf_phase phase = t->phase[n];
    if (phase == TF_PHASE_ACCUMULATE || phase == TF_PHASE_OPTIMIZER || phase == TF_PHASE_RECOMPUTE ||
        t->follows[n] >= 0)
      continue;
    place_recompute(t, n, (followers){first_accumulate, next}, placed, out->steps, &count);
    out->steps[count++] = n;
    place_followers(n, (followers){first_accumulate, next}, out->steps, &count);
  }
  out->micro_steps = count;
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (t->phase[n] == TF_PHASE_OPTIMIZER)
      out->steps[count++] = n;
  out->n_steps = count;
  free(first_accumulate);
  free(next);
  free(placed);
  if (count != g->n_nodes)
    return tf_status_new(TF_ERR_INTERNAL, "schedule placed %d of %d nodes", count, g->n_nodes);
  return NULL;
}

void tf_order_free(tf_order *order) {
  free(order->steps);
  order->steps = NULL;
  order->n_steps = order->micro_steps = 0;
}
