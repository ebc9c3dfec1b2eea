/* Pass 7b, memory-aware schedule: another valid order of the micro-batch block, chosen by greedy
 * list scheduling on bytes. Among the nodes whose inputs are ready, the next is the one whose
 * outputs take the fewest arena bytes minus the bytes of the inputs it reads last (ties: the model
 * order), as torch.compile's memory-aware reordering does. As in the model order (schedule.c),
 * the forward pass stays a prefix of the block, recompute nodes are pulled in just before the node
 * that first needs them, each accumulate follows the node that completes its gradient part, and
 * the optimizer block follows unchanged.
 * The compiler keeps whichever order packs into the smaller arena (compile.c), so this order
 * never raises a peak. */
#include <stdlib.h>
#include <string.h>

#include "compiler/stages.h"
#include "core/ops.h"

typedef struct scheduler {
  const tf_training *t;
  const tf_graph *g;
  int32_t *steps;            /* the order being written */
  bool *placed;              /* per node */
  int32_t *readers_left;     /* per tensor: reads by nodes not yet placed */
  int32_t *first_accumulate; /* per node: the accumulates whose part it writes and the nodes that follow
                              * it (t->follows), a list through next */
  int32_t *next;
  int32_t *previous_on_accumulator; /* per accumulate node: the one before it on the same accumulator, or -1 */
  int32_t *next_on_accumulator;     /* ... and the one after it, or -1 */
  bool *part_written;               /* per accumulate node: its part exists (its producer is placed) */
  int32_t *waiting;                 /* per candidate node: unplaced effective producers */
  int32_t *dependents;              /* CSR: effective dependents of each node */
  int32_t *dependents_start;
  int32_t *fill;  /* per node: dependents recorded so far (while building the CSR) */
  int32_t *ready; /* candidate nodes whose effective producers are all placed */
  int32_t n_ready;
  int32_t *stamp; /* per node: visit marks for the depth-first walks */
  int32_t stamp_now;
  int32_t count;
} scheduler;

static bool in_arena(const tf_training *t, int32_t id) { return tf_training_in_arena(t, id); }

static bool is_candidate(const tf_training *t, int32_t n) {
  tf_phase phase = t->phase[n];
  return phase != TF_PHASE_OPTIMIZER && phase != TF_PHASE_RECOMPUTE && phase != TF_PHASE_ACCUMULATE &&
         t->follows[n] < 0;
}

static bool reads(tf_op op, int32_t k) { return !tf_op_input_shape_only(op, k); }

/* Calls visit(s, producer, context) for each candidate or placed-anywhere node that node n waits
 * on: its inputs' producers, looking through recompute nodes to what they read. */
static void effective_producers(scheduler *s, int32_t n, void (*visit)(scheduler *, int32_t, int32_t), int32_t of) {
  const tf_ir_node *node = &s->g->nodes[n];
  for (int32_t k = 0; k < node->n_inputs; k++) {
    int32_t producer = s->g->tensors[node->inputs[k]].producer;
    if (producer < 0 || s->stamp[producer] == s->stamp_now)
      continue;
    s->stamp[producer] = s->stamp_now;
    if (s->t->phase[producer] == TF_PHASE_RECOMPUTE)
      effective_producers(s, producer, visit, of);
    else
      visit(s, producer, of);
  }
}

static void count_producer(scheduler *s, int32_t producer, int32_t of) {
  s->waiting[of]++;
  s->dependents_start[producer + 1]++;
}

static void record_dependent(scheduler *s, int32_t producer, int32_t of) {
  s->dependents[s->dependents_start[producer] + s->fill[producer]++] = of;
}

static int64_t pulled_bytes(scheduler *s, int32_t n) {
  int64_t bytes = 0;
  const tf_ir_node *node = &s->g->nodes[n];
  for (int32_t k = 0; k < node->n_inputs; k++) {
    int32_t producer = s->g->tensors[node->inputs[k]].producer;
    if (producer < 0 || s->placed[producer] || s->t->phase[producer] != TF_PHASE_RECOMPUTE ||
        s->stamp[producer] == s->stamp_now)
      continue;
    s->stamp[producer] = s->stamp_now;
    bytes += pulled_bytes(s, producer);
    for (int32_t o = 0; o < s->g->nodes[producer].n_outputs; o++)
      bytes += s->g->tensors[s->g->nodes[producer].outputs[o]].bytes;
  }
  return bytes;
}

