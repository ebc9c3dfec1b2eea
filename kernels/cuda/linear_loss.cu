/* The fused loss head, as kernels/cpu/linear_loss.c: linear_cross_entropy(x, weight, labels [, bias])
 * and its gradient (dx, dweight [, dbias]), chunk_rows rows of logits at a time in the workspace
 * (core/workspace_cuda.h's tf_cuda_linear_loss_layout, rows a padded ld apart), so the [rows, V]
 * logits never exist. The products are cuBLAS gemms (pedantic f32, as matmul.cu); a block reduces
 * each row. The loss is each row's term in double, summed in a fixed order by one block:
 * deterministic, no atomics. */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/xent_row.cuh"

namespace tf_cuda {
namespace {

struct Head {
  tf_linear_loss_geometry g;
  const float *x, *weight;
  const float *bias; /* [classes], or nullptr */
  const void *labels;
  bool wide;
  int64_t ignore;
  float *logits;
  int64_t ld; /* floats from one row of logits to the next (the layout's padded stride) */
  double *row_losses;
  long long *count;
  void *cublas_space;
  cudaStream_t stream;
  cublasHandle_t handle;
  tf_dtype math; /* matmul_math */
};

Head head_of(const tf_cuda_args *args) {
  Head h;
  h.g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]);
  const tf_cuda_linear_loss_layout layout = tf_cuda_linear_loss_layout_of(&h.g);
  char *space = (char *)args->workspace;
  h.x = (const float *)args->inputs[0].data;
  h.weight = (const float *)args->inputs[1].data;
  const int32_t bias = tf_linear_loss_bias_input(args->op, args->n_inputs);
  h.bias = bias >= 0 ? (const float *)args->inputs[bias].data : nullptr;
  h.labels = args->inputs[2].data;
  h.wide = args->inputs[2].dtype == TF_I64;
  h.ignore = args->attrs->u.cross_entropy.ignore_index;
  h.logits = (float *)(space + layout.logits);
  /* TIGHTFIT_CUDA_HEAD_PAD=0: rows `classes` apart, unpadded (what the padding gains, measured) */
  const char *pad = getenv("TIGHTFIT_CUDA_HEAD_PAD");
  h.ld = pad && strcmp(pad, "0") == 0 ? h.g.classes : layout.ld;
  h.row_losses = (double *)(space + layout.row_losses);
  h.count = (long long *)(space + layout.count);
  h.cublas_space = space + layout.cublas;
  h.stream = stream_of(args);
  h.handle = (cublasHandle_t)args->cublas;
  h.math = args->math;
  return h;
}

/* logits[r, c] += bias[c] over rows x classes (rows ld apart), after the product (as the unfused add). */
__global__ void add_bias(float *logits, int64_t ld, const float *bias, int64_t rows, int64_t classes) {
  const int64_t n = rows * classes, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    logits[i / classes * ld + i % classes] += bias[i % classes];
}

/* dbias[c] (+)= the sum of dlogits[., c] over the chunk's rows, in double, rows in order: one thread
 * a class, deterministic; the first chunk overwrites. */
__global__ void chunk_dbias(const float *dlogits, int64_t ld, int64_t rows, int64_t classes, bool first_chunk,
                            float *dbias) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < classes; c += stride) {
    double sum = first_chunk ? 0.0 : (double)dbias[c];
    for (int64_t r = 0; r < rows; r++)
      sum += (double)dlogits[r * ld + c];
    dbias[c] = (float)sum;
  }
}

/* row_losses[first + r] = -log softmax(logits[r])[label] (0 where the label does not count); a block per row. */
__global__ void chunk_losses(const float *logits, int64_t ld, const void *labels, bool wide, int64_t first,
                             int64_t rows, int64_t classes, int64_t ignore, double *row_losses) {
  __shared__ XentScratch scratch;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t label = xent_label_at(labels, wide, first + r, classes, ignore);
    const double loss = label < 0 ? 0.0 : xent_block_loss(logits + r * ld, classes, label, &scratch);
    if (threadIdx.x == 0)
      row_losses[first + r] = loss;
  }
}

__global__ void finish(const double *row_losses, int64_t rows, const long long *count, float *loss) {
  __shared__ double scratch[kThreads / 32];
  double sum = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    sum += row_losses[i];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0)
    *loss = *count > 0 ? (float)(sum / (double)*count) : 0.0f;
}

