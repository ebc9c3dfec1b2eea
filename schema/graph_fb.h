/* The .tfg graph file (schema/graph.fbs, identifier "TFGR") behind a C API: FlatBuffer bytes <-> IR.
 *
 * Decoding checks structure only (the FlatBuffers Verifier, the file identifier, the schema version,
 * vector lengths that the IR bounds) and copies every value as written, enum values included; the
 * semantic checks (ids in range, arity, op/attribute match, enum ranges, acyclicity) come after, in
 * compiler/validate.c. Implemented in C++ (schema/graph_fb.cc); no exception crosses this API. */
#ifndef TIGHTFIT_SCHEMA_GRAPH_FB_H
#define TIGHTFIT_SCHEMA_GRAPH_FB_H

#include <stddef.h>

#include "tightfit/graph.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decodes the `size` bytes at `data` (any alignment) into a new graph in *out, which the caller
 * destroys with tf_graph_destroy(); *out is NULL on error. Error messages start with `source`
 * (a file name; NULL reads as "<memory>"). Malformed bytes give TF_ERR_INVALID_INPUT. */
tf_status tf_graph_fb_decode(const void *data, size_t size, const char *source, tf_graph **out) TF_MUST_USE;

/* Encodes `graph` as a .tfg FlatBuffer of schema version TF_SCHEMA_VERSION into *data (*size
 * bytes), which the caller frees with free(). Values the format cannot hold (an enum value above
 * its storage type, a rank above TF_MAX_RANK) give TF_ERR_INVALID_ARGUMENT. */
tf_status tf_graph_fb_encode(const tf_graph *graph, void **data, size_t *size) TF_MUST_USE;

/* Verifies the FlatBuffer at `data` and renders it as JSON text that `flatc -b schema/graph.fbs`
 * reads back (enums by name, every scalar shown). The caller frees *json with free(). Floating
 * point values are rounded by flatc's printer: 12 decimal places for double, 6 for float. */
tf_status tf_graph_fb_to_json(const void *data, size_t size, char **json) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
