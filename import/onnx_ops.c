/* ONNX operators to graph ops, the top of the converters stage (import/stages.txt): one converter
 * per operator type, in a table (docs/import.md lists the same rows; the unary ops that are one
 * tightfit op are rows of onnx_elementwise.c's unary_ops), and the fused nodes of the patterns
 * stage. A converter folds the node when its inputs are known at import time (shape arithmetic),
 * and otherwise adds graph ops through the builder, which checks shapes as it goes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_ops.h"

static tf_status convert_if(ox_import *im, const ox_node *node);

typedef struct ox_converter_row {
  const char *op_type;
  ox_converter convert;
} ox_converter_row;

static const ox_converter_row converters[] = {
    {"Add", ox_convert_add},
    {"Sub", ox_convert_sub},
    {"Mul", ox_convert_mul},
    {"Div", ox_convert_div},
    {"Pow", ox_convert_pow},
    {"LeakyRelu", ox_convert_leaky_relu},
    {"Sqrt", ox_convert_sqrt},
    {"Sin", ox_convert_trigonometric},
    {"Cos", ox_convert_trigonometric},
    {"Tan", ox_convert_trigonometric},
    {"Asin", ox_convert_trigonometric},
    {"Acos", ox_convert_trigonometric},
    {"Atan", ox_convert_trigonometric},
    {"Sinh", ox_convert_trigonometric},
    {"Cosh", ox_convert_trigonometric},
    {"Asinh", ox_convert_trigonometric},
    {"Acosh", ox_convert_trigonometric},
    {"Atanh", ox_convert_trigonometric},
    {"Gelu", ox_convert_gelu},
    {"Reciprocal", ox_convert_reciprocal},
    {"Softsign", ox_convert_softsign},
    {"HardSigmoid", ox_convert_hard_sigmoid},
    {"HardSwish", ox_convert_hard_swish},
    {"Elu", ox_convert_elu},
    {"Selu", ox_convert_selu},
    {"Celu", ox_convert_celu},
    {"PRelu", ox_convert_prelu},
    {"Mish", ox_convert_mish},
    {"ThresholdedRelu", ox_convert_thresholded_relu},
    {"Shrink", ox_convert_shrink},
    {"Max", ox_convert_max},
    {"Min", ox_convert_min},
    {"Clip", ox_convert_clip},
    {"Sum", ox_convert_sum},
    {"Mean", ox_convert_mean},
    {"Size", ox_convert_size},
    {"MatMul", ox_convert_matmul},
    {"Einsum", ox_convert_einsum},
    {"Gemm", ox_convert_gemm},
    {"Softmax", ox_convert_softmax},
    {"LogSoftmax", ox_convert_log_softmax},
    {"ReduceMean", ox_convert_reduce_mean},
    {"ReduceSum", ox_convert_reduce_sum},
    {"ReduceMax", ox_convert_reduce_max},
    {"ReduceMin", ox_convert_reduce_min},
    {"ReduceL2", ox_convert_reduce_l2},
    {"ReduceL1", ox_convert_reduce_l1},
    {"ReduceSumSquare", ox_convert_reduce_sum_square},
    {"ReduceProd", ox_convert_reduce_prod},
    {"ArgMax", ox_convert_arg_max},
    {"ArgMin", ox_convert_arg_min},
    {"Hardmax", ox_convert_hardmax},
    {"TopK", ox_convert_top_k},
    {"ReduceLogSum", ox_convert_reduce_log_sum},
    {"ReduceLogSumExp", ox_convert_reduce_log_sum_exp},
    {"NegativeLogLikelihoodLoss", ox_convert_nll_loss},
    {"SoftmaxCrossEntropyLoss", ox_convert_softmax_cross_entropy_loss},
    {"LayerNormalization", ox_convert_layer_norm},
    {"BatchNormalization", ox_convert_batch_norm},
    {"InstanceNormalization", ox_convert_instance_norm},
    {"MeanVarianceNormalization", ox_convert_mean_variance_norm},
    {"LRN", ox_convert_lrn},
    {"DFT", ox_convert_dft},
    {"GridSample", ox_convert_grid_sample},
    {"STFT", ox_convert_stft},
    {"HannWindow", ox_convert_hann_window},
    {"HammingWindow", ox_convert_hamming_window},
    {"BlackmanWindow", ox_convert_blackman_window},
    {"MelWeightMatrix", ox_convert_mel_weight_matrix},
    {"Reshape", ox_convert_reshape},
    {"Flatten", ox_convert_flatten},
    {"Unsqueeze", ox_convert_unsqueeze},
    {"Squeeze", ox_convert_squeeze},
    {"Transpose", ox_convert_transpose},
    {"DepthToSpace", ox_convert_depth_to_space},
    {"SpaceToDepth", ox_convert_space_to_depth},
    {"Concat", ox_convert_concat},
    {"Slice", ox_convert_slice},
    {"ScatterND", ox_convert_scatter_nd},
    {"ScatterElements", ox_convert_scatter_elements},
    {"Scatter", ox_convert_scatter_elements},
    {"Split", ox_convert_split},
    {"Expand", ox_convert_expand},
    {"Resize", ox_convert_resize},
    {"Upsample", ox_convert_resize},
    {"Tile", ox_convert_tile},
    {"Equal", ox_convert_equal},
    {"Greater", ox_convert_greater},
    {"Less", ox_convert_less},
    {"GreaterOrEqual", ox_convert_greater_or_equal},
    {"LessOrEqual", ox_convert_less_or_equal},
    {"Where", ox_convert_where},
    {"Not", ox_convert_not},
    {"IsNaN", ox_convert_isnan},
    {"IsInf", ox_convert_isinf},
    {"And", ox_convert_and},
    {"Or", ox_convert_or},
    {"Xor", ox_convert_xor},
    {"Sign", ox_convert_sign},
    {"Ceil", ox_convert_ceil},
    {"Floor", ox_convert_floor},
    {"Round", ox_convert_round},
    {"Mod", ox_convert_mod},
    {"Trilu", ox_convert_trilu},
    {"CumSum", ox_convert_cumsum},
    {"Gather", ox_convert_gather},
    {"GatherElements", ox_convert_gather_elements},
    {"Conv", ox_convert_conv},
    {"ConvTranspose", ox_convert_conv_transpose},
    {"MaxPool", ox_convert_max_pool},
    {"AveragePool", ox_convert_average_pool},
    {"GlobalAveragePool", ox_convert_global_average_pool},
    {"GlobalMaxPool", ox_convert_global_max_pool},
    {"Dropout", ox_convert_dropout},
    {"Cast", ox_convert_cast},
    {"NonZero", ox_convert_nonzero},
    {"GatherND", ox_convert_gather_nd},
    {"CastLike", ox_convert_cast_like},
    {"Identity", ox_convert_identity},
    {"LSTM", ox_convert_lstm},
    {"GRU", ox_convert_gru},
    {"RNN", ox_convert_rnn},
    {"Pad", ox_convert_pad},
    {"Constant", ox_convert_constant},
    {"Shape", ox_convert_shape},
    {"Range", ox_convert_range},
    {"OneHot", ox_convert_one_hot},
    {"EyeLike", ox_convert_eye_like},
    {"RandomUniform", ox_convert_random_uniform},
    {"RandomUniformLike", ox_convert_random_uniform_like},
    {"RandomNormal", ox_convert_random_normal},
    {"RandomNormalLike", ox_convert_random_normal_like},
    {"Bernoulli", ox_convert_bernoulli},
    {"If", convert_if},
    {"ConstantOfShape", ox_convert_constant_of_shape},
};

/* The operators of tightfit's own domain, which from_torch writes. */
static const ox_converter_row tightfit_converters[] = {
    {"StopGradient", ox_convert_stop_gradient},
};

