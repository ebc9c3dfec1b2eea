/* The importer's converters stage (import/stages.txt): one converter per ONNX operator type, which
 * stores every output of its node as a graph tensor or a known value (folding when the inputs are
 * known at import time); the dispatch table (onnx_ops.c) picks them. Their shared helpers are
 * onnx_convert.h. A converter may call another one (Cast to BOOL is a mask) but no higher stage. */
#ifndef TIGHTFIT_IMPORT_ONNX_CONVERTERS_H
#define TIGHTFIT_IMPORT_ONNX_CONVERTERS_H

#include "import/onnx_convert.h"

/* onnx_elementwise.c: the element-wise operators tightfit has an op for, folded on known operands
 * where they are arithmetic, and composites of ops for the others (the file's top comment). */
tf_status ox_convert_add(ox_import *im, const ox_node *node);
tf_status ox_convert_sub(ox_import *im, const ox_node *node);
tf_status ox_convert_mul(ox_import *im, const ox_node *node);
tf_status ox_convert_div(ox_import *im, const ox_node *node);
tf_status ox_convert_pow(ox_import *im, const ox_node *node);
/* x^p where the exponent p is data or holds several values (import/onnx_pow.c), broadcast; integer x
 * computed in f32 and rounded back to its dtype. */
tf_status ox_pow_of_data(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id p, tf_tensor_id *y);
/* True when `op_type` is one row of the unary_ops table (Relu, Sigmoid, ...): ox_convert_unary's. */
bool ox_is_unary(const char *op_type);
tf_status ox_convert_unary(ox_import *im, const ox_node *node);
tf_status ox_convert_leaky_relu(ox_import *im, const ox_node *node);
tf_status ox_convert_sqrt(ox_import *im, const ox_node *node);
/* onnx_functions.c: Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh: folded, or the op
 * of that name. */
tf_status ox_convert_trigonometric(ox_import *im, const ox_node *node);
/* Sign, Ceil, Floor and Round: of known values folded (DeBERTa-v2's log-bucketed relative positions);
 * of data the ops of those names. */
tf_status ox_convert_sign(ox_import *im, const ox_node *node);
tf_status ox_convert_ceil(ox_import *im, const ox_node *node);
tf_status ox_convert_floor(ox_import *im, const ox_node *node);
tf_status ox_convert_round(ox_import *im, const ox_node *node);
tf_status ox_convert_gelu(ox_import *im, const ox_node *node);
tf_status ox_convert_max(ox_import *im, const ox_node *node);
tf_status ox_convert_min(ox_import *im, const ox_node *node);
tf_status ox_convert_clip(ox_import *im, const ox_node *node);
tf_status ox_convert_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_mean(ox_import *im, const ox_node *node);
tf_status ox_convert_reciprocal(ox_import *im, const ox_node *node);
tf_status ox_convert_softsign(ox_import *im, const ox_node *node);
tf_status ox_convert_hard_sigmoid(ox_import *im, const ox_node *node);
tf_status ox_convert_hard_swish(ox_import *im, const ox_node *node);
tf_status ox_convert_elu(ox_import *im, const ox_node *node);
tf_status ox_convert_selu(ox_import *im, const ox_node *node);
tf_status ox_convert_celu(ox_import *im, const ox_node *node);
tf_status ox_convert_prelu(ox_import *im, const ox_node *node);
tf_status ox_convert_thresholded_relu(ox_import *im, const ox_node *node);
tf_status ox_convert_shrink(ox_import *im, const ox_node *node);
tf_status ox_convert_mish(ox_import *im, const ox_node *node);
tf_status ox_convert_size(ox_import *im, const ox_node *node);
/* Mod: folded on values known at import time; of data, a - b floor(a / b) or C's fmod in f32. */
tf_status ox_convert_mod(ox_import *im, const ox_node *node);

/* onnx_mask.c: Equal, Where and Not folded on known values; on data, masks as f32 0/1 tensors (Equal
 * of data with a constant, Not, Cast to BOOL, Where with one constant branch: masked_fill). */
