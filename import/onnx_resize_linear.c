/* Resize in linear mode (F.interpolate(mode="bilinear", "linear" or "trilinear"): MobileViT's feature
 * maps, segmentation heads, volumetric U-Nets), cubic mode (mode="bicubic": four taps of Keys'
 * kernel with cubic_coeff_a, PyTorch's -0.75, the coordinate not clamped and taps past an edge
 * reading the edge, or left out and the rest renormalised with exclude_outside) and nearest mode
 * where it is no whole-factor repeat (F.interpolate(size=...) to any size: DETR's masks; a shrinking
 * scale; any nearest_mode) over the last one, two or three axes, of fixed sizes, as
 * products with constant interpolation matrices: y = A_h x A_w^T, A_h [OH, H] and A_w [OW, W] (and
 * first A_d [OD, D] times x's planes as rows of H W), each output position a blend
 * of input positions with the weights PyTorch computes (nearest mode: one position, weight 1), so the
 * gradient is the transposed blend. An output position o maps to the input coordinate
 *
 *   half_pixel, pytorch_half_pixel   (o + 0.5) / scale - 0.5, below 0 taken as 0 (align_corners=False;
 *                                    pytorch_half_pixel: 0 where the output has one position)
 *   half_pixel_symmetric (opset 19)  the same plus in / 2 (1 - out / (in scale)): half_pixel
 *                                    centred when scale times in is not a whole number
 *   align_corners                    o (in - 1) / (out - 1)  (0 where out is 1)
 *   asymmetric                       o / scale
 *   tf_half_pixel_for_nn             (o + 0.5) / scale
 *
 * scale = out / in (the scales input's value where it is given). Linear mode blends positions
 * i0 = floor(src) and i1 = min(i0 + 1, in - 1) with weights 1 - (src - i0) and src - i0 (src clamped
 * to [0, in - 1]); nearest mode rounds src by nearest_mode (a whole src is itself) and clamps the
 * position. Axes before the last three must keep their sizes; tf_crop_and_resize is refused, and so is
 * antialias (opset 18) where an axis shrinks in linear or cubic mode (it widens the blend there).
 * Also Resize's target (the scales or the sizes input), which the nearest mode's repeats read too. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"

typedef enum coordinates {
  HALF_PIXEL,
  HALF_PIXEL_SYMMETRIC,
  PYTORCH_HALF_PIXEL,
  ALIGN_CORNERS,
  ASYMMETRIC,
  TF_HALF_PIXEL_FOR_NN
} coordinates;

/* How nearest mode rounds a coordinate to a position (ONNX's nearest_mode; SIMPLE: Resize-10's and
 * Upsample's, floor where the axis grows and ceil where it shrinks). */
typedef enum rounding { ROUND_PREFER_FLOOR, ROUND_PREFER_CEIL, FLOOR, CEIL, SIMPLE } rounding;

/* The taps of one output position: linear, cubic (with Keys' coefficient, and whether taps past an
 * edge are left out and the rest renormalised: exclude_outside) or nearest (one, by `rounding`). */
typedef struct taps {
  enum { LINEAR, CUBIC, NEAREST } kind;
  double cubic_a;
  bool exclude_outside;
  rounding round;
} taps;

/* Resize-10 and Upsample have neither attribute: their mapping and rounding are the old ones. */
static bool old_resize(const ox_import *im, const ox_node *node) {
  return im->opset < 11 || strcmp(node->proto->op_type, "Upsample") == 0;
}

bool ox_resize_mapping_is(const ox_import *im, const ox_node *node, const char *mode) {
  return ox_attr_is(node, "coordinate_transformation_mode", old_resize(im, node) ? "asymmetric" : "half_pixel", mode);
}

bool ox_resize_rounding_is(const ox_import *im, const ox_node *node, const char *mode) {
  return ox_attr_is(node, "nearest_mode", old_resize(im, node) ? "simple" : "round_prefer_floor", mode);
}

