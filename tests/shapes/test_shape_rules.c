/* Tests of the shape and dtype rules (compiler/shape_rules*.c), called directly with hand-built
 * queries. For every op family: a correct case with its exact output shape and dtype, broadcasting
 * and negative axes where they apply, every error path with the operand names or numbers that its
 * message must mention, int64 overflow, and finally a sweep of random, mostly malformed queries
 * (as a corrupt file could produce) that must never crash or yield an invalid shape. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "compiler/ir.h"
#include "compiler/ops.h"
#include "compiler/shape_rules.h"

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

static tf_status run(tf_shape_rule rule, tf_op op, const tf_attrs *attrs, const tf_shape_operand *inputs, int32_t n,
                     const tf_graph *graph, tf_shape_result *out) {
  tf_shape_query q = {op, attrs, n, inputs, graph};
  memset(out, 0x5a, sizeof(*out)); // garbage: the rule must set every field it returns
  // cppcheck-suppress returnDanglingLifetime ; a tf_status is a fresh heap object, not a view of q
  return rule(&q, out);
}

static void expect_shape(tf_test_counts *c, const char *label, tf_status status, const tf_shape_result *out,
                         tf_dtype dtype, const int64_t *shape, int32_t rank) {
  char want[256], got[256];
  tf_ir_format_shape(shape, rank, want, sizeof(want));
  bool ok = status == NULL && out->rank == rank && out->dtype == dtype;
  for (int32_t i = 0; ok && i < rank; i++)
    ok = out->shape[i] == shape[i];
  if (status)
    snprintf(got, sizeof(got), "error: %s", tf_status_message(status));
  else if (out->rank >= 0 && out->rank <= TF_MAX_RANK)
    snprintf(got, sizeof(got), "%s %s", tf_ir_format_shape(out->shape, out->rank, (char[200]){0}, 200),
             tf_dtype_name(out->dtype));
  else
    snprintf(got, sizeof(got), "rank %" PRId32, out->rank);
  printf("%-4s %s: expected %s %s, got %s\n", ok ? "ok" : "FAIL", label, want, tf_dtype_name(dtype), got);
  CHECK(c, ok, "%s: expected %s %s, got %s", label, want, tf_dtype_name(dtype), got);
  tf_status_free(status);
}

static void expect_error(tf_test_counts *c, const char *label, tf_status status, tf_code code, const char *mention1,
                         const char *mention2) {
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

static tf_attrs attrs_of(tf_attr_kind kind) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  return a;
}

static tf_attrs matmul_attrs(bool transpose_a, bool transpose_b) {
  tf_attrs a = attrs_of(TF_ATTR_MATMUL);
  a.u.matmul.transpose_a = transpose_a;
  a.u.matmul.transpose_b = transpose_b;
  return a;
}

static tf_attrs reduce_attrs(bool keepdims, const int32_t *axes, int32_t n_axes) {
  tf_attrs a = attrs_of(TF_ATTR_REDUCE);
  a.u.reduce.keepdims = keepdims;
  a.u.reduce.n_axes = n_axes;
  for (int32_t i = 0; axes && i < n_axes && i < TF_MAX_RANK; i++)
    a.u.reduce.axes[i] = axes[i];
  return a;
}
#define REDUCE(keepdims, ...)                                                                                          \
  reduce_attrs(keepdims, (const int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static tf_attrs axis_attrs(int32_t axis) {
  tf_attrs a = attrs_of(TF_ATTR_AXIS);
  a.u.axis.axis = axis;
  return a;
}

static tf_attrs norm_attrs(float epsilon) {
  tf_attrs a = attrs_of(TF_ATTR_NORM);
  a.u.norm.epsilon = epsilon;
  return a;
}

static tf_attrs shape_attrs(const tf_dim *dims, int32_t rank) {
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

static tf_attrs transpose_attrs(const int32_t *perm, int32_t rank) {
  tf_attrs a = attrs_of(TF_ATTR_TRANSPOSE);
  a.u.transpose.rank = rank;
  for (int32_t i = 0; perm && i < rank && i < TF_MAX_RANK; i++)
    a.u.transpose.perm[i] = perm[i];
  return a;
}
#define PERM(...)                                                                                                      \
  transpose_attrs((const int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

static tf_attrs slice_attrs(int32_t axis, int64_t start, int64_t end, int64_t step) {
  tf_attrs a = attrs_of(TF_ATTR_SLICE);
  a.u.slice = (tf_slice_attrs){axis, start, end, step};
  return a;
}

/* The same stride/padding/dilation on both spatial axes; no output padding. */
static tf_attrs conv_attrs(int32_t stride, int32_t padding, int32_t dilation, int32_t groups) {
  tf_attrs a = attrs_of(TF_ATTR_CONV);
  for (int i = 0; i < 2; i++) {
    a.u.conv.stride[i] = stride;
    a.u.conv.padding[i] = padding;
    a.u.conv.dilation[i] = dilation;
  }
  a.u.conv.groups = groups;
  return a;
}

static tf_attrs pool_attrs(int32_t kernel, int32_t stride, int32_t padding) {
  tf_attrs a = attrs_of(TF_ATTR_POOL);
  for (int i = 0; i < 2; i++) {
    a.u.pool.kernel[i] = kernel;
    a.u.pool.stride[i] = stride;
    a.u.pool.padding[i] = padding;
  }
  return a;
}

static tf_attrs dropout_attrs(float rate) {
  tf_attrs a = attrs_of(TF_ATTR_DROPOUT);
  a.u.dropout.rate = rate;
  a.u.dropout.seed = 42;
  return a;
}

static tf_attrs attention_attrs(int32_t num_heads, float scale) {
  tf_attrs a = attrs_of(TF_ATTR_ATTENTION);
  a.u.attention.num_heads = num_heads;
  a.u.attention.scale = scale;
  return a;
}

static tf_attrs cast_attrs(tf_dtype to) {
  tf_attrs a = attrs_of(TF_ATTR_CAST);
  a.u.cast.to = to;
  return a;
}

/* ---- what every rule checks first ---- */

static void test_common(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs mm = matmul_attrs(false, false), conv = conv_attrs(1, 0, 1, 1), none = attrs_of(TF_ATTR_NONE);
  EXPECT_ERROR(c, "matmul given conv attributes",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &conv, T("a", TF_F32, 2, 3), T("b", TF_F32, 3, 4)), "'matmul'",
               "'conv'");
  EXPECT_ERROR(c, "matmul without attributes",
               RULE(tf_shape_matmul, TF_OP_MATMUL, NULL, T("a", TF_F32, 2, 3), T("b", TF_F32, 3, 4)), "matmul", "none");
  tf_attrs garbage = attrs_of((tf_attr_kind)977);
  EXPECT_ERROR(c, "matmul with attribute kind 977",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &garbage, T("a", TF_F32, 2, 3), T("b", TF_F32, 3, 4)), "977", NULL);
  EXPECT_SHAPE(c, "add ignores attributes of another family",
               RULE(tf_shape_broadcast, TF_OP_ADD, &garbage, T("a", TF_F32, 2), T("b", TF_F32, 2)), TF_F32, 2);
  EXPECT_SHAPE(c, "add with NULL attributes",
               RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, 2), T("b", TF_F32, 2)), TF_F32, 2);
  expect_error(c, "matmul rule called for add",
               RULE(tf_shape_matmul, TF_OP_ADD, &mm, T("a", TF_F32, 2, 3), T("b", TF_F32, 3, 4)), TF_ERR_INTERNAL,
               "add", NULL);
  expect_error(c, "rule called for op 1000", RULE(tf_shape_unary_float, (tf_op)1000, &none, T("a", TF_F32, 2)),
               TF_ERR_INTERNAL, "1000", NULL);
  expect_error(c, "rule called with too many inputs",
               RULE(tf_shape_unary_float, TF_OP_EXP, &none, T("a", TF_F32, 2), T("b", TF_F32, 2)), TF_ERR_INTERNAL,
               "exp", NULL);
  EXPECT_ERROR(c, "negative dim", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, T("neg", TF_F32, 2, -3)), "'neg' [2,-3]",
               "negative");
  EXPECT_ERROR(c, "unknown dtype", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, T("odd", (tf_dtype)42, 2)), "'odd'",
               "42");
  EXPECT_ERROR(c, "unknown negative dtype", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, T("odd", (tf_dtype)-1, 2)),
               "'odd'", "-1");
  tf_shape_operand rank9 = {"deep", TF_F32, TF_INPUT, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}};
  EXPECT_ERROR(c, "rank 9 operand", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, rank9), "'deep'", "rank 9");
  tf_shape_operand rank_neg = {"neg_rank", TF_F32, TF_INPUT, -1, NULL};
  EXPECT_ERROR(c, "rank -1 operand", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, rank_neg), "'neg_rank'", "rank -1");
  tf_shape_operand no_shape = {"hollow", TF_F32, TF_INPUT, 2, NULL};
  EXPECT_ERROR(c, "rank 2 operand without a shape", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, no_shape), "'hollow'",
               "no shape");
  EXPECT_ERROR(c, "operand with more elements than int64",
               RULE(tf_shape_unary_float, TF_OP_EXP, NULL, T("huge", TF_F32, BIG, 2)), "'huge' [9223372036854775807,2]",
               "int64");
  EXPECT_SHAPE(c, "[BIG,0] is empty, not an overflow",
               RULE(tf_shape_unary_float, TF_OP_EXP, NULL, T("empty", TF_F32, BIG, 0)), TF_F32, BIG, 0);
  expect_error(c, "rule called without a query", tf_shape_matmul(NULL, &out), TF_ERR_INTERNAL, "without a query", NULL);
  tf_shape_query no_inputs = {TF_OP_EXP, NULL, 1, NULL, NULL};
  expect_error(c, "rule called with inputs NULL", tf_shape_unary_float(&no_inputs, &out), TF_ERR_INTERNAL, "inputs",
               NULL);
  tf_shape_operand unnamed = {NULL, TF_I32, TF_INPUT, 1, (const int64_t[]){3}};
  EXPECT_ERROR(c, "operand without a name", RULE(tf_shape_unary_float, TF_OP_EXP, NULL, unnamed), "'?' [3]", "i32");
}

