/* Pass 10, assign: offsets. The persistent regions (parameters, gradients, optimizer state, io)
 * are laid out in order. The arena is packed greedily by size, largest first, each buffer placed
 * in the smallest gap that fits among the buffers already placed whose live intervals intersect
 * its own (best fit, as TFLite's and XLA's planners do). Alongside: the lower bound (the most bytes
 * live at any one step, each buffer counted at its aligned size, since no two buffers can share an
 * alignment slot) and the naive total (no reuse). */
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"

typedef struct arena_item {
  int64_t size; /* aligned */
  int32_t first, last;
  int32_t id; /* tensor id, or -(step + 1) for a step's workspace */
  int64_t offset;
} arena_item;

static int64_t align_up(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

static int by_size_desc(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? 1 : -1;
  if (x->first != y->first)
    return x->first - y->first;
  return x->id - y->id;
}

/* Places `item` in the best-fitting gap between the placed items live at the same time as it,
 * then inserts it into placed[0..n), which is kept in offset order (items of equal offset in any
 * order: the gap found does not depend on theirs). */
static void place(arena_item *item, arena_item **placed, int32_t n) {
  int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
  for (int32_t k = 0; k < n; k++) {
    const arena_item *other = placed[k];
    if (other->first > item->last || item->first > other->last)
      continue;
    int64_t gap = other->offset - cursor;
    if (gap >= item->size && gap < best_gap) {
      best = cursor;
      best_gap = gap;
    }
    int64_t end = other->offset + other->size;
    if (end > cursor)
      cursor = end;
  }
  item->offset = best >= 0 ? best : cursor;
  int32_t at = n;
  while (at > 0 && placed[at - 1]->offset > item->offset)
    at--;
  memmove(&placed[at + 1], &placed[at], sizeof(arena_item *) * (size_t)(n - at));
  placed[at] = item;
}

/* The tensor whose memory `id` ends up on, following reshape aliases. */
static int32_t alias_root(const tf_training *t, int32_t id) {
  while (t->alias_of[id] >= 0)
    id = t->alias_of[id];
  return id;
}

/* The input of step s whose memory output 0 may take (tf_op_output_may_alias): read last by the step,
 * the output's dtype and bytes, and no other input of the step on the same memory; -1 if none. */
static int32_t aliased_input(const tf_training *t, int32_t s, const tf_ir_node *node) {
  const tf_graph *g = t->g;
  int32_t y = node->n_outputs > 0 ? node->outputs[0] : -1;
  if (y < 0 || t->first[y] != s)
    return -1;
  for (int32_t i = 0; i < node->n_inputs; i++) {
    int32_t x = node->inputs[i];
    if (!tf_op_output_may_alias(node->op, i) || t->first[x] < 0 || t->last[x] != s ||
        g->tensors[x].dtype != g->tensors[y].dtype || g->tensors[x].bytes != g->tensors[y].bytes)
      continue;
    bool shared = false;
    for (int32_t j = 0; j < node->n_inputs && !shared; j++)
      shared = j != i && t->first[node->inputs[j]] >= 0 && alias_root(t, node->inputs[j]) == alias_root(t, x);
    if (!shared)
      return x;
  }
  return -1;
}

/* A step whose output may take an input's memory (a reshape; see tf_op_output_may_alias) gets no
 * memory of its own for it when that input dies there: the output lies on the input, recorded as
 * alias_of; the pair is one item in the packing. */
static tf_status find_aliases(tf_training *t) {
  const tf_graph *g = t->g;
  free(t->alias_of);
  t->alias_of = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!t->alias_of)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: out of memory");
  for (int32_t i = 0; i < g->n_tensors; i++)
    t->alias_of[i] = -1;
  for (int32_t s = 0; s < t->n_schedule; s++) {
    const tf_ir_node *node = &g->nodes[t->schedule[s]];
    int32_t x = aliased_input(t, s, node);
    if (x >= 0)
      t->alias_of[node->outputs[0]] = x;
  }
  return NULL;
}

