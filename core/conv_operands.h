/* Which operands of a convolution op are the image, the response and the weight: every
 * convolution op seen as one convolution from an image to a response (core/workspace_cpu.h), the
 * same for the CPU and CUDA workspace formulas. Plain C, also valid C++. */
#ifndef TIGHTFIT_CORE_CONV_OPERANDS_H
#define TIGHTFIT_CORE_CONV_OPERANDS_H

#include <stdbool.h>

#include "core/tensor.h"

/* Sets *image, *response and *weight for conv op `op` (conv1d, conv2d, conv_transpose2d and the
 * conv grad ops); false for any other op. */
static inline bool tf_conv_operands(tf_op op, const tf_tensor_ref *inputs, const tf_tensor_ref *outputs,
                                    const tf_tensor_ref **image, const tf_tensor_ref **response,
                                    const tf_tensor_ref **weight) {
  switch (op) {
  case TF_OP_CONV1D:
  case TF_OP_CONV2D: *image = &inputs[0], *response = &outputs[0], *weight = &inputs[1]; return true;
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_INPUT: *image = &inputs[2], *response = &inputs[0], *weight = &inputs[1]; return true;
  case TF_OP_CONV1D_GRAD_WEIGHT:
  case TF_OP_CONV2D_GRAD_WEIGHT: *image = &inputs[0], *response = &inputs[1], *weight = &inputs[2]; return true;
  case TF_OP_CONV_TRANSPOSE2D: *image = &outputs[0], *response = &inputs[0], *weight = &inputs[1]; return true;
  default: return false;
  }
}

#endif
