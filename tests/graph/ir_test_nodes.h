/* Helpers of the IR tests (test_unique_names, test_ir_copy): a deterministic random sequence and a
 * zero node added under a given name. */
#ifndef TIGHTFIT_TESTS_GRAPH_IR_TEST_NODES_H
#define TIGHTFIT_TESTS_GRAPH_IR_TEST_NODES_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "graph/ir.h"

/* The next value of a 64-bit LCG (its high bits). */
static inline uint32_t ir_test_next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33);
}

/* Adds a zero node named `name` writing a new tensor named `name`/out (or `name` itself); false
 * (nothing added) when either name is taken. A failure to add is recorded in `counts`. */
static inline bool ir_test_add_zero(tf_test_counts *counts, tf_graph *g, const char *name, bool same_tensor_name) {
  char tensor[160];
  snprintf(tensor, sizeof(tensor), same_tensor_name ? "%s" : "%s/out", name);
  if (tf_strmap_get(&g->node_names, name) >= 0 || tf_strmap_get(&g->tensor_names, name) >= 0 ||
      tf_strmap_get(&g->node_names, tensor) >= 0 || tf_strmap_get(&g->tensor_names, tensor) >= 0)
    return false;
  tf_status status = NULL;
  int32_t out = tf_ir_add_tensor(g, tensor, TF_F32, TF_ACTIVATION, NULL, NULL, &status);
  tf_attrs none;
  memset(&none, 0, sizeof(none));
  if (!status)
    tf_ir_add_node(g, name, TF_OP_ZERO, NULL, 0, &out, 1, &none, &status);
  CHECK(counts, status == NULL, "add %s: %s", name, tf_status_message(status));
  tf_status_free(status);
  return true;
}

#endif