static tf_status assign_arena(tf_training *t) {
  TF_RETURN_IF_ERROR(find_aliases(t));
  const tf_graph *g = t->g;
  int64_t alignment = t->options.target.alignment;
  int32_t capacity = g->n_tensors + t->n_schedule;
  arena_item *items = malloc(sizeof(arena_item) * (size_t)(capacity ? capacity : 1));
  arena_item **placed = malloc(sizeof(arena_item *) * (size_t)(capacity ? capacity : 1));
  free(t->live_bytes);
  t->live_bytes = calloc((size_t)(t->n_schedule ? t->n_schedule : 1), sizeof(int64_t));
  free(t->workspace_offset);
  t->workspace_offset = malloc(sizeof(int64_t) * (size_t)(t->n_schedule ? t->n_schedule : 1));
  if (!items || !placed || !t->live_bytes || !t->workspace_offset) {
    free(items);
    free(placed);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: cannot allocate for %d buffers", capacity);
  }
  int32_t n = 0;
  t->arena_naive = 0;
  /* Each alias chain is one item, live from its root's first step to its last member's last step. */
  int32_t *item_last = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!item_last) {
    free(items);
    free(placed);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: out of memory");
  }
  for (int32_t i = 0; i < g->n_tensors; i++)
    item_last[i] = t->last[i];
  for (int32_t i = 0; i < g->n_tensors; i++) {
    int32_t root = t->first[i] >= 0 ? alias_root(t, i) : i;
    if (root != i && t->last[i] > item_last[root])
      item_last[root] = t->last[i];
  }
  for (int32_t i = 0; i < g->n_tensors; i++) {
    if (t->first[i] < 0 || t->alias_of[i] >= 0)
      continue;
    items[n++] = (arena_item){align_up(g->tensors[i].bytes, alignment), t->first[i], item_last[i], i, 0};
    for (int32_t s = t->first[i]; s <= item_last[i]; s++)
      t->live_bytes[s] += items[n - 1].size;
  }
  free(item_last);
  for (int32_t s = 0; s < t->n_schedule; s++) {
    t->workspace_offset[s] = -1;
    if (t->workspace_bytes[s] > 0) {
      items[n++] = (arena_item){align_up(t->workspace_bytes[s], alignment), s, s, -(s + 1), 0};
      t->live_bytes[s] += items[n - 1].size;
    }
  }
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (t->first[i] >= 0)
      t->arena_naive += align_up(g->tensors[i].bytes, alignment);
  for (int32_t s = 0; s < t->n_schedule; s++)
    if (t->workspace_bytes[s] > 0)
      t->arena_naive += align_up(t->workspace_bytes[s], alignment);
  qsort(items, (size_t)n, sizeof(arena_item), by_size_desc);
  int64_t arena = 0;
  for (int32_t i = 0; i < n; i++) {
    place(&items[i], placed, i);
    if (items[i].offset + items[i].size > arena)
      arena = items[i].offset + items[i].size;
    if (items[i].id >= 0)
      t->offset[items[i].id] = items[i].offset;
    else
      t->workspace_offset[-items[i].id - 1] = items[i].offset;
  }
  t->region_bytes[TF_REGION_ARENA] = arena;
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (t->first[i] >= 0 && t->alias_of[i] >= 0)
      t->offset[i] = t->offset[alias_root(t, i)];
  t->arena_lower_bound = 0;
  t->peak_step = t->n_schedule > 0 ? 0 : -1;
  for (int32_t s = 0; s < t->n_schedule; s++) {
    if (t->live_bytes[s] > t->arena_lower_bound) {
      t->arena_lower_bound = t->live_bytes[s];
      t->peak_step = s;
    }
  }
  free(items);
  free(placed);
  return NULL;
}

static tf_region persistent_region(const tf_training *t, int32_t id) {
  const tf_ir_tensor *tensor = &t->g->tensors[id];
  if (tensor->kind == TF_PARAMETER || tensor->kind == TF_CONSTANT)
    return TF_REGION_PARAMETERS;
  if (tensor->kind == TF_INPUT || tensor->kind == TF_LABEL)
    return TF_REGION_IO;
  if (t->role[id] == TF_ROLE_GRADIENT)
    return TF_REGION_GRADIENTS;
  if (t->role[id] == TF_ROLE_OPTIMIZER_STATE)
    return TF_REGION_OPTIMIZER_STATE;
  return TF_REGION_COUNT;
}

tf_status tf_assign(tf_training *t) {
  const tf_graph *g = t->g;
  int64_t alignment = t->options.target.alignment;
  free(t->offset);
  t->offset = malloc(sizeof(int64_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!t->offset)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: cannot allocate offsets");
  memset(t->region_bytes, 0, sizeof(t->region_bytes));
  for (int32_t i = 0; i < g->n_tensors; i++) {
    t->offset[i] = -1;
    tf_region region = persistent_region(t, i);
    if (region == TF_REGION_COUNT)
      continue;
    t->offset[i] = t->region_bytes[region];
    t->region_bytes[region] = align_up(t->region_bytes[region] + g->tensors[i].bytes, alignment);
  }
  /* The io region holds two copies of the micro-batch: the second half mirrors the first. */
  t->region_bytes[TF_REGION_IO] *= 2;
  return assign_arena(t);
}
