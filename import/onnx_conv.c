/* Convolution and pooling: Conv and ConvTranspose (1-d, 2-d, and 3-d through onnx_conv3d.c), MaxPool
 * and AveragePool (1-d, 2-d and 3-d, the 1-d ones as 2-d over a plane of height 1; a Pad of zeros before a 2-d
 * AveragePool folded into it, onnx_patterns.c), GlobalAveragePool and GlobalMaxPool. A Conv's pads may differ at an
 * axis's two ends and come from auto_pad (conv_pads), a 1-d or 2-d ConvTranspose's too, or from output_shape
 * (conv_transpose_windowed); the others' must be the same at both ends. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"

static tf_status symmetric_pads(ox_import *im, const ox_node *node, int32_t n, int32_t *padding) {
  if (!ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "auto_pad (export with explicit pads)");
  int64_t pads[8];
  int32_t count = ox_attr_ints(node, "pads", pads, 8);
  for (int32_t i = 0; i < n; i++) {
    padding[i] = count < 0 ? 0 : (int32_t)pads[i];
    if (count >= 0 && (count != 2 * n || pads[i] != pads[i + n] || pads[i] < 0))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "padding must be the same at both ends of each axis");
  }
  return NULL;
}

static tf_status ints_or(const ox_node *node, const char *name, int32_t n, int64_t fallback, int32_t *out) {
  int64_t values[8];
  int32_t count = ox_attr_ints(node, name, values, 8);
  for (int32_t i = 0; i < n; i++)
    out[i] = (int32_t)(count < 0 ? fallback : count == n ? values[i] : -1);
  if (count >= 0 && count != n)
    return tf_status_new(TF_ERR_INVALID_INPUT, "attribute %s has %" PRId32 " values for %" PRId32 " axes", name, count,
                         n);
  return NULL;
}

/* A 1-d ConvTranspose (nn.ConvTranspose1d, the upsampling of vocoders) as the 2-d one over a plane
 * of height 1: x [N, C, L] and the weight [C, C_out / groups, K] reshaped to [N, C, 1, L] and
 * [C, C_out / groups, 1, K], the 1-d attributes (in a's first entries) moved to the width, and the
 * [N, C_out, 1, L_out] result reshaped back. The weight stays the parameter it was. */
static tf_status conv_transpose1d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                                  tf_conv_attrs *a) {
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t xr, wr, yr;
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  if (xr != 3)
    return ox_fail(im, node, TF_ERR_SHAPE, "a 1-d ConvTranspose reads [N, C, L]; its input has rank %" PRId32, xr);
  tf_graph *g = im->graph;
  tf_tensor_id x2 = tf_reshape(g, x, TF_SHAPE(xd[0], xd[1], tf_fixed(1), xd[2]));
  tf_tensor_id w2 = tf_reshape(g, w, TF_SHAPE(wd[0], wd[1], tf_fixed(1), wd[2]));
  a->stride[1] = a->stride[0];
  a->padding[1] = a->padding[0];
  a->dilation[1] = a->dilation[0];
  a->output_padding[1] = a->output_padding[0];
  a->stride[0] = a->dilation[0] = 1;
  a->padding[0] = a->output_padding[0] = 0;
  tf_tensor_id y = tf_conv_transpose2d(g, x2, w2, bias, a);
  if (tf_graph_status(g))
    return ox_graph_error(im, node);
  ox_tensor_dims(im, y, &yr, yd);
  return ox_set_tensor(im, node, 0, tf_reshape(g, y, TF_SHAPE(yd[0], yd[1], yd[3])));
}

/* A Conv's pads (explicit, or auto_pad SAME_UPPER / SAME_LOWER / VALID, which torch 2.x writes for
 * padding="same") as the symmetric padding a conv takes (`padding`) plus zeros concatenated to x where
 * an axis's two ends differ (an even kernel's "same": one more at the end, or for SAME_LOWER at the
 * start). "same" pads ceil(in / stride) outputs' worth: with a stride above 1 the axis must be fixed. */
