/* Helpers shared by the CUDA kernel files: launch geometry, warp and block reductions, strided
 * index arithmetic, and the launchers: their declarations and which op each serves (table.cu
 * dispatches to them). */
#ifndef TIGHTFIT_KERNELS_CUDA_COMMON_CUH
#define TIGHTFIT_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half_bits.h"
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

/* Failures are tf_status values (tightfit/status.h), as everywhere else in the library: NULL on
 * success, else a status the caller frees. Allocating it is the only thing the error path does, so
 * launchers stay capturable; tf_cuda_kernel_launch() prefixes the op. */
inline const char *error_string(cudaError_t error) { return cudaGetErrorString(error); }
inline const char *error_name(cudaError_t error) { return cudaGetErrorName(error); }
inline const char *error_string(cublasStatus_t error) { return cublasGetStatusString(error); }
inline const char *error_name(cublasStatus_t error) { return cublasGetStatusName(error); }
static_assert(cudaSuccess == 0 && CUBLAS_STATUS_SUCCESS == 0, "call_status takes 0 for success");

/* NULL when the CUDA or cuBLAS call that returned `error` succeeded, else a TF_ERR_BACKEND status
 * "WHAT failed: ERROR (NAME)", WHAT being `fmt` formatted (the call and its sizes). */
template <typename Error> TF_PRINTF(2, 3) tf_status call_status(Error error, const char *fmt, ...) {
  if (error == Error(0))
    return NULL;
  char what[256];
  va_list args;
  va_start(args, fmt);
  vsnprintf(what, sizeof(what), fmt, args);
  va_end(args);
  return tf_status_new(TF_ERR_BACKEND, "%s failed: %s (%s)", what, error_string(error), error_name(error));
}

/* The error of the last kernel launch on this thread (cudaGetLastError, which also clears it), or NULL. */
inline tf_status launch_status() { return call_status(cudaGetLastError(), "launching a kernel"); }

/* Points cuBLAS at its share of the step's workspace, before any cuBLAS call of the step. */
inline tf_status cublas_workspace(cublasHandle_t handle, void *workspace, int64_t bytes) {
  return call_status(cublasSetWorkspace(handle, workspace, (size_t)bytes), "cublasSetWorkspace (%lld bytes)",
                     (long long)bytes);
}

/* Column-major strided-batched C = alpha op(A) op(B) + beta C on f32 matrices. `math` TF_F32:
 * cublasSgemmStridedBatched under the handle's pedantic math (exact f32, no TF32); TF_BF16 / TF_F16:
 * the operands rounded to that type on the tensor cores, products accumulated in f32
 * (CUBLAS_COMPUTE_32F_FAST_16BF / _16F; the handle's math mode is default for that call only). */
