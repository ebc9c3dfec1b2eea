/* Elementwise operators of a value with no elements (a slice that selects nothing, ConstantOfShape of a
 * zero size): their output has none either, of the input's sizes (broadcast with the other operands'),
 * and holds no tensor, as the slice's own. PyTorch's export of torchaudio's Emformer takes tanh of an
 * empty memory bank and concatenates it beside the keys; onnxruntime runs such graphs. Concat, which
 * leaves such a value out, Shape, and the layout ops (Reshape, Flatten, Transpose, Unsqueeze, Squeeze,
 * Expand: onnx_layout.c, with the shape helpers below) read it otherwise. */
#include <inttypes.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_ops.h"

typedef enum empty_kind { NOT_ELEMENTWISE, SAME_DTYPE, TO_BOOL, CAST } empty_kind;

/* The operators whose output has the sizes of their inputs broadcast together, elementwise. */
static empty_kind kind_of(const char *op_type) {
  static const char *const same[] = {
      "Identity",  "Clip",  "Sqrt",    "Gelu",  "Reciprocal", "Softsign", "HardSigmoid", "HardSwish",
      "Elu",       "Selu",  "Celu",    "Mish",  "Sign",       "Ceil",     "Floor",       "ThresholdedRelu",
      "Shrink",    "Round", "Sin",     "Cos",   "Tan",        "Asin",     "Acos",        "Atan",
      "Sinh",      "Cosh",  "Asinh",   "Acosh", "Atanh",      "Add",      "Sub",         "Mul",
      "Div",       "Pow",   "Max",     "Min",   "Mod",        "Sum",      "Mean",        "PRelu",
      "LeakyRelu", "Where", "Dropout",
  };
  static const char *const to_bool[] = {"Not", "IsNaN", "IsInf",          "Equal",       "Greater", "Less",
                                        "And", "Or",    "GreaterOrEqual", "LessOrEqual", "Xor"};
  if (ox_is_unary(op_type))
    return SAME_DTYPE;
  for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
    if (strcmp(same[i], op_type) == 0)
      return SAME_DTYPE;
  for (size_t i = 0; i < sizeof(to_bool) / sizeof(to_bool[0]); i++)
    if (strcmp(to_bool[i], op_type) == 0)
      return TO_BOOL;
  return strcmp(op_type, "Cast") == 0 ? CAST : NOT_ELEMENTWISE;
}

/* The inputs an elementwise operator broadcasts: Clip's bounds and Dropout's ratio are not among them. */
static int32_t operands_of(const ox_node *node) {
  const char *op = node->proto->op_type;
  if (strcmp(op, "Clip") == 0 || strcmp(op, "Dropout") == 0 || strcmp(op, "Cast") == 0)
    return 1;
  return node->n_inputs;
}

/* Input i's dtype and sizes, whether it has elements or not. */
static tf_status input_shape(ox_import *im, const ox_node *node, int32_t i, tf_dtype *dtype, int32_t *rank,
                             tf_dim *dims) {
  const ox_empty *e = ox_empty_input(im, node, i);
  if (e) {
    *dtype = e->dtype;
    *rank = e->rank;
    memcpy(dims, e->dims, sizeof(tf_dim) * (size_t)e->rank);
    return NULL;
  }
  if (ox_is_known(im, ox_input(node, i))) {
    const ox_known *k;
    TF_RETURN_IF_ERROR(ox_known_of(im, node, i, &k));
    *dtype = k->is_float ? TF_F32 : k->dtype;
    *rank = k->rank;
    for (int32_t d = 0; d < k->rank; d++)
      dims[d] = tf_fixed(k->shape[d]);
    return NULL;
  }
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, i, &x));
  *dtype = ox_dtype_of(im, x);
  ox_tensor_dims(im, x, rank, dims);
  return NULL;
}