static tf_status conv_pads(ox_import *im, const ox_node *node, tf_tensor_id *x, tf_tensor_id w, int32_t spatial,
                           const int32_t *stride, const int32_t *dilation, int32_t *padding) {
  int64_t pads[8] = {0};
  int32_t count = ox_attr_ints(node, "pads", pads, 8);
  const bool same_upper = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_UPPER"),
             same_lower = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_LOWER"),
             valid = ox_attr_is(node, "auto_pad", "NOTSET", "VALID");
  if (!same_upper && !same_lower && !valid && !ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET"))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "auto_pad is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  if (count >= 0 && count != 2 * spatial && !(same_upper || same_lower || valid))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%" PRId32 " pads for %" PRId32 " spatial axes", count, spatial);
  int32_t xr, wr;
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK];
  ox_tensor_dims(im, *x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  for (int32_t i = 0; i < spatial; i++) {
    int64_t begin = count >= 0 ? pads[i] : 0, end = count >= 0 ? pads[i + spatial] : 0;
    if (valid) {
      begin = end = 0;
    } else if (same_upper || same_lower) {
      const tf_dim in = xd[2 + i];
      const int64_t reach = (int64_t)(wd[2 + i].size - 1) * dilation[i] + 1;
      if (stride[i] != 1 && in.symbol >= 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                       "auto_pad %s with stride %" PRId32 " on spatial axis %" PRId32 " of symbolic size (a fixed "
                       "size is needed)",
                       same_upper ? "SAME_UPPER" : "SAME_LOWER", stride[i], i);
      const int64_t outputs = stride[i] == 1 ? 0 : (in.size + stride[i] - 1) / stride[i];
      int64_t total = stride[i] == 1 ? reach - 1 : (outputs - 1) * stride[i] + reach - in.size;
      total = total > 0 ? total : 0;
      begin = same_upper ? total / 2 : total - total / 2;
      end = total - begin;
    }
    if (begin < 0 || end < 0 || begin > (1 << 20) || end > (1 << 20))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "pads %" PRId64 " and %" PRId64 " on spatial axis %" PRId32 " (0 to 2^20 only)", begin, end, i);
    padding[i] = (int32_t)(begin < end ? begin : end);
    if (begin != end) /* the difference as zeros at the end that has more */
      *x = ox_pad_axis(im, node, *x, 2 + i, begin - padding[i], end - padding[i], 0.0);
  }
  return NULL;
}

/* A 3-d Conv's or ConvTranspose's attributes (three of each; a Conv's pads as conv_pads makes them, a
 * ConvTranspose's the same at both ends), then ox_conv3d or ox_conv_transpose3d. */
static tf_status conv3d_of(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                           bool transposed) {
  ox_conv3d_attrs a;
  memset(&a, 0, sizeof(a));
  tf_status status = ints_or(node, "strides", 3, 1, a.stride);
  if (!status)
    status = ints_or(node, "dilations", 3, 1, a.dilation);
  if (!status)
    status = ints_or(node, "output_padding", 3, 0, a.output_padding);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  for (int32_t i = 0; i < 3; i++)
    if (a.stride[i] < 1 || a.stride[i] > 64 || a.dilation[i] < 1 || a.dilation[i] > 64 || a.output_padding[i] < 0 ||
        a.output_padding[i] >= a.stride[i])
      return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                     "stride %" PRId32 ", dilation %" PRId32 ", output_padding %" PRId32 " on spatial axis %" PRId32
                     " (stride and dilation 1 to 64, output_padding below the stride)",
                     a.stride[i], a.dilation[i], a.output_padding[i], i);
  a.groups = (int32_t)ox_attr_int(node, "group", 1);
  if (!transposed) {
    TF_RETURN_IF_ERROR(conv_pads(im, node, &x, w, 3, a.stride, a.dilation, a.padding));
    return ox_conv3d(im, node, x, w, bias, &a);
  }
  if (ox_attr(node, "output_shape"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "output_shape (export with output_padding)");
  TF_RETURN_IF_ERROR(symmetric_pads(im, node, 3, a.padding));
  return ox_conv_transpose3d(im, node, x, w, bias, &a);
}

