/* Gradient bookkeeping and parameter updates, as kernels/cpu/optimizer.c: accumulate, zero, sgd and
 * adamw update their inputs in place. The scalar coefficients (the gradient factor from grad_scale
 * and global-norm clipping; AdamW's bias corrections from the run's optimizer step) are computed
 * in double by one thread into the step's workspace, exactly as the CPU computes them (with the
 * run's loss scale 2^e taken out of the gradient, and the update skipped, parameter and state
 * untouched, when the norm_sq input is present and not finite); the
 * element-wise updates then use explicitly rounded f32 operations (__fmul_rn, ...) so that no
 * multiply-add is fused: the same operations in the same order as the CPU, bit for bit. */
#include "core/ops.h"
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

struct Coefficients {
  float factor, step_size, correction2_sqrt;
  int skip; /* the norm_sq input is not finite: change nothing */
};
static_assert(sizeof(Coefficients) <= TF_CUDA_OPTIMIZER_COEFFICIENTS, "core/workspace_cuda.h plans the workspace");

/* states: tensor operands before the optional norm_sq (3 for sgd, 4 for adamw). */
__global__ void coefficients(tf_optimizer_attrs a, const float *norm_sq, const tf_cuda_run_values *run, bool adamw,
                             Coefficients *out) {
  const int loss_scale_log2 = run ? (int)run->loss_scale_log2 : 0;
  const double grad_scale = ldexp((double)a.grad_scale, -loss_scale_log2);
  double factor = grad_scale;
  if (a.clip_norm > 0.0f && norm_sq) {
    const double norm = sqrt((double)norm_sq[0]) * grad_scale;
    const double clip = (double)a.clip_norm / (norm + 1e-6);
    factor = clip < 1.0 ? grad_scale * clip : grad_scale;
  }
  Coefficients c = {(float)factor, 0.0f, 0.0f, norm_sq && !isfinite(norm_sq[0]) ? 1 : 0};
  if (adamw) {
    const int64_t step = run && run->optimizer_step > 0 ? run->optimizer_step : 1;
    const double lr = (double)a.learning_rate, beta1 = (double)a.beta1, beta2 = (double)a.beta2;
    c.step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    c.correction2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
  }
  *out = c;
}

__global__ void accumulate(float *sum, const float *x, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) { sum[i] = __fadd_rn(sum[i], x[i]); }
}

/* The element updates, shared by the one-tensor kernels and the multi-tensor kernel so that both
 * compute the same rounded operations in the same order. */
struct SgdScalars {
  float lr, decay, momentum;
  bool decays, has_momentum;
};

/* g += wd param; buf = momentum buf + g; param -= lr buf (momentum 0: param -= lr g). */
__device__ __forceinline__ void sgd_element(float *param, const float *grad, float *buffer, int64_t i, float factor,
                                            const SgdScalars &s) {
  float g = __fmul_rn(grad[i], factor);
  if (s.decays)
    g = __fadd_rn(g, __fmul_rn(s.decay, param[i]));
  if (s.has_momentum) {
    const float b = __fadd_rn(__fmul_rn(s.momentum, buffer[i]), g);
    buffer[i] = b;
    g = b;
  }
  param[i] = __fsub_rn(param[i], __fmul_rn(s.lr, g));
}

struct AdamwScalars {
  float decay, b1, b2, one_minus_b1, one_minus_b2, epsilon;
};

