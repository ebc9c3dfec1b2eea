/* Random draws: RandomUniform, RandomUniformLike, RandomNormal, RandomNormalLike and Bernoulli (what
 * torch.rand_like, torch.randn_like, torch.randn(shape) and torch.bernoulli(p) export: a VAE's
 * reparameterisation eps, a diffusion model's noise, gumbel_softmax's noise through from_torch).
 * tightfit's own numbers, not numpy's or PyTorch's (a `seed` attribute is not read): each draw is new
 * at every micro-step and the same under recompute, on every backend, from the counter-based RNG that
 * dropout keys by (session seed, micro-step, node, element).
 *
 * A uniform number is 23 fair bits, each Sign(Dropout(ones, 0.5)) of its own dropout node, weighted
 * 2^-k, plus 2^-24: the values (2j + 1) 2^-24 for j in [0, 2^23), every one exact in f32, never 0 or 1.
 * Dropout of a constant fill keeps drawing in an inference plan (compile.c), as PyTorch's eval mode
 * does. Normal numbers by Box-Muller, sqrt(-2 ln u1) cos(2 pi u2); Bernoulli(p) is u < p as relu(sign(p -
 * u)). Nothing is differentiated through a draw (PyTorch gives p no gradient either). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "import/onnx_converters.h"

enum { UNIFORM_BITS = 23 };

/* The output's type: the `dtype` attribute (ONNX's number), else `fallback`; f32, f16 and bf16 only
 * (DOUBLE computed in f32 under --narrow-float64). */
static tf_status output_type(ox_import *im, const ox_node *node, tf_dtype fallback, tf_dtype *out) {
  const Onnx__AttributeProto *a = ox_attr(node, "dtype");
  if (!a) {
    *out = fallback;
    return NULL;
  }
  const bool narrowed = a->i == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && im->options->narrow_float64;
  if (narrowed) {
    *out = TF_F32;
    return NULL;
  }
  if (!ox_dtype((int32_t)a->i, out) || (*out != TF_F32 && *out != TF_F16 && *out != TF_BF16))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a draw of %s (f32, f16 or bf16 only%s)", ox_dtype_name((int32_t)a->i),
                   a->i == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? "; --narrow-float64 draws DOUBLE in f32" : "");
  return NULL;
}

/* A constant f32 of ones of `dims`, named after the node's output. */
static tf_tensor_id ones_of(ox_import *im, const ox_node *node, const tf_dim *dims, int32_t rank) {
  char name[256];
  snprintf(name, sizeof(name), "%s/ones", node->proto->output[0]);
  return tf_graph_constant(im->graph, name, TF_F32, tf_shape_from(dims, rank), tf_init_make(TF_INIT_FILL, 1.0, 0.0));
}

/* Uniform numbers in (0, 1) of the shape of `ones` (the top comment). */
static tf_tensor_id uniform(ox_import *im, const ox_node *node, tf_tensor_id ones) {
  tf_graph *g = im->graph;
  tf_tensor_id sum = ox_scalar(im, node, TF_F32, ldexp(1.0, -24));
  for (int k = 1; k <= UNIFORM_BITS; k++) {
    tf_tensor_id bit = tf_unary(g, TF_OP_SIGN, tf_dropout(g, ones, 0.5f));
    sum = tf_add(g, sum, tf_mul(g, bit, ox_scalar(im, node, TF_F32, ldexp(1.0, -k))));
  }
  return sum;
}

/* Standard normal numbers of the shape of `ones`: Box-Muller of two uniform draws. */
static tf_tensor_id normal(ox_import *im, const ox_node *node, tf_tensor_id ones) {
  tf_graph *g = im->graph;
  tf_tensor_id radius = tf_unary(
      g, TF_OP_SQRT, tf_mul(g, tf_unary(g, TF_OP_LOG, uniform(im, node, ones)), ox_scalar(im, node, TF_F32, -2.0)));
  tf_tensor_id angle = tf_mul(g, uniform(im, node, ones), ox_scalar(im, node, TF_F32, 6.283185307179586));
  return tf_mul(g, radius, tf_unary(g, TF_OP_COS, angle));
}

