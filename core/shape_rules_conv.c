/* Shape rules of the sliding-window ops: conv1d, conv2d, conv_transpose2d, max/avg pool2d.
 * Spatial lengths follow PyTorch's formulas; every step is overflow-checked because a loaded file
 * may hold any int64 dim and any int32 stride, padding or dilation. */
#include <inttypes.h>

#include "core/shape_rules_internal.h"

static const char *const spatial_names[2] = {"height", "width"};

/* One spatial axis of an op: where it is in x and what to call it in messages. */
typedef struct spatial_axis {
  const tf_shape_operand *x;
  int32_t axis;      /* in x */
  const char *label; /* "length", "height", "width" */
} spatial_axis;

static const char *axis_label(int32_t n_spatial, int32_t i) { return n_spatial == 1 ? "length" : spatial_names[i]; }

/* floor((in + 2p - d(k-1) - 1) / s) + 1, the output length of a convolution or pooling window. */
static tf_status window_length(spatial_axis where, int64_t kernel, int32_t stride, int32_t padding, int32_t dilation,
                               int64_t *length) {
  int64_t in = where.x->shape[where.axis], span, reach;
  if (kernel < 1)
    return tf_status_new(TF_ERR_SHAPE, "kernel %s is %" PRId64 "; it must be >= 1 (input %s)", where.label, kernel,
                         tf_rules_describe(where.x).text);
  // reach = d(k-1) + 1: how far one window extends.
  if (__builtin_add_overflow(in, 2 * (int64_t)padding, &span) ||
      __builtin_mul_overflow((int64_t)dilation, kernel - 1, &reach) || __builtin_add_overflow(reach, 1, &reach))
    return tf_status_new(TF_ERR_SHAPE,
                         "%s %" PRId64 " of %s with padding %" PRId32 ", kernel %" PRId64 ", dilation %" PRId32
                         " overflows int64",
                         where.label, in, tf_rules_describe(where.x).text, padding, kernel, dilation);
  // Checked before dividing: C division truncates a negative numerator towards zero, not down.
  if (span < reach)
    return tf_status_new(TF_ERR_SHAPE,
                         "output %s would be < 1: %s %" PRId64 " of %s + 2 x padding %" PRId32
                         " is less than the window %" PRId64 " (kernel %" PRId64 ", dilation %" PRId32 ")",
                         where.label, where.label, in, tf_rules_describe(where.x).text, padding, reach, kernel,
                         dilation);
  *length = (span - reach) / stride + 1;
  return NULL;
}

/* (in - 1)s - 2p + d(k-1) + output_padding + 1: the transposed convolution's output length. */
static tf_status transposed_length(spatial_axis where, int64_t kernel, int32_t stride, int32_t padding,
                                   int32_t dilation, int32_t output_padding, int64_t *length) {
  int64_t in = where.x->shape[where.axis], grown, reach, total;
  if (kernel < 1)
    return tf_status_new(TF_ERR_SHAPE, "kernel %s is %" PRId64 "; it must be >= 1 (input %s)", where.label, kernel,
                         tf_rules_describe(where.x).text);
  if (__builtin_mul_overflow(in - 1, (int64_t)stride, &grown) ||
      __builtin_mul_overflow((int64_t)dilation, kernel - 1, &reach) || __builtin_add_overflow(grown, reach, &total) ||
      __builtin_add_overflow(total, (int64_t)output_padding + 1 - 2 * (int64_t)padding, &total))
    return tf_status_new(TF_ERR_SHAPE, "output %s of %s with stride %" PRId32 ", kernel %" PRId64 " overflows int64",
                         where.label, tf_rules_describe(where.x).text, stride, kernel);
  if (total < 1)
    return tf_status_new(TF_ERR_SHAPE, "output %s would be %" PRId64 " (< 1) for %s with padding %" PRId32, where.label,
                         total, tf_rules_describe(where.x).text, padding);
  *length = total;
  return NULL;
}

/* stride >= 1, dilation >= 1, padding >= 0 on the spatial axes that the op uses; groups >= 1. */
static tf_status check_conv_attrs(const tf_shape_query *q, const tf_conv_attrs *a, int32_t n_spatial) {
  const char *op = tf_op_name(q->op);
  for (int32_t i = 0; i < n_spatial; i++) {
    if (a->stride[i] < 1 || a->dilation[i] < 1 || a->padding[i] < 0)
      return tf_status_new(TF_ERR_SHAPE,
                           "%s %s: stride %" PRId32 " and dilation %" PRId32 " must be >= 1, padding %" PRId32 " >= 0",
                           op, axis_label(n_spatial, i), a->stride[i], a->dilation[i], a->padding[i]);
  }
  if (a->groups < 1)
    return tf_status_new(TF_ERR_SHAPE, "%s groups is %" PRId32 "; it must be >= 1", op, a->groups);
  return NULL;
}

/* The optional bias: [channels], the dtype of x. */
static tf_status check_bias(const tf_shape_query *q, int64_t channels) {
  if (q->n_inputs < 3)
    return NULL;
  const tf_shape_operand *bias = &q->inputs[2];
  if (bias->rank != 1 || bias->shape[0] != channels)
    return tf_status_new(TF_ERR_SHAPE, "bias %s must have shape [%" PRId64 "], one per output channel",
                         tf_rules_describe(bias).text, channels);
  return tf_rules_check_same_dtype(&q->inputs[0], bias);
}