/* floor(a / 2), as ONNX's reference splits a negative total padding. */
static int64_t half_down(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

/* Whether a ConvTranspose needs conv_transpose_windowed: auto_pad, output_shape, or pads that differ at
 * an axis's two ends. */
static bool transposed_windowed(const ox_node *node, int32_t spatial) {
  int64_t pads[8];
  const int32_t count = ox_attr_ints(node, "pads", pads, 8);
  bool uneven = false;
  for (int32_t i = 0; count == 2 * spatial && i < spatial; i++)
    uneven = uneven || pads[i] != pads[i + spatial] || pads[i] < 0;
  return uneven || ox_attr(node, "output_shape") || !ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET");
}

/* Where ONNX's output of one axis starts in the transposed convolution's full (unpadded) output and how
 * long it is, from the pads, auto_pad or output_shape (which then sets the pads: the total, s (in - 1) +
 * output_padding + reach - out, split as ONNX's reference splits it, the odd one at the end for SAME_UPPER
 * and at the start otherwise). */
static tf_status transposed_window(ox_import *im, const ox_node *node, int32_t spatial, int32_t i, int64_t in,
                                   int64_t reach, const tf_conv_attrs *a, int64_t *start, int64_t *length) {
  int64_t pads[8] = {0}, shape[8];
  const int32_t count = ox_attr_ints(node, "pads", pads, 8), shapes = ox_attr_ints(node, "output_shape", shape, 8);
  const bool upper = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_UPPER"),
             lower = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_LOWER"),
             valid = ox_attr_is(node, "auto_pad", "NOTSET", "VALID");
  if (!upper && !lower && !valid && !ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET"))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "auto_pad is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  const int64_t grown = a->stride[i] * (in - 1) + a->output_padding[i] + reach; /* the output with no pads */
  int64_t out = -1;
  if (shapes == spatial || shapes == spatial + 2)
    out = shape[shapes - spatial + i];
  else if (shapes >= 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "output_shape has %" PRId32 " values for %" PRId32 " spatial axes",
                   shapes, spatial);
  else if (upper || lower)
    out = in * a->stride[i];
  if (out >= 0) {
    const int64_t total = grown - out;
    *start = upper ? half_down(total) : total - half_down(total);
  } else if (valid) {
    *start = 0, out = grown;
  } else {
    if (count >= 0 && count != 2 * spatial)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%" PRId32 " pads for %" PRId32 " spatial axes", count, spatial);
    *start = pads[i], out = grown - pads[i] - pads[i + spatial];
  }
  if (out < 1 || out > ((int64_t)1 << 24) || *start < -((int64_t)1 << 24) || *start > ((int64_t)1 << 24))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "an output of %" PRId64 " on spatial axis %" PRId32 " starting at %" PRId64
                   " of the full transposed convolution's %" PRId64,
                   out, i, *start, grown - a->output_padding[i]);
  *length = out;
  return NULL;
}

/* A ConvTranspose of auto_pad, output_shape or uneven pads (tf2onnx writes them): the full transposed
 * convolution (no pads, no output_padding, 1-d as 2-d over a plane of height 1), each spatial axis cut to
 * ONNX's window of it (transposed_window), zeros where the window reaches past the full output (output_padding,
 * a larger output_shape), then the bias. */
static tf_status conv_transpose_windowed(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w,
                                         tf_tensor_id bias, int32_t spatial, tf_conv_attrs *a) {
  tf_graph *g = im->graph;
  int32_t xr, wr;
  tf_dim xd[TF_MAX_RANK], wd[TF_MAX_RANK];
  ox_tensor_dims(im, x, &xr, xd);
  ox_tensor_dims(im, w, &wr, wd);
  if (xr != spatial + 2)
    return ox_fail(im, node, TF_ERR_SHAPE, "its input has rank %" PRId32 " for %" PRId32 " spatial axes", xr, spatial);
  int64_t start[2], length[2];
  for (int32_t i = 0; i < spatial; i++) {
    if (xd[2 + i].symbol >= 0 || xd[2 + i].size < 1 || wd[2 + i].symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "auto_pad, output_shape or uneven pads over spatial axis %" PRId32 " of symbolic size", i);
    TF_RETURN_IF_ERROR(transposed_window(im, node, spatial, i, xd[2 + i].size,
                                         (wd[2 + i].size - 1) * a->dilation[i] + 1, a, &start[i], &length[i]));
  }
  tf_conv_attrs full = *a;
  if (spatial == 1) { /* the axis moved to the width of a plane of height 1 */
    x = tf_reshape(g, x, TF_SHAPE(xd[0], xd[1], tf_fixed(1), xd[2]));
    w = tf_reshape(g, w, TF_SHAPE(wd[0], wd[1], tf_fixed(1), wd[2]));
    full.stride[1] = a->stride[0], full.dilation[1] = a->dilation[0];
    full.stride[0] = full.dilation[0] = 1;
  }
  memset(full.padding, 0, sizeof(full.padding));
  memset(full.output_padding, 0, sizeof(full.output_padding));
  tf_tensor_id y = tf_conv_transpose2d(g, x, w, TF_NO_TENSOR, &full);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  int32_t yr;
  tf_dim yd[TF_MAX_RANK];
  ox_tensor_dims(im, y, &yr, yd);
  for (int32_t i = 0; i < spatial; i++) {
    const int32_t axis = spatial == 1 ? 3 : 2 + i;
    const int64_t size = yd[axis].size, lo = start[i] > 0 ? start[i] : 0,
                  hi = start[i] + length[i] < size ? start[i] + length[i] : size;
    if (lo >= hi)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its output on spatial axis %" PRId32 " misses every input", i);
    if (lo > 0 || hi < size)
      y = tf_slice(g, y, axis, lo, hi, 1);
    if (lo - start[i] > 0 || start[i] + length[i] - hi > 0)
      y = ox_pad_axis(im, node, y, axis, lo - start[i], start[i] + length[i] - hi, 0.0);
  }
  if (bias != TF_NO_TENSOR)
    y = tf_add(g, y, tf_reshape(g, bias, TF_SHAPE(yd[1], tf_fixed(1), tf_fixed(1))));
  if (spatial == 1) {
    ox_tensor_dims(im, y, &yr, yd);
    y = tf_reshape(g, y, TF_SHAPE(yd[0], yd[1], yd[3]));
  }
  return ox_set_tensor(im, node, 0, y);
}

static tf_status conv_like(ox_import *im, const ox_node *node, bool transposed) {
  tf_tensor_id x, w, bias = TF_NO_TENSOR;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &w));
  if (ox_input(node, 2))
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, &bias));
  int32_t spatial = ox_rank_of(im, w) - 2;
  if (spatial == 3)
    return conv3d_of(im, node, x, w, bias, transposed);
  if (spatial != 1 && spatial != 2)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 "-d convolution (1-d, 2-d and 3-d only)", spatial);
  const bool windowed = transposed && transposed_windowed(node, spatial);
  tf_conv_attrs a;
  memset(&a, 0, sizeof(a));
  if (transposed && !windowed)
    TF_RETURN_IF_ERROR(symmetric_pads(im, node, spatial, a.padding));
  tf_status status = ints_or(node, "strides", spatial, 1, a.stride);
  if (!status)
    status = ints_or(node, "dilations", spatial, 1, a.dilation);
  if (!status)
    status = ints_or(node, "output_padding", spatial, 0, a.output_padding);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  if (!transposed)
    TF_RETURN_IF_ERROR(conv_pads(im, node, &x, w, spatial, a.stride, a.dilation, a.padding));
  a.groups = (int32_t)ox_attr_int(node, "group", 1);
  if (windowed)
    return conv_transpose_windowed(im, node, x, w, bias, spatial, &a);
  if (spatial == 1 && transposed)
    return conv_transpose1d(im, node, x, w, bias, &a);
  if (spatial == 1) {
    a.stride[1] = a.padding[1] = a.dilation[1] = 1;
    a.padding[1] = 0;
    return ox_set_tensor(im, node, 0,
                         tf_conv1d(im->graph, x, w, bias, a.stride[0], a.padding[0], a.dilation[0], a.groups));
  }
  return ox_set_tensor(
      im, node, 0, transposed ? tf_conv_transpose2d(im->graph, x, w, bias, &a) : tf_conv2d(im->graph, x, w, bias, &a));
}

