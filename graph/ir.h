/* The IR shared by every compiler pass: tensors and nodes in arrays, addressed by id.
 *
 * `struct tf_graph` is the object behind the public tf_graph handle: the builder API, the
 * FlatBuffer loader and every pass read and write these arrays directly. Ids are indices; a node's
 * output tensor records its producer. */
#ifndef TIGHTFIT_GRAPH_IR_H
#define TIGHTFIT_GRAPH_IR_H

#include "common/strmap.h"
#include "tightfit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_ir_tensor {
  char *name;
  tf_dtype dtype;
  tf_tensor_kind kind;
  tf_shape declared; /* rank -1 for activations */
  int32_t rank;      /* concrete shape after inference; -1 before */
  int64_t shape[TF_MAX_RANK];
  int64_t bytes; /* -1 before inference */
  tf_init_kind init_kind;
  double init_a, init_b;
  char *init_file, *init_key; /* TF_INIT_EXTERNAL */
  int32_t producer;           /* node id or -1 */
  bool frozen;                /* a parameter that training leaves as it is (tf_graph_set_trainable) */
} tf_ir_tensor;

typedef struct tf_ir_node {
  char *name;
  tf_op op;
  int32_t n_inputs;
  int32_t *inputs;                 /* tensor ids; owned */
  int32_t n_outputs;               /* 0 for ops that only update their inputs in place (optimizer) */
  int32_t outputs[TF_MAX_OUTPUTS]; /* tensor ids */
  tf_attrs attrs;
  tf_precision precision; /* storage override for the activations it saves; TF_PRECISION_INHERIT: none */
} tf_ir_node;

typedef struct tf_ir_symbol {
  char *name;
  int64_t default_value;
  int64_t value; /* the bound value, or default_value */
  bool bound;
} tf_ir_symbol;

struct tf_graph {
  char *name;
  uint32_t version;
  tf_ir_tensor *tensors;
  int32_t n_tensors, cap_tensors;
  tf_ir_node *nodes;
  int32_t n_nodes, cap_nodes;
  tf_ir_symbol *symbols;
  int32_t n_symbols, cap_symbols;
  int32_t *outputs;
  int32_t n_outputs, cap_outputs;
  int32_t loss; /* tensor id or -1 */
  bool has_training;
  tf_training_config training;
  char *scope;            /* builder: prefix of new node names */
  tf_strmap tensor_names; /* name -> tensor id */
  tf_strmap node_names;   /* name -> node id */
  /* tf_ir_unique_name's memory: a taken base name -> the suffix to try first (every smaller one
   * is taken). Keys borrow the names of the nodes and tensors; emptied whenever a name goes. */
  tf_strmap next_suffix;
  tf_status status; /* builder: first error (sticky) */
};

/* Appends a tensor; copies `name` and the init strings. Returns its id or -1 with *status set. */
int32_t tf_ir_add_tensor(tf_graph *g, const char *name, tf_dtype dtype, tf_tensor_kind kind, const tf_shape *declared,
                         const tf_init *init, tf_status *status);
/* Appends a node whose output tensors already exist; copies name, inputs and outputs. Sets each
 * output's producer when it is in range; the node has no precision override. Returns the node id
 * or -1 with *status set. */
int32_t tf_ir_add_node(tf_graph *g, const char *name, tf_op op, const int32_t *inputs, int32_t n_inputs,
                       const int32_t *outputs, int32_t n_outputs, const tf_attrs *attrs, tf_status *status);
/* Removes node `node`: later nodes move down one id, producers follow, and its outputs keep no
 * producer (the caller makes sure nothing reads them). */
tf_status tf_ir_remove_node(tf_graph *g, int32_t node) TF_MUST_USE;
/* Removes the n_ids nodes `ids` (any order, each once) as tf_ir_remove_node does, indexing the
 * names once. With `new_ids` (one entry per node before), also says where each node went: its new
 * id, or -1 when removed. */
tf_status tf_ir_remove_nodes(tf_graph *g, const int32_t *ids, int32_t n_ids, int32_t *new_ids) TF_MUST_USE;
/* Puts the nodes in the order `order` gives (order[new id] = old id, a permutation of every node):
 * producers and the name index follow. */
tf_status tf_ir_reorder_nodes(tf_graph *g, const int32_t *order) TF_MUST_USE;
/* Writes into name[size] a name no node or tensor has: `base`, else the first free of base_2,
 * base_3, ... (remembered per base, so naming n nodes alike is linear). Fails on a name that
 * does not fit in `size`. */
tf_status tf_ir_unique_name(tf_graph *g, const char *base, char *name, size_t size) TF_MUST_USE;
/* Forgets tf_ir_unique_name's memory: for code that removes or renames a node or tensor. */
void tf_ir_forget_suffixes(tf_graph *g);
/* A deep copy of `g` (ir_copy.c): the same ids, names and name maps, so tf_ir_unique_name picks the
 * same names on both. Refuses a graph that holds a builder error. */
tf_status tf_ir_copy(const tf_graph *g, tf_graph **out) TF_MUST_USE;
/* Appends a symbol; returns its id or -1 with *status set. */
int32_t tf_ir_add_symbol(tf_graph *g, const char *name, int64_t default_value, tf_status *status);
/* Appends to the output list. */
tf_status tf_ir_add_output(tf_graph *g, int32_t tensor);
/* Sets the graph's name (copied). */
tf_status tf_ir_set_name(tf_graph *g, const char *name);

/* The value of a dimension under the current bindings; -1 if the symbol id is invalid or the
 * product overflows. Sizes of -1 ("infer") return -1 too. */
int64_t tf_ir_dim_value(const tf_graph *g, tf_dim dim);
/* Returns a symbol id by name, or -1. */
int32_t tf_ir_find_symbol(const tf_graph *g, const char *name);
/* Formats a declared shape as "[N,T*4,80]". */
const char *tf_ir_format_declared(const tf_graph *g, const tf_shape *shape, char *buf, size_t size);
/* Writes `count` elements' byte size of `dtype` into *bytes; false on overflow. */
bool tf_ir_bytes(tf_dtype dtype, const int64_t *shape, int32_t rank, int64_t *bytes);

/* Records `status` as the builder's sticky error (keeps the first; frees later ones). */
void tf_ir_fail(tf_graph *g, tf_status status);

#ifdef __cplusplus
}
#endif
#endif