/* ---- matmul, attention, embedding ---- */

static void test_matmul(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs plain = matmul_attrs(false, false), ta = matmul_attrs(true, false), tb = matmul_attrs(false, true);
  EXPECT_SHAPE(c, "linear [8,128,768] x [768,2304]",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("x", TF_F32, 8, 128, 768), T("w", TF_F32, 768, 2304)),
               TF_F32, 8, 128, 2304);
  EXPECT_SHAPE(c, "transpose_a [2,5,3]^T x [5,4]",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &ta, T("a", TF_F16, 2, 5, 3), T("b", TF_F16, 5, 4)), TF_F16, 2, 3,
               4);
  EXPECT_SHAPE(c, "transpose_b [3,4] x [6,4]^T",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &tb, T("a", TF_BF16, 3, 4), T("b", TF_BF16, 6, 4)), TF_BF16, 3, 6);
  EXPECT_SHAPE(c, "batch broadcast [2,1,3,4] x [5,4,6]",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, 2, 1, 3, 4), T("b", TF_F32, 5, 4, 6)), TF_F32,
               2, 5, 3, 6);
  EXPECT_SHAPE(c, "rank-2 a with batched b [3,4] x [7,4,6]",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, 3, 4), T("b", TF_F32, 7, 4, 6)), TF_F32, 7, 3,
               6);
  EXPECT_ERROR(c, "inner dims differ",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("h.0.ln", TF_F32, 8, 128, 768), T("w", TF_F32, 512, 2304)),
               "inner dimensions differ: 'h.0.ln' [8,128,768] has k=768", "'w' [512,2304] has k=512");
  EXPECT_ERROR(c, "inner dims differ after transpose_b",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &tb, T("a", TF_F32, 3, 4), T("b", TF_F32, 4, 6)), "k=4", "k=6");
  EXPECT_ERROR(c, "rank-1 a", RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("vec", TF_F32, 4), T("b", TF_F32, 4, 6)),
               "'vec' [4]", "rank 1");
  EXPECT_ERROR(c, "scalar b", RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, 4, 4), SCALAR("s", TF_F32)),
               "'s' []", "rank 0");
  EXPECT_ERROR(c, "integer matmul",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_I32, 2, 2), T("b", TF_I32, 2, 2)), "'a'", "i32");
  EXPECT_ERROR(c, "dtypes differ",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, 2, 2), T("b", TF_F16, 2, 2)),
               "'b' [2,2] is f16", "'a' [2,2] is f32");
  EXPECT_ERROR(c, "batch dims do not broadcast",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, 2, 3, 4), T("b", TF_F32, 3, 4, 5)),
               "'a' [2,3,4]", "'b' [3,4,5]");
  EXPECT_ERROR(c, "broadcast batch overflows int64",
               RULE(tf_shape_matmul, TF_OP_MATMUL, &plain, T("a", TF_F32, INT64_C(1) << 60, 1, 2, 2),
                    T("b", TF_F32, 1, 8, 2, 2)),
               "[1152921504606846976,8,2,2]", "int64");
}

static void test_attention(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs heads8 = attention_attrs(8, 0.0f);
  EXPECT_SHAPE(c, "attention q [2,10,64] k,v [2,12,64]",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 12, 64)),
               TF_F32, 2, 10, 64);
  tf_attrs scaled = attention_attrs(1, 0.125f);
  EXPECT_SHAPE(c, "attention bf16 with explicit scale",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &scaled, T("q", TF_BF16, 1, 3, 8), T("k", TF_BF16, 1, 5, 8),
                    T("v", TF_BF16, 1, 5, 8)),
               TF_BF16, 1, 3, 8);
  tf_attrs heads0 = attention_attrs(0, 0.0f), heads3 = attention_attrs(3, 0.0f), negative = attention_attrs(8, -1.0f),
           not_a_number = attention_attrs(8, NAN), infinite = attention_attrs(8, INFINITY);
  EXPECT_ERROR(c, "num_heads 0",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads0, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 12, 64)),
               "num_heads 0", "64");
  EXPECT_ERROR(c, "num_heads 3 does not divide 64",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads3, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 12, 64)),
               "num_heads 3", "E = 64");
  EXPECT_ERROR(c, "batch differs",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 3, 12, 64),
                    T("v", TF_F32, 2, 12, 64)),
               "'k' [3,12,64]", "'q' [2,10,64]");
  EXPECT_ERROR(c, "width differs",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 12, 32)),
               "'v' [2,12,32]", "'q' [2,10,64]");
  EXPECT_ERROR(c, "k and v lengths differ",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 11, 64)),
               "'k' [2,12,64]", "'v' [2,11,64]");
  EXPECT_ERROR(c, "rank-2 q",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F32, 2, 12, 64)),
               "'q' [10,64]", "rank 3");
  EXPECT_ERROR(c, "dtypes differ",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 64), T("k", TF_F32, 2, 12, 64),
                    T("v", TF_F16, 2, 12, 64)),
               "'v' [2,12,64] is f16", NULL);
  EXPECT_ERROR(c, "integer q",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_I64, 2, 10, 64), T("k", TF_I64, 2, 12, 64),
                    T("v", TF_I64, 2, 12, 64)),
               "'q'", "i64");
  EXPECT_ERROR(c, "scale -1",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &negative, T("q", TF_F32, 2, 10, 64),
                    T("k", TF_F32, 2, 12, 64), T("v", TF_F32, 2, 12, 64)),
               "scale -1", NULL);
  EXPECT_ERROR(c, "scale NaN",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &not_a_number, T("q", TF_F32, 2, 10, 64),
                    T("k", TF_F32, 2, 12, 64), T("v", TF_F32, 2, 12, 64)),
               "scale", "finite");
  EXPECT_ERROR(c, "scale inf",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &infinite, T("q", TF_F32, 2, 10, 64),
                    T("k", TF_F32, 2, 12, 64), T("v", TF_F32, 2, 12, 64)),
               "scale", "finite");
  EXPECT_ERROR(c, "width 0",
               RULE(tf_shape_attention, TF_OP_ATTENTION, &heads8, T("q", TF_F32, 2, 10, 0), T("k", TF_F32, 2, 12, 0),
                    T("v", TF_F32, 2, 12, 0)),
               "'q' [2,10,0]", "E = 0");
}

static void test_embedding(tf_test_counts *c) {
  tf_shape_result out;
  EXPECT_SHAPE(c, "embedding ids [4,16] table [1000,64]",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_I64, 4, 16), T("table", TF_F16, 1000, 64)),
               TF_F16, 4, 16, 64);
  EXPECT_SHAPE(c, "embedding of scalar i32 id",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, SCALAR("id", TF_I32), T("table", TF_F32, 10, 3)), TF_F32,
               3);
  EXPECT_SHAPE(
      c, "embedding ids of rank 7",
      RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_I32, 1, 2, 1, 2, 1, 2, 1), T("table", TF_F32, 10, 3)),
      TF_F32, 1, 2, 1, 2, 1, 2, 1, 3);
  EXPECT_ERROR(c, "float ids",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_F32, 4), T("table", TF_F32, 10, 3)),
               "'ids' [4]", "f32");
  EXPECT_ERROR(c, "u8 ids",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_U8, 4), T("table", TF_F32, 10, 3)),
               "'ids' [4]", "u8");
  EXPECT_ERROR(c, "ids of rank 8",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_I32, 1, 1, 1, 1, 1, 1, 1, 1),
                    T("table", TF_F32, 10, 3)),
               "'ids'", "rank 8");
  EXPECT_ERROR(c, "table of rank 3",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_I32, 4), T("table", TF_F32, 10, 3, 2)),
               "'table' [10,3,2]", "rank 2");
  EXPECT_ERROR(c, "integer table",
               RULE(tf_shape_embedding, TF_OP_EMBEDDING, NULL, T("ids", TF_I32, 4), T("table", TF_I32, 10, 3)),
               "'table'", "i32");
}

/* ---- elementwise ---- */

static void test_broadcast(tf_test_counts *c) {
  tf_shape_result out;
  EXPECT_SHAPE(c, "add [4,1,3] + [5,1]",
               RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, 4, 1, 3), T("b", TF_F32, 5, 1)), TF_F32, 4, 5,
               3);
  EXPECT_SHAPE(c, "mul scalar * [2,3]",
               RULE(tf_shape_broadcast, TF_OP_MUL, NULL, SCALAR("s", TF_F16), T("b", TF_F16, 2, 3)), TF_F16, 2, 3);
  EXPECT_SCALAR(c, "sub scalar - scalar",
                RULE(tf_shape_broadcast, TF_OP_SUB, NULL, SCALAR("a", TF_F32), SCALAR("b", TF_F32)), TF_F32);
  EXPECT_SHAPE(c, "div [2,0] / [1] keeps the empty dim",
               RULE(tf_shape_broadcast, TF_OP_DIV, NULL, T("a", TF_F32, 2, 0), T("b", TF_F32, 1)), TF_F32, 2, 0);
  EXPECT_SHAPE(c, "add i32 + i32", RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_I32, 3), T("b", TF_I32, 2, 1)),
               TF_I32, 2, 3);
  EXPECT_ERROR(c, "add [2,3] + [4]", RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, 2, 3), T("b", TF_F32, 4)),
               "'a' [2,3] with 'b' [4]", "3 vs 4");
  EXPECT_ERROR(c, "add [5,3] + [7,2,3] on axis -2",
               RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, 5, 3), T("b", TF_F32, 7, 2, 3)), "axis -2",
               "5 vs 2");
  EXPECT_ERROR(c, "add f32 + f16", RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, 3), T("b", TF_F16, 3)),
               "'a' [3] is f32", "'b' [3] is f16");
  EXPECT_ERROR(c, "broadcast [2^62,1] + [1,4] overflows",
               RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_F32, INT64_C(1) << 62, 1), T("b", TF_F32, 1, 4)),
               "[4611686018427387904,4]", "int64");
}

