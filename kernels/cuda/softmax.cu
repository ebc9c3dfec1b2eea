/* softmax and log_softmax along one axis, and their gradients, as kernels/cpu/softmax.c: x viewed as
 * [outer, classes, inner] around the axis. inner == 1: a warp per row (lanes along the classes,
 * sums in double through a shuffle tree); inner > 1: a thread per column walking the classes in
 * order (neighbouring threads read neighbouring columns). The max is subtracted before exp. The
 * kernels are templated on the storage T of x, y, dy and dx: f32, or f16/bf16 for the cuda
 * target's half kernels (each element loaded to f32 exactly, computed as on f32, each result
 * rounded once): the bits of cast up -> f32 kernel -> cast down. On f32 a row's softmax keeps
 * exp(x - max) in y and divides it in place; a half y cannot hold that partial, so the half
 * kernel computes the same expf again in the last pass (the same f32 value, divided as on f32). */
#include <type_traits>

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

template <bool LOG, typename T> __global__ void softmax_rows(const T *x, T *y, int64_t rows, int64_t n) {
  // f32 keeps each exp in y until the sum is known; half storage would round it.
  constexpr bool kKeepsExp = std::is_same<T, float>::value;
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const T *xr = x + row * n;
    T *yr = y + row * n;
    float best = -INFINITY;
    for (int64_t c = lane; c < n; c += 32)
      best = to_f32(xr[c]) > best ? to_f32(xr[c]) : best;
    best = warp_max(best);
    double sum = 0;
    for (int64_t c = lane; c < n; c += 32) {
      float e = expf(to_f32(xr[c]) - best);
      if constexpr (!LOG && kKeepsExp)
        yr[c] = e;
      sum += (double)e;
    }
    sum = warp_sum(sum);
    if constexpr (LOG) {
      const float log_sum = (float)log(sum);
      for (int64_t c = lane; c < n; c += 32)
        yr[c] = from_f32<T>((to_f32(xr[c]) - best) - log_sum);
    } else if constexpr (kKeepsExp) {
      const float total = (float)sum;
      for (int64_t c = lane; c < n; c += 32)
        yr[c] /= total;
    } else {
      const float total = (float)sum;
      for (int64_t c = lane; c < n; c += 32)
        yr[c] = from_f32<T>(expf(to_f32(xr[c]) - best) / total);
    }
  }
}

/* dx = y (dy - sum(dy y)), or for log_softmax dx = dy - exp(y) sum(dy). */
template <bool LOG, typename T>
__global__ void softmax_grad_rows(const T *y, const T *dy, T *dx, int64_t rows, int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const T *yr = y + row * n, *dyr = dy + row * n;
    T *dxr = dx + row * n;
    double dot = 0;
    for (int64_t c = lane; c < n; c += 32)
      dot += LOG ? (double)to_f32(dyr[c]) : (double)to_f32(dyr[c]) * (double)to_f32(yr[c]);
    const float total = (float)warp_sum(dot);
    for (int64_t c = lane; c < n; c += 32)
      dxr[c] =
          from_f32<T>(LOG ? to_f32(dyr[c]) - expf(to_f32(yr[c])) * total : to_f32(yr[c]) * (to_f32(dyr[c]) - total));
  }
}

/* ---- columns (inner > 1): element c of column (o, i) at o * classes * inner + c * inner + i ---- */

template <bool LOG, typename T> __global__ void softmax_columns(const T *x, T *y, Geometry g) {
  TF_CUDA_GRID_STRIDE(t, g.outer * g.inner) {
    const int64_t base = (t / g.inner) * g.classes * g.inner + t % g.inner;
    float best = -INFINITY;
    for (int64_t c = 0; c < g.classes; c++)
      best = to_f32(x[base + c * g.inner]) > best ? to_f32(x[base + c * g.inner]) : best;
    double sum = 0;
    for (int64_t c = 0; c < g.classes; c++)
      sum += (double)expf(to_f32(x[base + c * g.inner]) - best);
    if (LOG) {
      const float log_sum = (float)log(sum);
      for (int64_t c = 0; c < g.classes; c++)
        y[base + c * g.inner] = from_f32<T>((to_f32(x[base + c * g.inner]) - best) - log_sum);
    } else {
      const float total = (float)sum;
      for (int64_t c = 0; c < g.classes; c++)
        y[base + c * g.inner] = from_f32<T>(expf(to_f32(x[base + c * g.inner]) - best) / total);
    }
  }
}

template <bool LOG, typename T> __global__ void softmax_grad_columns(const T *y, const T *dy, T *dx, Geometry g) {
  TF_CUDA_GRID_STRIDE(t, g.outer * g.inner) {
    const int64_t base = (t / g.inner) * g.classes * g.inner + t % g.inner;
    double dot = 0;
    for (int64_t c = 0; c < g.classes; c++) {
      const int64_t at = base + c * g.inner;
      dot += LOG ? (double)to_f32(dy[at]) : (double)to_f32(dy[at]) * (double)to_f32(y[at]);
    }
    const float total = (float)dot;
    for (int64_t c = 0; c < g.classes; c++) {
      const int64_t at = base + c * g.inner;
      dx[at] =
          from_f32<T>(LOG ? to_f32(dy[at]) - expf(to_f32(y[at])) * total : to_f32(y[at]) * (to_f32(dy[at]) - total));
    }
  }
}

template <bool LOG, typename T> tf_status forward(const tf_cuda_args *args) {
  const tf_cuda_tensor *x = &args->inputs[0];
  const Geometry g = geometry_of(x, args->attrs->u.axis.axis);
  const T *in = (const T *)x->data;
  T *out = (T *)args->outputs[0].data;
  if (x->count == 0)
    return NULL;
  if (g.inner == 1)
    softmax_rows<LOG, T><<<blocks_for(g.outer * 32), kThreads, 0, stream_of(args)>>>(in, out, g.outer, g.classes);
  else
    softmax_columns<LOG, T><<<blocks_for(g.outer * g.inner), kThreads, 0, stream_of(args)>>>(in, out, g);
  return launch_status();
}

template <bool LOG, typename T> tf_status backward(const tf_cuda_args *args) {
  const tf_cuda_tensor *y = &args->inputs[0];
  const Geometry g = geometry_of(y, args->attrs->u.axis.axis);
  const T *y_data = (const T *)y->data, *dy = (const T *)args->inputs[1].data;
  T *dx = (T *)args->outputs[0].data;
  if (y->count == 0)
    return NULL;
  if (g.inner == 1)
    softmax_grad_rows<LOG, T>
        <<<blocks_for(g.outer * 32), kThreads, 0, stream_of(args)>>>(y_data, dy, dx, g.outer, g.classes);
  else
    softmax_grad_columns<LOG, T><<<blocks_for(g.outer * g.inner), kThreads, 0, stream_of(args)>>>(y_data, dy, dx, g);
  return launch_status();
}

} // namespace

/* T: the storage of input 0 (x, or y for the gradients), which every floating operand shares
 * (table.cu checks). */
TF_CUDA_LAUNCHER(softmax) {
  return with_storage(args->inputs[0].dtype, [&](auto storage) {
    using T = decltype(storage);
    switch (args->op) {
    case TF_OP_SOFTMAX: return forward<false, T>(args);
    case TF_OP_LOG_SOFTMAX: return forward<true, T>(args);
    case TF_OP_SOFTMAX_GRAD: return backward<false, T>(args);
    default: return backward<true, T>(args);
    }
  });
}

} // namespace tf_cuda
