/* matmul: C = op(A) op(B) over numpy-broadcast batch dims, with cuBLAS (f32, pedantic math: no
 * TF32), as kernels/cpu/matmul.c; matmul_accumulate: C += op(A) op(B), the same calls with
 * beta = 1 (C is its input 0, the gradient accumulator). Row-major C = op(A) op(B) is column-major
 * Cᵀ = op(B)ᵀ op(A)ᵀ, so B goes first. A product whose B has no batch and whose A is not
 * transposed is one gemm over the flattened rows of A; otherwise the batch axes are merged where
 * every operand walks them contiguously, the innermost run is one strided-batched gemm (stride 0
 * where broadcast) and any remaining outer axes are a host loop over such calls (each captured into
 * the graph). cuBLAS works in the step's workspace (cublasSetWorkspace), never in memory of its
 * own.
 *
 * matmul on f16/bf16 operands (a half kernel of the cuda target: A, B and C all of that type) is
 * the same calls through cublasGemmStridedBatchedEx with 16-bit A, B and C and CUBLAS_COMPUTE_32F:
 * the products of half values are exact in f32 and accumulate in f32 on the tensor cores, reductions
 * kept in f32 too (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), and C is rounded to its type
 * once. Within the f32 product's bound of cast up -> f32 matmul -> cast down (the order of the f32
 * additions differs), not bit for bit. matmul_accumulate is never a half kernel (C += would round
 * the running sum). */

#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Product {
  bool transpose_a, transpose_b;
  int64_t m, n, k, lda, ldb;
  int32_t batch_rank; /* merged batch axes */
  int64_t batch_shape[TF_MAX_RANK], a_stride[TF_MAX_RANK], b_stride[TF_MAX_RANK], c_stride[TF_MAX_RANK];
};

/* Element strides of operand x's batch axes aligned to the output's from the right, 0 where broadcast. */
void batch_strides(const tf_cuda_tensor *x, int32_t batch_rank, const int64_t *batch_shape, int64_t *strides) {
  const int32_t x_batch_rank = x->rank - 2;
  int64_t stride = x->shape[x->rank - 2] * x->shape[x->rank - 1];
  for (int32_t i = batch_rank - 1; i >= 0; i--) {
    const int32_t axis = i - (batch_rank - x_batch_rank);
    if (axis < 0) {
      strides[i] = 0;
      continue;
    }
    strides[i] = x->shape[axis] == 1 && batch_shape[i] != 1 ? 0 : stride;
    stride *= x->shape[axis];
  }
}

/* The operands: matmul (a, b) -> c; matmul_accumulate (c, a, b), c updated in place. */
struct Operands {
  const tf_cuda_tensor *a, *b, *c;
};

Operands operands_of(const tf_cuda_args *args) {
  const bool accumulate = args->op == TF_OP_MATMUL_ACCUMULATE;
  return Operands{&args->inputs[accumulate ? 1 : 0], &args->inputs[accumulate ? 2 : 1],
                  accumulate ? &args->inputs[0] : &args->outputs[0]};
}

Product plan_product(const tf_cuda_args *args) {
  const Operands operands = operands_of(args);
  const tf_cuda_tensor *a = operands.a, *b = operands.b, *c = operands.c;
  Product p;
  memset(&p, 0, sizeof(p));
  p.transpose_a = args->attrs->u.matmul.transpose_a;
  p.transpose_b = args->attrs->u.matmul.transpose_b;
  p.m = c->shape[c->rank - 2];
  p.n = c->shape[c->rank - 1];
  p.k = p.transpose_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
  p.lda = a->shape[a->rank - 1];
  p.ldb = b->shape[b->rank - 1];
  int32_t rank = c->rank - 2;
  int64_t shape[TF_MAX_RANK], sa[TF_MAX_RANK], sb[TF_MAX_RANK], sc[TF_MAX_RANK];
  int64_t b_batches = 1, stride = p.m * p.n;
  for (int32_t i = 0; i < rank; i++)
    shape[i] = c->shape[i];
  for (int32_t i = 0; i < b->rank - 2; i++)
    b_batches *= b->shape[i];
  batch_strides(a, rank, shape, sa);
  batch_strides(b, rank, shape, sb);
  for (int32_t i = rank - 1; i >= 0; i--) {
    sc[i] = stride;
    stride *= shape[i];
  }
  if (!p.transpose_a && b_batches == 1) { /* the batch entries of A and C are consecutive row blocks */
    for (int32_t i = 0; i < rank; i++)
      p.m *= shape[i];
    rank = 0;
  }
  /* Merge batch axes (dropping size-1 ones) where all three operands walk them contiguously. */
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] == 1)
      continue;
    const int32_t last = p.batch_rank - 1;
    if (last >= 0 && p.a_stride[last] == sa[i] * shape[i] && p.b_stride[last] == sb[i] * shape[i] &&
        p.c_stride[last] == sc[i] * shape[i]) {
      p.batch_shape[last] *= shape[i];
      p.a_stride[last] = sa[i], p.b_stride[last] = sb[i], p.c_stride[last] = sc[i];
      continue;
    }
    p.batch_shape[p.batch_rank] = shape[i];
    p.a_stride[p.batch_rank] = sa[i], p.b_stride[p.batch_rank] = sb[i], p.c_stride[p.batch_rank] = sc[i];
    p.batch_rank++;
  }
  return p;
}

