/* ONNX's signal operators (opset 17): DFT, STFT, the Hann, Hamming and Blackman windows and the mel
 * filter bank (MelWeightMatrix).
 *
 * A discrete Fourier transform of length L is a product by a constant matrix, so both transforms are
 * ops tightfit has, and train by their gradients: DFT moves its axis and the real/imaginary channel
 * last, takes them as one row of c n values (c = 1 real, 2 complex; n the samples read, at most L:
 * zero padding adds nothing) and multiplies by the [c n, 2 K] matrix of cosines and sines (K = L, or
 * L / 2 + 1 one-sided), whose columns are the K real parts then the K imaginary ones; STFT is one
 * strided convolution of the signal by the same matrix with the window folded in (a window that is
 * data multiplies it in the graph). Both hold O(L^2) constants: L is bounded by OX_MAX_KNOWN_ELEMENTS.
 * The windows and the filter bank are known values computed here. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "import/onnx_converters.h"

#define TWO_PI 6.283185307179586476925286766559

/* The [c L', 2 K] (DFT) or, `by_tap`, [2 K, c, L'] (STFT) transform matrix for L' = `rows` samples of a
 * length-`length` transform: row (channel ch, sample j), column (part o, bin k) holds the part o of
 * e^{-+2 pi i j k / L} times the channel's unit (1 or i), times `scale`; `window`, if given, weighs
 * sample j. The angle is reduced as the integer j k mod L, so long transforms stay exact to rounding. */
static tf_status transform_matrix(ox_import *im, const ox_node *node, int64_t channels, int64_t rows, int64_t length,
                                  int64_t bins, bool inverse, const ox_known *window, bool by_tap, const char *suffix,
                                  tf_tensor_id *out) {
  const int64_t flat[2] = {channels * rows, 2 * bins}, taps[3] = {2 * bins, channels, rows};
  const int32_t rank = by_tap ? 3 : 2;
  const int64_t *shape = by_tap ? taps : flat;
  ox_known *k = ox_known_new(true, TF_F32, rank, shape);
  if (!k)
    return ox_at(im, node, ox_known_refusal(rank, shape, "a Fourier transform's matrix"));
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / (double)length : 1.0;
  for (int64_t j = 0; j < rows; j++) {
    const double weight = scale * (window ? window->reals[j] : 1.0);
    for (int64_t b = 0; b < bins; b++) {
      const double angle = TWO_PI * (double)((j * b) % length) / (double)length;
      const double c = weight * cos(angle), s = weight * sign * sin(angle);
      /* (a + i b)(cos + i sign sin): real a cos - b sign sin, imaginary a sign sin + b cos */
      const double parts[2][2] = {{c, s}, {-s, c}}; /* [channel][part] */
      for (int64_t ch = 0; ch < channels; ch++)
        for (int64_t o = 0; o < 2; o++) {
          const int64_t at =
              by_tap ? ((o * bins + b) * channels + ch) * rows + j : (ch * rows + j) * 2 * bins + o * bins + b;
          k->reals[at] = parts[ch][o];
        }
    }
  }
  char name[300];
  snprintf(name, sizeof(name), "%s.%s", node->proto->output[0], suffix);
  return ox_known_constant(im, node, name, k, out);
}

/* A known integer input i holding one fixed number, into *value; `what` names it in errors. */
static tf_status one_int(ox_import *im, const ox_node *node, int32_t i, const char *what, int64_t *value) {
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, i, &k));
  if (k->count != 1 || k->is_float || k->ints[0].symbol >= 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its %s must be one fixed integer", what);
  *value = k->ints[0].size;
  return NULL;
}

/* The DFT's axis: the attribute before opset 20, input 2 from it (default -2), normalised. */
static tf_status dft_axis(ox_import *im, const ox_node *node, int32_t rank, int32_t *axis) {
  int64_t a = ox_attr_int(node, "axis", 1);
  if (im->opset >= 20) {
    a = -2;
    if (ox_input(node, 2))
      TF_RETURN_IF_ERROR(one_int(im, node, 2, "axis", &a));
  }
  if (a < 0)
    a += rank;
  if (a < 0 || a > rank - 2)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "axis %" PRId64 " of a rank-%" PRId32 " input (the axes before its last, the real/imaginary one)",
                   a < 0 ? a - rank : a, rank);
  *axis = (int32_t)a;
  return NULL;
}

