/* The importer's converters stage (import/stages.txt), its shared helpers (import/onnx_convert.c):
 * what every converter of onnx_converters.h reads and writes. Input i of a node is its rewritten
 * input (ox_node.inputs); "known" means known at import time (ox_known). */
#ifndef TIGHTFIT_IMPORT_ONNX_CONVERT_H
#define TIGHTFIT_IMPORT_ONNX_CONVERT_H

#include "import/onnx_values.h"

/* True when value `name` is known and has no graph tensor yet. */
bool ox_is_known(ox_import *im, const char *name);
/* Input i's known value when a fold may read it as a constant (known, no graph tensor yet, not a
 * float initializer, which stays a parameter that trains); NULL otherwise. */
const ox_known *ox_foldable(ox_import *im, const ox_node *node, int32_t i);
/* Output i becomes graph tensor `id` (the builder's error, if any, is returned). */
tf_status ox_set_tensor(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id id) TF_MUST_USE;
/* Output i becomes a value with no elements, of `dtype` and shape dims[0, rank) (ox_empty). */
tf_status ox_set_empty(ox_import *im, const ox_node *node, int32_t i, tf_dtype dtype, int32_t rank,
                       const tf_dim *dims) TF_MUST_USE;
/* Input i's ox_empty when it has no elements; NULL otherwise. */
const ox_empty *ox_empty_input(ox_import *im, const ox_node *node, int32_t i);
/* Output i becomes known value `k` computed at import (taken over, also on error); refused once the
 * import's computed values pass ox_fold_budget. */
tf_status ox_set_known(ox_import *im, const ox_node *node, int32_t i, ox_known *k) TF_MUST_USE;
/* Output i becomes known value `k` read from the file (a Constant node's), not counted: its size is
 * the file's. */
tf_status ox_set_read(ox_import *im, const ox_node *node, int32_t i, ox_known *k) TF_MUST_USE;
/* Input i as a graph tensor (made from an initializer or known value on first use). */
tf_status ox_tensor_of(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *id) TF_MUST_USE;
/* Input i's known value (borrowed). */
tf_status ox_known_of(ox_import *im, const ox_node *node, int32_t i, const ox_known **k) TF_MUST_USE;
/* A graph tensor's rank and dtype after inference. */
int32_t ox_rank_of(ox_import *im, tf_tensor_id id);
tf_dtype ox_dtype_of(ox_import *im, tf_tensor_id id);
/* Input i's known integers, none symbolic, at most max of them, into out[0, *n). */
tf_status ox_fixed_ints(ox_import *im, const ox_node *node, int32_t i, int64_t *out, int32_t max,
                        int32_t *n) TF_MUST_USE;
/* Whether tensor t is a graph constant that one value fills (ConstantOfShape of a symbolic shape, a
 * scalar): that value in *value. */
bool ox_fill_value(ox_import *im, tf_tensor_id t, double *value);
/* A new rank-0 constant of `dtype` holding `value`, named after the node's output. */
tf_tensor_id ox_scalar(ox_import *im, const ox_node *node, tf_dtype dtype, double value);
/* Input i of an elementwise op whose other operand is tensor `other`: a known scalar becomes a
 * constant of the other's dtype. */
tf_status ox_operand(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id other, tf_tensor_id *id) TF_MUST_USE;
/* Whether `dtype` is one of the integer types data may have (i32, i64, u8). */
bool ox_is_integer_dtype(tf_dtype dtype);
/* Of two operands, one f32 and one f16/bf16, the f32 one cast to the half type (PyTorch exports
 * such mixed ops from bf16 models); any other pair is left as it is. */
void ox_match_half(ox_import *im, tf_tensor_id *a, tf_tensor_id *b);
/* The shape of node input 0 (a known value's, or a tensor's with its symbols) into rank and dims:
 * what Shape and Size read. */
tf_status ox_input_dims(ox_import *im, const ox_node *node, int32_t *rank, tf_dim *dims);

#endif
