/* The suite's tolerances (conformance.h), in one place. Only f32 data has one: integer, f16 and
 * bf16 outputs (casts, ids, labels) must equal the reference bit for bit.
 *
 * Against the f64 reference, each op is held to what a float32 implementation of it can reach, in
 * classes (the worst of the CPU and lavapipe, measured, is well inside each; test_conformance_cpu
 * and test_vulkan_ops print it per op):
 *   exact    ops that only move, select or negate float values (a float input gives a float output
 *            exactly), and zero: 0;
 *   rounded  one or two roundings per element (add, div, dropout's scaling, an integer cast to
 *            f32): 2.4e-7 |ref|, two ulps;
 *   math     one libm-class function per element (and the loss gradients, a few of them): 2e-6
 *            |ref| + 1e-6 max |ref|, the second term for results near 0 (a GPU's log is accurate
 *            to 2^-21 absolute near 1);
 *   sums     reductions and products: 1e-5 |ref| + 1e-5 max(1, max |ref|): float error grows with
 *            the terms, which cancellation can leave far above the result (a loss summing to 3e-4
 *            from terms of 1), and the data is of order 1; lavapipe's longest sum (a weight
 *            gradient over 36,864 terms) reaches 0.7e-5 of its buffer's largest value;
 *   update   the optimizers, a few operations on values of the parameters' scale: 2e-6 |ref| +
 *            5e-7 max |ref|.
 * Against the f32 CPU kernel, the tolerances are those test_cuda_ops has always used. */
#include "conformance.h"

/* The element-wise functions computed by libm or a polynomial (within a few ulps, each backend its own
 * way): both tables' `math` rows. */
static bool transcendental(tf_op op) {
  switch (op) {
  case TF_OP_EXP:
  case TF_OP_LOG:
  case TF_OP_SQRT:
  case TF_OP_RSQRT:
  case TF_OP_GELU:
  case TF_OP_SILU:
  case TF_OP_SIGMOID:
  case TF_OP_TANH:
  case TF_OP_SOFTPLUS:
  case TF_OP_ERF:
  case TF_OP_ERF_GRAD:
  case TF_OP_SIN:
  case TF_OP_COS:
  case TF_OP_ASIN:
  case TF_OP_ACOS:
  case TF_OP_ATAN:
  case TF_OP_TAN:
  case TF_OP_SINH:
  case TF_OP_COSH:
  case TF_OP_ASINH:
  case TF_OP_ACOSH:
  case TF_OP_ATANH:
  case TF_OP_GELU_GRAD:
  case TF_OP_GELU_PAIR:
  case TF_OP_SILU_GRAD:
  case TF_OP_SIGMOID_GRAD:
  case TF_OP_TANH_GRAD: return true;
  default: return false;
  }
}

conf_tolerance conf_tolerance_f64(tf_op op) {
  static const conf_tolerance exact = {0, 0, 0}, rounded = {0, 2.4e-7, 0}, math = {1e-6, 2e-6, 0},
                              sums = {1e-5, 1e-5, 1}, update = {5e-7, 2e-6, 0};
  if (transcendental(op))
    return math;
  switch (op) {
  case TF_OP_NEG:
  case TF_OP_STOP_GRADIENT:
  case TF_OP_FLOOR:
  case TF_OP_CEIL:
  case TF_OP_ROUND:
  case TF_OP_SIGN:
  case TF_OP_KEEP:
  case TF_OP_ABS:
  case TF_OP_ABS_GRAD:
  case TF_OP_RELU:
  case TF_OP_RELU_GRAD:
  case TF_OP_CLIP:
  case TF_OP_CLIP_GRAD:
  case TF_OP_RESHAPE:
  case TF_OP_TRANSPOSE:
  case TF_OP_CONCAT:
  case TF_OP_SLICE:
  case TF_OP_SLICE_GRAD:
  case TF_OP_EXPAND:
  case TF_OP_EMBEDDING:
  case TF_OP_MAX:
  case TF_OP_MAX_POOL2D:
  case TF_OP_ZERO: return exact;
  case TF_OP_CAST:
  case TF_OP_CAST_INTO:
  case TF_OP_ADD:
  case TF_OP_SUB:
  case TF_OP_MUL:
  case TF_OP_DIV:
  case TF_OP_ACCUMULATE:
  case TF_OP_DROPOUT:
  case TF_OP_LEAKY_RELU:
  case TF_OP_LEAKY_RELU_GRAD:
  case TF_OP_MAX_GRAD: return rounded;
  case TF_OP_SOFTMAX:
  case TF_OP_CROSS_ENTROPY_GRAD:
  case TF_OP_MSE_GRAD:
  case TF_OP_BCE_WITH_LOGITS_GRAD: return math;
  case TF_OP_SGD:
  case TF_OP_ADAMW:
  case TF_OP_ADAMW8BIT: return update;
  default: return sums;
  }
}

