/* The fused loss head on f16/bf16 data (linear_cross_entropy, its gradient and its single pass, with
 * or without a bias; not the accumulating forms): x, the weight (and the bias) and dx, dweight (and
 * dbias) in one half type, labels, an f32 loss and dloss. The f32 kernel (linear_loss.cu) walks row
 * chunks outside and all classes inside, so on half data it would need an f32 copy of the whole
 * weight and an f32 dweight (147 MiB each for GPT-2's tied head). This one is the CPU's half kernel
 * (kernels/cpu/linear_loss_half.c) on the GPU: the classes in spans of TF_LINEAR_LOSS_HALF_SPAN
 * outside, the row chunks inside. A span of the weight and a chunk of x are widened into the
 * workspace (exact) and multiplied by cuBLAS's f32 gemms (the plan's matmul_math, as the f32 head);
 * pass 1 keeps each row's running max, sum of exp(logit - max) (double, rescaled as the max grows)
 * and label logit, which give the loss; pass 2 computes each chunk's logits again, turns them into
 * dlogits, sums dx over the spans and a span of dweight (and dbias, in double) over the chunks in
 * f32, and rounds each once into its half output. Workspace: core/workspace_cuda.h,
 * tf_cuda_linear_loss_half_layout_of. Deterministic: fixed trees, no atomics. A block per row in
 * the row passes (kernels/cuda/xent_row.cuh). Run on an H200 (docs/cuda.md).
 *
 * This is the widening path: the launcher first offers the step to the tensor-core path
 * (linear_loss_tensor.cu, no widened copies), and runs this one when that declines
 * (TIGHTFIT_CUDA_HEAD_TENSOR=0, an older device, a refused product: linear_loss_half.cuh). */
#include <type_traits>

#include "kernels/cuda/linear_loss_half.cuh"

namespace tf_cuda {
namespace {

struct HalfHead {
  tf_linear_loss_geometry g;
  tf_cuda_linear_loss_half_layout at;
  const void *labels;
  bool wide;
  int64_t ignore;
  char *space;
  long long *count;
  cudaStream_t stream;
  cublasHandle_t handle;
  tf_dtype math;
};

float *floats_at(const HalfHead &h, int64_t offset) { return (float *)(h.space + offset); }
double *doubles_at(const HalfHead &h, int64_t offset) { return (double *)(h.space + offset); }

/* logits[r, c] += bias[c] over rows x n (the span's bias), after the product as the unfused add. */
template <typename T> __global__ void add_span_bias(float *logits, const T *bias, int64_t rows, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, rows * n) { logits[i] += to_f32(bias[i % n]); }
}

struct Span {
  int64_t first, rows;    /* the chunk's rows */
  int64_t first_class, n; /* the span's classes: the logits' row stride */
};

/* A block per row of the chunk: its statistics (max, sum of exp(logit - max), label logit: stats[3 row])
 * updated by this span's logits, as kernels/cpu/linear_loss_half.c's row_statistics. */
__global__ void span_statistics(const float *logits, Span s, const void *labels, bool wide, int64_t classes,
                                int64_t ignore, double *stats) {
  __shared__ XentScratch scratch;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const float *l = logits + r * s.n;
    double *row = stats + 3 * (s.first + r);
    float best = xent_block_max(l, s.n, &scratch);
    const float old = s.first_class == 0 ? best : (float)row[0];
    best = old > best ? old : best;
    const double total = xent_block_exp_sum(l, s.n, best, &scratch);
    if (threadIdx.x == 0) {
      row[1] = s.first_class == 0 ? total : row[1] * exp((double)old - (double)best) + total;
      row[0] = best;
      const int64_t label = xent_label_at(labels, wide, s.first + r, classes, ignore);
      if (label >= s.first_class && label < s.first_class + s.n)
        row[2] = l[label - s.first_class];
    }
  }
}

/* A block per row: the span's logits, in place, become exp(logit - lse) scale, less scale at the
 * label (scale = dloss / count); 0 on a row whose label does not count. */
