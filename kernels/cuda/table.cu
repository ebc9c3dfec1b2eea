/* Dispatch from op to launcher, and the checks every launcher shares (dtypes). */
#include "core/ops.h"
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
  case TF_OP_CAST_INTO:
  case TF_OP_ZERO: return true;
  default: return false;
  }
}

bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

launcher launcher_of(tf_op op) { return kLaunchers[op]; }

/* The fused loss head's forms without accumulators: on half x they run linear_loss_half.cu. */
bool is_half_head(tf_op op) {
  return tf_op_workspace_rule(op) == TF_WORKSPACE_LINEAR_CROSS_ENTROPY && !tf_linear_loss_accumulates(op);
}

/* Launchers instantiated for half storage (common.cuh, with_storage): their kernels load f16/bf16
 * operands to f32 and round each result once. The cuda target's half-kernel ops (targets/target.c)
 * are ops of these launchers; a plan file that puts another op on half data is refused here. */
bool takes_half(tf_op op) {
  const launcher l = launcher_of(op);
  return l == launch_binary || l == launch_unary || l == launch_activation_grad || l == launch_reduce ||
         l == launch_max_grad || l == launch_softmax || l == launch_norm || l == launch_norm_grad ||
         l == launch_embedding || (l == launch_embedding_grad && op != TF_OP_EMBEDDING_GRAD_ACCUMULATE) ||
         l == launch_attention || l == launch_attention_grad || l == launch_dropout || l == launch_pool ||
         (l == launch_matmul && op != TF_OP_MATMUL_ACCUMULATE) || is_half_head(op) || l == launch_loss ||
         l == launch_loss_grad || l == launch_conv || l == launch_batch_norm || l == launch_batch_norm_grad ||
         l == launch_batch_norm_running;
}

/* An attention gradient reading f16/bf16 q, k, v beside an f32 dy, writing f32 gradients (a
 * --precision plan reading the q, k, v it stored in half: attention.cu's storage I). */
bool attention_grad_on_half_qkv(const tf_cuda_args *args) {
  if (args->op != TF_OP_ATTENTION_GRAD || args->n_inputs != 4 || args->n_outputs != 3)
    return false;
  const tf_dtype half = args->inputs[0].dtype;
  bool mixed = is_half_dtype(half) && args->inputs[1].dtype == half && args->inputs[2].dtype == half &&
               args->inputs[3].dtype == TF_F32;
  for (int32_t k = 0; k < 3; k++)
    mixed = mixed && args->outputs[k].dtype == TF_F32;
  return mixed;
}

/* batch_norm_running on f16/bf16 x: its running statistics are f32 (batch_norm.cu). */
bool running_statistics_of_half_x(const tf_cuda_args *args) {
  return args->op == TF_OP_BATCH_NORM_RUNNING && args->n_inputs == 3 && is_half_dtype(args->inputs[0].dtype) &&
         args->inputs[1].dtype == TF_F32 && args->inputs[2].dtype == TF_F32;
}

/* A step's floating operands (those whose data it reads or writes): all f32, or (a half kernel)
 * all of one half type; the fused loss head on half x takes an f32 loss and dloss besides, and
 * attention's gradient half q, k, v beside f32. */
tf_status check_dtypes(const tf_cuda_args *args) {
  if (moves_bytes(args->op) || attention_grad_on_half_qkv(args) || running_statistics_of_half_x(args))
    return NULL;
  if (tf_op_workspace_rule(args->op) == TF_WORKSPACE_LINEAR_CROSS_ENTROPY && linear_loss_on_half(args))
    return check_linear_loss_half(args); /* half x beside an f32 loss and dloss */
  if ((launcher_of(args->op) == launch_loss || launcher_of(args->op) == launch_loss_grad) &&
      is_half_dtype(args->inputs[0].dtype))
    return check_loss_half(args); /* the same for the losses */
  tf_dtype half = TF_F32;
  int32_t floating = 0;
  for (int32_t k = 0; k < args->n_inputs + args->n_outputs; k++) {
    const bool input = k < args->n_inputs;
    const tf_dtype dtype = input ? args->inputs[k].dtype : args->outputs[k - args->n_inputs].dtype;
    if (!is_floating(dtype) || (input && tf_op_input_shape_only(args->op, k)))
      continue; /* ids, labels, masks; an operand read for its shape only (its data never is) */
    floating++;
    if (dtype == TF_F32 ? half != TF_F32 : (floating > 1 && half != dtype))
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "cuda %s kernel: %s %d is %s beside %s operands; a step's floating operands are all f32 "
                           "or all of one half type",
                           tf_op_name(args->op), input ? "input" : "output", (int)(input ? k : k - args->n_inputs),
                           tf_dtype_name(dtype), tf_dtype_name(half));
    half = dtype;
  }
  if (half != TF_F32 && !takes_half(args->op))
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda %s kernel: its operands are %s; it computes on f32 only (only the cuda target's half "
                         "kernels and cast read %s)",
                         tf_op_name(args->op), tf_dtype_name(half), tf_dtype_name(half));
  if (args->op == TF_OP_MAX && !is_floating(args->inputs[0].dtype) && args->inputs[0].dtype != TF_I32 &&
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

extern "C" bool tf_cuda_kernel_takes_half(tf_op op) { return tf_cuda_kernel_exists(op) && tf_cuda::takes_half(op); }

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