static void test_unary(tf_test_counts *c) {
  tf_shape_result out;
  const tf_op ops[] = {TF_OP_NEG,  TF_OP_EXP,  TF_OP_LOG,     TF_OP_SQRT, TF_OP_RSQRT,
                       TF_OP_RELU, TF_OP_SILU, TF_OP_SIGMOID, TF_OP_TANH};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    char label[64];
    snprintf(label, sizeof(label), "%s [2,3] f16", tf_op_name(ops[i]));
    EXPECT_SHAPE(c, label, RULE(tf_shape_unary_float, ops[i], NULL, T("x", TF_F16, 2, 3)), TF_F16, 2, 3);
    snprintf(label, sizeof(label), "%s of i64", tf_op_name(ops[i]));
    EXPECT_ERROR(c, label, RULE(tf_shape_unary_float, ops[i], NULL, T("ids", TF_I64, 2)), "'ids' [2] is i64",
                 tf_op_name(ops[i]));
  }
  EXPECT_SCALAR(c, "relu of a scalar", RULE(tf_shape_unary_float, TF_OP_RELU, NULL, SCALAR("s", TF_BF16)), TF_BF16);
  tf_attrs gelu = attrs_of(TF_ATTR_GELU), none = attrs_of(TF_ATTR_NONE);
  gelu.u.gelu.approximate = true;
  EXPECT_SHAPE(c, "gelu with gelu attributes", RULE(tf_shape_unary_float, TF_OP_GELU, &gelu, T("x", TF_F32, 5)), TF_F32,
               5);
  EXPECT_ERROR(c, "gelu with no-attribute family", RULE(tf_shape_unary_float, TF_OP_GELU, &none, T("x", TF_F32, 5)),
               "gelu", "'none'");
  EXPECT_ERROR(c, "gelu without attributes", RULE(tf_shape_unary_float, TF_OP_GELU, NULL, T("x", TF_F32, 5)), "gelu",
               "none");
}

static void test_dropout(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs tenth = dropout_attrs(0.1f), zero = dropout_attrs(0.0f), one = dropout_attrs(1.0f),
           negative = dropout_attrs(-0.1f), not_a_number = dropout_attrs(NAN), infinite = dropout_attrs(INFINITY);
  EXPECT_SHAPE(c, "dropout 0.1 [4,8]", RULE(tf_shape_dropout, TF_OP_DROPOUT, &tenth, T("x", TF_F32, 4, 8)), TF_F32, 4,
               8);
  EXPECT_SHAPE(c, "dropout 0 [4,8] bf16", RULE(tf_shape_dropout, TF_OP_DROPOUT, &zero, T("x", TF_BF16, 4, 8)), TF_BF16,
               4, 8);
  EXPECT_ERROR(c, "dropout rate 1", RULE(tf_shape_dropout, TF_OP_DROPOUT, &one, T("x", TF_F32, 4)), "rate 1",
               "'x' [4]");
  EXPECT_ERROR(c, "dropout rate -0.1", RULE(tf_shape_dropout, TF_OP_DROPOUT, &negative, T("x", TF_F32, 4)), "rate -0.1",
               NULL);
  EXPECT_ERROR(c, "dropout rate NaN", RULE(tf_shape_dropout, TF_OP_DROPOUT, &not_a_number, T("x", TF_F32, 4)), "nan",
               "[0, 1)");
  EXPECT_ERROR(c, "dropout rate inf", RULE(tf_shape_dropout, TF_OP_DROPOUT, &infinite, T("x", TF_F32, 4)), "inf",
               "[0, 1)");
  EXPECT_ERROR(c, "dropout of i32", RULE(tf_shape_dropout, TF_OP_DROPOUT, &tenth, T("x", TF_I32, 4)), "'x' [4] is i32",
               NULL);
}

static void test_cast(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs to_f16 = cast_attrs(TF_F16), to_f32 = cast_attrs(TF_F32), bad = cast_attrs((tf_dtype)99),
           negative = cast_attrs((tf_dtype)-1);
  EXPECT_SHAPE(c, "cast f32 [2,3] to f16", RULE(tf_shape_cast, TF_OP_CAST, &to_f16, T("x", TF_F32, 2, 3)), TF_F16, 2,
               3);
  EXPECT_SHAPE(c, "cast i64 [5] to f32", RULE(tf_shape_cast, TF_OP_CAST, &to_f32, T("ids", TF_I64, 5)), TF_F32, 5);
  EXPECT_SCALAR(c, "cast of a scalar", RULE(tf_shape_cast, TF_OP_CAST, &to_f16, SCALAR("s", TF_U8)), TF_F16);
  EXPECT_ERROR(c, "cast to dtype 99", RULE(tf_shape_cast, TF_OP_CAST, &bad, T("x", TF_F32, 2)), "'x' [2]", "99");
  EXPECT_ERROR(c, "cast to dtype -1", RULE(tf_shape_cast, TF_OP_CAST, &negative, T("x", TF_F32, 2)), "'x' [2]", "-1");
}

static void test_pair_loss(tf_test_counts *c) {
  tf_shape_result out;
  EXPECT_SCALAR(c, "mse [4,3] vs [4,3]",
                RULE(tf_shape_pair_loss, TF_OP_MSE, NULL, T("pred", TF_F32, 4, 3), T("target", TF_F32, 4, 3)), TF_F32);
  EXPECT_SCALAR(c, "bce_with_logits f16 gives an f32 loss",
                RULE(tf_shape_pair_loss, TF_OP_BCE_WITH_LOGITS, NULL, T("logits", TF_F16, 8), T("target", TF_F16, 8)),
                TF_F32);
  EXPECT_ERROR(c, "mse shapes differ",
               RULE(tf_shape_pair_loss, TF_OP_MSE, NULL, T("pred", TF_F32, 4, 3), T("target", TF_F32, 4, 1)),
               "'pred' [4,3]", "'target' [4,1]");
  EXPECT_ERROR(c, "mse ranks differ",
               RULE(tf_shape_pair_loss, TF_OP_MSE, NULL, T("pred", TF_F32, 4), T("target", TF_F32, 4, 1)), "'pred' [4]",
               "'target' [4,1]");
  EXPECT_ERROR(c, "bce dtypes differ",
               RULE(tf_shape_pair_loss, TF_OP_BCE_WITH_LOGITS, NULL, T("logits", TF_F32, 4), T("target", TF_F16, 4)),
               "'target' [4] is f16", NULL);
  EXPECT_ERROR(c, "mse of integers",
               RULE(tf_shape_pair_loss, TF_OP_MSE, NULL, T("pred", TF_I32, 4), T("target", TF_I32, 4)),
               "'pred' [4] is i32", "mse");
}

/* ---- along axes ---- */

static void test_reduce(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs axis1 = REDUCE(false, 1), axis1_keep = REDUCE(true, 1), last_and_first = REDUCE(false, -1, 0),
           all = reduce_attrs(false, NULL, 0), all_keep = reduce_attrs(true, NULL, 0);
  EXPECT_SHAPE(c, "sum [2,3,4] axis 1", RULE(tf_shape_reduce, TF_OP_SUM, &axis1, T("x", TF_F32, 2, 3, 4)), TF_F32, 2,
               4);
  EXPECT_SHAPE(c, "mean [2,3,4] axis 1 keepdims",
               RULE(tf_shape_reduce, TF_OP_MEAN, &axis1_keep, T("x", TF_F16, 2, 3, 4)), TF_F16, 2, 1, 4);
  EXPECT_SHAPE(c, "sum [2,3,4] axes {-1,0}", RULE(tf_shape_reduce, TF_OP_SUM, &last_and_first, T("x", TF_F32, 2, 3, 4)),
               TF_F32, 3);
  EXPECT_SCALAR(c, "sum [2,3,4] over all axes", RULE(tf_shape_reduce, TF_OP_SUM, &all, T("x", TF_F32, 2, 3, 4)),
                TF_F32);
  EXPECT_SHAPE(c, "mean [2,3,4] over all axes keepdims",
               RULE(tf_shape_reduce, TF_OP_MEAN, &all_keep, T("x", TF_F32, 2, 3, 4)), TF_F32, 1, 1, 1);
  EXPECT_SCALAR(c, "sum of a scalar", RULE(tf_shape_reduce, TF_OP_SUM, &all, SCALAR("s", TF_F32)), TF_F32);
  EXPECT_SHAPE(c, "max of i32 [5,6] axis 1", RULE(tf_shape_reduce, TF_OP_MAX, &axis1, T("ids", TF_I32, 5, 6)), TF_I32,
               5);
  EXPECT_ERROR(c, "sum of i32", RULE(tf_shape_reduce, TF_OP_SUM, &axis1, T("ids", TF_I32, 5, 6)), "'ids' [5,6] is i32",
               "sum");
  EXPECT_ERROR(c, "mean of u8", RULE(tf_shape_reduce, TF_OP_MEAN, &axis1, T("px", TF_U8, 5, 6)), "'px' [5,6] is u8",
               "mean");
  tf_attrs axis3 = REDUCE(false, 3), axis_m4 = REDUCE(false, -4), duplicate = REDUCE(false, 1, -2),
           too_many = reduce_attrs(false, NULL, 9), negative_count = reduce_attrs(false, NULL, -1);
  EXPECT_ERROR(c, "sum axis 3 of rank 3", RULE(tf_shape_reduce, TF_OP_SUM, &axis3, T("x", TF_F32, 2, 3, 4)), "axis 3",
               "'x' [2,3,4]");
  EXPECT_ERROR(c, "sum axis -4 of rank 3", RULE(tf_shape_reduce, TF_OP_SUM, &axis_m4, T("x", TF_F32, 2, 3, 4)),
               "axis -4", "'x' [2,3,4]");
  EXPECT_ERROR(c, "sum axes {1,-2} repeat axis 1",
               RULE(tf_shape_reduce, TF_OP_SUM, &duplicate, T("x", TF_F32, 2, 3, 4)), "axis -2", "twice");
  EXPECT_ERROR(c, "sum with n_axes 9", RULE(tf_shape_reduce, TF_OP_SUM, &too_many, T("x", TF_F32, 2, 3, 4)), "9 axes",
               "'x'");
  EXPECT_ERROR(c, "sum with n_axes -1", RULE(tf_shape_reduce, TF_OP_SUM, &negative_count, T("x", TF_F32, 2, 3, 4)),
               "-1 axes", "'x'");
  tf_attrs axis0 = REDUCE(false, 0);
  EXPECT_ERROR(c, "sum axis 0 of a scalar", RULE(tf_shape_reduce, TF_OP_SUM, &axis0, SCALAR("s", TF_F32)), "axis 0",
               "'s' []");
}

