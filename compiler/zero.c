/* ZeRO stage 1 (--ranks R --zero 1; Rajbhandari et al., "ZeRO: memory optimizations toward training
 * trillion parameter models"): a pass over the emitted data-parallel plan that shards the optimizer
 * state across the ranks. Each trained parameter is owned by one rank, chosen greedily so the ranks'
 * shards weigh about the same (largest state first, to the lightest rank; ties to the lower rank);
 * its update step and its state buffers are held by that rank (held_by = 1 + the rank). Each rank's
 * shard is packed from offset 0 of the optimizer-state region, on the same bytes as every other
 * rank's, so the region is the largest shard: the device total of every rank's plan. Every rank
 * still sums the whole gradients (each update reads its parameter's whole sum), runs the updates it
 * holds, and the runtime sends each updated parameter from its owner to the others
 * (tools/dist.c). The gradients, the zeroing and everything before the optimizer block stay on
 * every rank. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/stages.h"
#include "core/ops.h"
#include "tightfit/plan.h"

/* The optimizer-state bytes update step s reads. */
static int64_t state_bytes(const tf_plan *plan, const tf_plan_step *step) {
  int64_t bytes = 0;
  for (int32_t k = 0; k < step->n_inputs; k++)
    if (plan->buffers[step->inputs[k]].region == TF_REGION_OPTIMIZER_STATE)
      bytes += plan->buffers[step->inputs[k]].bytes;
  return bytes;
}

typedef struct update {
  int32_t step;
  int64_t bytes; /* its state and its parameter: what the rank that owns it holds and updates */
} update;

static int heaviest_first(const void *a, const void *b) {
  const update *x = a, *y = b;
  if (x->bytes != y->bytes)
    return x->bytes > y->bytes ? -1 : 1;
  return (x->step > y->step) - (x->step < y->step);
}

static int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

/* Each update step to the rank whose load (state and parameter bytes) is lightest so far; its state
 * buffers to that rank, at the end of the rank's shard (end[rank], aligned). */
static void assign(tf_plan *plan, update *updates, int32_t n, int64_t *load, int64_t *end) {
  qsort(updates, (size_t)n, sizeof(update), heaviest_first);
  for (int32_t i = 0; i < n; i++) {
    int32_t rank = 0;
    for (int32_t r = 1; r < plan->ranks; r++)
      rank = load[r] < load[rank] ? r : rank;
    load[rank] += updates[i].bytes;
    tf_plan_step *step = &plan->steps[updates[i].step];
    step->held_by = rank + 1;
    for (int32_t k = 0; k < step->n_inputs; k++) {
      tf_plan_buffer *b = &plan->buffers[step->inputs[k]];
      if (b->region != TF_REGION_OPTIMIZER_STATE || b->held_by > 0)
        continue;
      b->held_by = rank + 1;
      b->offset = end[rank];
      end[rank] = align_up(end[rank] + b->bytes, plan->alignment);
    }
  }
}

tf_status tf_zero_pass(tf_plan *plan, const tf_target *target) {
  if (plan->ranks < 2)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--zero 1: graph '%s' is planned for one rank (give --ranks R)",
                         plan->graph_name);
  update *updates = malloc(sizeof(update) * (size_t)(plan->n_steps > 0 ? plan->n_steps : 1));
  int64_t *end = calloc((size_t)plan->ranks, sizeof(int64_t)), *load = calloc((size_t)plan->ranks, sizeof(int64_t));
  if (!updates || !end || !load) {
    free(updates);
    free(end);
    free(load);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero 1: no memory for %d steps and %d ranks", plan->n_steps,
                         plan->ranks);
  }
  int32_t n = 0;
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++)
    if (tf_op_is_update(plan->steps[s].op))
      updates[n++] = (update){s, state_bytes(plan, &plan->steps[s]) + plan->buffers[plan->steps[s].inputs[0]].bytes};
  assign(plan, updates, n, load, end);
  int64_t largest = 0, smallest = n > 0 ? end[0] : 0;
  for (int32_t r = 0; r < plan->ranks; r++) {
    largest = end[r] > largest ? end[r] : largest;
    smallest = end[r] < smallest ? end[r] : smallest;
  }
  const int64_t whole = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  plan->region_bytes[TF_REGION_OPTIMIZER_STATE] = largest;
  plan->zero = 1;
  tf_target_plan_overhead(target, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
  char line[320];
  snprintf(line, sizeof(line),
           "ZeRO stage 1 over %d ranks: %d updates sharded; optimizer state %.2f MiB per rank (shards %.2f to %.2f "
           "MiB) of %.2f MiB\n",
           plan->ranks, n, (double)largest / 1048576.0, (double)smallest / 1048576.0, (double)largest / 1048576.0,
           (double)whole / 1048576.0);
  tf_plan_note(plan, line);
  free(updates);
  free(end);
  free(load);
  return NULL;
}
