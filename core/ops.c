/* The op table's core columns as rows (core/op_table.h), and the lookups over them. */
#include "core/ops.h"

#include <string.h>

/* Rows are indexed by op number: the table lists the numbers 0, 1, 2, ... in order. */
#define POSITION(ID, ...) POSITION_##ID,
enum { TF_OP_TABLE(POSITION) TF_OP_ROWS };
#undef POSITION
#define IN_ORDER(ID, name, number, ...) _Static_assert(POSITION_##ID == number, #name ": rows out of number order");
TF_OP_TABLE(IN_ORDER)
#undef IN_ORDER
_Static_assert((int)TF_OP_ROWS == (int)TF_OP_COUNT, "one row per op");

/* The variadic arities the compiler relies on are the table's. */
#define MAX_INPUTS(ID, name, number, scope, min, max, ...) MAX_INPUTS_##ID = max,
enum { TF_OP_TABLE(MAX_INPUTS) };
#undef MAX_INPUTS
_Static_assert(MAX_INPUTS_CONCAT == TF_OP_VARIADIC, "concat takes TF_OP_VARIADIC inputs");
_Static_assert(MAX_INPUTS_GLOBAL_NORM_SQ == TF_OP_VARIADIC_INTERNAL, "global_norm_sq takes TF_OP_VARIADIC_INTERNAL");

#define ROW(ID, op_name, number, op_scope, min, max, outputs, shape_only_mask, in_place_mask, attrs_family, shape,     \
            alias_rule, workspace, vjp, cpu, cuda, vulkan, dtype_rule, slices, half)                                   \
  [TF_OP_##ID] = {.name = #op_name,                                                                                    \
                  .scope = TF_SCOPE_##op_scope,                                                                        \
                  .min_inputs = min,                                                                                   \
                  .max_inputs = max,                                                                                   \
                  .n_outputs = outputs,                                                                                \
                  .shape_only = shape_only_mask,                                                                       \
                  .in_place = in_place_mask,                                                                           \
                  .attrs = TF_ATTR_##attrs_family,                                                                     \
                  .shape_rule = tf_shape_##shape,                                                                      \
                  .alias = TF_ALIAS_##alias_rule,                                                                      \
                  .dtypes = TF_DTYPES_##dtype_rule},
static const tf_op_info op_table[TF_OP_COUNT] = {TF_OP_TABLE(ROW)};
#undef ROW

const tf_op_info *tf_op_info_get(tf_op op) {
  if ((int)op < 0 || op >= TF_OP_COUNT)
    return NULL;
  return &op_table[op];
}

bool tf_op_in_graphs(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info && info->scope == TF_SCOPE_GRAPH;
}

bool tf_op_input_shape_only(tf_op op, int32_t k) {
  const tf_op_info *info = tf_op_info_get(op);
  return info && k >= 0 && k < 8 && ((info->shape_only >> k) & 1u);
}

bool tf_op_moves_elements(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info && info->dtypes == TF_DTYPES_BYTES;
}

bool tf_op_output_may_alias(tf_op op, int32_t input) {
  const tf_op_info *info = tf_op_info_get(op);
  if (!info || input < 0 || input >= info->max_inputs)
    return false;
  return info->alias == TF_ALIAS_ANY_INPUT || (info->alias == TF_ALIAS_INPUT0 && input == 0);
}

tf_op tf_op_from_name(const char *name) {
  for (int op = 0; op < TF_OP_COUNT; op++)
    if (strcmp(op_table[op].name, name) == 0)
      return (tf_op)op;
  return TF_OP_COUNT;
}

int32_t tf_op_count(void) { return TF_OP_COUNT; }

bool tf_op_is_unary(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info && info->scope == TF_SCOPE_GRAPH && info->shape_rule == tf_shape_unary_float &&
         info->attrs == TF_ATTR_NONE && info->max_inputs == 1;
}

const char *tf_op_name(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info ? info->name : "?";
}

const char *tf_attr_kind_name(tf_attr_kind kind) {
  static const char *const names[TF_ATTR_COUNT] = {
      "none",    "matmul",    "reduce", "axis", "norm",          "shape",     "transpose",  "slice", "conv", "pool",
      "dropout", "attention", "cast",   "gelu", "cross_entropy", "optimizer", "leaky_relu", "ctc",   "clip"};
  if ((int)kind < 0 || kind >= TF_ATTR_COUNT)
    return "?";
  return names[kind];
}

bool tf_op_is_update(tf_op op) {
  const tf_op_info *info = tf_op_info_get(op);
  return info && info->attrs == TF_ATTR_OPTIMIZER;
}
