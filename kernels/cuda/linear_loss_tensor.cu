/* The fused loss head on f16/bf16 data on the tensor cores (issue 41): the widening path's
 * algorithm (linear_loss_half.cu: classes in spans outside, row chunks inside, a statistics pass
 * and a gradient pass that computes the logits again) with the half x and weight multiplied as they
 * are, by cublasGemmEx with 16-bit A and B, f32 C and CUBLAS_COMPUTE_32F. Products of half values
 * are exact in f32, so the logits are the widening path's up to the order of the f32 additions;
 * nothing is widened for them.
 *
 * Blocks are larger than the widening path's (core/workspace_cuda.h,
 * tf_cuda_linear_loss_tensor_layout_of: spans of up to 2,048 classes, chunks of as many rows as the
 * f32 head's chunk of logits holds; GPT-2 at 8 x 1024: 4,096 x 2,048, where 256-row chunks made
 * small GEMMs and summed dweight 32 times). A block per row holds its span's logits in registers (8 a
 * thread), so the statistics read each logit once, the bias is added as it is read (the unfused
 * add's f32 sum, as the widening path's separate pass), and the gradient kernel can round the
 * dlogits in place: row r's half values land in the first half of its own f32 bytes (a row stride
 * of 2 x span half elements), written only after every thread of the block has read the row.
 *
 * The gradient products (dx = dlogits W, dweight = dlogits^T x), chosen by the plan's matmul_math:
 *   - matmul_math is x's half type (--precision bf16 --matmul-math bf16): the dlogits are rounded to
 *     that type (round to nearest even) and multiplied with the half weight and x on the tensor
 *     cores, f32 accumulation: what the widening path's f32 products under COMPUTE_32F_FAST_16BF /
 *     _16F already did (cuBLAS rounds their f32 operands to the half type; the widened weight and x
 *     are half values, so only the dlogits lose bits, 2^-9 relative for bf16, 2^-12 for f16), and
 *     what PyTorch's bf16 autocast does (its logits gradient is bf16). Same bound as today's;
 *   - otherwise (f32 math; or the other half type, which would round the dlogits differently) the
 *     dlogits stay f32, and so do the products, on widened copies of the weight span and the x chunk
 *     with the plan's math: the widening path's numbers (and its speed for those two products:
 *     pedantic f32 GEMMs under f32 math).
 * TIGHTFIT_CUDA_HEAD_HALF_DLOGITS=0 takes the second way under half math too; =1 takes the first
 * under any math (PyTorch autocast's numbers: each dlogit off by up to 2^-9 relative for bf16,
 * 2^-12 for f16 before the f32 sums, beyond the one rounding of each result that the half kernels'
 * tolerance assumes: an --autocast plan, whose matmul_math is f32, needs it for tensor-core speed).
 * With a bias the dlogits are summed into dbias in double from f32 (column blocks, a fixed tree)
 * before they are rounded. dx is summed over the spans in f32, dweight over the chunks in f32, each
 * rounded once. Deterministic: no atomics, fixed trees; cuBLAS with its default
 * CUBLAS_ATOMICS_NOT_ALLOWED. */
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "kernels/cuda/linear_loss_half.cuh"