tf_status ox_convert_equal(ox_import *im, const ox_node *node);
tf_status ox_convert_greater(ox_import *im, const ox_node *node);
tf_status ox_convert_less(ox_import *im, const ox_node *node);
tf_status ox_convert_greater_or_equal(ox_import *im, const ox_node *node);
tf_status ox_convert_less_or_equal(ox_import *im, const ox_node *node);
tf_status ox_convert_where(ox_import *im, const ox_node *node);
tf_status ox_convert_not(ox_import *im, const ox_node *node);
/* IsNaN, IsInf: 0/1 masks of the values that are not finite (onnx_finite.c). */
tf_status ox_convert_isnan(ox_import *im, const ox_node *node);
tf_status ox_convert_isinf(ox_import *im, const ox_node *node);
/* isnan(x) of float data x as a 0/1 mask of x's dtype: keep(1, c - c) of c = clip(x, -1, 1). */
tf_tensor_id ox_nan_mask(ox_import *im, const ox_node *node, tf_tensor_id x);
/* 1 where d is nonzero or NaN, 0 where it is 0, in d's dtype: keep(1, d) (onnx_finite.c). */
tf_tensor_id ox_nonzero_of(ox_import *im, const ox_node *node, tf_tensor_id d);
/* The constant v where the 0/1 mask m is 1, 0 where it is 0, in `dtype` (m's): m v, or for an infinity
 * -log(1 - m) or log(1 - m) (log 0 = -inf, log 1 = 0), since inf * 0 is NaN (onnx_mask.c). */
tf_tensor_id ox_mask_fill(ox_import *im, const ox_node *node, tf_tensor_id m, double v, tf_dtype dtype);
/* sign(keep(x, isinf(x))) of float data x: 1 at +inf, -1 at -inf, 0 elsewhere (a NaN too). */
tf_tensor_id ox_inf_sign(ox_import *im, const ox_node *node, tf_tensor_id x);
/* And, Or, Xor: folded on known values; of masks, products and sums of 0/1 tensors. */
tf_status ox_convert_and(ox_import *im, const ox_node *node);
tf_status ox_convert_or(ox_import *im, const ox_node *node);
tf_status ox_convert_xor(ox_import *im, const ox_node *node);
/* Cast to BOOL of data (ox_convert_cast's): nonzero as an f32 0/1 mask. */
tf_status ox_convert_mask_cast(ox_import *im, const ox_node *node);
/* Input i of `node` as an f32 tensor of 0s and 1s: 1 where it is nonzero (any dtype; a mask stays itself). */
tf_status ox_nonzero_mask(ox_import *im, const ox_node *node, int32_t i, tf_tensor_id *out) TF_MUST_USE;

/* onnx_masked.c: boolean indexing reduced to a number (x[mask] into element-wise ops and a sum or
 * mean of all the selected values), computed densely. */
typedef tf_status (*ox_converter)(ox_import *im, const ox_node *node);
/* NonZero: a selection (its mask, no tensor), which only Transpose and GatherND may read. */
tf_status ox_convert_nonzero(ox_import *im, const ox_node *node);
/* GatherND by a selection: the whole data tensor, masked. */
tf_status ox_convert_gather_nd(ox_import *im, const ox_node *node);
/* onnx_random.c: random draws (tightfit's own numbers, from dropout's RNG): uniform, normal, Bernoulli. */
tf_status ox_convert_random_uniform(ox_import *im, const ox_node *node);
tf_status ox_convert_random_uniform_like(ox_import *im, const ox_node *node);
tf_status ox_convert_random_normal(ox_import *im, const ox_node *node);
tf_status ox_convert_random_normal_like(ox_import *im, const ox_node *node);
tf_status ox_convert_bernoulli(ox_import *im, const ox_node *node);
/* onnx_scatter_computed.c: ScatterND of data by computed indices, reduction none or add (a one-hot of the
 * positions). */
tf_status ox_scatter_nd_computed(ox_import *im, const ox_node *node);
/* Whether input i of `node` is zeros known at import or a graph constant filled with 0: a scatter into it
 * with reduction none is how torch exports index_put_(accumulate=True) and scatter_add_ (their updates
 * summed where positions repeat). */
bool ox_is_zero_fill(ox_import *im, const ox_node *node, int32_t i);
/* What a scatter with reduction none writes where `hits` updates (summed into `put`) land: their mean
 * (put / max(1, hits); `kept` is relu(1 - hits)), each update's gradient the whole output gradient there,
 * as PyTorch's index_put and scatter give (put + stop_gradient(mean - put)). */
