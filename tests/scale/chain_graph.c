/* Writes a long chain graph (chain.h) for compile-time scaling: bench/compile_scale.sh.
 * usage: chain_graph relu|add NODES OUT.tfg */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"

int main(int argc, char **argv) {
  char *end = NULL;
  long long length = argc == 4 ? strtoll(argv[2], &end, 10) : -1;
  if (argc != 4 || (strcmp(argv[1], "relu") != 0 && strcmp(argv[1], "add") != 0) || !end || *end || length < 1 ||
      length > 10000000) {
    fprintf(stderr, "usage: chain_graph relu|add NODES OUT.tfg (NODES 1 to 10000000)\n");
    return 2;
  }
  tf_graph *g = build_chain(strcmp(argv[1], "add") == 0, length);
  if (!g) {
    fprintf(stderr, "chain_graph: cannot create a graph\n");
    return 1;
  }
  tf_status status = tf_graph_status(g) ? tf_status_new(TF_ERR_INTERNAL, "%s", tf_status_message(tf_graph_status(g)))
                                        : tf_graph_save(g, argv[3]);
  tf_graph_destroy(g);
  if (status) {
    fprintf(stderr, "chain_graph: %s\n", tf_status_message(status));
    tf_status_free(status);
    return 1;
  }
  printf("chain_graph: %s chain of %lld ops written to %s\n", argv[1], length, argv[3]);
  return 0;
}
