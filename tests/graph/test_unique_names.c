/* tf_ir_unique_name remembers, per base, the suffix to try first, so naming n nodes alike costs n
 * lookups instead of n^2/2. Plan files, reports and tests name nodes by these names, so they must
 * be the ones the plain probing gives ("base", else the first free of base_2, base_3, ...). This
 * test runs random sequences of what changes the set of names (names taken through the memo,
 * names taken directly, nodes removed, tensors renamed) and compares every name with that probing,
 * done here from scratch. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph/ir.h"
#include "ir_test_nodes.h"
#include "tightfit/graph.h"

static tf_test_counts counts;

static bool taken(const tf_graph *g, const char *name) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i].name, name) == 0)
      return true;
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (strcmp(g->tensors[i].name, name) == 0)
      return true;
  return false;
}

/* The naming as it was: probe base, base_2, base_3, ... over every name of the graph. */
static void probed_name(const tf_graph *g, const char *base, char *name, size_t size) {
  snprintf(name, size, "%s", base);
  for (int k = 2; taken(g, name); k++)
    snprintf(name, size, "%s_%d", base, k);
}

static void random_sequence(uint64_t seed, int32_t steps) {
  static const char *const bases[] = {"relu", "relu_2", "grad", "layer/matmul", "x"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_graph_create("names", &g));
  if (!g)
    return;
  uint64_t state = seed;
  int32_t compared = 0, removed = 0, renamed = 0, direct = 0;
  for (int32_t step = 0; step < steps; step++) {
    const char *base = bases[ir_test_next(&state) % 5];
    const uint32_t what = ir_test_next(&state) % 20;
    char name[128], expected[128];
    if (what < 14) { /* a name through the memo, then taken by a node (and its tensor, sometimes) */
      probed_name(g, base, expected, sizeof(expected));
      CHECK_OK(&counts, tf_ir_unique_name(g, base, name, sizeof(name)));
      CHECK(&counts, strcmp(name, expected) == 0, "seed %" PRIu64 " step %d: '%s' named '%s', probing gives '%s'", seed,
            step, base, name, expected);
      compared++;
      if (what < 12)
        ir_test_add_zero(&counts, g, name, what < 4);
    } else if (what < 17) { /* a suffixed name taken directly, past the memo */
      snprintf(name, sizeof(name), "%s_%u", base, 2 + ir_test_next(&state) % 12);
      direct += ir_test_add_zero(&counts, g, name, what == 14);
    } else if (what < 19 && g->n_nodes > 0) { /* a node goes: its name is free again */
      CHECK_OK(&counts, tf_ir_remove_node(g, (int32_t)(ir_test_next(&state) % (uint32_t)g->n_nodes)));
      removed++;
    } else if (g->n_tensors > 0) { /* a tensor is renamed: its old name is free again */
      snprintf(name, sizeof(name), "renamed_%d", step);
      tf_graph_rename(g, (int32_t)(ir_test_next(&state) % (uint32_t)g->n_tensors), name);
      CHECK(&counts, tf_graph_status(g) == NULL, "rename: %s", tf_status_message((tf_status)tf_graph_status(g)));
      renamed++;
    }
  }
  printf("seed %" PRIu64 ": %d names compared with probing (%d nodes left, %d taken directly, %d removals, %d "
         "renames)\n",
         seed, compared, g->n_nodes, direct, removed, renamed);
  tf_graph_destroy(g);
}

/* A base with no room for a suffix is refused, naming it, rather than cut to a name taken. */
static void too_long(void) {
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_graph_create("long", &g));
  if (!g)
    return;
  char base[64], name[64];
  memset(base, 'a', 60);
  base[60] = '\0';
  tf_status status = tf_ir_unique_name(g, base, name, sizeof(name));
  CHECK(&counts, status && strstr(tf_status_message(status), "too long"), "a 60-byte base in 64 bytes: %s",
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  base[52] = '\0'; /* 52 + "_2147483647" + the terminator fit */
  CHECK_OK(&counts, tf_ir_unique_name(g, base, name, sizeof(name)));
  tf_graph_destroy(g);
}

int main(void) {
  for (uint64_t seed = 1; seed <= 20; seed++)
    random_sequence(seed, 600);
  too_long();
  return tf_test_finish("unique names", &counts);
}
