/* Small graphs for the per-op checks (the conformance suite's cases, tests/conformance, and the
 * backend drivers' own checks): every floating operand a parameter, so one training plan checks an
 * op's forward output and the gradients of its backward ops against the CPU kernels. */
#ifndef TIGHTFIT_TESTS_OP_GRAPHS_H
#define TIGHTFIT_TESTS_OP_GRAPHS_H

#include "check.h"
#include "tightfit/graph.h"

/* A fixed dimension (shorthand for the shapes of the cases). */
static inline tf_dim d(int64_t size) { return tf_fixed(size); }

/* A new graph named `name`; a failure is recorded in counts (and NULL returned). */
tf_graph *tf_test_graph_begin(tf_test_counts *counts, const char *name);
/* An f32 parameter drawn from N(0, 1), or from U(0.5, 2) (positive: log, sqrt, divisors). */
tf_tensor_id tf_test_param(tf_graph *g, const char *name, tf_shape shape);
tf_tensor_id tf_test_positive(tf_graph *g, const char *name, tf_shape shape);
/* Marks y as the output and makes the loss sum(y x probe), so dloss/dy = probe (an input). */
void tf_test_finish_probe(tf_graph *g, tf_tensor_id y);
/* Marks `loss` (a loss op's scalar) as the output and the loss. */
void tf_test_finish_loss(tf_graph *g, tf_tensor_id loss);

#endif
