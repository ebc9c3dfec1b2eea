/* 2-D pooling over NCHW planes and its gradients, as kernels/cpu/pool.c: max_pool2d takes the first
 * maximum of each window's real elements (the first NaN wins), avg_pool2d divides by the whole
 * window (count_include_pad). The gradients are gathers: each input element walks the windows that
 * contain it in (oh, ow) order and adds their shares, the CPU's order, without atomics.
 *
 * All four are templated on the storage of x, dy, y and dx (f32, and f16/bf16 for the cuda target's
 * half kernels): elements are loaded to f32, summed and compared in f32, and each result, computed
 * whole by one thread (the gradients gather in a register), is rounded once, so a half kernel writes
 * the bits of cast up -> f32 kernel -> cast down. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Pooling {
  int64_t planes, height, width, out_height, out_width;
  int64_t kernel[2], stride[2], padding[2];
};

Pooling pooling_of(const tf_pool_attrs *a, const tf_cuda_tensor *x, const tf_cuda_tensor *y) {
  Pooling p = {.planes = x->shape[0] * x->shape[1],
               .height = x->shape[2],
               .width = x->shape[3],
               .out_height = y->shape[2],
               .out_width = y->shape[3],
               .kernel = {0},
               .stride = {0},
               .padding = {0}};
  for (int i = 0; i < 2; i++)
    p.kernel[i] = a->kernel[i], p.stride[i] = a->stride[i], p.padding[i] = a->padding[i];
  return p;
}

__device__ inline void window(const Pooling &p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                              int64_t *w1) {
  const int64_t top = oh * p.stride[0] - p.padding[0], left = ow * p.stride[1] - p.padding[1];
  *h0 = top > 0 ? top : 0;
  *h1 = top + p.kernel[0] < p.height ? top + p.kernel[0] : p.height;
  *w0 = left > 0 ? left : 0;
  *w1 = left + p.kernel[1] < p.width ? left + p.kernel[1] : p.width;
}

template <typename T>
__device__ inline int64_t first_maximum(const Pooling &p, const T *plane, int64_t oh, int64_t ow) {
  int64_t h0, h1, w0, w1;
  window(p, oh, ow, &h0, &h1, &w0, &w1);
  int64_t best = h0 * p.width + w0;
  float best_value = to_f32(plane[best]);
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      const float value = to_f32(plane[h * p.width + w]);
      if (isnan(best_value))
        return best;
      if (value > best_value || isnan(value))
        best = h * p.width + w, best_value = value;
    }
  return best;
}

/* The output windows [oh0, oh1) x [ow0, ow1) that may contain input element (h, w). */
__device__ inline void windows_of(const Pooling &p, int64_t h, int64_t w, int64_t *oh0, int64_t *oh1, int64_t *ow0,
                                  int64_t *ow1) {
  const int64_t hp = h + p.padding[0], wp = w + p.padding[1];
  *oh0 = hp >= p.kernel[0] ? (hp - p.kernel[0]) / p.stride[0] + 1 : 0;
  *oh1 = hp / p.stride[0] + 1 < p.out_height ? hp / p.stride[0] + 1 : p.out_height;
  *ow0 = wp >= p.kernel[1] ? (wp - p.kernel[1]) / p.stride[1] + 1 : 0;
  *ow1 = wp / p.stride[1] + 1 < p.out_width ? wp / p.stride[1] + 1 : p.out_width;
}

template <typename T> __global__ void max_pool(const T *x, T *y, Pooling p) {
  const int64_t out_plane = p.out_height * p.out_width;
  TF_CUDA_GRID_STRIDE(t, p.planes * out_plane) {
    const T *in = x + t / out_plane * p.height * p.width;
    y[t] = from_f32<T>(to_f32(in[first_maximum(p, in, t % out_plane / p.out_width, t % p.out_width)]));
  }
}

