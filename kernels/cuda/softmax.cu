/* softmax and log_softmax along one axis, and their gradients, as kernels/cpu/softmax.c: x viewed as
 * [outer, classes, inner] around the axis. inner == 1: a warp per row (lanes along the classes,
 * sums in double through a shuffle tree); inner > 1: a thread per column walking the classes in
 * order (neighbouring threads read neighbouring columns). The max is subtracted before exp. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Geometry {
  int64_t outer, classes, inner;
};

Geometry geometry_of(const tf_cuda_tensor *x, int32_t axis) {
  if (axis < 0)
    axis += x->rank;
  Geometry g = {1, x->shape[axis], 1};
  for (int32_t i = 0; i < axis; i++)
    g.outer *= x->shape[i];
  for (int32_t i = axis + 1; i < x->rank; i++)
    g.inner *= x->shape[i];
  return g;
}

/* ---- rows ---- */

template <bool LOG> __global__ void softmax_rows(const float *x, float *y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const float *xr = x + row * n;
    float *yr = y + row * n;
    float best = -INFINITY;
    for (int64_t c = lane; c < n; c += 32)
      best = xr[c] > best ? xr[c] : best;
    best = warp_max(best);
    double sum = 0;
    for (int64_t c = lane; c < n; c += 32) {
      float e = expf(xr[c] - best);
      if (!LOG)
        yr[c] = e;
      sum += (double)e;
    }
    sum = warp_sum(sum);
    if (LOG) {
      const float log_sum = (float)log(sum);
      for (int64_t c = lane; c < n; c += 32)
        yr[c] = (xr[c] - best) - log_sum;
    } else {
      const float total = (float)sum;
      for (int64_t c = lane; c < n; c += 32)
        yr[c] /= total;
    }
  }
}

/* dx = y (dy - sum(dy y)), or for log_softmax dx = dy - exp(y) sum(dy). */
template <bool LOG>
__global__ void softmax_grad_rows(const float *y, const float *dy, float *dx, int64_t rows, int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const float *yr = y + row * n, *dyr = dy + row * n;
    float *dxr = dx + row * n;
    double dot = 0;
    for (int64_t c = lane; c < n; c += 32)
      dot += LOG ? (double)dyr[c] : (double)dyr[c] * (double)yr[c];
    const float total = (float)warp_sum(dot);
    for (int64_t c = lane; c < n; c += 32)
      dxr[c] = LOG ? dyr[c] - expf(yr[c]) * total : yr[c] * (dyr[c] - total);
  }
}

/* ---- columns (inner > 1): element c of column (o, i) at o * classes * inner + c * inner + i ---- */

template <bool LOG> __global__ void softmax_columns(const float *x, float *y, Geometry g) {
  TF_CUDA_GRID_STRIDE(t, g.outer * g.inner) {
    const int64_t base = (t / g.inner) * g.classes * g.inner + t % g.inner;
    float best = -INFINITY;
    for (int64_t c = 0; c < g.classes; c++)
      best = x[base + c * g.inner] > best ? x[base + c * g.inner] : best;
    double sum = 0;
    for (int64_t c = 0; c < g.classes; c++)
      sum += (double)expf(x[base + c * g.inner] - best);
    if (LOG) {
      const float log_sum = (float)log(sum);
      for (int64_t c = 0; c < g.classes; c++)
        y[base + c * g.inner] = (x[base + c * g.inner] - best) - log_sum;
    } else {
      const float total = (float)sum;
      for (int64_t c = 0; c < g.classes; c++)
        y[base + c * g.inner] = expf(x[base + c * g.inner] - best) / total;
    }
  }
}

template <bool LOG> __global__ void softmax_grad_columns(const float *y, const float *dy, float *dx, Geometry g) {
  TF_CUDA_GRID_STRIDE(t, g.outer * g.inner) {
    const int64_t base = (t / g.inner) * g.classes * g.inner + t % g.inner;
    double dot = 0;
    for (int64_t c = 0; c < g.classes; c++) {
      const int64_t at = base + c * g.inner;
      dot += LOG ? (double)dy[at] : (double)dy[at] * (double)y[at];
    }
    const float total = (float)dot;
    for (int64_t c = 0; c < g.classes; c++) {
      const int64_t at = base + c * g.inner;
      dx[at] = LOG ? dy[at] - expf(y[at]) * total : y[at] * (dy[at] - total);
    }
  }
}

template <bool LOG> tf_status forward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const Geometry g = geometry_of(x, args->attrs->u.axis.axis);
  const float *in = (const float *)x->data;
  float *out = (float *)args->outputs[0].data;
  if (x->count == 0)
    return NULL;
  if (g.inner == 1)
    softmax_rows<LOG><<<blocks_for(g.outer * 32), kThreads, 0, stream_of(args)>>>(in, out, g.outer, g.classes);
  else
    softmax_columns<LOG><<<blocks_for(g.outer * g.inner), kThreads, 0, stream_of(args)>>>(in, out, g);
  return launch_status();
}

template <bool LOG> tf_status backward(const tf_cuda_args *args) {
  const tf_cuda_tensor *y = &args->inputs[0];
  const Geometry g = geometry_of(y, args->attrs->u.axis.axis);
  const float *y_data = (const float *)y->data, *dy = (const float *)args->inputs[1].data;
  float *dx = (float *)args->outputs[0].data;
  if (y->count == 0)
    return NULL;
  if (g.inner == 1)
    softmax_grad_rows<LOG>
        <<<blocks_for(g.outer * 32), kThreads, 0, stream_of(args)>>>(y_data, dy, dx, g.outer, g.classes);
  else
    softmax_grad_columns<LOG><<<blocks_for(g.outer * g.inner), kThreads, 0, stream_of(args)>>>(y_data, dy, dx, g);
  return launch_status();
}

} // namespace

TF_CUDA_LAUNCHER(softmax) {
  switch (args->op) {
  case TF_OP_SOFTMAX: return forward<false>(args);
  case TF_OP_LOG_SOFTMAX: return forward<true>(args);
  case TF_OP_SOFTMAX_GRAD: return backward<false>(args);
  default: return backward<true>(args);
  }
}

} // namespace tf_cuda
