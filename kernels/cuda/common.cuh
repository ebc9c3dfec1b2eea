/* Helpers shared by the CUDA kernel files: launch geometry, warp and block reductions, strided
 * index arithmetic, and the launchers: their declarations and which op each serves (table.cu
 * dispatches to them). */
#ifndef TIGHTFIT_KERNELS_CUDA_COMMON_CUH
#define TIGHTFIT_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/workspace_cuda.h"
#include "kernels/cuda/kernels.h"

namespace tf_cuda {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int64_t kMaxBlocks = (int64_t)1 << 20; /* grid-stride loops cover the rest */

/* Blocks of `threads` for n items (at least 1, at most kMaxBlocks). */
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  return (unsigned)(blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

inline cudaStream_t stream_of(const tf_cuda_args *args) { return (cudaStream_t)args->stream; }

/* The static message of the last launch error, or NULL. */
inline const char *launch_status() {
  cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? NULL : cudaGetErrorString(error);
}

inline const char *cublas_status(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? NULL : cublasGetStatusString(status);
}

#define TF_CUDA_TRY(expr)                                                                                              \
  do {                                                                                                                 \
    const char *tf_cuda_error_ = (expr);                                                                               \
    if (tf_cuda_error_)                                                                                                \
      return tf_cuda_error_;                                                                                           \
  } while (0)

#define TF_CUDA_GRID_STRIDE(i, n)                                                                                      \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- reductions inside a warp and a block (fixed trees: deterministic) ---- */

template <typename T> __device__ inline T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

/* max that lets NaN win (torch.amax). */
__device__ inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

__device__ inline float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

/* Sum over a block of kThreads threads; every thread gets the total. `scratch` holds kThreads / 32. */
template <typename T> __device__ inline T block_sum(T value, T *scratch) {
  value = warp_sum(value);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  T total = lane < (int)(blockDim.x / 32) ? scratch[lane] : T(0);
  return warp_sum(total);
}

/* ---- strided index arithmetic (rank <= TF_MAX_RANK) ---- */

/* The iteration space of an output and where each of up to 2 operands' elements lie in it. */
struct Strides {
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t stride[2][TF_MAX_RANK];
};

/* numpy broadcast strides of t against `shape` (right-aligned; 0 where broadcast). */
inline void broadcast_strides(const tf_cuda_tensor *t, int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    int32_t axis = i - (rank - t->rank);
    int64_t dim = axis >= 0 ? t->shape[axis] : 1;
    strides[i] = dim == 1 && shape[i] != 1 ? 0 : stride;
    stride *= dim;
  }
}

/* Drops size-1 axes and merges neighbours that every operand walks contiguously (as the CPU's
 * tf_cpu_collapse); rank becomes at least 1. */
inline void collapse(Strides *s, int operands) {
  int32_t kept = 0;
  for (int32_t i = 0; i < s->rank; i++) {
    if (s->shape[i] == 1)
      continue;
    bool merge = kept > 0;
    for (int k = 0; merge && k < operands; k++)
      merge = s->stride[k][kept - 1] == s->stride[k][i] * s->shape[i];
    if (merge) {
      s->shape[kept - 1] *= s->shape[i];
      for (int k = 0; k < operands; k++)
        s->stride[k][kept - 1] = s->stride[k][i];
      continue;
    }
    s->shape[kept] = s->shape[i];
    for (int k = 0; k < operands; k++)
      s->stride[k][kept] = s->stride[k][i];
    kept++;
  }
  if (kept == 0) {
    s->shape[0] = 1;
    for (int k = 0; k < operands; k++)
      s->stride[k][0] = 0;
    kept = 1;
  }
  s->rank = kept;
}

/* Element offset of flat output index i in operand k. */
__device__ inline int64_t offset_of(const Strides &s, int k, int64_t i) {
  int64_t offset = 0;
  for (int32_t axis = s.rank - 1; axis >= 0; axis--) {
    int64_t index = i % s.shape[axis];
    i /= s.shape[axis];
    offset += index * s.stride[k][axis];
  }
  return offset;
}

/* Element types by size, for kernels that only move bytes. */
template <int Size> struct Bytes;
template <> struct Bytes<1> { typedef uint8_t type; };
template <> struct Bytes<2> { typedef uint16_t type; };
template <> struct Bytes<4> { typedef uint32_t type; };
template <> struct Bytes<8> { typedef uint64_t type; };

inline int element_size(tf_dtype dtype) {
  switch (dtype) {
  case TF_F16:
  case TF_BF16: return 2;
  case TF_I64: return 8;
  case TF_U8: return 1;
  default: return 4;
  }
}

/* Memset of a whole tensor (capturable). */
inline const char *zero(const tf_cuda_tensor *t, cudaStream_t stream) {
  if (t->count == 0)
    return NULL;
  cudaError_t e = cudaMemsetAsync(t->data, 0, (size_t)(t->count * element_size(t->dtype)), stream);
  return e == cudaSuccess ? NULL : cudaGetErrorString(e);
}

/* ---- launchers, one per op family file ---- */

#define TF_CUDA_LAUNCHER(name) const char *launch_##name(const tf_cuda_args *args)
TF_CUDA_LAUNCHER(binary);          /* elementwise.cu: add, sub, mul, div */
TF_CUDA_LAUNCHER(unary);           /* neg ... tanh, gelu */
TF_CUDA_LAUNCHER(activation_grad); /* relu_grad ... tanh_grad */
TF_CUDA_LAUNCHER(reduce);          /* reduce.cu: sum, mean, max, sum_to */
TF_CUDA_LAUNCHER(max_grad);
TF_CUDA_LAUNCHER(global_norm_sq);
TF_CUDA_LAUNCHER(softmax); /* softmax.cu: softmax, log_softmax and their grads */
TF_CUDA_LAUNCHER(norm);    /* norm.cu: layer_norm, rms_norm */
TF_CUDA_LAUNCHER(norm_grad);
TF_CUDA_LAUNCHER(embedding); /* embedding.cu */
TF_CUDA_LAUNCHER(embedding_grad);
TF_CUDA_LAUNCHER(layout);    /* layout.cu: reshape, transpose, concat, slice, slice_grad, expand */
TF_CUDA_LAUNCHER(matmul);    /* matmul.cu */
TF_CUDA_LAUNCHER(conv);      /* conv.cu: every convolution op */
TF_CUDA_LAUNCHER(pool);      /* pool.cu */
TF_CUDA_LAUNCHER(dropout);   /* random.cu */
TF_CUDA_LAUNCHER(attention); /* attention.cu */
TF_CUDA_LAUNCHER(attention_grad);
TF_CUDA_LAUNCHER(cast); /* cast.cu */
TF_CUDA_LAUNCHER(loss); /* loss.cu: cross_entropy, mse, bce_with_logits */
TF_CUDA_LAUNCHER(loss_grad);
TF_CUDA_LAUNCHER(optimizer); /* optimizer.cu: accumulate, zero, sgd, adamw */

typedef const char *(*launcher)(const tf_cuda_args *args);

/* Each op's launcher, indexed by op: the op table's cuda column (core/op_table.h). A constant
 * expression, so a launcher serving several ops can instantiate its templates for its own rows. */
#define TF_CUDA_LAUNCHER_OF(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias,     \
                            workspace, vjp, cpu, cuda, ...)                                                            \
  launch_##cuda,
constexpr launcher kLaunchers[TF_OP_COUNT] = {TF_OP_TABLE(TF_CUDA_LAUNCHER_OF)};
#undef TF_CUDA_LAUNCHER_OF

/* Checks beyond dtypes (table.cu does those): NULL when supported. */
const char *check_attention(const tf_cuda_args *args);
const char *check_matmul(const tf_cuda_args *args);
const char *check_conv(const tf_cuda_args *args);

} // namespace tf_cuda

#endif
