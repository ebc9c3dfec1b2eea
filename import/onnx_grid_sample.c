/* GridSample (opset 16 and 20; F.grid_sample: a spatial transformer's warp, optical flow's backward
 * warping): x [N, C, H, W] read at the points of grid [N, Ho, Wo, 2] (x then y, in [-1, 1]), bilinearly
 * or at the nearest pixel, with zeros, the border's pixels or the reflection outside the image.
 *
 * Each point's pixel positions are computed from the grid (unnormalised as align_corners says, clamped
 * or reflected as padding_mode says), and the taps become one [N, P, H W] matrix of their weights
 * (one-hot rows by position, P = Ho Wo points) that multiplies x's [N, H W, C]: x's gradient is the
 * matmul's, the grid's the weights' (linear in the position between two pixels), and the positions
 * themselves (floor, round) get none, as PyTorch's grid_sampler backward gives them. The matrix holds
 * P H W elements: a warp of a large image at full resolution is refused past 2^28. */
#include <inttypes.h>

#include "import/onnx_converters.h"

/* The most elements of the [N, P, H W] sampling matrix per sample. */
#define GRID_SAMPLE_LIMIT ((int64_t)1 << 28)

typedef struct grid_sample {
  bool bilinear, align_corners;
  enum { PAD_ZEROS, PAD_BORDER, PAD_REFLECTION } padding;
} grid_sample;

/* The mode and padding_mode attributes (opset 16's names, and opset 20's linear). */
static tf_status read_attributes(ox_import *im, const ox_node *node, grid_sample *s) {
  const bool linear =
      ox_attr_is(node, "mode", "bilinear", "bilinear") || ox_attr_is(node, "mode", "bilinear", "linear");
  if (!linear && !ox_attr_is(node, "mode", "bilinear", "nearest"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "mode other than bilinear (linear) or nearest (bicubic: not supported)");
  s->bilinear = linear;
  if (ox_attr_is(node, "padding_mode", "zeros", "zeros"))
    s->padding = PAD_ZEROS;
  else if (ox_attr_is(node, "padding_mode", "zeros", "border"))
    s->padding = PAD_BORDER;
  else if (ox_attr_is(node, "padding_mode", "zeros", "reflection"))
    s->padding = PAD_REFLECTION;
  else
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "padding_mode other than zeros, border or reflection");
  s->align_corners = ox_attr_int(node, "align_corners", 0) != 0;
  return NULL;
}

/* t reflected into [lo, lo + span] (PyTorch's reflect_coordinates): d = |t - lo|, flips = floor(d / span), the
 * rest e = d - flips span, lo + e where flips is even and lo + span - e where odd. */
static tf_tensor_id reflected(ox_import *im, const ox_node *node, tf_tensor_id t, double lo, double span) {
  tf_graph *g = im->graph;
  if (span <= 0)
    return tf_mul(g, t, ox_scalar(im, node, TF_F32, 0.0)); /* one pixel (align_corners): always 0 */
  tf_tensor_id d = tf_unary(g, TF_OP_ABS, tf_sub(g, t, ox_scalar(im, node, TF_F32, lo)));
  tf_tensor_id flips =
      tf_unary(g, TF_OP_STOP_GRADIENT, tf_unary(g, TF_OP_FLOOR, tf_mul(g, d, ox_scalar(im, node, TF_F32, 1.0 / span))));
  tf_tensor_id rest = tf_sub(g, d, tf_mul(g, flips, ox_scalar(im, node, TF_F32, span)));
  tf_tensor_id halves = tf_unary(g, TF_OP_FLOOR, tf_mul(g, flips, ox_scalar(im, node, TF_F32, 0.5)));
  tf_tensor_id odd = tf_sub(g, flips, tf_mul(g, halves, ox_scalar(im, node, TF_F32, 2.0)));
  tf_tensor_id turned = tf_sub(g, ox_scalar(im, node, TF_F32, span), tf_mul(g, rest, ox_scalar(im, node, TF_F32, 2.0)));
  return tf_add(g, tf_add(g, rest, ox_scalar(im, node, TF_F32, lo)), tf_mul(g, odd, turned));
}

