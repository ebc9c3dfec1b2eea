/* 3-d convolution (nn.Conv3d: video networks, volumetric U-Nets) as one 2-d convolution over depth
 * slices, the way im2col unrolls a kernel, here along the depth axis only.
 *
 * x [N, C, D, H, W] padded in depth, w [O, C/g, kd, kh, kw], depth stride sd and dilation dd, Do
 * output planes. Depth tap k reads the planes k dd, k dd + sd, ...: a strided slice x_k [N, C, Do, H, W].
 * The kd slices are stacked beside the channels, group by group, into [N Do, g kd C/g, H, W], and
 * the weight is laid out to match, [O, kd C/g, kh, kw]; one conv2d (groups g) then sums every tap:
 *
 *   y[n, o, d] = sum_k sum_c w[o, c, k] * x[n, c, d sd + k dd]   (each term a 2-d convolution)
 *
 * and its [N Do, O, Ho, Wo] output goes back to [N, O, Do, Ho, Wo]. The stacked copy is kd times
 * the input's planes; the weight stays the parameter it was (its gradient flows back through the
 * transpose and reshape). The depth axis must have a fixed size; the batch may be a symbol. */
#include <inttypes.h>

#include "import/onnx_converters.h"

#define SIZE_LIMIT (INT64_C(1) << 40) /* an axis folded from two (batch and depth, channels and depth) */

/* a times b as one axis's size, or an error naming what they are when it would pass 2^40. */
static tf_status folded(ox_import *im, const ox_node *node, int64_t a, int64_t b, const char *what, int64_t *out) {
  if (a < 1 || b < 1 || a > SIZE_LIMIT / b)
    return ox_fail(im, node, TF_ERR_SHAPE, "%s (%" PRId64 " x %" PRId64 ") is not a size tightfit takes (2^40 at most)",
                   what, a, b);
  *out = a * b;
  return NULL;
}

/* The attributes of the height and width: a 2-d convolution's. */
static tf_conv_attrs plane_attrs(const ox_conv3d_attrs *a) {
  tf_conv_attrs c = {.groups = a->groups};
  for (int32_t i = 0; i < 2; i++) {
    c.stride[i] = a->stride[1 + i];
    c.padding[i] = a->padding[1 + i];
    c.dilation[i] = a->dilation[1 + i];
    c.output_padding[i] = a->output_padding[1 + i];
  }
  return c;
}

/* x_k for every tap k, each [N, g, 1, C/g, Do, H, W], concatenated on axis 2. */
static tf_tensor_id depth_taps(tf_graph *g, tf_tensor_id x, const tf_dim *xd, int64_t groups, int64_t taps,
                               int64_t planes, int32_t stride, int32_t dilation) {
  tf_tensor_id slices[64];
  const tf_dim per_group = tf_fixed(xd[1].size / groups);
  for (int64_t k = 0; k < taps; k++) {
    const int64_t start = k * dilation;
    tf_tensor_id s = tf_slice(g, x, 2, start, start + (planes - 1) * stride + 1, stride);
    slices[k] =
        tf_reshape(g, s, TF_SHAPE(xd[0], tf_fixed(groups), tf_fixed(1), per_group, tf_fixed(planes), xd[3], xd[4]));
  }
  return taps == 1 ? slices[0] : tf_concat(g, slices, (int32_t)taps, 2);
}

