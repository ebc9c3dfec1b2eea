/* Models of opsets 1 to 6 (the ONNX model zoo's oldest files, ONNX's own node tests): each operator is
 * read by its definition at the model's opset, which for most is opset 7's but for an attribute that
 * changes nothing (`consumed_inputs`, a memory hint, gone in 6; `is_test`, BatchNormalization's and
 * Dropout's, which onnxruntime ignores as it runs inference) and those operators run through their
 * opset-7 converters. The others:
 *
 *   Add, Sub, Mul, Div   `broadcast` 1 with `axis`: B's axes line up with A's from `axis` (Caffe2's
 *                        per-channel scale and bias, broadcast=1 axis=1): B reshaped with ones after
 *                        it, then numpy broadcasting; without `axis`, B lines up with A's last axes,
 *                        which numpy broadcasting does
 *   Cast (1 to 5)        `to` is a name ("FLOAT"): read as its number
 *   Concat (1 to 3)      `axis` may be absent: 1
 *
 * and any operator not listed here (Reshape, Pad, Tile, Upsample, the recurrent layers, whose inputs or
 * attributes differed before 7; comparisons and Pow by `axis`) is refused, naming it and the opset. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_converters.h"

/* Operators whose definition at opsets 1 to 6 is opset 7's, but for consumed_inputs and is_test. */
static const char *const same_as_7[] = {
    "Abs",
    "ArgMax",
    "ArgMin",
    "AveragePool",
    "BatchNormalization",
    "Ceil",
    "Clip",
    "Constant",
    "Conv",
    "ConvTranspose",
    "DepthToSpace",
    "Dropout",
    "Elu",
    "Exp",
    "Flatten",
    "Floor",
    "Gather",
    "Gemm",
    "GlobalAveragePool",
    "GlobalLpPool",
    "GlobalMaxPool",
    "HardSigmoid",
    "Hardmax",
    "Identity",
    "InstanceNormalization",
    "LRN",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Neg",
    "Not",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Selu",
    "Shape",
    "Sigmoid",
    "Size",
    "Slice",
    "Softmax",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sum",
    "Tanh",
    "TopK",
    "Transpose",
    "Unsqueeze",
};

static bool listed(const char *op_type, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(op_type, names[i]) == 0)
      return true;
  return false;
}

/* Cast-1's names of the element types, by their numbers (onnx.proto's TensorProto.DataType). */
static int64_t type_number(const char *name, size_t length) {
  static const struct {
    const char *name;
    int64_t number;
  } types[] = {{"FLOAT", 1},   {"UINT8", 2},   {"INT8", 3},    {"UINT16", 4},     {"INT16", 5},
               {"INT32", 6},   {"INT64", 7},   {"STRING", 8},  {"BOOL", 9},       {"FLOAT16", 10},
               {"DOUBLE", 11}, {"UINT32", 12}, {"UINT64", 13}, {"COMPLEX64", 14}, {"COMPLEX128", 15}};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
    if (strlen(types[i].name) == length && strncmp(types[i].name, name, length) == 0)
      return types[i].number;
  return -1;
}

/* `node` converted by `convert` with its attribute `replaced` (name and value: an INT) set, or added. */
static tf_status with_int_attribute(ox_import *im, const ox_node *node, ox_converter convert, const char *name,
                                    int64_t value) {
  enum { MAX_ATTRIBUTES = 32 };
  const Onnx__NodeProto *proto = node->proto;
  if (proto->n_attribute >= MAX_ATTRIBUTES)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "more than %d attributes", MAX_ATTRIBUTES - 1);
  Onnx__AttributeProto set = ONNX__ATTRIBUTE_PROTO__INIT, *list[MAX_ATTRIBUTES];
  set.name = (char *)name;
  set.has_type = true;
  set.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  set.has_i = true;
  set.i = value;
  size_t n = 0;
  for (size_t i = 0; i < proto->n_attribute; i++)
    if (proto->attribute[i] && proto->attribute[i]->name && strcmp(proto->attribute[i]->name, name) != 0)
      list[n++] = proto->attribute[i];
  list[n++] = &set;
  Onnx__NodeProto copy = *proto;
  copy.n_attribute = n;
  copy.attribute = list;
  ox_node rewritten = *node;
  rewritten.proto = &copy;
  return ox_masked_emit(im, &rewritten, convert);
}