/* A grid coordinate g [N, P] (in [-1, 1]) as a pixel position along an axis of `size`, padded as asked. */
static tf_tensor_id position(ox_import *im, const ox_node *node, const grid_sample *s, tf_tensor_id coordinate,
                             int64_t size) {
  tf_graph *g = im->graph;
  const double n = (double)size;
  /* align_corners: -1 and 1 are the corner pixels' centres; else the image's edges */
  tf_tensor_id at = s->align_corners ? tf_mul(g, tf_add(g, coordinate, ox_scalar(im, node, TF_F32, 1.0)),
                                              ox_scalar(im, node, TF_F32, (n - 1) / 2))
                                     : tf_sub(g,
                                              tf_mul(g, tf_add(g, coordinate, ox_scalar(im, node, TF_F32, 1.0)),
                                                     ox_scalar(im, node, TF_F32, n / 2)),
                                              ox_scalar(im, node, TF_F32, 0.5));
  if (s->padding == PAD_REFLECTION)
    at = s->align_corners ? reflected(im, node, at, 0.0, n - 1) : reflected(im, node, at, -0.5, n);
  if (s->padding != PAD_ZEROS)
    at = tf_clip(g, at, 0.0f, (float)(n - 1));
  return at;
}

/* 1 where the whole-number position p lies in [0, size), else 0: clip(p + 1, 0, 1) clip(size - p, 0, 1). */
static tf_tensor_id inside(ox_import *im, const ox_node *node, tf_tensor_id p, int64_t size) {
  tf_graph *g = im->graph;
  return tf_mul(g, tf_clip(g, tf_add(g, p, ox_scalar(im, node, TF_F32, 1.0)), 0.0f, 1.0f),
                tf_clip(g, tf_sub(g, ox_scalar(im, node, TF_F32, (double)size), p), 0.0f, 1.0f));
}

/* One tap at pixel (px, py) (whole numbers, no gradient) of weight w [N, P] (TF_NO_TENSOR: 1): its one-hot
 * rows over the H W pixels, weighted (0 where the pixel is outside), added to *matrix. */
static tf_status add_tap(ox_import *im, const ox_node *node, tf_tensor_id px, tf_tensor_id py, tf_tensor_id w,
                         int64_t height, int64_t width, tf_tensor_id *matrix) {
  tf_graph *g = im->graph;
  tf_tensor_id weight = tf_mul(g, inside(im, node, px, width), inside(im, node, py, height));
  if (w != TF_NO_TENSOR)
    weight = tf_mul(g, w, weight);
  tf_tensor_id index = tf_add(g, tf_mul(g, py, ox_scalar(im, node, TF_F32, (double)width)), px);
  tf_tensor_id rows;
  TF_RETURN_IF_ERROR(ox_one_hot_of(im, node, index, height * width, &rows));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, weight, &rank, dims);
  dims[rank] = tf_fixed(1);
  tf_tensor_id tap = tf_mul(g, rows, tf_reshape(g, weight, tf_shape_from(dims, rank + 1)));
  *matrix = *matrix == TF_NO_TENSOR ? tap : tf_add(g, *matrix, tap);
  return ox_graph_error(im, node);
}

