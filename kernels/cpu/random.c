/* dropout: element i is kept with probability 1 - rate and scaled by 1 / (1 - rate).
 *
 * The mask is a pure function of (session seed, micro-step, the node's seed, i) through the
 * counter-based RNG (common/rng.h): the backward pass (this same op, same attributes, applied to dy)
 * and any recomputation of the forward reproduce it bit for bit, on any thread count. */
#include <string.h>

#include "common/rng.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

void TF_REAL_NAME(tf_cpu_dropout)(const tf_cpu_args *args) {
  const real *x = args->inputs[0].data;
  real *y = args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const float rate = args->attrs->u.dropout.rate;
  if (!(rate > 0.0f)) {
    if (y != x)
      memcpy(y, x, (size_t)n * sizeof(real));
    return;
  }
  const tf_cpu_context *context = args->context;
  const uint64_t seed = context ? context->seed : 0, stream = args->attrs->u.dropout.seed;
  const uint64_t step = context ? (uint64_t)context->micro_step : 0;
  const real scale = (real)(1.0 / (1.0 - (double)rate));
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK / 16), for (int64_t i = 0; i < n; i++) {
        y[i] = tf_rng_uniform(seed, step, stream, (uint64_t)i) >= rate ? x[i] * scale : (real)0;
      });
}