namespace tf_cuda {
namespace {

constexpr int kPerThread = TF_CUDA_HEAD_TENSOR_SPAN / kThreads; /* a span's row in registers */
static_assert(kPerThread * kThreads == TF_CUDA_HEAD_TENSOR_SPAN, "a span is a whole number of values a thread");
constexpr int kColumns = 32; /* dbias: columns (and row phases) of a block */

struct TensorHead {
  tf_linear_loss_geometry g;
  tf_cuda_linear_loss_tensor_layout at;
  const void *labels;
  bool wide;
  int64_t ignore;
  char *space;
  long long *count;
  cudaStream_t stream;
  cublasHandle_t handle;
  tf_dtype math, half; /* the plan's matmul_math; x's type */
  bool half_dlogits;   /* the gradient products on the half dlogits (tensor cores) */
  bool *refused;       /* set when cuBLAS refuses a product: the caller then runs the widening path */
};

float *floats_at(const TensorHead &h, int64_t offset) { return (float *)(h.space + offset); }
double *doubles_at(const TensorHead &h, int64_t offset) { return (double *)(h.space + offset); }

/* A chunk's rows and a span's classes (the block's row stride in the f32 logits). */
struct Block {
  int64_t first, rows;
  int64_t first_class, n;
};

/* Thread t's values of a span's row: logit c = t + j kThreads (+ bias[c]), -inf past the span. */
template <typename T>
__device__ inline void load_row(const float *row, const T *bias, int64_t n, float (&v)[kPerThread]) {
#pragma unroll
  for (int j = 0; j < kPerThread; j++) {
    const int64_t c = threadIdx.x + (int64_t)j * kThreads;
    v[j] = c < n ? (bias ? row[c] + to_f32(bias[c]) : row[c]) : -INFINITY;
  }
}

/* A block per row of the chunk: its statistics (stats[3 row]: max, sum of exp(logit - max), label
 * logit) updated by this span's logits, as the widening path's span_statistics. */
template <typename T>
__global__ void tensor_statistics(const float *logits, Block b, const T *bias, const void *labels, bool wide,
                                  int64_t classes, int64_t ignore, double *stats) {
  __shared__ XentScratch scratch;
  for (int64_t r = blockIdx.x; r < b.rows; r += gridDim.x) {
    float v[kPerThread];
    load_row(logits + r * b.n, bias, b.n, v);
    float best = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPerThread; j++)
      best = v[j] > best ? v[j] : best; /* a NaN is skipped, as xent_block_max */
    best = block_max(best, scratch.f);
    double *row = stats + 3 * (b.first + r);
    const float old = b.first_class == 0 ? best : (float)row[0];
    best = old > best ? old : best;
    double total = 0;
#pragma unroll
    for (int j = 0; j < kPerThread; j++)
      if (threadIdx.x + (int64_t)j * kThreads < b.n)
        total += (double)expf(v[j] - best);
    total = block_sum(total, scratch.d);
    if (threadIdx.x == 0) {
      row[1] = b.first_class == 0 ? total : row[1] * exp((double)old - (double)best) + total;
      row[0] = best;
    }
    const int64_t at = xent_label_at(labels, wide, b.first + r, classes, ignore) - b.first_class;
#pragma unroll
    for (int j = 0; j < kPerThread; j++)
      if (at >= 0 && at < b.n && at == threadIdx.x + (int64_t)j * kThreads)
        row[2] = v[j];
  }
}

/* A block per row: the span's logits become exp(logit - lse) scale, less scale at the label (scale
 * = dloss / count; 0 on a row whose label does not count), as the widening path's span_gradient;
 * stored in place as f32, or (Narrow) rounded to T into the first half of the row's own bytes once
 * every thread has read the row. */
template <typename T, bool Narrow>
__global__ void tensor_gradient(float *logits, Block b, const T *bias, const void *labels, bool wide, int64_t classes,
                                int64_t ignore, const double *stats, const float *dloss, const long long *count) {
  const float scale = *count > 0 ? (float)((double)dloss[0] / (double)*count) : 0.0f;
  for (int64_t r = blockIdx.x; r < b.rows; r += gridDim.x) {
    float *d = logits + r * b.n;
    float v[kPerThread];
    load_row(d, bias, b.n, v);
    const int64_t label = xent_label_at(labels, wide, b.first + r, classes, ignore);
    const double *row = stats + 3 * (b.first + r);
    const float lse = label < 0 ? 0.0f : (float)(row[0] + log(row[1]));
#pragma unroll
    for (int j = 0; j < kPerThread; j++) {
      const int64_t c = threadIdx.x + (int64_t)j * kThreads;
      v[j] = label < 0 ? 0.0f : expf(v[j] - lse) * scale;
      if (label >= 0 && c == label - b.first_class)
        v[j] -= scale;
    }
    if (Narrow)
      __syncthreads(); /* every thread has read the row before any half value overwrites it */
#pragma unroll
    for (int j = 0; j < kPerThread; j++) {
      const int64_t c = threadIdx.x + (int64_t)j * kThreads;
      if (c >= b.n)
        continue;
      if (Narrow)
        ((T *)d)[c] = from_f32<T>(v[j]);
      else
        d[c] = v[j];
    }
  }
}

/* A block per row: the f32 dlogits rounded to T in place (as tensor_gradient<T, true> stores them),
 * after dbias has read them. */
template <typename T> __global__ void narrow_rows(float *logits, Block b) {
  for (int64_t r = blockIdx.x; r < b.rows; r += gridDim.x) {
    float *d = logits + r * b.n;
    float v[kPerThread];
    load_row(d, (const T *)nullptr, b.n, v);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPerThread; j++) {
      const int64_t c = threadIdx.x + (int64_t)j * kThreads;
      if (c < b.n)
        ((T *)d)[c] = from_f32<T>(v[j]);
    }
  }
}