__global__ void span_gradient(float *logits, Span s, const void *labels, bool wide, int64_t classes, int64_t ignore,
                              const double *stats, const float *dloss, const long long *count) {
  const float scale = *count > 0 ? (float)((double)dloss[0] / (double)*count) : 0.0f;
  for (int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    float *d = logits + r * s.n;
    const int64_t label = xent_label_at(labels, wide, s.first + r, classes, ignore);
    if (label < 0) {
      for (int64_t c = threadIdx.x; c < s.n; c += blockDim.x)
        d[c] = 0.0f;
      continue;
    }
    const double *row = stats + 3 * (s.first + r);
    const float lse = (float)(row[0] + log(row[1]));
    for (int64_t c = threadIdx.x; c < s.n; c += blockDim.x)
      d[c] = expf(d[c] - lse) * scale;
    const int64_t at = label - s.first_class;
    if (at >= 0 && at < s.n && threadIdx.x == at % blockDim.x) /* the thread that wrote it */
      d[at] -= scale;
  }
}

/* sums[c] (+)= the chunk's dlogits[., c] in double, rows in order (the first chunk overwrites). */
__global__ void span_dbias(const float *dlogits, Span s, bool first_chunk, double *sums) {
  TF_CUDA_GRID_STRIDE(c, s.n) {
    double sum = first_chunk ? 0.0 : sums[c];
    for (int64_t r = 0; r < s.rows; r++)
      sum += (double)dlogits[r * s.n + c];
    sums[c] = sum;
  }
}