static bool coordinates_of(const ox_import *im, const ox_node *node, coordinates *out) {
  static const struct {
    const char *name;
    coordinates mode;
  } modes[] = {{"half_pixel", HALF_PIXEL},
               {"half_pixel_symmetric", HALF_PIXEL_SYMMETRIC},
               {"pytorch_half_pixel", PYTORCH_HALF_PIXEL},
               {"align_corners", ALIGN_CORNERS},
               {"asymmetric", ASYMMETRIC},
               {"tf_half_pixel_for_nn", TF_HALF_PIXEL_FOR_NN}};
  for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
    if (ox_resize_mapping_is(im, node, modes[i].name)) {
      *out = modes[i].mode;
      return true;
    }
  return false;
}

/* The input coordinate of output position o: in [0, in - 1] for linear mode; cubic mode's (`clamp`
 * false) may lie outside, its taps then reading the edge (PyTorch's bicubic, ONNX's cubic). */
static double source_of(coordinates mode, int64_t o, int64_t in, int64_t out, double scale, bool clamp) {
  double src;
  switch (mode) {
  case ALIGN_CORNERS: src = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0.0; break;
  case ASYMMETRIC: src = (double)o / scale; break;
  case TF_HALF_PIXEL_FOR_NN: src = ((double)o + 0.5) / scale; break;
  case PYTORCH_HALF_PIXEL: src = out > 1 ? ((double)o + 0.5) / scale - 0.5 : 0.0; break;
  case HALF_PIXEL_SYMMETRIC: { /* opset 19: centred where out, a whole number, is not in * scale */
    const double adjustment = (double)out / ((double)in * scale);
    src = (double)in / 2 * (1 - adjustment) + ((double)o + 0.5) / scale - 0.5;
    break;
  }
  default: src = ((double)o + 0.5) / scale - 0.5; break;
  }
  if (!clamp)
    return src;
  if (src < 0)
    src = 0;
  return src > (double)(in - 1) ? (double)(in - 1) : src;
}

/* The cubic convolution kernel at distance x with coefficient a (Keys; PyTorch's a = -0.75). */
static double cubic_weight(double x, double a) {
  x = fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  return x < 2 ? ((a * x - 5 * a) * x + 8 * a) * x - 4 * a : 0.0;
}

/* The position nearest mode reads for coordinate src (ONNX's rounding; a whole coordinate is itself),
 * clamped to [0, in - 1]. */
static int64_t nearest_of(double src, rounding round, bool shrinking, int64_t in) {
  const double below = floor(src), t = src - below;
  double at = below;
  if (round == SIMPLE)
    round = shrinking ? CEIL : FLOOR;
  if (t > 0) {
    switch (round) {
    case ROUND_PREFER_FLOOR: at = t <= 0.5 ? below : below + 1; break;
    case ROUND_PREFER_CEIL: at = t < 0.5 ? below : below + 1; break;
    case FLOOR: break;
    case CEIL: at = below + 1; break;
    case SIMPLE: break;
    }
  }
  return at < 0 ? 0 : at > (double)(in - 1) ? in - 1 : (int64_t)at;
}

/* Row o of a cubic blend: four taps of Keys' kernel around src, those past an edge reading the edge,
 * or (exclude_outside) left out and the others scaled to sum to 1. */
static void cubic_row(double *row, double src, const taps *how, int64_t in) {
  const int64_t i0 = (int64_t)floor(src);
  const double t = src - (double)i0;
  double kept = 0, weights[4];
  for (int64_t tap = -1; tap <= 2; tap++) {
    weights[tap + 1] = cubic_weight(t - (double)tap, how->cubic_a);
    if (i0 + tap >= 0 && i0 + tap <= in - 1)
      kept += weights[tap + 1];
  }
  for (int64_t tap = -1; tap <= 2; tap++) {
    const int64_t i = i0 + tap < 0 ? 0 : i0 + tap > in - 1 ? in - 1 : i0 + tap;
    if (!how->exclude_outside)
      row[i] += weights[tap + 1];
    else if (i == i0 + tap && kept != 0)
      row[i] += weights[tap + 1] / kept;
  }
}

/* The [out, in] matrix of the blend along one axis, as a graph constant: two taps per output in
 * linear mode, four in cubic mode, one in nearest mode. */
