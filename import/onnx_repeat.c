/* Operators that repeat elements, as reshape -> expand -> reshape (expand's gradient sums the copies
 * back):
 * - Resize in nearest mode by whole factors (nn.Upsample(scale_factor=2), F.interpolate(mode=
 *   "nearest"): the upsampling of GAN generators and UNets): each element repeated s times along
 *   each axis with factor s, which is what every coordinate mapping PyTorch exports gives for a
 *   whole factor (asymmetric with floor, half_pixel or half_pixel_symmetric with rounding). Also
 *   opset 9's Upsample, whose scales are its input 1 as Resize-10's (both map asymmetrically, nearest
 *   mode rounding down where an axis grows). Other factors and mappings, and the linear and cubic
 *   modes, are onnx_resize_linear.c's.
 * - Tile (x.repeat(...)): the whole axis repeated r times. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/checked.h"
#include "import/onnx_converters.h"

/* The factor of each of x's `rank` axes from the scales (floats) or the sizes (integers of the
 * output, which must be whole multiples of fixed input sizes): each a whole number >= 1. */
static tf_status factors(ox_import *im, const ox_node *node, int32_t rank, const tf_dim *dims, int64_t *factor) {
  const ox_known *scales, *sizes;
  TF_RETURN_IF_ERROR(ox_resize_target(im, node, rank, &scales, &sizes));
  if (scales) {
    for (int32_t a = 0; a < rank; a++) {
      if (!(scales->reals[a] >= 1 && scales->reals[a] <= 1024 && scales->reals[a] == floor(scales->reals[a])))
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "scale %g on axis %" PRId32 " (whole factors of 1 to 1024 only)",
                       scales->reals[a], a);
      factor[a] = (int64_t)scales->reals[a];
    }
    return NULL;
  }
  for (int32_t a = 0; a < rank; a++) {
    const tf_dim in = dims[a], out = sizes->ints[a];
    bool same_symbol = in.symbol == out.symbol && in.size > 0 && out.size % in.size == 0;
    if (!same_symbol || out.size / in.size < 1 || out.size / in.size > 1024)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "size on axis %" PRId32 " is not a whole multiple (1 to 1024) of the input's", a);
    factor[a] = out.size / in.size;
  }
  return NULL;
}

/* x with axis a repeated factor[a] times: each element in turn (`tile` false: [.., d, 1, ..] expanded
 * to [.., d, s, ..]) or the whole axis (`tile`: [.., 1, d, ..] to [.., s, d, ..]), then merged. */
static tf_status repeat_axes(ox_import *im, const ox_node *node, tf_tensor_id x, const int64_t *factor, bool tile) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  tf_dim split[TF_MAX_RANK], repeated[TF_MAX_RANK], out[TF_MAX_RANK];
  int32_t n = 0;
  for (int32_t a = 0; a < rank; a++) {
    if (n + (factor[a] > 1) >= TF_MAX_RANK)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "repeating this many axes of a rank-%" PRId32 " input (rank %d at most between the reshapes)",
                     rank, TF_MAX_RANK);
    if (factor[a] > 1 && tile) {
      split[n] = tf_fixed(1);
      repeated[n++] = tf_fixed(factor[a]);
    }
    split[n] = dims[a];
    repeated[n++] = dims[a];
    if (factor[a] > 1 && !tile) {
      split[n] = tf_fixed(1);
      repeated[n++] = tf_fixed(factor[a]);
    }
    out[a] = dims[a];
    out[a].size *= factor[a];
  }
  if (n == rank)
    return ox_set_tensor(im, node, 0, x);
  tf_graph *g = im->graph;
  tf_tensor_id y = tf_expand(g, tf_reshape(g, x, tf_shape_from(split, n)), tf_shape_from(repeated, n));
  return ox_set_tensor(im, node, 0, tf_reshape(g, y, tf_shape_from(out, rank)));
}

/* Resize's attributes of opset 18 that change which axes and sizes are meant: `axes` (a subset of the
 * axes, or another order) and `keep_aspect_ratio_policy` (sizes adjusted to the aspect ratio) are
 * read only in their default forms. */
static tf_status default_axes(ox_import *im, const ox_node *node, int32_t rank) {
  int64_t axes[TF_MAX_RANK + 1];
  const int32_t n = ox_attr_ints(node, "axes", axes, TF_MAX_RANK + 1);
  bool every = n == rank;
  for (int32_t i = 0; i < n && every; i++)
    every = axes[i] == i || axes[i] == i - rank;
  if (n > 0 && !every)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "an axes attribute other than every axis in order (%" PRId32 " axes of a rank-%" PRId32
                   " input): scales and sizes for every axis only",
                   n, rank);
  if (!ox_attr_is(node, "keep_aspect_ratio_policy", "stretch", "stretch") && ox_input(node, 3))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a keep_aspect_ratio_policy other than stretch (sizes as given only)");
  return NULL;
}

