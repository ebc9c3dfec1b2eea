/* Reductions over axes: sum, mean, max, sum_to (the broadcast gradient), max_grad and
 * global_norm_sq, with the geometry of core/workspace_cuda.h:
 *   full (one output): per-block partials in the workspace, added by one block in a fixed order;
 *   rows (innermost axis reduced): a warp per output, lanes along the group, a shuffle tree;
 *   columns (innermost axis kept): a thread per output walking its group in order, optionally
 *   split over row ranges whose partials a second kernel adds in order.
 * Sums accumulate in double (as the CPU's); every result is deterministic, but terms are added in
 * another order than the CPU's sequential loops. The only atomic is max_grad's integer count of
 * maxima over a whole tensor (integer addition: order-independent).
 * sum, mean, max, sum_to and max_grad are templated on the storage of their floating operands (f32,
 * and f16/bf16 for the cuda target's half kernels; max also reads i32, i64 and u8): a half element
 * is loaded to f32 exactly, sums still accumulate in double and maxima in f32 (partials in the
 * workspace as for f32), and each result is rounded once to its storage type, from the f32 value
 * the f32 kernel writes, so a half kernel writes the bits of cast up -> f32 kernel -> cast down.
 * global_norm_sq reads f32 only. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

enum Mode { SUM = 0, MAX = 1 };

template <typename T> __device__ inline T lowest();
template <> __device__ inline float lowest<float>() { return -INFINITY; }
template <> __device__ inline int32_t lowest<int32_t>() { return INT32_MIN; }
template <> __device__ inline int64_t lowest<int64_t>() { return INT64_MIN; }
template <> __device__ inline uint8_t lowest<uint8_t>() { return 0; }

template <typename T> __device__ inline T larger(T a, T b) { return a > b ? a : b; }
template <> __device__ inline float larger<float>(float a, float b) { return nan_max(a, b); }

/* The value of a stored element: f32 for the half storage types, else the element itself. */
template <typename T> struct Value { typedef T type; };
template <> struct Value<F16> { typedef float type; };
template <> struct Value<Bf16> { typedef float type; };

template <typename T> __device__ inline T value_of(T v) { return v; }
__device__ inline float value_of(F16 v) { return to_f32(v); }
__device__ inline float value_of(Bf16 v) { return to_f32(v); }

/* A result stored as T: rounded once for the half storage types. */
template <typename T> __device__ inline T stored(typename Value<T>::type v) { return (T)v; }
template <> __device__ inline F16 stored<F16>(float v) { return from_f32<F16>(v); }
template <> __device__ inline Bf16 stored<Bf16>(float v) { return from_f32<Bf16>(v); }

/* The accumulator of a mode: double for sums, T's value for max. */
template <int MODE, typename T> struct Acc { typedef double type; };
template <typename T> struct Acc<MAX, T> { typedef typename Value<T>::type type; };

template <int MODE, typename T> __device__ inline typename Acc<MODE, T>::type identity() {
  if (MODE == SUM)
    return 0;
  return (typename Acc<MODE, T>::type)lowest<typename Value<T>::type>();
}

template <int MODE, typename A> __device__ inline A combine(A a, A b) {
  if (MODE == SUM)
    return a + b;
  return larger(a, b);
}

template <int MODE, typename A> __device__ inline A warp_combine(A value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = combine<MODE>(value, (A)__shfl_xor_sync(kFullMask, value, offset));
  return value;
}

template <int MODE, typename A> __device__ inline A block_combine(A value, A *scratch) {
  value = warp_combine<MODE>(value);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  A total = scratch[0];
  for (int w = 1; w < (int)(blockDim.x / 32); w++)
    total = combine<MODE>(total, scratch[w]);
  return total;
}

/* The result of a group, as the f32 kernel's (T's value type), stored once. */
template <int MODE, typename T> __device__ inline T finish(typename Acc<MODE, T>::type value, double divisor) {
  typedef typename Value<T>::type V;
  if (MODE == SUM)
    return stored<T>((V)((double)value / divisor));
  return stored<T>((V)value);
}

