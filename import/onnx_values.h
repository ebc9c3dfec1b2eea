/* The importer's values stage (import/stages.txt): one value per ONNX name (onnx_state.h's ox_value),
 * known values decoded from tensors, graph tensors made from initializers and known values on first
 * use, graph inputs and their symbols; folding known values is onnx_fold.h, the same stage. */
#ifndef TIGHTFIT_IMPORT_ONNX_VALUES_H
#define TIGHTFIT_IMPORT_ONNX_VALUES_H

#include "import/onnx_decode.h"

/* ---- the value table and known values (onnx_values.c) ---- */

/* The value named `name`, created empty when new; NULL when memory runs out. */
ox_value *ox_value_get(ox_import *im, const char *name);
/* The value `name` if it exists, else NULL. */
ox_value *ox_value_find(ox_import *im, const char *name);
/* The most elements one known value holds: shape data, position tables and the constants a file
 * holds, not activations. */
#define OX_MAX_KNOWN_ELEMENTS ((int64_t)1 << 26)
/* The most elements the known values one import computes hold in all (ox_set_known counts them;
 * values read from the file are not counted), or one per byte of the file where that is more:
 * bounds the work a small file can ask of the folds, in proportion to its size. */
#define OX_MAX_FOLDED_ELEMENTS ((int64_t)1 << 24)
/* A new known value of `count` elements (owned by the caller until stored in a value); NULL past
 * OX_MAX_KNOWN_ELEMENTS or when memory runs out (ox_known_refusal says which). */
ox_known *ox_known_new(bool is_float, tf_dtype dtype, int32_t rank, const int64_t *shape);
/* Why ox_known_new(rank, shape) gave NULL: TF_ERR_UNSUPPORTED naming the element count when the shape
 * is over OX_MAX_KNOWN_ELEMENTS, else TF_ERR_OUT_OF_MEMORY "no memory for `what`". */
tf_status ox_known_refusal(int32_t rank, const int64_t *shape, const char *what) TF_MUST_USE;
/* ox_known_new of a value computed at import, refused before anything is allocated when its elements
 * pass `room` (ox_fold_room) or OX_MAX_KNOWN_ELEMENTS; errors name `what` ("a Where"). */
tf_status ox_known_within(bool is_float, tf_dtype dtype, int32_t rank, const int64_t *shape, int64_t room,
                          const char *what, ox_known **out) TF_MUST_USE;
/* How many elements the values this import computes may hold in all: OX_MAX_FOLDED_ELEMENTS, or the
 * file's bytes where more. */
int64_t ox_fold_budget(const ox_import *im);
/* How many more elements the values this import computes may hold (ox_fold_budget in all). */
int64_t ox_fold_room(const ox_import *im);
void ox_known_free(ox_known *known);
/* Decodes an ONNX tensor (raw or typed data) into a known value; errors name `what`. */
tf_status ox_known_from_tensor(const Onnx__TensorProto *t, const char *what, ox_known **out) TF_MUST_USE;
/* The graph tensor of value `name` for node `node` (messages), materialising a parameter from its
 * initializer or a constant from a known value on first use. */
tf_status ox_tensor(ox_import *im, const ox_node *node, const char *name, tf_tensor_id *out) TF_MUST_USE;
/* A graph constant holding known value `k` (taken: freed here), named `name` or, where taken, `name`
 * with underscores added; its values go to the weights file unless they are all one. */
tf_status ox_known_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k,
                            tf_tensor_id *out) TF_MUST_USE;
/* ox_known_constant whose values always go to the weights file, under the constant's name (state
 * that training changes: a tracked running statistic, which tightfit.from_torch sets there). */
tf_status ox_stored_constant(ox_import *im, const ox_node *node, const char *name, ox_known *k,
                             tf_tensor_id *out) TF_MUST_USE;
/* The known value of `name`, or an error naming the node that needs it known. */
tf_status ox_need_known(ox_import *im, const ox_node *node, const char *name, const ox_known **out) TF_MUST_USE;
/* The prime symbol `symbol` is bound to while importing (onnx_state.h); 0 past OX_MAX_SYMBOLS. */
int64_t ox_symbol_prime(int32_t symbol);
/* The symbolic shape of graph tensor `id`: each axis decoded from the shape the builder inferred at
 * the import-time symbol values (distinct primes), so N*T-sized axes come back as -1 ("unknown"). */
void ox_tensor_dims(const ox_import *im, tf_tensor_id id, int32_t *rank, tf_dim *dims);
/* The builder's first error, prefixed with the node; NULL when the graph is fine. */
tf_status ox_graph_error(ox_import *im, const ox_node *node);

/* ---- the graph's inputs and initializers (onnx_inputs.c) ---- */

/* A value for each initializer (float ones become parameters when first read, others known values)
 * and a graph input for each other graph input, its dynamic axes the graph's symbols. */
tf_status ox_add_graph_values(ox_import *im) TF_MUST_USE;

#endif
