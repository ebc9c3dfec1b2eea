/* libFuzzer target for the ONNX importer: any byte string must give a graph or a clean error with a
 * message, never a crash, leak or undefined behaviour. tf_onnx_import_bytes decodes the protobuf
 * (protobuf-c), folds shapes, rewrites patterns and builds the graph; with no weights path it writes
 * nothing. A graph that imports must serialise and infer its shapes at N=3 (docs/fuzzing.md). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_support.h"
#include "tightfit/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *input = fuzz_heap_copy(data, size);
  tf_onnx_options options = tf_onnx_options_default();
  /* no loss, cross_entropy (integer labels) and l1 (float labels), chosen deterministically */
  options.loss = size % 3 == 0 ? TF_ONNX_LOSS_NONE : size % 3 == 1 ? TF_ONNX_LOSS_CROSS_ENTROPY : TF_ONNX_LOSS_L1;
  /* float64 casts narrowed (from_torch's setting) or refused, by the size's parity */
  options.narrow_float64 = size % 2 == 1;
  tf_graph *g = NULL;
  tf_status status = tf_onnx_import_bytes(input, size, "fuzz.onnx", &options, &g);
  if (status && !tf_status_message(status)[0])
    __builtin_trap(); /* an error must say what went wrong */
  fuzz_graph_done(status, g);
  free(input);
  return 0;
}
