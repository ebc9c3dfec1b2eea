/* One cuBLASLt matmul with an epilogue per fused GEMM group (cuda_fuse.h), prepared once.
 *
 * Conventions are kernels/cuda/matmul.cu's: row-major C = op(A) op(B) is column-major
 * Cᵀ = op(B)ᵀ op(A)ᵀ, so the plan's B is cuBLASLt's A and the plan's A is cuBLASLt's B; only the
 * "one 2-D GEMM over A's flattened rows" case is fused (cuda_fuse.c checks the shapes). In
 * cuBLASLt's column-major terms D is [n, m] (n = the row-major output's columns): the forward's bias
 * has D's row count (CUBLASLT_EPILOGUE_BIAS), the weight gradient's bias gradient D's column count
 * (CUBLASLT_EPILOGUE_BGRADB reduces cuBLASLt's B, the plan's dz, over k = the rows); with the
 * weights stored [in, out] dz is the plan's B, cuBLASLt's A, and the bias D's row count (BGRADA).
 *
 * Types: f32 operands compute in CUBLAS_COMPUTE_32F (no TF32), or with the plan's matmul math
 * CUBLAS_COMPUTE_32F_FAST_16BF / _16F as gemm_f32 does; f16/bf16 operands (bias and aux of the same
 * type) accumulate in f32 (CUBLAS_COMPUTE_32F). Split-K reductions are limited to none or in the
 * compute type in workspace (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK): no reduction in a half
 * output type and no in-place (atomic) reduction, so results stay run-to-run deterministic.
 *
 * Numerics against the unfused steps: the bias epilogue adds the bias to the f32 accumulator and
 * rounds once, where the plan rounds y, then adds and rounds again (on f32 data a difference of
 * one rounding, on bf16 data up to one bf16 unit); cuBLASLt's GELU is the tanh approximation with its
 * own tanh (within a few f32 ulp of the CPU's); BGRADB sums dz in f32 in cuBLASLt's order where
 * sum_to sums in double. The tests state the tolerances.
 *
 * Memory: the heuristic is asked only for algorithms whose workspace fits the matmul step's planned
 * workspace slice (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES), or none where that slice is not free
 * at the launch step (the group's `workspace`, cuda_fuse.c), and the result's workspaceSize is
 * checked again, so cuBLASLt never allocates. */
#define _POSIX_C_SOURCE 200809L
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

struct cuda_lt_call {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout_a, layout_b, layout_c;
  cublasLtMatmulAlgo_t algo;
  size_t workspace_bytes;         /* what the chosen algorithm needs, <= the planned slice */
  float beta;                     /* 1 for matmul_accumulate */
  int32_t lt_a_input, lt_b_input; /* the matmul step's inputs that are cuBLASLt's A and B */
  bool c_is_input;                /* matmul_accumulate: C is input 0, else output 0 */
};

static tf_status lt_status(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return NULL;
  return tf_status_new(TF_ERR_BACKEND, "%s failed: %s (%s)", what, cublasGetStatusString(status),
                       cublasGetStatusName(status));
}

#define LT_TRY(call, what)                                                                                             \
  do {                                                                                                                 \
    tf_status lt_try_status = lt_status((call), (what));                                                               \
    if (lt_try_status) {                                                                                               \
      tf_cuda_lt_free(c);                                                                                              \
      return lt_try_status;                                                                                            \
    }                                                                                                                  \
  } while (0)

static cudaDataType lt_type(tf_dtype d) { return d == TF_BF16 ? CUDA_R_16BF : d == TF_F16 ? CUDA_R_16F : CUDA_R_32F; }

void tf_cuda_lt_free(cuda_lt_call *c) {
  if (!c)
    return;
  if (c->layout_a)
    cublasLtMatrixLayoutDestroy(c->layout_a);
  if (c->layout_b)
    cublasLtMatrixLayoutDestroy(c->layout_b);
  if (c->layout_c)
    cublasLtMatrixLayoutDestroy(c->layout_c);
  if (c->desc)
    cublasLtMatmulDescDestroy(c->desc);
  free(c);
}

