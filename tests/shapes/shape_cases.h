/* Shared by the shape-rule tests: operand and query macros, the rule runner, expectations, and
 * attribute constructors (static inline: each test uses a subset). */
#ifndef TIGHTFIT_TESTS_SHAPES_SHAPE_CASES_H
#define TIGHTFIT_TESTS_SHAPES_SHAPE_CASES_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "core/ops.h"
#include "core/shape_rules.h"
#include "graph/ir.h"

/* The graph's symbols, as graph/shapes.c hands them to a shape rule. */
static inline int64_t graph_dim_value(const void *graph, tf_dim dim) { return tf_ir_dim_value(graph, dim); }

#define BIG INT64_MAX
#define N_DIMS(...) ((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* An operand named `name` of dtype and shape (...). */
#define T(name, dtype, ...)                                                                                            \
  ((tf_shape_operand){(name), (dtype), TF_ACTIVATION, N_DIMS(__VA_ARGS__), (const int64_t[]){__VA_ARGS__}})
#define SCALAR(name, dtype) ((tf_shape_operand){(name), (dtype), TF_ACTIVATION, 0, NULL})
#define INPUTS(...)                                                                                                    \
  (const tf_shape_operand[]){__VA_ARGS__},                                                                             \
      (int32_t)(sizeof((tf_shape_operand[]){__VA_ARGS__}) / sizeof(tf_shape_operand))
/* Runs `rule` for `op` on the operands (...) into the caller's `out`. */
#define RULE(rule, op, attrs, ...) run(rule, op, attrs, INPUTS(__VA_ARGS__), NULL, &out)
#define RULE_G(graph, rule, op, attrs, ...) run(rule, op, attrs, INPUTS(__VA_ARGS__), graph, &out)

#define EXPECT_SHAPE(c, label, call, dtype, ...)                                                                       \
  expect_shape(c, label, call, &out, dtype, (const int64_t[]){__VA_ARGS__}, N_DIMS(__VA_ARGS__))
#define EXPECT_SCALAR(c, label, call, dtype) expect_shape(c, label, call, &out, dtype, NULL, 0)
/* Expects TF_ERR_SHAPE whose message contains both strings (NULL: no requirement). */
#define EXPECT_ERROR(c, label, call, mention1, mention2) expect_error(c, label, call, TF_ERR_SHAPE, mention1, mention2)

static inline tf_status run(tf_shape_rule rule, tf_op op, const tf_attrs *attrs, const tf_shape_operand *inputs,
                            int32_t n, const tf_graph *graph, tf_shape_result *out) {
  tf_shape_query q = {op, attrs, n, inputs, graph ? graph_dim_value : NULL, graph};
  memset(out, 0x5a, sizeof(*out)); // garbage: the rule must set every field it returns
  // cppcheck-suppress returnDanglingLifetime ; a tf_status is a fresh heap object, not a view of q
  return rule(&q, out);
}

static inline void expect_shape(tf_test_counts *c, const char *label, tf_status status, const tf_shape_result *out,
                                tf_dtype dtype, const int64_t *shape, int32_t rank) {
  char want[256], got[256];
  tf_format_shape(shape, rank, want, sizeof(want));
  bool ok = status == NULL && out->rank == rank && out->dtype == dtype;
  for (int32_t i = 0; ok && i < rank; i++)
    ok = out->shape[i] == shape[i];
  if (status)
    snprintf(got, sizeof(got), "error: %s", tf_status_message(status));
  else if (out->rank >= 0 && out->rank <= TF_MAX_RANK)
    snprintf(got, sizeof(got), "%s %s", tf_format_shape(out->shape, out->rank, (char[200]){0}, 200),
             tf_dtype_name(out->dtype));
  else
    snprintf(got, sizeof(got), "rank %" PRId32, out->rank);
  printf("%-4s %s: expected %s %s, got %s\n", ok ? "ok" : "FAIL", label, want, tf_dtype_name(dtype), got);
  CHECK(c, ok, "%s: expected %s %s, got %s", label, want, tf_dtype_name(dtype), got);
  tf_status_free(status);
}

static inline void expect_error(tf_test_counts *c, const char *label, tf_status status, tf_code code,
                                const char *mention1, const char *mention2) {
  const char *message = tf_status_message(status);
  bool ok = tf_status_code(status) == code && (!mention1 || strstr(message, mention1)) &&
            (!mention2 || strstr(message, mention2));
  char wanted[512];
  snprintf(wanted, sizeof(wanted), "%s%s%s%s%s%s%s", tf_code_name(code), mention1 ? " mentioning \"" : "",
           mention1 ? mention1 : "", mention1 ? "\"" : "", mention2 ? " and \"" : "", mention2 ? mention2 : "",
           mention2 ? "\"" : "");
  printf("%-4s %s: expected %s, got %s: %s\n", ok ? "ok" : "FAIL", label, wanted, tf_code_name(tf_status_code(status)),
         message);
  CHECK(c, ok, "%s: expected %s, got %s: \"%s\"", label, wanted, tf_code_name(tf_status_code(status)), message);
  tf_status_free(status);
}