static tf_status blend_matrix(ox_import *im, const ox_node *node, coordinates mode, const taps *how, int64_t in,
                              int64_t out, double scale, const char *suffix, tf_tensor_id *matrix) {
  const int64_t shape[2] = {out, in};
  ox_known *k = ox_known_new(true, TF_F32, 2, shape);
  if (!k)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for a %" PRId64 " x %" PRId64 " interpolation matrix",
                   out, in);
  for (int64_t o = 0; o < out; o++) {
    double *row = k->reals + o * in;
    const double src = source_of(mode, o, in, out, scale, how->kind == LINEAR);
    if (how->kind == NEAREST) {
      row[nearest_of(src, how->round, scale < 1, in)] = 1.0;
    } else if (how->kind == CUBIC) {
      cubic_row(row, src, how, in);
    } else {
      const int64_t i0 = (int64_t)floor(src), i1 = i0 + 1 < in ? i0 + 1 : in - 1;
      const double t = src - (double)i0;
      row[i0] += 1.0 - t;
      row[i1] += t;
    }
  }
  char name[300];
  snprintf(name, sizeof(name), "%s.%s", node->proto->output[0], suffix);
  return ox_known_constant(im, node, name, k, matrix);
}

tf_status ox_resize_target(ox_import *im, const ox_node *node, int32_t rank, const ox_known **scales,
                           const ox_known **sizes) {
  const int32_t scales_at = im->opset < 11 ? 1 : 2, sizes_at = 3;
  const ox_value *given = ox_input(node, scales_at) ? ox_value_find(im, ox_input(node, scales_at)) : NULL;
  const bool no_scales = given && given->known && given->known->count == 0 && ox_input(node, sizes_at);
  *scales = *sizes = NULL;
  if (ox_input(node, scales_at) && !no_scales) { /* (an empty scales beside sizes: torch's size= export) */
    TF_RETURN_IF_ERROR(ox_known_of(im, node, scales_at, scales));
    if (!(*scales)->is_float || (*scales)->count != rank)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "scales must hold %" PRId32 " floats", rank);
    return NULL;
  }
  if (!ox_input(node, sizes_at))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "neither scales nor sizes is given");
  TF_RETURN_IF_ERROR(ox_known_of(im, node, sizes_at, sizes));
  if ((*sizes)->is_float || (*sizes)->count != rank)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "sizes must hold %" PRId32 " integers", rank);
  return NULL;
}

/* The output sizes and scales of x's axes from the scales (floats) or the sizes input, and which
 * axes keep their size (a symbolic one too). */
static tf_status sizes_of(ox_import *im, const ox_node *node, int32_t rank, const tf_dim *dims, int64_t *out,
                          double *scale, bool *kept) {
  const ox_known *scales, *sizes;
  TF_RETURN_IF_ERROR(ox_resize_target(im, node, rank, &scales, &sizes));
  for (int32_t a = 0; a < rank; a++) {
    if (scales) {
      if (!(scales->reals[a] > 0 && scales->reals[a] <= 1024))
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "scale %g on axis %" PRId32 " (0 to 1024 only)", scales->reals[a],
                       a);
      scale[a] = scales->reals[a];
      /* in f32, as onnxruntime multiplies (5 x 1.4f is 7 there, 6.99999988 in f64) */
      out[a] = dims[a].symbol >= 0 ? -1 : (int64_t)floorf((float)dims[a].size * (float)scales->reals[a]);
      kept[a] = scales->reals[a] == 1.0;
      continue;
    }
    kept[a] = sizes->ints[a].symbol == dims[a].symbol && sizes->ints[a].size == dims[a].size;
    out[a] = sizes->ints[a].symbol < 0 ? sizes->ints[a].size : -1;
    scale[a] = dims[a].symbol < 0 && dims[a].size > 0 && out[a] > 0 ? (double)out[a] / (double)dims[a].size : 1.0;
  }
  return NULL;
}