template <typename T> __global__ void avg_pool(const T *x, T *y, Pooling p) {
  const int64_t out_plane = p.out_height * p.out_width;
  const float scale = 1.0f / (float)(p.kernel[0] * p.kernel[1]);
  TF_CUDA_GRID_STRIDE(t, p.planes * out_plane) {
    const T *in = x + t / out_plane * p.height * p.width;
    int64_t h0, h1, w0, w1;
    window(p, t % out_plane / p.out_width, t % p.out_width, &h0, &h1, &w0, &w1);
    float sum = 0;
    for (int64_t h = h0; h < h1; h++)
      for (int64_t w = w0; w < w1; w++)
        sum += to_f32(in[h * p.width + w]);
    y[t] = from_f32<T>(sum * scale);
  }
}

template <typename T> __global__ void max_pool_grad(const T *x, const T *dy, T *dx, Pooling p) {
  const int64_t plane = p.height * p.width;
  TF_CUDA_GRID_STRIDE(t, p.planes * plane) {
    const int64_t index = t % plane, h = index / p.width, w = index % p.width;
    const T *in = x + t / plane * plane;
    const T *d_out = dy + t / plane * p.out_height * p.out_width;
    int64_t oh0, oh1, ow0, ow1;
    windows_of(p, h, w, &oh0, &oh1, &ow0, &ow1);
    float sum = 0;
    for (int64_t oh = oh0; oh < oh1; oh++)
      for (int64_t ow = ow0; ow < ow1; ow++)
        if (first_maximum(p, in, oh, ow) == index)
          sum += to_f32(d_out[oh * p.out_width + ow]);
    dx[t] = from_f32<T>(sum);
  }
}

template <typename T> __global__ void avg_pool_grad(const T *dy, T *dx, Pooling p) {
  const int64_t plane = p.height * p.width;
  const float scale = 1.0f / (float)(p.kernel[0] * p.kernel[1]);
  TF_CUDA_GRID_STRIDE(t, p.planes * plane) {
    const int64_t index = t % plane, h = index / p.width, w = index % p.width;
    const T *d_out = dy + t / plane * p.out_height * p.out_width;
    int64_t oh0, oh1, ow0, ow1;
    windows_of(p, h, w, &oh0, &oh1, &ow0, &ow1);
    float sum = 0;
    for (int64_t oh = oh0; oh < oh1; oh++)
      for (int64_t ow = ow0; ow < ow1; ow++)
        sum += __fmul_rn(to_f32(d_out[oh * p.out_width + ow]), scale); /* no fused multiply-add: the CPU rounds twice */
    dx[t] = from_f32<T>(sum);
  }
}

template <typename T> tf_status pool_run(const tf_cuda_args *args) {
  const tf_pool_attrs *a = &args->attrs->u.pool;
  cudaStream_t stream = stream_of(args);
  const tf_cuda_tensor *out = &args->outputs[0];
  if (out->count == 0)
    return NULL;
  switch (args->op) {
  case TF_OP_MAX_POOL2D: {
    Pooling p = pooling_of(a, &args->inputs[0], out);
    if (p.height == 0 || p.width == 0) /* windows of padding only: no element to take */
      return zero(out, stream);
    max_pool<T><<<blocks_for(out->count), kThreads, 0, stream>>>((const T *)args->inputs[0].data, (T *)out->data, p);
    break;
  }
  case TF_OP_AVG_POOL2D:
    avg_pool<T><<<blocks_for(out->count), kThreads, 0, stream>>>((const T *)args->inputs[0].data, (T *)out->data,
                                                                 pooling_of(a, &args->inputs[0], out));
    break;
  case TF_OP_MAX_POOL2D_GRAD:
    max_pool_grad<T><<<blocks_for(out->count), kThreads, 0, stream>>>(
        (const T *)args->inputs[0].data, (const T *)args->inputs[1].data, (T *)out->data,
        pooling_of(a, &args->inputs[0], &args->inputs[1]));
    break;
  default:
    avg_pool_grad<T><<<blocks_for(out->count), kThreads, 0, stream>>>((const T *)args->inputs[0].data, (T *)out->data,
                                                                      pooling_of(a, out, &args->inputs[0]));
    break;
  }
  return launch_status();
}

} // namespace

/* max_pool2d (x), avg_pool2d (x), max_pool2d_grad (x, dy), avg_pool2d_grad (dy, x): T is the
 * output's storage, that of every floating operand. */
TF_CUDA_LAUNCHER(pool) {
  return with_storage(args->outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    return pool_run<T>(args);
  });
}

} // namespace tf_cuda
