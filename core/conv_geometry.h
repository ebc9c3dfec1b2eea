/* Every convolution op seen as one convolution from an "image" to a "response" with a weight
 * [response_channels, image_channels / groups, kernel_height, kernel_width]:
 *   conv1d/conv2d and their grad ops: image = x, response = y (dy);
 *   conv_transpose2d: image = its output y, response = its input x (it is conv2d's grad_input).
 * conv1d is a conv2d of height 1 (kernel 1, stride 1, padding 0, dilation 1 on that axis).
 * The CPU and CUDA workspace formulas (core/workspace_cpu.h, core/workspace_cuda.h) and kernels
 * share this geometry; each adds its own blocking. Plain C, also valid C++. */
#ifndef TIGHTFIT_CORE_CONV_GEOMETRY_H
#define TIGHTFIT_CORE_CONV_GEOMETRY_H

#include <stdbool.h>
#include <string.h>

#include "core/tensor.h"

typedef struct tf_conv_geometry {
  int64_t batch;
  int64_t image_channels, image_height, image_width;
  int64_t response_channels, response_height, response_width;
  int64_t kernel_height, kernel_width;
  int64_t stride[2], padding[2], dilation[2]; /* [height, width] */
  int64_t groups;
  int64_t column_rows; /* image_channels / groups x kernel_height x kernel_width: one filter's length */
  int64_t positions;   /* response_height x response_width */
  bool direct;         /* 1x1 kernel, stride 1, no padding, same size: the image is its own column matrix */
  /* Blocking, set by each target's formula: */
  int64_t chunk;        /* CPU: response positions per column block (the last block may be shorter) */
  int64_t chunks;       /* CPU: ceil(positions / chunk); 0 when positions is 0 */
  int64_t chunk_images; /* CUDA: images lowered into one column block */
  bool half;            /* CUDA: f16/bf16 data (the half kernel's layout and blocking) */
} tf_conv_geometry;

/* Fills *g (blocking zeroed) for conv op `op` (conv1d, conv2d, conv_transpose2d and the conv grad
 * ops) from its operands, which the plan verifier has checked; false for any other op. */
static inline bool tf_conv_geometry_fill(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *inputs,
                                         const tf_tensor_ref *outputs, tf_conv_geometry *g) {
  const tf_tensor_ref *image, *response, *weight;
  switch (op) {
  case TF_OP_CONV1D:
  case TF_OP_CONV2D: image = &inputs[0], response = &outputs[0], weight = &inputs[1]; break;
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_INPUT: image = &inputs[2], response = &inputs[0], weight = &inputs[1]; break;
  case TF_OP_CONV1D_GRAD_WEIGHT:
  case TF_OP_CONV2D_GRAD_WEIGHT: image = &inputs[0], response = &inputs[1], weight = &inputs[2]; break;
  case TF_OP_CONV_TRANSPOSE2D: image = &outputs[0], response = &inputs[0], weight = &inputs[1]; break;
  default: return false;
  }
  const tf_conv_attrs *a = &attrs->u.conv;
  memset(g, 0, sizeof(*g));
  g->batch = image->shape[0];
  g->image_channels = image->shape[1];
  g->response_channels = response->shape[1];
  g->groups = a->groups > 0 ? a->groups : 1;
  if (image->rank == 3) {
    g->image_height = g->response_height = g->kernel_height = 1;
    g->image_width = image->shape[2];
    g->response_width = response->shape[2];
    g->kernel_width = weight->shape[2];
    g->stride[0] = g->dilation[0] = 1;
    g->stride[1] = a->stride[0], g->padding[1] = a->padding[0], g->dilation[1] = a->dilation[0];
  } else {
    g->image_height = image->shape[2], g->image_width = image->shape[3];
    g->response_height = response->shape[2], g->response_width = response->shape[3];
    g->kernel_height = weight->shape[2], g->kernel_width = weight->shape[3];
    for (int i = 0; i < 2; i++)
      g->stride[i] = a->stride[i], g->padding[i] = a->padding[i], g->dilation[i] = a->dilation[i];
  }
  g->column_rows = weight->shape[1] * g->kernel_height * g->kernel_width;
  g->positions = g->response_height * g->response_width;
  g->direct = g->kernel_height == 1 && g->kernel_width == 1 && g->stride[0] == 1 && g->stride[1] == 1 &&
              g->padding[0] == 0 && g->padding[1] == 0 && g->image_height == g->response_height &&
              g->image_width == g->response_width;
  return true;
}

#endif