static void test_softmax(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs last = axis_attrs(-1), first = axis_attrs(0), two = axis_attrs(2), minus3 = axis_attrs(-3);
  EXPECT_SHAPE(c, "softmax [2,5] axis -1", RULE(tf_shape_softmax, TF_OP_SOFTMAX, &last, T("x", TF_F32, 2, 5)), TF_F32,
               2, 5);
  EXPECT_SHAPE(c, "log_softmax [2,5] axis 0", RULE(tf_shape_softmax, TF_OP_LOG_SOFTMAX, &first, T("x", TF_F16, 2, 5)),
               TF_F16, 2, 5);
  EXPECT_ERROR(c, "softmax axis 2 of rank 2", RULE(tf_shape_softmax, TF_OP_SOFTMAX, &two, T("x", TF_F32, 2, 5)),
               "axis 2", "'x' [2,5]");
  EXPECT_ERROR(c, "softmax axis -3 of rank 2", RULE(tf_shape_softmax, TF_OP_SOFTMAX, &minus3, T("x", TF_F32, 2, 5)),
               "axis -3", "'x' [2,5]");
  EXPECT_ERROR(c, "softmax of a scalar", RULE(tf_shape_softmax, TF_OP_SOFTMAX, &last, SCALAR("s", TF_F32)), "axis -1",
               "'s' []");
  EXPECT_ERROR(c, "softmax of i32", RULE(tf_shape_softmax, TF_OP_SOFTMAX, &last, T("x", TF_I32, 2, 5)),
               "'x' [2,5] is i32", "softmax");
}

static void test_norm(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs eps = norm_attrs(1e-5f);
  EXPECT_SHAPE(
      c, "layer_norm [2,3,8] with gamma, beta [8]",
      RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, T("x", TF_F32, 2, 3, 8), T("gamma", TF_F32, 8), T("beta", TF_F32, 8)),
      TF_F32, 2, 3, 8);
  EXPECT_SHAPE(c, "layer_norm without beta",
               RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, T("x", TF_F16, 4, 8), T("gamma", TF_F16, 8)), TF_F16, 4, 8);
  EXPECT_SHAPE(c, "rms_norm [4,8] gamma [8]",
               RULE(tf_shape_norm, TF_OP_RMS_NORM, &eps, T("x", TF_BF16, 4, 8), T("gamma", TF_BF16, 8)), TF_BF16, 4, 8);
  EXPECT_ERROR(c, "gamma of length 7",
               RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, T("x", TF_F32, 4, 8), T("gamma", TF_F32, 7)), "'gamma' [7]",
               "[8]");
  EXPECT_ERROR(
      c, "beta of rank 2",
      RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, T("x", TF_F32, 4, 8), T("gamma", TF_F32, 8), T("beta", TF_F32, 1, 8)),
      "'beta' [1,8]", "'x' [4,8]");
  EXPECT_ERROR(c, "gamma f16 for x f32",
               RULE(tf_shape_norm, TF_OP_RMS_NORM, &eps, T("x", TF_F32, 4, 8), T("gamma", TF_F16, 8)),
               "'gamma' [8] is f16", NULL);
  EXPECT_ERROR(c, "layer_norm of a scalar",
               RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, SCALAR("s", TF_F32), T("gamma", TF_F32, 1)), "'s' []",
               "scalar");
  EXPECT_ERROR(c, "layer_norm of i32",
               RULE(tf_shape_norm, TF_OP_LAYER_NORM, &eps, T("x", TF_I32, 4, 8), T("gamma", TF_I32, 8)),
               "'x' [4,8] is i32", NULL);
  const float bad_epsilons[] = {0.0f, -1e-5f, NAN, INFINITY};
  const char *const bad_names[] = {"epsilon 0", "epsilon -1e-05", "epsilon nan", "epsilon inf"};
  for (int i = 0; i < 4; i++) {
    tf_attrs bad = norm_attrs(bad_epsilons[i]);
    EXPECT_ERROR(c, bad_names[i],
                 RULE(tf_shape_norm, TF_OP_RMS_NORM, &bad, T("x", TF_F32, 4, 8), T("gamma", TF_F32, 8)), bad_names[i],
                 "'x' [4,8]");
  }
}

static void test_cross_entropy(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs ce = attrs_of(TF_ATTR_CROSS_ENTROPY);
  ce.u.cross_entropy.ignore_index = -100;
  EXPECT_SCALAR(
      c, "cross_entropy logits [4,10] labels [4]",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F32, 4, 10), T("labels", TF_I64, 4)),
      TF_F32);
  EXPECT_SCALAR(
      c, "cross_entropy f16 [2,5,10] labels i32 [2,5] gives f32",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F16, 2, 5, 10), T("labels", TF_I32, 2, 5)),
      TF_F32);
  EXPECT_SCALAR(
      c, "cross_entropy logits [10] scalar label",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F32, 10), SCALAR("label", TF_I32)), TF_F32);
  EXPECT_ERROR(
      c, "float labels",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F32, 4, 10), T("labels", TF_F32, 4)),
      "'labels' [4] are f32", NULL);
  EXPECT_ERROR(
      c, "labels [5] for logits [4,10]",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F32, 4, 10), T("labels", TF_I64, 5)),
      "'labels' [5]", "'logits' [4,10]");
  EXPECT_ERROR(
      c, "labels of logits' rank",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_F32, 4, 10), T("labels", TF_I64, 4, 10)),
      "'labels' [4,10]", "'logits' [4,10]");
  EXPECT_ERROR(
      c, "integer logits",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, T("logits", TF_I32, 4, 10), T("labels", TF_I64, 4)),
      "'logits' [4,10] is i32", NULL);
  EXPECT_ERROR(
      c, "scalar logits",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &ce, SCALAR("logits", TF_F32), SCALAR("labels", TF_I64)),
      "'logits' []", "scalar");
  tf_attrs axis = axis_attrs(-1);
  EXPECT_ERROR(
      c, "cross_entropy with axis attributes",
      RULE(tf_shape_cross_entropy, TF_OP_CROSS_ENTROPY, &axis, T("logits", TF_F32, 4, 10), T("labels", TF_I64, 4)),
      "'cross_entropy'", "'axis'");
}

/* ---- layout: reshape, transpose, concat, slice, expand ---- */

static void test_reshape(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs to_6_4 = TARGET(FIX(6), FIX(4)), infer_first = TARGET(FIX(-1), FIX(4)), infer_last = TARGET(FIX(4), KEEP),
           to_1_1 = TARGET(FIX(1), FIX(1)), to_scalar = shape_attrs(NULL, 0);
  EXPECT_SHAPE(c, "reshape [2,3,4] to [6,4]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &to_6_4, T("x", TF_F32, 2, 3, 4)),
               TF_F32, 6, 4);
  EXPECT_SHAPE(c, "reshape [2,3,4] to [-1,4]",
               RULE(tf_shape_reshape, TF_OP_RESHAPE, &infer_first, T("x", TF_F32, 2, 3, 4)), TF_F32, 6, 4);
  EXPECT_SHAPE(c, "reshape [2,3,4] to [4,-1]",
               RULE(tf_shape_reshape, TF_OP_RESHAPE, &infer_last, T("x", TF_I32, 2, 3, 4)), TF_I32, 4, 6);
  EXPECT_SHAPE(c, "reshape scalar to [1,1]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &to_1_1, SCALAR("s", TF_F32)),
               TF_F32, 1, 1);
  EXPECT_SCALAR(c, "reshape [1] to scalar", RULE(tf_shape_reshape, TF_OP_RESHAPE, &to_scalar, T("one", TF_F32, 1)),
                TF_F32);
  tf_attrs zero_5 = TARGET(FIX(0), FIX(5));
  EXPECT_SHAPE(c, "reshape [0,3] to [0,5]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &zero_5, T("x", TF_F32, 0, 3)),
               TF_F32, 0, 5);

  tf_graph *g = NULL;
  tf_status status = tf_graph_create("symbols", &g);
  CHECK_OK(c, status);
  if (!g)
    return;
  int32_t n = tf_ir_add_symbol(g, "N", 8, &status);
  CHECK_OK(c, status);
  int32_t huge = tf_ir_add_symbol(g, "HUGE", INT64_MAX / 2, &status);
  CHECK_OK(c, status);
  tf_attrs by_symbol = TARGET(SYM(n, 1), KEEP), by_double = TARGET(SYM(n, 2), KEEP);
  EXPECT_SHAPE(c, "reshape [8,12] to [N,-1] with N=8",
               RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &by_symbol, T("x", TF_F32, 8, 12)), TF_F32, 8, 12);
  EXPECT_SHAPE(c, "reshape [4,12] to [2*N,-1] with N=8",
               RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &by_double, T("x", TF_F32, 4, 12)), TF_F32, 16, 3);
  g->symbols[n].value = 3; // as if bound with --set N=3
  EXPECT_SHAPE(c, "reshape [6,4] to [2*N,-1] with N bound to 3",
               RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &by_double, T("x", TF_F32, 6, 4)), TF_F32, 6, 4);
  tf_attrs overflowing_symbol = TARGET(SYM(huge, 4)), unknown_symbol = TARGET(SYM(7, 1)),
           zero_multiple = TARGET(SYM(n, 0));
  EXPECT_ERROR(c, "reshape to 4*HUGE overflows",
               RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &overflowing_symbol, T("x", TF_F32, 4)), "symbol 1",
               "overflow");
  EXPECT_ERROR(c, "reshape to unknown symbol 7",
               RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &unknown_symbol, T("x", TF_F32, 4)), "symbol 7", "unknown");
  EXPECT_ERROR(c, "reshape to 0*N", RULE_G(g, tf_shape_reshape, TF_OP_RESHAPE, &zero_multiple, T("x", TF_F32, 4)),
               "0 x symbol 0", NULL);
  EXPECT_ERROR(c, "reshape to a symbol without a graph",
               RULE(tf_shape_reshape, TF_OP_RESHAPE, &by_symbol, T("x", TF_F32, 8, 12)), "symbol 0", "no graph");
  tf_graph_destroy(g);

  tf_attrs two_infers = TARGET(KEEP, KEEP), to_4_2 = TARGET(FIX(4), FIX(2)), to_4_infer = TARGET(FIX(4), KEEP),
           zero_infer = TARGET(FIX(0), KEEP), negative = TARGET(FIX(-2), FIX(3)),
           huge_target = TARGET(FIX(INT64_C(1) << 62), FIX(4), FIX(1)),
           huge_infer = TARGET(FIX(INT64_C(1) << 62), FIX(4), KEEP);
  EXPECT_ERROR(c, "reshape with two -1", RULE(tf_shape_reshape, TF_OP_RESHAPE, &two_infers, T("x", TF_F32, 2, 3)),
               "[-1,-1]", "more than one -1");
  EXPECT_ERROR(c, "reshape [2,3] to [4,2]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &to_4_2, T("x", TF_F32, 2, 3)),
               "'x' [2,3] has 6", "[4,2] has 8");
  EXPECT_ERROR(c, "reshape [2,3] to [4,-1]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &to_4_infer, T("x", TF_F32, 2, 3)),
               "has 6 elements", "multiple of 4");
  EXPECT_ERROR(c, "reshape [0,3] to [0,-1]", RULE(tf_shape_reshape, TF_OP_RESHAPE, &zero_infer, T("x", TF_F32, 0, 3)),
               "[0,-1]", "multiply to 0");
  EXPECT_ERROR(c, "reshape to a dim of -2", RULE(tf_shape_reshape, TF_OP_RESHAPE, &negative, T("x", TF_F32, 2, 3)),
               "-2", ">= 0 or -1");
  EXPECT_ERROR(c, "reshape to [2^62,4,1] overflows",
               RULE(tf_shape_reshape, TF_OP_RESHAPE, &huge_target, T("x", TF_F32, 2, 3)), "[4611686018427387904,4,1]",
               "int64");
  EXPECT_ERROR(c, "reshape to [2^62,4,-1] overflows",
               RULE(tf_shape_reshape, TF_OP_RESHAPE, &huge_infer, T("x", TF_F32, 2, 3)), "[4611686018427387904,4,-1]",
               "int64");
  tf_attrs rank9 = to_6_4, rank_negative = to_6_4;
  rank9.u.shape.shape.rank = 9;
  rank_negative.u.shape.shape.rank = -3;
  EXPECT_ERROR(c, "reshape to rank 9", RULE(tf_shape_reshape, TF_OP_RESHAPE, &rank9, T("x", TF_F32, 2, 3)), "rank 9",
               "'x' [2,3]");
  EXPECT_ERROR(c, "reshape to rank -3", RULE(tf_shape_reshape, TF_OP_RESHAPE, &rank_negative, T("x", TF_F32, 2, 3)),
               "rank -3", "'x' [2,3]");
}

