/* The losses and their gradients, as kernels/cpu/loss.c: cross_entropy (classes on the last axis,
 * mean over the labels that count: not ignore_index and inside [0, classes)), mse and
 * bce_with_logits (means over every element). A loss is a per-block partial sum in double (a warp
 * per cross-entropy row) added in a fixed order by one block: deterministic, no atomics. A mean over
 * nothing is 0. On f16/bf16 x (the cuda target's half kernels) the kernels load x and the target to
 * f32 and round each gradient element once; the loss and dloss stay f32 (check_loss_half). */
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/xent_row.cuh"

namespace tf_cuda {
namespace {

constexpr int kWarps = kThreads / 32;

struct Partial {
  double sum;
  long long count;
};

/* Block b sums the losses of rows [b * chunk, (b + 1) * chunk), a warp per row. */
template <typename T>
__global__ void cross_entropy_partials(const T *logits, const void *labels, bool wide, int64_t rows, int64_t classes,
                                       int64_t ignore, int64_t partials, Partial *out) {
  __shared__ Partial scratch[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t chunk = (rows + partials - 1) / partials;
  const int64_t begin = blockIdx.x * chunk, end = begin + chunk < rows ? begin + chunk : rows;
  Partial mine = {0, 0};
  for (int64_t row = begin + warp; row < end; row += kWarps) {
    const int64_t label = xent_label_at(labels, wide, row, classes, ignore);
    if (label < 0)
      continue;
    mine.sum += xent_row_loss(logits + row * classes, classes, label, lane);
    mine.count++;
  }
  if (lane == 0)
    scratch[warp] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    Partial total = {0, 0};
    for (int w = 0; w < kWarps; w++)
      total.sum += scratch[w].sum, total.count += scratch[w].count;
    out[blockIdx.x] = total;
  }
}

__global__ void cross_entropy_finish(const Partial *partials, int64_t n, float *loss) {
  __shared__ double sums[kWarps];
  __shared__ long long counts[kWarps];
  double sum = 0;
  long long count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += partials[i].sum, count += partials[i].count;
  sum = block_sum(sum, sums);
  count = block_sum(count, counts);
  if (threadIdx.x == 0)
    *loss = count > 0 ? (float)(sum / (double)count) : 0.0f;
}

/* dlogits = (softmax(row) - onehot(label)) dloss / count on rows that count, 0 elsewhere. */
template <typename T>
__global__ void cross_entropy_grad(const T *logits, const void *labels, bool wide, const float *dloss,
                                   const long long *count, T *dx, int64_t rows, int64_t classes, int64_t ignore) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const float scale = *count > 0 ? (float)((double)dloss[0] / (double)*count) : 0.0f;
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t label = xent_label_at(labels, wide, row, classes, ignore);
    if constexpr (std::is_same<T, float>::value)
      xent_row_gradient(logits + row * classes, dx + row * classes, classes, label, scale, lane);
    else
      xent_row_gradient_half(logits + row * classes, dx + row * classes, classes, label, scale, lane);
  }
}

/* ---- mse and bce_with_logits ---- */

__device__ inline float bce_term(float x, float t) { return (x > 0 ? x : 0.0f) - x * t + log1pf(expf(-fabsf(x))); }

template <bool BCE, typename T>
__global__ void pair_partials(const T *p, const T *t, int64_t n, int64_t partials, double *out) {
  __shared__ double scratch[kWarps];
  const int64_t chunk = (n + partials - 1) / partials;
  const int64_t begin = blockIdx.x * chunk, end = begin + chunk < n ? begin + chunk : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (BCE) {
      sum += (double)bce_term(to_f32(p[i]), to_f32(t[i]));
    } else {
      const float d = to_f32(p[i]) - to_f32(t[i]);
      sum += (double)(d * d);
    }
  }
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0)
    out[blockIdx.x] = sum;
}

__global__ void pair_finish(const double *partials, int64_t count, int64_t n, float *loss) {
  __shared__ double scratch[kWarps];
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += partials[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0)
    *loss = n > 0 ? (float)(sum / (double)n) : 0.0f;
}

/* mse: dp = 2 (p - t) dloss / n; bce: dx = (sigmoid(x) - t) dloss / n. */
template <bool BCE, typename T>
__global__ void pair_grad(const T *p, const T *t, const float *dloss, T *dp, int64_t n) {
  const float scale = n > 0 ? (float)((BCE ? 1.0 : 2.0) * (double)dloss[0] / (double)n) : 0.0f;
  TF_CUDA_GRID_STRIDE(i, n) {
    const float x = to_f32(p[i]), y = to_f32(t[i]);
    dp[i] = from_f32<T>(BCE ? scale * (1.0f / (1.0f + expf(-x)) - y) : scale * (x - y));
  }
}

