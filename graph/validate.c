/* Pass 1b, validate: the semantic checks that a decoded (untrusted) or built graph must pass before
 * any other pass runs. Every error names the tensor or node and the offending value. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "graph/passes.h"

static bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

static tf_status check_declared_dims(const tf_graph *g, const tf_ir_tensor *t, int32_t id) {
  for (int32_t d = 0; d < t->declared.rank; d++) {
    tf_dim dim = t->declared.dims[d];
    if (dim.symbol >= g->n_symbols || dim.symbol < -1)
      return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %d '%s': dimension %d names unknown symbol %d (%d declared)",
                           id, t->name, d, dim.symbol, g->n_symbols);
    if (dim.symbol >= 0 && dim.size < 1)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "tensor %d '%s': dimension %d is %" PRId64 "*%s; a multiple must be >= 1", id, t->name, d,
                           dim.size, g->symbols[dim.symbol].name);
    if (dim.symbol < 0 && dim.size < 0)
      return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %d '%s': dimension %d is negative (%" PRId64 ")", id, t->name,
                           d, dim.size);
    if (t->kind == TF_PARAMETER && dim.symbol >= 0)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "parameter '%s': dimension %d uses symbol %s; parameter shapes must be fixed numbers",
                           t->name, d, g->symbols[dim.symbol].name);
  }
  return NULL;
}

static tf_status check_init(const tf_ir_tensor *t, int32_t id) {
  if ((int)t->init_kind < 0 || t->init_kind >= TF_INIT_COUNT)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %d '%s' has unknown initializer kind %d", id, t->name,
                         (int)t->init_kind);
  bool needs_init = t->kind == TF_PARAMETER || t->kind == TF_CONSTANT;
  if (needs_init && t->init_kind == TF_INIT_NONE)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s '%s' has no initializer", tf_kind_name(t->kind), t->name);
  if (!needs_init && t->init_kind != TF_INIT_NONE)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s '%s' has initializer %s; only parameters and constants have one",
                         tf_kind_name(t->kind), t->name, tf_init_name(t->init_kind));
  if (t->init_kind == TF_INIT_EXTERNAL && (!t->init_file || !*t->init_file || !t->init_key || !*t->init_key))
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor '%s': an external initializer needs a file and a key", t->name);
  if (!isfinite(t->init_a) || !isfinite(t->init_b))
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor '%s': initializer %s has a non-finite argument", t->name,
                         tf_init_name(t->init_kind));
  return NULL;
}

/* A name of at most TF_MAX_NAME_BYTES. */
static tf_status check_name(const char *what, int32_t id, const char *name) {
  const size_t length = strlen(name);
  if (length <= TF_MAX_NAME_BYTES)
    return NULL;
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s %d '%.40s...': its name is %zu bytes; names are at most %d bytes",
                       what, id, name, length, TF_MAX_NAME_BYTES);
}

static tf_status check_tensor(const tf_graph *g, int32_t id) {
  const tf_ir_tensor *t = &g->tensors[id];
  TF_RETURN_IF_ERROR(check_name("tensor", id, t->name));
  if ((int)t->dtype < 0 || t->dtype >= TF_DTYPE_COUNT)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %d '%s' has unknown dtype %d", id, t->name, (int)t->dtype);
  if ((int)t->kind < 0 || t->kind >= TF_KIND_COUNT)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %d '%s' has unknown kind %d", id, t->name, (int)t->kind);
  if (t->kind != TF_ACTIVATION && (t->declared.rank < 0 || t->declared.rank > TF_MAX_RANK))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s '%s' has no shape; only activations may omit it",
                         tf_kind_name(t->kind), t->name);
  if (t->kind == TF_PARAMETER && !is_floating(t->dtype))
    return tf_status_new(TF_ERR_INVALID_INPUT, "parameter '%s' has dtype %s; parameters are floating point", t->name,
                         tf_dtype_name(t->dtype));
  if (t->frozen && t->kind != TF_PARAMETER)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s '%s' is marked not trainable; only a parameter can be frozen",
                         tf_kind_name(t->kind), t->name);
  if (t->declared.rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor '%s' has rank %d > %d", t->name, t->declared.rank, TF_MAX_RANK);
  TF_RETURN_IF_ERROR(check_declared_dims(g, t, id));
  return check_init(t, id);
}