/* ---- attribute builders ---- */

static inline tf_attrs attrs_of(tf_attr_kind kind) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  return a;
}

static inline tf_attrs matmul_attrs(bool transpose_a, bool transpose_b) {
  tf_attrs a = attrs_of(TF_ATTR_MATMUL);
  a.u.matmul.transpose_a = transpose_a;
  a.u.matmul.transpose_b = transpose_b;
  return a;
}

static inline tf_attrs reduce_attrs(bool keepdims, const int32_t *axes, int32_t n_axes) {
  tf_attrs a = attrs_of(TF_ATTR_REDUCE);
  a.u.reduce.keepdims = keepdims;
  a.u.reduce.n_axes = n_axes;
  for (int32_t i = 0; axes && i < n_axes && i < TF_MAX_RANK; i++)
    a.u.reduce.axes[i] = axes[i];
  return a;
}
#define REDUCE(keepdims, ...)                                                                                          \
  reduce_attrs(keepdims, (const int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static inline tf_attrs axis_attrs(int32_t axis) {
  tf_attrs a = attrs_of(TF_ATTR_AXIS);
  a.u.axis.axis = axis;
  return a;
}

static inline tf_attrs norm_attrs(float epsilon) {
  tf_attrs a = attrs_of(TF_ATTR_NORM);
  a.u.norm.epsilon = epsilon;
  return a;
}

static inline tf_attrs shape_attrs(const tf_dim *dims, int32_t rank) {
  tf_attrs a = attrs_of(TF_ATTR_SHAPE);
  a.u.shape.shape.rank = rank;
  for (int32_t i = 0; dims && i < rank && i < TF_MAX_RANK; i++)
    a.u.shape.shape.dims[i] = dims[i];
  return a;
}
#define FIX(n) ((tf_dim){(n), -1})
#define KEEP ((tf_dim){-1, -1})
#define SYM(symbol, multiple) ((tf_dim){(multiple), (symbol)})
#define TARGET(...)                                                                                                    \
  shape_attrs((const tf_dim[]){__VA_ARGS__}, (int32_t)(sizeof((tf_dim[]){__VA_ARGS__}) / sizeof(tf_dim)))

static inline tf_attrs transpose_attrs(const int32_t *perm, int32_t rank) {
  tf_attrs a = attrs_of(TF_ATTR_TRANSPOSE);
  a.u.transpose.rank = rank;
  for (int32_t i = 0; perm && i < rank && i < TF_MAX_RANK; i++)
    a.u.transpose.perm[i] = perm[i];
  return a;
}
#define PERM(...)                                                                                                      \
  transpose_attrs((const int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static inline tf_attrs slice_attrs(int32_t axis, int64_t start, int64_t end, int64_t step) {
  tf_attrs a = attrs_of(TF_ATTR_SLICE);
  a.u.slice = (tf_slice_attrs){axis, start, end, step};
  return a;
}

/* The same stride/padding/dilation on both spatial axes; no output padding. */
static inline tf_attrs conv_attrs(int32_t stride, int32_t padding, int32_t dilation, int32_t groups) {
  tf_attrs a = attrs_of(TF_ATTR_CONV);
  for (int i = 0; i < 2; i++) {
    a.u.conv.stride[i] = stride;
    a.u.conv.padding[i] = padding;
    a.u.conv.dilation[i] = dilation;
  }
  a.u.conv.groups = groups;
  return a;
}

static inline tf_attrs pool_attrs(int32_t kernel, int32_t stride, int32_t padding) {
  tf_attrs a = attrs_of(TF_ATTR_POOL);
  for (int i = 0; i < 2; i++) {
    a.u.pool.kernel[i] = kernel;
    a.u.pool.stride[i] = stride;
    a.u.pool.padding[i] = padding;
  }
  return a;
}

static inline tf_attrs dropout_attrs(float rate) {
  tf_attrs a = attrs_of(TF_ATTR_DROPOUT);
  a.u.dropout.rate = rate;
  a.u.dropout.seed = 42;
  return a;
}

static inline tf_attrs attention_attrs(int32_t num_heads, float scale) {
  tf_attrs a = attrs_of(TF_ATTR_ATTENTION);
  a.u.attention.num_heads = num_heads;
  a.u.attention.scale = scale;
  return a;
}

static inline tf_attrs cast_attrs(tf_dtype to) {
  tf_attrs a = attrs_of(TF_ATTR_CAST);
  a.u.cast.to = to;
  return a;
}

/* ---- what every rule checks first ---- */

#endif