static ox_converter find_in(const ox_converter_row *rows, size_t n, const char *op_type) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].op_type, op_type) == 0)
      return rows[i].convert;
  return NULL;
}

static ox_converter find_converter(const char *domain, const char *op_type) {
  if (!op_type)
    return NULL;
  if (ox_default_domain(domain)) {
    ox_converter convert = find_in(converters, sizeof(converters) / sizeof(converters[0]), op_type);
    return convert ? convert : ox_is_unary(op_type) ? ox_convert_unary : NULL;
  }
  if (strcmp(domain, OX_TIGHTFIT_DOMAIN) == 0)
    return find_in(tightfit_converters, sizeof(tightfit_converters) / sizeof(tightfit_converters[0]), op_type);
  return NULL;
}

bool ox_op_supported(const char *domain, const char *op_type) { return find_converter(domain, op_type) != NULL; }

tf_status ox_op_emit(ox_import *im, const ox_node *node) {
  if (node->fused != OX_PLAIN)
    return ox_masked_emit(im, node, ox_convert_fused);
  ox_converter convert = find_converter(node->proto->domain, node->proto->op_type);
  if (!convert)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "operator %s is not supported", node->proto->op_type);
  bool emitted = false;
  if (ox_default_domain(node->proto->domain))
    TF_RETURN_IF_ERROR(ox_emit_of_empty(im, node, &emitted));
  if (emitted)
    return NULL;
  if (im->opset < 7 && ox_default_domain(node->proto->domain))
    return ox_legacy_emit(im, node, convert);
  return ox_masked_emit(im, node, convert);
}

