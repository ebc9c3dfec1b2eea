/* ZeRO stage 2 (--ranks R --zero 2): each rank keeps the gradients of its own shard only. The pass of
 * compiler/zero.c shards them as the optimizer state (a gradient held by the rank that updates it,
 * or in pieces by the ranks of its ranges, packed from offset 0 of the gradients region on the same
 * bytes as every other rank's); here each such gradient gets a bucket: a buffer of its size that
 * every rank holds and the micro-batch block writes in its place, as the backward pass produces it.
 * After the last step of the block that touches a bucket, the runtime reduces it across the ranks
 * to the owners of its ranges (tools/dist_zero.c: its sum into the shard, or added to it after the
 * step's first micro-batch), so its bytes are free again: the buckets lie past the shards, placed
 * by their live steps (the first to the last step of the block that touches them), two buckets live
 * at once on other bytes. The gradients region is the largest shard plus the buckets' area:
 * gradient bytes per rank ~ whole / R + the most bucket bytes live at once (a tied embedding's
 * gradient, written at the head and the bottom of the backward pass, lives through it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/zero.h"

#include "core/ops.h"

static int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

tf_status tf_zero2_buckets(tf_plan *plan, int32_t *bucket_of, int32_t old) {
  for (int32_t id = 0; id < old; id++) {
    const tf_plan_buffer *g = &plan->buffers[id];
    const bool gradient = g->role == TF_ROLE_GRADIENT && g->region == TF_REGION_GRADIENTS && g->bytes > 0;
    if (gradient && bucket_of[id] != 0)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "--zero 2: gradient '%s' of graph '%s' is read by no update of the optimizer block; stage "
                           "2 shards the gradients the updates read",
                           g->name, plan->graph_name);
    if (bucket_of[id] != 0)
      continue;
    const int32_t b = plan->n_buffers;
    tf_plan_buffer *bucket = &plan->buffers[b];
    *bucket = *g;
    memset(&bucket->init, 0, sizeof(bucket->init));
    const size_t size = strlen(g->name) + 8;
    bucket->name = malloc(size);
    if (!bucket->name)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero 2: no memory for the bucket of '%s'", g->name);
    snprintf(bucket->name, size, "%s/bucket", g->name);
    bucket->held_by = 0;
    bucket->view_of = 0;
    bucket->view_at = 0;
    bucket->offset = 0;
    plan->report.role_bytes[TF_ROLE_GRADIENT] += bucket->bytes;
    bucket_of[id] = plan->n_buffers++;
  }
  /* no step of the optimizer block but an update, or the zeroing of its gradient, reads one */
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs && !tf_op_is_update(step->op) && step->op != TF_OP_ZERO; k++)
      if (step->inputs[k] < old && bucket_of[step->inputs[k]] >= 0)
        return tf_status_new(TF_ERR_UNSUPPORTED,
                             "--zero 2: step '%s' of graph '%s' reads gradient '%s' whole, which each rank holds its "
                             "shard of only",
                             step->name, plan->graph_name, plan->buffers[step->inputs[k]].name);
  }
  return NULL;
}

typedef struct interval {
  int32_t id, first, last;
} interval;

static int by_first(const void *a, const void *b) {
  const interval *x = a, *y = b;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int by_offset(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The buckets (gradients every rank holds in the gradients region of a stage-2 plan) and their live
 * steps in the micro-batch block; *n of them. */
static interval *bucket_intervals(const tf_plan *plan, int32_t *n) {
  int32_t *at = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  interval *list = malloc(sizeof(interval) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  *n = 0;
  if (!at || !list) {
    free(at);
    free(list);
    return NULL;
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    at[id] = -1;
    if (b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by == 0 && b->view_of == 0) {
      at[id] = (*n)++;
      list[at[id]] = (interval){id, -1, -1};
    }
  }
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      const int32_t id = k < step->n_inputs ? step->inputs[k] : step->outputs[k - step->n_inputs];
      if (id < 0 || id >= plan->n_buffers || at[id] < 0)
        continue;
      interval *i = &list[at[id]];
      i->first = i->first < 0 ? s : i->first;
      i->last = s;
    }
  }
  free(at);
  return list;
}

tf_status tf_zero2_place_buckets(tf_plan *plan, int64_t shards_end, int64_t *area) {
  int32_t n = 0;
  interval *list = bucket_intervals(plan, &n);
  int64_t *taken = malloc(sizeof(int64_t) * 2 * (size_t)(n > 0 ? n : 1)); /* [offset, end) of the conflicting */
  int64_t *offset = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!list || !taken || !offset) {
    free(list);
    free(taken);
    free(offset);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero 2: no memory to place the buckets");
  }
  qsort(list, (size_t)n, sizeof(interval), by_first);
  const int64_t base = align_up(shards_end, plan->alignment);
  *area = 0;
  for (int32_t i = 0; i < n; i++) { /* first fit among the placed buckets live with it */
    const tf_plan_buffer *b = &plan->buffers[list[i].id];
    int32_t conflicts = 0;
    for (int32_t j = 0; j < i; j++)
      if (list[j].first <= list[i].last && list[i].first <= list[j].last) {
        taken[2 * conflicts] = offset[j];
        taken[2 * conflicts++ + 1] = offset[j] + plan->buffers[list[j].id].bytes;
      }
    qsort(taken, (size_t)conflicts, 2 * sizeof(int64_t), by_offset);
    int64_t at = 0;
    for (int32_t c = 0; c < conflicts; c++) {
      if (at + b->bytes <= taken[2 * c])
        break;
      at = taken[2 * c + 1] > at ? align_up(taken[2 * c + 1], plan->alignment) : at;
    }
    offset[i] = at;
    plan->buffers[list[i].id].offset = base + at;
    *area = align_up(at + b->bytes, plan->alignment) > *area ? align_up(at + b->bytes, plan->alignment) : *area;
  }
  *area += base - shards_end; /* the shards' padding to the alignment */
  free(list);
  free(taken);
  free(offset);
  return NULL;
}