static void test_transpose(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs rotate = PERM(2, 0, 1), swap = PERM(1, 0), none = transpose_attrs(NULL, 0);
  EXPECT_SHAPE(c, "transpose [2,3,4] perm {2,0,1}",
               RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &rotate, T("x", TF_F32, 2, 3, 4)), TF_F32, 4, 2, 3);
  EXPECT_SHAPE(c, "transpose [5,7] i64 perm {1,0}",
               RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &swap, T("x", TF_I64, 5, 7)), TF_I64, 7, 5);
  EXPECT_SCALAR(c, "transpose of a scalar, empty perm",
                RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &none, SCALAR("s", TF_F32)), TF_F32);
  tf_attrs short_perm = PERM(1, 0), repeated = PERM(0, 0, 1), out_of_range = PERM(0, 1, 3), negative = PERM(-1, 0, 1),
           huge_rank = PERM(0, 1, 2);
  huge_rank.u.transpose.rank = 100;
  EXPECT_ERROR(c, "perm of 2 for rank 3",
               RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &short_perm, T("x", TF_F32, 2, 3, 4)), "2 entries",
               "'x' [2,3,4]");
  EXPECT_ERROR(c, "perm {0,0,1}", RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &repeated, T("x", TF_F32, 2, 3, 4)),
               "entry 1 is 0", "'x' [2,3,4]");
  EXPECT_ERROR(c, "perm {0,1,3}", RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &out_of_range, T("x", TF_F32, 2, 3, 4)),
               "entry 2 is 3", "0..2");
  EXPECT_ERROR(c, "perm {-1,0,1}", RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &negative, T("x", TF_F32, 2, 3, 4)),
               "entry 0 is -1", NULL);
  EXPECT_ERROR(c, "perm rank 100", RULE(tf_shape_transpose, TF_OP_TRANSPOSE, &huge_rank, T("x", TF_F32, 2, 3, 4)),
               "100 entries", NULL);
}

static void test_concat(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs axis1 = axis_attrs(1), last = axis_attrs(-1), first = axis_attrs(0), axis2 = axis_attrs(2);
  EXPECT_SHAPE(c, "concat [2,3] [2,5] axis 1",
               RULE(tf_shape_concat, TF_OP_CONCAT, &axis1, T("a", TF_F32, 2, 3), T("b", TF_F32, 2, 5)), TF_F32, 2, 8);
  EXPECT_SHAPE(c, "concat [2,3] [2,5] axis -1",
               RULE(tf_shape_concat, TF_OP_CONCAT, &last, T("a", TF_F32, 2, 3), T("b", TF_F32, 2, 5)), TF_F32, 2, 8);
  EXPECT_SHAPE(
      c, "concat three on axis 0",
      RULE(tf_shape_concat, TF_OP_CONCAT, &first, T("a", TF_I32, 1, 4), T("b", TF_I32, 2, 4), T("c", TF_I32, 3, 4)),
      TF_I32, 6, 4);
  EXPECT_SHAPE(c, "concat of one input", RULE(tf_shape_concat, TF_OP_CONCAT, &first, T("a", TF_F16, 3, 4)), TF_F16, 3,
               4);
  EXPECT_ERROR(c, "concat ranks differ",
               RULE(tf_shape_concat, TF_OP_CONCAT, &first, T("a", TF_F32, 2, 3), T("b", TF_F32, 2, 3, 1)), "'a' [2,3]",
               "'b' [2,3,1]");
  EXPECT_ERROR(c, "concat dtypes differ",
               RULE(tf_shape_concat, TF_OP_CONCAT, &first, T("a", TF_F32, 2, 3), T("b", TF_F16, 2, 3)),
               "'b' [2,3] is f16", NULL);
  EXPECT_ERROR(c, "concat other dims differ",
               RULE(tf_shape_concat, TF_OP_CONCAT, &axis1, T("a", TF_F32, 2, 3), T("b", TF_F32, 4, 3)),
               "'a' [2,3] and 'b' [4,3]", "axis 0");
  EXPECT_ERROR(c, "concat axis 2 of rank 2",
               RULE(tf_shape_concat, TF_OP_CONCAT, &axis2, T("a", TF_F32, 2, 3), T("b", TF_F32, 2, 3)), "axis 2",
               "'a' [2,3]");
  EXPECT_ERROR(c, "concat of scalars",
               RULE(tf_shape_concat, TF_OP_CONCAT, &first, SCALAR("a", TF_F32), SCALAR("b", TF_F32)), "axis 0",
               "'a' []");
  EXPECT_ERROR(c, "concat [BIG-1] and [5] overflows",
               RULE(tf_shape_concat, TF_OP_CONCAT, &first, T("a", TF_F32, BIG - 1), T("b", TF_F32, 5)), "'b' [5]",
               "overflows int64");
}

static void test_slice(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs every_other = slice_attrs(0, 2, 8, 2), last3 = slice_attrs(0, -3, BIG, 1),
           negative_axis = slice_attrs(-1, 1, 4, 2), clamped = slice_attrs(0, -100, 100, 3),
           huge_step = slice_attrs(0, 0, 10, BIG), extremes = slice_attrs(1, INT64_MIN, BIG, 1),
           negative_end = slice_attrs(0, 0, -1, 1);
  EXPECT_SHAPE(c, "slice [10,4] axis 0 [2:8:2]", RULE(tf_shape_slice, TF_OP_SLICE, &every_other, T("x", TF_F32, 10, 4)),
               TF_F32, 3, 4);
  EXPECT_SHAPE(c, "slice [10,4] axis 0 [-3:]", RULE(tf_shape_slice, TF_OP_SLICE, &last3, T("x", TF_F32, 10, 4)), TF_F32,
               3, 4);
  EXPECT_SHAPE(c, "slice [10,4] axis -1 [1:4:2]",
               RULE(tf_shape_slice, TF_OP_SLICE, &negative_axis, T("x", TF_F32, 10, 4)), TF_F32, 10, 2);
  EXPECT_SHAPE(c, "slice [10] [-100:100:3] clamps", RULE(tf_shape_slice, TF_OP_SLICE, &clamped, T("x", TF_F32, 10)),
               TF_F32, 4);
  EXPECT_SHAPE(c, "slice [10] [0:10:BIG]", RULE(tf_shape_slice, TF_OP_SLICE, &huge_step, T("x", TF_F32, 10)), TF_F32,
               1);
  EXPECT_SHAPE(c, "slice [1,BIG] axis 1 [MIN:BIG]", RULE(tf_shape_slice, TF_OP_SLICE, &extremes, T("x", TF_U8, 1, BIG)),
               TF_U8, 1, BIG);
  EXPECT_SHAPE(c, "slice [10] [0:-1]", RULE(tf_shape_slice, TF_OP_SLICE, &negative_end, T("x", TF_F32, 10)), TF_F32, 9);
  tf_attrs empty = slice_attrs(0, 5, 5, 1), backwards = slice_attrs(0, 8, 2, 1), past_end = slice_attrs(0, 12, 20, 1),
           step0 = slice_attrs(0, 0, 5, 0), step_negative = slice_attrs(0, 5, 0, -1), axis2 = slice_attrs(2, 0, 1, 1);
  EXPECT_ERROR(c, "slice [5:5]", RULE(tf_shape_slice, TF_OP_SLICE, &empty, T("x", TF_F32, 10, 4)), "empty slice",
               "'x' [10,4]");
  EXPECT_ERROR(c, "slice [8:2]", RULE(tf_shape_slice, TF_OP_SLICE, &backwards, T("x", TF_F32, 10, 4)), "empty slice",
               "[8:2:1]");
  EXPECT_ERROR(c, "slice [12:20] of 10", RULE(tf_shape_slice, TF_OP_SLICE, &past_end, T("x", TF_F32, 10)),
               "empty slice", "[12:20:1]");
  EXPECT_ERROR(c, "slice step 0", RULE(tf_shape_slice, TF_OP_SLICE, &step0, T("x", TF_F32, 10)), "step 0", "'x' [10]");
  EXPECT_ERROR(c, "slice step -1", RULE(tf_shape_slice, TF_OP_SLICE, &step_negative, T("x", TF_F32, 10)), "step -1",
               "'x' [10]");
  EXPECT_ERROR(c, "slice axis 2 of rank 2", RULE(tf_shape_slice, TF_OP_SLICE, &axis2, T("x", TF_F32, 10, 4)), "axis 2",
               "'x' [10,4]");
  EXPECT_ERROR(c, "slice of a scalar", RULE(tf_shape_slice, TF_OP_SLICE, &axis2, SCALAR("s", TF_F32)), "axis 2",
               "'s' []");
}