/* The shape a draw takes: input 0's (the *Like forms), or the `shape` attribute. */
static tf_status draw_shape(ox_import *im, const ox_node *node, bool like, int32_t *rank, tf_dim *dims,
                            tf_dtype *input_type) {
  *input_type = TF_F32;
  if (like) {
    tf_tensor_id x;
    TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &x));
    ox_tensor_dims(im, x, rank, dims);
    *input_type = ox_dtype_of(im, x);
    return NULL;
  }
  int64_t shape[TF_MAX_RANK + 1];
  const int32_t n = ox_attr_ints(node, "shape", shape, TF_MAX_RANK + 1);
  if (n < 0 || n > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "a shape attribute of 0 to %d sizes is required", TF_MAX_RANK);
  for (int32_t d = 0; d < n; d++) {
    if (shape[d] < 1 || shape[d] > ((int64_t)1 << 40))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "shape size %" PRId64 " on axis %" PRId32, shape[d], d);
    dims[d] = tf_fixed(shape[d]);
  }
  *rank = n;
  return NULL;
}

static tf_status draw(ox_import *im, const ox_node *node, bool like, bool gaussian) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  tf_dtype input_type, dtype;
  TF_RETURN_IF_ERROR(draw_shape(im, node, like, &rank, dims, &input_type));
  const bool float_input = input_type == TF_F32 || input_type == TF_F16 || input_type == TF_BF16;
  TF_RETURN_IF_ERROR(output_type(im, node, like && float_input ? input_type : TF_F32, &dtype));
  const double a = ox_attr_float(node, gaussian ? "mean" : "low", 0.0);
  const double b = ox_attr_float(node, gaussian ? "scale" : "high", 1.0);
  if (!isfinite(a) || !isfinite(b))
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "%s %g, %s %g (finite numbers)", gaussian ? "mean" : "low", a,
                   gaussian ? "scale" : "high", b);
  tf_graph *g = im->graph;
  tf_tensor_id ones = ones_of(im, node, dims, rank);
  tf_tensor_id unit = gaussian ? normal(im, node, ones) : uniform(im, node, ones);
  const double spread = gaussian ? b : b - a;
  tf_tensor_id y = tf_add(g, tf_mul(g, unit, ox_scalar(im, node, TF_F32, spread)), ox_scalar(im, node, TF_F32, a));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, dtype == TF_F32 ? y : tf_cast(g, y, dtype));
}

tf_status ox_convert_random_uniform(ox_import *im, const ox_node *node) { return draw(im, node, false, false); }
tf_status ox_convert_random_uniform_like(ox_import *im, const ox_node *node) { return draw(im, node, true, false); }
tf_status ox_convert_random_normal(ox_import *im, const ox_node *node) { return draw(im, node, false, true); }
tf_status ox_convert_random_normal_like(ox_import *im, const ox_node *node) { return draw(im, node, true, true); }

tf_status ox_convert_bernoulli(ox_import *im, const ox_node *node) {
  tf_tensor_id p;
  TF_RETURN_IF_ERROR(ox_tensor_of(im, node, 0, &p));
  const tf_dtype input_type = ox_dtype_of(im, p);
  if (input_type != TF_F32 && input_type != TF_F16 && input_type != TF_BF16)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "Bernoulli of %s probabilities (float ones only)",
                   tf_dtype_name(input_type));
  tf_dtype dtype;
  TF_RETURN_IF_ERROR(output_type(im, node, input_type, &dtype));
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, p, &rank, dims);
  tf_graph *g = im->graph;
  tf_tensor_id wide = input_type == TF_F32 ? p : tf_cast(g, p, TF_F32);
  tf_tensor_id u = uniform(im, node, ones_of(im, node, dims, rank));
  tf_tensor_id y = tf_unary(g, TF_OP_RELU, tf_unary(g, TF_OP_SIGN, tf_sub(g, wide, u)));
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  return ox_set_tensor(im, node, 0, dtype == TF_F32 ? y : tf_cast(g, y, dtype));
}
