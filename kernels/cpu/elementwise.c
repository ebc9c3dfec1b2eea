/* Element-by-element kernels: the broadcasting binaries (add, sub, mul, div), the float unaries
 * (neg ... tanh, gelu, softplus) and the gradients of the activations (relu_grad ... tanh_grad).
 *
 * Every output element is computed by exactly one thread from its own inputs, so results do not
 * depend on the thread count. The output may alias an input of its own shape (in-place fusion):
 * each element is read before it is written, so nothing here is declared restrict. */
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

#define SQRT_HALF 0.70710678118654752440      /* 1/sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794   /* 1/sqrt(2 pi) */
#define SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_CUBIC 0.044715
/* softplus returns x itself above this (PyTorch's threshold): log1p(e^x) - x < 2.1e-9 there, and
 * e^x would overflow f32 from 89 on. */
#define SOFTPLUS_THRESHOLD 20

/* ---- scalar functions, in the compute type ---- */

static inline real sigmoid_of(real x) {
  // exp(-x) overflows to inf for very negative x, and 1 / inf = 0: no branch is needed.
  return (real)1 / ((real)1 + TF_REAL_EXP(-x));
}

static inline real silu_derivative(real x) {
  real s = sigmoid_of(x);
  return s * ((real)1 + x * ((real)1 - s));
}

static inline real gelu_of(real x, bool approximate) {
  if (approximate) {
    real inner = (real)SQRT_2_OVER_PI * (x + (real)GELU_CUBIC * x * x * x);
    return (real)0.5 * x * ((real)1 + TF_REAL_TANH(inner));
  }
  return (real)0.5 * x * ((real)1 + TF_REAL_ERF(x * (real)SQRT_HALF));
}

static inline real gelu_derivative(real x, bool approximate) {
  if (approximate) {
    real inner = (real)SQRT_2_OVER_PI * (x + (real)GELU_CUBIC * x * x * x);
    real t = TF_REAL_TANH(inner);
    real inner_derivative = (real)SQRT_2_OVER_PI * ((real)1 + (real)(3 * GELU_CUBIC) * x * x);
    return (real)0.5 * ((real)1 + t) + (real)0.5 * x * ((real)1 - t * t) * inner_derivative;
  }
  real cdf = (real)0.5 * ((real)1 + TF_REAL_ERF(x * (real)SQRT_HALF));
  real pdf = (real)INV_SQRT_2PI * TF_REAL_EXP((real)-0.5 * x * x);
  return cdf + x * pdf;
}

/* ---- broadcasting binaries ---- */

/* One run along the innermost axis: n elements, strides 0 (broadcast) or 1 for each operand. */
typedef void (*segment_fn)(const real *a, int64_t a_stride, const real *b, int64_t b_stride, real *out, int64_t n);

/* The four stride patterns get their own loops so that the compiler vectorises the common ones
 * (same shape, and a trailing bias vector after tf_cpu_collapse). */
#define DEFINE_SEGMENT(name, EXPR)                                                                                     \
  static void name##_segment(const real *a, int64_t a_stride, const real *b, int64_t b_stride, real *out, int64_t n) { \
    if (a_stride == 1 && b_stride == 1) {                                                                              \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        real x = a[i], y = b[i];                                                                                       \
        out[i] = EXPR;                                                                                                 \
      }                                                                                                                \
    } else if (a_stride == 1) {                                                                                        \
      const real y = b[0];                                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        real x = a[i];                                                                                                 \
        out[i] = EXPR;                                                                                                 \
      }                                                                                                                \
    } else if (b_stride == 1) {                                                                                        \
      const real x = a[0];                                                                                             \
      for (int64_t i = 0; i < n; i++) {                                                                                \
        real y = b[i];                                                                                                 \
        out[i] = EXPR;                                                                                                 \
      }                                                                                                                \
    } else {                                                                                                           \
      const real x = a[0], y = b[0];                                                                                   \
      const real value = EXPR;                                                                                         \
      for (int64_t i = 0; i < n; i++)                                                                                  \
        out[i] = value;                                                                                                \
    }                                                                                                                  \
  }

// clang-format would read "x * y" as a declaration.
// clang-format off
DEFINE_SEGMENT(add, x + y)
DEFINE_SEGMENT(sub, x - y)
DEFINE_SEGMENT(mul, x * y)
DEFINE_SEGMENT(div, x / y)
// clang-format on

/* out = a (op) b with numpy broadcasting of both operands to the output's shape. The iteration
 * space is collapsed to as few axes as possible, cut into fixed chunks of output elements, and each
 * chunk is walked as runs along the innermost axis. */