/* The node's mode as taps (linear, cubic or nearest with its rounding). */
static tf_status taps_of(ox_import *im, const ox_node *node, taps *how) {
  static const char *const roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"};
  *how = (taps){.kind = LINEAR,
                .cubic_a = ox_attr_float(node, "cubic_coeff_a", -0.75),
                .exclude_outside = ox_attr_int(node, "exclude_outside", 0) != 0};
  if (ox_attr_is(node, "mode", "nearest", "cubic")) {
    how->kind = CUBIC;
    if (!isfinite(how->cubic_a))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "cubic mode with a non-finite cubic_coeff_a");
  } else if (ox_attr_is(node, "mode", "nearest", "nearest")) {
    how->kind = NEAREST;
    for (size_t i = 0; i < sizeof(roundings) / sizeof(roundings[0]); i++)
      if (ox_resize_rounding_is(im, node, roundings[i])) {
        how->round = (rounding)i;
        return NULL;
      }
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "nearest_mode is none of round_prefer_floor, round_prefer_ceil, floor and ceil");
  }
  return NULL;
}

tf_status ox_convert_resize_linear(ox_import *im, const ox_node *node, tf_tensor_id x) {
  coordinates mode;
  if (!coordinates_of(im, node, &mode))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "this coordinate_transformation_mode (half_pixel, half_pixel_symmetric, pytorch_half_pixel, "
                   "align_corners, asymmetric or tf_half_pixel_for_nn; tf_crop_and_resize is not supported)");
  taps how;
  TF_RETURN_IF_ERROR(taps_of(im, node, &how));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  int64_t out[TF_MAX_RANK];
  double scale[TF_MAX_RANK];
  bool kept[TF_MAX_RANK];
  TF_RETURN_IF_ERROR(sizes_of(im, node, rank, dims, out, scale, kept));
  for (int32_t a = 0; a < rank; a++) {
    if (kept[a])
      continue;
    if (a < rank - 3 || (a == rank - 3 && (dims[rank - 2].symbol >= 0 || dims[rank - 1].symbol >= 0)))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "resizing axis %" PRId32 " (only the last three axes, as F.interpolate does; the "
                     "third from last with the last two of fixed sizes)",
                     a);
    if (dims[a].symbol >= 0 || dims[a].size < 1 || out[a] < 1 || out[a] > ((int64_t)1 << 16))
      return ox_fail(
          im, node, TF_ERR_UNSUPPORTED,
          "resizing axis %" PRId32
          " (other than by a whole factor in nearest mode) from a symbolic size or to a size outside 1..65536",
          a);
    if (scale[a] < 1 && how.kind != NEAREST && ox_attr_int(node, "antialias", 0) != 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "antialias=1 while shrinking axis %" PRId32 " (scale %g; antialiased linear resizing is not "
                     "supported)",
                     a, scale[a]);
  }
  tf_tensor_id y = x;
  const int32_t depth = rank - 3, rows = rank - 2, columns = rank - 1;
  if (rank >= 3 && !kept[depth]) { /* A_d y over the planes, each [H, W] plane one row */
    tf_tensor_id a_d;
    TF_RETURN_IF_ERROR(
        blend_matrix(im, node, mode, &how, dims[depth].size, out[depth], scale[depth], "planes_blend", &a_d));
    tf_dim flat[TF_MAX_RANK];
    for (int32_t i = 0; i < rank; i++)
      flat[i] = dims[i];
    flat[rows] = tf_fixed(dims[rows].size * dims[columns].size);
    y = tf_matmul(im->graph, a_d, tf_reshape(im->graph, y, tf_shape_from(flat, rank - 1)), false, false);
    flat[depth] = tf_fixed(out[depth]);
    flat[rows] = dims[rows];
    flat[columns] = dims[columns];
    y = tf_reshape(im->graph, y, tf_shape_from(flat, rank));
  }
  if (rank >= 2 && !kept[rows]) { /* A_h y over the rows */
    tf_tensor_id a_h;
    TF_RETURN_IF_ERROR(blend_matrix(im, node, mode, &how, dims[rows].size, out[rows], scale[rows], "rows_blend", &a_h));
    y = tf_matmul(im->graph, a_h, y, false, false);
  }
  if (rank >= 1 && !kept[columns]) { /* y A_w^T over the columns */
    tf_tensor_id a_w;
    TF_RETURN_IF_ERROR(
        blend_matrix(im, node, mode, &how, dims[columns].size, out[columns], scale[columns], "columns_blend", &a_w));
    y = tf_matmul(im->graph, y, a_w, false, true);
  }
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, y);
}
