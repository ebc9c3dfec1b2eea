/* Pass 10, assign: offsets. The persistent regions (parameters, gradients, optimizer state, io)
 * are laid out in order. The arena is packed greedily by size, largest first, each buffer placed
 * in the smallest gap that fits among the buffers already placed whose live intervals intersect
 * its own (best fit, as TFLite's and XLA's planners do); when that misses the lower bound, two more
 * orders are tried and the smallest arena kept. A reshape's output is a view on its input (one
 * memory, whether or not the input is read later), and an output whose op may write over an input
 * takes that input's memory when nothing on it is read later: each such chain is one item.
 * Alongside: the lower bound (the most bytes live at any one step, each buffer counted at its
 * aligned size, since no two buffers can share an alignment slot) and the naive total (no reuse). */
#include <stdlib.h>
#include <string.h>

#include "compiler/arena_pack.h"
#include "compiler/stages.h"
#include "core/ops.h"

static int64_t align_up(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

/* The input of step s whose memory output 0 may take (tf_op_output_may_alias), or -1: an input of
 * the output's dtype and bytes that no other input of the step shares memory with, and either a
 * reshape's (a view: the input may live on, the pair then one buffer read by both) or, for an op
 * that writes over its input, one whose memory nothing reads after this step (chain_last: the last
 * step of any tensor on that memory so far; alias_root: the tensor each one's memory is on). */
static int32_t aliased_input(const tf_training *t, const tf_lifetimes *life, int32_t s, const tf_ir_node *node,
                             const int32_t *chain_last, const int32_t *alias_root) {
  const tf_graph *g = t->g;
  int32_t y = node->n_outputs > 0 ? node->outputs[0] : -1;
  if (y < 0 || life->first[y] != s)
    return -1;
  for (int32_t i = 0; i < node->n_inputs; i++) {
    int32_t x = node->inputs[i];
    if (!tf_op_output_may_alias(node->op, i) || life->first[x] < 0 || g->tensors[x].dtype != g->tensors[y].dtype ||
        g->tensors[x].bytes != g->tensors[y].bytes)
      continue;
    if (node->op != TF_OP_RESHAPE && chain_last[alias_root[x]] != s)
      continue;
    bool shared = false;
    for (int32_t j = 0; j < node->n_inputs && !shared; j++)
      shared = j != i && life->first[node->inputs[j]] >= 0 && alias_root[node->inputs[j]] == alias_root[x];
    if (!shared)
      return x;
  }
  return -1;
}

/* A step whose output may take an input's memory (tf_op_output_may_alias) gets no memory of its own
 * for it: the output lies on the input, recorded as alias_of; each chain of such tensors is one item
 * in the packing. alias_root[i] (n_tensors entries) is the tensor at the start of i's chain, kept as
 * each alias is made (a chain only grows at its end), so no chain is ever walked. */
static tf_status find_aliases(const tf_training *t, const tf_order *order, const tf_lifetimes *life, tf_layout *layout,
                              int32_t *alias_root) {
  const tf_graph *g = t->g;
  size_t n = (size_t)(g->n_tensors ? g->n_tensors : 1);
  layout->alias_of = malloc(sizeof(int32_t) * n);
  int32_t *chain_last = malloc(sizeof(int32_t) * n);
  if (!layout->alias_of || !chain_last) {
    free(chain_last);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: out of memory");
  }
  for (int32_t i = 0; i < g->n_tensors; i++) {
    layout->alias_of[i] = -1;
    alias_root[i] = i;
    chain_last[i] = life->last[i];
  }
  for (int32_t s = 0; s < order->n_steps; s++) {
    const tf_ir_node *node = &g->nodes[order->steps[s]];
    int32_t x = aliased_input(t, life, s, node, chain_last, alias_root);
    if (x < 0)
      continue;
    int32_t y = node->outputs[0], root = alias_root[x];
    layout->alias_of[y] = x;
    alias_root[y] = root;
    if (life->last[y] > chain_last[root])
      chain_last[root] = life->last[y];
  }
  free(chain_last);
  return NULL;
}

/* Adds `bytes` to live_bytes[first..last] through the difference array `delta` (n_schedule + 1
 * entries), summed into live_bytes by sum_live_bytes: a long-lived buffer costs one add, not one
 * per step (a chain of 100,000 saved activations would take ~10^10). */
static void add_live(int64_t *delta, int32_t first, int32_t last, int64_t bytes) {
  delta[first] += bytes;
  delta[last + 1] -= bytes;
}

static void sum_live_bytes(const tf_order *order, tf_layout *layout, const int64_t *delta) {
  int64_t live = 0;
  for (int32_t s = 0; s < order->n_steps; s++) {
    live += delta[s];
    layout->live_bytes[s] = live;
  }
}

/* The arena items: one per alias chain, live from its root's first step to its last member's last
 * step, then one per step's workspace; fills layout->live_bytes. Returns how many, or -1 out of memory. */
static int32_t collect_items(const tf_training *t, const tf_order *order, const tf_lifetimes *life, tf_layout *layout,
                             const int32_t *alias_root, arena_item *items) {
  const tf_graph *g = t->g;
  int64_t alignment = t->options.target.alignment;
  int32_t *item_last = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  int64_t *delta = calloc((size_t)order->n_steps + 1, sizeof(int64_t));
  if (!item_last || !delta) {
    free(item_last);
    free(delta);
    return -1;
  }
  for (int32_t i = 0; i < g->n_tensors; i++)
    item_last[i] = life->last[i];
  for (int32_t i = 0; i < g->n_tensors; i++) {
    int32_t root = life->first[i] >= 0 ? alias_root[i] : i;
    if (root != i && life->last[i] > item_last[root])
      item_last[root] = life->last[i];
  }
  int32_t n = 0;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    if (life->first[i] < 0 || layout->alias_of[i] >= 0)
      continue;
    items[n++] = (arena_item){align_up(g->tensors[i].bytes, alignment), life->first[i], item_last[i], i, 0};
    add_live(delta, life->first[i], item_last[i], items[n - 1].size);
  }
  for (int32_t s = 0; s < order->n_steps; s++) {
    layout->workspace_offset[s] = -1;
    if (life->workspace_bytes[s] > 0) {
      items[n++] = (arena_item){align_up(life->workspace_bytes[s], alignment), s, s, -(s + 1), 0};
      add_live(delta, s, s, items[n - 1].size);
    }
  }
  sum_live_bytes(order, layout, delta);
  free(item_last);
  free(delta);
  return n;
}