inline cublasStatus_t gemm_f32(cublasHandle_t handle, tf_dtype math, cublasOperation_t op_a, cublasOperation_t op_b,
                               int m, int n, int k, const float *alpha, const float *a, int lda, long long stride_a,
                               const float *b, int ldb, long long stride_b, const float *beta, float *c, int ldc,
                               long long stride_c, int batch) {
  if (math != TF_BF16 && math != TF_F16) {
    /* TIGHTFIT_CUDA_F32_MATH=default: cuBLAS's default math, reductions in f32, still no TF32 (what PyTorch
     * runs for fp32 without allow_tf32), to time against the pedantic mode the handle keeps */
    const char *mode = getenv("TIGHTFIT_CUDA_F32_MATH");
    if (!mode || strcmp(mode, "default") != 0)
      return cublasSgemmStridedBatched(handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                                       ldc, stride_c, batch);
    cublasStatus_t status = cublasSetMathMode(
        handle, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasSgemmStridedBatched(handle, op_a, op_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                                         c, ldc, stride_c, batch);
    const cublasStatus_t restored = cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
    return status != CUBLAS_STATUS_SUCCESS ? status : restored;
  }
  cublasStatus_t status = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasGemmStridedBatchedEx(handle, op_a, op_b, m, n, k, alpha, a, CUDA_R_32F, lda, stride_a, b, CUDA_R_32F,
                                        ldb, stride_b, beta, c, CUDA_R_32F, ldc, stride_c, batch,
                                        math == TF_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F,
                                        CUBLAS_GEMM_DEFAULT);
  const cublasStatus_t restored = cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  return status != CUBLAS_STATUS_SUCCESS ? status : restored;
}

/* Row-major C [m, n] = op(A) op(B) + beta C on one f32 matrix each (gemm_f32's `math`), as the
 * column-major Cᵀ = op(B)ᵀ op(A)ᵀ: the fused loss heads' products (linear_loss*.cu). */
inline tf_status row_major_gemm(cublasHandle_t handle, tf_dtype math, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                int64_t ldc) {
  const float alpha = 1.0f;
  return call_status(gemm_f32(handle, math, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
                              (int)m, (int)k, &alpha, b, (int)ldb, 0, a, (int)lda, 0, &beta, c, (int)ldc, 0, 1),
                     "cuBLAS GEMM, %s math (m %lld, n %lld, k %lld)", tf_dtype_name(math), (long long)m, (long long)n,
                     (long long)k);
}

/* A dimension handed to cuBLAS, which takes int. */
struct IntDimension {
  const char *name;
  int64_t value;
};

/* NULL when every dimension of the op in `args` fits cuBLAS's 32-bit int, else a TF_ERR_UNSUPPORTED status
 * naming the op and the first dimension that does not. */
inline tf_status check_int_dimensions(const tf_cuda_args *args, const IntDimension *dimensions, int count) {
  for (int i = 0; i < count; i++)
    if (dimensions[i].value < 0 || dimensions[i].value > INT_MAX)
      return tf_status_new(TF_ERR_UNSUPPORTED, "cuda %s kernel: %s is %lld, outside cuBLAS's 32-bit int (0..%d)",
                           tf_op_name(args->op), dimensions[i].name, (long long)dimensions[i].value, INT_MAX);
  return NULL;
}

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

/* Max over a block of kThreads threads (fmaxf, as warp_max); every thread gets it. `scratch` holds
 * kThreads / 32. */
__device__ inline float block_max(float value, float *scratch) {
  value = warp_max(value);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  return warp_max(lane < (int)(blockDim.x / 32) ? scratch[lane] : -INFINITY);
}

/* ---- storage of floating tensors: f32, or f16 / bf16 for the half kernels ---- */

/* A half kernel (the cuda target's half-kernel ops, targets/target.c) is its f32 kernel templated on
 * the storage type T of its floating operands: each element is loaded to f32 exactly, computed in
 * f32 as the f32 kernel does, and each result is rounded once to T by core/half_bits.h (the cast
 * kernels' rounding), so a half kernel writes the bits cast up -> f32 kernel -> cast down writes
 * (up to the order of f32 additions, which each kernel file states as for f32). The 16-bit types
 * are tags holding the bits; arithmetic happens only on their f32 values. */
struct F16 {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

__device__ inline float to_f32(float v) { return v; }
__device__ inline float to_f32(F16 v) { return __uint_as_float(tf_f32_bits_from_f16(v.bits)); }
__device__ inline float to_f32(Bf16 v) { return __uint_as_float(tf_f32_bits_from_bf16(v.bits)); }

template <typename T> __device__ inline T from_f32(float v);
template <> __device__ inline float from_f32<float>(float v) { return v; }
template <> __device__ inline F16 from_f32<F16>(float v) { return F16{tf_f16_from_f32_bits(__float_as_uint(v))}; }
template <> __device__ inline Bf16 from_f32<Bf16>(float v) { return Bf16{tf_bf16_from_f32_bits(__float_as_uint(v))}; }

/* Whether `dtype` is one of the half storage types (f16, bf16). */
inline bool is_half_dtype(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* Calls f(T{}) with T the storage type of `dtype` (F16, Bf16, else float): a launcher instantiates
 * its kernels for the storage of its floating operands, which a half kernel step has all of one
 * type (table.cu checks). */
template <typename F> inline tf_status with_storage(tf_dtype dtype, F &&f) {
  switch (dtype) {
  case TF_F16: return f(F16{});
  case TF_BF16: return f(Bf16{});
  default: return f(0.0f);
  }
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
inline tf_status zero(const tf_cuda_tensor *t, cudaStream_t stream) {
  if (t->count == 0)
    return NULL;
  const int64_t bytes = t->count * element_size(t->dtype);
  return call_status(cudaMemsetAsync(t->data, 0, (size_t)bytes, stream), "cudaMemsetAsync of %lld bytes",
                     (long long)bytes);
}

/* Device-to-device copy of `bytes` (capturable). */
inline tf_status copy(void *to, const void *from, int64_t bytes, cudaStream_t stream) {
  return call_status(cudaMemcpyAsync(to, from, (size_t)bytes, cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync of %lld bytes (device to device)", (long long)bytes);
}

/* ---- launchers, one per op family file ---- */

#define TF_CUDA_LAUNCHER(name) tf_status launch_##name(const tf_cuda_args *args)
TF_CUDA_LAUNCHER(binary);          /* elementwise.cu: add, sub, mul, div */
TF_CUDA_LAUNCHER(unary);           /* neg ... tanh, gelu */
TF_CUDA_LAUNCHER(activation_grad); /* relu_grad ... tanh_grad */
TF_CUDA_LAUNCHER(gelu_pair);       /* gelu and its derivative */
TF_CUDA_LAUNCHER(reduce);          /* reduce.cu: sum, mean, max, sum_to */
TF_CUDA_LAUNCHER(max_grad);
TF_CUDA_LAUNCHER(global_norm_sq);
TF_CUDA_LAUNCHER(softmax); /* softmax.cu: softmax, log_softmax and their grads */
TF_CUDA_LAUNCHER(norm);    /* norm.cu: layer_norm, rms_norm */
TF_CUDA_LAUNCHER(norm_grad);
TF_CUDA_LAUNCHER(batch_norm); /* batch_norm.cu: batch_norm (the batch's statistics per channel) */
TF_CUDA_LAUNCHER(batch_norm_grad);
TF_CUDA_LAUNCHER(batch_norm_running); /* batch_norm.cu: the running statistics (f32), in place, from f32/f16/bf16 x */
TF_CUDA_LAUNCHER(embedding);          /* embedding.cu */
TF_CUDA_LAUNCHER(embedding_grad);
TF_CUDA_LAUNCHER(layout);    /* layout.cu: reshape, transpose, concat, slice, slice_grad, expand */
TF_CUDA_LAUNCHER(matmul);    /* matmul.cu */
TF_CUDA_LAUNCHER(conv);      /* conv.cu: every convolution op */
TF_CUDA_LAUNCHER(pool);      /* pool.cu */
TF_CUDA_LAUNCHER(dropout);   /* random.cu */
TF_CUDA_LAUNCHER(attention); /* attention.cu */
TF_CUDA_LAUNCHER(attention_grad);
TF_CUDA_LAUNCHER(cast);      /* cast.cu */
TF_CUDA_LAUNCHER(cast_into); /* cast.cu: (param, master), in place */
TF_CUDA_LAUNCHER(loss);      /* loss.cu: cross_entropy, mse, bce_with_logits */
TF_CUDA_LAUNCHER(loss_grad);
TF_CUDA_LAUNCHER(optimizer);            /* optimizer.cu: accumulate, zero, sgd, adamw */
TF_CUDA_LAUNCHER(adamw8bit);            /* optimizer.cu: adamw8bit */
TF_CUDA_LAUNCHER(linear_cross_entropy); /* linear_loss.cu */
TF_CUDA_LAUNCHER(linear_cross_entropy_grad);
TF_CUDA_LAUNCHER(linear_cross_entropy_train);
TF_CUDA_LAUNCHER(ctc); /* ctc.cu: ctc_loss, ctc_loss_grad */

typedef tf_status (*launcher)(const tf_cuda_args *args);

/* Each op's launcher, indexed by op: the op table's cuda column (core/op_table.h). A constant
 * expression, so a launcher serving several ops can instantiate its templates for its own rows. */
#define TF_CUDA_LAUNCHER_OF(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias,     \
                            workspace, vjp, cpu, cuda, ...)                                                            \
  launch_##cuda,
constexpr launcher kLaunchers[TF_OP_COUNT] = {TF_OP_TABLE(TF_CUDA_LAUNCHER_OF)};
#undef TF_CUDA_LAUNCHER_OF

/* Checks beyond dtypes (table.cu does those): NULL when supported, else TF_ERR_UNSUPPORTED naming the
 * numbers. */
tf_status check_attention(const tf_cuda_args *args);
/* attention_tiled.cu: runs attention (or its gradient) in 64 x 64 tiles when the head width is at
 * most 128 and the device gives the shared memory; *handled false: the caller runs its row kernels. */
tf_status tiled_attention(const tf_cuda_args *args, bool backward, bool *handled);
/* attention_mma.cu: runs attention (or its gradient) on tensor cores when q, k, v (and dy, the
 * gradients) are all f16 or all bf16, D is 32, 64 or 128, the device is sm_80+ with the shared memory
 * and TIGHTFIT_CUDA_TENSOR_ATTENTION is not 0; *handled false: the caller runs the other kernels. */
tf_status tensor_attention(const tf_cuda_args *args, bool backward, bool *handled);
tf_status check_matmul(const tf_cuda_args *args);
tf_status check_conv(const tf_cuda_args *args);
tf_status check_linear_loss(const tf_cuda_args *args);
/* linear_loss_half.cu: the fused head on f16/bf16 x (classes in spans outside). Whether a head step's
 * x is half; its operands' dtypes (x, weight, bias and gradients of one half type, an f32 loss and
 * dloss, no accumulators); its launcher. */
bool linear_loss_on_half(const tf_cuda_args *args);
tf_status check_linear_loss_half(const tf_cuda_args *args);
tf_status launch_linear_cross_entropy_half(const tf_cuda_args *args);
/* loss.cu: a loss (or its gradient) on f16/bf16 x: x, the target and the gradient of that type, an
 * f32 loss and dloss. */
tf_status check_loss_half(const tf_cuda_args *args);

} // namespace tf_cuda

#endif
