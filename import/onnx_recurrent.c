/* LSTM, GRU and RNN nodes as torch.onnx.export writes them (nn.LSTM, nn.GRU, nn.RNN: one node per
 * layer, W, R and B computed from the module's parameters by Slice/Concat/Unsqueeze, zero initial
 * states from ConstantOfShape), built with tf_lstm / tf_gru / tf_rnn (include/tightfit/recurrent.h),
 * which unroll the time axis: it must be fixed when importing. Refused with a reason: a symbolic time
 * axis, sequence_lens shorter than the time axis, peepholes (P), clip, activations other than the
 * defaults (an RNN's: Tanh, Relu or Sigmoid, the same in both directions), input_forget. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "tightfit/recurrent.h"

/* Whether attribute `a`'s string is `expected`. */
static bool string_is(const ProtobufCBinaryData *s, const char *expected) {
  return s->len == strlen(expected) && memcmp(s->data, expected, s->len) == 0;
}

/* The direction attribute; an error for anything but forward, reverse and bidirectional. */
static tf_status direction_of(ox_import *im, const ox_node *node, tf_rnn_direction *out) {
  const Onnx__AttributeProto *a = ox_attr(node, "direction");
  *out = TF_RNN_FORWARD;
  if (!a || !a->has_s || string_is(&a->s, "forward"))
    return NULL;
  if (string_is(&a->s, "reverse"))
    *out = TF_RNN_REVERSE;
  else if (string_is(&a->s, "bidirectional"))
    *out = TF_RNN_BIDIRECTIONAL;
  else
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "direction '%.*s' is not forward, reverse or bidirectional",
                   (int)a->s.len, (const char *)a->s.data);
  return NULL;
}

/* Refuses the attributes tf_lstm / tf_gru / tf_rnn do not implement: clip, input_forget,
 * activation_alpha/beta, and activations other than `defaults` (per direction; not checked when
 * n_defaults is 0: the RNN's rnn_activation checks them). */
static tf_status refuse_variants(ox_import *im, const ox_node *node, const char *const *defaults, int32_t n_defaults,
                                 int32_t dirs) {
  if (ox_attr(node, "clip"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "the clip attribute (%g) is not supported: tightfit's recurrent layers do not clip the gates' "
                   "inputs (PyTorch's LSTM, GRU and RNN never do)",
                   ox_attr_float(node, "clip", 0));
  if (ox_attr_int(node, "input_forget", 0) != 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "input_forget=1 (coupled input and forget gates) is not supported");
  if (ox_attr(node, "activation_alpha") || ox_attr(node, "activation_beta"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "activation_alpha/activation_beta are not supported: only the default activations are");
  const Onnx__AttributeProto *a = ox_attr(node, "activations");
  if (!a || n_defaults == 0)
    return NULL;
  bool defaults_only = a->n_strings == (size_t)(n_defaults * dirs);
  for (size_t i = 0; defaults_only && i < a->n_strings; i++)
    defaults_only = string_is(&a->strings[i], defaults[i % (size_t)n_defaults]);
  if (!defaults_only) {
    char expected[64] = "";
    for (int32_t i = 0; i < n_defaults; i++)
      snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s%s", i ? ", " : "", defaults[i]);
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "activations other than the defaults (%s, per direction) are not supported", expected);
  }
  return NULL;
}

/* X's time axis, which the layer unrolls: an error saying what to do when it is symbolic. */
static tf_status time_steps(ox_import *im, const ox_node *node, tf_tensor_id x, int32_t layout, int64_t *steps) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, x, &rank, dims);
  if (rank != 3)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "X has rank %" PRId32 "; it must be [%s]", rank,
                   layout ? "batch, seq_length, input_size" : "seq_length, batch, input_size");
  const int32_t axis = layout ? 1 : 0;
  if (dims[axis].symbol < 0 && dims[axis].size >= 1) {
    *steps = dims[axis].size;
    return NULL;
  }
  const char *symbol = "an unnamed product of symbols";
  int64_t default_value, value;
  if (dims[axis].symbol >= 0)
    (void)tf_graph_symbol_at(im->graph, dims[axis].symbol, &symbol, &default_value, &value);
  return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                 "its time axis (axis %" PRId32 " of X) is symbolic ('%s'): recurrent layers are unrolled over "
                 "time when importing, so the sequence length must be fixed. tightfit.from_torch makes axis 0 of "
                 "every input the batch symbol, which for a time-major input (batch_first=False) is the time "
                 "axis: use batch_first=True, or from_torch(..., dynamic_batch=False); an exported file needs a "
                 "fixed sequence length (no dynamic_axes entry on it)",
                 axis, symbol);
}

