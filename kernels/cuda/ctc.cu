/* The CTC loss and its gradient (ctc_loss, ctc_loss_grad) on f32 logits, as kernels/cpu/loss_ctc.c
 * (the reference: what is clamped, skipped and how impossible alignments count is said there), in
 * the workspace core/ctc.h lays out. Kernels, in order: each frame's log-sum-exp (a thread per
 * frame); log alpha, and for the gradient log beta (a block per sequence, threads over the 2S + 1
 * extended positions, one __syncthreads per frame); then the loss (one thread sums the sequences in
 * order, in double: deterministic) or the gradient (a thread per logit). */
#include "core/ctc.h"
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct CtcView {
  const float *logits;
  const void *labels;
  const void *lengths; /* nullptr: T frames each */
  bool wide_labels, wide_lengths;
  int64_t batch, frames, classes, label_length, extended, blank;
  float *work;
};

__device__ inline int64_t integer_at(const void *data, bool wide, int64_t i) {
  return wide ? ((const long long *)data)[i] : (int64_t)((const int *)data)[i];
}

__device__ inline int64_t target_length(const CtcView &v, int64_t n) {
  int64_t s = 0;
  while (s < v.label_length && integer_at(v.labels, v.wide_labels, n * v.label_length + s) >= 0)
    s++;
  return s;
}

__device__ inline int64_t input_length(const CtcView &v, int64_t n) {
  if (!v.lengths)
    return v.frames;
  const int64_t length = integer_at(v.lengths, v.wide_lengths, n);
  return length < 0 ? 0 : length > v.frames ? v.frames : length;
}

/* The class at extended position s (blank at even s), or -1 for a label >= C. */
__device__ inline int64_t extended_class(const CtcView &v, int64_t n, int64_t s) {
  if (s % 2 == 0)
    return v.blank;
  const int64_t label = integer_at(v.labels, v.wide_labels, n * v.label_length + (s - 1) / 2);
  return label < v.classes ? label : -1;
}

__device__ inline float log_add(float a, float b) {
  if (a == -INFINITY)
    return b;
  if (b == -INFINITY)
    return a;
  const float high = fmaxf(a, b), low = fminf(a, b);
  return high + log1pf(expf(low - high));
}

__device__ inline bool may_skip(const CtcView &v, int64_t n, int64_t s, int64_t c) {
  return s >= 2 && s % 2 == 1 && c != extended_class(v, n, s - 2);
}

__device__ inline tf_ctc_geometry geometry_of(const CtcView &v) {
  tf_ctc_geometry g;
  g.batch = v.batch;
  g.frames = v.frames;
  g.classes = v.classes;
  g.label_length = v.label_length;
  g.extended = v.extended;
  return g;
}

__device__ inline float emission(const CtcView &v, int64_t n, int64_t t, int64_t c) {
  if (c < 0)
    return -INFINITY;
  const tf_ctc_geometry g = geometry_of(v);
  return v.logits[(n * v.frames + t) * v.classes + c] - v.work[tf_ctc_lse_offset(&g, n) + t];
}

/* Each frame's log-sum-exp over its classes: a thread per (n, t). */
__global__ void ctc_frames(CtcView v) {
  const tf_ctc_geometry g = geometry_of(v);
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < v.batch * v.frames;
       row += (int64_t)gridDim.x * blockDim.x) {
    const float *x = v.logits + row * v.classes;
    float high = x[0];
    for (int64_t c = 1; c < v.classes; c++)
      high = fmaxf(high, x[c]);
    double sum = 0;
    for (int64_t c = 0; c < v.classes; c++)
      sum += (double)expf(x[c] - high);
    const int64_t n = row / v.frames, t = row % v.frames;
    v.work[tf_ctc_lse_offset(&g, n) + t] = high + (float)log(sum);
  }
}