static void binary_run(const tf_cpu_args *args, segment_fn segment) {
  const tf_cpu_tensor *a = &args->inputs[0], *b = &args->inputs[1], *out = &args->outputs[0];
  const int64_t count = out->count;
  if (count == 0)
    return;
  int32_t rank = out->rank;
  int64_t shape[TF_MAX_RANK], strides[2][TF_MAX_RANK];
  for (int32_t i = 0; i < rank; i++)
    shape[i] = out->shape[i];
  tf_cpu_broadcast_strides(a, rank, shape, strides[0]);
  tf_cpu_broadcast_strides(b, rank, shape, strides[1]);
  tf_cpu_collapse(&rank, shape, 2, strides);
  const real *a_data = a->data, *b_data = b->data;
  real *out_data = out->data;
  const int64_t inner = shape[rank - 1], a_inner = strides[0][rank - 1], b_inner = strides[1][rank - 1];
  const int64_t chunks = (count + TF_CPU_CHUNK - 1) / TF_CPU_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), chunks > 1), for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int64_t end = chunk == chunks - 1 ? count : (chunk + 1) * TF_CPU_CHUNK;
        for (int64_t i = chunk * TF_CPU_CHUNK; i < end;) {
          const int64_t column = i % inner, length = inner - column < end - i ? inner - column : end - i;
          int64_t offsets[2];
          tf_cpu_row_offsets(i / inner, rank, shape, 2, strides, offsets);
          segment(a_data + offsets[0] + column * a_inner, a_inner, b_data + offsets[1] + column * b_inner, b_inner,
                  out_data + i, length);
          i += length;
        }
      });
}

void TF_REAL_NAME(tf_cpu_add)(const tf_cpu_args *args) { binary_run(args, add_segment); }
void TF_REAL_NAME(tf_cpu_sub)(const tf_cpu_args *args) { binary_run(args, sub_segment); }
void TF_REAL_NAME(tf_cpu_mul)(const tf_cpu_args *args) { binary_run(args, mul_segment); }
void TF_REAL_NAME(tf_cpu_div)(const tf_cpu_args *args) { binary_run(args, div_segment); }

/* ---- unaries: y[i] = EXPR(x) ---- */

#define DEFINE_UNARY(name, EXPR)                                                                                       \
  void TF_REAL_NAME(tf_cpu_##name)(const tf_cpu_args *args) {                                                          \
    const real *in = args->inputs[0].data;                                                                             \
    real *out = args->outputs[0].data;                                                                                 \
    const int64_t n = args->outputs[0].count;                                                                          \
    TF_CPU_PARALLEL_FOR(                                                                                               \
        tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK), for (int64_t i = 0; i < n; i++) {                         \
          real x = in[i];                                                                                              \
          out[i] = EXPR;                                                                                               \
        });                                                                                                            \
  }

// clang-format off
DEFINE_UNARY(neg, -x)
DEFINE_UNARY(exp, TF_REAL_EXP(x))
DEFINE_UNARY(log, TF_REAL_LOG(x))
DEFINE_UNARY(sqrt, TF_REAL_SQRT(x))
DEFINE_UNARY(rsqrt, (real)1 / TF_REAL_SQRT(x))
DEFINE_UNARY(relu, x > 0 ? x : (real)0)
DEFINE_UNARY(silu, x * sigmoid_of(x))
DEFINE_UNARY(sigmoid, sigmoid_of(x))
DEFINE_UNARY(tanh, TF_REAL_TANH(x))
DEFINE_UNARY(softplus, x > (real)SOFTPLUS_THRESHOLD ? x : TF_REAL_LOG1P(TF_REAL_EXP(x)))
// clang-format on

void TF_REAL_NAME(tf_cpu_gelu)(const tf_cpu_args *args) {
  const real *in = args->inputs[0].data;
  real *out = args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const bool approximate = args->attrs->u.gelu.approximate;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK),
      for (int64_t i = 0; i < n; i++) { out[i] = gelu_of(in[i], approximate); });
}

/* ---- activation gradients: dx[i] = EXPR(v, dy), v = x or y as the op's comment in graph.h says ---- */

#define DEFINE_GRAD(name, EXPR)                                                                                        \
  void TF_REAL_NAME(tf_cpu_##name)(const tf_cpu_args *args) {                                                          \
    const real *value = args->inputs[0].data, *upstream = args->inputs[1].data;                                        \
    real *out = args->outputs[0].data;                                                                                 \
    const int64_t n = args->outputs[0].count;                                                                          \
    TF_CPU_PARALLEL_FOR(                                                                                               \
        tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK), for (int64_t i = 0; i < n; i++) {                         \
          real v = value[i], dy = upstream[i];                                                                         \
          out[i] = EXPR;                                                                                               \
        });                                                                                                            \
  }

/* relu'(0) = 0, as in PyTorch's threshold_backward. clang-format would read "dy * f(v)" as a
 * declaration. */
// clang-format off
DEFINE_GRAD(relu_grad, v > 0 ? dy : (real)0)
DEFINE_GRAD(silu_grad, dy * silu_derivative(v))
DEFINE_GRAD(sigmoid_grad, dy * v * ((real)1 - v))
DEFINE_GRAD(tanh_grad, dy * ((real)1 - v * v))
// clang-format on

void TF_REAL_NAME(tf_cpu_gelu_grad)(const tf_cpu_args *args) {
  const real *x = args->inputs[0].data, *dy = args->inputs[1].data;
  real *dx = args->outputs[0].data;
  const int64_t n = args->outputs[0].count;
  const bool approximate = args->attrs->u.gelu.approximate;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK),
      for (int64_t i = 0; i < n; i++) { dx[i] = dy[i] * gelu_derivative(x[i], approximate); });
}