/* sums[c] (+)= the chunk's f32 dlogits[., c] in double: a block of kColumns x kColumns threads per
 * kColumns classes, thread (x, y) summing rows y, y + kColumns, ... in order, then row y's partials
 * added in order of y (a fixed tree: deterministic). The first chunk overwrites. */
__global__ void tensor_dbias(const float *dlogits, Block b, bool first_chunk, double *sums) {
  __shared__ double partial[kColumns][kColumns + 1];
  const int64_t c = (int64_t)blockIdx.x * kColumns + threadIdx.x;
  double sum = 0;
  for (int64_t r = threadIdx.y; c < b.n && r < b.rows; r += kColumns)
    sum += (double)dlogits[r * b.n + c];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= b.n)
    return;
  double total = first_chunk ? 0.0 : sums[c];
  for (int y = 0; y < kColumns; y++)
    total += partial[y][threadIdx.x];
  sums[c] = total;
}

/* Whether environment variable `name` is set to exactly `value`. */
bool env_is(const char *name, const char *value) {
  const char *set = getenv(name);
  return set && strcmp(set, value) == 0;
}

/* Whether the current device has tensor cores for `half` (bf16: sm_80, f16: sm_70), as
 * TIGHTFIT_CUDA_LIMITS may lower its compute capability. */
bool has_tensor_cores(tf_dtype half) {
  tf_cuda_limits limits;
  return tf_cuda_current_limits(&limits) && limits.major >= (half == TF_BF16 ? 8 : 7);
}

/* Row-major C [m, n] (f32) = op(A) op(B) + beta C with A and B of the head's half type: the tensor
 * cores, f32 accumulation and f32 reductions (the handle's math is default for this call only, as
 * matmul.cu's half products). A refusal (not supported, architecture mismatch) sets *h.refused. */
