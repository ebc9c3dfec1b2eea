/* The .tfg graph file (schema/graph.fbs, identifier "TFGR") behind a C API of plain structs.
 *
 * Decoding checks structure only (the FlatBuffers Verifier, the file identifier, the schema version,
 * vector lengths that the structs bound) and hands every value, as written, enum values included, to
 * a sink of callbacks: graph/ builds its IR from them (graph/graph_file.c). Encoding reads the
 * graph through a source of callbacks. The semantic checks (ids in range, arity, op/attribute
 * match, enum ranges, acyclicity) come after, in graph/validate.c. Implemented in C++
 * (schema/graph_fb.cc); no exception crosses this API. */
#ifndef TIGHTFIT_SCHEMA_GRAPH_FB_H
#define TIGHTFIT_SCHEMA_GRAPH_FB_H

#include <stddef.h>

#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor of a graph file. Pointers are borrowed: valid during the callback that receives them
 * (decoding) or until the encoder returns (encoding). */
typedef struct tf_graph_fb_tensor {
  const char *name;
  tf_dtype dtype;        /* as stored: may be out of the enum's range */
  tf_tensor_kind kind;   /* as stored */
  const tf_shape *shape; /* the declared shape; NULL when none (activations) */
  const tf_init *init;   /* NULL when none */
  bool frozen;           /* Tensor.trainable false: a parameter that training leaves as it is */
} tf_graph_fb_tensor;

/* One node of a graph file. */
typedef struct tf_graph_fb_node {
  const char *name;
  tf_op op; /* as stored */
  int32_t n_inputs;
  const int32_t *inputs;
  int32_t n_outputs;
  const int32_t *outputs;
  const tf_attrs *attrs;
  tf_precision precision; /* the override as stored; TF_PRECISION_INHERIT when the file has none */
} tf_graph_fb_node;

/* What a decoded graph is handed to, in file order: begin, every symbol, tensor and node, every
 * output, then finish. A callback's error stops decoding; the decoder prefixes it with the item
 * ("tensor 3 'x'") and `source`. */
typedef struct tf_graph_fb_sink {
  void *context;
  tf_status (*begin)(void *context, const char *name, uint32_t version);
  tf_status (*symbol)(void *context, const char *name, int64_t default_value);
  tf_status (*tensor)(void *context, const tf_graph_fb_tensor *tensor);
  tf_status (*node)(void *context, const tf_graph_fb_node *node);
  tf_status (*output)(void *context, int32_t tensor);
  /* The loss tensor id as stored, and the training config (NULL when the file has none). */
  void (*finish)(void *context, int32_t loss, const tf_training_config *training);
} tf_graph_fb_sink;

/* A graph to encode: counts and scalars, and callbacks that describe item i. */
typedef struct tf_graph_fb_source {
  const void *context;
  const char *name;
  int32_t n_symbols, n_tensors, n_nodes, n_outputs;
  const int32_t *outputs;
  int32_t loss;
  const tf_training_config *training; /* NULL: none */
  void (*symbol_at)(const void *context, int32_t i, const char **name, int64_t *default_value);
  void (*tensor_at)(const void *context, int32_t i, tf_graph_fb_tensor *tensor);
  void (*node_at)(const void *context, int32_t i, tf_graph_fb_node *node);
} tf_graph_fb_source;

/* Decodes the `size` bytes at `data` (any alignment) into `sink`. Error messages start with
 * `source` (a file name; NULL reads as "<memory>"). Malformed bytes give TF_ERR_INVALID_INPUT. */
tf_status tf_graph_fb_decode(const void *data, size_t size, const char *source,
                             const tf_graph_fb_sink *sink) TF_MUST_USE;

/* Encodes the graph `graph` describes as a .tfg FlatBuffer of schema version TF_SCHEMA_VERSION into
 * *data (*size bytes), which the caller frees with free(). Values the format cannot hold (an enum
 * value above its storage type, a rank above TF_MAX_RANK) give TF_ERR_INVALID_ARGUMENT. */
tf_status tf_graph_fb_encode(const tf_graph_fb_source *graph, void **data, size_t *size) TF_MUST_USE;

/* Verifies the FlatBuffer at `data` and renders it as JSON text that `flatc -b schema/graph.fbs`
 * reads back (enums by name, every scalar shown). The caller frees *json with free(). Floating
 * point values are rounded by flatc's printer: 12 decimal places for double, 6 for float. */
tf_status tf_graph_fb_to_json(const void *data, size_t size, char **json) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