tf_status ox_convert_conv(ox_import *im, const ox_node *node) { return conv_like(im, node, false); }
tf_status ox_convert_conv_transpose(ox_import *im, const ox_node *node) { return conv_like(im, node, true); }

/* ceil_mode=1: the windows of each spatial axis, counted up (PyTorch's and ONNX's rule: a last window
 * that would start past the input and its left padding is dropped), as floor-mode windows over x
 * padded at the end by `extra[i]` elements (none where the windows tile the axis exactly: Funnel's
 * avg_pool2d(ceil_mode=True) over an even sequence); the spatial sizes must be fixed. */
static tf_status ceil_windows(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_pool_attrs *a,
                              int64_t extra[2]) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  for (int32_t i = 0; i < 2; i++) {
    const tf_dim d = dims[2 + i];
    const int64_t s = a->stride[i], span = d.size + 2 * (int64_t)a->padding[i] - a->kernel[i];
    extra[i] = 0;
    if (s == 1) /* every window count is whole */
      continue;
    if (d.symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "ceil_mode=1 over spatial axis %" PRId32 " of symbolic size, where the windows may not tile it "
                     "(a fixed size is needed)",
                     i);
    if (s < 1 || span < 0 || span % s == 0)
      continue; /* the pool's own rule refuses the first two */
    int64_t windows = (span + s - 1) / s + 1;
    if ((windows - 1) * s >= d.size + a->padding[i])
      windows--;
    extra[i] = (windows - 1) * s + a->kernel[i] - (d.size + 2 * (int64_t)a->padding[i]);
  }
  return NULL;
}

