/* Dispatch from op to launcher, and the checks every launcher shares (dtypes). */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

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

launcher launcher_of(tf_op op) { return kLaunchers[op]; }

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
  case TF_OP_MATMUL:
  case TF_OP_MATMUL_ACCUMULATE: return tf_cuda::check_matmul(args);
  case TF_OP_LINEAR_CROSS_ENTROPY:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_TRAIN:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE: return tf_cuda::check_linear_loss(args);
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
