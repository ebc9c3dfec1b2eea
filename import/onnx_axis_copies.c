/* An axis rebuilt from slices of its own elements, concatenated, so that the gradient of every copied
 * element flows back to the element it copies; the axis must have a fixed size:
 *   - Pad in reflect, edge and wrap modes (nn.ReflectionPad1d/2d, nn.ReplicationPad1d/2d, numpy's
 *     wrap), one axis at a time: the added borders;
 *   - Slice with a negative step (torch.flip: the flows of VITS and Glow-TTS flip their channels),
 *     one element at a time. */
#include <inttypes.h>
#include <stdlib.h>

#include "import/onnx_converters.h"

#define MAX_CONCAT 64 /* TF_OP_VARIADIC: concat's most inputs */

/* concat of parts[0..n) along `axis`, in groups of at most MAX_CONCAT (parts is overwritten). */
static tf_tensor_id concat_parts(tf_graph *g, tf_tensor_id *parts, int64_t n, int32_t axis) {
  while (n > 1) {
    int64_t groups = 0;
    for (int64_t start = 0; start < n; start += MAX_CONCAT) {
      const int64_t count = n - start < MAX_CONCAT ? n - start : MAX_CONCAT;
      parts[groups++] = count == 1 ? parts[start] : tf_concat(g, parts + start, (int32_t)count, axis);
    }
    n = groups;
  }
  return parts[0];
}

/* x's elements [i, i + width) along axis, `copies` times over (edge mode's one element repeated). */
static tf_tensor_id border(ox_import *im, tf_tensor_id x, int32_t axis, int64_t i, int64_t width, int64_t copies) {
  tf_tensor_id part = tf_slice(im->graph, x, axis, i, i + width, 1);
  if (copies == 1)
    return part;
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  dims[axis] = tf_fixed(copies);
  return tf_expand(im->graph, part, tf_shape_from(dims, rank));
}

/* The fixed size of x's `axis`, into *n; `what` (a reflect pad, a negative step) refused on a
 * symbolic axis. */
static tf_status fixed_size(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, const char *what,
                            int64_t *n) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  *n = dims[axis].size;
  if (dims[axis].symbol >= 0 || *n < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s on axis %" PRId32 " of symbolic size (it must be fixed)", what,
                   axis);
  return NULL;
}

/* The limits of a mode's pad on an axis of n elements: reflect below n, wrap at most n. */
static tf_status check_width(ox_import *im, const ox_node *node, ox_pad_mode mode, int32_t axis, int64_t n,
                             int64_t width) {
  if (mode == OX_PAD_REFLECT && width >= n)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "a reflect pad of %" PRId64 " on axis %" PRId32 " of %" PRId64 " elements (it must be less than the "
                   "axis, as PyTorch's ReflectionPad requires)",
                   width, axis, n);
  if (mode == OX_PAD_WRAP && width > n)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "a wrap pad of %" PRId64 " on axis %" PRId32 " of %" PRId64 " elements (at most the axis)", width,
                   axis, n);
  return NULL;
}

tf_status ox_pad_copies(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t before, int64_t after,
                        ox_pad_mode mode, tf_tensor_id *out) {
  *out = x;
  if (before == 0 && after == 0)
    return NULL;
  int64_t n;
  const char *what = mode == OX_PAD_REFLECT ? "a reflect pad" : mode == OX_PAD_EDGE ? "an edge pad" : "a wrap pad";
  TF_RETURN_IF_ERROR(fixed_size(im, node, x, axis, what, &n));
  TF_RETURN_IF_ERROR(check_width(im, node, mode, axis, n, before));
  TF_RETURN_IF_ERROR(check_width(im, node, mode, axis, n, after));
  /* reflect: one part per copied element (each below n); edge and wrap: one part per side */
  const int64_t n_parts = mode == OX_PAD_REFLECT ? before + after + 1 : 3;
  tf_tensor_id *parts = calloc((size_t)n_parts, sizeof(*parts));
  if (!parts)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for a pad of %" PRId64 " elements", before + after);
  int64_t k = 0;
  if (mode == OX_PAD_REFLECT) {
    for (int64_t i = before; i >= 1; i--) /* x[before], ..., x[1] */
      parts[k++] = border(im, x, axis, i, 1, 1);
    parts[k++] = x;
    for (int64_t i = n - 2; i >= n - 1 - after; i--) /* x[n - 2], ..., x[n - 1 - after] */
      parts[k++] = border(im, x, axis, i, 1, 1);
  } else {
    const bool edge = mode == OX_PAD_EDGE;
    if (before > 0)
      parts[k++] = edge ? border(im, x, axis, 0, 1, before) : border(im, x, axis, n - before, before, 1);
    parts[k++] = x;
    if (after > 0)
      parts[k++] = edge ? border(im, x, axis, n - 1, 1, after) : border(im, x, axis, 0, after, 1);
  }
  *out = concat_parts(im->graph, parts, k, axis);
  free(parts);
  return NULL;
}

tf_status ox_slice_backwards(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t start,
                             int64_t end, int64_t step, tf_tensor_id *out) {
  int64_t n;
  TF_RETURN_IF_ERROR(fixed_size(im, node, x, axis, "a negative step", &n));
  /* ONNX's clamping for a negative step: start into [0, n - 1], end into [-1, n - 1] */
  start = start < 0 ? (start < -n ? -1 : start + n) : (start > n - 1 ? n - 1 : start);
  end = end < 0 ? (end < -n ? -1 : end + n) : (end > n - 1 ? n - 1 : end);
  const int64_t count = start > end ? (start - end - 1) / -step + 1 : 0;
  if (count < 1 || count > OX_SLICE_COPIES_MAX)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "step %" PRId64 " on axis %" PRId32 " takes %" PRId64 " elements (a negative step takes 1 to %d)",
                   step, axis, count, OX_SLICE_COPIES_MAX);
  tf_tensor_id *parts = calloc((size_t)count, sizeof(*parts));
  if (!parts)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for a slice of %" PRId64 " elements", count);
  for (int64_t k = 0; k < count; k++)
    parts[k] = border(im, x, axis, start + k * step, 1, 1);
  *out = concat_parts(im->graph, parts, count, axis);
  free(parts);
  return NULL;
}
