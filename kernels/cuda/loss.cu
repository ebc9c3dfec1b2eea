/* The losses and their gradients, as kernels/cpu/loss.c: cross_entropy (classes on the last axis,
 * mean over the labels that count: not ignore_index and inside [0, classes)), mse and
 * bce_with_logits (means over every element). A loss is a per-block partial sum in double (a warp
 * per cross-entropy row) added in a fixed order by one block: deterministic, no atomics. A mean over
 * nothing is 0. */
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
__global__ void cross_entropy_partials(const float *logits, const void *labels, bool wide, int64_t rows,
                                       int64_t classes, int64_t ignore, int64_t partials, Partial *out) {
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
__global__ void cross_entropy_grad(const float *logits, const void *labels, bool wide, const float *dloss,
                                   const long long *count, float *dx, int64_t rows, int64_t classes, int64_t ignore) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const float scale = *count > 0 ? (float)((double)dloss[0] / (double)*count) : 0.0f;
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    xent_row_gradient(logits + row * classes, dx + row * classes, classes,
                      xent_label_at(labels, wide, row, classes, ignore), scale, lane);
  }
}

/* ---- mse and bce_with_logits ---- */

__device__ inline float bce_term(float x, float t) { return (x > 0 ? x : 0.0f) - x * t + log1pf(expf(-fabsf(x))); }

template <bool BCE>
__global__ void pair_partials(const float *p, const float *t, int64_t n, int64_t partials, double *out) {
  __shared__ double scratch[kWarps];
  const int64_t chunk = (n + partials - 1) / partials;
  const int64_t begin = blockIdx.x * chunk, end = begin + chunk < n ? begin + chunk : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (BCE) {
      sum += (double)bce_term(p[i], t[i]);
    } else {
      const float d = p[i] - t[i];
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
template <bool BCE>
__global__ void pair_grad(const float *p, const float *t, const float *dloss, float *dp, int64_t n) {
  const float scale = n > 0 ? (float)((BCE ? 1.0 : 2.0) * (double)dloss[0] / (double)n) : 0.0f;
  TF_CUDA_GRID_STRIDE(i, n) { dp[i] = BCE ? scale * (1.0f / (1.0f + expf(-p[i])) - t[i]) : scale * (p[i] - t[i]); }
}

} // namespace

TF_CUDA_LAUNCHER(loss) {
  const tf_cuda_tensor *x = &args->inputs[0];
  cudaStream_t stream = stream_of(args);
  float *loss = (float *)args->outputs[0].data;
  const int64_t partials = tf_cuda_loss_partials(x);
  if (args->op == TF_OP_CROSS_ENTROPY) {
    const int64_t classes = x->shape[x->rank - 1], rows = classes > 0 ? x->count / classes : 0;
    Partial *out = (Partial *)args->workspace;
    cross_entropy_partials<<<(unsigned)partials, kThreads, 0, stream>>>(
        (const float *)x->data, args->inputs[1].data, args->inputs[1].dtype == TF_I64, rows, classes,
        args->attrs->u.cross_entropy.ignore_index, partials, out);
    cross_entropy_finish<<<1, kThreads, 0, stream>>>(out, partials, loss);
    return launch_status();
  }
  double *out = (double *)args->workspace;
  const float *p = (const float *)x->data, *t = (const float *)args->inputs[1].data;
  if (args->op == TF_OP_MSE)
    pair_partials<false><<<(unsigned)partials, kThreads, 0, stream>>>(p, t, x->count, partials, out);
  else
    pair_partials<true><<<(unsigned)partials, kThreads, 0, stream>>>(p, t, x->count, partials, out);
  pair_finish<<<1, kThreads, 0, stream>>>(out, partials, x->count, loss);
  return launch_status();
}

TF_CUDA_LAUNCHER(loss_grad) {
  const tf_cuda_tensor *x = &args->inputs[0];
  cudaStream_t stream = stream_of(args);
  const float *dloss = (const float *)args->inputs[2].data;
  float *dx = (float *)args->outputs[0].data;
  const int64_t n = x->count;
  if (n == 0)
    return NULL;
  if (args->op == TF_OP_CROSS_ENTROPY_GRAD) {
    const int64_t classes = x->shape[x->rank - 1], rows = classes > 0 ? n / classes : 0;
    const bool wide = args->inputs[1].dtype == TF_I64;
    const int64_t ignore = args->attrs->u.cross_entropy.ignore_index;
    long long *count = (long long *)args->workspace;
    xent_count_labels<<<1, kThreads, 0, stream>>>(args->inputs[1].data, wide, rows, classes, ignore, count);
    cross_entropy_grad<<<blocks_for(rows * 32), kThreads, 0, stream>>>((const float *)x->data, args->inputs[1].data,
                                                                       wide, dloss, count, dx, rows, classes, ignore);
    return launch_status();
  }
  const float *p = (const float *)x->data, *t = (const float *)args->inputs[1].data;
  if (args->op == TF_OP_MSE_GRAD)
    pair_grad<false><<<blocks_for(n), kThreads, 0, stream>>>(p, t, dloss, dx, n);
  else
    pair_grad<true><<<blocks_for(n), kThreads, 0, stream>>>(p, t, dloss, dx, n);
  return launch_status();
}

} // namespace tf_cuda
