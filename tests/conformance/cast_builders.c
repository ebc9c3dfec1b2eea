/* The conformance table's cast rows (cases.c): f32 <-> the half types bit for bit, the integer and
 * byte casts' saturation, truncation and wrapping, and a bool mask's moves. */
#include "case_builders.h"

/* The row's f32 parameter x [shapes[0]], uniform in [lo, hi). */
static tf_tensor_id uniform_x(tf_graph *g, const conf_case *c, double lo, double hi) {
  return tf_graph_parameter(g, "x", TF_F32, shape_of(&c->shapes[0]), tf_init_make(TF_INIT_UNIFORM, lo, hi));
}

/* f32 -> dtype -> f32 (a single f32 -> f32 cast when dtype is f32). */
void build_cast(tf_graph *g, const conf_case *c) {
  tf_tensor_id y = tf_cast(g, param(g, c, "x", &c->shapes[0]), c->dtype);
  finish_probe(g, c, c->dtype == TF_F32 ? y : tf_cast(g, y, TF_F32));
}

/* Bit-exactness of the half casts (conf_data.patterns): `from` -> `to` -> `from`, each result a
 * graph output: f16/bf16 ones compared bit for bit, and f32 ones step by step bit for bit with the
 * CPU kernel. Nothing to train: the inference plan only. */
static void cast_there_and_back(tf_graph *g, const conf_case *c, tf_dtype from, tf_dtype to) {
  tf_tensor_id there = tf_cast(g, tf_graph_input(g, "x", from, shape_of(&c->shapes[0])), to);
  tf_graph_add_output(g, there);
  tf_graph_add_output(g, tf_cast(g, there, from));
}

/* f32 special values and random bits -> dtype -> f32. */
void build_cast_f32_patterns(tf_graph *g, const conf_case *c) { cast_there_and_back(g, c, TF_F32, c->dtype); }

/* Every 16-bit value of dtype -> f32 -> dtype. */
void build_cast_half_patterns(tf_graph *g, const conf_case *c) { cast_there_and_back(g, c, c->dtype, TF_F32); }

/* Values up to 3e9 through i32, which saturates: nothing to train (the integers cut the gradient). */
void build_cast_saturating(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, -3e9, 3e9);
  finish_probe(g, c, tf_cast(g, tf_cast(g, x, TF_I32), TF_F32));
}

/* Values from -100 to 400 through u8, which truncates and saturates to [0, 255] (a mask's type;
 * the Vulkan shader packs four to a word: 335 elements leave a word of three). */
void build_cast_u8(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, -100.0, 400.0);
  finish_probe(g, c, tf_cast(g, tf_cast(g, x, TF_U8), TF_F32));
}

/* Values through i64 (truncation toward zero; past +-2^63 saturated): from -range to range, range the
 * row's slope (the Vulkan shader splits each value at 2^32 into two words). */
void build_cast_i64(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, -(double)c->slope, (double)c->slope);
  finish_probe(g, c, tf_cast(g, tf_cast(g, x, TF_I64), TF_F32));
}

/* f32 -> i64 -> i32 -> i64 -> f32 over +-6e9: the narrowing wraps (two's complement), the widening
 * sign-extends (RoBERTa's position ids move between the two). */
void build_cast_i32_i64(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, -6e9, 6e9);
  tf_tensor_id narrow = tf_cast(g, tf_cast(g, x, TF_I64), TF_I32);
  finish_probe(g, c, tf_cast(g, tf_cast(g, narrow, TF_I64), TF_F32));
}

/* f32 -> i32 -> u8 -> i64 -> u8 -> i32 -> f32 over -600..600: an integer cast to u8 keeps its low
 * byte (-5 -> 251), a byte widens (a bool mask's .long(): BioGPT's positions); 335 elements leave
 * the Vulkan shader's last word three bytes. */
void build_cast_bytes(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, -600.0, 600.0);
  tf_tensor_id bytes = tf_cast(g, tf_cast(g, x, TF_I32), TF_U8);
  tf_tensor_id again = tf_cast(g, tf_cast(g, bytes, TF_I64), TF_U8);
  finish_probe(g, c, tf_cast(g, tf_cast(g, again, TF_I32), TF_F32));
}

/* A bool mask's moves (BioGPT's default attention mask, expanded to [N, 1, T, T]): u8 through
 * transpose, expand, slice and concat, the odd sizes leaving partial words (the Vulkan layout8 module
 * moves bytes one per index). x is [5, 13]. */
void build_layout_bytes(tf_graph *g, const conf_case *c) {
  tf_tensor_id x = uniform_x(g, c, 0.0, 16.0);
  const int32_t flip[2] = {1, 0};
  tf_tensor_id t = tf_transpose(g, tf_cast(g, x, TF_U8), flip, 2); /* [13, 5] */
  tf_tensor_id wide = tf_expand(g, tf_slice(g, t, 0, 1, 12, 2), TF_SHAPE(tf_fixed(3), tf_fixed(6), tf_fixed(5)));
  tf_tensor_id parts[2] = {tf_slice(g, wide, 2, 1, 4, 1), wide};
  tf_tensor_id joined = tf_concat(g, parts, 2, 2); /* [3, 6, 8] */
  finish_probe(g, c, tf_cast(g, joined, TF_F32));
}
