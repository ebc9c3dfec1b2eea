/* Gradient bookkeeping and parameter updates: accumulate, zero, sgd and adamw. They update their
 * inputs in place and have no outputs.
 *
 * The gradient an update uses is g = grad x grad_scale x 2^-e (1/k after k accumulated
 * micro-batches; 2^e the run's loss scale, 1 unless the plan scales the loss), then, when
 * clip_norm > 0 and the norm_sq input (global_norm_sq of the accumulated gradients) is present,
 * g x min(1, clip_norm / (sqrt(norm_sq) grad_scale 2^-e + 1e-6)): exactly
 * torch.nn.utils.clip_grad_norm_ applied to the averaged gradients. When the norm_sq input is
 * present and not finite (a gradient overflowed), the update changes nothing: parameter and
 * state stay bit for bit as they were (the skipped step of dynamic loss scaling). The updates follow
 * torch.optim.SGD and torch.optim.AdamW (PyTorch 1.13, single-tensor path) operation by
 * operation; scalar coefficients are computed in double. */
#include <string.h>

#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/update_factor.h"
#include "kernels/cpu/update_span.h"

/* CALL (a span of `length` elements from `begin`) over [0, n) in spans of TF_CPU_CHUNK elements, on
 * the kernel's threads when there is more than one span (kernels/cpu/update_span.h). */
#define FOR_EACH_SPAN(args, n, CALL)                                                                                   \
  TF_CPU_PARALLEL_FOR(                                                                                                 \
      tf_cpu_team(tf_cpu_threads(args), (n) > TF_CPU_CHUNK),                                                           \
      for (int64_t begin = 0; begin < (n); begin += TF_CPU_CHUNK) {                                                    \
        const int64_t length = (n)-begin < TF_CPU_CHUNK ? (n)-begin : TF_CPU_CHUNK;                                    \
        CALL;                                                                                                          \
      })

/* sum += x */
void TF_REAL_NAME(tf_cpu_accumulate)(const tf_cpu_args *args) {
  real *sum = args->inputs[0].data;
  const real *x = args->inputs[1].data;
  const int64_t n = args->inputs[0].count;
  FOR_EACH_SPAN(args, n, tf_cpu_accumulate_span(sum + begin, x + begin, length));
}

/* x = 0 */
void TF_REAL_NAME(tf_cpu_zero)(const tf_cpu_args *args) {
  memset(args->inputs[0].data, 0, (size_t)(args->inputs[0].count * tf_cpu_element_size(&args->inputs[0])));
}

/* (param, grad, momentum [, norm_sq]); weight decay as L2 (added to g), dampening 0, no Nesterov:
 *   g += wd param;  buf = momentum buf + g;  param -= lr buf   (momentum 0: param -= lr g)
 * buf starts at zero, which equals PyTorch's first step (buf = g). */
void TF_REAL_NAME(tf_cpu_sgd)(const tf_cpu_args *args) {
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  real *param = args->inputs[0].data, *buffer = args->inputs[2].data;
  const real *grad = args->inputs[1].data;
  const int64_t n = args->inputs[0].count;
  if (overflowed(args, 3))
    return;
  const tf_cpu_sgd_coefficients k = {.factor = (real)gradient_factor(args, 3),
                                     .lr = (real)a->learning_rate,
                                     .decay = (real)a->weight_decay,
                                     .momentum = (real)a->momentum,
                                     .decays = a->weight_decay != 0.0f,
                                     .has_momentum = a->momentum != 0.0f};
  FOR_EACH_SPAN(args, n, tf_cpu_sgd_span(param + begin, grad + begin, buffer + begin, length, &k));
}

/* (param, grad, m, v [, norm_sq]), t = the session's optimizer step (>= 1):
 *   param *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
 *   param -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
void TF_REAL_NAME(tf_cpu_adamw)(const tf_cpu_args *args) {
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  real *param = args->inputs[0].data, *m = args->inputs[2].data, *v = args->inputs[3].data;
  const real *grad = args->inputs[1].data;
  const int64_t n = args->inputs[0].count;
  if (overflowed(args, 4))
    return;
  const int64_t step = args->context && args->context->optimizer_step > 0 ? args->context->optimizer_step : 1;
  const double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
  const tf_cpu_adamw_coefficients k = {.factor = (real)gradient_factor(args, 4),
                                       .decay = (real)(1.0 - lr * (double)a->weight_decay),
                                       .b1 = (real)beta1,
                                       .one_minus_b1 = (real)(1.0 - beta1),
                                       .b2 = (real)beta2,
                                       .one_minus_b2 = (real)(1.0 - beta2),
                                       .step_size = (real)(lr / (1.0 - pow(beta1, (double)step))),
                                       .correction2_sqrt = (real)sqrt(1.0 - pow(beta2, (double)step)),
                                       .epsilon = (real)a->epsilon};
  FOR_EACH_SPAN(args, n, tf_cpu_adamw_span(param + begin, grad + begin, m + begin, v + begin, length, &k));
}
