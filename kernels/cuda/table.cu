/* Dispatch from op to launcher, and the checks every launcher shares (dtypes). */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

typedef tf_status (*launcher)(const tf_cuda_args *args);

/* Ops that move bytes of any dtype (or only set them): no compute type. */
bool moves_bytes(tf_op op) {
  switch (op) {
  case TF_OP_RESHAPE:
  case TF_OP_TRANSPOSE:
  case TF_OP_CONCAT:
  case TF_OP_SLICE:
  case TF_OP_SLICE_GRAD:
  case TF_OP_EXPAND:
  case TF_OP_CAST:
  case TF_OP_ZERO: return true;
  default: return false;
  }
}

bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

launcher launcher_of(tf_op op) {
  switch (op) {
  case TF_OP_MATMUL: return launch_matmul;
  case TF_OP_ADD: return launch_binary;
  case TF_OP_SUB: return launch_binary;
  case TF_OP_MUL: return launch_binary;
  case TF_OP_DIV: return launch_binary;
  case TF_OP_NEG: return launch_unary;
  case TF_OP_EXP: return launch_unary;
  case TF_OP_LOG: return launch_unary;
  case TF_OP_SQRT: return launch_unary;
  case TF_OP_RSQRT: return launch_unary;
  case TF_OP_RELU: return launch_unary;
  case TF_OP_GELU: return launch_unary;
  case TF_OP_SILU: return launch_unary;
  case TF_OP_SIGMOID: return launch_unary;
  case TF_OP_TANH: return launch_unary;
  case TF_OP_SUM: return launch_reduce;
  case TF_OP_MEAN: return launch_reduce;
  case TF_OP_MAX: return launch_reduce;
  case TF_OP_SOFTMAX: return launch_softmax;
  case TF_OP_LOG_SOFTMAX: return launch_softmax;
  case TF_OP_LAYER_NORM: return launch_norm;
  case TF_OP_RMS_NORM: return launch_norm;
  case TF_OP_EMBEDDING: return launch_embedding;
  case TF_OP_RESHAPE: return launch_layout;
  case TF_OP_TRANSPOSE: return launch_layout;
  case TF_OP_CONCAT: return launch_layout;
  case TF_OP_SLICE: return launch_layout;
  case TF_OP_EXPAND: return launch_layout;
  case TF_OP_CONV1D: return launch_conv;
  case TF_OP_CONV2D: return launch_conv;
  case TF_OP_CONV_TRANSPOSE2D: return launch_conv;
  case TF_OP_MAX_POOL2D: return launch_pool;
  case TF_OP_AVG_POOL2D: return launch_pool;
  case TF_OP_DROPOUT: return launch_dropout;
  case TF_OP_ATTENTION: return launch_attention;
  case TF_OP_CAST: return launch_cast;
  case TF_OP_CROSS_ENTROPY: return launch_loss;
  case TF_OP_MSE: return launch_loss;
  case TF_OP_BCE_WITH_LOGITS: return launch_loss;
  case TF_OP_RELU_GRAD: return launch_activation_grad;
  case TF_OP_GELU_GRAD: return launch_activation_grad;
  case TF_OP_SILU_GRAD: return launch_activation_grad;
  case TF_OP_SIGMOID_GRAD: return launch_activation_grad;
  case TF_OP_TANH_GRAD: return launch_activation_grad;
  case TF_OP_SUM_TO: return launch_reduce;
  case TF_OP_MAX_GRAD: return launch_max_grad;
  case TF_OP_SOFTMAX_GRAD: return launch_softmax;
  case TF_OP_LOG_SOFTMAX_GRAD: return launch_softmax;
  case TF_OP_LAYER_NORM_GRAD: return launch_norm_grad;
  case TF_OP_RMS_NORM_GRAD: return launch_norm_grad;
  case TF_OP_EMBEDDING_GRAD: return launch_embedding_grad;
  case TF_OP_SLICE_GRAD: return launch_layout;
  case TF_OP_CONV1D_GRAD_INPUT: return launch_conv;
  case TF_OP_CONV1D_GRAD_WEIGHT: return launch_conv;
  case TF_OP_CONV2D_GRAD_INPUT: return launch_conv;
  case TF_OP_CONV2D_GRAD_WEIGHT: return launch_conv;
  case TF_OP_MAX_POOL2D_GRAD: return launch_pool;
  case TF_OP_AVG_POOL2D_GRAD: return launch_pool;
  case TF_OP_ATTENTION_GRAD: return launch_attention_grad;
  case TF_OP_CROSS_ENTROPY_GRAD: return launch_loss_grad;
  case TF_OP_MSE_GRAD: return launch_loss_grad;
  case TF_OP_BCE_WITH_LOGITS_GRAD: return launch_loss_grad;
  case TF_OP_ACCUMULATE: return launch_optimizer;
  case TF_OP_ZERO: return launch_optimizer;
  case TF_OP_GLOBAL_NORM_SQ: return launch_global_norm_sq;
  case TF_OP_SGD: return launch_optimizer;
  case TF_OP_ADAMW: return launch_optimizer;
  default: return NULL;
  }
}