static void test_expand(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs to_2_3_4 = TARGET(FIX(2), FIX(3), FIX(4)), keep_middle = TARGET(FIX(2), KEEP, FIX(5)),
           to_2_3 = TARGET(FIX(2), FIX(3));
  EXPECT_SHAPE(c, "expand [3,1] to [2,3,4]", RULE(tf_shape_expand, TF_OP_EXPAND, &to_2_3_4, T("x", TF_F32, 3, 1)),
               TF_F32, 2, 3, 4);
  EXPECT_SHAPE(c, "expand [3,1] to [2,-1,5]", RULE(tf_shape_expand, TF_OP_EXPAND, &keep_middle, T("x", TF_I64, 3, 1)),
               TF_I64, 2, 3, 5);
  EXPECT_SHAPE(c, "expand scalar to [2,3]", RULE(tf_shape_expand, TF_OP_EXPAND, &to_2_3, SCALAR("s", TF_F32)), TF_F32,
               2, 3);
  tf_graph *g = NULL;
  tf_status status = tf_graph_create("symbols", &g);
  CHECK_OK(c, status);
  if (g) {
    int32_t n = tf_ir_add_symbol(g, "N", 8, &status);
    CHECK_OK(c, status);
    tf_attrs by_symbol = TARGET(SYM(n, 1), FIX(4));
    EXPECT_SHAPE(c, "expand [1,4] to [N,4] with N=8",
                 RULE_G(g, tf_shape_expand, TF_OP_EXPAND, &by_symbol, T("x", TF_F32, 1, 4)), TF_F32, 8, 4);
    tf_graph_destroy(g);
  }
  tf_attrs lower = TARGET(FIX(4)), mismatch = TARGET(FIX(3), FIX(4)), keep_new = TARGET(KEEP, FIX(3), FIX(1)),
           negative = TARGET(FIX(-5), FIX(3)), huge = TARGET(FIX(BIG), FIX(2)),
           rank9 = TARGET(FIX(1), FIX(1), FIX(1), FIX(1), FIX(1), FIX(1), FIX(1), FIX(1));
  rank9.u.shape.shape.rank = 9;
  EXPECT_ERROR(c, "expand [3,1] to [4]", RULE(tf_shape_expand, TF_OP_EXPAND, &lower, T("x", TF_F32, 3, 1)), "'x' [3,1]",
               "lower rank");
  EXPECT_ERROR(c, "expand [3,2] to [3,4]", RULE(tf_shape_expand, TF_OP_EXPAND, &mismatch, T("x", TF_F32, 3, 2)),
               "'x' [3,2] to [3,4]", "has 2, which is neither 1 nor 4");
  EXPECT_ERROR(c, "expand keeps a new leading axis",
               RULE(tf_shape_expand, TF_OP_EXPAND, &keep_new, T("x", TF_F32, 3, 1)), "[-1,3,1]", "axis 0");
  EXPECT_ERROR(c, "expand to a dim of -5", RULE(tf_shape_expand, TF_OP_EXPAND, &negative, T("x", TF_F32, 3)), "-5",
               ">= 0 or -1");
  EXPECT_ERROR(c, "expand [1,1] to [BIG,2] overflows", RULE(tf_shape_expand, TF_OP_EXPAND, &huge, T("x", TF_F32, 1, 1)),
               "[9223372036854775807,2]", "int64");
  EXPECT_ERROR(c, "expand to rank 9", RULE(tf_shape_expand, TF_OP_EXPAND, &rank9, T("x", TF_F32, 1)), "rank 9",
               "'x' [1]");
}

/* ---- sliding windows ---- */

static void test_conv(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs same = conv_attrs(1, 1, 1, 1), strided = conv_attrs(2, 1, 1, 1), dilated = conv_attrs(1, 0, 2, 1),
           grouped = conv_attrs(1, 0, 1, 2);
  EXPECT_SHAPE(c, "conv2d [8,3,32,32] w [16,3,3,3] pad 1",
               RULE(tf_shape_conv, TF_OP_CONV2D, &same, T("x", TF_F32, 8, 3, 32, 32), T("w", TF_F32, 16, 3, 3, 3),
                    T("b", TF_F32, 16)),
               TF_F32, 8, 16, 32, 32);
  EXPECT_SHAPE(c, "conv2d stride 2 pad 1 on 32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &strided, T("x", TF_F16, 1, 3, 32, 31), T("w", TF_F16, 4, 3, 3, 3)),
               TF_F16, 1, 4, 16, 16);
  EXPECT_SHAPE(c, "conv2d dilation 2 on 32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &dilated, T("x", TF_F32, 1, 3, 32, 32), T("w", TF_F32, 4, 3, 3, 3)),
               TF_F32, 1, 4, 28, 28);
  EXPECT_SHAPE(c, "conv2d groups 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 10, 10), T("w", TF_F32, 8, 2, 3, 3)),
               TF_F32, 1, 8, 8, 8);
  tf_attrs conv1 = conv_attrs(2, 2, 1, 1);
  conv1.u.conv.stride[1] = 0; // conv1d reads index 0 only
  conv1.u.conv.dilation[1] = -7;
  EXPECT_SHAPE(
      c, "conv1d [2,4,100] w [6,4,5] stride 2 pad 2",
      RULE(tf_shape_conv, TF_OP_CONV1D, &conv1, T("x", TF_F32, 2, 4, 100), T("w", TF_F32, 6, 4, 5), T("b", TF_F32, 6)),
      TF_F32, 2, 6, 50);
  tf_attrs stride0 = conv_attrs(0, 0, 1, 1), dilation0 = conv_attrs(1, 0, 0, 1), pad_negative = conv_attrs(1, -1, 1, 1),
           groups0 = conv_attrs(1, 0, 1, 0), plain = conv_attrs(1, 0, 1, 1), stride2 = conv_attrs(2, 0, 1, 1);
  EXPECT_ERROR(c, "conv2d stride 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &stride0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "conv2d dilation 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &dilation0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "dilation 0", NULL);
  EXPECT_ERROR(c, "conv2d padding -1",
               RULE(tf_shape_conv, TF_OP_CONV2D, &pad_negative, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "padding -1", NULL);
  EXPECT_ERROR(c, "conv2d groups 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &groups0, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "groups is 0", NULL);
  EXPECT_ERROR(c, "conv2d groups 2 with 3 channels",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 1, 3, 3)),
               "groups 2", "'x' [1,3,8,8]");
  EXPECT_ERROR(c, "conv2d groups 2 with 5 filters",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 8, 8), T("w", TF_F32, 5, 2, 3, 3)),
               "groups 2", "'w' [5,2,3,3]");
  EXPECT_ERROR(c, "conv2d w channels 3 for C/groups 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &grouped, T("x", TF_F32, 1, 4, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'w' [4,3,3,3] must have 2", "'x' [1,4,8,8]");
  EXPECT_ERROR(c, "conv2d bias [5] for 4 filters",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3),
                    T("bias", TF_F32, 5)),
               "'bias' [5]", "[4]");
  EXPECT_ERROR(c, "conv2d bias f16",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3),
                    T("bias", TF_F16, 4)),
               "'bias' [4] is f16", NULL);
  EXPECT_ERROR(c, "conv2d kernel 5 on height 2",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 2, 8), T("w", TF_F32, 4, 3, 5, 3)),
               "output height would be < 1", "'x' [1,3,2,8]");
  EXPECT_ERROR(c, "conv1d kernel 5 on 4 with stride 2 (no truncation to 1)",
               RULE(tf_shape_conv, TF_OP_CONV1D, &stride2, T("x", TF_F32, 1, 3, 4), T("w", TF_F32, 4, 3, 5)),
               "output length would be < 1", "window 5");
  EXPECT_ERROR(c, "conv2d kernel width 0",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 0)),
               "kernel width is 0", NULL);
  EXPECT_ERROR(c, "conv2d on rank 3 x",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 3, 8, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'x' [3,8,8]", "[N,C,H,W]");
  EXPECT_ERROR(c, "conv1d on rank 4 w",
               RULE(tf_shape_conv, TF_OP_CONV1D, &plain, T("x", TF_F32, 1, 3, 8), T("w", TF_F32, 4, 3, 3, 3)),
               "'w' [4,3,3,3]", "[O,C/groups,K]");
  EXPECT_ERROR(c, "conv2d of i32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_I32, 1, 3, 8, 8), T("w", TF_I32, 4, 3, 3, 3)),
               "'x' [1,3,8,8] is i32", NULL);
  EXPECT_ERROR(c, "conv2d w f16 for x f32",
               RULE(tf_shape_conv, TF_OP_CONV2D, &plain, T("x", TF_F32, 1, 3, 8, 8), T("w", TF_F16, 4, 3, 3, 3)), "'w'",
               "f16");
  tf_attrs pad1 = conv_attrs(1, 1, 1, 1), dilation4 = conv_attrs(1, 0, 4, 1);
  EXPECT_ERROR(c, "conv1d length BIG + padding overflows",
               RULE(tf_shape_conv, TF_OP_CONV1D, &pad1, T("x", TF_F32, 1, 1, BIG), T("w", TF_F32, 1, 1, 3)),
               "9223372036854775807", "overflows int64");
  EXPECT_ERROR(
      c, "conv1d dilation 4 x kernel 2^62 overflows",
      RULE(tf_shape_conv, TF_OP_CONV1D, &dilation4, T("x", TF_F32, 1, 1, 8), T("w", TF_F32, 1, 1, INT64_C(1) << 62)),
      "kernel 4611686018427387904", "overflows int64");
}

