/* The IR's storage: growing arrays of tensors, nodes and symbols, name maps, and the read-only
 * queries of the public API. */
#include "graph/ir.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"

/* Grows *array (of `element` bytes each) so that it holds at least count + 1 elements. */
static bool reserve(void **array, int32_t *capacity, int32_t count, size_t element) {
  if (count < *capacity)
    return true;
  int32_t grown = *capacity ? *capacity * 2 : 16;
  if (grown <= count)
    return false;
  void *bigger = realloc(*array, (size_t)grown * element);
  if (!bigger)
    return false;
  *array = bigger;
  *capacity = grown;
  return true;
}

tf_status tf_graph_create(const char *name, tf_graph **out) {
  *out = NULL;
  tf_graph *g = calloc(1, sizeof(*g));
  if (!g)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
  g->version = TF_SCHEMA_VERSION;
  g->loss = -1;
  g->name = tf_copy_string(name ? name : "");
  if (!g->name) {
    free(g);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate a graph");
  }
  *out = g;
  return NULL;
}

void tf_graph_destroy(tf_graph *g) {
  if (!g)
    return;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    free(g->tensors[i].name);
    free(g->tensors[i].init_file);
    free(g->tensors[i].init_key);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    free(g->nodes[i].name);
    free(g->nodes[i].inputs);
  }
  for (int32_t i = 0; i < g->n_symbols; i++)
    free(g->symbols[i].name);
  free(g->tensors);
  free(g->nodes);
  free(g->symbols);
  free(g->outputs);
  free(g->name);
  free(g->scope);
  tf_strmap_clear(&g->tensor_names);
  tf_strmap_clear(&g->node_names);
  tf_strmap_clear(&g->next_suffix);
  tf_status_free(g->status);
  free(g);
}

const struct tf_status_s *tf_graph_status(const tf_graph *g) { return g->status; }

void tf_ir_fail(tf_graph *g, tf_status status) {
  if (!status)
    return;
  if (g->status)
    tf_status_free(status);
  else
    g->status = status;
}

tf_status tf_ir_set_name(tf_graph *g, const char *name) {
  char *copy = tf_copy_string(name ? name : "");
  if (!copy)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot copy the graph name");
  free(g->name);
  g->name = copy;
  return NULL;
}

int32_t tf_ir_add_tensor(tf_graph *g, const char *name, tf_dtype dtype, tf_tensor_kind kind, const tf_shape *declared,
                         const tf_init *init, tf_status *status) {
  *status = NULL;
  if (!name || !*name) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "tensor %d has an empty name", g->n_tensors);
    return -1;
  }
  if (tf_strmap_get(&g->tensor_names, name) >= 0) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "tensor name '%s' is used twice", name);
    return -1;
  }
  if (!reserve((void **)&g->tensors, &g->cap_tensors, g->n_tensors, sizeof(tf_ir_tensor))) {
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow the tensor array past %d", g->n_tensors);
    return -1;
  }
  tf_ir_tensor *t = &g->tensors[g->n_tensors];
  memset(t, 0, sizeof(*t));
  t->name = tf_copy_string(name);
  t->dtype = dtype;
  t->kind = kind;
  if (declared)
    t->declared = *declared;
  else
    t->declared.rank = -1;
  t->rank = -1;
  t->bytes = -1;
  t->producer = -1;
  if (init) {
    t->init_kind = init->kind;
    t->init_a = init->a;
    t->init_b = init->b;
    t->init_file = tf_copy_string(init->file);
    t->init_key = tf_copy_string(init->key);
  }
  bool copied = t->name && (!init || ((!init->file || t->init_file) && (!init->key || t->init_key)));
  if (!copied || !tf_strmap_put(&g->tensor_names, t->name, g->n_tensors)) {
    free(t->name);
    free(t->init_file);
    free(t->init_key);
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot store tensor '%s'", name);
    return -1;
  }
  return g->n_tensors++;
}

