/* A sweep of random, mostly malformed shape queries (as a corrupt file could produce): starting from
 * a valid query per graph op, dims, ranks, dtypes, attribute words, attribute families and input
 * counts are corrupted; every rule must refuse with TF_ERR_SHAPE or return a valid shape, never
 * crash, and each op must both accept and refuse some queries. */
#include "shape_cases.h"

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
  case TF_OP_BATCH_NORM:
    s.attrs = norm_attrs(1e-5f);
    SEED(&s, 0, TF_F32, 2, 3, 4);
    SEED(&s, 1, TF_F32, 3);
    SEED(&s, 2, TF_F32, 3);
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
  case TF_OP_LINEAR_CROSS_ENTROPY:
    s.attrs.u.cross_entropy.transpose_weight = true;
    SEED(&s, 0, TF_F32, 4, 3);
    SEED(&s, 1, TF_F32, 5, 3);
    SEED(&s, 2, TF_I64, 4);
    break;
  case TF_OP_CTC_LOSS: /* logits [N, T, C], labels [N, S], input_lengths [N] */
    SEED(&s, 0, TF_F32, 2, 6, 5);
    SEED(&s, 1, TF_I64, 2, 3);
    SEED(&s, 2, TF_I32, 2);
    break;
  case TF_OP_CTC_LOSS_GRAD: /* logits, labels, dloss (a scalar) */
    SEED(&s, 0, TF_F32, 2, 6, 5);
    SEED(&s, 1, TF_I32, 2, 3);
    seed_operand(&s, 2, TF_F32, 0, NULL);
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
}

/* The bool fields of the family `attrs` ends up with, set to random valid values: a random word may
 * have landed on one, or the family changed after it did, and a bool holding 4 is undefined behaviour
 * in C (UBSan: "not a valid value for type '_Bool'"), which no file can give (FlatBuffers reads bools
 * as bools). */
static void valid_flags(uint64_t *state, tf_attrs *attrs) {
  bool flag = next_random(state) & 1;
  switch (attrs->kind) {
  case TF_ATTR_MATMUL:
    attrs->u.matmul.transpose_a = flag;
    attrs->u.matmul.transpose_b = !flag;
    break;
  case TF_ATTR_REDUCE: attrs->u.reduce.keepdims = flag; break;
  case TF_ATTR_ATTENTION: attrs->u.attention.causal = flag; break;
  case TF_ATTR_GELU: attrs->u.gelu.approximate = flag; break;
  case TF_ATTR_CROSS_ENTROPY: attrs->u.cross_entropy.transpose_weight = flag; break;
  case TF_ATTR_CTC: attrs->u.ctc.zero_infinity = flag; break;
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
  valid_flags(state, &s->attrs);
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
  for (int op = 0; op < TF_OP_COUNT; op++) {
    const tf_op_info *info = tf_op_info_get((tf_op)op);
    if (info->scope != TF_SCOPE_GRAPH)
      continue;
    seed_query seed = make_seed((tf_op)op);
    for (int32_t i = 0; i < SEED_INPUTS; i++)
      seed.inputs[i].shape = seed.shapes[i]; // returned by value: point into this copy
    tf_shape_result out;
    tf_shape_query q = {(tf_op)op, &seed.attrs, seed.n_inputs, seed.inputs, graph_dim_value, g};
    tf_status seed_status = info->shape_rule(&q, &out);
    CHECK(c, seed_status == NULL, "seed query for %s refused: %s", info->name, tf_status_message(seed_status));
    tf_status_free(seed_status);
    int accepted = 0, refused = 0, wrong_code = 0, bad_output = 0;
    for (int it = 0; it < PER_OP; it++) {
      seed_query s = seed;
      for (int32_t i = 0; i < SEED_INPUTS; i++)
        s.inputs[i].shape = s.shapes[i];
      mutate(&state, info, &s);
      q = next_random(&state) % 4 ? (tf_shape_query){(tf_op)op, &s.attrs, s.n_inputs, s.inputs, graph_dim_value, g}
                                  : (tf_shape_query){(tf_op)op, &s.attrs, s.n_inputs, s.inputs, NULL, NULL};
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
  test_robustness(&counts);
  return tf_test_finish("shape_rules_robustness", &counts);
}