/* Add, Sub, Mul or Div with broadcast = 1 and an axis: B reshaped to line up with A from `axis`. */
static tf_status axis_broadcast(ox_import *im, const ox_node *node, int64_t axis) {
  tf_tensor_id a, b;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &a));
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 1, &b));
  int32_t ra, rb;
  tf_dim da[TF_MAX_RANK], db[TF_MAX_RANK];
  ox_tensor_dims(im, a, &ra, da);
  ox_tensor_dims(im, b, &rb, db);
  if (axis < 0)
    axis += ra;
  if (axis < 0 || axis + rb > ra)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "broadcast axis %" PRId64 " of B (rank %" PRId32 ") into A (rank %" PRId32 ")",
                   ox_attr_int(node, "axis", 0), rb, ra);
  tf_dim lined[TF_MAX_RANK];
  int32_t n = 0;
  for (int32_t d = 0; d < rb; d++)
    lined[n++] = db[d];
  for (int64_t d = axis + rb; d < ra; d++)
    lined[n++] = tf_fixed(1);
  tf_graph *g = im->graph;
  tf_tensor_id shaped = tf_reshape(g, b, tf_shape_from(lined, n));
  ox_match_half(im, &a, &shaped);
  const char *op = node->proto->op_type;
  tf_tensor_id y = strcmp(op, "Add") == 0   ? tf_add(g, a, shaped)
                   : strcmp(op, "Sub") == 0 ? tf_sub(g, a, shaped)
                   : strcmp(op, "Mul") == 0 ? tf_mul(g, a, shaped)
                                            : tf_div(g, a, shaped);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, y);
}

static tf_status legacy_binary(ox_import *im, const ox_node *node, ox_converter convert) {
  const Onnx__AttributeProto *axis = ox_attr(node, "axis");
  if (ox_attr_int(node, "broadcast", 0) == 0 || !axis)
    return ox_masked_emit(im, node, convert); /* equal shapes, or B on A's last axes: numpy's */
  const char *op = node->proto->op_type;
  if (strcmp(op, "Add") && strcmp(op, "Sub") && strcmp(op, "Mul") && strcmp(op, "Div"))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "%s with broadcast along axis %" PRId64 " (opset %" PRId64 "; only Add, Sub, Mul and Div)", op,
                   axis->i, (int64_t)im->opset);
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 1));
  return axis_broadcast(im, node, axis->i);
}

static tf_status legacy_cast(ox_import *im, const ox_node *node, ox_converter convert) {
  const Onnx__AttributeProto *to = ox_attr(node, "to");
  if (!to || !to->has_s)
    return ox_masked_emit(im, node, convert); /* an INT already: opset 6's */
  const char *name = to->s.data ? (const char *)to->s.data : "";
  const size_t length = to->s.data ? to->s.len : 0;
  const int64_t number = type_number(name, length);
  if (number < 0)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "Cast to '%.*s' (an element type's name: FLOAT, INT64, ...)",
                   (int)(length < 32 ? length : 32), name);
  return with_int_attribute(im, node, convert, "to", number);
}

tf_status ox_legacy_emit(ox_import *im, const ox_node *node, ox_converter convert) {
  const char *op = node->proto->op_type;
  if (strcmp(op, "Add") == 0 || strcmp(op, "Sub") == 0 || strcmp(op, "Mul") == 0 || strcmp(op, "Div") == 0 ||
      strcmp(op, "Pow") == 0 || strcmp(op, "And") == 0 || strcmp(op, "Or") == 0 || strcmp(op, "Xor") == 0 ||
      strcmp(op, "Equal") == 0 || strcmp(op, "Greater") == 0 || strcmp(op, "Less") == 0)
    return legacy_binary(im, node, convert);
  if (strcmp(op, "Cast") == 0)
    return legacy_cast(im, node, convert);
  if (strcmp(op, "Concat") == 0)
    return ox_attr(node, "axis") ? ox_masked_emit(im, node, convert) : with_int_attribute(im, node, convert, "axis", 1);
  if (strcmp(op, "Split") == 0 && node->n_inputs > 1 && ox_input(node, 1))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "Split-1's sizes as an input (opset %" PRId64 "; as the split "
                   "attribute only)",
                   (int64_t)im->opset);
  if (strcmp(op, "BatchNormalization") == 0 && ox_attr_int(node, "spatial", 1) != 1)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "BatchNormalization with spatial %" PRId64 " (opset %" PRId64 "; only 1, per channel)",
                   ox_attr_int(node, "spatial", 1), (int64_t)im->opset);
  if (!listed(op, same_as_7, sizeof(same_as_7) / sizeof(same_as_7[0])))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                   "%s at opset %" PRId64 ": its definition before opset 7 is not read (export at opset 7 or later)",
                   op, (int64_t)im->opset);
  return ox_masked_emit(im, node, convert);
}