/* dims broadcast with (rank, other), in place: ONNX's rule, where a size of 1 takes the other's. */
static tf_status broadcast(ox_import *im, const ox_node *node, int32_t *out_rank, tf_dim *out, int32_t rank,
                           const tf_dim *other) {
  const int32_t n = *out_rank > rank ? *out_rank : rank;
  tf_dim dims[TF_MAX_RANK];
  for (int32_t d = 0; d < n; d++) {
    const int32_t a = d - (n - *out_rank), b = d - (n - rank);
    const tf_dim x = a >= 0 ? out[a] : tf_fixed(1), y = b >= 0 ? other[b] : tf_fixed(1);
    const bool x_one = x.symbol < 0 && x.size == 1, y_one = y.symbol < 0 && y.size == 1;
    if (y_one || (x.symbol == y.symbol && x.size == y.size))
      dims[d] = x;
    else if (x_one)
      dims[d] = y;
    else
      return ox_fail(im, node, TF_ERR_SHAPE, "operands of no elements that do not broadcast at axis %" PRId32, d);
  }
  *out_rank = n;
  memcpy(out, dims, sizeof(tf_dim) * (size_t)n);
  return NULL;
}

tf_status ox_emit_of_empty(ox_import *im, const ox_node *node, bool *emitted) {
  *emitted = false;
  const empty_kind kind = kind_of(node->proto->op_type);
  const int32_t operands = operands_of(node);
  bool any = false;
  for (int32_t i = 0; i < operands && i < node->n_inputs; i++)
    any = any || ox_empty_input(im, node, i) != NULL;
  if (kind == NOT_ELEMENTWISE || !any)
    return NULL;
  tf_dtype dtype = TF_F32, input_dtype;
  int32_t rank = 0, input_rank;
  tf_dim dims[TF_MAX_RANK], input_dims[TF_MAX_RANK];
  const bool is_where = strcmp(node->proto->op_type, "Where") == 0;
  for (int32_t i = 0; i < operands; i++) {
    if (!ox_input(node, i))
      continue;
    TF_RETURN_IF_ERROR(ox_need_input(im, node, i));
    TF_RETURN_IF_ERROR(input_shape(im, node, i, &input_dtype, &input_rank, input_dims));
    if (i == (is_where ? 1 : 0))
      dtype = input_dtype;
    TF_RETURN_IF_ERROR(broadcast(im, node, &rank, dims, input_rank, input_dims));
  }
  if (kind == TO_BOOL)
    dtype = TF_U8;
  if (kind == CAST && !ox_dtype((int32_t)ox_attr_int(node, "to", 0), &dtype))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "cast to ONNX type %" PRId64, ox_attr_int(node, "to", 0));
  TF_RETURN_IF_ERROR(ox_set_empty(im, node, 0, dtype, rank, dims));
  if (strcmp(node->proto->op_type, "Dropout") == 0) /* its mask */
    TF_RETURN_IF_ERROR(ox_set_empty(im, node, 1, TF_U8, rank, dims));
  *emitted = true;
  return NULL;
}

tf_status ox_set_empty_shaped(ox_import *im, const ox_node *node, const ox_empty *x, const tf_dim *target,
                              int32_t rank) {
  tf_dim dims[TF_MAX_RANK];
  int32_t infer = -1, zeros = 0;
  for (int32_t i = 0; i < rank; i++) {
    dims[i] = target[i];
    if (dims[i].symbol < 0 && dims[i].size == -1) {
      if (infer >= 0)
        return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                       "a value with no elements to a shape with axes %" PRId32 " and %" PRId32 " to infer", infer, i);
      infer = i;
    } else if (dims[i].symbol < 0 && dims[i].size == 0) {
      zeros++;
    }
  }
  if (infer >= 0 && zeros > 0) /* 0 elements over axes that hold none already: the -1 could be any size */
    return ox_fail(im, node, TF_ERR_INVALID_INPUT,
                   "a value with no elements to a shape whose axis %" PRId32 " (-1) could be any size", infer);
  if (infer >= 0)
    dims[infer] = tf_fixed(0);
  else if (zeros == 0)
    return ox_fail(im, node, TF_ERR_SHAPE, "a value with no elements to a shape that has elements");
  return ox_set_empty(im, node, 0, x->dtype, rank, dims);
}