/* sequence_lens (input 4): absent, or known (or a graph constant one value fills: lengths of a
 * symbolic batch made from the sizes, torch.full((n,), T), as Tacotron 2's encoder packs its tokens)
 * and every entry the full length. */
static tf_status check_sequence_lengths(ox_import *im, const ox_node *node, int64_t steps) {
  const char *name = ox_input(node, 4);
  if (!name)
    return NULL;
  const ox_value *v = ox_value_find(im, name);
  double fill;
  if (v && v->tensor != TF_NO_TENSOR && ox_fill_value(im, v->tensor, &fill)) {
    if (fill == (double)steps)
      return NULL;
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "sequence_lens '%s' is %g for every sequence but the time axis has %" PRId64
                   " steps; only sequences of the full length are supported (per-sequence lengths, as a "
                   "PackedSequence gives, are not)",
                   name, fill, steps);
  }
  if (!ox_is_known(im, name))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "sequence_lens '%s' is computed from the data; only sequences of the full length %" PRId64
                   " are supported (per-sequence lengths, as a PackedSequence gives, are not)",
                   name, steps);
  const ox_known *k = ox_value_find(im, name)->known;
  for (int64_t i = 0; i < k->count; i++) {
    const int64_t length = k->is_float ? (int64_t)k->reals[i] : k->ints[i].size;
    if (k->is_float || k->ints[i].symbol >= 0 || length != steps)
      return ox_fail(
          im, node, TF_ERR_UNSUPPORTED,
          "sequence_lens[%" PRId64 "] is %" PRId64 " but the time axis has %" PRId64
          " steps; only sequences of the full length are supported (per-sequence lengths, as a PackedSequence "
          "gives, are not)",
          i, length, steps);
  }
  return NULL;
}

/* Whether graph tensor `id` is all zeros by construction: a fill of 0 (ConstantOfShape) or a
 * slice of one, as PyTorch's export writes absent initial states. */
static bool zero_fill(ox_import *im, tf_tensor_id id) {
  tf_tensor_info info;
  tf_node_info producer;
  for (int32_t depth = 0; depth < 4 && tf_graph_tensor(im->graph, id, &info); depth++) {
    if (info.producer < 0)
      return info.kind == TF_CONSTANT && info.init.kind == TF_INIT_FILL && info.init.a == 0;
    if (!tf_graph_node_at(im->graph, info.producer, &producer) || producer.op != TF_OP_SLICE)
      return false;
    id = producer.inputs[0];
  }
  return false;
}

/* Optional input i as a tensor of x's dtype, TF_NO_TENSOR when absent or all zeros (`zeros_absent`). */
static tf_status optional_input(ox_import *im, const ox_node *node, int32_t i, tf_dtype dtype, bool zeros_absent,
                                tf_tensor_id *out) {
  *out = TF_NO_TENSOR;
  const char *name = ox_input(node, i);
  if (!name)
    return NULL;
  if (zeros_absent && ox_is_known(im, name)) {
    const ox_known *k = ox_value_find(im, name)->known;
    bool zeros = k->is_float;
    for (int64_t e = 0; zeros && e < k->count; e++)
      zeros = k->reals[e] == 0;
    if (zeros)
      return NULL;
  }
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, out));
  if (zeros_absent && zero_fill(im, *out)) {
    *out = TF_NO_TENSOR;
    return NULL;
  }
  if (ox_dtype_of(im, *out) != dtype)
    *out = tf_cast(im->graph, *out, dtype);
  return NULL;
}

/* The inputs both layers share: X, W, R, B and the options; checks what is refused. */
static tf_status common_inputs(ox_import *im, const ox_node *node, const char *const *activations,
                               int32_t n_activations, tf_tensor_id in[4], tf_rnn_options *options) {
  *options = tf_rnn_options_default();
  TF_RETURN_IF_ERROR(direction_of(im, node, &options->direction));
  TF_RETURN_IF_ERROR(
      refuse_variants(im, node, activations, n_activations, options->direction == TF_RNN_BIDIRECTIONAL ? 2 : 1));
  const int64_t layout = ox_attr_int(node, "layout", 0);
  if (layout != 0 && layout != 1)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "layout %" PRId64 " is not 0 or 1", layout);
  options->layout = (int32_t)layout;
  options->hidden_size = ox_attr_int(node, "hidden_size", 0);
  if (options->hidden_size < 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "hidden_size %" PRId64 " is negative", options->hidden_size);
  for (int32_t i = 0; i < 3; i++)
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &in[i]));
  int64_t steps = 0;
  TF_RETURN_IF_ERROR(time_steps(im, node, in[0], options->layout, &steps));
  TF_RETURN_IF_ERROR(check_sequence_lengths(im, node, steps));
  const tf_dtype dtype = ox_dtype_of(im, in[0]);
  for (int32_t i = 1; i < 3; i++)
    if (ox_dtype_of(im, in[i]) != dtype)
      in[i] = tf_cast(im->graph, in[i], dtype);
  return optional_input(im, node, 3, dtype, false, &in[3]);
}

