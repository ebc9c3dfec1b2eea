/* Tests of the shape and dtype rules (core/shape_rules*.c), called directly with hand-built
 * queries. For every op family: a correct case with its exact output shape and dtype, broadcasting
 * and negative axes where they apply, every error path with the operand names or numbers that its
 * message must mention, and int64 overflow. Convolutions and pools are in test_shape_rules_conv.c, the random sweep in
 * test_shape_rules_robustness.c. */
#include "shape_cases.h"

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
  tf_shape_query no_inputs = {TF_OP_EXP, NULL, 1, NULL, NULL, NULL};
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
  EXPECT_SHAPE(c, "keep [3,1] where [4]",
               RULE(tf_shape_broadcast, TF_OP_KEEP, NULL, T("x", TF_BF16, 3, 1), T("m", TF_BF16, 4)), TF_BF16, 3, 4);
  EXPECT_ERROR(c, "keep f32 where u8", RULE(tf_shape_broadcast, TF_OP_KEEP, NULL, T("x", TF_F32, 3), T("m", TF_U8, 3)),
               "input 1 'm' [3] is u8", "keep computes on f32");
  EXPECT_SHAPE(c, "div [2,0] / [1] keeps the empty dim",
               RULE(tf_shape_broadcast, TF_OP_DIV, NULL, T("a", TF_F32, 2, 0), T("b", TF_F32, 1)), TF_F32, 2, 0);
  /* The op table's dtypes column (core/op_dtypes.c): no kernel computes on integers, so integer
   * arithmetic is refused wherever shapes are inferred (a u8 add wrote past its buffer before). */
  EXPECT_ERROR(c, "add i32 + i32", RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_I32, 3), T("b", TF_I32, 2, 1)),
               "'a' [3] is i32", "integer arithmetic is not supported");
  EXPECT_ERROR(c, "add u8 + u8", RULE(tf_shape_broadcast, TF_OP_ADD, NULL, T("a", TF_U8, 64), T("b", TF_U8, 64)),
               "input 0 'a' [64] is u8", "add computes on f32, f16 or bf16 data");
  EXPECT_ERROR(c, "div f32 / i64", RULE(tf_shape_broadcast, TF_OP_DIV, NULL, T("a", TF_F32, 2), T("b", TF_I64, 2)),
               "input 1 'b' [2] is i64", "div computes on f32");
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
  const tf_op ops[] = {TF_OP_NEG,           TF_OP_EXP,     TF_OP_LOG,   TF_OP_SQRT,     TF_OP_RSQRT, TF_OP_RELU,
                       TF_OP_SILU,          TF_OP_SIGMOID, TF_OP_TANH,  TF_OP_SOFTPLUS, TF_OP_ABS,   TF_OP_ERF,
                       TF_OP_STOP_GRADIENT, TF_OP_SIN,     TF_OP_COS,   TF_OP_FLOOR,    TF_OP_CEIL,  TF_OP_ROUND,
                       TF_OP_SIGN,          TF_OP_ASIN,    TF_OP_ACOS,  TF_OP_ATAN,     TF_OP_TAN,   TF_OP_SINH,
                       TF_OP_COSH,          TF_OP_ASINH,   TF_OP_ACOSH, TF_OP_ATANH};
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
  tf_attrs leaky = attrs_of(TF_ATTR_LEAKY_RELU);
  leaky.u.leaky_relu.alpha = 0.2f;
  EXPECT_SHAPE(c, "leaky_relu bf16", RULE(tf_shape_unary_float, TF_OP_LEAKY_RELU, &leaky, T("x", TF_BF16, 2, 5)),
               TF_BF16, 2, 5);
  EXPECT_SHAPE(c, "leaky_relu_grad",
               RULE(tf_shape_elementwise_grad, TF_OP_LEAKY_RELU_GRAD, &leaky, T("x", TF_F32, 4), T("dy", TF_F32, 4)),
               TF_F32, 4);
  leaky.u.leaky_relu.alpha = NAN;
  EXPECT_ERROR(c, "leaky_relu slope NaN", RULE(tf_shape_unary_float, TF_OP_LEAKY_RELU, &leaky, T("x", TF_F32, 5)),
               "leaky_relu's slope alpha nan", "'x' [5] must be finite");
  leaky.u.leaky_relu.alpha = INFINITY;
  EXPECT_ERROR(c, "leaky_relu_grad slope inf",
               RULE(tf_shape_elementwise_grad, TF_OP_LEAKY_RELU_GRAD, &leaky, T("x", TF_F32, 4), T("dy", TF_F32, 4)),
               "slope alpha inf", "finite");
  EXPECT_ERROR(c, "leaky_relu without attributes",
               RULE(tf_shape_unary_float, TF_OP_LEAKY_RELU, NULL, T("x", TF_F32, 5)), "leaky_relu", "none");
  tf_attrs clip = attrs_of(TF_ATTR_CLIP);
  clip.u.clip.lo = 0.0f, clip.u.clip.hi = INFINITY; /* an absent bound is infinite */
  EXPECT_SHAPE(c, "clip f16", RULE(tf_shape_unary_float, TF_OP_CLIP, &clip, T("x", TF_F16, 3, 2)), TF_F16, 3, 2);
  EXPECT_SHAPE(c, "clip_grad",
               RULE(tf_shape_elementwise_grad, TF_OP_CLIP_GRAD, &clip, T("x", TF_F32, 4), T("dy", TF_F32, 4)), TF_F32,
               4);
  EXPECT_ERROR(c, "clip of integers", RULE(tf_shape_unary_float, TF_OP_CLIP, &clip, T("x", TF_I32, 5)), "clip", "i32");
  clip.u.clip.hi = NAN;
  EXPECT_ERROR(c, "clip bound NaN", RULE(tf_shape_unary_float, TF_OP_CLIP, &clip, T("x", TF_F32, 5)),
               "clip's bounds [0, nan] on 'x' [5]", "must be finite");
  clip.u.clip.lo = NAN, clip.u.clip.hi = 6.0f;
  EXPECT_ERROR(c, "clip_grad bound NaN",
               RULE(tf_shape_elementwise_grad, TF_OP_CLIP_GRAD, &clip, T("x", TF_F32, 4), T("dy", TF_F32, 4)),
               "clip_grad's bounds [nan, 6]", "finite");
  clip.u.clip.lo = INFINITY; /* +inf is no lower bound */
  EXPECT_ERROR(c, "clip lower bound inf", RULE(tf_shape_unary_float, TF_OP_CLIP, &clip, T("x", TF_F32, 5)),
               "clip's bounds [inf, 6]", "-inf and inf: no bound");
  EXPECT_ERROR(c, "clip without attributes", RULE(tf_shape_unary_float, TF_OP_CLIP, NULL, T("x", TF_F32, 5)), "clip",
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
  EXPECT_ERROR(c, "max of i32 [5,6] axis 1", RULE(tf_shape_reduce, TF_OP_MAX, &axis1, T("ids", TF_I32, 5, 6)),
               "'ids' [5,6] is i32", "max computes on f32, f16 or bf16 data");
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

static void test_batch_norm(tf_test_counts *c) {
  tf_shape_result out;
  tf_attrs eps = norm_attrs(1e-5f);
  EXPECT_SHAPE(c, "batch_norm [8,3,5,5]",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &eps, T("x", TF_F32, 8, 3, 5, 5), T("gamma", TF_F32, 3),
                    T("beta", TF_F32, 3)),
               TF_F32, 8, 3, 5, 5);
  EXPECT_ERROR(
      c, "batch_norm of a vector",
      RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &eps, T("x", TF_F32, 8), T("gamma", TF_F32, 8), T("beta", TF_F32, 8)),
      "'x' [8] has rank 1", "[N, C, ...]");
  EXPECT_ERROR(c, "batch_norm gamma of the last axis",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &eps, T("x", TF_F32, 8, 3, 5), T("gamma", TF_F32, 5),
                    T("beta", TF_F32, 3)),
               "'gamma' [5] must have shape [3]", "axis 1");
  eps.u.norm.epsilon = 0.0f;
  EXPECT_ERROR(c, "batch_norm epsilon 0",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &eps, T("x", TF_F32, 2, 3), T("gamma", TF_F32, 3),
                    T("beta", TF_F32, 3)),
               "epsilon 0", "> 0");
  tf_attrs tracked = norm_attrs(1e-5f);
  tracked.u.norm.momentum = 0.1f;
  EXPECT_SHAPE(c, "batch_norm with running statistics, bf16 x",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &tracked, T("x", TF_BF16, 8, 3, 5), T("gamma", TF_BF16, 3),
                    T("beta", TF_BF16, 3), T("mean", TF_F32, 3), T("var", TF_F32, 3)),
               TF_BF16, 8, 3, 5);
  EXPECT_ERROR(c, "batch_norm running statistics in bf16",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &tracked, T("x", TF_BF16, 8, 3), T("gamma", TF_BF16, 3),
                    T("beta", TF_BF16, 3), T("mean", TF_BF16, 3), T("var", TF_F32, 3)),
               "running mean 'mean' [3] is bf16", "must be f32 [3]");
  EXPECT_ERROR(c, "batch_norm running mean alone",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &tracked, T("x", TF_F32, 8, 3), T("gamma", TF_F32, 3),
                    T("beta", TF_F32, 3), T("mean", TF_F32, 3)),
               "running mean with the running variance", "not alone");
  EXPECT_ERROR(c, "batch_norm_running with one value per channel",
               RULE(tf_shape_batch_norm_running, TF_OP_BATCH_NORM_RUNNING, &tracked, T("x", TF_F32, 1, 3, 1),
                    T("mean", TF_F32, 3), T("var", TF_F32, 3)),
               "one value per channel", "2 or more");
  tracked.u.norm.momentum = 1.5f;
  EXPECT_ERROR(c, "batch_norm_running momentum 1.5",
               RULE(tf_shape_batch_norm_running, TF_OP_BATCH_NORM_RUNNING, &tracked, T("x", TF_F32, 4, 3),
                    T("mean", TF_F32, 3), T("var", TF_F32, 3)),
               "momentum 1.5", "[0, 1]");
  tracked.u.norm.momentum = NAN;
  EXPECT_ERROR(c, "batch_norm momentum NaN",
               RULE(tf_shape_batch_norm, TF_OP_BATCH_NORM, &tracked, T("x", TF_F32, 8, 3), T("gamma", TF_F32, 3),
                    T("beta", TF_F32, 3), T("mean", TF_F32, 3), T("var", TF_F32, 3)),
               "momentum nan", "[0, 1]");
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
      "'labels' [4] is f32", "cross_entropy takes integer labels");
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
  test_batch_norm(&counts);
  test_cross_entropy(&counts);
  test_reshape(&counts);
  test_transpose(&counts);
  test_concat(&counts);
  test_slice(&counts);
  test_expand(&counts);
  return tf_test_finish("shape_rules", &counts);
}