tf_tensor_id ox_mean_of_writes(ox_import *im, tf_tensor_id put, tf_tensor_id hits, tf_tensor_id kept);
/* onnx_gather_nd.c: GatherND by indices known at import (the same tuples at every batch position). */
tf_status ox_gather_nd_known(ox_import *im, const ox_node *node);
/* Emits `node` through `convert`, or refuses it, where it reads a selection or a masked value:
 * element-wise ops keep the mask, ReduceSum/ReduceMean of all elements weigh by it. */
tf_status ox_masked_emit(ox_import *im, const ox_node *node, ox_converter convert) TF_MUST_USE;
/* onnx_legacy.c: a default-domain node of a model of opset 1 to 6 by `convert` (its opset-7 converter) where
 * its definition then was opset 7's or is rewritten to it, else refused naming the operator and opset. */
tf_status ox_legacy_emit(ox_import *im, const ox_node *node, ox_converter convert) TF_MUST_USE;

/* a == b of f32 tensors (b broadcast) as an f32 0/1 mask, relu(1 - |a - b|), |a - b| scaled by 2^149
 * first where `scaled` (floats: the smallest nonzero difference, a subnormal, then reaches 1). */
tf_tensor_id ox_equal_mask(ox_import *im, const ox_node *node, tf_tensor_id a, tf_tensor_id b, bool scaled);

/* onnx_indices.c: indices computed at run time into an axis of fixed size (the file's top comment). */
/* Indices read as f32 are exact below this; the axis must be shorter. */
#define OX_INDEX_EXACT_LIMIT ((int64_t)1 << 24)
/* Integer `indices` into an axis of `size`: *wrapped, f32, negative ones counted from the end; *poison,
 * f32 of their shape, 0 where the index is in [-size, size) and +inf elsewhere (to add to what is read). */
tf_status ox_wrapped_indices(ox_import *im, const ox_node *node, tf_tensor_id indices, int64_t size,
                             tf_tensor_id *wrapped, tf_tensor_id *poison);
/* The one-hot [..., size] f32 of `wrapped` [...] (from ox_wrapped_indices): zero rows where out of range. */
tf_status ox_one_hot_of(ox_import *im, const ox_node *node, tf_tensor_id wrapped, int64_t size, tf_tensor_id *out);
/* perm moves `axis` of a rank-`rank` tensor last, the others kept in order; back undoes it. */
void ox_axis_last(int32_t rank, int32_t axis, int32_t *perm, int32_t *back);
/* GatherElements' and ScatterElements' operands with their axis moved last (ox_along_last). */
typedef struct ox_along {
  int32_t rank, axis;        /* the data's, axis normalised */
  int64_t length;            /* A: the data's axis, fixed */
  tf_dim count;              /* K: the indices' axis */
  tf_dim dims[TF_MAX_RANK];  /* the data's, in its order */
  int32_t perm[TF_MAX_RANK]; /* axis last */
  int32_t back[TF_MAX_RANK]; /* its inverse */
  bool identity;             /* axis already last: no transposes */
  tf_tensor_id data;         /* [..., A] */
  tf_tensor_id one_hot;      /* [..., K, A], the data's dtype */
  tf_tensor_id poison;       /* [..., K] f32 (ox_wrapped_indices) */
} ox_along;
/* Data and computed indices of one rank whose axes other than `axis` (the attribute as written) are the data's: moved
 * so that axis is last, the indices one-hot over the data's (fixed) length along it. */
tf_status ox_along_last(ox_import *im, const ox_node *node, tf_tensor_id data, tf_tensor_id indices, int64_t axis,
                        ox_along *out);
/* y in ox_along's order moved back to the data's. */
tf_tensor_id ox_along_back(ox_import *im, const ox_along *a, tf_tensor_id y);

/* onnx_dense.c */
tf_status ox_convert_matmul(ox_import *im, const ox_node *node);
tf_status ox_convert_gemm(ox_import *im, const ox_node *node);
tf_status ox_convert_softmax(ox_import *im, const ox_node *node);
tf_status ox_convert_log_softmax(ox_import *im, const ox_node *node);
tf_status ox_convert_layer_norm(ox_import *im, const ox_node *node);
tf_status ox_convert_dropout(ox_import *im, const ox_node *node);