int32_t tf_ir_add_node(tf_graph *g, const char *name, tf_op op, const int32_t *inputs, int32_t n_inputs,
                       const int32_t *outputs, int32_t n_outputs, const tf_attrs *attrs, tf_status *status) {
  *status = NULL;
  if (!name || !*name) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "node %d has an empty name", g->n_nodes);
    return -1;
  }
  if (tf_strmap_get(&g->node_names, name) >= 0) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "node name '%s' is used twice", name);
    return -1;
  }
  if (n_inputs < 0) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "node '%s' has %d inputs", name, n_inputs);
    return -1;
  }
  if (n_outputs < 0 || n_outputs > TF_MAX_OUTPUTS) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "node '%s' has %d outputs (at most %d)", name, n_outputs,
                            TF_MAX_OUTPUTS);
    return -1;
  }
  /* Callers may pass attributes (or inputs) that live in this very node array, which may move. */
  tf_attrs copied_attrs;
  memset(&copied_attrs, 0, sizeof(copied_attrs));
  if (attrs)
    copied_attrs = *attrs;
  if (!reserve((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof(tf_ir_node))) {
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow the node array past %d", g->n_nodes);
    return -1;
  }
  tf_ir_node *node = &g->nodes[g->n_nodes];
  memset(node, 0, sizeof(*node));
  node->name = tf_copy_string(name);
  node->op = op;
  node->n_inputs = n_inputs;
  node->inputs = malloc(sizeof(int32_t) * (size_t)(n_inputs ? n_inputs : 1));
  node->n_outputs = n_outputs;
  for (int32_t i = 0; i < n_outputs; i++)
    node->outputs[i] = outputs[i];
  node->attrs = copied_attrs;
  node->precision = TF_PRECISION_INHERIT;
  if (!node->name || !node->inputs || !tf_strmap_put(&g->node_names, node->name, g->n_nodes)) {
    free(node->name);
    free(node->inputs);
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot store node '%s'", name);
    return -1;
  }
  if (n_inputs)
    memcpy(node->inputs, inputs, sizeof(int32_t) * (size_t)n_inputs);
  for (int32_t i = 0; i < n_outputs; i++)
    if (outputs[i] >= 0 && outputs[i] < g->n_tensors && g->tensors[outputs[i]].producer < 0)
      g->tensors[outputs[i]].producer = g->n_nodes;
  return g->n_nodes++;
}

int32_t tf_ir_add_symbol(tf_graph *g, const char *name, int64_t default_value, tf_status *status) {
  *status = NULL;
  if (!name || !*name) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "symbol %d has an empty name", g->n_symbols);
    return -1;
  }
  if (tf_ir_find_symbol(g, name) >= 0) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "symbol '%s' is declared twice", name);
    return -1;
  }
  if (default_value < 1) {
    *status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "symbol '%s' has default %" PRId64 "; it must be >= 1", name,
                            default_value);
    return -1;
  }
  if (!reserve((void **)&g->symbols, &g->cap_symbols, g->n_symbols, sizeof(tf_ir_symbol))) {
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow the symbol array");
    return -1;
  }
  tf_ir_symbol *s = &g->symbols[g->n_symbols];
  s->name = tf_copy_string(name);
  if (!s->name) {
    *status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot store symbol '%s'", name);
    return -1;
  }
  s->default_value = default_value;
  s->value = default_value;
  s->bound = false;
  return g->n_symbols++;
}

tf_status tf_ir_add_output(tf_graph *g, int32_t tensor) {
  if (!reserve((void **)&g->outputs, &g->cap_outputs, g->n_outputs, sizeof(int32_t)))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot grow the output list");
  g->outputs[g->n_outputs++] = tensor;
  return NULL;
}

int32_t tf_ir_find_symbol(const tf_graph *g, const char *name) {
  for (int32_t i = 0; i < g->n_symbols; i++)
    if (strcmp(g->symbols[i].name, name) == 0)
      return i;
  return -1;
}

int64_t tf_ir_dim_value(const tf_graph *g, tf_dim dim) {
  if (dim.symbol < 0)
    return dim.size;
  if (dim.symbol >= g->n_symbols || dim.size < 1)
    return -1;
  int64_t value;
  if (__builtin_mul_overflow(dim.size, g->symbols[dim.symbol].value, &value))
    return -1;
  return value;
}

const char *tf_ir_format_declared(const tf_graph *g, const tf_shape *shape, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t i = 0; i < shape->rank && i < TF_MAX_RANK && used < size; i++) {
    tf_dim d = shape->dims[i];
    const char *sep = i ? "," : "";
    if (d.symbol >= 0 && d.symbol < g->n_symbols) {
      if (d.size == 1)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, g->symbols[d.symbol].name);
      else
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64 "*%s", sep, d.size, g->symbols[d.symbol].name);
    } else if (d.symbol >= 0) {
      used += (size_t)snprintf(buf + used, size - used, "%s<symbol %d?>", sep, d.symbol);
    } else {
      used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, sep, d.size);
    }
  }
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