/* Row-major C [m, n] = op(A) op(B) (+ beta C), on the head's handle and math. */
tf_status gemm(const HalfHead &h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  return row_major_gemm(h.handle, h.math, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

/* The head's half operands, typed. */
template <typename T> struct Operands {
  const T *x, *weight, *bias; /* bias: nullptr without one */
  T *dx, *dweight, *dbias;    /* nullptr: not computed */
};

template <typename T> class Pass {
public:
  Pass(const HalfHead &h, const Operands<T> &o) : h_(h), o_(o) {}

  /* The weight's classes [first_class, first_class + n) widened into the span: n rows of d ([V, d])
   * or d rows of n ([d, V]). */
  tf_status widen_weight_span(int64_t first_class, int64_t n) const {
    const tf_linear_loss_geometry &g = h_.g;
    float *w = floats_at(h_, h_.at.parts.weight_span);
    if (g.transpose_weight)
      widen_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(o_.weight + first_class * g.features,
                                                                          g.features, w, g.features, n, g.features);
    else
      widen_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(o_.weight + first_class, g.classes, w, n,
                                                                          g.features, n);
    return launch_status();
  }

  /* The chunk's rows of x widened, then its logits of the span (+ the bias). */
  tf_status span_logits(const Span &s) const {
    const tf_linear_loss_geometry &g = h_.g;
    float *x = floats_at(h_, h_.at.parts.x_chunk), *logits = floats_at(h_, h_.at.parts.logits);
    const int64_t n_x = s.rows * g.features;
    widen_block<<<blocks_for(n_x), kThreads, 0, h_.stream>>>(o_.x + s.first * g.features, n_x, x, n_x, 1, n_x);
    TF_RETURN_IF_ERROR(launch_status());
    TF_RETURN_IF_ERROR(gemm(h_, false, g.transpose_weight, s.rows, s.n, g.features, x, g.features,
                            floats_at(h_, h_.at.parts.weight_span), g.transpose_weight ? g.features : s.n, 0.0f, logits,
                            s.n));
    if (!o_.bias)
      return NULL;
    add_span_bias<<<blocks_for(s.rows * s.n), kThreads, 0, h_.stream>>>(logits, o_.bias + s.first_class, s.rows, s.n);
    return launch_status();
  }

  /* dx_sum[first ..] (+)= dlogits · span; dweight_span (+)= dlogitsᵀ x_chunk ([n, d]) or x_chunkᵀ
   * dlogits ([d, n]); dbias sums. */
  tf_status span_products(const Span &s) const {
    const tf_linear_loss_geometry &g = h_.g;
    const float *d = floats_at(h_, h_.at.parts.logits), *w = floats_at(h_, h_.at.parts.weight_span);
    const float *x = floats_at(h_, h_.at.parts.x_chunk);
    float *dx = floats_at(h_, h_.at.parts.dx_sum) + s.first * g.features;
    float *dw = floats_at(h_, h_.at.parts.dweight_span);
    TF_RETURN_IF_ERROR(gemm(h_, false, !g.transpose_weight, s.rows, g.features, s.n, d, s.n, w,
                            g.transpose_weight ? g.features : s.n, s.first_class == 0 ? 0.0f : 1.0f, dx, g.features));
    const float beta = s.first == 0 ? 0.0f : 1.0f;
    if (g.transpose_weight)
      TF_RETURN_IF_ERROR(gemm(h_, true, false, s.n, g.features, s.rows, d, s.n, x, g.features, beta, dw, g.features));
    else
      TF_RETURN_IF_ERROR(gemm(h_, true, false, g.features, s.n, s.rows, x, g.features, d, s.n, beta, dw, s.n));
    if (!o_.dbias)
      return NULL;
    span_dbias<<<blocks_for(s.n), kThreads, 0, h_.stream>>>(d, s, s.first == 0, doubles_at(h_, h_.at.parts.dbias_span));
    return launch_status();
  }

  /* dweight's (and dbias's) classes [first_class, first_class + n) rounded from the span's sums. */
  tf_status store_span(int64_t first_class, int64_t n) const {
    const tf_linear_loss_geometry &g = h_.g;
    const float *dw = floats_at(h_, h_.at.parts.dweight_span);
    if (g.transpose_weight)
      narrow_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(
          dw, g.features, o_.dweight + first_class * g.features, g.features, n, g.features, h_.count);
    else
      narrow_block<<<blocks_for(n * g.features), kThreads, 0, h_.stream>>>(dw, n, o_.dweight + first_class, g.classes,
                                                                           g.features, n, h_.count);
    TF_RETURN_IF_ERROR(launch_status());
    if (!o_.dbias)
      return NULL;
    narrow_sums<<<blocks_for(n), kThreads, 0, h_.stream>>>(doubles_at(h_, h_.at.parts.dbias_span),
                                                           o_.dbias + first_class, n, h_.count);
    return launch_status();
  }

  /* Pass 1 (gradients false: the statistics) or pass 2 (dlogits scaled by dloss / count). */
  tf_status run(bool gradients, const float *dloss) const {
    const tf_linear_loss_geometry &g = h_.g;
    double *stats = doubles_at(h_, h_.at.parts.statistics);
    float *logits = floats_at(h_, h_.at.parts.logits);
    for (int64_t first_class = 0; first_class < g.classes; first_class += TF_LINEAR_LOSS_HALF_SPAN) {
      const int64_t n =
          g.classes - first_class < TF_LINEAR_LOSS_HALF_SPAN ? g.classes - first_class : TF_LINEAR_LOSS_HALF_SPAN;
      TF_RETURN_IF_ERROR(widen_weight_span(first_class, n));
      for (int64_t first = 0; first < g.rows; first += g.chunk_rows) {
        const Span s = {first, g.rows - first < g.chunk_rows ? g.rows - first : g.chunk_rows, first_class, n};
        TF_RETURN_IF_ERROR(span_logits(s));
        if (!gradients) {
          span_statistics<<<row_blocks(s.rows), kThreads, 0, h_.stream>>>(logits, s, h_.labels, h_.wide, g.classes,
                                                                          h_.ignore, stats);
          TF_RETURN_IF_ERROR(launch_status());
          continue;
        }
        span_gradient<<<row_blocks(s.rows), kThreads, 0, h_.stream>>>(logits, s, h_.labels, h_.wide, g.classes,
                                                                      h_.ignore, stats, dloss, h_.count);
        TF_RETURN_IF_ERROR(launch_status());
        TF_RETURN_IF_ERROR(span_products(s));
      }
      if (gradients)
        TF_RETURN_IF_ERROR(store_span(first_class, n));
    }
    if (!gradients)
      return NULL;
    const int64_t n_x = g.rows * g.features;
    narrow_block<<<blocks_for(n_x), kThreads, 0, h_.stream>>>(floats_at(h_, h_.at.parts.dx_sum), n_x, o_.dx, n_x, 1,
                                                              n_x, h_.count);
    return launch_status();
  }

private:
  const HalfHead &h_;
  Operands<T> o_;
};

HalfHead half_head_of(const tf_cuda_args *args) {
  HalfHead h;
  h.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]);
  h.at = tf_cuda_linear_loss_half_layout_of(&h.g, args->op != TF_OP_LINEAR_CROSS_ENTROPY,
                                            tf_linear_loss_bias_input(args->op, args->n_inputs) >= 0);
  h.labels = args->inputs[2].data;
  h.wide = args->inputs[2].dtype == TF_I64;
  h.ignore = args->attrs->u.cross_entropy.ignore_index;
  h.space = (char *)args->workspace;
  h.count = (long long *)(h.space + h.at.count);
  h.stream = stream_of(args);
  h.handle = (cublasHandle_t)args->cublas;
  h.math = args->math;
  return h;
}

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

