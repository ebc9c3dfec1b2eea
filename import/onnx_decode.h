/* The importer's decode stage (import/stages.txt): the ONNX protobuf into the model and its node list,
 * ONNX element types, and what a node says of itself (inputs, attributes, its label in messages). */
#ifndef TIGHTFIT_IMPORT_ONNX_DECODE_H
#define TIGHTFIT_IMPORT_ONNX_DECODE_H

#include <stddef.h>

#include "import/onnx_state.h"

/* ---- the model (onnx_decode.c) ---- */

/* Decodes `size` bytes of ONNX protobuf into im->model (freed by the caller with
 * onnx__model_proto__free_unpacked) and checks it: a graph, IR version 3 or newer, a supported opset
 * of the default domain (im->opset); im->onnx is its graph. */
tf_status ox_decode_model(ox_import *im, const void *data, size_t size) TF_MUST_USE;
/* im->nodes (owned by im) from the graph's nodes in their order, and im->producers (value name ->
 * node index); refuses a node without an operator type and a value written twice. */
tf_status ox_decode_nodes(ox_import *im) TF_MUST_USE;
/* The tightfit dtype of ONNX element type `type`; false for types tightfit has no dtype for. */
bool ox_dtype(int32_t type, tf_dtype *out);
/* "FLOAT", "INT64", ... for messages. */
const char *ox_dtype_name(int32_t type);

/* ---- a node (onnx_node.c) ---- */

/* Input i's name (ox_node.inputs, as rewritten), or NULL when absent or empty, or node is NULL. */
const char *ox_input(const ox_node *node, int32_t i);
/* The node writing value `name`, or NULL (an input, an initializer, NULL). */
ox_node *ox_producer(ox_import *im, const char *name);
const Onnx__AttributeProto *ox_attr(const ox_node *node, const char *name);
int64_t ox_attr_int(const ox_node *node, const char *name, int64_t fallback);
/* Whether string attribute `name` (`fallback` when absent) is `expected`. */
bool ox_attr_is(const ox_node *node, const char *name, const char *fallback, const char *expected);
double ox_attr_float(const ox_node *node, const char *name, double fallback);
/* Copies the ints of attribute `name` into out (at most max); returns how many (-1 when absent). */
int32_t ox_attr_ints(const ox_node *node, const char *name, int64_t *out, int32_t max);
/* True when `domain` (a NodeProto's) is ONNX's default one: absent, "" or "ai.onnx". */
bool ox_default_domain(const char *domain);
/* "node 'name' (Conv)" for messages, into the caller's buffer (returned); "the graph" for NULL. */
const char *ox_node_label(const ox_node *node, char *buf, size_t size);
/* A status "<file>: node '<name>' (<op>): <reason>". */
tf_status ox_fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) TF_PRINTF(4, 5);
/* `status` (NULL passes through) prefixed "<file>: node '<name>' (<op>)": a helper's error placed. */
tf_status ox_at(const ox_import *im, const ox_node *node, tf_status status) TF_MUST_USE;
/* An error when input i is absent. */
tf_status ox_need_input(ox_import *im, const ox_node *node, int32_t i) TF_MUST_USE;

#endif
