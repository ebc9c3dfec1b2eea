/* Shape rules of the ops built on matrix products: matmul, fused attention, and embedding (a
 * product with a one-hot matrix, done as a row lookup). */
#include <inttypes.h>
#include <math.h>

#include "core/shape_rules_internal.h"

/* The [rows, cols] of an operand's trailing matrix, after an optional transpose. */
typedef struct matrix_dims {
  int64_t rows, cols;
} matrix_dims;

static matrix_dims trailing_matrix(const tf_shape_operand *x, bool transpose) {
  int64_t r = x->shape[x->rank - 2], c = x->shape[x->rank - 1];
  return transpose ? (matrix_dims){c, r} : (matrix_dims){r, c};
}

/* op(a) op(b): its shape and dtype in *out. */
static tf_status product_shape(const tf_shape_query *q, const tf_shape_operand *a, const tf_shape_operand *b,
                               tf_shape_result *out) {
  const tf_matmul_attrs *attrs = &q->attrs->u.matmul;
  const tf_shape_operand *operands[2] = {a, b};
  for (int32_t i = 0; i < 2; i++)
    if (operands[i]->rank < 2)
      return tf_status_new(TF_ERR_SHAPE, "%s has rank %" PRId32 "; matmul needs rank >= 2",
                           tf_rules_describe(operands[i]).text, operands[i]->rank);
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, a));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(a, b));
  matrix_dims ma = trailing_matrix(a, attrs->transpose_a), mb = trailing_matrix(b, attrs->transpose_b);
  if (ma.cols != mb.rows)
    return tf_status_new(TF_ERR_SHAPE, "inner dimensions differ: %s%s has k=%" PRId64 ", %s%s has k=%" PRId64,
                         tf_rules_describe(a).text, attrs->transpose_a ? " (transposed)" : "", ma.cols,
                         tf_rules_describe(b).text, attrs->transpose_b ? " (transposed)" : "", mb.rows);
  int32_t batch_rank, bad_axis;
  if (!tf_rules_broadcast(a->shape, a->rank - 2, b->shape, b->rank - 2, out->shape, &batch_rank, &bad_axis))
    return tf_status_new(TF_ERR_SHAPE, "batch dims of %s and %s do not broadcast (batch axis %" PRId32 ")",
                         tf_rules_describe(a).text, tf_rules_describe(b).text, bad_axis);
  // Both ranks are <= TF_MAX_RANK, so batch_rank + 2 is too.
  out->shape[batch_rank] = ma.rows;
  out->shape[batch_rank + 1] = mb.cols;
  out->rank = batch_rank + 2;
  out->dtype = a->dtype;
  return tf_rules_finish(out);
}

tf_status tf_shape_matmul(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_matmul));
  return product_shape(q, &q->inputs[0], &q->inputs[1], out);
}

/* sum += op(a) op(b): the sum must be exactly the product's shape and dtype. Only the 2-D products
 * the optimizer pass rewrites (a weight's gradient part) are taken: no batch axes. */
tf_status tf_shape_matmul_accumulate(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_matmul_accumulate));
  const tf_shape_operand *sum = &q->inputs[0], *a = &q->inputs[1], *b = &q->inputs[2];
  for (int32_t i = 0; i < 3; i++)
    TF_RETURN_IF_ERROR(tf_rules_check_rank(&q->inputs[i], 2, "[rows, cols]"));
  tf_shape_result product;
  TF_RETURN_IF_ERROR(product_shape(q, a, b, &product));
  if (sum->dtype != product.dtype || sum->shape[0] != product.shape[0] || sum->shape[1] != product.shape[1])
    return tf_status_new(TF_ERR_SHAPE, "the sum %s is %s, but the product of %s and %s is %s %s",
                         tf_rules_describe(sum).text, tf_dtype_name(sum->dtype), tf_rules_describe(a).text,
                         tf_rules_describe(b).text, tf_dtype_name(product.dtype),
                         tf_rules_shape_text(product.shape, product.rank).text);
  out->rank = 0; /* no output: the sum is updated in place */
  return NULL;
}

tf_status tf_shape_attention(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_attention));
  const tf_shape_operand *query = &q->inputs[0], *key = &q->inputs[1], *value = &q->inputs[2];
  for (int32_t i = 0; i < 3; i++)
    TF_RETURN_IF_ERROR(tf_rules_check_rank(&q->inputs[i], 3, "[N,T,E]"));
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, query));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(query, key));
  TF_RETURN_IF_ERROR(tf_rules_check_same_dtype(query, value));
  for (int32_t i = 1; i < 3; i++) {
    const tf_shape_operand *x = &q->inputs[i];
    if (x->shape[0] != query->shape[0] || x->shape[2] != query->shape[2])
      return tf_status_new(TF_ERR_SHAPE, "%s must match %s in batch N and width E", tf_rules_describe(x).text,
                           tf_rules_describe(query).text);
  }
  if (key->shape[1] != value->shape[1])
    return tf_status_new(TF_ERR_SHAPE, "keys %s and values %s have different lengths Tk", tf_rules_describe(key).text,
                         tf_rules_describe(value).text);
  const tf_attention_attrs *attrs = &q->attrs->u.attention;
  int64_t width = query->shape[2];
  // Width 0 would make the default scale 1/sqrt(head width) infinite.
  if (width < 1)
    return tf_status_new(TF_ERR_SHAPE, "%s has width E = 0", tf_rules_describe(query).text);
  if (attrs->num_heads < 1 || width % attrs->num_heads != 0)
    return tf_status_new(TF_ERR_SHAPE, "num_heads %" PRId32 " must be >= 1 and divide E = %" PRId64 " of %s",
                         attrs->num_heads, width, tf_rules_describe(query).text);
  if (!isfinite(attrs->scale) || attrs->scale < 0.0f)
    return tf_status_new(TF_ERR_SHAPE, "attention scale %g must be finite and >= 0 (0: 1/sqrt(head width))",
                         (double)attrs->scale);
  tf_rules_copy_shape(out, query, query->dtype);
  return tf_rules_finish(out);
}

tf_status tf_shape_embedding(const tf_shape_query *q, tf_shape_result *out) {
  TF_RETURN_IF_ERROR(tf_rules_begin(q, out, tf_shape_embedding));
  const tf_shape_operand *ids = &q->inputs[0], *table = &q->inputs[1];
  if (!tf_rules_is_integer(ids->dtype))
    return tf_status_new(TF_ERR_SHAPE, "ids %s are %s; embedding ids must be i32 or i64", tf_rules_describe(ids).text,
                         tf_dtype_name(ids->dtype));
  if (ids->rank > TF_MAX_RANK - 1)
    return tf_status_new(TF_ERR_SHAPE, "ids %s have rank %" PRId32 "; the most is %d (the output adds one axis)",
                         tf_rules_describe(ids).text, ids->rank, TF_MAX_RANK - 1);
  TF_RETURN_IF_ERROR(tf_rules_check_rank(table, 2, "[V,D]"));
  TF_RETURN_IF_ERROR(tf_rules_check_floating(q, table));
  tf_rules_copy_shape(out, ids, table->dtype);
  out->shape[out->rank++] = table->shape[1];
  return tf_rules_finish(out);
}