__device__ inline int64_t output_base(const tf_cuda_reduction &r, int64_t o) {
  int64_t offset = 0;
  for (int32_t i = r.rank - 1; i >= 0; i--) {
    if (r.reduced[i])
      continue;
    offset += (o % r.shape[i]) * r.stride[i];
    o /= r.shape[i];
  }
  return offset;
}

__device__ inline int64_t group_offset(const tf_cuda_reduction &r, int64_t e) {
  int64_t offset = 0;
  for (int32_t i = r.rank - 1; i >= 0; i--) {
    if (!r.reduced[i])
      continue;
    offset += (e % r.shape[i]) * r.stride[i];
    e /= r.shape[i];
  }
  return offset;
}

/* The stride of the one reduced axis of a reduction whose reduced axes merged into one run
 * (r.length > 0): group_offset(r, e) == e * reduced_stride(r). */
__device__ inline int64_t reduced_stride(const tf_cuda_reduction &r) {
  for (int32_t i = 0; i < r.rank; i++)
    if (r.reduced[i])
      return r.stride[i];
  return 0;
}

/* ---- full: contiguous x of n elements into one value ---- */

template <int MODE, typename T, bool SQUARES>
__global__ void full_partials(const T *x, int64_t n, int64_t partials, typename Acc<MODE, T>::type *out) {
  typedef typename Acc<MODE, T>::type A;
  __shared__ A scratch[kThreads / 32];
  const int64_t chunk = (n + partials - 1) / partials;
  const int64_t begin = blockIdx.x * chunk, end = begin + chunk < n ? begin + chunk : n;
  A value = identity<MODE, T>();
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    A v = (A)value_of(x[i]);
    value = combine<MODE>(value, (A)(SQUARES ? v * v : v));
  }
  value = block_combine<MODE>(value, scratch);
  if (threadIdx.x == 0)
    out[blockIdx.x] = value;
}

template <int MODE, typename T>
__global__ void full_finish(const typename Acc<MODE, T>::type *partials, int64_t n, T *y, double divisor) {
  typedef typename Acc<MODE, T>::type A;
  __shared__ A scratch[kThreads / 32];
  A value = identity<MODE, T>();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    value = combine<MODE>(value, partials[i]);
  value = block_combine<MODE>(value, scratch);
  if (threadIdx.x == 0)
    y[0] = finish<MODE, T>(value, divisor);
}

/* ---- rows: a warp per output ---- */

template <int MODE, typename T>
__global__ void rows_kernel(const T *x, T *y, tf_cuda_reduction r, bool contiguous, double divisor) {
  typedef typename Acc<MODE, T>::type A;
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; o < r.outputs; o += warps) {
    const int64_t base = output_base(r, o);
    A value = identity<MODE, T>();
    for (int64_t e = lane; e < r.group; e += 32)
      value = combine<MODE>(value, (A)value_of(x[base + (contiguous ? e : group_offset(r, e))]));
    value = warp_combine<MODE>(value);
    if (lane == 0)
      y[o] = finish<MODE, T>(value, divisor);
  }
}

/* ---- columns: a thread per (output, row range) ---- */

template <int MODE, typename T>
__global__ void columns_kernel(const T *x, T *y, typename Acc<MODE, T>::type *partials, tf_cuda_reduction r,
                               double divisor) {
  typedef typename Acc<MODE, T>::type A;
  TF_CUDA_GRID_STRIDE(t, r.outputs * r.splits) {
    const int64_t o = t % r.outputs, split = t / r.outputs;
    const int64_t begin = r.group * split / r.splits, end = r.group * (split + 1) / r.splits;
    const int64_t base = output_base(r, o);
    A value = identity<MODE, T>();
    if (r.length > 0) { /* one reduced axis (a bias gradient's rows): its stride, no division per element */
      const int64_t stride = reduced_stride(r);
      for (int64_t e = begin; e < end; e++)
        value = combine<MODE>(value, (A)value_of(x[base + e * stride]));
    } else {
      for (int64_t e = begin; e < end; e++)
        value = combine<MODE>(value, (A)value_of(x[base + group_offset(r, e)]));
    }
    if (r.splits == 1)
      y[o] = finish<MODE, T>(value, divisor);
    else
      partials[split * r.outputs + o] = value;
  }
}