tf_status check_dtypes(const tf_cuda_args *args) {
  if (moves_bytes(args->op))
    return NULL;
  for (int32_t i = 0; i < args->n_inputs; i++)
    if (is_floating(args->inputs[i].dtype) && args->inputs[i].dtype != TF_F32)
      return tf_status_new(
          TF_ERR_UNSUPPORTED, "cuda %s kernel: input %d is %s; the CUDA kernels compute in f32 (only cast reads %s)",
          tf_op_name(args->op), (int)i, tf_dtype_name(args->inputs[i].dtype), tf_dtype_name(args->inputs[i].dtype));
  for (int32_t i = 0; i < args->n_outputs; i++)
    if (is_floating(args->outputs[i].dtype) && args->outputs[i].dtype != TF_F32)
      return tf_status_new(
          TF_ERR_UNSUPPORTED, "cuda %s kernel: output %d is %s; the CUDA kernels compute in f32 (only cast writes %s)",
          tf_op_name(args->op), (int)i, tf_dtype_name(args->outputs[i].dtype), tf_dtype_name(args->outputs[i].dtype));
  if (args->op == TF_OP_MAX && args->inputs[0].dtype != TF_F32 && args->inputs[0].dtype != TF_I32 &&
      args->inputs[0].dtype != TF_I64 && args->inputs[0].dtype != TF_U8)
    return tf_status_new(TF_ERR_UNSUPPORTED, "cuda max kernel: its input is %s; max reads f32, i32, i64 or u8",
                         tf_dtype_name(args->inputs[0].dtype));
  return NULL;
}

tf_status no_kernel(tf_op op) {
  return tf_status_new(TF_ERR_UNSUPPORTED, "no CUDA kernel for op %d (%s)", (int)op, tf_op_name(op));
}

} // namespace
} // namespace tf_cuda

extern "C" bool tf_cuda_kernel_exists(tf_op op) {
  return (int)op >= 0 && op < TF_OP_COUNT && tf_cuda::launcher_of(op) != NULL;
}

extern "C" tf_status tf_cuda_kernel_check(const tf_cuda_args *args) {
  if (!tf_cuda_kernel_exists(args->op))
    return tf_cuda::no_kernel(args->op);
  TF_RETURN_IF_ERROR(tf_cuda::check_dtypes(args));
  switch (args->op) {
  case TF_OP_ATTENTION:
  case TF_OP_ATTENTION_GRAD: return tf_cuda::check_attention(args);
  case TF_OP_MATMUL: return tf_cuda::check_matmul(args);
  case TF_OP_CONV1D:
  case TF_OP_CONV2D:
  case TF_OP_CONV_TRANSPOSE2D:
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV1D_GRAD_WEIGHT:
  case TF_OP_CONV2D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_WEIGHT: return tf_cuda::check_conv(args);
  default: return NULL;
  }
}

extern "C" tf_status tf_cuda_kernel_launch(const tf_cuda_args *args) {
  if (!tf_cuda_kernel_exists(args->op))
    return tf_cuda::no_kernel(args->op);
  return tf_status_prefix(tf_cuda::launcher_of(args->op)(args), "cuda %s kernel", tf_op_name(args->op));
}