tf_status ox_conv3d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                    const ox_conv3d_attrs *a) {
  const int32_t *stride = a->stride, *padding = a->padding, *dilation = a->dilation, groups = a->groups;
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK];
  int32_t xr, wr;
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  if (xr != 5)
    return ox_fail(im, node, TF_ERR_SHAPE, "a 3-d Conv reads [N, C, D, H, W]; its input has rank %" PRId32, xr);
  if (xd[2].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a 3-d Conv's depth (axis 2) must have a fixed size");
  if (groups < 1 || xd[1].symbol >= 0 || xd[1].size % groups != 0 || wd[0].size % groups != 0 ||
      wd[1].size * groups != xd[1].size)
    return ox_fail(im, node, TF_ERR_SHAPE,
                   "group %" PRId32 " does not split the input's %" PRId64 " channels and the weight's [%" PRId64
                   ", %" PRId64 ", ...]",
                   groups, xd[1].size, wd[0].size, wd[1].size);
  const int64_t taps = wd[2].size, reach = (taps - 1) * dilation[0] + 1;
  const int64_t depth = xd[2].size + 2 * (int64_t)padding[0];
  if (taps < 1 || taps > 64 || depth < reach)
    return ox_fail(im, node, TF_ERR_SHAPE,
                   "a depth kernel of %" PRId64 " (1 to 64, dilated %" PRId32 ") over %" PRId64 " padded planes", taps,
                   dilation[0], depth);
  const int64_t planes = (depth - reach) / stride[0] + 1;
  tf_graph *g = im->graph;
  if (padding[0] > 0)
    x = ox_pad_axis(im, node, x, 2, padding[0], padding[0], 0.0);
  /* [N, g, kd, C/g, Do, H, W] -> [N, Do, g, kd, C/g, H, W] -> [N Do, g kd C/g, H, W] */
  tf_tensor_id stacked = depth_taps(g, x, xd, groups, taps, planes, stride[0], dilation[0]);
  stacked = tf_transpose(g, stacked, (const int32_t[]){0, 4, 1, 2, 3, 5, 6}, 7);
  tf_dim rows = xd[0];
  TF_RETURN_IF_ERROR(folded(im, node, xd[0].size, planes, "the batch times the output planes", &rows.size));
  stacked = tf_reshape(g, stacked, TF_SHAPE(rows, tf_fixed(taps * xd[1].size), xd[3], xd[4]));
  /* [O, C/g, kd, kh, kw] -> [O, kd, C/g, kh, kw] -> [O, kd C/g, kh, kw] */
  tf_tensor_id w2 = tf_transpose(g, w, (const int32_t[]){0, 2, 1, 3, 4}, 5);
  w2 = tf_reshape(g, w2, TF_SHAPE(wd[0], tf_fixed(taps * wd[1].size), wd[3], wd[4]));
  tf_conv_attrs c = plane_attrs(a);
  tf_tensor_id y = tf_conv2d(g, stacked, w2, TF_NO_TENSOR, &c);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  tf_dim yd[TF_MAX_RANK];
  int32_t yr;
  ox_tensor_dims(im, y, &yr, yd);
  /* [N Do, O, Ho, Wo] -> [N, Do, O, Ho, Wo] -> [N, O, Do, Ho, Wo] */
  y = tf_reshape(g, y, TF_SHAPE(xd[0], tf_fixed(planes), wd[0], yd[2], yd[3]));
  y = tf_transpose(g, y, (const int32_t[]){0, 2, 1, 3, 4}, 5);
  if (bias != TF_NO_TENSOR)
    y = tf_add(g, y, tf_reshape(g, bias, TF_SHAPE(wd[0], tf_fixed(1), tf_fixed(1), tf_fixed(1))));
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  return ox_set_tensor(im, node, 0, y);
}

/* A 3-d ConvTranspose: every depth tap in one conv_transpose2d over the input's planes, the weight
 * [C, O/g, kd, kh, kw] laid out as [C, kd O/g, kh, kw] (the taps beside each group's outputs), so
 * plane d gives tap k's contribution to output plane d sd + k dd - pd. Each tap's [N, D, O, Ho, Wo]
 * is spread to every sd-th plane (zeros between), shifted by k dd, and the taps summed; then the
 * padding is cropped. Where sd = kd and dd = 1 (a U-Net's 2 x 2 x 2 upsampling) each output plane has
 * one tap and the taps interleave by a reshape. */
static tf_tensor_id spread_tap(ox_import *im, const ox_node *node, tf_tensor_id tap, const tf_dim *td, int64_t planes,
                               int32_t stride, int64_t before, int64_t after) {
  tf_graph *g = im->graph;
  if (stride > 1) { /* [N, D, 1, O, ...] + zeros -> [N, D sd, O, ...], the last sd - 1 cut */
    tap = tf_reshape(g, tap, TF_SHAPE(td[0], td[1], tf_fixed(1), td[2], td[3], td[4]));
    tap = ox_pad_axis(im, node, tap, 2, 0, stride - 1, 0.0);
    tap = tf_reshape(g, tap, TF_SHAPE(td[0], tf_fixed(planes * stride), td[2], td[3], td[4]));
    tap = tf_slice(g, tap, 1, 0, (planes - 1) * stride + 1, 1);
  }
  return before || after ? ox_pad_axis(im, node, tap, 1, before, after, 0.0) : tap;
}