/* Log alpha of sequence blockIdx.x and its loss (0 for an infinite one under zero_infinity). */
__global__ void ctc_alpha(CtcView v, bool zero_infinity) {
  const tf_ctc_geometry g = geometry_of(v);
  const int64_t n = blockIdx.x, frames = input_length(v, n), used = 2 * target_length(v, n) + 1;
  float *alpha = v.work + tf_ctc_alpha_offset(&g, n);
  if (frames > 0) {
    for (int64_t s = threadIdx.x; s < used; s += blockDim.x)
      alpha[s] = s < 2 ? emission(v, n, 0, extended_class(v, n, s)) : -INFINITY;
    __syncthreads();
    for (int64_t t = 1; t < frames; t++) {
      const float *previous = alpha + (t - 1) * v.extended;
      for (int64_t s = threadIdx.x; s < used; s += blockDim.x) {
        const int64_t c = extended_class(v, n, s);
        float sum = previous[s];
        if (s >= 1)
          sum = log_add(sum, previous[s - 1]);
        if (may_skip(v, n, s, c))
          sum = log_add(sum, previous[s - 2]);
        alpha[t * v.extended + s] = sum == -INFINITY ? -INFINITY : sum + emission(v, n, t, c);
      }
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    float loss;
    if (frames == 0) {
      loss = used == 1 ? 0.0f : INFINITY;
    } else {
      const float *last = alpha + (frames - 1) * v.extended;
      loss = -(used > 1 ? log_add(last[used - 1], last[used - 2]) : last[0]);
    }
    v.work[tf_ctc_loss_offset(&g, n)] = zero_infinity && isinf(loss) ? 0.0f : loss;
  }
}

/* Log beta of sequence blockIdx.x. */
__global__ void ctc_beta(CtcView v) {
  const tf_ctc_geometry g = geometry_of(v);
  const int64_t n = blockIdx.x, frames = input_length(v, n), used = 2 * target_length(v, n) + 1;
  if (frames == 0)
    return;
  float *beta = v.work + tf_ctc_beta_offset(&g, n);
  for (int64_t s = threadIdx.x; s < used; s += blockDim.x)
    beta[(frames - 1) * v.extended + s] =
        s >= used - 2 ? emission(v, n, frames - 1, extended_class(v, n, s)) : -INFINITY;
  __syncthreads();
  for (int64_t t = frames - 2; t >= 0; t--) {
    const float *next = beta + (t + 1) * v.extended;
    for (int64_t s = threadIdx.x; s < used; s += blockDim.x) {
      float sum = next[s];
      if (s + 1 < used)
        sum = log_add(sum, next[s + 1]);
      if (s + 2 < used && may_skip(v, n, s + 2, extended_class(v, n, s + 2)))
        sum = log_add(sum, next[s + 2]);
      beta[t * v.extended + s] = sum == -INFINITY ? -INFINITY : sum + emission(v, n, t, extended_class(v, n, s));
    }
    __syncthreads();
  }
}

/* The mean over the batch of each loss / its target length, in sequence order. */
__global__ void ctc_finish(CtcView v, float *out) {
  const tf_ctc_geometry g = geometry_of(v);
  double total = 0;
  for (int64_t n = 0; n < v.batch; n++) {
    const int64_t length = target_length(v, n);
    total += (double)v.work[tf_ctc_loss_offset(&g, n)] / (double)(length > 1 ? length : 1);
  }
  *out = v.batch > 0 ? (float)(total / (double)v.batch) : 0.0f;
}

/* dlogits, a thread per element (kernels/cpu/loss_ctc.c's gradient_sequence). */
__global__ void ctc_grad(CtcView v, bool zero_infinity, const float *dloss, float *dx) {
  const tf_ctc_geometry g = geometry_of(v);
  const int64_t total = v.batch * v.frames * v.classes;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % v.classes, t = (i / v.classes) % v.frames, n = i / (v.classes * v.frames);
    const float loss = v.work[tf_ctc_loss_offset(&g, n)];
    if (t >= input_length(v, n) || (zero_infinity && isinf(loss))) {
      dx[i] = 0.0f;
      continue;
    }
    const int64_t length = target_length(v, n), used = 2 * length + 1;
    const float *alpha = v.work + tf_ctc_alpha_offset(&g, n) + t * v.extended;
    const float *beta = v.work + tf_ctc_beta_offset(&g, n) + t * v.extended;
    float both = -INFINITY;
    for (int64_t s = 0; s < used; s++)
      if (extended_class(v, n, s) == c)
        both = log_add(both, alpha[s] + beta[s]);
    const float log_y = v.logits[i] - v.work[tf_ctc_lse_offset(&g, n) + t];
    const float scale = (float)((double)*dloss / (double)v.batch / (double)(length > 1 ? length : 1));
    dx[i] = (expf(log_y) - expf(both + loss - log_y)) * scale;
  }
}