/* If output i becomes the value named `from` (a branch's output), as Identity passes it on. */
static tf_status pass_out(ox_import *im, const ox_node *node, size_t i, const char *from) {
  char *inputs[1] = {(char *)from}, *outputs[1] = {node->proto->output[i]};
  Onnx__NodeProto proto = ONNX__NODE_PROTO__INIT;
  proto.name = node->proto->name;
  proto.op_type = "Identity";
  proto.n_input = 1;
  proto.input = inputs;
  proto.n_output = 1;
  proto.output = outputs;
  const ox_node identity = {.proto = &proto, .inputs = (const char *const *)inputs, .n_inputs = 1, .live = true};
  return ox_convert_identity(im, &identity);
}

/* Emits every node of `branch`, in order, then the If's outputs. */
static tf_status emit_branch(ox_import *im, const ox_node *node, const Onnx__GraphProto *branch) {
  if (branch->n_initializer > 0 || branch->n_sparse_initializer > 0)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "an If branch with initializers of its own");
  if (branch->n_output != node->proto->n_output)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a branch of %zu outputs for an If of %zu", branch->n_output,
                   node->proto->n_output);
  for (size_t n = 0; n < branch->n_node; n++) {
    const Onnx__NodeProto *proto = branch->node[n];
    if (!proto || !proto->op_type)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "node %zu of its branch has no operator type", n);
    if (!ox_op_supported(proto->domain, proto->op_type))
      return ox_fail(im, node, TF_ERR_UNSUPPORTED, "its branch's node %zu is %s, which tightfit does not import", n,
                     proto->op_type);
    for (size_t o = 0; o < proto->n_output; o++) {
      const ox_value *taken = proto->output[o] ? ox_value_find(im, proto->output[o]) : NULL;
      if (taken && (taken->known || taken->tensor != TF_NO_TENSOR || taken->initializer))
        return ox_fail(im, node, TF_ERR_INVALID_INPUT, "its branch's node %zu writes '%s', a name already given", n,
                       proto->output[o]);
    }
    const ox_node inner = {.proto = proto,
                           .inputs = (const char *const *)proto->input,
                           .n_inputs = (int32_t)(proto->n_input < 4096 ? proto->n_input : 4096),
                           .live = true};
    TF_RETURN_IF_ERROR(ox_op_emit(im, &inner));
  }
  for (size_t i = 0; i < branch->n_output; i++) {
    const char *from = branch->output[i] ? branch->output[i]->name : NULL;
    if (!from || !*from || !node->proto->output[i] || !*node->proto->output[i])
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "output %zu of the If or its branch has no name", i);
    TF_RETURN_IF_ERROR(pass_out(im, node, i, from));
  }
  return NULL;
}

/* If whose condition is known when importing (PyTorch's export of x.squeeze(d) on an axis whose size
 * it could not see, opset 13+: If(Shape(x)[d] == 1, Squeeze, Identity), Mamba-2's; any condition that
 * folds): the chosen branch's nodes are emitted in place, reading the values around the If by name
 * (ox_mark_live keeps their producers), and the If's outputs are the branch's outputs. A condition
 * computed from data (control flow that depends on the batch) is refused: a plan runs one fixed
 * sequence of steps. Here, beside the table, since a branch's nodes go through ox_op_emit. */
static tf_status convert_if(ox_import *im, const ox_node *node) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (!ox_is_known(im, ox_input(node, 0)))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "an If whose condition '%s' is computed from data: a plan runs one fixed sequence of steps (only "
                   "a condition known when importing, from shapes or constants, chooses its branch)",
                   ox_input(node, 0));
  const ox_known *condition;
  TF_RETURN_IF_ERROR(ox_known_of(im, node, 0, &condition));
  if (condition->count != 1 || (!condition->is_float && condition->ints[0].symbol >= 0))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "an If whose condition is not one fixed value");
  const bool taken = condition->is_float ? condition->reals[0] != 0 : condition->ints[0].size != 0;
  const Onnx__AttributeProto *a = ox_attr(node, taken ? "then_branch" : "else_branch");
  if (!a || !a->g)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "no %s graph", taken ? "then_branch" : "else_branch");
  if (im->branch_depth >= OX_MAX_BRANCH_DEPTH)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "If branches nested more than %d deep", OX_MAX_BRANCH_DEPTH);
  im->branch_depth++;
  tf_status status = emit_branch(im, node, a->g);
  im->branch_depth--;
  return status;
}
