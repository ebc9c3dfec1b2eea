/* batch_norm and its gradient, as kernels/cpu/batch_norm.c: x [N, C, S...] viewed as [N, C, S] and
 * normalised per channel c with the mean and biased variance of its M = N x S elements, both in
 * double (two passes); the gradient recomputes them with the same function, so they equal the
 * forward's bit for bit:
 *
 *   xhat = (x - mean) rstd,  dbeta = sum dy,  dgamma = sum dy xhat,
 *   dx = gamma rstd (dy - dbeta / M - xhat dgamma / M).
 *
 * A block of kThreads per channel (grid-stride over channels past kMaxBlocks). Each sum is one
 * strided partial in double per thread over the channel's elements in flat order, then
 * block_sum's fixed warp and shared-memory tree: deterministic, no atomics, no workspace; the order
 * of the double additions differs from the CPU's sequential one. Templated on the storage T of the
 * floating operands like norm.cu (each element loaded to f32 exactly, computed in double as on f32,
 * each result rounded to f32 and then once to T).
 *
 * batch_norm_running updates the running statistics (f32, in place, whatever x's storage T) from
 * the same statistics, the variance unbiased: running = (1 - momentum) running + momentum batch. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

/* x as [N, C, S]. */
struct ChannelView {
  int64_t batch, channels, spatial;

  __device__ int64_t count() const { return batch * spatial; }
  /* Offset of the i-th of channel c's elements (0 <= i < N x S), in (n, s) order. */
  __device__ int64_t offset(int64_t c, int64_t i) const {
    const int64_t n = i / spatial, s = i - n * spatial;
    return (n * channels + c) * spatial + s;
  }
};

struct Stats {
  double mean, rstd, variance; /* variance: biased */
};

ChannelView view_of(const tf_cuda_tensor *x) {
  ChannelView v = {x->shape[0], x->shape[1], 1};
  for (int32_t i = 2; i < x->rank; i++)
    v.spatial *= x->shape[i];
  return v;
}

/* Channel c's statistics (M > 0); every thread of the block gets them. `scratch` as block_sum's. */
template <typename T>
__device__ Stats channel_stats(const T *x, ChannelView v, int64_t c, double epsilon, double *scratch) {
  const int64_t m = v.count();
  double sum = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x)
    sum += (double)to_f32(x[v.offset(c, i)]);
  const double count = (double)m, mean = block_sum(sum, scratch) / count;
  double squares = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const double centred = (double)to_f32(x[v.offset(c, i)]) - mean;
    squares += centred * centred;
  }
  const double variance = block_sum(squares, scratch) / count;
  Stats s = {mean, 1.0 / sqrt(variance + epsilon), variance};
  return s;
}

template <typename T>
__global__ void batch_norm_forward(const T *x, const T *gamma, const T *beta, T *y, ChannelView v, double epsilon) {
  __shared__ double scratch[kThreads / 32];
  const int64_t m = v.count();
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    const Stats st = channel_stats(x, v, c, epsilon, scratch);
    const double g = (double)to_f32(gamma[c]), b = (double)to_f32(beta[c]);
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const int64_t at = v.offset(c, i);
      y[at] = from_f32<T>((float)(((double)to_f32(x[at]) - st.mean) * st.rstd * g + b));
    }
  }
}

template <typename T>
__global__ void batch_norm_backward(const T *x, const T *gamma, const T *dy, T *dx, T *dgamma, T *dbeta, ChannelView v,
                                    double epsilon) {
  __shared__ double scratch[kThreads / 32];
  const int64_t m = v.count();
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    const Stats st = channel_stats(x, v, c, epsilon, scratch);
    double dy_sum = 0, dy_xhat_sum = 0;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const int64_t at = v.offset(c, i);
      const double d = (double)to_f32(dy[at]);
      dy_sum += d;
      dy_xhat_sum += d * (((double)to_f32(x[at]) - st.mean) * st.rstd);
    }
    dy_sum = block_sum(dy_sum, scratch);
    dy_xhat_sum = block_sum(dy_xhat_sum, scratch);
    const double count = (double)m, scale = (double)to_f32(gamma[c]) * st.rstd;
    const double dy_mean = dy_sum / count, dy_xhat_mean = dy_xhat_sum / count;
    for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
      const int64_t at = v.offset(c, i);
      const double xhat = ((double)to_f32(x[at]) - st.mean) * st.rstd;
      dx[at] = from_f32<T>((float)(scale * ((double)to_f32(dy[at]) - dy_mean - xhat * dy_xhat_mean)));
    }
    if (threadIdx.x == 0) {
      dgamma[c] = from_f32<T>((float)dy_xhat_sum);
      dbeta[c] = from_f32<T>((float)dy_sum);
    }
  }
}

template <typename T>
__global__ void batch_norm_running_update(const T *x, float *mean, float *var, ChannelView v, double momentum) {
  __shared__ double scratch[kThreads / 32];
  const double count = (double)v.count();
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    const Stats st = channel_stats(x, v, c, 0.0, scratch);
    if (threadIdx.x == 0) {
      const double unbiased = count > 1 ? st.variance * count / (count - 1) : st.variance;
      mean[c] = (float)((1 - momentum) * (double)mean[c] + momentum * st.mean);
      var[c] = (float)((1 - momentum) * (double)var[c] + momentum * unbiased);
    }
  }
}

/* One block per channel, up to kMaxBlocks. */
unsigned channel_blocks(ChannelView v) { return blocks_for(v.channels, 1); }

template <typename T> tf_status forward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  if (x->count == 0)
    return NULL;
  const ChannelView v = view_of(x);
  batch_norm_forward<T><<<channel_blocks(v), kThreads, 0, stream_of(args)>>>(
      (const T *)x->data, (const T *)args->inputs[1].data, (const T *)args->inputs[2].data, (T *)args->outputs[0].data,
      v, (double)args->attrs->u.norm.epsilon);
  return launch_status();
}

template <typename T> tf_status backward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  cudaStream_t stream = stream_of(args);
  if (x->count == 0) { /* no elements: the parameter gradients are sums of nothing */
    tf_status status = zero(&args->outputs[1], stream);
    return status ? status : zero(&args->outputs[2], stream);
  }
  const ChannelView v = view_of(x);
  batch_norm_backward<T><<<channel_blocks(v), kThreads, 0, stream>>>(
      (const T *)x->data, (const T *)args->inputs[1].data, (const T *)args->inputs[2].data, (T *)args->outputs[0].data,
      (T *)args->outputs[1].data, (T *)args->outputs[2].data, v, (double)args->attrs->u.norm.epsilon);
  return launch_status();
}

template <typename T> tf_status running(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  if (x->count == 0)
    return NULL;
  const ChannelView v = view_of(x);
  batch_norm_running_update<T><<<channel_blocks(v), kThreads, 0, stream_of(args)>>>(
      (const T *)x->data, (float *)args->inputs[1].data, (float *)args->inputs[2].data, v,
      (double)args->attrs->u.norm.momentum);
  return launch_status();
}

} // namespace

/* T: the storage of x (input 0), which every floating operand shares (table.cu checks). */
TF_CUDA_LAUNCHER(batch_norm) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) { return forward<decltype(storage)>(args); });
}

TF_CUDA_LAUNCHER(batch_norm_grad) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) { return backward<decltype(storage)>(args); });
}

/* T: the storage of x; the running statistics are f32 (table.cu's check_dtypes). */
TF_CUDA_LAUNCHER(batch_norm_running) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) { return running<decltype(storage)>(args); });
}

} // namespace tf_cuda