/* The bytes node n (with the recompute nodes it pulls) adds to the arena minus those it frees. */
static int64_t score(scheduler *s, int32_t n) {
  const tf_ir_node *node = &s->g->nodes[n];
  const tf_op op = node->op;
  s->stamp_now++;
  int64_t bytes = pulled_bytes(s, n);
  for (int32_t o = 0; o < node->n_outputs; o++) {
    int32_t out = node->outputs[o];
    /* A gradient part read only by its accumulate dies right after it: no lasting bytes. */
    bool only_accumulated = s->first_accumulate[n] >= 0 && s->readers_left[out] == 1;
    if (in_arena(s->t, out) && !only_accumulated)
      bytes += s->g->tensors[out].bytes;
  }
  for (int32_t k = 0; k < node->n_inputs; k++) {
    int32_t in = node->inputs[k];
    if (!reads(op, k) || !in_arena(s->t, in) || in == s->t->loss)
      continue;
    int32_t here = 0;
    for (int32_t j = 0; j < node->n_inputs; j++)
      here += node->inputs[j] == in && reads(op, j);
    bool first_mention = true;
    for (int32_t j = 0; j < k; j++)
      first_mention = first_mention && node->inputs[j] != in;
    if (first_mention && s->readers_left[in] == here)
      bytes -= s->g->tensors[in].bytes;
  }
  return bytes;
}

static void place(scheduler *s, int32_t n);

/* Places the recompute nodes that node n reads (depth first), then n itself. */
static void place_with_recompute(scheduler *s, int32_t n) {
  const tf_ir_node *node = &s->g->nodes[n];
  for (int32_t k = 0; k < node->n_inputs; k++) {
    int32_t producer = s->g->tensors[node->inputs[k]].producer;
    if (producer >= 0 && !s->placed[producer] && s->t->phase[producer] == TF_PHASE_RECOMPUTE)
      place_with_recompute(s, producer);
  }
  if (!s->placed[n]) /* a follower is placed with the node it follows (place) */
    place(s, n);
}

static void place(scheduler *s, int32_t n) {
  const tf_ir_node *node = &s->g->nodes[n];
  const tf_op op = node->op;
  s->placed[n] = true;
  s->steps[s->count++] = n;
  for (int32_t k = 0; k < node->n_inputs; k++)
    if (reads(op, k))
      s->readers_left[node->inputs[k]]--;
  /* Accumulates keep their order on each accumulator (the order of floating-point additions, so
   * every schedule gives bit-identical gradients): one whose predecessor waits is placed with it. */
  for (int32_t a = s->first_accumulate[n]; a >= 0; a = s->next[a]) {
    if (s->t->phase[a] != TF_PHASE_ACCUMULATE) {
      if (!s->placed[a])
        place_with_recompute(s, a); /* a node that follows n (t->follows) */
      continue;
    }
    s->part_written[a] = true;
    int32_t before = s->previous_on_accumulator[a];
    if (!s->placed[a] && (before < 0 || s->placed[before]))
      place(s, a);
  }
  int32_t after = s->next_on_accumulator[n]; /* n: an accumulate, or the step writing the accumulator */
  if (after >= 0 && !s->placed[after] && s->part_written[after])
    place(s, after);
  for (int32_t d = s->dependents_start[n]; d < s->dependents_start[n + 1]; d++) {
    int32_t dependent = s->dependents[d];
    if (--s->waiting[dependent] == 0)
      s->ready[s->n_ready++] = dependent;
  }
}

/* Builds the dependency structure: waiting counts, effective dependents (CSR), accumulate lists,
 * reader counts. Returns false when out of memory. */
