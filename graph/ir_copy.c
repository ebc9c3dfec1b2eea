/* tf_ir_copy: a deep copy of the IR, ids, names and name maps included, so that passes run on the
 * copy add the same nodes under the same names as on the original. */
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "graph/ir.h"

/* *out = a copy of text (NULL for NULL); false when out of memory. */
static bool copy_string(const char *text, char **out) {
  *out = tf_copy_string(text);
  return !text || *out;
}

static bool copy_tensors(const tf_graph *g, tf_graph *c) {
  c->tensors = tf_copy_array(g->tensors, g->n_tensors, g->cap_tensors, sizeof(tf_ir_tensor));
  if (!c->tensors)
    return false;
  c->cap_tensors = g->cap_tensors;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    tf_ir_tensor *t = &c->tensors[i];
    t->name = t->init_file = t->init_key = NULL;
    c->n_tensors = i + 1; /* so that a failure frees what was copied */
    if (!copy_string(g->tensors[i].name, &t->name) || !copy_string(g->tensors[i].init_file, &t->init_file) ||
        !copy_string(g->tensors[i].init_key, &t->init_key))
      return false;
  }
  return true;
}

static bool copy_nodes(const tf_graph *g, tf_graph *c) {
  c->nodes = tf_copy_array(g->nodes, g->n_nodes, g->cap_nodes, sizeof(tf_ir_node));
  if (!c->nodes)
    return false;
  c->cap_nodes = g->cap_nodes;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    tf_ir_node *n = &c->nodes[i];
    n->name = NULL;
    n->inputs = NULL;
    c->n_nodes = i + 1;
    n->inputs = tf_copy_array(g->nodes[i].inputs, n->n_inputs, n->n_inputs, sizeof(int32_t));
    if (!n->inputs || !copy_string(g->nodes[i].name, &n->name))
      return false;
  }
  return true;
}

static bool copy_symbols(const tf_graph *g, tf_graph *c) {
  c->symbols = tf_copy_array(g->symbols, g->n_symbols, g->cap_symbols, sizeof(tf_ir_symbol));
  if (!c->symbols)
    return false;
  c->cap_symbols = g->cap_symbols;
  for (int32_t i = 0; i < g->n_symbols; i++) {
    c->symbols[i].name = NULL;
    c->n_symbols = i + 1;
    if (!copy_string(g->symbols[i].name, &c->symbols[i].name))
      return false;
  }
  return true;
}

/* The name maps' keys in the copy: the copy's own name of the same tensor or node. */
static const char *tensor_key(const char *key, int32_t id, void *copy) {
  (void)key;
  return ((const tf_graph *)copy)->tensors[id].name;
}

static const char *node_key(const char *key, int32_t id, void *copy) {
  (void)key;
  return ((const tf_graph *)copy)->nodes[id].name;
}

/* tf_ir_unique_name's memory is keyed by the name of the node or tensor that holds its base. */
static bool copy_suffixes(const tf_graph *g, tf_graph *c) {
  for (int32_t i = 0; i < g->next_suffix.capacity; i++) {
    const char *key = g->next_suffix.keys[i];
    if (!key)
      continue;
    const int32_t node = tf_strmap_get(&g->node_names, key), tensor = tf_strmap_get(&g->tensor_names, key);
    const char *own = node >= 0 && g->nodes[node].name == key         ? c->nodes[node].name
                      : tensor >= 0 && g->tensors[tensor].name == key ? c->tensors[tensor].name
                                                                      : NULL;
    if (own && !tf_strmap_put(&c->next_suffix, own, g->next_suffix.values[i]))
      return false; /* a key no name holds (none should) is a hint the copy does without */
  }
  return true;
}

tf_status tf_ir_copy(const tf_graph *g, tf_graph **out) {
  *out = NULL;
  if (g->status)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "graph '%s' holds a builder error: it cannot be copied", g->name);
  tf_graph *c = calloc(1, sizeof(*c));
  if (!c)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot copy graph '%s'", g->name);
  c->version = g->version;
  c->loss = g->loss;
  c->has_training = g->has_training;
  c->training = g->training;
  c->outputs = tf_copy_array(g->outputs, g->n_outputs, g->cap_outputs, sizeof(int32_t));
  c->n_outputs = g->n_outputs;
  c->cap_outputs = g->cap_outputs;
  bool copied = c->outputs && copy_string(g->name, &c->name) && copy_string(g->scope, &c->scope) &&
                copy_tensors(g, c) && copy_nodes(g, c) && copy_symbols(g, c) &&
                tf_strmap_copy(&g->tensor_names, &c->tensor_names, tensor_key, c) &&
                tf_strmap_copy(&g->node_names, &c->node_names, node_key, c) && copy_suffixes(g, c);
  if (!copied) {
    tf_graph_destroy(c);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot copy graph '%s'", g->name);
  }
  *out = c;
  return NULL;
}
