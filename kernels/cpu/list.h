/* Every op's CPU kernel, as an X-macro list: X(op enum, kernel name). The kernel functions are
 * tf_cpu_<name>_f32 and tf_cpu_<name>_f64 (kernels/cpu/real.h); the declarations and the dispatch
 * table are generated from this list, so adding an op is adding its line here. */
#ifndef TIGHTFIT_KERNELS_CPU_LIST_H
#define TIGHTFIT_KERNELS_CPU_LIST_H

#include "kernels/cpu/kernels.h"

#define TF_CPU_KERNEL_LIST(X)                                                                                          \
  X(TF_OP_MATMUL, matmul)                                                                                              \
  X(TF_OP_ADD, add)                                                                                                    \
  X(TF_OP_SUB, sub)                                                                                                    \
  X(TF_OP_MUL, mul)                                                                                                    \
  X(TF_OP_DIV, div)                                                                                                    \
  X(TF_OP_NEG, neg)                                                                                                    \
  X(TF_OP_EXP, exp)                                                                                                    \
  X(TF_OP_LOG, log)                                                                                                    \
  X(TF_OP_SQRT, sqrt)                                                                                                  \
  X(TF_OP_RSQRT, rsqrt)                                                                                                \
  X(TF_OP_RELU, relu)                                                                                                  \
  X(TF_OP_GELU, gelu)                                                                                                  \
  X(TF_OP_SILU, silu)                                                                                                  \
  X(TF_OP_SIGMOID, sigmoid)                                                                                            \
  X(TF_OP_TANH, tanh)                                                                                                  \
  X(TF_OP_SUM, sum)                                                                                                    \
  X(TF_OP_MEAN, mean)                                                                                                  \
  X(TF_OP_MAX, max)                                                                                                    \
  X(TF_OP_SOFTMAX, softmax)                                                                                            \
  X(TF_OP_LOG_SOFTMAX, log_softmax)                                                                                    \
  X(TF_OP_LAYER_NORM, layer_norm)                                                                                      \
  X(TF_OP_RMS_NORM, rms_norm)                                                                                          \
  X(TF_OP_EMBEDDING, embedding)                                                                                        \
  X(TF_OP_RESHAPE, reshape)                                                                                            \
  X(TF_OP_TRANSPOSE, transpose)                                                                                        \
  X(TF_OP_CONCAT, concat)                                                                                              \
  X(TF_OP_SLICE, slice)                                                                                                \
  X(TF_OP_EXPAND, expand)                                                                                              \
  X(TF_OP_CONV1D, conv1d)                                                                                              \
  X(TF_OP_CONV2D, conv2d)                                                                                              \
  X(TF_OP_CONV_TRANSPOSE2D, conv_transpose2d)                                                                          \
  X(TF_OP_MAX_POOL2D, max_pool2d)                                                                                      \
  X(TF_OP_AVG_POOL2D, avg_pool2d)                                                                                      \
  X(TF_OP_DROPOUT, dropout)                                                                                            \
  X(TF_OP_ATTENTION, attention)                                                                                        \
  X(TF_OP_CAST, cast)                                                                                                  \
  X(TF_OP_CROSS_ENTROPY, cross_entropy)                                                                                \
  X(TF_OP_MSE, mse)                                                                                                    \
  X(TF_OP_BCE_WITH_LOGITS, bce_with_logits)                                                                            \
  X(TF_OP_RELU_GRAD, relu_grad)                                                                                        \
  X(TF_OP_GELU_GRAD, gelu_grad)                                                                                        \
  X(TF_OP_SILU_GRAD, silu_grad)                                                                                        \
  X(TF_OP_SIGMOID_GRAD, sigmoid_grad)                                                                                  \
  X(TF_OP_TANH_GRAD, tanh_grad)                                                                                        \
  X(TF_OP_SUM_TO, sum_to)                                                                                              \
  X(TF_OP_MAX_GRAD, max_grad)                                                                                          \
  X(TF_OP_SOFTMAX_GRAD, softmax_grad)                                                                                  \
  X(TF_OP_LOG_SOFTMAX_GRAD, log_softmax_grad)                                                                          \
  X(TF_OP_LAYER_NORM_GRAD, layer_norm_grad)                                                                            \
  X(TF_OP_RMS_NORM_GRAD, rms_norm_grad)                                                                                \
  X(TF_OP_EMBEDDING_GRAD, embedding_grad)                                                                              \
  X(TF_OP_SLICE_GRAD, slice_grad)                                                                                      \
  X(TF_OP_CONV1D_GRAD_INPUT, conv1d_grad_input)                                                                        \
  X(TF_OP_CONV1D_GRAD_WEIGHT, conv1d_grad_weight)                                                                      \
  X(TF_OP_CONV2D_GRAD_INPUT, conv2d_grad_input)                                                                        \
  X(TF_OP_CONV2D_GRAD_WEIGHT, conv2d_grad_weight)                                                                      \
  X(TF_OP_MAX_POOL2D_GRAD, max_pool2d_grad)                                                                            \
  X(TF_OP_AVG_POOL2D_GRAD, avg_pool2d_grad)                                                                            \
  X(TF_OP_ATTENTION_GRAD, attention_grad)                                                                              \
  X(TF_OP_CROSS_ENTROPY_GRAD, cross_entropy_grad)                                                                      \
  X(TF_OP_MSE_GRAD, mse_grad)                                                                                          \
  X(TF_OP_BCE_WITH_LOGITS_GRAD, bce_with_logits_grad)                                                                  \
  X(TF_OP_ACCUMULATE, accumulate)                                                                                      \
  X(TF_OP_ZERO, zero)                                                                                                  \
  X(TF_OP_GLOBAL_NORM_SQ, global_norm_sq)                                                                              \
  X(TF_OP_SGD, sgd)                                                                                                    \
  X(TF_OP_ADAMW, adamw)

#define TF_CPU_DECLARE(op, name)                                                                                       \
  void tf_cpu_##name##_f32(const tf_cpu_args *args);                                                                   \
  void tf_cpu_##name##_f64(const tf_cpu_args *args);
TF_CPU_KERNEL_LIST(TF_CPU_DECLARE)
#undef TF_CPU_DECLARE

#endif
