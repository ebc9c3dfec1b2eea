/* The kernel calls that test_precision (f32 against f64, thread-count determinism) and
 * dump_torch_cases (PyTorch float64 reference) share: every kernel of the family except cast (which
 * test_cast and dump_torch_cases check on raw storage), on random inputs with odd sizes,
 * broadcasting, negative axes and both keepdims. Inputs are rounded to float, so the f32 and f64
 * kernels see identical values. */
#ifndef TIGHTFIT_TESTS_OPS_ELEMENTWISE_OP_CALLS_H
#define TIGHTFIT_TESTS_OPS_ELEMENTWISE_OP_CALLS_H

#include "harness.h"

#define OP_CALL_MAX_INPUTS 5

typedef struct op_call {
  char name[96]; /* "add [3,1,5] [4,1]" */
  tf_op op;
  tf_attrs attrs;
  int n_inputs;
  th_tensor inputs[OP_CALL_MAX_INPUTS];
  double tolerance; /* f32 vs f64: max |y32 - y64| / max(max |y64|, 1e-6) */
} op_call;

/* Fills calls[0..n) and returns n (at most `capacity`). `large` adds tensors of 10^5 elements and
 * more, which take the kernels' parallel paths. Tensors come from th_alloc(). */
int op_calls_build(op_call *calls, int capacity, bool large);

#endif