template <int MODE, typename T>
__global__ void columns_finish(const typename Acc<MODE, T>::type *partials, T *y, int64_t outputs, int64_t splits,
                               double divisor) {
  typedef typename Acc<MODE, T>::type A;
  TF_CUDA_GRID_STRIDE(o, outputs) {
    A value = identity<MODE, T>();
    for (int64_t split = 0; split < splits; split++)
      value = combine<MODE>(value, partials[split * outputs + o]);
    y[o] = finish<MODE, T>(value, divisor);
  }
}

template <int MODE, typename T>
tf_status reduce_run(const tf_cuda_args *args, const tf_cuda_reduction &r, double divisor) {
  typedef typename Acc<MODE, T>::type A;
  const T *x = (const T *)args->inputs[0].data;
  T *y = (T *)args->outputs[0].data;
  A *partials = (A *)args->workspace;
  cudaStream_t stream = stream_of(args);
  if (r.outputs == 0)
    return NULL;
  if (r.kind == TF_CUDA_REDUCE_FULL) {
    const int64_t n = tf_cuda_full_partials(r.group);
    full_partials<MODE, T, false><<<(unsigned)n, kThreads, 0, stream>>>(x, r.group, n, partials);
    full_finish<MODE, T><<<1, kThreads, 0, stream>>>(partials, n, y, divisor);
  } else if (r.kind == TF_CUDA_REDUCE_ROWS) {
    bool contiguous = r.group == r.shape[r.rank - 1]; /* one reduced run, innermost */
    rows_kernel<MODE, T><<<blocks_for(r.outputs * 32), kThreads, 0, stream>>>(x, y, r, contiguous, divisor);
  } else {
    columns_kernel<MODE, T><<<blocks_for(r.outputs * r.splits), kThreads, 0, stream>>>(x, y, partials, r, divisor);
    if (r.splits > 1)
      columns_finish<MODE, T>
          <<<blocks_for(r.outputs), kThreads, 0, stream>>>(partials, y, r.outputs, r.splits, divisor);
  }
  return launch_status();
}

/* ---- max_grad: dy / (number of maxima) at every maximum of a group ---- */

__device__ inline bool equals_max(float value, float best) { return value == best || (value != value && best != best); }

template <typename T> __global__ void count_maxima(const T *x, int64_t n, const T *best, unsigned long long *count) {
  __shared__ unsigned long long scratch[kThreads / 32];
  unsigned long long mine = 0;
  const float top = to_f32(best[0]);
  TF_CUDA_GRID_STRIDE(i, n) { mine += equals_max(to_f32(x[i]), top); }
  mine = block_sum(mine, scratch);
  if (threadIdx.x == 0 && mine)
    atomicAdd(count, mine);
}

template <typename T>
__global__ void spread_full(const T *x, int64_t n, const T *best, const T *dy, const unsigned long long *count, T *dx) {
  const float top = to_f32(best[0]);
  const float share = *count > 0 ? to_f32(dy[0]) / (float)*count : 0.0f;
  TF_CUDA_GRID_STRIDE(i, n) { dx[i] = from_f32<T>(equals_max(to_f32(x[i]), top) ? share : 0.0f); }
}

/* One output per warp (rows) or per thread (columns): count, then write. */
template <bool WARP, typename T>
__global__ void spread_groups(const T *x, const T *y, const T *dy, T *dx, tf_cuda_reduction r) {
  const int lane = WARP ? threadIdx.x % 32 : 0, width = WARP ? 32 : 1;
  const int64_t workers = (int64_t)gridDim.x * blockDim.x / width;
  for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / width; o < r.outputs; o += workers) {
    const int64_t base = output_base(r, o);
    const float best = to_f32(y[o]);
    int64_t maxima = 0;
    for (int64_t e = lane; e < r.group; e += width)
      maxima += equals_max(to_f32(x[base + group_offset(r, e)]), best);
    if (WARP)
      maxima = warp_sum(maxima);
    const float share = maxima > 0 ? to_f32(dy[o]) / (float)maxima : 0.0f;
    for (int64_t e = lane; e < r.group; e += width) {
      const int64_t at = base + group_offset(r, e);
      dx[at] = from_f32<T>(equals_max(to_f32(x[at]), best) ? share : 0.0f);
    }
  }
}

