/* layer_norm and rms_norm over the last axis, and their gradients, as kernels/cpu/norm.c: row
 * statistics (mean, 1/sqrt(biased variance + eps)) in double, from one function for the forward
 * and the backward pass; (x - mean) rstd centred in double.
 *
 * Forward: a warp per row. Backward, three kernels: (1) each row's statistics into the workspace;
 * (2) dgamma and dbeta, a thread per column summing its rows in order (split into row ranges
 * whose partials a fourth kernel adds in order when there are few columns): deterministic, no
 * atomics; (3) dx, a warp per row. The kernels are templated on the storage T of x, gamma, beta,
 * dy and the outputs: f32, or f16/bf16 for the cuda target's half kernels (each element loaded to
 * f32 exactly, the statistics and sums in double as on f32, each result rounded once from its f32
 * value): the bits of cast up -> f32 kernel -> cast down. dgamma and dbeta are written once, by
 * (2) or from the double partials in the workspace by the fourth kernel, never read back. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Stats {
  double mean, rstd;
};

/* A row's statistics; every lane of the warp gets them. */
template <typename T> __device__ inline Stats row_stats(const T *x, int64_t n, double epsilon, bool rms, int lane) {
  double mean = 0;
  if (!rms) {
    double sum = 0;
    for (int64_t j = lane; j < n; j += 32)
      sum += (double)to_f32(x[j]);
    mean = warp_sum(sum) / (double)n;
  }
  double squares = 0;
  for (int64_t j = lane; j < n; j += 32) {
    const double centred = (double)to_f32(x[j]) - mean;
    squares += centred * centred;
  }
  squares = warp_sum(squares);
  Stats s = {mean, 1.0 / sqrt(squares / (double)n + epsilon)};
  return s;
}

__device__ inline float normalised(float x, Stats s) { return (float)(((double)x - s.mean) * s.rstd); }

template <typename T>
__global__ void norm_forward(const T *x, const T *gamma, const T *beta, T *y, int64_t rows, int64_t n, double epsilon,
                             bool rms) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const T *xr = x + row * n;
    T *yr = y + row * n;
    const Stats s = row_stats(xr, n, epsilon, rms, lane);
    for (int64_t j = lane; j < n; j += 32)
      yr[j] = from_f32<T>(beta ? normalised(to_f32(xr[j]), s) * to_f32(gamma[j]) + to_f32(beta[j])
                               : normalised(to_f32(xr[j]), s) * to_f32(gamma[j]));
  }
}

template <typename T>
__global__ void keep_stats(const T *x, Stats *stats, int64_t rows, int64_t n, double epsilon, bool rms) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const Stats s = row_stats(x + row * n, n, epsilon, rms, lane);
    if (lane == 0)
      stats[row] = s;
  }
}

/* dgamma = sum over rows of dy xhat, dbeta = sum of dy: thread t handles column t % n over row range
 * t / n of `splits`. */
template <typename T>
__global__ void column_sums(const T *x, const T *dy, const Stats *stats, T *dgamma, T *dbeta, double *partials,
                            int64_t rows, int64_t n, int64_t splits) {
  TF_CUDA_GRID_STRIDE(t, n * splits) {
    const int64_t j = t % n, split = t / n;
    const int64_t begin = rows * split / splits, end = rows * (split + 1) / splits;
    double gamma_sum = 0, beta_sum = 0;
    for (int64_t row = begin; row < end; row++) {
      const float d = to_f32(dy[row * n + j]);
      gamma_sum += (double)(d * normalised(to_f32(x[row * n + j]), stats[row]));
      beta_sum += (double)d;
    }
    if (splits == 1) {
      dgamma[j] = from_f32<T>((float)gamma_sum);
      if (dbeta)
        dbeta[j] = from_f32<T>((float)beta_sum);
    } else {
      partials[2 * (split * n + j)] = gamma_sum;
      partials[2 * (split * n + j) + 1] = beta_sum;
    }
  }
}

template <typename T>
__global__ void column_finish(const double *partials, T *dgamma, T *dbeta, int64_t n, int64_t splits) {
  TF_CUDA_GRID_STRIDE(j, n) {
    double gamma_sum = 0, beta_sum = 0;
    for (int64_t split = 0; split < splits; split++) {
      gamma_sum += partials[2 * (split * n + j)];
      beta_sum += partials[2 * (split * n + j) + 1];
    }
    dgamma[j] = from_f32<T>((float)gamma_sum);
    if (dbeta)
      dbeta[j] = from_f32<T>((float)beta_sum);
  }
}

