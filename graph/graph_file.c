/* The IR <-> the .tfg shim's plain structs. Decoding appends what the shim hands over, enum values
 * as stored (graph/validate.c checks their ranges later); encoding describes each IR item. */
#include "graph/graph_file.h"

#include <stdlib.h>

#include "schema/graph_fb.h"

/* ---- decode: the sink ---- */

typedef struct builder {
  tf_graph *graph;
} builder;

static tf_status begin(void *context, const char *name, uint32_t version) {
  builder *b = context;
  TF_RETURN_IF_ERROR(tf_graph_create(name, &b->graph));
  b->graph->version = version;
  return NULL;
}

static tf_status add_symbol(void *context, const char *name, int64_t default_value) {
  tf_status status = NULL;
  tf_ir_add_symbol(((builder *)context)->graph, name, default_value, &status);
  return status;
}

static tf_status add_tensor(void *context, const tf_graph_fb_tensor *tensor) {
  tf_graph *g = ((builder *)context)->graph;
  tf_status status = NULL;
  int32_t id = tf_ir_add_tensor(g, tensor->name, TF_F32, TF_INPUT, tensor->shape, tensor->init, &status);
  if (id < 0)
    return status;
  g->tensors[id].dtype = tensor->dtype;
  g->tensors[id].kind = tensor->kind;
  g->tensors[id].frozen = tensor->frozen;
  return NULL;
}

static tf_status add_node(void *context, const tf_graph_fb_node *node) {
  tf_graph *g = ((builder *)context)->graph;
  tf_status status = NULL;
  int32_t id = tf_ir_add_node(g, node->name, TF_OP_MATMUL, node->inputs, node->n_inputs, node->outputs, node->n_outputs,
                              node->attrs, &status);
  if (id < 0)
    return status;
  g->nodes[id].op = node->op;
  g->nodes[id].precision = node->precision;
  return NULL;
}

static tf_status add_output(void *context, int32_t tensor) {
  return tf_ir_add_output(((builder *)context)->graph, tensor);
}

static void finish(void *context, int32_t loss, const tf_training_config *training) {
  tf_graph *g = ((builder *)context)->graph;
  g->loss = loss;
  g->has_training = training != NULL;
  if (training)
    g->training = *training;
}

tf_status tf_graph_decode(const void *data, size_t size, const char *source, tf_graph **out) {
  *out = NULL;
  builder b = {.graph = NULL};
  const tf_graph_fb_sink sink = {
      .context = &b,
      .begin = begin,
      .symbol = add_symbol,
      .tensor = add_tensor,
      .node = add_node,
      .output = add_output,
      .finish = finish,
  };
  tf_status status = tf_graph_fb_decode(data, size, source, &sink);
  if (status) {
    tf_graph_destroy(b.graph);
    return status;
  }
  *out = b.graph;
  return NULL;
}

/* ---- encode: the source ---- */

/* The encoder reads a tensor's init through a pointer; the IR keeps its fields apart, so each
 * tensor's is assembled here, in an array that lives until the encoder returns. */
typedef struct describer {
  const tf_graph *graph;
  tf_init *inits;
} describer;

static void tensor_at(const void *context, int32_t i, tf_graph_fb_tensor *out) {
  const describer *d = context;
  const tf_ir_tensor *t = &d->graph->tensors[i];
  d->inits[i] =
      (tf_init){.kind = t->init_kind, .a = t->init_a, .b = t->init_b, .file = t->init_file, .key = t->init_key};
  *out = (tf_graph_fb_tensor){
      .name = t->name,
      .dtype = t->dtype,
      .kind = t->kind,
      .shape = t->declared.rank >= 0 ? &t->declared : NULL, /* activations (rank -1) declare none */
      .init = &d->inits[i],
      .frozen = t->frozen,
  };
}

static void node_at(const void *context, int32_t i, tf_graph_fb_node *out) {
  const tf_ir_node *n = &((const describer *)context)->graph->nodes[i];
  *out = (tf_graph_fb_node){
      .name = n->name,
      .op = n->op,
      .n_inputs = n->n_inputs,
      .inputs = n->inputs,
      .n_outputs = n->n_outputs,
      .outputs = n->outputs,
      .attrs = &n->attrs,
      .precision = n->precision,
  };
}

static void symbol_at(const void *context, int32_t i, const char **name, int64_t *default_value) {
  const tf_ir_symbol *symbol = &((const describer *)context)->graph->symbols[i];
  *name = symbol->name;
  *default_value = symbol->default_value;
}

tf_status tf_graph_encode(const tf_graph *graph, void **data, size_t *size) {
  describer d = {.graph = graph, .inits = calloc(graph->n_tensors > 0 ? (size_t)graph->n_tensors : 1, sizeof(tf_init))};
  if (!d.inits)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "encoding graph '%s': out of memory", graph->name);
  const tf_graph_fb_source source = {
      .context = &d,
      .name = graph->name,
      .n_symbols = graph->n_symbols,
      .n_tensors = graph->n_tensors,
      .n_nodes = graph->n_nodes,
      .n_outputs = graph->n_outputs,
      .outputs = graph->outputs,
      .loss = graph->loss,
      .training = graph->has_training ? &graph->training : NULL,
      .symbol_at = symbol_at,
      .tensor_at = tensor_at,
      .node_at = node_at,
  };
  tf_status status = tf_graph_fb_encode(&source, data, size);
  free(d.inits);
  return status;
}