static cublasLtEpilogue_t epilogue_of(tf_cuda_fusion_kind kind) {
  switch (kind) {
  case TF_CUDA_FUSION_BIAS: return CUBLASLT_EPILOGUE_BIAS;
  case TF_CUDA_FUSION_BIAS_GELU: return CUBLASLT_EPILOGUE_GELU_BIAS;
  case TF_CUDA_FUSION_BIAS_GELU_AUX: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case TF_CUDA_FUSION_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
  case TF_CUDA_FUSION_BGRADA: return CUBLASLT_EPILOGUE_BGRADA;
  default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

static void *buffer_address(const cuda_state *s, int32_t id) {
  const tf_plan_buffer *b = &s->plan->buffers[id];
  return (char *)s->regions[b->region] + b->offset;
}

tf_status tf_cuda_lt_prepare(cuda_state *s, const tf_cuda_fusion *g, cuda_lt_call **call) {
  *call = NULL;
  const tf_plan *plan = s->plan;
  const tf_plan_step *mm = &plan->steps[g->matmul_step];
  const tf_cuda_args *args = &s->steps[g->matmul_step].args[0];
  const bool accumulate = mm->op == TF_OP_MATMUL_ACCUMULATE;
  const tf_cuda_tensor *a = &args->inputs[accumulate ? 1 : 0], *b = &args->inputs[accumulate ? 2 : 1];
  const tf_cuda_tensor *out = accumulate ? &args->inputs[0] : &args->outputs[0];
  const bool transpose_a = mm->attrs.u.matmul.transpose_a, transpose_b = mm->attrs.u.matmul.transpose_b;
  const int64_t m = out->count / out->shape[out->rank - 1], n = out->shape[out->rank - 1];
  const int64_t k = transpose_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
  const int64_t lda = a->shape[a->rank - 1], ldb = b->shape[b->rank - 1];
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || m <= 0 || n <= 0 || k <= 0)
    return tf_status_new(TF_ERR_UNSUPPORTED, "GEMM m %lld, n %lld, k %lld outside what it fuses", (long long)m,
                         (long long)n, (long long)k);
  const tf_dtype dtype = out->dtype;
  const bool half = dtype == TF_F16 || dtype == TF_BF16;
  const cublasComputeType_t compute = half                           ? CUBLAS_COMPUTE_32F
                                      : plan->matmul_math == TF_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                      : plan->matmul_math == TF_F16  ? CUBLAS_COMPUTE_32F_FAST_16F
                                                                     : CUBLAS_COMPUTE_32F;
  if (!s->cublaslt) {
    cublasLtHandle_t handle = NULL;
    TF_RETURN_IF_ERROR(lt_status(cublasLtCreate(&handle), "cublasLtCreate"));
    s->cublaslt = handle;
  }
  cuda_lt_call *c = calloc(1, sizeof(*c));
  if (!c)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot prepare a cuBLASLt call");
  c->beta = accumulate ? 1.0f : 0.0f;
  c->lt_a_input = accumulate ? 2 : 1; /* the plan's B */
  c->lt_b_input = accumulate ? 1 : 0; /* the plan's A */
  c->c_is_input = accumulate;
  const cudaDataType type = lt_type(dtype);
  LT_TRY(cublasLtMatmulDescCreate(&c->desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t op_a = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "TRANSA");
  LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "TRANSB");
  const cublasLtEpilogue_t epilogue = epilogue_of(g->kind);
  LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
         "EPILOGUE");
  void *bias = buffer_address(s, g->bias);
  LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
         "BIAS_POINTER");
  const cudaDataType bias_type = lt_type(s->plan->buffers[g->bias].dtype);
  LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)),
         "BIAS_DATA_TYPE");
  if (g->kind == TF_CUDA_FUSION_BIAS_GELU_AUX) {
    void *aux = buffer_address(s, g->aux);
    const int64_t aux_ld = n;
    LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)),
           "EPILOGUE_AUX_POINTER");
    LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)),
           "EPILOGUE_AUX_LD");
    LT_TRY(cublasLtMatmulDescSetAttribute(c->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &type, sizeof(type)),
           "EPILOGUE_AUX_DATA_TYPE");
  }
  /* column-major: cuBLASLt's A is the plan's B stored [ldb, rows], op_a; its B the plan's A; D is [n, m] */
  const int64_t a_rows = transpose_b ? k : n, a_cols = transpose_b ? n : k;
  const int64_t b_rows = transpose_a ? m : k, b_cols = transpose_a ? k : m;
  LT_TRY(cublasLtMatrixLayoutCreate(&c->layout_a, type, (uint64_t)a_rows, (uint64_t)a_cols, ldb), "layout A");
  LT_TRY(cublasLtMatrixLayoutCreate(&c->layout_b, type, (uint64_t)b_rows, (uint64_t)b_cols, lda), "layout B");
  LT_TRY(cublasLtMatrixLayoutCreate(&c->layout_c, type, (uint64_t)n, (uint64_t)m, n), "layout C");
  cublasLtMatmulPreference_t preference = NULL;
  LT_TRY(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  /* the planned workspace where it is free at the launch step (cuda_fuse.h), else none */
  const size_t max_workspace = g->workspace && args->workspace ? (size_t)args->workspace_bytes : 0;
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &max_workspace, sizeof(max_workspace));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                  sizeof(schemes));
  cublasLtMatmulHeuristicResult_t results[8];
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)s->cublaslt, c->desc, c->layout_a, c->layout_b,
                                            c->layout_c, c->layout_c, preference, 8, results, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  LT_TRY(status, "cublasLtMatmulAlgoGetHeuristic");
  int chosen = -1;
  for (int i = 0; i < returned && chosen < 0; i++)
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= max_workspace)
      chosen = i;
  if (chosen < 0) {
    tf_cuda_lt_free(c);
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuBLASLt has no algorithm for this GEMM (%s, m %lld, n %lld, k %lld, %s math) within %lld "
                         "workspace bytes (%d candidates)",
                         tf_dtype_name(dtype), (long long)m, (long long)n, (long long)k,
                         tf_dtype_name(half ? TF_F32 : plan->matmul_math), (long long)max_workspace, returned);
  }
  c->algo = results[chosen].algo;
  c->workspace_bytes = results[chosen].workspaceSize;
  *call = c;
  return NULL;
}

tf_status tf_cuda_lt_launch(const cuda_state *s, const tf_cuda_fusion *g, const cuda_lt_call *c, int32_t half) {
  const tf_cuda_args *args = &s->steps[g->matmul_step].args[half];
  const float alpha = 1.0f;
  const void *a = args->inputs[c->lt_a_input].data, *b = args->inputs[c->lt_b_input].data;
  void *matmul_out = c->c_is_input ? args->inputs[0].data : args->outputs[0].data;
  /* D: the matmul's own output for bgradb; z or the gelu output (another step's output) forward */
  const bool bias_gradient = g->kind == TF_CUDA_FUSION_BGRADB || g->kind == TF_CUDA_FUSION_BGRADA;
  void *d = bias_gradient ? matmul_out : buffer_address(s, g->output);
  return lt_status(cublasLtMatmul((cublasLtHandle_t)s->cublaslt, c->desc, &alpha, a, c->layout_a, b, c->layout_b,
                                  &c->beta, d, c->layout_c, d, c->layout_c, &c->algo,
                                  c->workspace_bytes ? args->workspace : NULL, c->workspace_bytes,
                                  (cudaStream_t)args->stream),
                   "cublasLtMatmul");
}
