/* Gradient bookkeeping and parameter updates, as kernels/cpu/optimizer.c: accumulate, zero, sgd and
 * adamw update their inputs in place. The scalar coefficients (the gradient factor from grad_scale
 * and global-norm clipping; AdamW's bias corrections from the run's optimizer step) are computed
 * in double by one thread into the step's workspace, exactly as the CPU computes them (with the
 * run's loss scale 2^e taken out of the gradient, and the update skipped, parameter and state
 * untouched, when the norm_sq input is present and not finite); the
 * element-wise updates then use explicitly rounded f32 operations (__fmul_rn, ...) so that no
 * multiply-add is fused: the same operations in the same order as the CPU, bit for bit. */
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

/* g += wd param; buf = momentum buf + g; param -= lr buf (momentum 0: param -= lr g). */
__global__ void sgd(float *param, const float *grad, float *buffer, int64_t n, const Coefficients *c, float lr,
                    float decay, bool decays, float momentum, bool has_momentum) {
  const float factor = c->factor;
  if (c->skip)
    return;
  TF_CUDA_GRID_STRIDE(i, n) {
    float g = __fmul_rn(grad[i], factor);
    if (decays)
      g = __fadd_rn(g, __fmul_rn(decay, param[i]));
    if (has_momentum) {
      const float b = __fadd_rn(__fmul_rn(momentum, buffer[i]), g);
      buffer[i] = b;
      g = b;
    }
    param[i] = __fsub_rn(param[i], __fmul_rn(lr, g));
  }
}

/* param *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * param -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
__global__ void adamw(float *param, const float *grad, float *m, float *v, int64_t n, const Coefficients *c,
                      float decay, float b1, float b2, float one_minus_b1, float one_minus_b2, float epsilon) {
  const float factor = c->factor, step_size = c->step_size, correction2_sqrt = c->correction2_sqrt;
  if (c->skip)
    return;
  TF_CUDA_GRID_STRIDE(i, n) {
    const float g = __fmul_rn(grad[i], factor);
    const float p = __fmul_rn(param[i], decay);
    const float m_new = __fadd_rn(__fmul_rn(m[i], b1), __fmul_rn(one_minus_b1, g));
    const float v_new = __fadd_rn(__fmul_rn(v[i], b2), __fmul_rn(__fmul_rn(one_minus_b2, g), g));
    m[i] = m_new;
    v[i] = v_new;
    const float denominator = __fadd_rn(__fdiv_rn(__fsqrt_rn(v_new), correction2_sqrt), epsilon);
    param[i] = __fsub_rn(p, __fmul_rn(step_size, __fdiv_rn(m_new, denominator)));
  }
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
  if (is_adamw) {
    const double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
    adamw<<<blocks_for(n), kThreads, 0, stream>>>(
        param, grad, (float *)args->inputs[2].data, (float *)args->inputs[3].data, n, c,
        (float)(1.0 - lr * (double)a->weight_decay), (float)beta1, (float)beta2, (float)(1.0 - beta1),
        (float)(1.0 - beta2), (float)a->epsilon);
  } else {
    sgd<<<blocks_for(n), kThreads, 0, stream>>>(param, grad, (float *)args->inputs[2].data, n, c,
                                                (float)a->learning_rate, (float)a->weight_decay,
                                                a->weight_decay != 0.0f, (float)a->momentum, a->momentum != 0.0f);
  }
  return launch_status();
}

} // namespace tf_cuda