tf_status ox_conv_transpose3d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                              const ox_conv3d_attrs *a) {
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t xr, wr, yr;
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  if (xr != 5)
    return ox_fail(im, node, TF_ERR_SHAPE, "a 3-d ConvTranspose reads [N, C, D, H, W]; its input has rank %" PRId32,
                   xr);
  if (xd[2].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a 3-d ConvTranspose's depth (axis 2) must have a fixed size");
  const int32_t groups = a->groups;
  if (groups < 1 || xd[1].symbol >= 0 || xd[1].size % groups != 0 || wd[0].size != xd[1].size)
    return ox_fail(im, node, TF_ERR_SHAPE,
                   "group %" PRId32 " does not split the input's %" PRId64 " channels and the weight's [%" PRId64
                   ", ...]",
                   groups, xd[1].size, wd[0].size);
  const int64_t taps = wd[2].size, planes = xd[2].size, per_group = wd[1].size, outputs = per_group * groups;
  const int64_t full = (planes - 1) * a->stride[0] + (taps - 1) * a->dilation[0] + 1 + a->output_padding[0];
  if (taps < 1 || taps > 64 || full - 2 * (int64_t)a->padding[0] < 1)
    return ox_fail(im, node, TF_ERR_SHAPE, "a depth kernel of %" PRId64 " (1 to 64) leaves %" PRId64 " planes", taps,
                   full - 2 * (int64_t)a->padding[0]);
  tf_graph *g = im->graph;
  tf_dim rows = xd[0];
  TF_RETURN_IF_ERROR(folded(im, node, xd[0].size, planes, "the batch times the input planes", &rows.size));
  /* [N, C, D, H, W] -> [N, D, C, H, W] -> [N D, C, H, W] */
  tf_tensor_id x2 = tf_transpose(g, x, (const int32_t[]){0, 2, 1, 3, 4}, 5);
  x2 = tf_reshape(g, x2, TF_SHAPE(rows, xd[1], xd[3], xd[4]));
  /* [C, O/g, kd, kh, kw] -> [C, kd, O/g, kh, kw] -> [C, kd O/g, kh, kw] */
  tf_tensor_id w2 = tf_transpose(g, w, (const int32_t[]){0, 2, 1, 3, 4}, 5);
  w2 = tf_reshape(g, w2, TF_SHAPE(wd[0], tf_fixed(taps * per_group), wd[3], wd[4]));
  tf_conv_attrs c = plane_attrs(a);
  tf_tensor_id y = tf_conv_transpose2d(g, x2, w2, TF_NO_TENSOR, &c);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  ox_tensor_dims(im, y, &yr, yd);
  /* [N D, g kd O/g, Ho, Wo] -> [N, D, g, kd, O/g, Ho, Wo] -> [N, D, kd, g, O/g, Ho, Wo] */
  y = tf_reshape(
      g, y, TF_SHAPE(xd[0], tf_fixed(planes), tf_fixed(groups), tf_fixed(taps), tf_fixed(per_group), yd[2], yd[3]));
  y = tf_transpose(g, y, (const int32_t[]){0, 1, 3, 2, 4, 5, 6}, 7);
  const tf_dim td[5] = {xd[0], tf_fixed(planes), tf_fixed(outputs), yd[2], yd[3]};
  if (a->stride[0] == taps && a->dilation[0] == 1) { /* plane d sd + k is tap k's of plane d alone */
    y = tf_reshape(g, y, TF_SHAPE(xd[0], tf_fixed(planes * taps), tf_fixed(outputs), yd[2], yd[3]));
    if (a->output_padding[0])
      y = ox_pad_axis(im, node, y, 1, 0, a->output_padding[0], 0.0);
  } else {
    tf_tensor_id sum = TF_NO_TENSOR;
    for (int64_t k = 0; k < taps; k++) {
      tf_tensor_id tap = tf_slice(g, y, 2, k, k + 1, 1);
      tap = tf_reshape(g, tap, tf_shape_from(td, 5));
      const int64_t before = k * a->dilation[0], length = (planes - 1) * a->stride[0] + 1;
      tap = spread_tap(im, node, tap, td, planes, a->stride[0], before, full - before - length);
      sum = sum == TF_NO_TENSOR ? tap : tf_add(g, sum, tap);
    }
    y = sum;
  }
  if (a->padding[0])
    y = tf_slice(g, y, 1, a->padding[0], full - a->padding[0], 1);
  y = tf_transpose(g, y, (const int32_t[]){0, 2, 1, 3, 4}, 5); /* [N, O, D', Ho, Wo] */
  if (bias != TF_NO_TENSOR)
    y = tf_add(g, y, tf_reshape(g, bias, TF_SHAPE(tf_fixed(outputs), tf_fixed(1), tf_fixed(1), tf_fixed(1))));
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  return ox_set_tensor(im, node, 0, y);
}

/* A 3-d MaxPool or AveragePool (count_include_pad, or no padding) as the 2-d pool over each plane
 * ([N, C D, H, W]), then the depth window: the kd strided slices of its planes (padded in depth with
 * copies of the edge planes for max, zeros for average) stacked on a new last axis and max- or mean-reduced. Both are
 * separable, so this is the 3-d window's maximum or mean. */
tf_status ox_pool3d(ox_import *im, const ox_node *node, tf_op op, tf_tensor_id x, const tf_pool_attrs *plane,
                    int32_t kernel, int32_t stride, int32_t padding) {
  tf_dim xd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t xr, yr;
  ox_tensor_dims(im, x, &xr, xd);
  if (xd[1].symbol >= 0 || xd[2].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a 3-d pool's channels and depth (axes 1 and 2) must have fixed sizes");
  const int64_t depth = xd[2].size + 2 * (int64_t)padding;
  if (kernel < 1 || kernel > 64 || stride < 1 || depth < kernel || 2 * padding > kernel)
    return ox_fail(im, node, TF_ERR_SHAPE,
                   "a depth window of %" PRId32 " (1 to 64), stride %" PRId32 ", padding %" PRId32 " over %" PRId64
                   " planes",
                   kernel, stride, padding, xd[2].size);
  const int64_t planes = (depth - kernel) / stride + 1;
  int64_t channel_planes = 0;
  TF_RETURN_IF_ERROR(folded(im, node, xd[1].size, xd[2].size, "the channels times the planes", &channel_planes));
  tf_graph *g = im->graph;
  tf_tensor_id y = tf_reshape(g, x, TF_SHAPE(xd[0], tf_fixed(channel_planes), xd[3], xd[4]));
  y = tf_pool2d(g, op, y, plane);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  ox_tensor_dims(im, y, &yr, yd);
  y = tf_reshape(g, y, TF_SHAPE(xd[0], xd[1], xd[2], yd[2], yd[3]));
  if (padding && op == TF_OP_MAX_POOL2D) /* the edge plane is in every window that reaches past it */
    TF_RETURN_IF_ERROR(ox_pad_copies(im, node, y, 2, padding, padding, OX_PAD_EDGE, &y));
  else if (padding)
    y = ox_pad_axis(im, node, y, 2, padding, padding, 0.0);
  tf_tensor_id taps[64];
  for (int32_t k = 0; k < kernel; k++) {
    tf_tensor_id tap = tf_slice(g, y, 2, k, k + (planes - 1) * stride + 1, stride);
    taps[k] = tf_reshape(g, tap, TF_SHAPE(xd[0], xd[1], tf_fixed(planes), yd[2], yd[3], tf_fixed(1)));
  }
  y = kernel == 1 ? taps[0] : tf_concat(g, taps, kernel, 5);
  y = tf_reduce(g, op == TF_OP_MAX_POOL2D ? TF_OP_MAX : TF_OP_MEAN, y, (const int32_t[]){5}, 1, false);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  return ox_set_tensor(im, node, 0, y);
}