/* In place: logits[r] becomes (softmax - onehot(label)) dloss / count, 0 where the label does not
 * count; a block per row. */
__global__ void chunk_gradient(float *logits, int64_t ld, const void *labels, bool wide, int64_t first, int64_t rows,
                               int64_t classes, int64_t ignore, const float *dloss, const long long *count) {
  __shared__ XentScratch scratch;
  const float scale = *count > 0 ? (float)((double)dloss[0] / (double)*count) : 0.0f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float *d = logits + r * ld;
    xent_block_gradient(d, d, classes, xent_label_at(labels, wide, first + r, classes, ignore), scale, &scratch);
  }
}

/* Row-major C [m, n] = op(A) op(B) (+ beta C), on the head's handle and math. */
tf_status gemm(const Head &h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  return row_major_gemm(h.handle, h.math, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

int64_t weight_stride(const tf_linear_loss_geometry &g) { return g.transpose_weight ? g.features : g.classes; }

/* logits[0 .. rows) = x[first ..] weightᵀ (or x weight) (+ bias). */
tf_status chunk_logits(const Head &h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry &g = h.g;
  TF_RETURN_IF_ERROR(gemm(h, false, g.transpose_weight, rows, g.classes, g.features, h.x + first * g.features,
                          g.features, h.weight, weight_stride(g), 0.0f, h.logits, h.ld));
  if (!h.bias)
    return NULL;
  add_bias<<<blocks_for(rows * g.classes), kThreads, 0, h.stream>>>(h.logits, h.ld, h.bias, rows, g.classes);
  return launch_status();
}

tf_status count(const Head &h) {
  xent_count_labels<<<1, kThreads, 0, h.stream>>>(h.labels, h.wide, h.g.rows, h.g.classes, h.ignore, h.count);
  return launch_status();
}

} // namespace

tf_status check_linear_loss(const tf_cuda_args *args) {
  const tf_linear_loss_geometry g = tf_linear_loss_geometry_of(args->attrs, &args->inputs[0], &args->inputs[1]);
  const IntDimension dimensions[] = {
      {.name = "chunk rows", .value = g.chunk_rows},
      {.name = "classes", .value = g.classes},
      {.name = "features", .value = g.features},
  };
  return check_int_dimensions(args, dimensions, (int)(sizeof(dimensions) / sizeof(dimensions[0])));
}

TF_CUDA_LAUNCHER(linear_cross_entropy) {
  if (linear_loss_on_half(args))
    return launch_linear_cross_entropy_half(args);
  const Head h = head_of(args);
  float *loss = (float *)args->outputs[0].data;
  TF_RETURN_IF_ERROR(cublas_workspace(h.handle, h.cublas_space, TF_CUDA_CUBLAS_WORKSPACE));
  TF_RETURN_IF_ERROR(count(h));
  for (int64_t first = 0; first < h.g.rows; first += h.g.chunk_rows) {
    const int64_t rows = h.g.rows - first < h.g.chunk_rows ? h.g.rows - first : h.g.chunk_rows;
    TF_RETURN_IF_ERROR(chunk_logits(h, first, rows));
    chunk_losses<<<row_blocks(rows), kThreads, 0, h.stream>>>(h.logits, h.ld, h.labels, h.wide, first, rows,
                                                              h.g.classes, h.ignore, h.row_losses);
    TF_RETURN_IF_ERROR(launch_status());
  }
  finish<<<1, kThreads, 0, h.stream>>>(h.row_losses, h.g.rows, h.count, loss);
  return launch_status();
}

namespace {

/* The gradient pass over every chunk (dbias nullptr: no bias). With `loss` (the single-pass form)
 * each chunk's row losses are taken from its logits before they turn into their gradient, as the
 * forward launcher takes them, so the loss and the gradients are those of the two-step form. */
tf_status gradient_pass(const Head &h, const float *dloss, float *loss, float *dx, float *dweight, float *dbias,
                        bool accumulate) {
  const tf_linear_loss_geometry &g = h.g;
  TF_RETURN_IF_ERROR(cublas_workspace(h.handle, h.cublas_space, TF_CUDA_CUBLAS_WORKSPACE));
  TF_RETURN_IF_ERROR(count(h));
  for (int64_t first = 0; first < g.rows; first += g.chunk_rows) {
    const int64_t rows = g.rows - first < g.chunk_rows ? g.rows - first : g.chunk_rows;
    const float *x = h.x + first * g.features;
    TF_RETURN_IF_ERROR(chunk_logits(h, first, rows));
    if (loss) {
      chunk_losses<<<row_blocks(rows), kThreads, 0, h.stream>>>(h.logits, h.ld, h.labels, h.wide, first, rows,
                                                                g.classes, h.ignore, h.row_losses);
      TF_RETURN_IF_ERROR(launch_status());
    }
    chunk_gradient<<<row_blocks(rows), kThreads, 0, h.stream>>>(h.logits, h.ld, h.labels, h.wide, first, rows,
                                                                g.classes, h.ignore, dloss, h.count);
    TF_RETURN_IF_ERROR(launch_status());
    /* dx rows = dlogits weight ([V, d]) or dlogits weightᵀ ([d, V]) */
    TF_RETURN_IF_ERROR(gemm(h, false, !g.transpose_weight, rows, g.features, g.classes, h.logits, h.ld, h.weight,
                            weight_stride(g), 0.0f, dx + first * g.features, g.features));
    const float beta = first == 0 && !accumulate ? 0.0f : 1.0f;
    if (g.transpose_weight) /* dweight [V, d] (+)= dlogitsᵀ x */
      TF_RETURN_IF_ERROR(
          gemm(h, true, false, g.classes, g.features, rows, h.logits, h.ld, x, g.features, beta, dweight, g.features));
    else /* dweight [d, V] (+)= xᵀ dlogits */
      TF_RETURN_IF_ERROR(
          gemm(h, true, false, g.features, g.classes, rows, x, g.features, h.logits, h.ld, beta, dweight, g.classes));
    if (dbias) {
      chunk_dbias<<<blocks_for(g.classes), kThreads, 0, h.stream>>>(h.logits, h.ld, rows, g.classes,
                                                                    first == 0 && !accumulate, dbias);
      TF_RETURN_IF_ERROR(launch_status());
    }
  }
  if (loss) {
    finish<<<1, kThreads, 0, h.stream>>>(h.row_losses, g.rows, h.count, loss);
    TF_RETURN_IF_ERROR(launch_status());
  }
  return NULL;
}

/* Steps over no rows: dweight and dbias are 0 (dx has no elements), and so is the loss. */
tf_status empty_pass(const Head &h, const tf_cuda_args *args, int32_t dx_output, float *loss) {
  if (loss)
    TF_RETURN_IF_ERROR(zero(&args->outputs[0], h.stream));
  if (h.bias)
    TF_RETURN_IF_ERROR(zero(&args->outputs[dx_output + 2], h.stream));
  return zero(&args->outputs[dx_output + 1], h.stream);
}

} // namespace

/* linear_cross_entropy_grad and _bias_grad, and their _accumulate forms, which add dweight (and
 * dbias) into the accumulators they take as inputs (nothing to add over no rows). */
TF_CUDA_LAUNCHER(linear_cross_entropy_grad) {
  if (linear_loss_on_half(args))
    return launch_linear_cross_entropy_half(args);
  const Head h = head_of(args);
  const float *dloss = (const float *)args->inputs[3].data;
  if (tf_linear_loss_accumulates(args->op)) {
    if (h.g.rows == 0)
      return NULL;
    const int32_t sum = tf_linear_loss_dweight_input(args->op, args->n_inputs);
    return gradient_pass(h, dloss, nullptr, (float *)args->outputs[0].data, (float *)args->inputs[sum].data,
                         h.bias ? (float *)args->inputs[sum + 1].data : nullptr, true);
  }
  if (h.g.rows == 0)
    return empty_pass(h, args, 0, nullptr);
  return gradient_pass(h, dloss, nullptr, (float *)args->outputs[0].data, (float *)args->outputs[1].data,
                       h.bias ? (float *)args->outputs[2].data : nullptr, false);
}

/* linear_cross_entropy_train and _bias_train: (loss, dx, dweight [, dbias]) in one pass. */
TF_CUDA_LAUNCHER(linear_cross_entropy_train) {
  if (linear_loss_on_half(args))
    return launch_linear_cross_entropy_half(args);
  const Head h = head_of(args);
  float *loss = (float *)args->outputs[0].data;
  if (h.g.rows == 0)
    return empty_pass(h, args, 1, loss);
  return gradient_pass(h, (const float *)args->inputs[3].data, loss, (float *)args->outputs[1].data,
                       (float *)args->outputs[2].data, h.bias ? (float *)args->outputs[3].data : nullptr, false);
}

} // namespace tf_cuda
