/* DepthToSpace and SpaceToDepth (PyTorch's pixel_shuffle / pixel_unshuffle, which export the first in
 * CRD mode, and the second as a Reshape/Transpose chain or SpaceToDepth) as reshape, transpose,
 * reshape on [N, C, H, W] data: the batch and the spatial axes may be symbols where the block size
 * divides their multiples; C must be fixed. */
#include <inttypes.h>
#include <string.h>

#include "import/onnx_converters.h"

/* The blocksize attribute (required, >= 1). */
static tf_status block_size(ox_import *im, const ox_node *node, int64_t *out) {
  *out = ox_attr_int(node, "blocksize", 0);
  if (*out < 1 || *out > 65536)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "blocksize %" PRId64 " is not in 1..65536%s", *out,
                   ox_attr(node, "blocksize") ? "" : " (the attribute is required)");
  return NULL;
}

/* x (input 0) as data of rank 4 with a fixed channel axis: its tensor and dims. */
static tf_status image_of(ox_import *im, const ox_node *node, tf_tensor_id *x, tf_dim dims[TF_MAX_RANK]) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, x));
  int32_t rank;
  ox_tensor_dims(im, *x, &rank, dims);
  if (rank != 4)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "the input has rank %" PRId32 "; it must be [N, C, H, W]", rank);
  if (dims[1].symbol >= 0 || dims[1].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the channel axis (axis 1) must have a fixed size");
  return NULL;
}

/* d times b, or an error naming the axis when the size would pass 2^40. */
static tf_status dim_times(ox_import *im, const ox_node *node, tf_dim d, int64_t b, int32_t axis, tf_dim *out) {
  if (d.size < 1 || d.size > (INT64_C(1) << 40) / b)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "axis %" PRId32 " (%" PRId64 ") times the block size %" PRId64 " is not a size tightfit takes", axis,
                   d.size, b);
  *out = d;
  out->size *= b;
  return NULL;
}

/* d divided by b, or an error naming the axis when b does not divide it (a symbol's multiple). */
static tf_status dim_divided(ox_import *im, const ox_node *node, tf_dim d, int64_t b, int32_t axis, tf_dim *out) {
  if (d.size < 1 || d.size % b != 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "axis %" PRId32 " (%s%" PRId64 ") is not a multiple of the block size %" PRId64, axis,
                   d.symbol >= 0 ? "a symbol times " : "", d.size, b);
  *out = d;
  out->size /= b;
  return NULL;
}

/* reshape(x, first) -> transpose(perm) -> reshape(last), the node's output. */
static tf_status rearrange(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_dim first[6],
                           const int32_t perm[6], const tf_dim last[4]) {
  tf_tensor_id y = tf_reshape(im->graph, x, tf_shape_from(first, 6));
  y = tf_transpose(im->graph, y, perm, 6);
  return ox_set_tensor(im, node, 0, tf_reshape(im->graph, y, tf_shape_from(last, 4)));
}

tf_status ox_convert_depth_to_space(ox_import *im, const ox_node *node) {
  int64_t b;
  tf_tensor_id x;
  tf_dim d[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(block_size(im, node, &b));
  TF_RETURN_IF_ERROR(image_of(im, node, &x, d));
  const Onnx__AttributeProto *mode = ox_attr(node, "mode");
  bool crd = false;
  if (mode && mode->has_s && !(mode->s.len == 3 && memcmp(mode->s.data, "DCR", 3) == 0)) {
    crd = mode->s.len == 3 && memcmp(mode->s.data, "CRD", 3) == 0;
    if (!crd)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "mode '%.*s' is not DCR or CRD", (int)mode->s.len,
                     (const char *)mode->s.data);
  }
  if (d[1].size % (b * b) != 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "the channels (%" PRId64 ") are not a multiple of the block size squared (%" PRId64 ")", d[1].size,
                   b * b);
  const tf_dim c = tf_fixed(d[1].size / (b * b)), block = tf_fixed(b);
  tf_dim last[4] = {d[0], c, d[2], d[3]};
  TF_RETURN_IF_ERROR(dim_times(im, node, d[2], b, 2, &last[2]));
  TF_RETURN_IF_ERROR(dim_times(im, node, d[3], b, 3, &last[3]));
  /* DCR: channel = (i * b + j) * c + k; CRD: channel = (k * b + i) * b + j; out[k, h b + i, w b + j] */
  static const int32_t dcr[6] = {0, 3, 4, 1, 5, 2}, crd_perm[6] = {0, 1, 4, 2, 5, 3};
  const tf_dim dcr_first[6] = {d[0], block, block, c, d[2], d[3]}, crd_first[6] = {d[0], c, block, block, d[2], d[3]};
  return rearrange(im, node, x, crd ? crd_first : dcr_first, crd ? crd_perm : dcr, last);
}

tf_status ox_convert_space_to_depth(ox_import *im, const ox_node *node) {
  int64_t b;
  tf_tensor_id x;
  tf_dim d[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(block_size(im, node, &b));
  TF_RETURN_IF_ERROR(image_of(im, node, &x, d));
  tf_dim h, w, channels;
  TF_RETURN_IF_ERROR(dim_divided(im, node, d[2], b, 2, &h));
  TF_RETURN_IF_ERROR(dim_divided(im, node, d[3], b, 3, &w));
  TF_RETURN_IF_ERROR(dim_times(im, node, d[1], b * b, 1, &channels));
  /* out[(i * b + j) * C + c, h, w] = x[c, h b + i, w b + j] */
  static const int32_t perm[6] = {0, 3, 5, 1, 2, 4};
  const tf_dim block = tf_fixed(b), first[6] = {d[0], d[1], h, block, w, block}, last[4] = {d[0], channels, h, w};
  return rearrange(im, node, x, first, perm, last);
}