/* onnx_conv.c */
tf_status ox_convert_conv(ox_import *im, const ox_node *node);
/* onnx_conv3d.c: 3-d convolution and pooling as 2-d ops over the depth planes; each sets the node's
 * output. A Conv's attributes (depth, height, width; its pads already symmetric): */
typedef struct ox_conv3d_attrs {
  int32_t stride[3], padding[3], dilation[3], output_padding[3];
  int32_t groups;
} ox_conv3d_attrs;
/* x [N, C, D, H, W]: one conv2d over its depth taps stacked beside the channels. */
tf_status ox_conv3d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                    const ox_conv3d_attrs *a);
/* x [N, C, D, H, W]: one conv_transpose2d over its planes for every depth tap, the taps spread to
 * their output planes and summed. */
tf_status ox_conv_transpose3d(ox_import *im, const ox_node *node, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                              const ox_conv3d_attrs *a);
/* x [N, C, D, H, W]: `op` (max_pool2d or avg_pool2d, `plane` its height and width) over each plane,
 * then the depth window (kernel, stride, padding) max- or mean-reduced. */
tf_status ox_pool3d(ox_import *im, const ox_node *node, tf_op op, tf_tensor_id x, const tf_pool_attrs *plane,
                    int32_t kernel, int32_t stride, int32_t padding);
tf_status ox_convert_conv_transpose(ox_import *im, const ox_node *node);
tf_status ox_convert_max_pool(ox_import *im, const ox_node *node);
tf_status ox_convert_average_pool(ox_import *im, const ox_node *node);
tf_status ox_convert_global_average_pool(ox_import *im, const ox_node *node);
tf_status ox_convert_global_max_pool(ox_import *im, const ox_node *node);