static void test_conv_transpose(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs up2 = conv_attrs(2, 1, 1, 1), grouped = conv_attrs(1, 0, 1, 2), up2_extra = conv_attrs(2, 1, 1, 1),
           dilated_extra = conv_attrs(1, 0, 2, 1);
  up2_extra.u.conv.output_padding[0] = up2_extra.u.conv.output_padding[1] = 1;
  dilated_extra.u.conv.output_padding[0] = dilated_extra.u.conv.output_padding[1] = 1;
  EXPECT_SHAPE(c, "conv_transpose2d [2,16,8,8] w [16,8,4,4] stride 2 pad 1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &up2, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               TF_F32, 2, 8, 16, 16);
  EXPECT_SHAPE(c, "conv_transpose2d groups 2 with bias [6]",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3, 3), T("b", TF_F32, 6)),
               TF_F32, 1, 6, 7, 7);
  EXPECT_SHAPE(c, "conv_transpose2d output_padding 1 with stride 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &up2_extra, T("x", TF_F16, 2, 16, 8, 8),
                    T("w", TF_F16, 16, 8, 4, 4)),
               TF_F16, 2, 8, 17, 17);
  EXPECT_SHAPE(c, "conv_transpose2d output_padding 1 with stride 1, dilation 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &dilated_extra, T("x", TF_F32, 1, 2, 4, 4),
                    T("w", TF_F32, 2, 3, 3, 3)),
               TF_F32, 1, 3, 9, 9);
  tf_attrs too_much = conv_attrs(2, 1, 1, 1), negative = conv_attrs(2, 1, 1, 1), plain = conv_attrs(1, 0, 1, 1),
           shrink = conv_attrs(1, 1, 1, 1), stride4 = conv_attrs(4, 0, 1, 1), groups4 = conv_attrs(1, 0, 1, 4),
           stride0 = conv_attrs(0, 0, 1, 1);
  too_much.u.conv.output_padding[1] = 2;
  negative.u.conv.output_padding[0] = -1;
  EXPECT_ERROR(c, "output_padding 2 with stride 2",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &too_much, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               "output_padding 2", "max(stride 2, dilation 1)");
  EXPECT_ERROR(c, "output_padding -1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &negative, T("x", TF_F32, 2, 16, 8, 8),
                    T("w", TF_F32, 16, 8, 4, 4)),
               "output_padding -1", NULL);
  EXPECT_ERROR(c, "stride 0",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &stride0, T("x", TF_F32, 1, 2, 4, 4),
                    T("w", TF_F32, 2, 3, 3, 3)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "w rows differ from C",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &plain, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 3, 3, 3, 3)),
               "'w' [3,3,3,3]", "'x' [1,4,5,5]");
  EXPECT_ERROR(c, "groups 2 with 3 channels",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 3, 5, 5),
                    T("w", TF_F32, 3, 3, 3, 3)),
               "groups 2", "'x' [1,3,5,5]");
  EXPECT_ERROR(c, "bias [3] for 6 output channels",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &grouped, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3, 3), T("bias", TF_F32, 3)),
               "'bias' [3]", "[6]");
  EXPECT_ERROR(c, "output height < 1",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &shrink, T("x", TF_F32, 1, 1, 1, 1),
                    T("w", TF_F32, 1, 1, 1, 1)),
               "would be -1", "'x' [1,1,1,1]");
  EXPECT_ERROR(c, "rank 3 w",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &plain, T("x", TF_F32, 1, 4, 5, 5),
                    T("w", TF_F32, 4, 3, 3)),
               "'w' [4,3,3]", "[C,O/groups,KH,KW]");
  EXPECT_ERROR(c, "height 2^62 x stride 4 overflows",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &stride4,
                    T("x", TF_F32, 1, 1, INT64_C(1) << 62, 1), T("w", TF_F32, 1, 1, 1, 1)),
               "stride 4", "overflows int64");
  // An empty kernel keeps w's element count in range while w[1] x groups overflows.
  EXPECT_ERROR(c, "w[1] 2^61 x groups 4 overflows",
               RULE(tf_shape_conv_transpose2d, TF_OP_CONV_TRANSPOSE2D, &groups4, T("x", TF_F32, 1, 4, 1, 1),
                    T("w", TF_F32, 4, INT64_C(1) << 61, 0, 1)),
               "'w' [4,2305843009213693952,0,1] x groups 4", "overflow");
}

static void test_pool(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs halve = pool_attrs(2, 2, 0), same = pool_attrs(3, 1, 1), k3s2p1 = pool_attrs(3, 2, 1);
  EXPECT_SHAPE(c, "max_pool2d k2 s2 on [8,16,32,32]",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_F32, 8, 16, 32, 32)), TF_F32, 8, 16, 16, 16);
  EXPECT_SHAPE(c, "avg_pool2d k3 s1 p1 keeps size",
               RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &same, T("x", TF_BF16, 1, 2, 9, 7)), TF_BF16, 1, 2, 9, 7);
  EXPECT_SHAPE(c, "max_pool2d k3 s2 p1 on 7",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &k3s2p1, T("x", TF_F32, 1, 1, 7, 7)), TF_F32, 1, 1, 4, 4);
  tf_attrs kernel0 = pool_attrs(0, 1, 0), stride0 = pool_attrs(2, 0, 0), wide_pad = pool_attrs(3, 1, 2),
           pad_negative = pool_attrs(3, 1, -1), big_kernel = pool_attrs(5, 1, 0), pad1 = pool_attrs(2, 1, 1);
  EXPECT_ERROR(c, "pool kernel 0", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &kernel0, T("x", TF_F32, 1, 1, 4, 4)),
               "kernel 0", NULL);
  EXPECT_ERROR(c, "pool stride 0", RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &stride0, T("x", TF_F32, 1, 1, 4, 4)),
               "stride 0", NULL);
  EXPECT_ERROR(c, "pool padding 2 > kernel 3 / 2",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &wide_pad, T("x", TF_F32, 1, 1, 4, 4)), "padding 2", "kernel/2");
  EXPECT_ERROR(c, "pool padding -1", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &pad_negative, T("x", TF_F32, 1, 1, 4, 4)),
               "padding -1", NULL);
  EXPECT_ERROR(c, "pool kernel 5 on height 2",
               RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &big_kernel, T("x", TF_F32, 1, 1, 2, 8)),
               "output height would be < 1", "'x' [1,1,2,8]");
  EXPECT_ERROR(c, "pool on rank 3", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_F32, 1, 4, 4)),
               "'x' [1,4,4]", "rank 4");
  EXPECT_ERROR(c, "pool of u8", RULE(tf_shape_pool2d, TF_OP_MAX_POOL2D, &halve, T("x", TF_U8, 1, 1, 4, 4)),
               "'x' [1,1,4,4] is u8", "max_pool2d");
  EXPECT_ERROR(c, "pool height BIG + padding overflows",
               RULE(tf_shape_pool2d, TF_OP_AVG_POOL2D, &pad1, T("x", TF_F32, 1, 1, BIG, 1)), "9223372036854775807",
               "overflows int64");
}

/* ---- robustness: mutated queries ---- */

enum { SEED_INPUTS = 3, SEED_DIMS = TF_MAX_RANK + 1 };

/* A valid query for one op, which the sweep then corrupts a little at a time. */
typedef struct seed_query {
  int32_t n_inputs;
  tf_shape_operand inputs[SEED_INPUTS];
  int64_t shapes[SEED_INPUTS][SEED_DIMS];
  tf_attrs attrs;
} seed_query;

static void seed_operand(seed_query *s, int32_t i, tf_dtype dtype, int32_t rank, const int64_t *dims) {
  for (int32_t d = 0; d < SEED_DIMS; d++)
    s->shapes[i][d] = d < rank ? dims[d] : 1;
  s->inputs[i] = (tf_shape_operand){"in", dtype, TF_ACTIVATION, rank, s->shapes[i]};
}
#define SEED(s, i, dtype, ...) seed_operand(s, i, dtype, N_DIMS(__VA_ARGS__), (const int64_t[]){__VA_ARGS__})

