/* What the conformance table (cases.c) and its builders share: a row (conf_case), its shapes, the
 * helpers that add a row's operands and finish its graph, and the cast builders (cast_builders.c). */
#ifndef TIGHTFIT_TESTS_CONFORMANCE_CASE_BUILDERS_H
#define TIGHTFIT_TESTS_CONFORMANCE_CASE_BUILDERS_H

#include <string.h>

#include "conformance.h"
#include "op_graphs.h"

/* A shape of fixed sizes, usable in a static table. */
typedef struct dims {
  int32_t rank;
  int64_t size[6];
} dims;
#define DIMS(...)                                                                                                      \
  {                                                                                                                    \
    (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), { __VA_ARGS__ }                                     \
  }

typedef struct conf_case conf_case;

struct conf_case {
  const char *label;
  void (*build)(tf_graph *g, const conf_case *c); /* adds the op and finishes the graph (op_graphs.h) */
  tf_op op;                                       /* for builders of a family: which op */
  dims shapes[3];                                 /* the operands' shapes, in the builder's order */
  int32_t axes[4], n_axes;                        /* reduce axes; softmax, concat, slice axis; permutation */
  int64_t slice[3];                               /* start, end, step */
  bool keepdims, transpose_a, transpose_b, approximate, beta, bias, causal;
  int32_t heads;
  float slope;    /* leaky_relu's alpha */
  float lo, hi;   /* clip's bounds */
  tf_dtype dtype; /* cast's round trip; ids and labels */
  int64_t ignore_index;
  int64_t chunk_rows; /* linear_cross_entropy */
  int64_t blank;      /* ctc_loss */
  bool zero_infinity; /* ctc_loss */
  tf_conv_attrs conv; /* conv1d: stride, padding, dilation [0] */
  tf_pool_attrs pool;
  conf_settings settings; /* settings.storage f16/bf16: every float operand and result of the op in that type */
};

static inline tf_shape shape_of(const dims *s) {
  tf_shape shape;
  memset(&shape, 0, sizeof(shape));
  shape.rank = s->rank;
  for (int32_t i = 0; i < s->rank; i++)
    shape.dims[i] = d(s->size[i]);
  return shape;
}

/* x as the row's operands are stored: itself, or cast to the half type of a half run. */
static inline tf_tensor_id stored(tf_graph *g, const conf_case *c, tf_tensor_id x) {
  return c->settings.storage == TF_F32 ? x : tf_cast(g, x, c->settings.storage);
}

static inline tf_tensor_id param(tf_graph *g, const conf_case *c, const char *name, const dims *s) {
  return stored(g, c, tf_test_param(g, name, shape_of(s)));
}

static inline tf_tensor_id positive(tf_graph *g, const conf_case *c, const char *name, const dims *s) {
  return stored(g, c, tf_test_positive(g, name, shape_of(s)));
}

/* loss = sum(y x probe), y widened to f32 first in a half run. */
static inline void finish_probe(tf_graph *g, const conf_case *c, tf_tensor_id y) {
  tf_test_finish_probe(g, c->settings.storage == TF_F32 ? y : tf_cast(g, y, TF_F32));
}

/* ---- the cast builders (cast_builders.c) ---- */

void build_cast(tf_graph *g, const conf_case *c);
void build_cast_f32_patterns(tf_graph *g, const conf_case *c);
void build_cast_half_patterns(tf_graph *g, const conf_case *c);
void build_cast_saturating(tf_graph *g, const conf_case *c);
void build_cast_u8(tf_graph *g, const conf_case *c);
void build_cast_i64(tf_graph *g, const conf_case *c);
void build_cast_i32_i64(tf_graph *g, const conf_case *c);
void build_cast_bytes(tf_graph *g, const conf_case *c);
void build_layout_bytes(tf_graph *g, const conf_case *c);

#endif
