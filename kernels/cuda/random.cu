/* dropout: element i is kept with probability 1 - rate and scaled by 1 / (1 - rate), with the mask a
 * pure function of (session seed, micro-step, the node's seed, i): common/rng.c's Philox4x32-10 and
 * its counter layout, ported operation by operation, so the masks equal the CPU's bit for bit. The
 * seed and micro-step are read from the run values at run time (a replayed graph sees new ones), copied
 * into the step's workspace first.
 *
 * x and y are templated on storage (f32, and f16/bf16 for the cuda target's half kernels): x is
 * loaded to f32, scaled in f32, and each result rounded once, so a half kernel writes the bits of
 * cast up -> f32 kernel -> cast down. With rate 0 y is x's bytes (a copy, or nothing in place), so
 * a non-canonical half NaN keeps its payload where a cast up and down would make it the quiet NaN. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

__device__ inline void philox_round(uint32_t c[4], const uint32_t k[2]) {
  const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
  const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
  const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  const uint32_t next[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  c[0] = next[0];
  c[1] = next[1];
  c[2] = next[2];
  c[3] = next[3];
}

/* tf_rng_uniform(seed, step, stream, index): 24 random bits of the first word, in [0, 1). */
__device__ inline float rng_uniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
  const uint64_t mixed = step * 0x9E3779B97F4A7C15ull ^ stream;
  uint32_t c[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)mixed, (uint32_t)(mixed >> 32)};
  uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  for (int round = 0; round < 10; round++) {
    philox_round(c, k);
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  return (float)(c[0] >> 8) * (1.0f / 16777216.0f);
}

/* The run values live in host memory the device reads over the bus: one thread copies them next to
 * the step (its workspace), so the many threads below read device memory. */
__global__ void copy_run(const tf_cuda_run_values *run, tf_cuda_run_values *copy) {
  tf_cuda_run_values values = {0, 0, 0, 0};
  if (run)
    values = *run;
  *copy = values;
}

template <typename T>
__global__ void dropout_kernel(const T *x, T *y, int64_t n, float rate, float scale, uint64_t stream,
                               const tf_cuda_run_values *run) {
  const uint64_t seed = run->seed, step = (uint64_t)run->micro_step;
  TF_CUDA_GRID_STRIDE(i, n) {
    y[i] = from_f32<T>(rng_uniform(seed, step, stream, (uint64_t)i) >= rate ? to_f32(x[i]) * scale : 0.0f);
  }
}

template <typename T> tf_status dropout_run(const tf_cuda_args *args) {
  const T *x = (const T *)args->inputs[0].data;
  T *y = (T *)args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const float rate = args->attrs->u.dropout.rate;
  if (n == 0)
    return NULL;
  if (!(rate > 0.0f)) {
    if (x == y)
      return NULL;
    return copy(y, x, n * (int64_t)sizeof(T), stream_of(args));
  }
  const float scale = (float)(1.0 / (1.0 - (double)rate));
  tf_cuda_run_values *run = (tf_cuda_run_values *)args->workspace;
  copy_run<<<1, 1, 0, stream_of(args)>>>(args->run, run);
  dropout_kernel<T>
      <<<blocks_for(n), kThreads, 0, stream_of(args)>>>(x, y, n, rate, scale, args->attrs->u.dropout.seed, run);
  return launch_status();
}

} // namespace

TF_CUDA_LAUNCHER(dropout) {
  return with_storage(args->outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    return dropout_run<T>(args);
  });
}

} // namespace tf_cuda