/* x [..., c] (c = 1 or 2) with axis `axis` of fixed size n, its length-`length` transform along it. */
tf_status ox_convert_dft(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank, axis = 0;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank < 2 || dims[rank - 1].symbol >= 0 || (dims[rank - 1].size != 1 && dims[rank - 1].size != 2))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "its input must end in an axis of 1 (real) or 2 (real, imaginary) values; it has rank %" PRId32,
                   rank);
  TF_RETURN_IF_ERROR(dft_axis(im, node, rank, &axis));
  if (dims[axis].symbol >= 0 || dims[axis].size < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "the transformed axis %" PRId32 " must have a fixed size", axis);
  for (int32_t i = 0; i < rank; i++)
    if (dims[i].size < 0)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its input's axis %" PRId32 " is a product of symbols", i);
  int64_t length = dims[axis].size;
  if (ox_input(node, 1))
    TF_RETURN_IF_ERROR(one_int(im, node, 1, "dft_length", &length));
  if (length < 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "dft_length %" PRId64 " (at least 1)", length);
  const bool inverse = ox_attr_int(node, "inverse", 0) != 0, onesided = ox_attr_int(node, "onesided", 0) != 0;
  const int64_t channels = dims[rank - 1].size, bins = onesided ? length / 2 + 1 : length;
  const int64_t rows = dims[axis].size < length ? dims[axis].size : length;
  tf_graph *g = im->graph;
  if (rows < dims[axis].size)
    x = tf_slice(g, x, axis, 0, rows, 1);
  /* [others..., c, n]: the channel then the transformed axis last, read as one row of c n values */
  int32_t perm[TF_MAX_RANK], back[TF_MAX_RANK], others = 0;
  tf_dim row[TF_MAX_RANK];
  for (int32_t i = 0; i < rank - 1; i++)
    if (i != axis) {
      row[others] = dims[i];
      perm[others++] = i;
    }
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = axis;
  tf_dim split[TF_MAX_RANK];
  for (int32_t i = 0; i < others; i++)
    split[i] = row[i];
  row[others] = tf_fixed(channels * rows);
  split[others] = tf_fixed(2);
  split[others + 1] = tf_fixed(bins);
  /* back from [others..., 2, K]: K to the axis, the parts last */
  for (int32_t i = 0, j = 0; i < rank - 1; i++)
    back[i] = i == axis ? rank - 1 : j++;
  back[rank - 1] = rank - 2;
  tf_tensor_id matrix;
  TF_RETURN_IF_ERROR(transform_matrix(im, node, channels, rows, length, bins, inverse, NULL, false, "dft", &matrix));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32)
    matrix = tf_cast(g, matrix, dtype);
  tf_tensor_id flat = tf_reshape(g, tf_transpose(g, x, perm, rank), tf_shape_from(row, others + 1));
  tf_tensor_id y = tf_reshape(g, tf_matmul(g, flat, matrix, false, false), tf_shape_from(split, others + 2));
  return ox_set_tensor(im, node, 0, tf_transpose(g, y, back, rank));
}

/* STFT's frame length and window: frame_length (input 3) if given, else the window's length, else the
 * signal's; *window the window tensor (TF_NO_TENSOR when absent) and *known its values when known. */
static tf_status stft_frames(ox_import *im, const ox_node *node, int64_t signal, int64_t *frame, tf_tensor_id *window,
                             const ox_known **known) {
  *frame = -1;
  *window = TF_NO_TENSOR;
  *known = NULL;
  if (ox_input(node, 3))
    TF_RETURN_IF_ERROR(one_int(im, node, 3, "frame_length", frame));
  if (ox_input(node, 2)) {
    *known = ox_foldable(im, node, 2);
    if (*known && !(*known)->is_float)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its window must be floating point");
    int32_t rank;
    tf_dim dims[TF_MAX_RANK];
    if (*known) {
      rank = (*known)->rank;
      dims[0] = tf_fixed(rank == 1 ? (*known)->shape[0] : -1);
    } else {
      TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 2, window));
      ox_tensor_dims(im, *window, &rank, dims);
    }
    if (rank != 1 || dims[0].symbol >= 0 || dims[0].size < 1)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its window must be one axis of fixed length");
    if (*frame >= 0 && *frame != dims[0].size)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a window of %" PRId64 " samples for frames of %" PRId64,
                     dims[0].size, *frame);
    *frame = dims[0].size;
  }
  if (*frame < 0)
    *frame = signal;
  if (*frame < 1 || (signal >= 0 && *frame > signal))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "frames of %" PRId64 " samples from a signal of %" PRId64, *frame,
                   signal);
  return NULL;
}

/* signal [B, S, c] (or [B, S], real) into [B, frames, K, 2]: frame f is samples f step .. f step + F - 1, windowed and
 * transformed, all frames one convolution of stride `step` by the [2 K, c, F] transform. */
