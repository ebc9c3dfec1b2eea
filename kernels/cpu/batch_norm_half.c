/* batch_norm_running on f16/bf16 x: the CPU's half kernel of its own (core/half_slices.c,
 * tf_cpu_half_own_kernel), so a plan whose x is half updates its f32 running statistics in place
 * without an f32 copy of x. Each element is widened exactly and summed in double in the order of
 * kernels/cpu/batch_norm.c's statistics, so the statistics are those of the f32 kernel on an exact
 * f32 copy of x, bit for bit; the update is the same: running = (1 - momentum) running + momentum
 * batch, the variance unbiased. One channel per task. Compiled once (f32 objects only). */
#ifndef TF_REAL_F64

#include "kernels/cpu/half_value.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/parallel.h"

static double element(const tf_cpu_tensor *x, int64_t at) {
  return (double)tf_cpu_half_widen(x->dtype, ((const uint16_t *)x->data)[at]);
}

static void running_channel(const tf_cpu_args *args, int64_t batch, int64_t channels, int64_t spatial, int64_t c) {
  const tf_cpu_tensor *x = &args->inputs[0];
  float *mean = args->inputs[1].data, *var = args->inputs[2].data;
  double sum = 0;
  for (int64_t n = 0; n < batch; n++)
    for (int64_t s = 0; s < spatial; s++)
      sum += element(x, (n * channels + c) * spatial + s);
  const double count = (double)(batch * spatial), mu = sum / count;
  double squares = 0;
  for (int64_t n = 0; n < batch; n++)
    for (int64_t s = 0; s < spatial; s++) {
      const double centred = element(x, (n * channels + c) * spatial + s) - mu;
      squares += centred * centred;
    }
  const double variance = squares / count, momentum = (double)args->attrs->u.norm.momentum;
  const double unbiased = count > 1 ? variance * count / (count - 1) : variance;
  mean[c] = (float)((1 - momentum) * (double)mean[c] + momentum * mu);
  var[c] = (float)((1 - momentum) * (double)var[c] + momentum * unbiased);
}

void tf_cpu_batch_norm_running_half(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0];
  if (x->count == 0)
    return;
  int64_t spatial = 1;
  for (int32_t i = 2; i < x->rank; i++)
    spatial *= x->shape[i];
  const int64_t batch = x->shape[0], channels = x->shape[1];
  TF_CPU_PARALLEL_FOR(tf_cpu_team(tf_cpu_threads(args), x->count > TF_CPU_CHUNK),
                      for (int64_t c = 0; c < channels; c++) running_channel(args, batch, channels, spatial, c););
}

#endif