static seed_query make_seed(tf_op op) {
  seed_query s;
  memset(&s, 0, sizeof(s));
  const tf_op_info *info = tf_op_info_get(op);
  s.attrs = attrs_of(info->attrs);
  s.n_inputs = info->max_inputs < SEED_INPUTS ? info->max_inputs : SEED_INPUTS;
  for (int32_t i = 0; i < SEED_INPUTS; i++)
    SEED(&s, i, TF_F32, 2, 3);
  switch (op) {
  case TF_OP_MATMUL:
    SEED(&s, 0, TF_F32, 2, 3, 4);
    SEED(&s, 1, TF_F32, 4, 5);
    break;
  case TF_OP_SUM:
  case TF_OP_MEAN:
  case TF_OP_MAX:
    s.attrs = REDUCE(true, 1);
    SEED(&s, 0, TF_F32, 2, 3, 4);
    break;
  case TF_OP_SOFTMAX:
  case TF_OP_LOG_SOFTMAX: s.attrs = axis_attrs(-1); break;
  case TF_OP_LAYER_NORM:
  case TF_OP_RMS_NORM:
    s.attrs = norm_attrs(1e-5f);
    SEED(&s, 0, TF_F32, 2, 8);
    SEED(&s, 1, TF_F32, 8);
    SEED(&s, 2, TF_F32, 8);
    break;
  case TF_OP_EMBEDDING:
    SEED(&s, 0, TF_I64, 2, 3);
    SEED(&s, 1, TF_F32, 10, 4);
    break;
  case TF_OP_RESHAPE:
    s.attrs = TARGET(FIX(6), KEEP);
    SEED(&s, 0, TF_F32, 2, 3, 4);
    break;
  case TF_OP_TRANSPOSE:
    s.attrs = PERM(2, 0, 1);
    SEED(&s, 0, TF_F32, 2, 3, 4);
    break;
  case TF_OP_CONCAT: s.attrs = axis_attrs(1); break;
  case TF_OP_SLICE:
    s.attrs = slice_attrs(0, 1, 8, 2);
    SEED(&s, 0, TF_F32, 10, 4);
    break;
  case TF_OP_EXPAND:
    s.attrs = TARGET(FIX(2), KEEP, FIX(4));
    SEED(&s, 0, TF_F32, 3, 1);
    break;
  case TF_OP_CONV1D:
    s.attrs = conv_attrs(1, 1, 1, 2);
    SEED(&s, 0, TF_F32, 2, 4, 16);
    SEED(&s, 1, TF_F32, 6, 2, 3);
    SEED(&s, 2, TF_F32, 6);
    break;
  case TF_OP_CONV2D:
    s.attrs = conv_attrs(2, 1, 1, 1);
    SEED(&s, 0, TF_F32, 2, 4, 8, 8);
    SEED(&s, 1, TF_F32, 6, 4, 3, 3);
    SEED(&s, 2, TF_F32, 6);
    break;
  case TF_OP_CONV_TRANSPOSE2D:
    s.attrs = conv_attrs(2, 1, 1, 1);
    s.attrs.u.conv.output_padding[0] = 1;
    SEED(&s, 0, TF_F32, 2, 4, 8, 8);
    SEED(&s, 1, TF_F32, 4, 3, 3, 3);
    SEED(&s, 2, TF_F32, 3);
    break;
  case TF_OP_MAX_POOL2D:
  case TF_OP_AVG_POOL2D:
    s.attrs = pool_attrs(3, 2, 1);
    SEED(&s, 0, TF_F32, 2, 3, 8, 8);
    break;
  case TF_OP_DROPOUT: s.attrs = dropout_attrs(0.5f); break;
  case TF_OP_ATTENTION:
    s.attrs = attention_attrs(2, 0.0f);
    SEED(&s, 0, TF_F32, 2, 4, 8);
    SEED(&s, 1, TF_F32, 2, 5, 8);
    SEED(&s, 2, TF_F32, 2, 5, 8);
    break;
  case TF_OP_CAST: s.attrs = cast_attrs(TF_F16); break;
  case TF_OP_CROSS_ENTROPY:
    SEED(&s, 0, TF_F32, 4, 10);
    SEED(&s, 1, TF_I64, 4);
    break;
  default: break; // elementwise ops and losses: two [2,3] f32 operands
  }
  return s;
}

static uint64_t next_random(uint64_t *state) {
  // xorshift64*: deterministic, so a failure reproduces.
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * UINT64_C(2685821657736338717);
}

static int64_t random_dim(uint64_t *state) {
  static const int64_t dims[] = {0, 1, 2, 3, 4, 7, 8, 64, -1, BIG, BIG / 2, INT64_C(1) << 32, INT64_MIN};
  return dims[next_random(state) % (sizeof(dims) / sizeof(dims[0]))];
}

static int32_t random_word(uint64_t *state) {
  static const int32_t words[] = {0,
                                  1,
                                  2,
                                  3,
                                  -1,
                                  -2,
                                  4,
                                  7,
                                  8,
                                  9,
                                  INT32_MAX,
                                  INT32_MIN,
                                  0x7f800000 /* +inf */,
                                  0x7fc00000 /* nan */,
                                  0x3dcccccd /* 0.1f */,
                                  0x3f800000 /* 1.0f */};
  return words[next_random(state) % (sizeof(words) / sizeof(words[0]))];
}

/* Overwrites one 32-bit word of the attribute union, then rewrites every bool of the family: a bool
 * holding 7 would be undefined behaviour in the test, not a case for the rule. */
static void mutate_attrs(uint64_t *state, tf_attrs *attrs) {
  int32_t words[sizeof(attrs->u) / sizeof(int32_t)];
  memcpy(words, &attrs->u, sizeof(words));
  words[next_random(state) % (sizeof(words) / sizeof(words[0]))] = random_word(state);
  memcpy(&attrs->u, words, sizeof(words));
  bool flag = next_random(state) & 1;
  switch (attrs->kind) {
  case TF_ATTR_MATMUL:
    attrs->u.matmul.transpose_a = flag;
    attrs->u.matmul.transpose_b = !flag;
    break;
  case TF_ATTR_REDUCE: attrs->u.reduce.keepdims = flag; break;
  case TF_ATTR_ATTENTION: attrs->u.attention.causal = flag; break;
  case TF_ATTR_GELU: attrs->u.gelu.approximate = flag; break;
  default: break;
  }
}

/* Applies 1 to 4 random corruptions: a dim, a rank, a dtype, an attribute word, the attribute
 * family, or the input count. */
static void mutate(uint64_t *state, const tf_op_info *info, seed_query *s) {
  int mutations = 1 + (int)(next_random(state) % 4);
  for (int m = 0; m < mutations; m++) {
    int32_t i = (int32_t)(next_random(state) % SEED_INPUTS);
    uint64_t what = next_random(state) % 100;
    if (what < 40)
      s->shapes[i][next_random(state) % SEED_DIMS] =
          next_random(state) % 2 ? random_dim(state) : (int64_t)(next_random(state) % 6);
    else if (what < 55)
      s->inputs[i].rank = (int32_t)(next_random(state) % (SEED_DIMS + 1)) - 1;
    else if (what < 65)
      s->inputs[i].dtype = (tf_dtype)((int)(next_random(state) % (TF_DTYPE_COUNT + 2)) - 1);
    else if (what < 90)
      mutate_attrs(state, &s->attrs);
    else if (what < 95)
      s->attrs.kind = (tf_attr_kind)(next_random(state) % (TF_ATTR_COUNT + 1));
    else
      s->n_inputs = info->min_inputs + (int32_t)(next_random(state) % (uint64_t)(s->n_inputs - info->min_inputs + 1));
  }
}

/* A refused query must say TF_ERR_SHAPE; an accepted one must have a valid output. */
static bool output_valid(const tf_shape_result *out) {
  if (out->rank < 0 || out->rank > TF_MAX_RANK || (int)out->dtype < 0 || out->dtype >= TF_DTYPE_COUNT)
    return false;
  bool empty = false;
  for (int32_t d = 0; d < out->rank; d++) {
    if (out->shape[d] < 0)
      return false;
    empty = empty || out->shape[d] == 0;
  }
  int64_t count = 1;
  for (int32_t d = 0; !empty && d < out->rank; d++)
    if (__builtin_mul_overflow(count, out->shape[d], &count))
      return false;
  return true;
}

static void test_robustness(tf_test_counts *c) {
  enum { PER_OP = 20000 };
  tf_graph *g = NULL;
  tf_status status = tf_graph_create("fuzz", &g);
  CHECK_OK(c, status);
  if (!g)
    return;
  tf_ir_add_symbol(g, "N", 3, &status);
  CHECK_OK(c, status);
  uint64_t state = UINT64_C(0x9e3779b97f4a7c15);
  for (int op = 0; op < TF_OP_GRAPH_COUNT; op++) {
    const tf_op_info *info = tf_op_info_get((tf_op)op);
    seed_query seed = make_seed((tf_op)op);
    for (int32_t i = 0; i < SEED_INPUTS; i++)
      seed.inputs[i].shape = seed.shapes[i]; // returned by value: point into this copy
    tf_shape_result out;
    tf_shape_query q = {(tf_op)op, &seed.attrs, seed.n_inputs, seed.inputs, g};
    tf_status seed_status = info->shape_rule(&q, &out);
    CHECK(c, seed_status == NULL, "seed query for %s refused: %s", info->name, tf_status_message(seed_status));
    tf_status_free(seed_status);
    int accepted = 0, refused = 0, wrong_code = 0, bad_output = 0;
    for (int it = 0; it < PER_OP; it++) {
      seed_query s = seed;
      for (int32_t i = 0; i < SEED_INPUTS; i++)
        s.inputs[i].shape = s.shapes[i];
      mutate(&state, info, &s);
      q = (tf_shape_query){(tf_op)op, &s.attrs, s.n_inputs, s.inputs, next_random(&state) % 4 ? g : NULL};
      tf_status result = info->shape_rule(&q, &out);
      if (result) {
        refused++;
        wrong_code += tf_status_code(result) != TF_ERR_SHAPE;
        tf_status_free(result);
      } else {
        accepted++;
        bad_output += !output_valid(&out);
      }
    }
    printf("robustness: %-16s %d mutated queries, %d accepted, %d refused, %d refused without TF_ERR_SHAPE, "
           "%d invalid outputs\n",
           info->name, PER_OP, accepted, refused, wrong_code, bad_output);
    CHECK(c, wrong_code == 0 && bad_output == 0, "%s: %d wrong codes, %d invalid outputs", info->name, wrong_code,
          bad_output);
    // Both outcomes must occur, or the sweep never reached the rule's later checks.
    CHECK(c, accepted > 0 && refused > 0, "%s: %d accepted, %d refused", info->name, accepted, refused);
  }
  tf_graph_destroy(g);
}

int main(void) {
  tf_test_counts counts = {0, 0};
  test_common(&counts);
  test_matmul(&counts);
  test_attention(&counts);
  test_embedding(&counts);
  test_broadcast(&counts);
  test_unary(&counts);
  test_dropout(&counts);
  test_cast(&counts);
  test_pair_loss(&counts);
  test_reduce(&counts);
  test_softmax(&counts);
  test_norm(&counts);
  test_cross_entropy(&counts);
  test_reshape(&counts);
  test_transpose(&counts);
  test_concat(&counts);
  test_slice(&counts);
  test_expand(&counts);
  test_conv(&counts);
  test_conv_transpose(&counts);
  test_pool(&counts);
  test_robustness(&counts);
  return tf_test_finish("shape_rules", &counts);
}