conf_tolerance conf_tolerance_f32(tf_op op) {
  static const conf_tolerance exact = {0, 0, 1}, math = {2e-6, 2e-5, 1}, sums = {1e-5, 1e-4, 1},
                              update = {1e-7, 1e-6, 1};
  if (transcendental(op))
    return math;
  switch (op) {
  case TF_OP_NEG:
  case TF_OP_STOP_GRADIENT:
  case TF_OP_FLOOR:
  case TF_OP_CEIL:
  case TF_OP_ROUND:
  case TF_OP_SIGN:
  case TF_OP_KEEP:
  case TF_OP_ABS:
  case TF_OP_ABS_GRAD:
  case TF_OP_RELU:
  case TF_OP_RELU_GRAD:
  case TF_OP_RESHAPE:
  case TF_OP_TRANSPOSE:
  case TF_OP_CONCAT:
  case TF_OP_SLICE:
  case TF_OP_SLICE_GRAD:
  case TF_OP_EXPAND:
  case TF_OP_DROPOUT:
  case TF_OP_CAST:
  case TF_OP_CAST_INTO:
  case TF_OP_EMBEDDING:
  case TF_OP_EMBEDDING_GRAD:
  case TF_OP_MAX:
  case TF_OP_MAX_GRAD:
  case TF_OP_MAX_POOL2D:
  case TF_OP_MAX_POOL2D_GRAD:
  case TF_OP_AVG_POOL2D:
  case TF_OP_AVG_POOL2D_GRAD:
  case TF_OP_ACCUMULATE:
  case TF_OP_ZERO:
  case TF_OP_ADD:
  case TF_OP_SUB:
  case TF_OP_MUL:
  case TF_OP_LEAKY_RELU:
  case TF_OP_LEAKY_RELU_GRAD:
  case TF_OP_CLIP:
  case TF_OP_CLIP_GRAD: return exact;
  case TF_OP_SGD:
  case TF_OP_ADAMW:
  case TF_OP_ADAMW8BIT: return update; /* same operations; pow() may differ in the last bit */
  case TF_OP_DIV:
  case TF_OP_MSE_GRAD:
  case TF_OP_BCE_WITH_LOGITS_GRAD: return math;
  default: return sums;
  }
}

/* test_vulkan_ops' families: elementwise math is within a few ulps of the CPU's libm; sums and
 * products add in another order (tree or tile order), so their error grows with the terms; over
 * tens of thousands of terms it grows with the largest result too (a CUDA-only case until now,
 * held per step to max(1, max |cpu|) x 1e-5). */
conf_tolerance conf_tolerance_family(conf_family family) {
  static const conf_tolerance exact = {1e-6, 1e-6, -1}, math = {2e-6, 2e-5, -1}, sums = {1e-5, 1e-4, -1},
                              long_sums = {1e-5, 1e-4, 1};
  switch (family) {
  case CONF_EXACT: return exact;
  case CONF_MATH: return math;
  case CONF_LONG_SUMS: return long_sums;
  default: return sums;
  }
}

/* On half data each result is rounded to f16/bf16 (unit u: 2^-8 bf16, 2^-11 f16) and a backend's f32
 * result a few f32 ulps away from the CPU's can round to the neighbouring half value; the next ops
 * carry that on. End to end, such a run is held to the family's tolerance plus 4u, scaled by
 * max(1, max |cpu|) of the buffer. Step by step every op stays within its f32 tolerance on the same
 * inputs, and casts are bit for bit. */
conf_tolerance conf_tolerance_half(conf_family family, tf_dtype storage) {
  conf_tolerance t = conf_tolerance_family(family);
  if (storage != TF_F16 && storage != TF_BF16)
    return t;
  const double u = storage == TF_BF16 ? 1.0 / 256.0 : 1.0 / 2048.0;
  t.atol += 4.0 * u;
  t.rtol += 4.0 * u;
  t.floor = 1.0;
  return t;
}

/* CUDA's attention on tensor cores (kernels/cuda/attention_fast*.cu, the default for heads of 32, 64
 * and 128) rounds P and dS to the storage type once before their products, as FlashAttention-2 and
 * PyTorch's SDPA do: each term of an output is then off by up to u of itself, the output by up to
 * u sum |terms|, far above one rounding of a result near 0. An emulation of those roundings on this
 * suite's data (N(0, 1) q, k, v, dy; bench/results/2026-12-05-gpu-h100-lend6/attention_rounding.py)
 * reaches 2.5 u max(1, max |ref|); the elements the sixth lend printed (H100, heads of 64 and 128) were
 * off by up to 0.6 u (bf16) and 1.5 u (f16) absolute. 4 u, test_cuda_attention_mma's bound for the
 * same kernels; a wrong fragment or tile is off by O(max |ref|). */
double conf_cuda_rounded_terms(tf_op op) { return op == TF_OP_ATTENTION || op == TF_OP_ATTENTION_GRAD ? 4.0 : 0.0; }