/* reshape/expand targets hold dims that the shape rules trust to name valid symbols. */
static tf_status check_target_shape(const tf_graph *g, const tf_ir_node *node) {
  const tf_shape *shape = &node->attrs.u.shape.shape;
  if (shape->rank < 0 || shape->rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s): target rank %d is outside 0..%d", node->name,
                         tf_op_name(node->op), shape->rank, TF_MAX_RANK);
  for (int32_t d = 0; d < shape->rank; d++) {
    tf_dim dim = shape->dims[d];
    bool symbolic_ok = dim.symbol >= 0 && dim.symbol < g->n_symbols && dim.size >= 1;
    bool fixed_ok = dim.symbol == -1 && dim.size >= -1;
    if (!symbolic_ok && !fixed_ok)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "node '%s' (%s): target dimension %d {size %" PRId64 ", symbol %d} is invalid", node->name,
                           tf_op_name(node->op), d, dim.size, dim.symbol);
  }
  return NULL;
}

static tf_status check_attrs(const tf_graph *g, const tf_ir_node *node, const tf_op_info *info) {
  if (node->attrs.kind != info->attrs)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) carries %s attributes; %s takes %s attributes",
                         node->name, info->name, tf_attr_kind_name(node->attrs.kind), info->name,
                         tf_attr_kind_name(info->attrs));
  if (info->attrs == TF_ATTR_SHAPE)
    return check_target_shape(g, node);
  if (info->attrs == TF_ATTR_REDUCE && (node->attrs.u.reduce.n_axes < 0 || node->attrs.u.reduce.n_axes > TF_MAX_RANK))
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) lists %d axes", node->name, info->name,
                         node->attrs.u.reduce.n_axes);
  if (info->attrs == TF_ATTR_TRANSPOSE &&
      (node->attrs.u.transpose.rank < 0 || node->attrs.u.transpose.rank > TF_MAX_RANK))
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (transpose) has a permutation of length %d", node->name,
                         node->attrs.u.transpose.rank);
  return NULL;
}

static tf_status check_node(const tf_graph *g, int32_t id, int32_t *producer) {
  const tf_ir_node *node = &g->nodes[id];
  TF_RETURN_IF_ERROR(check_name("node", id, node->name));
  const tf_op_info *info = tf_op_info_get(node->op);
  if (!info)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node %d '%s' has unknown op %d (this build knows ops 0..%d)", id,
                         node->name, (int)node->op, TF_OP_COUNT - 1);
  if (info->scope != TF_SCOPE_GRAPH)
    return tf_status_new(
        TF_ERR_INVALID_INPUT,
        "node %d '%s' uses %s, a training-only op that the compiler emits; model graphs cannot hold it", id, node->name,
        info->name);
  if (node->n_inputs < info->min_inputs || node->n_inputs > info->max_inputs) {
    if (info->min_inputs == info->max_inputs)
      return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) has %d inputs; %s takes %d", node->name, info->name,
                           node->n_inputs, info->name, info->min_inputs);
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) has %d inputs; %s takes %d to %d", node->name,
                         info->name, node->n_inputs, info->name, info->min_inputs, info->max_inputs);
  }
  for (int32_t i = 0; i < node->n_inputs; i++) {
    int32_t input = node->inputs[i];
    if (input < 0 || input >= g->n_tensors)
      return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s): input %d is tensor id %d, outside 0..%d", node->name,
                           info->name, i, input, g->n_tensors - 1);
  }
  if (node->n_outputs != 1)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) has %d outputs; graph ops have one", node->name,
                         info->name, node->n_outputs);
  int32_t output = node->outputs[0];
  if (output < 0 || output >= g->n_tensors)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s): output is tensor id %d, outside 0..%d", node->name,
                         info->name, output, g->n_tensors - 1);
  const tf_ir_tensor *out = &g->tensors[output];
  if (out->kind != TF_ACTIVATION)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) writes '%s', which is a %s; nodes write activations",
                         node->name, info->name, out->name, tf_kind_name(out->kind));
  if (producer[output] >= 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "activation '%s' is written by two nodes: '%s' and '%s'", out->name,
                         g->nodes[producer[output]].name, node->name);
  producer[output] = id;
  if (node->precision != TF_PRECISION_INHERIT && ((int)node->precision < 0 || node->precision > TF_PRECISION_F16))
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "node %d '%s' (%s) has unknown precision override %d (0 f32, 1 bf16, 2 f16)", id, node->name,
                         info->name, (int)node->precision);
  return check_attrs(g, node, info);
}