/* The positions a window of `kernel` at output position o counts along an axis of `size` (stride,
 * padding): those of [o stride - padding, + kernel) inside [0, size), or with `padding_counted`
 * inside [-padding, size + padding) (PyTorch's count_include_pad: the padding counts, a ceil-mode
 * window's overhang past it does not). */
static int64_t covered(int64_t o, int64_t size, int32_t kernel, int32_t stride, int32_t padding, bool padding_counted) {
  const int64_t low = padding_counted ? -padding : 0, high = padding_counted ? size + padding : size;
  const int64_t first = o * stride - padding, last = first + kernel;
  return (last < high ? last : high) - (first > low ? first : low);
}

/* Padded average pooling that does not count the padding (count_include_pad=0, PyTorch's
 * avg_pool2d(count_include_pad=False): PoolFormer's token mixer): the counting pool times a constant
 * [OH, OW] of kh kw / (the input positions the window covers), over spatial axes of fixed size.
 * Within an f32 rounding of PyTorch's sum / count; its gradient is dy / count at each covered
 * position, as PyTorch's. */
static tf_status uncounted_padding(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_pool_attrs *a,
                                   const int64_t extra[2], bool padding_counted, tf_tensor_id *y) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t size[2], out[2];
  for (int32_t i = 0; i < 2; i++) {
    size[i] = dims[2 + i].size;
    if (dims[2 + i].symbol >= 0 || size[i] < 0 || a->stride[i] < 1)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "padded average pooling that does not count the padding (count_include_pad=0) over a spatial "
                     "axis of symbolic size (only of fixed sizes)");
    out[i] = (size[i] + 2 * (int64_t)a->padding[i] + extra[i] - a->kernel[i]) / a->stride[i] + 1;
  }
  for (int32_t i = 0; i < 2; i++) /* a ceil-mode pool's overhang: zeros the counting pool adds up */
    x = ox_pad_axis(im, node, x, 2 + i, 0, extra[i], 0.0);
  ox_known *k = ox_known_new(true, TF_F32, 2, out);
  if (!k)
    return ox_at(im, node, ox_known_refusal(2, out, "the counts of the windows"));
  for (int64_t h = 0; h < out[0]; h++)
    for (int64_t w = 0; w < out[1]; w++) {
      const int64_t count = covered(h, size[0], a->kernel[0], a->stride[0], a->padding[0], padding_counted) *
                            covered(w, size[1], a->kernel[1], a->stride[1], a->padding[1], padding_counted);
      if (count <= 0) {
        ox_known_free(k);
        return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a window at (%" PRId64 ", %" PRId64 ") covers only padding", h,
                       w);
      }
      k->reals[h * out[1] + w] = (double)a->kernel[0] * a->kernel[1] / (double)count;
    }
  char name[300];
  snprintf(name, sizeof(name), "%s.window_counts", node->proto->output[0]);
  tf_tensor_id scale;
  TF_RETURN_IF_ERROR(ox_known_constant(im, node, name, k, &scale));
  *y = tf_mul(im->graph, tf_pool2d(im->graph, TF_OP_AVG_POOL2D, x, a), scale);
  return NULL;
}

