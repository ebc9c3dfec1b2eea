/* The graph's side of the .tfg shim (schema/graph_fb.h): the IR built from a decoded file, and the
 * IR described to the encoder. Neither validates; graph/load.c does that. */
#ifndef TIGHTFIT_GRAPH_GRAPH_FILE_H
#define TIGHTFIT_GRAPH_GRAPH_FILE_H

#include <stddef.h>

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes the .tfg bytes at `data` into a new graph in *out (values as written, not validated),
 * which the caller destroys with tf_graph_destroy(); *out is NULL on error. Errors start with
 * `source` (NULL reads as "<memory>"). */
tf_status tf_graph_decode(const void *data, size_t size, const char *source, tf_graph **out) TF_MUST_USE;

/* Encodes `graph` as .tfg bytes into *data (*size bytes), which the caller frees with free(). */
tf_status tf_graph_encode(const tf_graph *graph, void **data, size_t *size) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