tf_status ox_convert_stft(ox_import *im, const ox_node *node) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank == 2 && dims[0].size >= 0 && dims[1].size >= 0) { /* [batch, samples]: real (onnxruntime's reading) */
    dims[rank++] = tf_fixed(1);
    x = tf_reshape(im->graph, x, tf_shape_from(dims, rank));
  }
  if (rank != 3 || dims[2].symbol >= 0 || (dims[2].size != 1 && dims[2].size != 2))
    return ox_fail(
        im, node, TF_ERR_INVALID_INPUT,
        "its signal must be [batch, samples, 1 or 2 (real, imaginary)] or [batch, samples]; it has rank %" PRId32,
        rank);
  if (dims[0].size < 0 || dims[1].size < 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its signal's batch and length must be fixed or one symbol each");
  int64_t step, frame;
  TF_RETURN_IF_ERROR(one_int(im, node, 1, "frame_step", &step));
  if (step < 1 || step > INT32_MAX)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "frame_step %" PRId64 " (at least 1)", step);
  tf_tensor_id window;
  const ox_known *known;
  TF_RETURN_IF_ERROR(stft_frames(im, node, dims[1].symbol >= 0 ? -1 : dims[1].size, &frame, &window, &known));
  if (frame < 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a signal of symbolic length needs a frame_length or a window");
  const bool onesided = ox_attr_int(node, "onesided", 1) != 0;
  const int64_t channels = dims[2].size, bins = onesided ? frame / 2 + 1 : frame;
  tf_graph *g = im->graph;
  tf_tensor_id basis;
  TF_RETURN_IF_ERROR(transform_matrix(im, node, channels, frame, frame, bins, false, known, true, "stft", &basis));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (dtype != TF_F32)
    basis = tf_cast(g, basis, dtype);
  if (window != TF_NO_TENSOR) {
    if (ox_dtype_of(im, window) != dtype)
      window = tf_cast(g, window, dtype);
    basis = tf_mul(g, basis, tf_reshape(g, window, TF_SHAPE(tf_fixed(1), tf_fixed(1), tf_fixed(frame))));
  }
  const int32_t to_channels[3] = {0, 2, 1}, to_frames[4] = {0, 3, 2, 1};
  tf_tensor_id y = tf_conv1d(g, tf_transpose(g, x, to_channels, 3), basis, TF_NO_TENSOR, (int32_t)step, 0, 1, 1);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  int32_t yrank;
  tf_dim ydims[TF_MAX_RANK];
  ox_tensor_dims(im, y, &yrank, ydims);
  y = tf_reshape(g, y, TF_SHAPE(ydims[0], tf_fixed(2), tf_fixed(bins), ydims[2]));
  return ox_set_tensor(im, node, 0, tf_transpose(g, y, to_frames, 4));
}

/* The output_datatype attribute's dtype (FLOAT when absent); whether it is a float one. */
static tf_status output_dtype(ox_import *im, const ox_node *node, tf_dtype *dtype, bool *is_float) {
  const int64_t code = ox_attr_int(node, "output_datatype", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
  if (!ox_dtype((int32_t)code, dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "output_datatype %s (%" PRId64 ")", ox_dtype_name((int32_t)code),
                   code);
  *is_float = *dtype == TF_F32 || *dtype == TF_F16 || *dtype == TF_BF16;
  return NULL;
}

/* Entry i of known value k set to v, converted to an integer toward zero where k holds integers. */
static void put(ox_known *k, int64_t i, double v) {
  if (k->is_float)
    k->reals[i] = v;
  else
    k->ints[i] = tf_fixed((int64_t)v);
}

/* Hann, Hamming, Blackman: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or
 * size - 1 (symmetric); a window of one sample is 1 (numpy's and PyTorch's; ONNX's reference gives
 * 0/0 there). */
static tf_status cosine_window(ox_import *im, const ox_node *node, double a0, double a1, double a2) {
  int64_t size;
  TF_RETURN_IF_ERROR(one_int(im, node, 0, "size", &size));
  if (size < 1 || size > OX_MAX_KNOWN_ELEMENTS)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a window of %" PRId64 " samples (1 to %" PRId64 ")", size,
                   OX_MAX_KNOWN_ELEMENTS);
  tf_dtype dtype;
  bool is_float;
  TF_RETURN_IF_ERROR(output_dtype(im, node, &dtype, &is_float));
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_within(is_float, dtype, 1, &size, ox_fold_room(im), "a window", &k));
  const double period = (double)(ox_attr_int(node, "periodic", 1) ? size : size - 1);
  for (int64_t n = 0; n < size; n++) {
    const double t = TWO_PI * (double)n / period;
    put(k, n, size == 1 ? 1.0 : a0 - a1 * cos(t) + a2 * cos(2.0 * t));
  }
  return ox_set_known(im, node, 0, k);
}