bool tf_ir_bytes(tf_dtype dtype, const int64_t *shape, int32_t rank, int64_t *bytes) {
  int64_t total = tf_dtype_size(dtype);
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0 || __builtin_mul_overflow(total, shape[i], &total))
      return false;
  }
  *bytes = total;
  return true;
}

/* ---- public queries ---- */

const char *tf_graph_name(const tf_graph *g) { return g->name; }
int32_t tf_graph_tensor_count(const tf_graph *g) { return g->n_tensors; }
int32_t tf_graph_node_count(const tf_graph *g) { return g->n_nodes; }
int32_t tf_graph_symbol_count(const tf_graph *g) { return g->n_symbols; }
int32_t tf_graph_output_count(const tf_graph *g) { return g->n_outputs; }
tf_tensor_id tf_graph_loss(const tf_graph *g) { return g->loss; }

tf_tensor_id tf_graph_output_at(const tf_graph *g, int32_t index) {
  return index >= 0 && index < g->n_outputs ? g->outputs[index] : TF_NO_TENSOR;
}

const tf_training_config *tf_graph_training(const tf_graph *g) { return g->has_training ? &g->training : NULL; }

bool tf_graph_tensor(const tf_graph *g, tf_tensor_id id, tf_tensor_info *info) {
  if (id < 0 || id >= g->n_tensors)
    return false;
  const tf_ir_tensor *t = &g->tensors[id];
  memset(info, 0, sizeof(*info));
  info->name = t->name;
  info->dtype = t->dtype;
  info->kind = t->kind;
  info->declared = t->declared;
  info->rank = t->rank;
  if (t->rank > 0)
    memcpy(info->shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  info->bytes = t->bytes;
  info->init = (tf_init){t->init_kind, t->init_a, t->init_b, t->init_file, t->init_key};
  info->producer = t->producer;
  return true;
}

bool tf_graph_node_at(const tf_graph *g, int32_t id, tf_node_info *info) {
  if (id < 0 || id >= g->n_nodes)
    return false;
  const tf_ir_node *n = &g->nodes[id];
  info->name = n->name;
  info->op = n->op;
  info->n_inputs = n->n_inputs;
  info->inputs = n->inputs;
  info->output = n->n_outputs > 0 ? n->outputs[0] : TF_NO_TENSOR;
  info->attrs = &n->attrs;
  info->precision = n->precision;
  return true;
}

int32_t tf_graph_find_node(const tf_graph *g, const char *name) { return tf_strmap_get(&g->node_names, name); }

bool tf_graph_symbol_at(const tf_graph *g, int32_t id, const char **name, int64_t *default_value, int64_t *value) {
  if (id < 0 || id >= g->n_symbols)
    return false;
  *name = g->symbols[id].name;
  *default_value = g->symbols[id].default_value;
  *value = g->symbols[id].value;
  return true;
}

tf_tensor_id tf_graph_find_tensor(const tf_graph *g, const char *name) { return tf_strmap_get(&g->tensor_names, name); }

int64_t tf_graph_parameter_count(const tf_graph *g) {
  int64_t total = 0;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    const tf_ir_tensor *t = &g->tensors[i];
    if (t->kind != TF_PARAMETER)
      continue;
    int64_t count = 1;
    for (int32_t d = 0; d < t->declared.rank; d++)
      if (__builtin_mul_overflow(count, t->declared.dims[d].size, &count))
        return INT64_MAX;
    if (__builtin_add_overflow(total, count, &total))
      return INT64_MAX;
  }
  return total;
}

/* ---- names ---- */

const char *tf_kind_name(tf_tensor_kind kind) {
  static const char *const names[TF_KIND_COUNT] = {"input", "label", "parameter", "constant", "activation"};
  return (int)kind >= 0 && kind < TF_KIND_COUNT ? names[kind] : "?";
}

static bool name_taken(const tf_graph *g, const char *name) {
  return tf_strmap_get(&g->node_names, name) >= 0 || tf_strmap_get(&g->tensor_names, name) >= 0;
}