static bool prepare(scheduler *s) {
  const tf_graph *g = s->g;
  size_t nodes = (size_t)(g->n_nodes ? g->n_nodes : 1), tensors = (size_t)(g->n_tensors ? g->n_tensors : 1);
  s->placed = calloc(nodes, sizeof(bool));
  s->readers_left = calloc(tensors, sizeof(int32_t));
  s->first_accumulate = malloc(nodes * sizeof(int32_t));
  s->next = malloc(nodes * sizeof(int32_t));
  s->waiting = calloc(nodes, sizeof(int32_t));
  s->dependents_start = calloc(nodes + 1, sizeof(int32_t));
  s->ready = malloc(nodes * sizeof(int32_t));
  s->stamp = calloc(nodes, sizeof(int32_t));
  s->previous_on_accumulator = malloc(nodes * sizeof(int32_t));
  s->next_on_accumulator = malloc(nodes * sizeof(int32_t));
  s->part_written = calloc(nodes, sizeof(bool));
  int32_t *last_on = malloc(tensors * sizeof(int32_t));
  s->fill = calloc(nodes, sizeof(int32_t));
  if (!s->placed || !s->readers_left || !s->first_accumulate || !s->next || !s->waiting || !s->dependents_start ||
      !s->ready || !s->stamp || !s->previous_on_accumulator || !s->next_on_accumulator || !s->part_written ||
      !last_on || !s->fill) {
    free(last_on);
    return false;
  }
  for (size_t i = 0; i < tensors; i++)
    last_on[i] = -1;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    s->previous_on_accumulator[n] = s->next_on_accumulator[n] = -1;
    if (s->t->phase[n] != TF_PHASE_ACCUMULATE)
      continue;
    /* The first accumulate on an accumulator that a step writes (k = 1: the gradient written in
     * place, optimizer.c) waits for that step. */
    int32_t accumulator = g->nodes[n].inputs[0];
    int32_t before = last_on[accumulator] >= 0 ? last_on[accumulator] : g->tensors[accumulator].producer;
    s->previous_on_accumulator[n] = before;
    if (before >= 0)
      s->next_on_accumulator[before] = n;
    last_on[accumulator] = n;
  }
  free(last_on);
  for (int32_t n = 0; n < g->n_nodes; n++) {
    s->first_accumulate[n] = s->next[n] = -1;
    const tf_op op = g->nodes[n].op;
    for (int32_t k = 0; k < g->nodes[n].n_inputs; k++)
      if (reads(op, k))
        s->readers_left[g->nodes[n].inputs[k]]++;
  }
  for (int32_t n = g->n_nodes - 1; n >= 0; n--) {
    int32_t producer = s->t->follows[n];
    if (producer < 0 && s->t->phase[n] == TF_PHASE_ACCUMULATE)
      producer = g->tensors[g->nodes[n].inputs[1]].producer;
    if (producer >= 0) {
      s->next[n] = s->first_accumulate[producer];
      s->first_accumulate[producer] = n;
    }
  }
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (!is_candidate(s->t, n))
      continue;
    s->stamp_now++;
    effective_producers(s, n, count_producer, n);
  }
  for (int32_t n = 0; n < g->n_nodes; n++)
    s->dependents_start[n + 1] += s->dependents_start[n];
  s->dependents = malloc(sizeof(int32_t) * (size_t)(s->dependents_start[g->n_nodes] + 1));
  if (!s->dependents)
    return false;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (!is_candidate(s->t, n))
      continue;
    s->stamp_now++;
    effective_producers(s, n, record_dependent, n);
  }
  return true;
}

static void release(scheduler *s) {
  free(s->placed);
  free(s->readers_left);
  free(s->first_accumulate);
  free(s->next);
  free(s->waiting);
  free(s->dependents);
  free(s->dependents_start);
  free(s->ready);
  free(s->stamp);
  free(s->previous_on_accumulator);
  free(s->next_on_accumulator);
  free(s->part_written);
  free(s->fill);
}

tf_status tf_order_memory_aware(const tf_training *t, tf_order *out) {
  const tf_graph *g = t->g;
  scheduler s;
  memset(&s, 0, sizeof(s));
  s.t = t;
  s.g = g;
  tf_order_free(out);
  out->steps = s.steps = malloc(sizeof(int32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
  if (!out->steps || !prepare(&s)) {
    release(&s);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "schedule: cannot allocate for %d nodes", g->n_nodes);
  }
  /* Accumulates of constant gradients (no producer) first, as in the model order. */
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (t->phase[n] == TF_PHASE_ACCUMULATE && g->tensors[g->nodes[n].inputs[1]].producer < 0) {
      s.part_written[n] = true;
      if (s.previous_on_accumulator[n] < 0 || s.placed[s.previous_on_accumulator[n]])
        place(&s, n);
    }
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (is_candidate(t, n) && s.waiting[n] == 0)
      s.ready[s.n_ready++] = n;
  int32_t forward_left = 0;
  for (int32_t n = 0; n < g->n_nodes; n++)
    forward_left += t->phase[n] == TF_PHASE_FORWARD && is_candidate(t, n);
  while (s.n_ready > 0) {
    /* The forward pass stays a prefix of the block: the runtime evaluates a loss by running the
     * forward steps alone (plan.h). */
    int32_t best = -1;
    int64_t best_score = 0;
    for (int32_t i = 0; i < s.n_ready; i++) {
      if (forward_left > 0 && t->phase[s.ready[i]] != TF_PHASE_FORWARD)
        continue;
      int64_t candidate = score(&s, s.ready[i]);
      if (best < 0 || candidate < best_score || (candidate == best_score && s.ready[i] < s.ready[best])) {
        best = i;
        best_score = candidate;
      }
    }
    if (best < 0)
      break; /* a forward node waits on a backward one: not a training graph this pass knows */
    int32_t n = s.ready[best];
    s.ready[best] = s.ready[--s.n_ready];
    forward_left -= t->phase[n] == TF_PHASE_FORWARD;
    place_with_recompute(&s, n);
  }
  out->micro_steps = s.count;
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (t->phase[n] == TF_PHASE_OPTIMIZER)
      out->steps[s.count++] = n;
  out->n_steps = s.count;
  int32_t count = s.count;
  release(&s);
  if (count != g->n_nodes)
    return tf_status_new(TF_ERR_INTERNAL, "memory-aware schedule placed %d of %d nodes", count, g->n_nodes);
  return NULL;
}