/* The pooling attributes of a `spatial`-d node (1 or 2) as 2-d ones: a 1-d window over the width,
 * height 1. */
static tf_status pool_attrs(ox_import *im, const ox_node *node, int32_t spatial, tf_pool_attrs *a) {
  memset(a, 0, sizeof(*a));
  if (ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET")) /* else same_pool_pads, once the kernel is read */
    TF_RETURN_IF_ERROR(symmetric_pads(im, node, spatial, a->padding));
  int32_t dilation[2] = {1, 1};
  tf_status status = ints_or(node, "kernel_shape", spatial, -1, a->kernel);
  if (!status)
    status = ints_or(node, "strides", spatial, 1, a->stride);
  if (!status)
    status = ints_or(node, "dilations", spatial, 1, dilation);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  if (dilation[0] != 1 || dilation[1] != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "dilations %" PRId32 " x %" PRId32 " (dilated pooling: MaxPool's, and AveragePool's from "
                   "opset 19, is not supported)",
                   dilation[0], dilation[1]);
  if (spatial == 1) {
    a->kernel[1] = a->kernel[0];
    a->stride[1] = a->stride[0];
    a->padding[1] = a->padding[0];
    a->kernel[0] = a->stride[0] = 1;
    a->padding[0] = 0;
  }
  return NULL;
}

/* A 2-d pool's auto_pad (SAME_UPPER, SAME_LOWER, VALID; tf2onnx writes them): "same" pads so that
 * ceil(size / stride) windows fit, floor(total / 2) before and the rest after (SAME_LOWER: the larger
 * half before), as the symmetric `padding` plus `extra[i]` at the end (ceil_windows' overhang: the pool
 * then treats it as it does a ceil-mode window's); a max pool's larger half before as copies of the
 * first element. With a stride above 1 the axis must be fixed; an average's larger half before
 * (SAME_LOWER of an odd total) and a counted overhang (count_include_pad=1) are refused, as is
 * ceil_mode beside auto_pad. */
static tf_status same_pool_pads(ox_import *im, const ox_node *node, tf_op op, tf_tensor_id *x, tf_pool_attrs *a,
                                int64_t extra[2]) {
  const bool upper = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_UPPER"),
             lower = ox_attr_is(node, "auto_pad", "NOTSET", "SAME_LOWER"),
             valid = ox_attr_is(node, "auto_pad", "NOTSET", "VALID");
  if (!upper && !lower && !valid)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "auto_pad is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  if (ox_attr_int(node, "ceil_mode", 0) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ceil_mode=1 beside auto_pad");
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, *x, &rank, dims);
  for (int32_t i = 0; i < 2; i++) {
    const tf_dim d = dims[2 + i];
    const int64_t k = a->kernel[i], s = a->stride[i];
    a->padding[i] = 0;
    extra[i] = 0;
    if (valid || k < 1 || s < 1) /* the pool's own rule refuses the last two */
      continue;
    if (s != 1 && d.symbol >= 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "auto_pad with stride %" PRId64 " over spatial axis %" PRId32 " of symbolic size (a fixed size "
                     "is needed)",
                     s, i);
    int64_t total = s == 1 ? k - 1 : ((d.size + s - 1) / s - 1) * s + k - d.size;
    total = total > 0 ? total : 0;
    const int64_t before = upper ? total / 2 : total - total / 2, after = total - before;
    if (before > after && op != TF_OP_MAX_POOL2D)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "AveragePool's auto_pad SAME_LOWER with an odd padding (%" PRId64 ") over spatial axis %" PRId32
                     " (its extra element before the input)",
                     total, i);
    if (before > after) /* a max pool's: the first element repeated before changes no maximum */
      TF_RETURN_IF_ERROR(ox_pad_copies(im, node, *x, 2 + i, before - after, 0, OX_PAD_EDGE, x));
    a->padding[i] = (int32_t)(before < after ? before : after);
    extra[i] = after - a->padding[i];
    if (extra[i] && ox_attr_int(node, "count_include_pad", 0))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "auto_pad SAME with an odd padding that count_include_pad=1 counts");
  }
  return NULL;
}

