/* libFuzzer target for the graph loader: any byte string must give a graph or a clean error,
 * never a crash, leak or undefined behaviour. Built with clang -fsanitize=fuzzer,address,undefined
 * when TIGHTFIT_FUZZ=ON; `.ci/run` runs it for 60 s on the bad-input corpus as seeds. The loader reads
 * an exact-size heap copy of the input, so ASan sees any read past its end (docs/fuzzing.md). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_support.h"
#include "tightfit/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *input = fuzz_heap_copy(data, size);
  tf_graph *g = NULL;
  tf_status status = tf_graph_parse(input, size, "fuzz.tfg", &g);
  fuzz_graph_done(status, g);
  free(input);
  return 0;
}
