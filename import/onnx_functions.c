/* ONNX's functions of one input that are one tightfit op each and fold on known values: the
 * trigonometric and hyperbolic functions and their inverses (Sin to Atanh), and the roundings (Sign,
 * Ceil, Floor, Round), which keep integers integers. */
#include <math.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

/* The trigonometric and hyperbolic functions and their inverses: of a known value folded (a rotary
 * embedding's cos and sin tables from positions and frequencies), of data the graph op of the same
 * name (a diffusion model's timestep embedding, SIREN, a CIoU loss's atan). */
typedef struct trigonometric_row {
  const char *op_type;
  double (*function)(double);
  tf_op op;
} trigonometric_row;

// One row a line, however short.
// clang-format off
static const trigonometric_row trigonometric_ops[] = {
    {"Sin", sin, TF_OP_SIN},
    {"Cos", cos, TF_OP_COS},
    {"Tan", tan, TF_OP_TAN},
    {"Asin", asin, TF_OP_ASIN},
    {"Acos", acos, TF_OP_ACOS},
    {"Atan", atan, TF_OP_ATAN},
    {"Sinh", sinh, TF_OP_SINH},
    {"Cosh", cosh, TF_OP_COSH},
    {"Asinh", asinh, TF_OP_ASINH},
    {"Acosh", acosh, TF_OP_ACOSH},
    {"Atanh", atanh, TF_OP_ATANH},
};
// clang-format on

tf_status ox_convert_trigonometric(ox_import *im, const ox_node *node) {
  const trigonometric_row *row = NULL;
  for (size_t i = 0; i < sizeof(trigonometric_ops) / sizeof(trigonometric_ops[0]); i++)
    if (strcmp(trigonometric_ops[i].op_type, node->proto->op_type) == 0)
      row = &trigonometric_ops[i];
  if (!row)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "operator %s is not supported", node->proto->op_type);
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  if (!ox_is_known(im, ox_input(node, 0))) {
    tf_tensor_id x;
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
    return ox_set_tensor(im, node, 0, tf_unary(im->graph, row->op, x));
  }
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_unary(ox_value_find(im, ox_input(node, 0))->known, row->function, &k)));
  return ox_set_known(im, node, 0, k);
}

static double sign_of(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; } /* NaN stays NaN, -0 stays -0 */

/* Sign, Ceil, Floor and Round of data: the op (no gradient passes, as PyTorch's is 0); of integer
 * data the integers themselves, their sign computed in f32 (exact) and cast back. */
static tf_status rounding_of_data(ox_import *im, const ox_node *node, tf_op op) {
  tf_tensor_id x;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
  const tf_dtype dtype = ox_dtype_of(im, x);
  if (!ox_is_integer_dtype(dtype))
    return ox_set_tensor(im, node, 0, tf_unary(im->graph, op, x));
  if (op != TF_OP_SIGN)
    return ox_set_tensor(im, node, 0, x);
  return ox_set_tensor(im, node, 0, tf_cast(im->graph, tf_unary(im->graph, op, tf_cast(im->graph, x, TF_F32)), dtype));
}

/* Sign, Ceil, Floor and Round of a known value folded (DeBERTa-v2's log buckets of relative
 * positions: sign, ceil); of integers they stay integers. Of data: rounding_of_data. */
static tf_status rounding(ox_import *im, const ox_node *node, double (*function)(double), tf_op op) {
  TF_RETURN_IF_ERROR(ox_need_input(im, node, 0));
  const ox_known *x = ox_foldable(im, node, 0);
  if (!x)
    return rounding_of_data(im, node, op);
  ox_known *k;
  if (x->is_float) {
    TF_RETURN_IF_ERROR(ox_at(im, node, ox_fold_unary(x, function, &k)));
    return ox_set_known(im, node, 0, k);
  }
  if (ox_known_has_symbol(x))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%s of a symbolic size", node->proto->op_type);
  if (!(k = ox_fold_copy(x, x->rank, x->shape)))
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  if (function == sign_of) /* Ceil, Floor and Round leave integers as they are */
    for (int64_t i = 0; i < k->count; i++)
      k->ints[i] = tf_fixed(k->ints[i].size > 0 ? 1 : k->ints[i].size < 0 ? -1 : 0);
  return ox_set_known(im, node, 0, k);
}

tf_status ox_convert_sign(ox_import *im, const ox_node *node) { return rounding(im, node, sign_of, TF_OP_SIGN); }
tf_status ox_convert_ceil(ox_import *im, const ox_node *node) { return rounding(im, node, ceil, TF_OP_CEIL); }
tf_status ox_convert_floor(ox_import *im, const ox_node *node) { return rounding(im, node, floor, TF_OP_FLOOR); }
/* nearbyint: ties to even in the default rounding mode, as ONNX's Round and torch.round */
tf_status ox_convert_round(ox_import *im, const ox_node *node) { return rounding(im, node, nearbyint, TF_OP_ROUND); }