/* onnx_reduce.c: the Reduce* operators. */
tf_status ox_convert_reduce_mean(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_max(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_min(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_l2(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_l1(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_sum_square(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_prod(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_log_sum(ox_import *im, const ox_node *node);
tf_status ox_convert_reduce_log_sum_exp(ox_import *im, const ox_node *node);

/* onnx_loss.c: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the cross_entropy op, or labels
 * through a one-hot embedding table). */
tf_status ox_convert_nll_loss(ox_import *im, const ox_node *node);
tf_status ox_convert_softmax_cross_entropy_loss(ox_import *im, const ox_node *node);
/* The patterns stage's OX_NLL_OF_LOG_SOFTMAX: the cross_entropy op of z where the LogSoftmax was
 * over the classes, else the loss of log_softmax(z) over its axis. */
tf_status ox_convert_nll_of_log_softmax(ox_import *im, const ox_node *node);

/* onnx_batch_norm.c, onnx_instance_norm.c */
tf_status ox_convert_batch_norm(ox_import *im, const ox_node *node);
tf_status ox_convert_instance_norm(ox_import *im, const ox_node *node);
/* MeanVarianceNormalization: (x - mean) / (sqrt(biased variance) + 1e-9) over its axes. */
tf_status ox_convert_mean_variance_norm(ox_import *im, const ox_node *node);
/* LRN across channels (import/onnx_lrn.c): x / (bias + alpha / size * window sums of x^2)^beta. */
tf_status ox_convert_lrn(ox_import *im, const ox_node *node);
/* import/onnx_grid_sample.c: GridSample (2-d; bilinear or nearest; zeros, border or reflection padding) as
 * a product by the [N, P, H W] matrix of its taps' weights. */
tf_status ox_convert_grid_sample(ox_import *im, const ox_node *node);
/* import/onnx_signal.c: DFT (a product by the transform's matrix) and STFT (a strided convolution by it),
 * any dtype the input has; the windows and the mel filter bank, known values. */
tf_status ox_convert_dft(ox_import *im, const ox_node *node);
tf_status ox_convert_stft(ox_import *im, const ox_node *node);
tf_status ox_convert_hann_window(ox_import *im, const ox_node *node);
tf_status ox_convert_hamming_window(ox_import *im, const ox_node *node);
tf_status ox_convert_blackman_window(ox_import *im, const ox_node *node);
tf_status ox_convert_mel_weight_matrix(ox_import *im, const ox_node *node);

/* onnx_empty.c: values with no elements. */
/* An elementwise node of an input with no elements: its outputs have none (*emitted), as onnx_empty.c says. */
tf_status ox_emit_of_empty(ox_import *im, const ox_node *node, bool *emitted) TF_MUST_USE;
/* Output 0 of a layout op of x, a value with no elements, as the one of `target` (rank axes; one {-1, -1}
 * becomes 0, where the others hold elements): no elements either. */
tf_status ox_set_empty_shaped(ox_import *im, const ox_node *node, const ox_empty *x, const tf_dim *target,
                              int32_t rank) TF_MUST_USE;

/* onnx_layout.c */
/* The node's output: x reshaped to `rank` dims, each fixed, symbolic, or {-1, -1} (inferred; one at
 * most, else an error naming the node). */
tf_status ox_reshape_to(ox_import *im, const ox_node *node, tf_tensor_id x, const tf_dim *dims, int32_t rank);
tf_status ox_convert_reshape(ox_import *im, const ox_node *node);
tf_status ox_convert_flatten(ox_import *im, const ox_node *node);
tf_status ox_convert_unsqueeze(ox_import *im, const ox_node *node);
tf_status ox_convert_squeeze(ox_import *im, const ox_node *node);
tf_status ox_convert_transpose(ox_import *im, const ox_node *node);
/* The product of dims[from, to) as one dim (a symbol at most once, times a number), or {-1, -1} where it
 * is a product of symbols; a fixed 0 where any of them is 0. */
tf_dim ox_dims_product(const tf_dim *dims, int32_t from, int32_t to);
tf_status ox_convert_concat(ox_import *im, const ox_node *node);
tf_status ox_convert_slice(ox_import *im, const ox_node *node);
tf_status ox_convert_split(ox_import *im, const ox_node *node);
tf_status ox_convert_expand(ox_import *im, const ox_node *node);
tf_status ox_convert_cast(ox_import *im, const ox_node *node);
tf_status ox_convert_cast_like(ox_import *im, const ox_node *node);
tf_status ox_convert_pad(ox_import *im, const ox_node *node);
/* x with `before` and `after` elements of `value` on `axis` (each >= 0): a concat with constants
 * expanded to x's other sizes (a symbolic batch too). */
tf_tensor_id ox_pad_axis(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t before,
                         int64_t after, double value);

/* onnx_axis_copies.c: an axis of fixed size rebuilt from slices of its elements: Pad's modes other
 * than constant, and Slice with a negative step */
typedef enum ox_pad_mode { OX_PAD_CONSTANT, OX_PAD_REFLECT, OX_PAD_EDGE, OX_PAD_WRAP } ox_pad_mode;
/* x with `before` and `after` (>= 0) elements on `axis` copied from x as `mode` (not constant) says:
 * slices of x concatenated with it, into *out; an error naming the node for a symbolic axis, a
 * reflection as wide as the axis, a wrap wider than it. */
tf_status ox_pad_copies(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t before, int64_t after,
                        ox_pad_mode mode, tf_tensor_id *out) TF_MUST_USE;
/* x's elements start, start + step, ... (step < 0; ONNX's clamping of start and end) along `axis` of
 * fixed size, as a concat of one-element slices (torch.flip, x[::-1]), into *out; an error naming the
 * node for a symbolic axis, an empty result, or more than OX_SLICE_COPIES_MAX elements. */
#define OX_SLICE_COPIES_MAX 4096
tf_status ox_slice_backwards(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t axis, int64_t start,
                             int64_t end, int64_t step, tf_tensor_id *out) TF_MUST_USE;

/* onnx_gather.c: Gather */
tf_status ox_convert_gather(ox_import *im, const ox_node *node);

/* onnx_scatter.c: ScatterND, folded or of data as a slice assignment */
tf_status ox_convert_scatter_nd(ox_import *im, const ox_node *node);

/* onnx_scatter_elements.c: ScatterElements and Scatter (reductions none and add) by any indices, as
 * one-hot products. */
tf_status ox_convert_scatter_elements(ox_import *im, const ox_node *node);

/* onnx_gather_elements.c: GatherElements by known (or known, expanded) indices: an embedding lookup;
 * by computed ones a one-hot product */
tf_status ox_convert_gather_elements(ox_import *im, const ox_node *node);

/* onnx_einsum.c: Einsum as transposes, reshapes, sums and batched matmuls */
tf_status ox_convert_einsum(ox_import *im, const ox_node *node);

/* onnx_constants.c */
tf_status ox_convert_identity(ox_import *im, const ox_node *node);
tf_status ox_convert_stop_gradient(ox_import *im, const ox_node *node);
tf_status ox_convert_constant(ox_import *im, const ox_node *node);
tf_status ox_convert_shape(ox_import *im, const ox_node *node);
tf_status ox_convert_range(ox_import *im, const ox_node *node);
tf_status ox_convert_constant_of_shape(ox_import *im, const ox_node *node);
tf_status ox_convert_one_hot(ox_import *im, const ox_node *node);
/* EyeLike of a 2-d input of fixed shape (torch.eye(n) of a known n): a known value, ones on diagonal
 * k, of the dtype attribute's type or the input's. */
tf_status ox_convert_eye_like(ox_import *im, const ox_node *node);

/* onnx_repeat.c: Resize, and Upsample (opset 9: its scales an input; Resize-10's mappings) */
tf_status ox_convert_resize(ox_import *im, const ox_node *node);
tf_status ox_convert_tile(ox_import *im, const ox_node *node);

/* onnx_resize_linear.c. Resize's target for a rank-`rank` input: its known scales (floats, one per
 * axis) or, where none are given (or an empty scales beside sizes: torch's size= export), its known
 * sizes (integers, one per axis); the other NULL. */
tf_status ox_resize_target(ox_import *im, const ox_node *node, int32_t rank, const ox_known **scales,
                           const ox_known **sizes) TF_MUST_USE;
/* Resize in linear, cubic or nearest mode of data x, over its last three axes of fixed sizes, as
 * products with constant interpolation matrices. */
tf_status ox_convert_resize_linear(ox_import *im, const ox_node *node, tf_tensor_id x);
/* Whether the node's coordinate_transformation_mode is `mode`: the attribute, else half_pixel for
 * Resize from opset 11 and asymmetric for Resize-10 and Upsample (which have no such attribute). */
bool ox_resize_mapping_is(const ox_import *im, const ox_node *node, const char *mode);
/* Whether the node's nearest_mode is `mode`: the attribute, else round_prefer_floor from opset 11 and
 * "simple" before (Resize-10 and Upsample: floor where an axis grows, ceil where it shrinks, as
 * onnxruntime runs them). */
bool ox_resize_rounding_is(const ox_import *im, const ox_node *node, const char *mode);

/* onnx_triangle.c: Trilu folded on a known value; on data with fixed last two axes, times a 0/1
 * triangle. */
tf_status ox_convert_trilu(ox_import *im, const ox_node *node);
tf_status ox_convert_cumsum(ox_import *im, const ox_node *node);

/* onnx_recurrent.c: LSTM, GRU and RNN nodes, unrolled over a fixed time axis (tf_lstm / tf_gru /
 * tf_rnn); refused with a reason: a symbolic time axis, shorter sequence_lens, peepholes, clip, other
 * activations, input_forget. */
tf_status ox_convert_lstm(ox_import *im, const ox_node *node);
tf_status ox_convert_gru(ox_import *im, const ox_node *node);
tf_status ox_convert_rnn(ox_import *im, const ox_node *node);

/* onnx_argmax.c: ArgMax and ArgMin of float data along a fixed axis, composed of max, sub, abs, mul,
 * relu and a cast to i64 (no gradient) */
tf_status ox_convert_arg_max(ox_import *im, const ox_node *node);
tf_status ox_convert_arg_min(ox_import *im, const ox_node *node);
/* Hardmax: the one-hot of the first maximum along the axis (onnx_argmax.c). */
tf_status ox_convert_hardmax(ox_import *im, const ox_node *node);
/* TopK of data by a known k (a mixture of experts' router): k rounds of ArgMax's first maximum, each
 * value gathered by its one-hot (the gradient reaches the chosen positions, as PyTorch's). */
tf_status ox_convert_top_k(ox_import *im, const ox_node *node);

/* onnx_depth_space.c: DepthToSpace (DCR, CRD) and SpaceToDepth on [N, C, H, W] data with a fixed C. */
tf_status ox_convert_depth_to_space(ox_import *im, const ox_node *node);
tf_status ox_convert_space_to_depth(ox_import *im, const ox_node *node);

/* onnx_fused.c: a node the patterns stage fused (ox_node.fused other than OX_PLAIN). */
tf_status ox_convert_fused(ox_import *im, const ox_node *node);

#endif