/* param *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * param -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
__device__ __forceinline__ void adamw_element(float *param, const float *grad, float *m, float *v, int64_t i,
                                              const Coefficients &c, const AdamwScalars &s) {
  const float g = __fmul_rn(grad[i], c.factor);
  const float p = __fmul_rn(param[i], s.decay);
  const float m_new = __fadd_rn(__fmul_rn(m[i], s.b1), __fmul_rn(s.one_minus_b1, g));
  const float v_new = __fadd_rn(__fmul_rn(v[i], s.b2), __fmul_rn(__fmul_rn(s.one_minus_b2, g), g));
  m[i] = m_new;
  v[i] = v_new;
  const float denominator = __fadd_rn(__fdiv_rn(__fsqrt_rn(v_new), c.correction2_sqrt), s.epsilon);
  param[i] = __fsub_rn(p, __fmul_rn(c.step_size, __fdiv_rn(m_new, denominator)));
}

__global__ void sgd(float *param, const float *grad, float *buffer, int64_t n, const Coefficients *c, SgdScalars s) {
  const float factor = c->factor;
  if (c->skip)
    return;
  TF_CUDA_GRID_STRIDE(i, n) { sgd_element(param, grad, buffer, i, factor, s); }
}

__global__ void adamw(float *param, const float *grad, float *m, float *v, int64_t n, const Coefficients *c,
                      AdamwScalars s) {
  const Coefficients coefficients = *c;
  if (coefficients.skip)
    return;
  TF_CUDA_GRID_STRIDE(i, n) { adamw_element(param, grad, m, v, i, coefficients, s); }
}

/* adamw8bit (kernels/cpu/optimizer8bit.c has the design): one CUDA block per quantization block of
 * TF_ADAMW8BIT_BLOCK elements, one thread per element; the block's new scales are the maxima of a
 * shared-memory reduction. The element update is adamw_element's on the dequantized moments. */
static_assert(TF_ADAMW8BIT_BLOCK == 256 && kThreads >= TF_ADAMW8BIT_BLOCK, "one thread per element of a block");
__global__ void adamw8bit(float *param, const float *grad, uint8_t *m_codes, float *m_scales, uint8_t *v_codes,
                          float *v_scales, int64_t n, const Coefficients *c, AdamwScalars s) {
  __shared__ float m_max[TF_ADAMW8BIT_BLOCK], v_max[TF_ADAMW8BIT_BLOCK];
  const Coefficients coefficients = *c;
  if (coefficients.skip)
    return;
  const int64_t b = blockIdx.x, i = b * TF_ADAMW8BIT_BLOCK + threadIdx.x;
  const bool inside = i < n;
  const float m_step = __fdiv_rn(m_scales[b], 127.0f), v_step = __fdiv_rn(v_scales[b], 255.0f);
  float m = 0.0f, v = 0.0f;
  if (inside) {
    const float r = __fmul_rn((float)v_codes[i], v_step);
    float m_old = __fmul_rn((float)(int8_t)m_codes[i], m_step), v_old = __fmul_rn(__fmul_rn(r, r), __fmul_rn(r, r));
    float p = param[i];
    adamw_element(&p, grad + i, &m_old, &v_old, 0, coefficients, s);
    param[i] = p;
    m = m_old;
    v = v_old;
  }
  m_max[threadIdx.x] = fabsf(m);
  v_max[threadIdx.x] = v;
  __syncthreads(); /* every thread has read the old scales before thread 0 writes the new */
  for (unsigned half = TF_ADAMW8BIT_BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      m_max[threadIdx.x] = fmaxf(m_max[threadIdx.x], m_max[threadIdx.x + half]);
      v_max[threadIdx.x] = fmaxf(v_max[threadIdx.x], v_max[threadIdx.x + half]);
    }
    __syncthreads();
  }
  const float m_scale = m_max[0], root_max = __fsqrt_rn(__fsqrt_rn(v_max[0]));
  if (threadIdx.x == 0) {
    m_scales[b] = m_scale;
    v_scales[b] = root_max;
  }
  if (!inside)
    return;
  const float m_inverse = m_scale > 0.0f ? __fdiv_rn(127.0f, m_scale) : 0.0f;
  const float v_inverse = root_max > 0.0f ? __fdiv_rn(255.0f, root_max) : 0.0f;
  const float q = fminf(floorf(__fadd_rn(__fmul_rn(fabsf(m), m_inverse), 0.5f)), 127.0f);
  m_codes[i] = (uint8_t)(int8_t)(m < 0.0f ? -(int)q : (int)q);
  const float code = floorf(__fadd_rn(__fmul_rn(__fsqrt_rn(__fsqrt_rn(v)), v_inverse), 0.5f));
  v_codes[i] = (uint8_t)fminf(code, 255.0f);
}

/* The multi-tensor update: one launch over a list of tensors passed by value in the kernel's
 * parameters (CUDA 12.1+ takes up to 32,764 bytes of them on sm_70 and newer; this list is about
 * 22.5 KB). Tensor t owns blocks [block_start[t], block_start[t + 1]); each block updates
 * kMultiBlockElements consecutive elements of its tensor, a thread every kThreads-th. */
