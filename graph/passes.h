/* Entry points of the compiler passes that other passes, the builder and the loader call. Each
 * pass lives in its own file, named after it. */
#ifndef TIGHTFIT_GRAPH_PASSES_H
#define TIGHTFIT_GRAPH_PASSES_H

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* validate.c: semantic checks of a decoded or built graph (ids in range, arity, op/attribute
 * match, kinds, declared shapes, single producers, acyclicity). Puts nodes in topological order
 * (stable) when a file lists them otherwise. */
tf_status tf_validate_graph(tf_graph *g) TF_MUST_USE;

/* shapes.c: the concrete shape of a non-activation tensor from its declared shape and the bound
 * symbols; fills rank, shape and bytes. */
tf_status tf_shapes_resolve_tensor(tf_graph *g, int32_t tensor) TF_MUST_USE;
/* shapes.c: runs node `node`'s shape rule on its inputs' concrete shapes and sets its output's
 * shape, bytes and dtype. With `check_dtype`, a stored output dtype that differs is an error. */
tf_status tf_shapes_infer_node(tf_graph *g, int32_t node, bool check_dtype) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
