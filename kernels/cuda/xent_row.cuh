/* One row of cross-entropy for a warp, shared by cross_entropy (loss.cu) and the fused loss head
 * (linear_loss.cu), as kernels/cpu/xent_row.h. */
#ifndef TIGHTFIT_KERNELS_CUDA_XENT_ROW_CUH
#define TIGHTFIT_KERNELS_CUDA_XENT_ROW_CUH

#include "kernels/cuda/common.cuh"

namespace tf_cuda {

/* The label of `row`, or -1 when it does not count: ignore_index, or outside [0, classes). */
__device__ inline int64_t xent_label_at(const void *labels, bool wide, int64_t row, int64_t classes, int64_t ignore) {
  const int64_t label = wide ? ((const int64_t *)labels)[row] : (int64_t)((const int32_t *)labels)[row];
  return label == ignore || label < 0 || label >= classes ? -1 : label;
}

/* The max of a row, on every lane of the warp (lane l reads classes l, l + 32, ...); x of any storage
 * (float, F16, Bf16: loaded to f32 exactly). */
template <typename T> __device__ inline float xent_row_max(const T *x, int64_t classes, int lane) {
  float best = -INFINITY;
  for (int64_t c = lane; c < classes; c += 32)
    best = to_f32(x[c]) > best ? to_f32(x[c]) : best;
  return warp_max(best);
}

/* The sum of exp(x - best) over a row in double, on every lane of the warp. */
template <typename T> __device__ inline double xent_row_exp_sum(const T *x, int64_t classes, float best, int lane) {
  double sum = 0;
  for (int64_t c = lane; c < classes; c += 32)
    sum += (double)expf(to_f32(x[c]) - best);
  return warp_sum(sum);
}

/* -log softmax(x)[label], on every lane of the warp. */
template <typename T> __device__ inline double xent_row_loss(const T *x, int64_t classes, int64_t label, int lane) {
  const float best = xent_row_max(x, classes, lane);
  return log(xent_row_exp_sum(x, classes, best, lane)) + ((double)best - (double)to_f32(x[label]));
}

/* d = (softmax(x) - onehot(label)) scale, or 0 when label < 0; d may be x. A warp per row. */
__device__ inline void xent_row_gradient(const float *x, float *d, int64_t classes, int64_t label, float scale,
                                         int lane) {
  if (label < 0) {
    for (int64_t c = lane; c < classes; c += 32)
      d[c] = 0.0f;
    return;
  }
  const float best = xent_row_max(x, classes, lane);
  double sum = 0;
  for (int64_t c = lane; c < classes; c += 32) {
    d[c] = expf(x[c] - best);
    sum += (double)d[c];
  }
  const float total = (float)warp_sum(sum);
  for (int64_t c = lane; c < classes; c += 32)
    d[c] = d[c] / total * scale;
  if (lane == label % 32)
    d[label] -= scale;
}

/* xent_row_gradient on half storage (d is not x): each element's exp(x - max) computed again where
 * the f32 version reads back what it stored, so d gets the f32 version's values, each rounded once. */
template <typename T>
__device__ inline void xent_row_gradient_half(const T *x, T *d, int64_t classes, int64_t label, float scale, int lane) {
  if (label < 0) {
    for (int64_t c = lane; c < classes; c += 32)
      d[c] = from_f32<T>(0.0f);
    return;
  }
  const float best = xent_row_max(x, classes, lane);
  const float total = (float)xent_row_exp_sum(x, classes, best, lane);
  for (int64_t c = lane; c < classes; c += 32) {
    const float g = expf(to_f32(x[c]) - best) / total * scale;
    d[c] = from_f32<T>(c == label ? g - scale : g);
  }
}

namespace {

/* *count = the labels that count (one block; each .cu file that includes this has its own copy). */
__global__ void xent_count_labels(const void *labels, bool wide, int64_t rows, int64_t classes, int64_t ignore,
                                  long long *count) {
  __shared__ long long scratch[kThreads / 32];
  long long mine = 0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x)
    mine += xent_label_at(labels, wide, row, classes, ignore) >= 0;
  mine = block_sum(mine, scratch);
  if (threadIdx.x == 0)
    *count = mine;
}

} // namespace
} // namespace tf_cuda

#endif