/* The count of the innermost, strided-batched axis (1 without batch axes). */
int64_t batch_of(const Product &p) { return p.batch_rank > 0 ? p.batch_shape[p.batch_rank - 1] : 1; }

/* Column-major strided-batched C = alpha op(A) op(B) + beta C with A, B and C of `dtype`: f32 through
 * gemm_f32 (the plan's matmul math), f16/bf16 with f32 accumulation on the tensor cores (the handle's
 * math mode is default, reductions in f32, for that call only). Element offsets and strides count
 * elements of `dtype`. */
cublasStatus_t gemm_typed(cublasHandle_t handle, tf_dtype dtype, tf_dtype math, cublasOperation_t op_a,
                          cublasOperation_t op_b, int m, int n, int k, const float *alpha, const void *a, int lda,
                          long long stride_a, const void *b, int ldb, long long stride_b, const float *beta, void *c,
                          int ldc, long long stride_c, int batch) {
  if (dtype != TF_F16 && dtype != TF_BF16)
    return gemm_f32(handle, math, op_a, op_b, m, n, k, alpha, (const float *)a, lda, stride_a, (const float *)b, ldb,
                    stride_b, beta, (float *)c, ldc, stride_c, batch);
  const cudaDataType type = dtype == TF_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasStatus_t status =
      cublasSetMathMode(handle, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (status == CUBLAS_STATUS_SUCCESS)
    status =
        cublasGemmStridedBatchedEx(handle, op_a, op_b, m, n, k, alpha, a, type, lda, stride_a, b, type, ldb, stride_b,
                                   beta, c, type, ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  const cublasStatus_t restored = cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  return status != CUBLAS_STATUS_SUCCESS ? status : restored;
}

} // namespace

tf_status check_matmul(const tf_cuda_args *args) {
  Product p = plan_product(args);
  const IntDimension dimensions[] = {
      {.name = "m", .value = p.m},     {.name = "n", .value = p.n},     {.name = "k", .value = p.k},
      {.name = "lda", .value = p.lda}, {.name = "ldb", .value = p.ldb}, {.name = "batch", .value = batch_of(p)},
  };
  return check_int_dimensions(args, dimensions, (int)(sizeof(dimensions) / sizeof(dimensions[0])));
}

TF_CUDA_LAUNCHER(matmul) {
  const bool accumulate = args->op == TF_OP_MATMUL_ACCUMULATE;
  const Operands operands = operands_of(args);
  const tf_cuda_tensor *out = operands.c;
  cudaStream_t stream = stream_of(args);
  if (out->count == 0)
    return NULL;
  Product p = plan_product(args);
  if (p.k == 0) /* an empty sum: C = 0, or C unchanged */
    return accumulate ? NULL : zero(out, stream);
  cublasHandle_t handle = (cublasHandle_t)args->cublas;
  TF_RETURN_IF_ERROR(cublas_workspace(handle, args->workspace, args->workspace_bytes));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const tf_dtype dtype = out->dtype; /* f32, or the half type of every operand (a half kernel) */
  const int64_t size = element_size(dtype);
  const char *a = (const char *)operands.a->data, *b = (const char *)operands.b->data;
  char *c = (char *)out->data;
  const cublasOperation_t op_a = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t inner = p.batch_rank - 1;
  const int64_t count = batch_of(p);
  int64_t outer = 1;
  for (int32_t i = 0; i < inner; i++)
    outer *= p.batch_shape[i];
  for (int64_t index = 0; index < outer; index++) {
    int64_t a_offset = 0, b_offset = 0, c_offset = 0, rest = index;
    for (int32_t i = inner - 1; i >= 0; i--) {
      const int64_t at = rest % p.batch_shape[i];
      rest /= p.batch_shape[i];
      a_offset += at * p.a_stride[i], b_offset += at * p.b_stride[i], c_offset += at * p.c_stride[i];
    }
    TF_RETURN_IF_ERROR(call_status(
        gemm_typed(handle, dtype, args->math, op_b, op_a, (int)p.n, (int)p.m, (int)p.k, &alpha, b + b_offset * size,
                   (int)p.ldb, inner >= 0 ? (long long)p.b_stride[inner] : 0, a + a_offset * size, (int)p.lda,
                   inner >= 0 ? (long long)p.a_stride[inner] : 0, &beta, c + c_offset * size, (int)p.n,
                   inner >= 0 ? (long long)p.c_stride[inner] : (long long)(p.m * p.n), (int)count),
        "cuBLAS strided-batched GEMM, %s operands, %s math (m %lld, n %lld, k %lld, batch %lld)", tf_dtype_name(dtype),
        tf_dtype_name(is_half_dtype(dtype) ? TF_F32 : args->math), (long long)p.m, (long long)p.n, (long long)p.k,
        (long long)count));
  }
  return launch_status();
}

} // namespace tf_cuda