tf_status ox_convert_lstm(ox_import *im, const ox_node *node) {
  static const char *const activations[] = {"Sigmoid", "Tanh", "Tanh"};
  if (ox_input(node, 7))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "peephole weights (input P '%s') are not supported (PyTorch's LSTM has none)", ox_input(node, 7));
  tf_tensor_id in[4], h0, c0, out[3];
  tf_rnn_options options;
  TF_RETURN_IF_ERROR(common_inputs(im, node, activations, 3, in, &options));
  const tf_dtype dtype = ox_dtype_of(im, in[0]);
  TF_RETURN_IF_ERROR(optional_input(im, node, 5, dtype, true, &h0));
  TF_RETURN_IF_ERROR(optional_input(im, node, 6, dtype, true, &c0));
  tf_lstm(im->graph, in[0], in[1], in[2], in[3], h0, c0, &options, out);
  for (int32_t i = 0; i < 3; i++)
    TF_RETURN_IF_ERROR(ox_set_tensor(im, node, i, out[i]));
  return NULL;
}

tf_status ox_convert_gru(ox_import *im, const ox_node *node) {
  static const char *const activations[] = {"Sigmoid", "Tanh"};
  tf_tensor_id in[4], h0, out[2];
  tf_rnn_options options;
  TF_RETURN_IF_ERROR(common_inputs(im, node, activations, 2, in, &options));
  options.linear_before_reset = ox_attr_int(node, "linear_before_reset", 0) != 0;
  TF_RETURN_IF_ERROR(optional_input(im, node, 5, ox_dtype_of(im, in[0]), true, &h0));
  tf_gru(im->graph, in[0], in[1], in[2], in[3], h0, &options, out);
  for (int32_t i = 0; i < 2; i++)
    TF_RETURN_IF_ERROR(ox_set_tensor(im, node, i, out[i]));
  return NULL;
}

/* The RNN's activation (attribute `activations`: one per direction, Tanh when absent): Tanh, Relu or
 * Sigmoid, the same in every direction. */
static tf_status rnn_activation(ox_import *im, const ox_node *node, int32_t dirs, tf_op *out) {
  static const struct {
    const char *name;
    tf_op op;
  } known[] = {{"Tanh", TF_OP_TANH}, {"Relu", TF_OP_RELU}, {"Sigmoid", TF_OP_SIGMOID}};
  *out = TF_OP_TANH;
  const Onnx__AttributeProto *a = ox_attr(node, "activations");
  if (!a)
    return NULL;
  if (a->n_strings != (size_t)dirs)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "activations has %zu entries for %" PRId32 " direction%s",
                   a->n_strings, dirs, dirs == 1 ? "" : "s");
  for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
    bool all = true;
    for (size_t i = 0; i < a->n_strings; i++)
      all = all && string_is(&a->strings[i], known[k].name);
    if (all) {
      *out = known[k].op;
      return NULL;
    }
  }
  char given[80] = "";
  for (size_t i = 0; i < a->n_strings; i++)
    snprintf(given + strlen(given), sizeof(given) - strlen(given), "%s'%.*s'", i ? ", " : "",
             (int)(a->strings[i].len < 32 ? a->strings[i].len : 32), (const char *)a->strings[i].data);
  return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                 "activations %s are not supported: an RNN takes Tanh, Relu or Sigmoid, the same in both directions",
                 given);
}

tf_status ox_convert_rnn(ox_import *im, const ox_node *node) {
  tf_tensor_id in[4], h0, out[2];
  tf_rnn_options options;
  TF_RETURN_IF_ERROR(common_inputs(im, node, NULL, 0, in, &options));
  tf_op activation;
  TF_RETURN_IF_ERROR(rnn_activation(im, node, options.direction == TF_RNN_BIDIRECTIONAL ? 2 : 1, &activation));
  TF_RETURN_IF_ERROR(optional_input(im, node, 5, ox_dtype_of(im, in[0]), true, &h0));
  tf_rnn(im->graph, in[0], in[1], in[2], in[3], h0, activation, &options, out);
  for (int32_t i = 0; i < 2; i++)
    TF_RETURN_IF_ERROR(ox_set_tensor(im, node, i, out[i]));
  return NULL;
}
