/* f32 against f64: every kernel of the family runs in both builds on identical (float-exact)
 * inputs; the f32 result must be within the call's tolerance of the f64 one:
 *   max |y32 - y64| / max(max |y64|, 1e-6) <= tolerance (0 for copies and comparisons).
 * Also checks determinism: 1 and 4 threads give bitwise identical results in both builds, on
 * tensors large enough (10^5 to 10^6 elements) to take the parallel paths. Prints the worst error
 * per op next to its tolerance. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/ops.h"
#include "op_calls.h"

#define MAX_CALLS 512

/* Runs `call` and returns its results: the outputs, then the inputs it updates in place. */
static int run(const op_call *call, bool f64, int threads, th_tensor *results) {
  th_tensor inputs[OP_CALL_MAX_INPUTS];
  for (int i = 0; i < call->n_inputs; i++)
    inputs[i] = th_copy(&call->inputs[i]);
  th_context.threads = threads;
  int n = th_run(call->op, &call->attrs, inputs, call->n_inputs, results, f64);
  if (n < 0)
    return -1;
  const tf_op_info *info = tf_op_info_get(call->op);
  for (int i = 0; i < call->n_inputs; i++)
    if (info->in_place & (1u << i))
      results[n++] = inputs[i];
  return n;
}

typedef struct op_worst {
  tf_op op;
  double error, tolerance;
} op_worst;

int main(void) {
  tf_test_counts counts = {0, 0};
  th_seed(7);
  static op_call calls[MAX_CALLS];
  int n_calls = op_calls_build(calls, MAX_CALLS, true);
  CHECK(&counts, n_calls < MAX_CALLS, "op call list truncated at %d", n_calls);
  op_worst worst[TF_OP_COUNT];
  int n_worst = 0;
  for (int k = 0; k < n_calls; k++) {
    const op_call *call = &calls[k];
    th_tensor r64[8], r32[8], r64_t[8], r32_t[8];
    int n = run(call, true, 1, r64);
    CHECK(&counts, n > 0, "%s: refused", call->name);
    if (n <= 0)
      continue;
    run(call, false, 1, r32);
    run(call, true, 4, r64_t);
    run(call, false, 4, r32_t);
    double error = 0;
    for (int i = 0; i < n; i++) {
      double e = th_relative_error(&r32[i], &r64[i], 1e-6);
      error = e > error ? e : error;
      CHECK(&counts, th_bitwise_equal(&r64[i], &r64_t[i]), "%s: f64 result %d differs between 1 and 4 threads",
            call->name, i);
      CHECK(&counts, th_bitwise_equal(&r32[i], &r32_t[i]), "%s: f32 result %d differs between 1 and 4 threads",
            call->name, i);
    }
    CHECK(&counts, error <= call->tolerance, "%s: f32 vs f64 error %.3g > %.3g", call->name, error, call->tolerance);
    int j = 0;
    while (j < n_worst && worst[j].op != call->op)
      j++;
    if (j == n_worst)
      worst[n_worst++] = (op_worst){call->op, 0, call->tolerance};
    worst[j].error = error > worst[j].error ? error : worst[j].error;
    worst[j].tolerance = call->tolerance > worst[j].tolerance ? call->tolerance : worst[j].tolerance;
  }
  printf("f32 vs f64 over %d calls: worst max|y32-y64|/max(max|y64|,1e-6) per op (tolerance); 1 vs 4 threads "
         "bitwise\n",
         n_calls);
  for (int j = 0; j < n_worst; j++)
    printf("  %-22s %9.2e  (%.0e)\n", tf_op_name(worst[j].op), worst[j].error, worst[j].tolerance);
  th_release();
  return tf_test_finish("ops_elementwise precision", &counts);
}