CtcView view_of(const tf_cuda_args *args, int32_t lengths_input) {
  const tf_cuda_tensor *logits = &args->inputs[0], *labels = &args->inputs[1];
  const tf_ctc_geometry g = tf_ctc_geometry_of(logits, labels);
  const bool lengths = args->n_inputs > lengths_input;
  CtcView v;
  v.logits = (const float *)logits->data;
  v.labels = labels->data;
  v.lengths = lengths ? args->inputs[lengths_input].data : nullptr;
  v.wide_labels = labels->dtype == TF_I64;
  v.wide_lengths = lengths && args->inputs[lengths_input].dtype == TF_I64;
  v.batch = g.batch;
  v.frames = g.frames;
  v.classes = g.classes;
  v.label_length = g.label_length;
  v.extended = g.extended;
  v.blank = args->attrs->u.ctc.blank;
  v.work = (float *)args->workspace;
  return v;
}

/* The workspace the plan gives against core/ctc.h's formula (a plan from another build). */
tf_status check_workspace(const tf_cuda_args *args) {
  const tf_ctc_geometry g = tf_ctc_geometry_of(&args->inputs[0], &args->inputs[1]);
  const int64_t needed = 4 * tf_ctc_workspace_elements(&g);
  if (args->workspace_bytes >= needed && (needed == 0 || args->workspace))
    return NULL;
  return tf_status_new(TF_ERR_BACKEND, "cuda %s kernel: needs %lld workspace bytes, the step gives %lld",
                       tf_op_name(args->op), (long long)needed, (long long)args->workspace_bytes);
}

} // namespace

TF_CUDA_LAUNCHER(ctc) {
  const bool gradient = args->op == TF_OP_CTC_LOSS_GRAD;
  TF_RETURN_IF_ERROR(check_workspace(args));
  const CtcView v = view_of(args, gradient ? 3 : 2);
  const bool zero_infinity = args->attrs->u.ctc.zero_infinity;
  cudaStream_t stream = stream_of(args);
  if (v.batch == 0) {
    if (gradient)
      return NULL; /* no logits */
    return call_status(cudaMemsetAsync(args->outputs[0].data, 0, sizeof(float), stream), "cudaMemsetAsync (ctc loss)");
  }
  if (v.frames > 0 && v.classes > 0) {
    ctc_frames<<<blocks_for(v.batch * v.frames), kThreads, 0, stream>>>(v);
    TF_RETURN_IF_ERROR(launch_status());
  }
  /* the gradient reads the losses before zero_infinity, as the CPU kernel does */
  ctc_alpha<<<(unsigned)v.batch, kThreads, 0, stream>>>(v, zero_infinity && !gradient);
  TF_RETURN_IF_ERROR(launch_status());
  if (!gradient) {
    ctc_finish<<<1, 1, 0, stream>>>(v, (float *)args->outputs[0].data);
    return launch_status();
  }
  ctc_beta<<<(unsigned)v.batch, kThreads, 0, stream>>>(v);
  TF_RETURN_IF_ERROR(launch_status());
  const int64_t total = v.batch * v.frames * v.classes;
  if (total == 0)
    return NULL;
  ctc_grad<<<blocks_for(total), kThreads, 0, stream>>>(v, zero_infinity, (const float *)args->inputs[2].data,
                                                       (float *)args->outputs[0].data);
  return launch_status();
}

} // namespace tf_cuda
