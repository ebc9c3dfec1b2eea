/* The op table. Order follows enum tf_op; a static assertion keeps them in step. */
#include "core/ops.h"

#include <string.h>

#define ROW(name, lo, hi, attrs, rule, flags)                                                                          \
  { name, lo, hi, attrs, rule, flags, 1, 0, 0 }
/* Training-only rows: outputs, shape-only inputs and in-place inputs spelled out. */
#define GRAD(name, lo, hi, attrs, rule, outputs, shape_only, in_place)                                                 \
  { name, lo, hi, attrs, rule, 0, outputs, shape_only, in_place }
#define UNARY(name) ROW(name, 1, 1, TF_ATTR_NONE, tf_shape_unary_float, TF_OPF_ELEMENTWISE)
#define BINARY(name) ROW(name, 2, 2, TF_ATTR_NONE, tf_shape_broadcast, TF_OPF_ELEMENTWISE | TF_OPF_BROADCAST)

static const tf_op_info op_table[] = {
    ROW("matmul", 2, 2, TF_ATTR_MATMUL, tf_shape_matmul, 0),
    BINARY("add"),
    BINARY("sub"),
    BINARY("mul"),
    BINARY("div"),
    UNARY("neg"),
    UNARY("exp"),
    UNARY("log"),
    UNARY("sqrt"),
    UNARY("rsqrt"),
    UNARY("relu"),
    ROW("gelu", 1, 1, TF_ATTR_GELU, tf_shape_unary_float, TF_OPF_ELEMENTWISE),
    UNARY("silu"),
    UNARY("sigmoid"),
    UNARY("tanh"),
    ROW("sum", 1, 1, TF_ATTR_REDUCE, tf_shape_reduce, 0),
    ROW("mean", 1, 1, TF_ATTR_REDUCE, tf_shape_reduce, 0),
    ROW("max", 1, 1, TF_ATTR_REDUCE, tf_shape_reduce, 0),
    ROW("softmax", 1, 1, TF_ATTR_AXIS, tf_shape_softmax, 0),
    ROW("log_softmax", 1, 1, TF_ATTR_AXIS, tf_shape_softmax, 0),
    ROW("layer_norm", 2, 3, TF_ATTR_NORM, tf_shape_norm, 0),
    ROW("rms_norm", 2, 2, TF_ATTR_NORM, tf_shape_norm, 0),
    ROW("embedding", 2, 2, TF_ATTR_NONE, tf_shape_embedding, 0),
    ROW("reshape", 1, 1, TF_ATTR_SHAPE, tf_shape_reshape, TF_OPF_VIEW),
    ROW("transpose", 1, 1, TF_ATTR_TRANSPOSE, tf_shape_transpose, 0),
    ROW("concat", 1, TF_OP_VARIADIC, TF_ATTR_AXIS, tf_shape_concat, 0),
    ROW("slice", 1, 1, TF_ATTR_SLICE, tf_shape_slice, 0),
    ROW("expand", 1, 1, TF_ATTR_SHAPE, tf_shape_expand, 0),
    ROW("conv1d", 2, 3, TF_ATTR_CONV, tf_shape_conv, 0),
    ROW("conv2d", 2, 3, TF_ATTR_CONV, tf_shape_conv, 0),
    ROW("conv_transpose2d", 2, 3, TF_ATTR_CONV, tf_shape_conv_transpose2d, 0),
    ROW("max_pool2d", 1, 1, TF_ATTR_POOL, tf_shape_pool2d, 0),
    ROW("avg_pool2d", 1, 1, TF_ATTR_POOL, tf_shape_pool2d, 0),
    ROW("dropout", 1, 1, TF_ATTR_DROPOUT, tf_shape_dropout, TF_OPF_ELEMENTWISE | TF_OPF_RANDOM),
    ROW("attention", 3, 3, TF_ATTR_ATTENTION, tf_shape_attention, 0),
    ROW("cast", 1, 1, TF_ATTR_CAST, tf_shape_cast, TF_OPF_ELEMENTWISE),
    ROW("cross_entropy", 2, 2, TF_ATTR_CROSS_ENTROPY, tf_shape_cross_entropy, TF_OPF_LOSS),
    ROW("mse", 2, 2, TF_ATTR_NONE, tf_shape_pair_loss, TF_OPF_LOSS),
    ROW("bce_with_logits", 2, 2, TF_ATTR_NONE, tf_shape_pair_loss, TF_OPF_LOSS),
    GRAD("relu_grad", 2, 2, TF_ATTR_NONE, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("gelu_grad", 2, 2, TF_ATTR_GELU, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("silu_grad", 2, 2, TF_ATTR_NONE, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("sigmoid_grad", 2, 2, TF_ATTR_NONE, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("tanh_grad", 2, 2, TF_ATTR_NONE, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("sum_to", 2, 2, TF_ATTR_NONE, tf_shape_sum_to, 1, 0x2, 0),
    GRAD("max_grad", 3, 3, TF_ATTR_REDUCE, tf_shape_max_grad, 1, 0, 0),
    GRAD("softmax_grad", 2, 2, TF_ATTR_AXIS, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("log_softmax_grad", 2, 2, TF_ATTR_AXIS, tf_shape_elementwise_grad, 1, 0, 0),
    GRAD("layer_norm_grad", 3, 3, TF_ATTR_NORM, tf_shape_norm_grad, 3, 0, 0),
    GRAD("rms_norm_grad", 3, 3, TF_ATTR_NORM, tf_shape_norm_grad, 2, 0, 0),
    GRAD("embedding_grad", 3, 3, TF_ATTR_NONE, tf_shape_embedding_grad, 1, 0x4, 0),
    GRAD("slice_grad", 2, 2, TF_ATTR_SLICE, tf_shape_slice_grad, 1, 0x2, 0),
    GRAD("conv1d_grad_input", 3, 3, TF_ATTR_CONV, tf_shape_conv_grad, 1, 0x4, 0),
    GRAD("conv1d_grad_weight", 3, 3, TF_ATTR_CONV, tf_shape_conv_grad, 1, 0x4, 0),
    GRAD("conv2d_grad_input", 3, 3, TF_ATTR_CONV, tf_shape_conv_grad, 1, 0x4, 0),
    GRAD("conv2d_grad_weight", 3, 3, TF_ATTR_CONV, tf_shape_conv_grad, 1, 0x4, 0),
    GRAD("max_pool2d_grad", 2, 2, TF_ATTR_POOL, tf_shape_pool_grad, 1, 0, 0),
    GRAD("avg_pool2d_grad", 2, 2, TF_ATTR_POOL, tf_shape_pool_grad, 1, 0x2, 0),
    GRAD("attention_grad", 4, 4, TF_ATTR_ATTENTION, tf_shape_attention_grad, 3, 0, 0),
    GRAD("cross_entropy_grad", 3, 3, TF_ATTR_CROSS_ENTROPY, tf_shape_loss_grad, 1, 0, 0),
    GRAD("mse_grad", 3, 3, TF_ATTR_NONE, tf_shape_loss_grad, 1, 0, 0),
    GRAD("bce_with_logits_grad", 3, 3, TF_ATTR_NONE, tf_shape_loss_grad, 1, 0, 0),
    GRAD("accumulate", 2, 2, TF_ATTR_NONE, tf_shape_update, 0, 0, 0x1),
    GRAD("zero", 1, 1, TF_ATTR_NONE, tf_shape_update, 0, 0, 0x1),
    GRAD("global_norm_sq", 1, TF_OP_VARIADIC_INTERNAL, TF_ATTR_NONE, tf_shape_global_norm_sq, 1, 0, 0),
    GRAD("sgd", 3, 4, TF_ATTR_OPTIMIZER, tf_shape_update, 0, 0, 0x5),
    GRAD("adamw", 4, 5, TF_ATTR_OPTIMIZER, tf_shape_update, 0, 0, 0xd),
};

_Static_assert(sizeof(op_table) / sizeof(op_table[0]) == TF_OP_COUNT, "op_table must list every tf_op");

bool tf_op_output_may_alias(tf_op op, int32_t input) {
  switch (op) {
  case TF_OP_RESHAPE: return input == 0;
  // dlogits on the logits: the largest activation of a language model and its gradient, both
  // live at the start of the backward pass otherwise. Every kernel (kernels/cpu/loss.c,
  // kernels/cuda/loss.cu, shaders/loss.comp) reads a row's logits (max, sums) before writing the
  // row, and then each element once, just before writing its gradient.
  case TF_OP_CROSS_ENTROPY_GRAD: return input == 0;
  // Elementwise ops and activation gradients: every kernel computes output element i from input
  // element i (the aliased input has the output's shape, so it is not broadcast) in the same loop
  // iteration, invocation or thread that then writes it, reading before writing and declaring
  // nothing restrict: kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu, shaders/binary.comp
  // and shaders/unary.comp.
  case TF_OP_ADD:
  case TF_OP_SUB:
  case TF_OP_MUL:
  case TF_OP_DIV:
  case TF_OP_RELU_GRAD:
  case TF_OP_GELU_GRAD:
  case TF_OP_SILU_GRAD:
  case TF_OP_SIGMOID_GRAD:
  case TF_OP_TANH_GRAD: return input == 0 || input == 1;
  case TF_OP_NEG:
  case TF_OP_EXP:
  case TF_OP_LOG:
  case TF_OP_SQRT:
  case TF_OP_RSQRT:
  case TF_OP_RELU:
  case TF_OP_GELU:
  case TF_OP_SILU:
  case TF_OP_SIGMOID:
  case TF_OP_TANH: return input == 0;
  default: return false;
  }
}

const tf_op_info *tf_op_info_get(tf_op op) {
  if ((int)op < 0 || op >= TF_OP_COUNT)
    return NULL;
  return &op_table[op];
}

tf_op tf_op_from_name(const char *name) {
  for (int op = 0; op < TF_OP_COUNT; op++)
    if (strcmp(op_table[op].name, name) == 0)
      return (tf_op)op;
  return TF_OP_COUNT;
}

const char *tf_op_name(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info ? info->name : "?";
}

const char *tf_attr_kind_name(tf_attr_kind kind) {
  static const char *const names[TF_ATTR_COUNT] = {
      "none", "matmul", "reduce",  "axis",      "norm", "shape", "transpose",     "slice",
      "conv", "pool",   "dropout", "attention", "cast", "gelu",  "cross_entropy", "optimizer"};
  if ((int)kind < 0 || kind >= TF_ATTR_COUNT)
    return "?";
  return names[kind];
}
