/* The top of the importer's converters stage (import/stages.txt): a node to its converter (onnx_ops.c's
 * table), for the driver. */
#ifndef TIGHTFIT_IMPORT_ONNX_OPS_H
#define TIGHTFIT_IMPORT_ONNX_OPS_H

#include "import/onnx_state.h"

/* tightfit's own ONNX domain (its operators: StopGradient). */
#define OX_TIGHTFIT_DOMAIN "tightfit"

/* True when op_type of `domain` (NULL or "" or "ai.onnx": the default domain) has a converter. */
bool ox_op_supported(const char *domain, const char *op_type);
/* Emits node `node` (a fused one as its pattern's op): stores every output value (a tensor or a
 * known value). */
tf_status ox_op_emit(ox_import *im, const ox_node *node) TF_MUST_USE;
/* Whether value v is boolean indexing's positions or values (onnx_masked.c), never a graph output. */
bool ox_is_selected(const ox_value *v);
/* Why such a value that goes elsewhere is refused, and what to write instead (": ..."). */
const char *ox_selection_hint(void);

#endif