/* True when every node's inputs are written by earlier nodes (the builder always emits such). */
static bool already_ordered(const tf_graph *g, const int32_t *producer) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
      if (producer[g->nodes[i].inputs[k]] >= i)
        return false;
  return true;
}

/* Orders nodes so that producers come first: an ordered graph is left as it is; otherwise Kahn's
 * algorithm (FIFO) reorders it. On a cycle, names one node that is on or behind it. */
static tf_status topological_order(tf_graph *g, const int32_t *producer) {
  int32_t n = g->n_nodes;
  if (n == 0 || already_ordered(g, producer))
    return NULL;
  int32_t *pending = calloc((size_t)n, sizeof(int32_t)); /* unproduced inputs per node */
  int32_t *order = malloc(sizeof(int32_t) * (size_t)n);
  int32_t *consumers_start = calloc((size_t)n + 1, sizeof(int32_t));
  int64_t edges = 0;
  for (int32_t i = 0; i < n; i++)
    edges += g->nodes[i].n_inputs;
  int32_t *consumers = malloc(sizeof(int32_t) * (size_t)(edges ? edges : 1));
  tf_status status = NULL;
  if (!pending || !order || !consumers_start || !consumers) {
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot order %d nodes", n);
    goto done;
  }
  for (int32_t i = 0; i < n; i++)
    for (int32_t k = 0; k < g->nodes[i].n_inputs; k++)
      if (producer[g->nodes[i].inputs[k]] >= 0)
        consumers_start[producer[g->nodes[i].inputs[k]] + 1]++;
  for (int32_t i = 0; i < n; i++)
    consumers_start[i + 1] += consumers_start[i];
  int32_t *fill = calloc((size_t)n, sizeof(int32_t));
  if (!fill) {
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot order %d nodes", n);
    goto done;
  }
  for (int32_t i = 0; i < n; i++) {
    for (int32_t k = 0; k < g->nodes[i].n_inputs; k++) {
      int32_t p = producer[g->nodes[i].inputs[k]];
      if (p >= 0) {
        consumers[consumers_start[p] + fill[p]++] = i;
        pending[i]++;
      }
    }
  }
  free(fill);
  /* `order` doubles as the FIFO queue of ready nodes. */
  int32_t head = 0, tail = 0;
  for (int32_t i = 0; i < n; i++)
    if (pending[i] == 0)
      order[tail++] = i;
  while (head < tail) {
    int32_t node = order[head++];
    for (int32_t c = consumers_start[node]; c < consumers_start[node + 1]; c++)
      if (--pending[consumers[c]] == 0)
        order[tail++] = consumers[c];
  }
  if (tail < n) {
    int32_t stuck = 0;
    while (pending[stuck] == 0)
      stuck++;
    status = tf_status_new(TF_ERR_INVALID_INPUT, "the graph has a cycle: node '%s' (%s) depends on its own output",
                           g->nodes[stuck].name, tf_op_name(g->nodes[stuck].op));
    goto done;
  }
  {
    tf_ir_node *sorted = malloc(sizeof(tf_ir_node) * (size_t)g->cap_nodes);
    if (!sorted) {
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot reorder %d nodes", n);
      goto done;
    }
    for (int32_t i = 0; i < n; i++)
      sorted[i] = g->nodes[order[i]];
    free(g->nodes);
    g->nodes = sorted;
    tf_strmap_clear(&g->node_names);
    for (int32_t i = 0; i < n; i++) {
      g->tensors[g->nodes[i].outputs[0]].producer = i;
      if (!tf_strmap_put(&g->node_names, g->nodes[i].name, i)) {
        status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot index %d nodes", n);
        goto done;
      }
    }
  }
done:
  free(pending);
  free(order);
  free(consumers_start);
  free(consumers);
  return status;
}

