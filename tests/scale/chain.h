/* A long chain graph for compile-time scaling (chain_graph.c, test_scale.c):
 * x [N, 8] -> matmul(w [8, 8]) -> `length` ops -> mse(label), where the ops are
 *   relu (add false): h = relu(h), one reader each (a plain chain);
 *   add (add true):   h = h + previous h (two readers per tensor, so the backward pass sums two
 *                     gradients at every link).
 * Returns the graph (the caller destroys it), or NULL when it cannot be created. */
#ifndef TIGHTFIT_TESTS_SCALE_CHAIN_H
#define TIGHTFIT_TESTS_SCALE_CHAIN_H

#include <stdbool.h>

#include "tightfit/graph.h"

static inline tf_graph *build_chain(bool add, int64_t length) {
  tf_graph *g = NULL;
  if (tf_graph_create(add ? "add_chain" : "relu_chain", &g))
    return NULL;
  int32_t n = tf_graph_symbol(g, "N", 4);
  tf_dim dims[2] = {tf_sym(n), tf_fixed(8)};
  tf_dim weight_dims[2] = {tf_fixed(8), tf_fixed(8)};
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, tf_shape_from(dims, 2));
  tf_tensor_id label = tf_graph_label(g, "y", TF_F32, tf_shape_from(dims, 2));
  tf_tensor_id w =
      tf_graph_parameter(g, "w", TF_F32, tf_shape_from(weight_dims, 2), tf_init_make(TF_INIT_NORMAL, 0, 0.1));
  tf_tensor_id h = tf_matmul(g, x, w, false, false), previous = h;
  for (int64_t i = 0; i < length; i++) {
    tf_tensor_id next = add ? tf_add(g, h, previous) : tf_unary(g, TF_OP_RELU, h);
    previous = h;
    h = next;
  }
  tf_graph_add_output(g, h);
  tf_graph_set_loss(g, tf_mse(g, h, label));
  return g;
}

#endif
