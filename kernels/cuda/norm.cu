/* layer_norm and rms_norm over the last axis, and their gradients, as kernels/cpu/norm.c: row
 * statistics (mean, 1/sqrt(biased variance + eps)) in double, from one function for the forward
 * and the backward pass; (x - mean) rstd centred in double.
 *
 * Forward: a warp per row. Backward, three kernels: (1) each row's statistics into the workspace;
 * (2) dgamma and dbeta, a thread per column summing its rows in order (split into row ranges
 * whose partials a fourth kernel adds in order when there are few columns): deterministic, no
 * atomics; (3) dx, a warp per row. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Stats {
  double mean, rstd;
};

/* A row's statistics; every lane of the warp gets them. */
__device__ inline Stats row_stats(const float *x, int64_t n, double epsilon, bool rms, int lane) {
  double mean = 0;
  if (!rms) {
    double sum = 0;
    for (int64_t j = lane; j < n; j += 32)
      sum += (double)x[j];
    mean = warp_sum(sum) / (double)n;
  }
  double squares = 0;
  for (int64_t j = lane; j < n; j += 32) {
    const double centred = (double)x[j] - mean;
    squares += centred * centred;
  }
  squares = warp_sum(squares);
  Stats s = {mean, 1.0 / sqrt(squares / (double)n + epsilon)};
  return s;
}

__device__ inline float normalised(float x, Stats s) { return (float)(((double)x - s.mean) * s.rstd); }

__global__ void norm_forward(const float *x, const float *gamma, const float *beta, float *y, int64_t rows, int64_t n,
                             double epsilon, bool rms) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const float *xr = x + row * n;
    float *yr = y + row * n;
    const Stats s = row_stats(xr, n, epsilon, rms, lane);
    for (int64_t j = lane; j < n; j += 32)
      yr[j] = beta ? normalised(xr[j], s) * gamma[j] + beta[j] : normalised(xr[j], s) * gamma[j];
  }
}

__global__ void keep_stats(const float *x, Stats *stats, int64_t rows, int64_t n, double epsilon, bool rms) {
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
__global__ void column_sums(const float *x, const float *dy, const Stats *stats, float *dgamma, float *dbeta,
                            double *partials, int64_t rows, int64_t n, int64_t splits) {
  TF_CUDA_GRID_STRIDE(t, n * splits) {
    const int64_t j = t % n, split = t / n;
    const int64_t begin = rows * split / splits, end = rows * (split + 1) / splits;
    double gamma_sum = 0, beta_sum = 0;
    for (int64_t row = begin; row < end; row++) {
      const float d = dy[row * n + j];
      gamma_sum += (double)(d * normalised(x[row * n + j], stats[row]));
      beta_sum += (double)d;
    }
    if (splits == 1) {
      dgamma[j] = (float)gamma_sum;
      if (dbeta)
        dbeta[j] = (float)beta_sum;
    } else {
      partials[2 * (split * n + j)] = gamma_sum;
      partials[2 * (split * n + j) + 1] = beta_sum;
    }
  }
}

__global__ void column_finish(const double *partials, float *dgamma, float *dbeta, int64_t n, int64_t splits) {
  TF_CUDA_GRID_STRIDE(j, n) {
    double gamma_sum = 0, beta_sum = 0;
    for (int64_t split = 0; split < splits; split++) {
      gamma_sum += partials[2 * (split * n + j)];
      beta_sum += partials[2 * (split * n + j) + 1];
    }
    dgamma[j] = (float)gamma_sum;
    if (dbeta)
      dbeta[j] = (float)beta_sum;
  }
}

/* layer_norm: dx = rstd (g - mean(g) - xhat mean(g xhat)); rms_norm: dx = rstd (g - xhat mean(g xhat));
 * g = dy gamma. */
__global__ void input_gradient(const float *x, const float *gamma, const float *dy, const Stats *stats, float *dx,
                               int64_t rows, int64_t n, bool rms) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const float *xr = x + row * n, *dyr = dy + row * n;
    float *dxr = dx + row * n;
    const Stats s = stats[row];
    double g_sum = 0, gx_sum = 0;
    for (int64_t j = lane; j < n; j += 32) {
      const double g = (double)(dyr[j] * gamma[j]);
      g_sum += g;
      gx_sum += g * (double)normalised(xr[j], s);
    }
    g_sum = warp_sum(g_sum);
    gx_sum = warp_sum(gx_sum);
    const float rstd = (float)s.rstd, g_mean = rms ? 0.0f : (float)(g_sum / (double)n);
    const float gx_mean = (float)(gx_sum / (double)n);
    // __fmul_rn: g rounded to f32 before g_mean is taken from it, as on the CPU; a contracted
    // fma(dy, gamma, -g_mean) keeps the product's rounding error, which rstd (up to 1/sqrt(eps))
    // magnifies: a one-column row's dx came out 1.3e-5 instead of 0 on an H200.
    for (int64_t j = lane; j < n; j += 32)
      dxr[j] = rstd * (__fmul_rn(dyr[j], gamma[j]) - g_mean - normalised(xr[j], s) * gx_mean);
  }
}

} // namespace

TF_CUDA_LAUNCHER(norm) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const bool rms = args->op == TF_OP_RMS_NORM;
  const int64_t n = x->shape[x->rank - 1];
  if (n == 0 || x->count == 0)
    return NULL;
  const int64_t rows = x->count / n;
  const float *beta = !rms && args->n_inputs > 2 ? (const float *)args->inputs[2].data : NULL;
  norm_forward<<<blocks_for(rows * 32), kThreads, 0, stream_of(args)>>>(
      (const float *)x->data, (const float *)args->inputs[1].data, beta, (float *)args->outputs[0].data, rows, n,
      (double)args->attrs->u.norm.epsilon, rms);
  return launch_status();
}

TF_CUDA_LAUNCHER(norm_grad) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const bool rms = args->op == TF_OP_RMS_NORM_GRAD;
  const int64_t n = x->shape[x->rank - 1];
  if (n == 0)
    return NULL;
  const int64_t rows = x->count / n, splits = tf_cuda_column_splits(n, rows);
  const float *in = (const float *)x->data, *gamma = (const float *)args->inputs[1].data;
  const float *dy = (const float *)args->inputs[2].data;
  float *dx = (float *)args->outputs[0].data, *dgamma = (float *)args->outputs[1].data;
  float *dbeta = rms ? NULL : (float *)args->outputs[2].data;
  Stats *stats = (Stats *)args->workspace;
  double *partials = (double *)((char *)args->workspace + tf_cuda_round_up(16 * rows));
  const double epsilon = (double)args->attrs->u.norm.epsilon;
  cudaStream_t stream = stream_of(args);
  if (rows > 0)
    keep_stats<<<blocks_for(rows * 32), kThreads, 0, stream>>>(in, stats, rows, n, epsilon, rms);
  column_sums<<<blocks_for(n * splits), kThreads, 0, stream>>>(in, dy, stats, dgamma, dbeta, partials, rows, n, splits);
  if (splits > 1)
    column_finish<<<blocks_for(n), kThreads, 0, stream>>>(partials, dgamma, dbeta, n, splits);
  if (rows > 0)
    input_gradient<<<blocks_for(rows * 32), kThreads, 0, stream>>>(in, gamma, dy, stats, dx, rows, n, rms);
  return launch_status();
}

} // namespace tf_cuda