constexpr int kMultiMaxTensors = 512;
constexpr int64_t kMultiBlockElements = (int64_t)kThreads * 8;

struct MultiTensorList {
  int32_t count;
  int32_t block_start[kMultiMaxTensors + 1];
  float *param[kMultiMaxTensors];
  float *grad[kMultiMaxTensors];
  float *state1[kMultiMaxTensors]; /* adamw: m; sgd: the momentum buffer */
  float *state2[kMultiMaxTensors]; /* adamw: v */
  int64_t n[kMultiMaxTensors];
};
static_assert(sizeof(MultiTensorList) + 64 <= 32764, "kernel parameters above CUDA's 32,764-byte limit");

__device__ int32_t tensor_of_block(const MultiTensorList &list, int32_t block) {
  int32_t lo = 0, hi = list.count - 1; /* the last t with block_start[t] <= block */
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (list.block_start[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void multi_update(const __grid_constant__ MultiTensorList list, const Coefficients *c, bool is_adamw,
                             AdamwScalars adamw_scalars, SgdScalars sgd_scalars, bool zero_grads) {
  const Coefficients coefficients = *c;
  const int32_t t = tensor_of_block(list, (int32_t)blockIdx.x);
  const int64_t begin = (int64_t)(blockIdx.x - (unsigned)list.block_start[t]) * kMultiBlockElements;
  const int64_t end = begin + kMultiBlockElements < list.n[t] ? begin + kMultiBlockElements : list.n[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (!coefficients.skip) {
      if (is_adamw)
        adamw_element(list.param[t], list.grad[t], list.state1[t], list.state2[t], i, coefficients, adamw_scalars);
      else
        sgd_element(list.param[t], list.grad[t], list.state1[t], i, coefficients.factor, sgd_scalars);
    }
    if (zero_grads) /* the zero step after the update: 0.0f has memset's bits */
      list.grad[t][i] = 0.0f;
  }
}

AdamwScalars adamw_scalars_of(const tf_optimizer_attrs *a) {
  const double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
  return AdamwScalars{(float)(1.0 - lr * (double)a->weight_decay),
                      (float)beta1,
                      (float)beta2,
                      (float)(1.0 - beta1),
                      (float)(1.0 - beta2),
                      (float)a->epsilon};
}

SgdScalars sgd_scalars_of(const tf_optimizer_attrs *a) {
  return SgdScalars{(float)a->learning_rate, (float)a->weight_decay, (float)a->momentum, a->weight_decay != 0.0f,
                    a->momentum != 0.0f};
}

} // namespace

TF_CUDA_LAUNCHER(optimizer) {
  cudaStream_t stream = stream_of(args);
  const int64_t n = args->inputs[0].count;
  if (args->op == TF_OP_ZERO)
    return zero(&args->inputs[0], stream);
  if (n == 0)
    return NULL;
  float *param = (float *)args->inputs[0].data;
  const float *grad = (const float *)args->inputs[1].data;
  if (args->op == TF_OP_ACCUMULATE) {
    accumulate<<<blocks_for(n), kThreads, 0, stream>>>(param, grad, n);
    return launch_status();
  }
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  const bool is_adamw = args->op == TF_OP_ADAMW;
  const int32_t states = is_adamw ? 4 : 3;
  const float *norm_sq = args->n_inputs > states ? (const float *)args->inputs[states].data : NULL;
  Coefficients *c = (Coefficients *)args->workspace;
  coefficients<<<1, 1, 0, stream>>>(*a, norm_sq, args->run, is_adamw, c);
  if (is_adamw)
    adamw<<<blocks_for(n), kThreads, 0, stream>>>(param, grad, (float *)args->inputs[2].data,
                                                  (float *)args->inputs[3].data, n, c, adamw_scalars_of(a));
  else
    sgd<<<blocks_for(n), kThreads, 0, stream>>>(param, grad, (float *)args->inputs[2].data, n, c, sgd_scalars_of(a));
  return launch_status();
}

TF_CUDA_LAUNCHER(adamw8bit) {
  cudaStream_t stream = stream_of(args);
  const int64_t n = args->inputs[0].count;
  if (n == 0)
    return NULL;
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  const float *norm_sq = args->n_inputs > 6 ? (const float *)args->inputs[6].data : NULL;
  Coefficients *c = (Coefficients *)args->workspace;
  coefficients<<<1, 1, 0, stream>>>(*a, norm_sq, args->run, true, c);
  adamw8bit<<<(unsigned)tf_adamw8bit_blocks(n), TF_ADAMW8BIT_BLOCK, 0, stream>>>(
      (float *)args->inputs[0].data, (const float *)args->inputs[1].data, (uint8_t *)args->inputs[2].data,
      (float *)args->inputs[3].data, (uint8_t *)args->inputs[4].data, (float *)args->inputs[5].data, n, c,
      adamw_scalars_of(a));
  return launch_status();
}

} // namespace tf_cuda

using namespace tf_cuda;

extern "C" tf_status tf_cuda_optimizer_launch_multi(const tf_cuda_args *const *steps, int32_t count, bool zero_grads) {
  if (count <= 0)
    return NULL;
  const tf_cuda_args *first = steps[0];
  const bool is_adamw = first->op == TF_OP_ADAMW;
  if ((first->op != TF_OP_ADAMW && first->op != TF_OP_SGD) || !first->workspace ||
      first->workspace_bytes < (int64_t)sizeof(Coefficients))
    return tf_status_new(TF_ERR_INTERNAL, "multi-tensor %s: the first step has %lld workspace bytes, needs %d",
                         tf_op_name(first->op), (long long)first->workspace_bytes, (int)sizeof(Coefficients));
  const int32_t states = is_adamw ? 4 : 3;
  for (int32_t i = 0; i < count; i++)
    if (steps[i]->op != first->op || steps[i]->n_inputs != first->n_inputs || steps[i]->n_inputs < states)
      return tf_status_new(TF_ERR_INTERNAL, "multi-tensor %s: step %d of %d is a %s with %d inputs",
                           tf_op_name(first->op), i, count, tf_op_name(steps[i]->op), steps[i]->n_inputs);
  cudaStream_t stream = stream_of(first);
  const tf_optimizer_attrs *a = &first->attrs->u.optimizer;
  const float *norm_sq = first->n_inputs > states ? (const float *)first->inputs[states].data : NULL;
  Coefficients *c = (Coefficients *)first->workspace;
  coefficients<<<1, 1, 0, stream>>>(*a, norm_sq, first->run, is_adamw, c);
  TF_RETURN_IF_ERROR(launch_status());
  static_assert(sizeof(MultiTensorList) < 32 * 1024, "the list is built on the host stack");
  MultiTensorList list;
  for (int32_t i = 0; i < count;) {
    memset(&list, 0, sizeof(list));
    int64_t blocks = 0;
    for (; i < count && list.count < kMultiMaxTensors; i++) {
      const tf_cuda_tensor *in = steps[i]->inputs;
      const int64_t n = in[0].count;
      const int64_t tensor_blocks = (n + kMultiBlockElements - 1) / kMultiBlockElements;
      if (tensor_blocks == 0)
        continue;
      if (list.count > 0 && blocks + tensor_blocks > (int64_t)INT32_MAX / 2)
        break;
      const int32_t t = list.count++;
      list.block_start[t] = (int32_t)blocks;
      list.param[t] = (float *)in[0].data;
      list.grad[t] = (float *)in[1].data;
      list.state1[t] = (float *)in[2].data;
      list.state2[t] = is_adamw ? (float *)in[3].data : NULL;
      list.n[t] = n;
      blocks += tensor_blocks;
    }
    if (list.count == 0)
      continue;
    list.block_start[list.count] = (int32_t)blocks;
    multi_update<<<(unsigned)blocks, kThreads, 0, stream>>>(list, c, is_adamw, adamw_scalars_of(a), sgd_scalars_of(a),
                                                            zero_grads);
    TF_RETURN_IF_ERROR(call_status(cudaGetLastError(), "launching the multi-tensor %s of %d tensors (%lld blocks)",
                                   tf_op_name(first->op), list.count, (long long)blocks));
  }
  return NULL;
}
