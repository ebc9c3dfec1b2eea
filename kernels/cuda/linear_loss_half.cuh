/* What the two paths of the fused loss head on f16/bf16 data share: the widening path
 * (linear_loss_half.cu: spans of the weight and chunks of x widened to f32, f32 products) and the
 * tensor-core path (linear_loss_tensor.cu: the half operands multiplied as they are). Both keep
 * each row's running statistics (max, sum of exp(logit - max), label logit: 3 doubles a row) over
 * the spans of classes, take the loss from them and round each gradient once into its half
 * output. */
#ifndef TIGHTFIT_KERNELS_CUDA_LINEAR_LOSS_HALF_CUH
#define TIGHTFIT_KERNELS_CUDA_LINEAR_LOSS_HALF_CUH

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/xent_row.cuh"

namespace tf_cuda {

/* linear_loss_tensor.cu: the half head on the tensor cores, unless TIGHTFIT_CUDA_HEAD_TENSOR is 0,
 * the device lacks the half type's tensor cores (bf16: sm_80, f16: sm_70), the step's workspace is
 * short of tf_cuda_linear_loss_tensor_layout_of's, there is nothing to sum, or cuBLAS refuses one of
 * its products (not supported, architecture mismatch): then *handled is false and the caller runs
 * the widening path, which recomputes every output. TIGHTFIT_CUDA_HEAD_TENSOR=1 makes each of those
 * (but 0) an error instead (*handled true): the tests' proof that the path ran. */
tf_status tensor_half_head(const tf_cuda_args *args, bool *handled);

namespace {

/* dst[r dst_stride + c] = src[r src_stride + c] widened exactly, r < rows, c < cols. */
template <typename T>
__global__ void widen_block(const T *src, int64_t src_stride, float *dst, int64_t dst_stride, int64_t rows,
                            int64_t cols) {
  TF_CUDA_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i - r * cols;
    dst[r * dst_stride + c] = to_f32(src[r * src_stride + c]);
  }
}

/* dst[r dst_stride + c] = src[r src_stride + c] rounded once (0 when no label counts). */
template <typename T>
__global__ void narrow_block(const float *src, int64_t src_stride, T *dst, int64_t dst_stride, int64_t rows,
                             int64_t cols, const long long *count) {
  const bool none = *count == 0;
  TF_CUDA_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i - r * cols;
    dst[r * dst_stride + c] = from_f32<T>(none ? 0.0f : src[r * src_stride + c]);
  }
}

/* dbias[c] = the span's double sums rounded (0 when no label counts). */
template <typename T> __global__ void narrow_sums(const double *sums, T *dbias, int64_t n, const long long *count) {
  const bool none = *count == 0;
  TF_CUDA_GRID_STRIDE(c, n) { dbias[c] = from_f32<T>(none ? 0.0f : (float)sums[c]); }
}

/* The mean over the rows that count of log(sum) + max - label logit (one block, double, fixed order). */
__global__ void half_loss(const double *stats, const void *labels, bool wide, int64_t rows, int64_t classes,
                          int64_t ignore, const long long *count, float *loss) {
  __shared__ double scratch[kThreads / 32];
  double sum = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    if (xent_label_at(labels, wide, r, classes, ignore) >= 0)
      sum += log(stats[3 * r + 1]) + (stats[3 * r] - stats[3 * r + 2]);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0)
    *loss = *count > 0 ? (float)(sum / (double)*count) : 0.0f;
}

} // namespace
} // namespace tf_cuda

#endif