static tf_status check_training(const tf_graph *g) {
  if (!g->has_training)
    return NULL;
  const tf_training_config *c = &g->training;
  if ((int)c->optimizer < 0 || c->optimizer > TF_OPTIMIZER_ADAMW8BIT)
    return tf_status_new(TF_ERR_INVALID_INPUT, "training config: unknown optimizer %d", (int)c->optimizer);
  if ((int)c->precision < 0 || c->precision > TF_PRECISION_F16)
    return tf_status_new(TF_ERR_INVALID_INPUT, "training config: unknown precision %d", (int)c->precision);
  double values[] = {c->learning_rate, c->momentum,     c->beta1,     c->beta2,
                     c->epsilon,       c->weight_decay, c->clip_norm, c->loss_scale};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
    if (!isfinite(values[i]) || values[i] < 0)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "training config: hyper-parameter %zu is %g; it must be finite and >= 0", i, values[i]);
  if (c->global_batch < 0 || c->accumulate_steps < 0)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "training config: global batch %" PRId64 " / accumulation %d is negative", c->global_batch,
                         c->accumulate_steps);
  return NULL;
}

tf_status tf_validate_graph(tf_graph *g) {
  for (int32_t i = 0; i < g->n_symbols; i++)
    TF_RETURN_IF_ERROR(check_name("symbol", i, g->symbols[i].name));
  for (int32_t i = 0; i < g->n_tensors; i++)
    TF_RETURN_IF_ERROR(check_tensor(g, i));
  int32_t *producer = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!producer)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot validate %d tensors", g->n_tensors);
  for (int32_t i = 0; i < g->n_tensors; i++)
    producer[i] = -1;
  tf_status status = NULL;
  for (int32_t i = 0; i < g->n_nodes && !status; i++)
    status = check_node(g, i, producer);
  for (int32_t i = 0; i < g->n_tensors && !status; i++) {
    g->tensors[i].producer = producer[i];
    if (g->tensors[i].kind == TF_ACTIVATION && producer[i] < 0)
      status = tf_status_new(TF_ERR_INVALID_INPUT, "activation '%s' is never written by any node", g->tensors[i].name);
  }
  for (int32_t i = 0; i < g->n_outputs && !status; i++)
    if (g->outputs[i] < 0 || g->outputs[i] >= g->n_tensors)
      status = tf_status_new(TF_ERR_INVALID_INPUT, "graph output %d is tensor id %d, outside 0..%d", i, g->outputs[i],
                             g->n_tensors - 1);
  if (!status && (g->loss < -1 || g->loss >= g->n_tensors))
    status = tf_status_new(TF_ERR_INVALID_INPUT, "the loss is tensor id %d, outside 0..%d", g->loss, g->n_tensors - 1);
  if (!status)
    status = check_training(g);
  if (!status)
    status = topological_order(g, producer);
  free(producer);
  return status;
}