/* The loss of x (and the target) in storage T; the loss itself f32. */
template <typename T> tf_status loss_of(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  cudaStream_t stream = stream_of(args);
  float *loss = (float *)args->outputs[0].data;
  const int64_t partials = tf_cuda_loss_partials(x);
  if (args->op == TF_OP_CROSS_ENTROPY) {
    const int64_t classes = x->shape[x->rank - 1], rows = classes > 0 ? x->count / classes : 0;
    Partial *out = (Partial *)args->workspace;
    cross_entropy_partials<T><<<(unsigned)partials, kThreads, 0, stream>>>(
        (const T *)x->data, args->inputs[1].data, args->inputs[1].dtype == TF_I64, rows, classes,
        args->attrs->u.cross_entropy.ignore_index, partials, out);
    cross_entropy_finish<<<1, kThreads, 0, stream>>>(out, partials, loss);
    return launch_status();
  }
  double *out = (double *)args->workspace;
  const T *p = (const T *)x->data, *t = (const T *)args->inputs[1].data;
  if (args->op == TF_OP_MSE)
    pair_partials<false, T><<<(unsigned)partials, kThreads, 0, stream>>>(p, t, x->count, partials, out);
  else
    pair_partials<true, T><<<(unsigned)partials, kThreads, 0, stream>>>(p, t, x->count, partials, out);
  pair_finish<<<1, kThreads, 0, stream>>>(out, partials, x->count, loss);
  return launch_status();
}

/* The gradient of x in storage T (dloss f32). */
template <typename T> tf_status loss_grad_of(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  cudaStream_t stream = stream_of(args);
  const float *dloss = (const float *)args->inputs[2].data;
  T *dx = (T *)args->outputs[0].data;
  const int64_t n = x->count;
  if (n == 0)
    return NULL;
  if (args->op == TF_OP_CROSS_ENTROPY_GRAD) {
    const int64_t classes = x->shape[x->rank - 1], rows = classes > 0 ? n / classes : 0;
    const bool wide = args->inputs[1].dtype == TF_I64;
    const int64_t ignore = args->attrs->u.cross_entropy.ignore_index;
    long long *count = (long long *)args->workspace;
    xent_count_labels<<<1, kThreads, 0, stream>>>(args->inputs[1].data, wide, rows, classes, ignore, count);
    cross_entropy_grad<T><<<blocks_for(rows * 32), kThreads, 0, stream>>>(
        (const T *)x->data, args->inputs[1].data, wide, dloss, count, dx, rows, classes, ignore);
    return launch_status();
  }
  const T *p = (const T *)x->data, *t = (const T *)args->inputs[1].data;
  if (args->op == TF_OP_MSE_GRAD)
    pair_grad<false, T><<<blocks_for(n), kThreads, 0, stream>>>(p, t, dloss, dx, n);
  else
    pair_grad<true, T><<<blocks_for(n), kThreads, 0, stream>>>(p, t, dloss, dx, n);
  return launch_status();
}

} // namespace

tf_status check_loss_half(const tf_cuda_args *args) {
  const tf_dtype half = args->inputs[0].dtype;
  const bool gradient =
      args->op == TF_OP_CROSS_ENTROPY_GRAD || args->op == TF_OP_MSE_GRAD || args->op == TF_OP_BCE_WITH_LOGITS_GRAD;
  const bool labels = args->op == TF_OP_CROSS_ENTROPY || args->op == TF_OP_CROSS_ENTROPY_GRAD;
  for (int32_t k = 0; k < args->n_inputs + args->n_outputs; k++) {
    const bool input = k < args->n_inputs;
    const tf_dtype dtype = input ? args->inputs[k].dtype : args->outputs[k - args->n_inputs].dtype;
    const bool scalar = input ? k == 2 : !gradient;
    if ((input && k == 1 && labels) || dtype == (scalar ? TF_F32 : half))
      continue;
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda %s kernel: %s %d is %s beside %s x; a loss on half data takes its target and gradient "
                         "in x's type, its loss and dloss in f32",
                         tf_op_name(args->op), input ? "input" : "output", (int)(input ? k : k - args->n_inputs),
                         tf_dtype_name(dtype), tf_dtype_name(half));
  }
  return NULL;
}

TF_CUDA_LAUNCHER(loss) {
  return with_storage(args->inputs[0].dtype, [&](auto tag) { return loss_of<decltype(tag)>(args); });
}

TF_CUDA_LAUNCHER(loss_grad) {
  return with_storage(args->inputs[0].dtype, [&](auto tag) { return loss_grad_of<decltype(tag)>(args); });
}

} // namespace tf_cuda