template <typename T> tf_status max_grad_run(const tf_cuda_args *args, const tf_cuda_reduction &r) {
  const T *x = (const T *)args->inputs[0].data, *y = (const T *)args->inputs[1].data;
  const T *dy = (const T *)args->inputs[2].data;
  T *dx = (T *)args->outputs[0].data;
  cudaStream_t stream = stream_of(args);
  if (args->outputs[0].count == 0)
    return NULL;
  if (r.kind == TF_CUDA_REDUCE_FULL) {
    unsigned long long *count = (unsigned long long *)args->workspace;
    TF_RETURN_IF_ERROR(call_status(cudaMemsetAsync(count, 0, sizeof(*count), stream), "cudaMemsetAsync of %d bytes",
                                   (int)sizeof(*count)));
    count_maxima<T><<<blocks_for(r.group), kThreads, 0, stream>>>(x, r.group, y, count);
    spread_full<T><<<blocks_for(r.group), kThreads, 0, stream>>>(x, r.group, y, dy, count, dx);
  } else if (r.kind == TF_CUDA_REDUCE_ROWS) {
    spread_groups<true, T><<<blocks_for(r.outputs * 32), kThreads, 0, stream>>>(x, y, dy, dx, r);
  } else {
    spread_groups<false, T><<<blocks_for(r.outputs), kThreads, 0, stream>>>(x, y, dy, dx, r);
  }
  return launch_status();
}

} // namespace

TF_CUDA_LAUNCHER(reduce) {
  tf_cuda_reduction r;
  tf_cuda_reduction_of(args->op, args->attrs, args->inputs, &r);
  if (args->op == TF_OP_MAX) {
    switch (args->inputs[0].dtype) {
    case TF_I32: return reduce_run<MAX, int32_t>(args, r, 1.0);
    case TF_I64: return reduce_run<MAX, int64_t>(args, r, 1.0);
    case TF_U8: return reduce_run<MAX, uint8_t>(args, r, 1.0);
    case TF_F16: return reduce_run<MAX, F16>(args, r, 1.0);
    case TF_BF16: return reduce_run<MAX, Bf16>(args, r, 1.0);
    default: return reduce_run<MAX, float>(args, r, 1.0);
    }
  }
  /* sum and mean read x, sum_to dy: input 0, the floating data */
  const double divisor = args->op == TF_OP_MEAN ? (double)r.group : 1.0;
  return with_storage(args->inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    return reduce_run<SUM, T>(args, r, divisor);
  });
}

/* (x, y, dy) -> dx, all of one floating type. */
TF_CUDA_LAUNCHER(max_grad) {
  tf_cuda_reduction r;
  tf_cuda_reduction_of(args->op, args->attrs, args->inputs, &r);
  return with_storage(args->outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    return max_grad_run<T>(args, r);
  });
}

TF_CUDA_LAUNCHER(global_norm_sq) {
  double *partials = (double *)args->workspace;
  cudaStream_t stream = stream_of(args);
  int64_t used = 0;
  for (int32_t i = 0; i < args->n_inputs; i++) {
    const int64_t n = tf_cuda_full_partials(args->inputs[i].count);
    full_partials<SUM, float, true><<<(unsigned)n, kThreads, 0, stream>>>((const float *)args->inputs[i].data,
                                                                          args->inputs[i].count, n, partials + used);
    used += n;
  }
  full_finish<SUM, float><<<1, kThreads, 0, stream>>>(partials, used, (float *)args->outputs[0].data, 1.0);
  return launch_status();
}

} // namespace tf_cuda
