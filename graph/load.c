#define _POSIX_C_SOURCE 200809L
/* Pass 1, load: a .tfg file -> IR. The FlatBuffers Verifier and structural decoding run in
 * schema/graph_fb.cc; then semantic validation and shape inference at the symbols' defaults.
 * Saving goes the other way and writes through a temporary file, so an interrupted save never
 * leaves a broken file behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/file.h"
#include "graph/graph_file.h"
#include "graph/passes.h"

tf_status tf_graph_parse(const void *data, size_t size, const char *source, tf_graph **out) {
  *out = NULL;
  tf_graph *g = NULL;
  TF_RETURN_IF_ERROR(tf_graph_decode(data, size, source, &g));
  tf_status status = tf_validate_graph(g);
  if (!status)
    status = tf_graph_infer_shapes(g);
  if (status) {
    tf_graph_destroy(g);
    return tf_status_prefix(status, "%s", source);
  }
  *out = g;
  return NULL;
}

tf_status tf_graph_load(const char *path, tf_graph **out) {
  *out = NULL;
  void *data;
  size_t size;
  TF_RETURN_IF_ERROR(tf_file_read(path, &data, &size));
  tf_status status = tf_graph_parse(data, size, path, out);
  free(data);
  return status;
}

tf_status tf_graph_serialize(const tf_graph *graph, void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  if (graph->status)
    return tf_status_new(tf_status_code(graph->status), "graph '%s' was not built: %s", graph->name,
                         tf_status_message(graph->status));
  /* Builder graphs are already in topological order, so validation does not modify them. */
  TF_RETURN_IF_ERROR(tf_validate_graph((tf_graph *)graph));
  return tf_graph_encode(graph, data, size);
}

tf_status tf_graph_save(const tf_graph *graph, const char *path) {
  void *data;
  size_t size;
  TF_RETURN_IF_ERROR(tf_graph_serialize(graph, &data, &size));
  /* The atomic writer: through a symbolic link to its file, refusing FIFOs, devices and folders,
   * never leaving a half-written graph (common/atomic_file.h). */
  tf_status status = tf_atomic_file_write_all(path, data, size);
  free(data);
  return status;
}