/* A 3-d pool's attributes: the depth's apart, the height's and width's as a 2-d pool's; then ox_pool3d.
 * Padding the same at both ends, no dilation, no ceil_mode; an average counts the padding (or has none). */
static tf_status pool3d(ox_import *im, const ox_node *node, tf_op op, tf_tensor_id x) {
  int32_t kernel[3], stride[3], padding[3], dilation[3];
  TF_RETURN_IF_ERROR(symmetric_pads(im, node, 3, padding));
  tf_status status = ints_or(node, "kernel_shape", 3, -1, kernel);
  if (!status)
    status = ints_or(node, "strides", 3, 1, stride);
  if (!status)
    status = ints_or(node, "dilations", 3, 1, dilation);
  if (status) {
    char label[256];
    return tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label)));
  }
  if (dilation[0] != 1 || dilation[1] != 1 || dilation[2] != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "dilated 3-d pooling (dilations %" PRId32 " x %" PRId32 " x %" PRId32 ")", dilation[0], dilation[1],
                   dilation[2]);
  if (ox_attr_int(node, "ceil_mode", 0) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "ceil_mode in a 3-d pool");
  if (op == TF_OP_AVG_POOL2D && (padding[0] || padding[1] || padding[2]) && !ox_attr_int(node, "count_include_pad", 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a padded 3-d AveragePool that does not count the padding "
                   "(count_include_pad=False)");
  if (node->pool_padding[0] || node->pool_padding[1])
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a Pad folded into a 3-d pool");
  const tf_pool_attrs plane = {{kernel[1], kernel[2]}, {stride[1], stride[2]}, {padding[1], padding[2]}};
  return ox_pool3d(im, node, op, x, &plane, kernel[0], stride[0], padding[0]);
}