/* layer_norm: dx = rstd (g - mean(g) - xhat mean(g xhat)); rms_norm: dx = rstd (g - xhat mean(g xhat));
 * g = dy gamma. */
template <typename T>
__global__ void input_gradient(const T *x, const T *gamma, const T *dy, const Stats *stats, T *dx, int64_t rows,
                               int64_t n, bool rms) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const T *xr = x + row * n, *dyr = dy + row * n;
    T *dxr = dx + row * n;
    const Stats s = stats[row];
    double g_sum = 0, gx_sum = 0;
    for (int64_t j = lane; j < n; j += 32) {
      const double g = (double)(to_f32(dyr[j]) * to_f32(gamma[j]));
      g_sum += g;
      gx_sum += g * (double)normalised(to_f32(xr[j]), s);
    }
    g_sum = warp_sum(g_sum);
    gx_sum = warp_sum(gx_sum);
    const float rstd = (float)s.rstd, g_mean = rms ? 0.0f : (float)(g_sum / (double)n);
    const float gx_mean = (float)(gx_sum / (double)n);
    // __fmul_rn: g rounded to f32 before g_mean is taken from it, as on the CPU; a contracted
    // fma(dy, gamma, -g_mean) keeps the product's rounding error, which rstd (up to 1/sqrt(eps))
    // magnifies: a one-column row's dx came out 1.3e-5 instead of 0 on an H200.
    for (int64_t j = lane; j < n; j += 32)
      dxr[j] = from_f32<T>(
          rstd * (__fmul_rn(to_f32(dyr[j]), to_f32(gamma[j])) - g_mean - normalised(to_f32(xr[j]), s) * gx_mean));
  }
}

template <typename T> tf_status forward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const bool rms = args->op == TF_OP_RMS_NORM;
  const int64_t n = x->shape[x->rank - 1];
  if (n == 0 || x->count == 0)
    return NULL;
  const int64_t rows = x->count / n;
  const T *beta = !rms && args->n_inputs > 2 ? (const T *)args->inputs[2].data : NULL;
  norm_forward<T><<<blocks_for(rows * 32), kThreads, 0, stream_of(args)>>>(
      (const T *)x->data, (const T *)args->inputs[1].data, beta, (T *)args->outputs[0].data, rows, n,
      (double)args->attrs->u.norm.epsilon, rms);
  return launch_status();
}

template <typename T> tf_status backward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const bool rms = args->op == TF_OP_RMS_NORM_GRAD;
  const int64_t n = x->shape[x->rank - 1];
  if (n == 0)
    return NULL;
  const int64_t rows = x->count / n, splits = tf_cuda_column_splits(n, rows);
  const T *in = (const T *)x->data, *gamma = (const T *)args->inputs[1].data;
  const T *dy = (const T *)args->inputs[2].data;
  T *dx = (T *)args->outputs[0].data, *dgamma = (T *)args->outputs[1].data;
  T *dbeta = rms ? NULL : (T *)args->outputs[2].data;
  Stats *stats = (Stats *)args->workspace;
  double *partials = (double *)((char *)args->workspace + tf_cuda_round_up(16 * rows));
  const double epsilon = (double)args->attrs->u.norm.epsilon;
  cudaStream_t stream = stream_of(args);
  if (rows > 0)
    keep_stats<T><<<blocks_for(rows * 32), kThreads, 0, stream>>>(in, stats, rows, n, epsilon, rms);
  column_sums<T>
      <<<blocks_for(n * splits), kThreads, 0, stream>>>(in, dy, stats, dgamma, dbeta, partials, rows, n, splits);
  if (splits > 1)
    column_finish<T><<<blocks_for(n), kThreads, 0, stream>>>(partials, dgamma, dbeta, n, splits);
  if (rows > 0)
    input_gradient<T><<<blocks_for(rows * 32), kThreads, 0, stream>>>(in, gamma, dy, stats, dx, rows, n, rms);
  return launch_status();
}

} // namespace

/* T: the storage of x (input 0), which every floating operand shares (table.cu checks). */
TF_CUDA_LAUNCHER(norm) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) { return forward<decltype(storage)>(args); });
}

TF_CUDA_LAUNCHER(norm_grad) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) { return backward<decltype(storage)>(args); });
}

} // namespace tf_cuda