static tf_status assign_arena(const tf_training *t, const tf_order *order, const tf_lifetimes *life,
                              tf_layout *layout) {
  const tf_graph *g = t->g;
  int64_t alignment = t->options.target.alignment;
  int32_t capacity = g->n_tensors + order->n_steps;
  arena_item *items = malloc(sizeof(arena_item) * (size_t)(capacity ? capacity : 1));
  int32_t *alias_root = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  layout->live_bytes = calloc((size_t)(order->n_steps ? order->n_steps : 1), sizeof(int64_t));
  layout->workspace_offset = malloc(sizeof(int64_t) * (size_t)(order->n_steps ? order->n_steps : 1));
  tf_status status = NULL;
  int32_t n = -1;
  if (items && alias_root && layout->live_bytes && layout->workspace_offset) {
    status = find_aliases(t, order, life, layout, alias_root);
    if (!status)
      n = collect_items(t, order, life, layout, alias_root, items);
  }
  if (status || n < 0) {
    free(items);
    free(alias_root);
    return status ? status : tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: cannot allocate for %d buffers", capacity);
  }
  layout->arena_naive = 0;
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (life->first[i] >= 0)
      layout->arena_naive += align_up(g->tensors[i].bytes, alignment);
  for (int32_t s = 0; s < order->n_steps; s++)
    if (life->workspace_bytes[s] > 0)
      layout->arena_naive += align_up(life->workspace_bytes[s], alignment);
  layout->arena_lower_bound = 0;
  layout->peak_step = order->n_steps > 0 ? 0 : -1;
  for (int32_t s = 0; s < order->n_steps; s++) {
    if (layout->live_bytes[s] > layout->arena_lower_bound) {
      layout->arena_lower_bound = layout->live_bytes[s];
      layout->peak_step = s;
    }
  }
  status = tf_arena_pack(items, n, layout->arena_lower_bound, &layout->region_bytes[TF_REGION_ARENA], NULL);
  for (int32_t i = 0; i < n; i++) {
    if (items[i].id >= 0)
      layout->offset[items[i].id] = items[i].offset;
    else
      layout->workspace_offset[-items[i].id - 1] = items[i].offset;
  }
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (life->first[i] >= 0 && layout->alias_of[i] >= 0)
      layout->offset[i] = layout->offset[alias_root[i]];
  free(items);
  free(alias_root);
  return status;
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

tf_status tf_layout_assign(const tf_training *t, const tf_order *order, const tf_lifetimes *life, tf_layout *layout) {
  const tf_graph *g = t->g;
  int64_t alignment = t->options.target.alignment;
  tf_layout_free(layout);
  layout->offset = malloc(sizeof(int64_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!layout->offset)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: cannot allocate offsets");
  memset(layout->region_bytes, 0, sizeof(layout->region_bytes));
  layout->host_bytes = 0;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    layout->offset[i] = -1;
    if (t->host[i]) { /* an offloaded activation's copy: its own place in host memory */
      layout->offset[i] = layout->host_bytes;
      layout->host_bytes = align_up(layout->host_bytes + g->tensors[i].bytes, alignment);
      continue;
    }
    tf_region region = persistent_region(t, i);
    if (region == TF_REGION_COUNT)
      continue;
    layout->offset[i] = layout->region_bytes[region];
    layout->region_bytes[region] = align_up(layout->region_bytes[region] + g->tensors[i].bytes, alignment);
  }
  /* The io region holds two copies of the micro-batch: the second half mirrors the first. */
  layout->region_bytes[TF_REGION_IO] *= 2;
  return assign_arena(t, order, life, layout);
}

void tf_layout_free(tf_layout *layout) {
  free(layout->alias_of);
  free(layout->offset);
  free(layout->workspace_offset);
  free(layout->live_bytes);
  layout->alias_of = NULL;
  layout->offset = layout->workspace_offset = layout->live_bytes = NULL;
}
