/* The importer's patterns stage (import/stages.txt): graph rewrites before any converter runs. A
 * node covering a pattern of several ONNX operators (GELU, attention, layer and RMS norm, SiLU,
 * transposed matmul operands, padded pooling) gets ox_node.fused and the pattern's real inputs; then
 * the nodes the outputs depend on are marked live. */
#ifndef TIGHTFIT_IMPORT_ONNX_PATTERNS_H
#define TIGHTFIT_IMPORT_ONNX_PATTERNS_H

#include "import/onnx_values.h"

/* ---- the stage (onnx_patterns.c) ---- */

/* Rewrites GELU, attention, norms, SiLU, transposed matmul operands and padded pools in im->nodes. */
void ox_rewrite_patterns(ox_import *im);
/* Marks the nodes the graph outputs depend on. */
void ox_mark_live(ox_import *im);

/* ---- attention (onnx_attention.c) ---- */

/* Rewrites `top` into a fused attention node when it ends the attention pattern. */
void ox_match_attention(ox_import *im, ox_node *top);

/* ---- what patterns are matched with (onnx_match.c) ---- */

/* True when `node` is a not yet rewritten `op_type` node (false for NULL). */
bool ox_is_op(const ox_node *node, const char *op_type);
/* True when both names are given and equal. */
bool ox_same_name(const char *a, const char *b);
/* The one number of a Constant node or initializer named `name`, and its dtype (dtype may be NULL). */
bool ox_scalar_of(ox_import *im, const char *name, double *value, tf_dtype *dtype);
/* Whether `name` is one number within `tolerance` of `expected` as its dtype stores it (a bf16
 * model's sqrt(2) is 1.4140625). */
bool ox_is_scalar(ox_import *im, const char *name, double expected, double tolerance);
/* True when node's attribute perm is perm[0, n). */
bool ox_perm_is(const ox_node *node, const int64_t *perm, int32_t n);
/* The integers of a Constant node or known initializer named `name`, at most max; -1 otherwise. */
int32_t ox_ints_of(ox_import *im, const char *name, int64_t *out, int32_t max);

#endif
