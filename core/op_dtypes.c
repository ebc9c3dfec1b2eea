/* The op table's dtypes column (core/op_table.h) applied to an op's operands. Every backend's
 * kernels read floating data only (f32 compute over f32, f16 or bf16 storage), integer ids and
 * labels where the row says so, and any dtype in the ops that move bytes. Before this check a u8
 * add ran the f32 kernel over a quarter-size buffer and wrote past it (ONNX's test_add_uint8). */
#include <inttypes.h>

#include "core/ops.h"
#include "core/shape_rules_internal.h"

/* Which input the rule reserves for integer ids or labels, or -1. */
static int32_t integer_input(tf_dtype_rule rule) {
  switch (rule) {
  case TF_DTYPES_INT0: return 0;
  case TF_DTYPES_INT1: return 1;
  case TF_DTYPES_INT2: return 2;
  case TF_DTYPES_INT1_LENGTHS: return 1;
  default: return -1;
  }
}

static tf_status not_floating(const tf_op_info *info, const tf_shape_operand *x, int32_t k) {
  const char *what = tf_rules_is_integer(x->dtype) || x->dtype == TF_U8
                         ? "integer arithmetic is not supported: cast the data to a float first"
                         : "its kernels do not read this dtype";
  return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " %s is %s; %s computes on f32, f16 or bf16 data (%s)", k,
                       tf_rules_describe(x).text, tf_dtype_name(x->dtype), info->name, what);
}

tf_status tf_op_check_dtypes(const tf_shape_query *q) {
  const tf_op_info *info = tf_op_info_get(q->op);
  /* adamw8bit: its shape rule checks the codes (u8) and the scales (f32) operand by operand */
  if (!info || info->dtypes == TF_DTYPES_ANY || info->dtypes == TF_DTYPES_BYTES || info->dtypes == TF_DTYPES_STATE8)
    return NULL;
  const int32_t integer = integer_input(info->dtypes);
  /* ctc_loss's optional input_lengths, its last input when present */
  const int32_t lengths =
      info->dtypes == TF_DTYPES_INT1_LENGTHS && q->n_inputs == info->max_inputs ? q->n_inputs - 1 : -1;
  for (int32_t k = 0; k < q->n_inputs; k++) {
    const tf_shape_operand *x = &q->inputs[k];
    if (tf_op_input_shape_only(q->op, k))
      continue;
    if (k == integer || k == lengths) {
      if (!tf_rules_is_integer(x->dtype))
        return tf_status_new(TF_ERR_SHAPE, "input %" PRId32 " %s is %s; %s takes integer %s there (i32 or i64)", k,
                             tf_rules_describe(x).text, tf_dtype_name(x->dtype), info->name,
                             info->dtypes == TF_DTYPES_INT0 ? "ids"
                             : k == lengths                 ? "lengths"
                                                            : "labels");
    } else if (!tf_rules_is_floating(x->dtype)) {
      return not_floating(info, x, k);
    }
  }
  return NULL;
}