tf_status ox_convert_hann_window(ox_import *im, const ox_node *node) { return cosine_window(im, node, 0.5, 0.5, 0.0); }

tf_status ox_convert_hamming_window(ox_import *im, const ox_node *node) {
  return cosine_window(im, node, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

tf_status ox_convert_blackman_window(ox_import *im, const ox_node *node) {
  return cosine_window(im, node, 0.42, 0.5, 0.08);
}

/* A known float input i holding one number, into *value. */
static tf_status one_real(ox_import *im, const ox_node *node, int32_t i, const char *what, double *value) {
  const ox_known *k;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, i, &k));
  if (k->count != 1 || !k->is_float || !isfinite(k->reals[0]))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its %s must be one finite number", what);
  *value = k->reals[0];
  return NULL;
}

/* The mel filter bank [L / 2 + 1, M] as ONNX's reference computes it: M + 2 edges equally spaced in
 * mel(f) = 2595 log10(1 + f / 700) from the lower to the upper edge (a step of the span / (M + 2)),
 * each turned into the bin floor((L + 1) f / rate); filter m rises from edge m to edge m + 1 and falls to
 * edge m + 2, peaking at 1. Computed in f32 as the reference computes its f32 edges. */
tf_status ox_convert_mel_weight_matrix(ox_import *im, const ox_node *node) {
  int64_t mels = 0, length = 0, rate = 0;
  double lower = 0, upper = 0;
  TF_RETURN_IF_ERROR(one_int(im, node, 0, "num_mel_bins", &mels));
  TF_RETURN_IF_ERROR(one_int(im, node, 1, "dft_length", &length));
  TF_RETURN_IF_ERROR(one_int(im, node, 2, "sample_rate", &rate));
  TF_RETURN_IF_ERROR(one_real(im, node, 3, "lower_edge_hertz", &lower));
  TF_RETURN_IF_ERROR(one_real(im, node, 4, "upper_edge_hertz", &upper));
  if (mels < 1 || length < 1 || rate < 1 || mels > OX_MAX_KNOWN_ELEMENTS || length > OX_MAX_KNOWN_ELEMENTS ||
      lower < 0 || upper < lower)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "%" PRId64 " mel bins of a %" PRId64 "-point transform at %" PRId64
                   " Hz from %g to %g Hz (positive counts and rate, 0 <= lower <= upper)",
                   mels, length, rate, lower, upper);
  tf_dtype dtype;
  bool is_float;
  TF_RETURN_IF_ERROR(output_dtype(im, node, &dtype, &is_float));
  const int64_t bins = length / 2 + 1, shape[2] = {bins, mels};
  int64_t *edge = calloc((size_t)(mels + 2), sizeof(*edge));
  if (!edge)
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory for %" PRId64 " mel edges", mels + 2);
  const float low = 2595.0f * log10f(1.0f + (float)lower / 700.0f),
              high = 2595.0f * log10f(1.0f + (float)upper / 700.0f), step = (high - low) / (float)(mels + 2);
  for (int64_t i = 0; i < mels + 2; i++) {
    const float hertz = 700.0f * (powf(10.0f, ((float)i * step + low) / 2595.0f) - 1.0f);
    edge[i] = (int64_t)floorf((float)(length + 1) * hertz / (float)rate);
  }
  if (edge[0] < 0 || edge[mels + 1] >= bins) {
    const int64_t last = edge[mels + 1];
    free(edge);
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "its filters reach bin %" PRId64 " of a %" PRId64 "-point transform's %" PRId64
                   " (the upper edge is past the sample rate's half)",
                   last, length, bins);
  }
  ox_known *k;
  tf_status s = ox_known_within(is_float, dtype, 2, shape, ox_fold_room(im), "a MelWeightMatrix", &k);
  for (int64_t m = 0; !s && m < mels; m++) {
    const int64_t left = edge[m], center = edge[m + 1], right = edge[m + 2];
    if (center == left)
      put(k, center * mels + m, 1.0);
    for (int64_t j = left; center > left && j <= center; j++)
      put(k, j * mels + m, (double)(j - left) / (double)(center - left));
    for (int64_t j = center; j < right; j++)
      put(k, j * mels + m, (double)(right - j) / (double)(right - center));
  }
  free(edge);
  TF_RETURN_IF_ERROR(s);
  return ox_set_known(im, node, 0, k);
}
