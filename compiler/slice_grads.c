/* The gradient of a tensor split into slices (a fused q|k|v projection cut in three along its last
 * axis): autodiff gives each slice's gradient as a slice_grad, a tensor of the whole's size holding
 * zeros outside the slice, and sums them with adds. When the slices are disjoint, step 1, on one
 * axis, and together cover it, that sum is the concat of the slices' gradients in axis order: this
 * pass, after autodiff, turns the tree of adds into one concat and removes the slice_grads and the
 * inner adds. The backward pass then holds the whole's gradient once instead of once per slice
 * (xtts-gpt's peak step held two [8, 669, 3072] slice gradients) and moves each element once
 * instead of writing zeros and adding them. The values are the sum's, except that a -0 of a slice's
 * gradient stays -0 where the sum made it +0. */
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "core/slice_bounds.h"
#include "graph/passes.h"

#define MAX_PARTS 64 /* concat's inputs at most (TF_OP_VARIADIC) */

/* One slice's gradient: the slice_grad node and the part of the axis it fills. */
typedef struct part {
  int32_t node;
  int64_t start, end;
} part;

/* A tree of adds over slice_grads of one tensor: its nodes and leaves. */
typedef struct tree {
  int32_t adds[MAX_PARTS], n_adds;
  part parts[MAX_PARTS];
  int32_t n_parts;
  int32_t source, axis; /* the sliced tensor (slice_grad's shape input), normalized axis */
  bool ok;
  int32_t *readers; /* per tensor: how many node inputs read it (the pass keeps it current) */
} tree;

static bool is_backward(const tf_training *t, int32_t n, tf_op op) {
  return n >= 0 && t->phase[n] == TF_PHASE_BACKWARD && t->g->nodes[n].op == op;
}

/* Adds slice_grad node `n` to the tree's parts: one reader, step 1, the tree's source and axis. */
static void add_part(const tf_training *t, int32_t n, tree *tr) {
  const tf_graph *g = t->g;
  const tf_ir_node *node = &g->nodes[n];
  const tf_slice_attrs *a = &node->attrs.u.slice;
  const int32_t source = node->inputs[1];
  const tf_ir_tensor *x = &g->tensors[source];
  int32_t axis = a->axis < 0 ? a->axis + x->rank : a->axis;
  if (tr->n_parts == MAX_PARTS || a->step != 1 || axis < 0 || axis >= x->rank || tr->readers[node->outputs[0]] != 1 ||
      (tr->n_parts > 0 && (source != tr->source || axis != tr->axis))) {
    tr->ok = false;
    return;
  }
  tr->source = source;
  tr->axis = axis;
  tr->parts[tr->n_parts++] =
      (part){n, tf_slice_bound(a->start, x->shape[axis]), tf_slice_bound(a->end, x->shape[axis])};
}

/* Walks the adds below `n` (each read once, by the add above it) down to their slice_grads. */
static void collect(const tf_training *t, int32_t n, tree *tr) {
  const tf_graph *g = t->g;
  for (int32_t k = 0; k < 2 && tr->ok; k++) {
    const int32_t producer = g->tensors[g->nodes[n].inputs[k]].producer;
    if (is_backward(t, producer, TF_OP_ADD) && tr->readers[g->nodes[producer].outputs[0]] == 1 &&
        tr->n_adds < MAX_PARTS) {
      tr->adds[tr->n_adds++] = producer;
      collect(t, producer, tr);
    } else if (is_backward(t, producer, TF_OP_SLICE_GRAD)) {
      add_part(t, producer, tr);
    } else {
      tr->ok = false;
    }
  }
}

static int by_start(const void *a, const void *b) {
  const part *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

/* Whether the parts, in axis order, tile [0, dim) of the axis with no gap and no overlap. */
static bool tiles_axis(const tf_training *t, tree *tr) {
  qsort(tr->parts, (size_t)tr->n_parts, sizeof(part), by_start);
  int64_t next = 0;
  for (int32_t i = 0; i < tr->n_parts; i++) {
    if (tr->parts[i].start != next || tr->parts[i].end <= next)
      return false;
    next = tr->parts[i].end;
  }
  return next == t->g->tensors[tr->source].shape[tr->axis];
}

/* Counts node n's inputs in or out of readers[] (step +1 or -1). */
static void count_reads(const tf_graph *g, int32_t n, int32_t *readers, int32_t step) {
  for (int32_t k = 0; k < g->nodes[n].n_inputs; k++)
    readers[g->nodes[n].inputs[k]] += step;
}

/* Root add `root` of a tree that tiles its axis becomes concat(the parts' gradients, axis). */
static tf_status to_concat(tf_training *t, int32_t root, tree *tr) {
  tf_graph *g = t->g;
  tf_ir_node *node = &g->nodes[root];
  int32_t *inputs = malloc(sizeof(int32_t) * (size_t)tr->n_parts);
  if (!inputs)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "slice gradients: no memory");
  for (int32_t i = 0; i < tr->n_parts; i++)
    inputs[i] = g->nodes[tr->parts[i].node].inputs[0];
  count_reads(g, root, tr->readers, -1);
  free(node->inputs);
  node->inputs = inputs;
  node->n_inputs = tr->n_parts;
  node->op = TF_OP_CONCAT;
  memset(&node->attrs, 0, sizeof(node->attrs));
  node->attrs.kind = TF_ATTR_AXIS;
  node->attrs.u.axis.axis = tr->axis;
  count_reads(g, root, tr->readers, +1);
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, root, true));
  int32_t dead[2 * MAX_PARTS], n_dead = 0;
  for (int32_t i = 0; i < tr->n_adds; i++)
    dead[n_dead++] = tr->adds[i];
  for (int32_t i = 0; i < tr->n_parts; i++)
    dead[n_dead++] = tr->parts[i].node;
  for (int32_t i = 0; i < n_dead; i++) {
    g->tensors[g->nodes[dead[i]].outputs[0]].producer = -1;
    count_reads(g, dead[i], tr->readers, -1);
  }
  return tf_training_remove_nodes(t, dead, n_dead);
}

/* The readers of every tensor are counted once and kept current through the rewrites: counting
 * them per add (tf_training_readers scans every node) made this pass quadratic in graph size. */
tf_status tf_slice_grads_pass(tf_training *t) {
  if (!t->options.training)
    return NULL;
  int32_t *readers = calloc((size_t)(t->g->n_tensors ? t->g->n_tensors : 1), sizeof(int32_t));
  if (!readers)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "slice gradients: no memory for %d tensors", t->g->n_tensors);
  for (int32_t n = 0; n < t->g->n_nodes; n++)
    count_reads(t->g, n, readers, +1);
  tf_status status = NULL;
  for (int32_t n = t->g->n_nodes - 1; n >= 0 && !status; n--) {
    if (!is_backward(t, n, TF_OP_ADD))
      continue;
    tree tr;
    memset(&tr, 0, sizeof(tr));
    tr.ok = true;
    tr.readers = readers;
    collect(t, n, &tr);
    if (!tr.ok || tr.n_parts < 2 || !tiles_axis(t, &tr))
      continue;
    status = to_concat(t, n, &tr);
    n = n < t->g->n_nodes ? n : t->g->n_nodes; /* ids above the removed nodes moved down */
  }
  free(readers);
  return status;
}