/* No rows or no classes: the loss and every gradient 0 (no label counts). */
tf_status nothing_to_sum(const tf_cuda_args *args, cudaStream_t stream) {
  for (int32_t k = 0; k < args->n_outputs; k++)
    TF_RETURN_IF_ERROR(zero(&args->outputs[k], stream));
  return NULL;
}

template <typename T> tf_status half_head(const tf_cuda_args *args) {
  const HalfHead h = half_head_of(args);
  if (h.g.rows == 0 || h.g.classes == 0)
    return nothing_to_sum(args, h.stream);
  bool handled = false;
  tf_status tensor = tensor_half_head(args, &handled);
  if (handled || tensor)
    return tensor;
  const Pass<T> pass(h, operands_of<T>(args));
  TF_RETURN_IF_ERROR(cublas_workspace(h.handle, h.space + h.at.cublas, TF_CUDA_CUBLAS_WORKSPACE));
  xent_count_labels<<<1, kThreads, 0, h.stream>>>(h.labels, h.wide, h.g.rows, h.g.classes, h.ignore, h.count);
  TF_RETURN_IF_ERROR(launch_status());
  TF_RETURN_IF_ERROR(pass.run(false, nullptr));
  const bool forward = args->op == TF_OP_LINEAR_CROSS_ENTROPY;
  if (forward || tf_linear_loss_is_train(args->op)) {
    half_loss<<<1, kThreads, 0, h.stream>>>(doubles_at(h, h.at.parts.statistics), h.labels, h.wide, h.g.rows,
                                            h.g.classes, h.ignore, h.count, (float *)args->outputs[0].data);
    TF_RETURN_IF_ERROR(launch_status());
  }
  return forward ? NULL : pass.run(true, (const float *)args->inputs[3].data);
}

} // namespace

bool linear_loss_on_half(const tf_cuda_args *args) { return is_half_dtype(args->inputs[0].dtype); }

tf_status check_linear_loss_half(const tf_cuda_args *args) {
  const tf_dtype half = args->inputs[0].dtype;
  if (tf_linear_loss_accumulates(args->op))
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda %s kernel: x is %s, and this form adds into half accumulators, which would round its "
                         "sums; compile the plan for the cuda target (which runs it between casts)",
                         tf_op_name(args->op), tf_dtype_name(half));
  const int32_t bias = tf_linear_loss_bias_input(args->op, args->n_inputs);
  const bool forward = args->op == TF_OP_LINEAR_CROSS_ENTROPY, train = tf_linear_loss_is_train(args->op);
  for (int32_t k = 0; k < args->n_inputs; k++) {
    const tf_dtype want = k == 2 ? args->inputs[2].dtype : k == 3 && !forward && bias != 3 ? TF_F32 : half;
    if (args->inputs[k].dtype != want)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "cuda %s kernel: input %d is %s beside %s x; the half head takes x, the weight and the bias "
                           "in one half type, f32 dloss",
                           tf_op_name(args->op), (int)k, tf_dtype_name(args->inputs[k].dtype), tf_dtype_name(half));
  }
  for (int32_t k = 0; k < args->n_outputs; k++) {
    const tf_dtype want = (forward || train) && k == 0 ? TF_F32 : half;
    if (args->outputs[k].dtype != want)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "cuda %s kernel: output %d is %s beside %s x; the half head writes an f32 loss and its "
                           "gradients in x's type",
                           tf_op_name(args->op), (int)k, tf_dtype_name(args->outputs[k].dtype), tf_dtype_name(half));
  }
  return NULL;
}

tf_status launch_linear_cross_entropy_half(const tf_cuda_args *args) {
  return with_storage(args->inputs[0].dtype, [&](auto tag) -> tf_status {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value)
      return tf_status_new(TF_ERR_INTERNAL, "cuda %s kernel: the half head on f32 x", tf_op_name(args->op));
    else
      return half_head<T>(args);
  });
}

} // namespace tf_cuda