static tf_status pool(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const int32_t rank = ox_rank_of(im, x);
  if (rank == 5)
    return pool3d(im, node, op, x);
  if (rank != 3 && rank != 4)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "pooling over a rank-%" PRId32 " input (1-d, 2-d and 3-d only)", rank);
  tf_pool_attrs a;
  TF_RETURN_IF_ERROR(pool_attrs(im, node, rank - 2, &a));
  tf_dim xd[TF_MAX_RANK], yd[TF_MAX_RANK];
  int32_t xr, yr;
  ox_tensor_dims(im, x, &xr, xd);
  if (rank == 3) /* [N, C, L] as [N, C, 1, L] */
    x = tf_reshape(im->graph, x, TF_SHAPE(xd[0], xd[1], tf_fixed(1), xd[2]));
  tf_tensor_id y = TF_NO_TENSOR;
  if (node->pool_padding[0] || node->pool_padding[1]) { /* a Pad of zeros folded in: counted, like tf */
    a.padding[0] = node->pool_padding[0];
    a.padding[1] = node->pool_padding[1];
  }
  int64_t extra[2] = {0, 0};
  if (!ox_attr_is(node, "auto_pad", "NOTSET", "NOTSET"))
    TF_RETURN_IF_ERROR(same_pool_pads(im, node, op, &x, &a, extra));
  else if (ox_attr_int(node, "ceil_mode", 0) != 0)
    TF_RETURN_IF_ERROR(ceil_windows(im, node, x, &a, extra));
  const bool counted = node->pool_padding[0] || node->pool_padding[1] || ox_attr_int(node, "count_include_pad", 0);
  if (op == TF_OP_AVG_POOL2D && (extra[0] || extra[1] || ((a.padding[0] || a.padding[1]) && !counted)))
    TF_RETURN_IF_ERROR(uncounted_padding(im, node, x, &a, extra, counted, &y));
  else if (extra[0] || extra[1]) /* max: the overhang repeats the last element, so it changes no maximum */
    for (int32_t i = 0; i < 2; i++)
      TF_RETURN_IF_ERROR(ox_pad_copies(im, node, x, 2 + i, 0, extra[i], OX_PAD_EDGE, &x));
  if (y == TF_NO_TENSOR)
    y = tf_pool2d(im->graph, op, x, &a);
  if (rank == 3) {
    if (tf_graph_status(im->graph))
      return ox_graph_error(im, node);
    ox_tensor_dims(im, y, &yr, yd);
    y = tf_reshape(im->graph, y, TF_SHAPE(yd[0], yd[1], yd[3]));
  }
  return ox_set_tensor(im, node, 0, y);
}

tf_status ox_convert_max_pool(ox_import *im, const ox_node *node) {
  // The Indices output is left without a value: a node that reads it fails with "has no value".
  return pool(im, node, TF_OP_MAX_POOL2D);
}
tf_status ox_convert_average_pool(ox_import *im, const ox_node *node) { return pool(im, node, TF_OP_AVG_POOL2D); }

/* GlobalAveragePool and GlobalMaxPool: the mean or maximum over every axis after the channel's, kept
 * as size-1 axes ([N, C, 1, 1] from [N, C, H, W]); nn.AdaptiveAvgPool2d(1) and nn.AdaptiveMaxPool1d(1)
 * export as them. The maximum's gradient is split evenly among tied maxima (PyTorch's adaptive pool
 * gives it to one of them: the same where the maximum is unique). */
static tf_status global_pool(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const int32_t rank = ox_rank_of(im, x);
  if (rank < 3)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its input has rank %" PRId32 "; it needs [N, C, spatial...]", rank);
  int32_t axes[TF_MAX_RANK];
  for (int32_t i = 2; i < rank; i++)
    axes[i - 2] = i;
  return ox_set_tensor(im, node, 0, tf_reduce(im->graph, op, x, axes, rank - 2, true));
}

tf_status ox_convert_global_average_pool(ox_import *im, const ox_node *node) {
  return global_pool(im, node, TF_OP_MEAN);
}
tf_status ox_convert_global_max_pool(ox_import *im, const ox_node *node) { return global_pool(im, node, TF_OP_MAX); }