tf_status half_gemm(const TensorHead &h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                    const void *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  const float alpha = 1.0f;
  const cudaDataType type = h.half == TF_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasStatus_t status = cublasSetMathMode(
      h.handle, (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasGemmEx(h.handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                          (int)k, &alpha, b, type, (int)ldb, a, type, (int)lda, &beta, c, CUDA_R_32F, (int)ldc,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  const cublasStatus_t restored = cublasSetMathMode(h.handle, CUBLAS_PEDANTIC_MATH);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH)
    *h.refused = true;
  return call_status(status != CUBLAS_STATUS_SUCCESS ? status : restored,
                     "cuBLAS GEMM on %s operands, f32 result (m %lld, n %lld, k %lld, lda %lld, ldb %lld)",
                     tf_dtype_name(h.half), (long long)m, (long long)n, (long long)k, (long long)lda, (long long)ldb);
}

/* Row-major C [m, n] = op(A) op(B) (+ beta C) on f32 operands with the plan's math. */
tf_status f32_gemm(const TensorHead &h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  return row_major_gemm(h.handle, h.math, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

template <typename T> struct Operands {
  const T *x, *weight, *bias; /* bias: nullptr without one */
  T *dx, *dweight, *dbias;    /* nullptr: not computed */
};

template <typename T> class TensorPass {
public:
  TensorPass(const TensorHead &h, const Operands<T> &o) : h_(h), o_(o) {}

  /* Pass 1 (gradients false: the statistics) or pass 2 (dlogits scaled by dloss / count). */
  tf_status run(bool gradients, const float *dloss) const {
    const tf_linear_loss_geometry &g = h_.g;
    const int64_t span = h_.at.span, chunk = h_.at.chunk_rows;
    for (int64_t first_class = 0; first_class < g.classes; first_class += span) {
      const int64_t n = g.classes - first_class < span ? g.classes - first_class : span;
      if (gradients && !h_.half_dlogits)
        TF_RETURN_IF_ERROR(widen_weight_span(first_class, n));
      for (int64_t first = 0; first < g.rows; first += chunk) {
        const Block b = {first, g.rows - first < chunk ? g.rows - first : chunk, first_class, n};
        TF_RETURN_IF_ERROR(logits(b));
        TF_RETURN_IF_ERROR(gradients ? gradient(b, dloss) : statistics(b));
      }
      if (gradients)
        TF_RETURN_IF_ERROR(store_span(first_class, n));
    }
    if (!gradients)
      return NULL;
    const int64_t n_x = g.rows * g.features;
    narrow_block<<<blocks_for(n_x), kThreads, 0, h_.stream>>>(floats_at(h_, h_.at.dx_sum), n_x, o_.dx, n_x, 1, n_x,
                                                              h_.count);
    return launch_status();
  }

private:
  const T *bias_of(const Block &b) const { return o_.bias ? o_.bias + b.first_class : nullptr; }

  /* The block's logits, f32, rows of n: x[first ..] times the span of the weight, half operands. */
  tf_status logits(const Block &b) const {
    const tf_linear_loss_geometry &g = h_.g;
    const T *x = o_.x + b.first * g.features;
    if (g.transpose_weight) /* weight [V, d]: x weight[span]ᵀ */
      return half_gemm(h_, false, true, b.rows, b.n, g.features, x, g.features, o_.weight + b.first_class * g.features,
                       g.features, 0.0f, floats_at(h_, h_.at.logits), b.n);
    return half_gemm(h_, false, false, b.rows, b.n, g.features, x, g.features, o_.weight + b.first_class, g.classes,
                     0.0f, floats_at(h_, h_.at.logits), b.n);
  }

  tf_status statistics(const Block &b) const {
    tensor_statistics<T><<<row_blocks(b.rows), kThreads, 0, h_.stream>>>(floats_at(h_, h_.at.logits), b, bias_of(b),
                                                                         h_.labels, h_.wide, h_.g.classes, h_.ignore,
                                                                         doubles_at(h_, h_.at.statistics));
    return launch_status();
  }

  /* The block's dlogits, dbias's sums, then the products. */
  tf_status gradient(const Block &b, const float *dloss) const {
    float *d = floats_at(h_, h_.at.logits);
    const double *stats = doubles_at(h_, h_.at.statistics);
    const bool narrow_now = h_.half_dlogits && !o_.dbias;
    if (narrow_now)
      tensor_gradient<T, true><<<row_blocks(b.rows), kThreads, 0, h_.stream>>>(
          d, b, bias_of(b), h_.labels, h_.wide, h_.g.classes, h_.ignore, stats, dloss, h_.count);
    else
      tensor_gradient<T, false><<<row_blocks(b.rows), kThreads, 0, h_.stream>>>(
          d, b, bias_of(b), h_.labels, h_.wide, h_.g.classes, h_.ignore, stats, dloss, h_.count);
    TF_RETURN_IF_ERROR(launch_status());
    if (o_.dbias) {
      const dim3 threads(kColumns, kColumns);
      tensor_dbias<<<blocks_for(b.n, kColumns), threads, 0, h_.stream>>>(d, b, b.first == 0,
                                                                         doubles_at(h_, h_.at.dbias_span));
      TF_RETURN_IF_ERROR(launch_status());
      if (h_.half_dlogits) {
        narrow_rows<T><<<row_blocks(b.rows), kThreads, 0, h_.stream>>>(d, b);
        TF_RETURN_IF_ERROR(launch_status());
      }
    }
    return h_.half_dlogits ? half_products(b) : f32_products(b);
  }

  /* dx_sum[first ..] (+)= dlogits weight[span]; dweight_span (+)= dlogitsᵀ x ([n, d]) or xᵀ dlogits
   * ([d, n]): the half dlogits (row stride 2n half values) with the half weight and x. */
  tf_status half_products(const Block &b) const {
    const tf_linear_loss_geometry &g = h_.g;
    const T *d = (const T *)floats_at(h_, h_.at.logits), *x = o_.x + b.first * g.features;
    float *dx = floats_at(h_, h_.at.dx_sum) + b.first * g.features, *dw = floats_at(h_, h_.at.dweight_span);
    const float dx_beta = b.first_class == 0 ? 0.0f : 1.0f, dw_beta = b.first == 0 ? 0.0f : 1.0f;
    if (g.transpose_weight) {
      TF_RETURN_IF_ERROR(half_gemm(h_, false, false, b.rows, g.features, b.n, d, 2 * b.n,
                                   o_.weight + b.first_class * g.features, g.features, dx_beta, dx, g.features));
      return half_gemm(h_, true, false, b.n, g.features, b.rows, d, 2 * b.n, x, g.features, dw_beta, dw, g.features);
    }
    TF_RETURN_IF_ERROR(half_gemm(h_, false, true, b.rows, g.features, b.n, d, 2 * b.n, o_.weight + b.first_class,
                                 g.classes, dx_beta, dx, g.features));
    return half_gemm(h_, true, false, g.features, b.n, b.rows, x, g.features, d, 2 * b.n, dw_beta, dw, b.n);
  }

  /* The same products on the f32 dlogits, the widened weight span and x chunk, the plan's math. */
  tf_status f32_products(const Block &b) const {
    const tf_linear_loss_geometry &g = h_.g;
    const float *d = floats_at(h_, h_.at.logits), *w = floats_at(h_, h_.at.weight_span);
    float *x = floats_at(h_, h_.at.x_chunk);
    float *dx = floats_at(h_, h_.at.dx_sum) + b.first * g.features, *dw = floats_at(h_, h_.at.dweight_span);
    const int64_t n_x = b.rows * g.features;
    if (h_.at.chunk_rows < g.rows || b.first_class == 0) { /* one chunk: widened once for every span */
      widen_block<<<blocks_for(n_x), kThreads, 0, h_.stream>>>(o_.x + b.first * g.features, n_x, x, n_x, 1, n_x);
      TF_RETURN_IF_ERROR(launch_status());
    }
    const float dx_beta = b.first_class == 0 ? 0.0f : 1.0f, dw_beta = b.first == 0 ? 0.0f : 1.0f;
    TF_RETURN_IF_ERROR(f32_gemm(h_, false, !g.transpose_weight, b.rows, g.features, b.n, d, b.n, w,
                                g.transpose_weight ? g.features : b.n, dx_beta, dx, g.features));
    if (g.transpose_weight)
      return f32_gemm(h_, true, false, b.n, g.features, b.rows, d, b.n, x, g.features, dw_beta, dw, g.features);
    return f32_gemm(h_, true, false, g.features, b.n, b.rows, x, g.features, d, b.n, dw_beta, dw, b.n);
  }

  /* The weight's classes [first_class, first_class + n) widened: n rows of d ([V, d]) or d rows of n. */
  tf_status widen_weight_span(int64_t first_class, int64_t n) const {
    const tf_linear_loss_geometry &g = h_.g;
    float *w = floats_at(h_, h_.at.weight_span);
    if (g.transpose_weight)
      widen_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(o_.weight + first_class * g.features,
                                                                          g.features, w, g.features, n, g.features);
    else
      widen_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(o_.weight + first_class, g.classes, w, n,
                                                                          g.features, n);
    return launch_status();
  }

  /* dweight's (and dbias's) classes [first_class, first_class + n) rounded from the span's sums. */
  tf_status store_span(int64_t first_class, int64_t n) const {
    const tf_linear_loss_geometry &g = h_.g;
    const float *dw = floats_at(h_, h_.at.dweight_span);
    if (g.transpose_weight)
      narrow_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(
          dw, g.features, o_.dweight + first_class * g.features, g.features, n, g.features, h_.count);
    else
      narrow_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(dw, n, o_.dweight + first_class, g.classes,
                                                                           g.features, n, h_.count);
    TF_RETURN_IF_ERROR(launch_status());
    if (!o_.dbias)
      return NULL;
    narrow_sums<<<blocks_for(n), kThreads, 0, h_.stream>>>(doubles_at(h_, h_.at.dbias_span), o_.dbias + first_class, n,
                                                           h_.count);
    return launch_status();
  }

  const TensorHead &h_;
  Operands<T> o_;
};

template <typename T> Operands<T> operands_of(const tf_cuda_args *args) {
  const int32_t bias = tf_linear_loss_bias_input(args->op, args->n_inputs);
  Operands<T> o = {(const T *)args->inputs[0].data,
                   (const T *)args->inputs[1].data,
                   bias >= 0 ? (const T *)args->inputs[bias].data : nullptr,
                   nullptr,
                   nullptr,
                   nullptr};
  if (args->op != TF_OP_LINEAR_CROSS_ENTROPY) {
    const int32_t dx = tf_linear_loss_dx_output(args->op);
    o.dx = (T *)args->outputs[dx].data;
    o.dweight = (T *)args->outputs[dx + 1].data;
    o.dbias = bias >= 0 ? (T *)args->outputs[dx + 2].data : nullptr;
  }
  return o;
}

/* The head on the tensor cores; *refused set (and an error returned) when cuBLAS refuses a product. */
template <typename T> tf_status run_tensor_head(const tf_cuda_args *args, const TensorHead &h) {
  const TensorPass<T> pass(h, operands_of<T>(args));
  TF_RETURN_IF_ERROR(cublas_workspace(h.handle, h.space + h.at.cublas, TF_CUDA_CUBLAS_WORKSPACE));
  xent_count_labels<<<1, kThreads, 0, h.stream>>>(h.labels, h.wide, h.g.rows, h.g.classes, h.ignore, h.count);
  TF_RETURN_IF_ERROR(launch_status());
  TF_RETURN_IF_ERROR(pass.run(false, nullptr));
  const bool forward = args->op == TF_OP_LINEAR_CROSS_ENTROPY;
  if (forward || tf_linear_loss_is_train(args->op)) {
    half_loss<<<1, kThreads, 0, h.stream>>>(doubles_at(h, h.at.statistics), h.labels, h.wide, h.g.rows, h.g.classes,
                                            h.ignore, h.count, (float *)args->outputs[0].data);
    TF_RETURN_IF_ERROR(launch_status());
  }
  return forward ? NULL : pass.run(true, (const float *)args->inputs[3].data);
}

} // namespace

namespace {

/* Why the tensor-core path does not take the step (h's geometry and layout set), or NULL. */
const char *declined(const tf_cuda_args *args, const TensorHead &h) {
  if (!is_half_dtype(h.half) || tf_linear_loss_accumulates(args->op))
    return "not a half head step it serves";
  if (h.g.rows <= 0 || h.g.classes <= 0)
    return "nothing to sum";
  if (!args->workspace || args->workspace_bytes < h.at.total)
    return "the step's workspace is short of the tensor-core layout";
  if (h.at.chunk_rows > INT_MAX)
    return "a chunk's rows exceed cuBLAS's int";
  if (!has_tensor_cores(h.half))
    return "the device has no tensor cores for this half type";
  return NULL;
}

} // namespace

tf_status tensor_half_head(const tf_cuda_args *args, bool *handled) {
  *handled = false;
  if (env_is("TIGHTFIT_CUDA_HEAD_TENSOR", "0"))
    return NULL;
  const bool required = env_is("TIGHTFIT_CUDA_HEAD_TENSOR", "1");
  TensorHead h;
  h.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]);
  h.half = args->inputs[0].dtype;
  const bool gradients = args->op != TF_OP_LINEAR_CROSS_ENTROPY;
  h.at =
      tf_cuda_linear_loss_tensor_layout_of(&h.g, gradients, tf_linear_loss_bias_input(args->op, args->n_inputs) >= 0);
  const char *why = declined(args, h);
  if (why) {
    *handled = required;
    return required ? tf_status_new(TF_ERR_UNSUPPORTED,
                                    "cuda %s kernel: TIGHTFIT_CUDA_HEAD_TENSOR=1, but the tensor-core half head "
                                    "declines: %s (workspace %lld of %lld bytes)",
                                    tf_op_name(args->op), why, (long long)args->workspace_bytes, (long long)h.at.total)
                    : NULL;
  }
  h.labels = args->inputs[2].data;
  h.wide = args->inputs[2].dtype == TF_I64;
  h.ignore = args->attrs->u.cross_entropy.ignore_index;
  h.space = (char *)args->workspace;
  h.count = (long long *)(h.space + h.at.count);
  h.stream = stream_of(args);
  h.handle = (cublasHandle_t)args->cublas;
  h.math = args->math;
  h.half_dlogits = env_is("TIGHTFIT_CUDA_HEAD_HALF_DLOGITS", "1") ||
                   (args->math == h.half && !env_is("TIGHTFIT_CUDA_HEAD_HALF_DLOGITS", "0"));
  bool refused = false;
  h.refused = &refused;
  tf_status status = with_storage(h.half, [&](auto tag) -> tf_status {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value)
      return tf_status_new(TF_ERR_INTERNAL, "cuda %s kernel: the tensor-core half head on f32 x", tf_op_name(args->op));
    else
      return run_tensor_head<T>(args, h);
  });
  if (status && refused && !required) { /* what it enqueued, the widening path computes again */
    tf_status_free(status);
    return NULL;
  }
  *handled = true;
  return status;
}

} // namespace tf_cuda
