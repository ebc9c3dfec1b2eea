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

/* ---- a block per row: the fused head's chunks (256 rows of 50,257 classes on the H200, 2026-11-30:
 * a warp per row kept 32 of 132 SMs busy at 4% of memory bandwidth). Thread t reads classes t,
 * t + blockDim.x, ...; every thread gets each reduction. The block is kThreads threads. ---- */

/* Shared scratch for the block reductions of one row. */
struct XentScratch {
  float f[kThreads / 32];
  double d[kThreads / 32];
};

/* The max of a row, on every thread of the block (as xent_row_max: a NaN element is skipped). */
__device__ inline float xent_block_max(const float *x, int64_t classes, XentScratch *s) {
  float best = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    best = x[c] > best ? x[c] : best;
  return block_max(best, s->f);
}

/* The sum of exp(x - best) over a row in double, on every thread of the block. */
__device__ inline double xent_block_exp_sum(const float *x, int64_t classes, float best, XentScratch *s) {
  double sum = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    sum += (double)expf(x[c] - best);
  return block_sum(sum, s->d);
}

/* -log softmax(x)[label], on every thread of the block. */
__device__ inline double xent_block_loss(const float *x, int64_t classes, int64_t label, XentScratch *s) {
  const float best = xent_block_max(x, classes, s);
  return log(xent_block_exp_sum(x, classes, best, s)) + ((double)best - (double)x[label]);
}

/* xent_row_gradient with a block per row: d = (softmax(x) - onehot(label)) scale, or 0 when label < 0;
 * d may be x. */
__device__ inline void xent_block_gradient(const float *x, float *d, int64_t classes, int64_t label, float scale,
                                           XentScratch *s) {
  if (label < 0) {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
      d[c] = 0.0f;
    return;
  }
  const float best = xent_block_max(x, classes, s);
  double sum = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    d[c] = expf(x[c] - best);
    sum += (double)d[c];
  }
  const float total = (float)block_sum(sum, s->d);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    d[c] = d[c] / total * scale;
  if (threadIdx.x == label % blockDim.x) /* the thread that wrote it */
    d[label] -= scale;
}

/* The grid of a block-per-row kernel over `rows` rows (at least one block; the kernels stride). */
inline unsigned row_blocks(int64_t rows) { return rows < 1 ? 1u : rows > 65535 ? 65535u : (unsigned)rows; }

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