/* Upsample's scales must be at least 1 (as ONNX defines it and onnxruntime checks: Resize shrinks). */
static tf_status upsample_scales(ox_import *im, const ox_node *node, int32_t rank) {
  const ox_known *scales, *sizes;
  TF_RETURN_IF_ERROR(ox_resize_target(im, node, rank, &scales, &sizes));
  for (int32_t a = 0; scales && a < rank; a++)
    if (!(scales->reals[a] >= 1))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                     "Upsample's scale %g on axis %" PRId32 " (at least 1: Resize shrinks)", scales->reals[a], a);
  return NULL;
}

tf_status ox_convert_resize(ox_import *im, const ox_node *node) {
  const bool upsample = strcmp(node->proto->op_type, "Upsample") == 0;
  if (upsample && !ox_input(node, 1))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Upsample with a scales attribute (opset 7 and 8; from opset 9 its scales are an input): "
                   "export at opset 9 or later");
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  TF_RETURN_IF_ERROR(default_axes(im, node, rank));
  if (upsample)
    TF_RETURN_IF_ERROR(upsample_scales(im, node, rank));
  int64_t factor[TF_MAX_RANK];
  tf_status no_factors = factors(im, node, rank, dims, factor); /* reported after the mode's checks */
  bool same_size = !no_factors && !ox_resize_mapping_is(im, node, "tf_crop_and_resize");
  for (int32_t a = 0; a < rank && same_size; a++)
    same_size = factor[a] == 1;
  if (same_size) /* every mode maps each pixel to itself (BEiT's table interpolated to its own size) */
    return ox_set_tensor(im, node, 0, x);
  if (!ox_attr_is(node, "mode", "nearest", "nearest") && !ox_attr_is(node, "mode", "nearest", "linear") &&
      !ox_attr_is(node, "mode", "nearest", "cubic")) {
    tf_status_free(no_factors);
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a mode other than nearest, linear and cubic");
  }
  bool asymmetric = ox_resize_mapping_is(im, node, "asymmetric");
  /* half_pixel_symmetric (opset 19) is half_pixel where out is in times a whole factor */
  bool half_pixel = ox_resize_mapping_is(im, node, "half_pixel") ||
                    ox_resize_mapping_is(im, node, "half_pixel_symmetric") ||
                    ox_resize_mapping_is(im, node, "pytorch_half_pixel");
  /* (whole factors grow every axis: "simple" rounds down there) */
  bool floor_mode = ox_resize_rounding_is(im, node, "floor") || ox_resize_rounding_is(im, node, "simple");
  bool rounding =
      ox_resize_rounding_is(im, node, "round_prefer_floor") || ox_resize_rounding_is(im, node, "round_prefer_ceil");
  if (!ox_attr_is(node, "mode", "nearest", "nearest") || no_factors ||
      !((asymmetric && floor_mode) || (half_pixel && rounding))) {
    /* no repeat: a product with each axis's constant blend (onnx_resize_linear.c) */
    tf_status_free(no_factors);
    return ox_convert_resize_linear(im, node, x);
  }
  TF_RETURN_IF_ERROR(no_factors);
  return repeat_axes(im, node, x, factor, false);
}

/* Tile's symbolic repeats: on an axis of size 1 (WavLM's position bias repeated for each of the
 * batch's N rows) an expand; on an axis of fixed size s (DeBERTa-v2's position keys repeated N
 * times over their H heads: [N*H, ...]) an axis of the repeat inserted before it, expanded, and
 * merged with it (the copies one after another, as Tile lays them). *x becomes the result and those
 * axes' repeats 1. */