tf_status ox_convert_grid_sample(ox_import *im, const ox_node *node) {
  grid_sample s;
  TF_RETURN_IF_ERROR(read_attributes(im, node, &s));
  tf_tensor_id x, grid;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &grid));
  int32_t xr, gr;
  tf_dim xd[TF_MAX_RANK], gd[TF_MAX_RANK];
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, grid, &gr, gd);
  if (xr != 4 || gr != 4 || gd[3].size != 2)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "its input must be [N, C, H, W] and its grid [N, Ho, Wo, 2] (2-d sampling only); they have ranks "
                   "%" PRId32 " and %" PRId32,
                   xr, gr);
  for (int32_t i = 1; i < 4; i++)
    if (xd[i].symbol >= 0 || xd[i].size < 1 || (i < 3 && (gd[i].symbol >= 0 || gd[i].size < 1)))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its input's C, H, W and its grid's Ho, Wo must be fixed");
  const int64_t height = xd[2].size, width = xd[3].size, points = gd[1].size * gd[2].size;
  if (height * width >= OX_INDEX_EXACT_LIMIT || points > GRID_SAMPLE_LIMIT / (height * width))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a %" PRId64 " x %" PRId64 " image sampled at %" PRId64 " points (its sampling matrix holds at most "
                   "2^28 elements a sample)",
                   height, width, points);
  tf_graph *g = im->graph;
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (ox_dtype_of(im, grid) != TF_F32)
    grid = tf_cast(g, grid, TF_F32);
  tf_tensor_id flat = tf_reshape(g, grid, TF_SHAPE(gd[0], tf_fixed(points), tf_fixed(2)));
  tf_tensor_id at_x =
      position(im, node, &s, tf_reshape(g, tf_slice(g, flat, 2, 0, 1, 1), TF_SHAPE(gd[0], tf_fixed(points))), width);
  tf_tensor_id at_y =
      position(im, node, &s, tf_reshape(g, tf_slice(g, flat, 2, 1, 2, 1), TF_SHAPE(gd[0], tf_fixed(points))), height);
  tf_tensor_id matrix = TF_NO_TENSOR, one = ox_scalar(im, node, TF_F32, 1.0);
  if (!s.bilinear) {
    tf_tensor_id px = tf_unary(g, TF_OP_STOP_GRADIENT, tf_unary(g, TF_OP_ROUND, at_x)),
                 py = tf_unary(g, TF_OP_STOP_GRADIENT, tf_unary(g, TF_OP_ROUND, at_y));
    TF_RETURN_IF_ERROR(add_tap(im, node, px, py, TF_NO_TENSOR, height, width, &matrix));
  } else {
    tf_tensor_id x0 = tf_unary(g, TF_OP_STOP_GRADIENT, tf_unary(g, TF_OP_FLOOR, at_x)),
                 y0 = tf_unary(g, TF_OP_STOP_GRADIENT, tf_unary(g, TF_OP_FLOOR, at_y));
    tf_tensor_id x1 = tf_add(g, x0, one), y1 = tf_add(g, y0, one);
    tf_tensor_id wx1 = tf_sub(g, at_x, x0), wy1 = tf_sub(g, at_y, y0);
    tf_tensor_id wx0 = tf_sub(g, one, wx1), wy0 = tf_sub(g, one, wy1);
    TF_RETURN_IF_ERROR(add_tap(im, node, x0, y0, tf_mul(g, wx0, wy0), height, width, &matrix));
    TF_RETURN_IF_ERROR(add_tap(im, node, x1, y0, tf_mul(g, wx1, wy0), height, width, &matrix));
    TF_RETURN_IF_ERROR(add_tap(im, node, x0, y1, tf_mul(g, wx0, wy1), height, width, &matrix));
    TF_RETURN_IF_ERROR(add_tap(im, node, x1, y1, tf_mul(g, wx1, wy1), height, width, &matrix));
  }
  /* [N, P, H W] x [N, C, H W]^T = [N, P, C], then [N, C, Ho, Wo] */
  tf_tensor_id pixels =
      tf_reshape(g, dtype == TF_F32 ? x : tf_cast(g, x, TF_F32), TF_SHAPE(xd[0], xd[1], tf_fixed(height * width)));
  const int32_t to_channels[3] = {0, 2, 1};
  tf_tensor_id y = tf_transpose(g, tf_matmul(g, matrix, pixels, false, true), to_channels, 3);
  y = tf_reshape(g, y, TF_SHAPE(xd[0], xd[1], gd[1], gd[2]));
  return ox_set_tensor(im, node, 0, dtype == TF_F32 ? y : tf_cast(g, y, dtype));
}
