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

const char *check_dtypes(const tf_cuda_args *args) {
  if (moves_bytes(args->op))
    return NULL;
  for (int32_t i = 0; i < args->n_inputs; i++)
    if (is_floating(args->inputs[i].dtype) && args->inputs[i].dtype != TF_F32)
      return "the CUDA kernels compute in f32 (an operand is f16 or bf16; only cast reads those)";
  for (int32_t i = 0; i < args->n_outputs; i++)
    if (is_floating(args->outputs[i].dtype) && args->outputs[i].dtype != TF_F32)
      return "the CUDA kernels compute in f32 (an output is f16 or bf16; only cast writes those)";
  if (args->op == TF_OP_MAX && args->inputs[0].dtype != TF_F32 && args->inputs[0].dtype != TF_I32 &&
      args->inputs[0].dtype != TF_I64 && args->inputs[0].dtype != TF_U8)
    return "max reads f32, i32, i64 or u8";
  return NULL;
}

} // namespace
} // namespace tf_cuda

extern "C" bool tf_cuda_kernel_exists(tf_op op) {
  return (int)op >= 0 && op < TF_OP_COUNT && tf_cuda::launcher_of(op) != NULL;
}

extern "C" const char *tf_cuda_kernel_check(const tf_cuda_args *args) {
  if (!tf_cuda_kernel_exists(args->op))
    return "no CUDA kernel for this op";
  TF_CUDA_TRY(tf_cuda::check_dtypes(args));
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

extern "C" const char *tf_cuda_kernel_launch(const tf_cuda_args *args) {
  if (!tf_cuda_kernel_exists(args->op))
    return "no CUDA kernel for this op";
  return tf_cuda::launcher_of(args->op)(args);
}