static tf_status expand_symbolic_repeats(ox_import *im, const ox_node *node, const ox_known *k, tf_tensor_id *x,
                                         int64_t *repeats) {
  int32_t rank, n = 0;
  tf_dim dims[TF_MAX_RANK], apart[TF_MAX_RANK], expanded[TF_MAX_RANK], merged[TF_MAX_RANK];
  ox_tensor_dims(im, *x, &rank, dims);
  bool any = false;
  for (int32_t a = 0; a < rank; a++) {
    const bool symbolic = k->ints[a].symbol >= 0, of_one = dims[a].symbol < 0 && dims[a].size == 1;
    repeats[a] = symbolic ? 1 : k->ints[a].size;
    merged[a] = symbolic && of_one ? k->ints[a] : dims[a];
    if (symbolic && !of_one) { /* the repeat's own axis, before this one */
      int64_t size;
      if (dims[a].symbol >= 0 || dims[a].size < 1 || !tf_checked_mul_i64(k->ints[a].size, dims[a].size, &size))
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic repeat on axis %" PRId32 " of symbolic size", a);
      if (n + 2 > TF_MAX_RANK)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic repeat past rank %d", TF_MAX_RANK);
      apart[n] = tf_fixed(1);
      expanded[n++] = k->ints[a];
      merged[a] = tf_sym_times(k->ints[a].symbol, size);
    }
    if (n == TF_MAX_RANK)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a symbolic repeat past rank %d", TF_MAX_RANK);
    apart[n] = dims[a];
    expanded[n++] = symbolic && of_one ? k->ints[a] : dims[a];
    any = any || symbolic;
  }
  if (!any)
    return NULL;
  if (n != rank)
    *x = tf_reshape(im->graph, *x, tf_shape_from(apart, n));
  *x = tf_expand(im->graph, *x, tf_shape_from(expanded, n));
  if (n != rank)
    *x = tf_reshape(im->graph, *x, tf_shape_from(merged, rank));
  return ox_graph_error(im, node);
}

/* Tile of a known value by fixed repeats (DeBERTa's relative positions: k_ids.repeat(T, 1)), at
 * most TILE_FOLD_LIMIT elements: folded. */
#define TILE_FOLD_LIMIT ((int64_t)1 << 20)
static tf_status fold_tile(ox_import *im, const ox_node *node, const ox_known *x, const ox_known *k) {
  int64_t shape[TF_MAX_RANK], count = 1;
  if (k->is_float || k->count != x->rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "repeats holds %" PRId64 " values for a rank-%" PRId32 " input",
                   k->count, x->rank);
  for (int32_t a = 0; a < x->rank; a++)
    if (k->ints[a].symbol >= 0 || k->ints[a].size < 0 || !tf_checked_mul_i64(x->shape[a], k->ints[a].size, &shape[a]) ||
        !tf_checked_mul_i64(count, shape[a], &count) || count > TILE_FOLD_LIMIT)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a Tile of a known value to more than %" PRId64 " elements",
                     TILE_FOLD_LIMIT);
  ox_known *out = ox_known_new(x->is_float, x->dtype, x->rank, shape);
  if (!out)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  for (int64_t i = 0; i < count; i++) {
    int64_t at = i, source = 0, stride = 1;
    for (int32_t a = x->rank - 1; a >= 0; a--) {
      source += (at % shape[a]) % x->shape[a] * stride;
      at /= shape[a];
      stride *= x->shape[a];
    }
    if (x->is_float)
      out->reals[i] = x->reals[source];
    else
      out->ints[i] = x->ints[source];
  }
  return ox_set_known(im, node, 0, out);
}

/* Whether a Tile of known x by known repeats k folds: fixed repeats to at most TILE_FOLD_LIMIT elements
 * (malformed repeats too, which fold_tile reports). Otherwise the known value becomes a constant
 * tensor that the graph repeats (zeros of [T, D] repeated over a batch of symbolic size). */
static bool tile_folds(const ox_known *x, const ox_known *k) {
  if (k->is_float || k->count != x->rank)
    return true;
  int64_t count = 1;
  for (int32_t a = 0; a < x->rank; a++)
    if (k->ints[a].symbol >= 0 || k->ints[a].size < 0 || !tf_checked_mul_i64(count, x->shape[a], &count) ||
        !tf_checked_mul_i64(count, k->ints[a].size, &count) || count > TILE_FOLD_LIMIT)
      return false;
  return true;
}

tf_status ox_convert_tile(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *known = ox_foldable(im, node, 0);
  const ox_known *given = ox_is_known(im, ox_input(node, 1)) ? ox_value_find(im, ox_input(node, 1))->known : NULL;
  if (known && given && tile_folds(known, given))
    return fold_tile(im, node, known, given);
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const int32_t rank = ox_rank_of(im, x);
  int64_t repeats[TF_MAX_RANK];
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 1, &k));
  if (k->is_float || k->count != rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "repeats holds %" PRId64 " values for a rank-%" PRId32 " input",
                   k->count, rank);
  TF_RETURN_IF_ERROR(expand_symbolic_repeats(im, node, k, &x, repeats));
  for (int32_t a = 0; a < rank; a++)
    if (repeats[a] < 1 || repeats[a] > 1024)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "repeats %" PRId64 " on axis %" PRId32 " (1 to 1024 only)",
                     repeats[a], a);
  return repeat_axes(im, node, x, repeats, true);
}