tf_status tf_ir_unique_name(tf_graph *g, const char *base, char *name, size_t size) {
  const size_t length = strlen(base);
  if (length + 12 > size) /* room for "_2147483647" and the terminator */
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "name '%.60s...' is too long (%zu bytes; at most %zu)", base, length,
                         size - 12);
  memcpy(name, base, length + 1);
  const int32_t node = tf_strmap_get(&g->node_names, base), tensor = tf_strmap_get(&g->tensor_names, base);
  if (node < 0 && tensor < 0)
    return NULL;
  int32_t k = tf_strmap_get(&g->next_suffix, base);
  k = k < 2 ? 2 : k;
  snprintf(name, size, "%s_%d", base, k);
  while (name_taken(g, name))
    snprintf(name, size, "%s_%d", base, ++k);
  /* the key must outlive the entry: the name of the node or tensor that holds `base` does, as
   * the map is emptied whenever a name goes (a failed put only forgets the hint) */
  (void)tf_strmap_put(&g->next_suffix, node >= 0 ? g->nodes[node].name : g->tensors[tensor].name, k);
  return NULL;
}

void tf_ir_forget_suffixes(tf_graph *g) { tf_strmap_clear(&g->next_suffix); }

static tf_status index_node_names(tf_graph *g) {
  tf_strmap_clear(&g->node_names);
  if (!tf_strmap_reserve(&g->node_names, g->n_nodes))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot index %d nodes", g->n_nodes);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!tf_strmap_put(&g->node_names, g->nodes[i].name, i))
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot index %d nodes", g->n_nodes);
  return NULL;
}

tf_status tf_ir_reorder_nodes(tf_graph *g, const int32_t *order) {
  const size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
  tf_ir_node *nodes = malloc(sizeof(tf_ir_node) * n);
  int32_t *new_id = malloc(sizeof(int32_t) * n);
  bool *seen = calloc(n, sizeof(bool));
  tf_status status = NULL;
  if (!nodes || !new_id || !seen)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot reorder %d nodes", g->n_nodes);
  for (int32_t i = 0; !status && i < g->n_nodes; i++) {
    if (order[i] < 0 || order[i] >= g->n_nodes || seen[order[i]])
      status = tf_status_new(TF_ERR_INTERNAL, "reorder: entry %d (node %d) is not a permutation", i, order[i]);
    else {
      seen[order[i]] = true;
      nodes[i] = g->nodes[order[i]];
      new_id[order[i]] = i;
    }
  }
  if (!status) {
    memcpy(g->nodes, nodes, sizeof(tf_ir_node) * (size_t)g->n_nodes);
    for (int32_t t = 0; t < g->n_tensors; t++)
      if (g->tensors[t].producer >= 0)
        g->tensors[t].producer = new_id[g->tensors[t].producer];
    status = index_node_names(g);
  }
  free(nodes);
  free(new_id);
  free(seen);
  return status;
}

tf_status tf_ir_remove_nodes(tf_graph *g, const int32_t *ids, int32_t n_ids, int32_t *new_ids) {
  const int32_t before = g->n_nodes;
  int32_t *new_id = new_ids ? new_ids : malloc(sizeof(int32_t) * (size_t)(before ? before : 1));
  if (!new_id)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot remove nodes from %d", before);
  tf_status status = NULL;
  for (int32_t i = 0; i < before; i++)
    new_id[i] = 0;
  for (int32_t k = 0; k < n_ids && !status; k++) {
    if (ids[k] < 0 || ids[k] >= before || new_id[ids[k]] < 0)
      status =
          tf_status_new(TF_ERR_INTERNAL, "remove node %d: out of range (%d nodes) or listed twice", ids[k], before);
    else
      new_id[ids[k]] = -1;
  }
  int32_t kept = 0;
  for (int32_t i = 0; i < before && !status; i++) {
    if (new_id[i] < 0) {
      free(g->nodes[i].name);
      free(g->nodes[i].inputs);
      continue;
    }
    new_id[i] = kept;
    g->nodes[kept++] = g->nodes[i];
  }
  if (!status) {
    g->n_nodes = kept;
    tf_ir_forget_suffixes(g);
    for (int32_t i = 0; i < g->n_tensors; i++) {
      int32_t *producer = &g->tensors[i].producer;
      if (*producer >= 0 && *producer < before)
        *producer = new_id[*producer];
    }
    status = index_node_names(g);
  }
  if (new_id != new_ids)
    free(new_id);
  return status;
}

tf_status tf_ir_remove_node(tf_graph *g, int32_t node) { return tf_ir_remove_nodes(g, &node, 1, NULL); }
