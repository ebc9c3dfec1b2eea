/* Checks shared by the shape rule files (compiler/shape_rules*.c); not used outside them.
 *
 * Every rule starts with tf_rules_begin(), which validates what a loaded file could get wrong in
 * any op (operands, arity, attribute family), then checks its own op's semantics, then ends with
 * tf_rules_finish(), which keeps the output's element count inside int64. Errors are TF_ERR_SHAPE
 * statuses naming operands as "'name' [d0,d1,...]". */
#ifndef TIGHTFIT_CORE_SHAPE_RULES_INTERNAL_H
#define TIGHTFIT_CORE_SHAPE_RULES_INTERNAL_H

#include "core/shape_rules.h"

/* Big enough for a long tensor name and TF_MAX_RANK 20-digit dims. Returned by value so that a
 * call can sit inside a printf argument list (C11 keeps the temporary until the full expression
 * ends). */
typedef struct tf_rules_text {
  char text[512];
} tf_rules_text;

/* "'name' [8,128,768]". */
tf_rules_text tf_rules_describe(const tf_shape_operand *x);
/* "[8,128,768]". */
tf_rules_text tf_rules_shape_text(const int64_t *shape, int32_t rank);

/* Validates the query for `rule`: the op table row for q->op names `rule`, n_inputs is in its range,
 * the attributes belong to its family (unless the family is TF_ATTR_NONE), and every operand has a
 * known dtype, 0 <= rank <= TF_MAX_RANK, dims >= 0 and an element count that fits int64, and the dtypes
 * suit the op (the op table's dtypes column: tf_op_check_dtypes). */
tf_status tf_rules_begin(const tf_shape_query *q, const tf_shape_result *out, tf_shape_rule rule);
/* Checks the output rank and that its element count fits int64. */
tf_status tf_rules_finish(const tf_shape_result *out);

bool tf_rules_is_floating(tf_dtype dtype);
bool tf_rules_is_integer(tf_dtype dtype); /* i32 or i64: index types */
/* Errors unless x has a floating dtype; the message names q's op. */
tf_status tf_rules_check_floating(const tf_shape_query *q, const tf_shape_operand *x);
/* Errors unless an activation's float attributes (q's, when of that family) are usable: a leaky_relu
 * slope finite, clip's bounds not NaN. */
tf_status tf_rules_check_activation(const tf_shape_query *q, const tf_shape_operand *x);
/* Errors unless a and b have the same dtype. */
tf_status tf_rules_check_same_dtype(const tf_shape_operand *a, const tf_shape_operand *b);
/* Errors unless x's rank is exactly `rank`; `layout` describes it in the message ("[N,C,H,W]"). */
tf_status tf_rules_check_rank(const tf_shape_operand *x, int32_t rank, const char *layout);
/* Errors unless x's shape equals `shape` exactly. */
tf_status tf_rules_check_shape_equal(const tf_shape_operand *a, const tf_shape_operand *b);

/* Maps a Python-style axis in [-rank, rank) to [0, rank); errors naming x otherwise. */
tf_status tf_rules_normalize_axis(const tf_shape_operand *x, int64_t axis, int32_t *normalized);

/* Numpy broadcasting of two right-aligned shapes into out (rank max(ra, rb)). On a mismatch it
 * returns false and sets *bad_axis to the offending output axis. */
bool tf_rules_broadcast(const int64_t *a, int32_t ra, const int64_t *b, int32_t rb, int64_t *out, int32_t *rank,
                        int32_t *bad_axis);

/* Product of dims into *count; false on int64 overflow (a zero dim makes any product 0). */
bool tf_rules_element_count(const int64_t *shape, int32_t rank, int64_t *count);

/* Sets *out to x's shape with `dtype`. */
void tf_rules_copy_shape(tf_shape_result *out, const tf_shape_operand *x, tf_dtype dtype);

#endif