tf_status tf_shape_conv(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_conv));
  int32_t n_spatial = q->op == TF_OP_CONV1D ? 1 : 2;
  const tf_shape_operand *x = &q->inputs[0], *w = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_rank(x, n_spatial + 2, n_spatial == 1 ? "[N,C,L]" : "[N,C,H,W]"));
  TF_RETURN_IF_ERROR(tf_rules_check_rank(w, n_spatial + 2, n_spatial == 1 ? "[O,C/groups,K]" : "[O,C/groups,KH,KW]"));
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(x, w));
  const tf_conv_attrs *a = &q->attrs->u.conv;
  TF_RETURN_IF_ERROR(check_conv_attrs(q, a, n_spatial));
  int64_t channels = x->shape[1], out_channels = w->shape[0];
  if (channels % a->groups != 0 || out_channels % a->groups != 0)
    return tf_status_new(TF_ERR_SHAPE, "groups %" PRId32 " must divide the channels of %s and the filters of %s",
                         a->groups, tf_rules_describe(x).text, tf_rules_describe(w).text);
  if (w->shape[1] != channels / a->groups)
    return tf_status_new(TF_ERR_SHAPE, "%s must have %" PRId64 " input channels per group (%s, groups %" PRId32 ")",
                         tf_rules_describe(w).text, channels / a->groups, tf_rules_describe(x).text, a->groups);
  TF_RETURN_IF_ERROR(check_bias(q, out_channels));
  out->dtype = x->dtype;
  out->rank = n_spatial + 2;
  out->shape[0] = x->shape[0];
  out->shape[1] = out_channels;
  for (int32_t i = 0; i < n_spatial; i++) {
    spatial_axis where = {x, 2 + i, axis_label(n_spatial, i)};
    TF_RETURN_IF_ERROR(
        window_length(where, w->shape[2 + i], a->stride[i], a->padding[i], a->dilation[i], &out->shape[2 + i]));
  }
  return tf_rules_finish(out);
}

tf_status tf_shape_conv_transpose2d(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_conv_transpose2d));
  const tf_shape_operand *x = &q->inputs[0], *w = &q->inputs[1];
  TF_RETURN_IF_ERROR(tf_rules_check_rank(x, 4, "[N,C,H,W]"));
  TF_RETURN_IF_ERROR(tf_rules_check_rank(w, 4, "[C,O/groups,KH,KW]"));
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(x, w));
  const tf_conv_attrs *a = &q->attrs->u.conv;
  TF_RETURN_IF_ERROR(check_conv_attrs(q, a, 2));
  for (int32_t i = 0; i < 2; i++) {
    int32_t limit = a->stride[i] > a->dilation[i] ? a->stride[i] : a->dilation[i];
    // PyTorch's rule: a larger output_padding would add rows that no input position reaches.
    if (a->output_padding[i] < 0 || a->output_padding[i] >= limit)
      return tf_status_new(TF_ERR_SHAPE,
                           "conv_transpose2d %s: output_padding %" PRId32 " must be >= 0 and < max(stride %" PRId32
                           ", dilation %" PRId32 ")",
                           spatial_names[i], a->output_padding[i], a->stride[i], a->dilation[i]);
  }
  int64_t channels = x->shape[1], out_channels;
  if (w->shape[0] != channels)
    return tf_status_new(TF_ERR_SHAPE, "%s must have %" PRId64 " rows, the channels of %s", tf_rules_describe(w).text,
                         channels, tf_rules_describe(x).text);
  if (channels % a->groups != 0)
    return tf_status_new(TF_ERR_SHAPE, "groups %" PRId32 " must divide the channels of %s", a->groups,
                         tf_rules_describe(x).text);
  if (__builtin_mul_overflow(w->shape[1], (int64_t)a->groups, &out_channels))
    return tf_status_new(TF_ERR_SHAPE, "output channels of %s x groups %" PRId32 " overflow int64",
                         tf_rules_describe(w).text, a->groups);
  TF_RETURN_IF_ERROR(check_bias(q, out_channels));
  out->dtype = x->dtype;
  out->rank = 4;
  out->shape[0] = x->shape[0];
  out->shape[1] = out_channels;
  for (int32_t i = 0; i < 2; i++) {
    spatial_axis where = {x, 2 + i, spatial_names[i]};
    TF_RETURN_IF_ERROR(transposed_length(where, w->shape[2 + i], a->stride[i], a->padding[i], a->dilation[i],
                                         a->output_padding[i], &out->shape[2 + i]));
  }
  return tf_rules_finish(out);
}

tf_status tf_shape_pool2d(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_pool2d));
  const tf_shape_operand *x = &q->inputs[0];
  TF_RETURN_IF_ERROR(tf_rules_check_rank(x, 4, "[N,C,H,W]"));
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, x));
  const tf_pool_attrs *a = &q->attrs->u.pool;
  tf_rules_copy_shape(out, x, x->dtype);
  for (int32_t i = 0; i < 2; i++) {
    // padding <= kernel/2 guarantees that every window overlaps real input (PyTorch's rule).
    if (a->kernel[i] < 1 || a->stride[i] < 1 || a->padding[i] < 0 || a->padding[i] > a->kernel[i] / 2)
      return tf_status_new(TF_ERR_SHAPE,
                           "%s %s: kernel %" PRId32 " and stride %" PRId32 " must be >= 1, padding %" PRId32
                           " in [0, kernel/2]",
                           tf_op_name(q->op), spatial_names[i], a->kernel[i], a->stride[i], a->padding[i]);
    spatial_axis where = {x, 2 + i, spatial_names[i]};
    TF_RETURN_IF_ERROR(window_length(where, a->kernel[i], a->stride[i], a->padding[i], 1, &out->shape[2 + i]));
  }
  return tf_rules_finish(out);
}
