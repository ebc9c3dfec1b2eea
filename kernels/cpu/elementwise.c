/* Element-by-element kernels: the broadcasting binaries (add, sub, mul, div, keep), the float unaries
 * (neg ... tanh, gelu, softplus, leaky_relu, clip) and the gradients of the activations (relu_grad ...
 * tanh_grad, leaky_relu_grad, clip_grad).
 *
 * Every output element is computed by exactly one thread from its own inputs, so results do not
 * depend on the thread count. The output may alias an input of its own shape (in-place fusion):
 * each element is read before it is written, so nothing here is declared restrict. */
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#define SQRT_HALF 0.70710678118654752440        /* 1/sqrt(2) */
#define INV_SQRT_2PI 0.39894228040143267794     /* 1/sqrt(2 pi) */
#define SQRT_2_OVER_PI 0.79788456080286535588   /* sqrt(2/pi) */
#define TWO_OVER_SQRT_PI 1.12837916709551257390 /* 2/sqrt(pi), erf's derivative at 0 */
#define GELU_CUBIC 0.044715
/* softplus returns x itself above this (PyTorch's threshold): log1p(e^x) - x < 2.1e-9 there, and
 * e^x would overflow f32 from 89 on. */
#define SOFTPLUS_THRESHOLD 20

/* ---- scalar functions, in the compute type ----
 * The f64 build (the reference) uses libm and the textbook formulas; the f32 build uses
 * kernels/cpu/vector_math.h in forms chosen so that no step cancels or overflows. */

#ifdef TF_REAL_F64

static inline real exp_of(real x) { return exp(x); }
static inline real tanh_of(real x) { return tanh(x); }

static inline real sigmoid_of(real x) {
  // exp(-x) overflows to inf for very negative x, and 1 / inf = 0: no branch is needed.
  return (real)1 / ((real)1 + exp(-x));
}

static inline real silu_derivative(real x) {
  real s = sigmoid_of(x);
  return s * ((real)1 + x * ((real)1 - s));
}

static inline real gelu_of(real x, bool approximate) {
  if (approximate) {
    real inner = (real)SQRT_2_OVER_PI * (x + (real)GELU_CUBIC * x * x * x);
    return (real)0.5 * x * ((real)1 + tanh(inner));
  }
  return (real)0.5 * x * ((real)1 + erf(x * (real)SQRT_HALF));
}

static inline real gelu_derivative(real x, bool approximate) {
  if (approximate) {
    real inner = (real)SQRT_2_OVER_PI * (x + (real)GELU_CUBIC * x * x * x);
    real t = tanh(inner);
    real inner_derivative = (real)SQRT_2_OVER_PI * ((real)1 + (real)(3 * GELU_CUBIC) * x * x);
    return (real)0.5 * ((real)1 + t) + (real)0.5 * x * ((real)1 - t * t) * inner_derivative;
  }
  real cdf = (real)0.5 * ((real)1 + erf(x * (real)SQRT_HALF));
  real pdf = (real)INV_SQRT_2PI * exp((real)-0.5 * x * x);
  return cdf + x * pdf;
}

/* gelu(x), and its derivative into *derivative: the reference computes them apart. */
static inline real gelu_and_derivative(real x, bool approximate, real *derivative) {
  *derivative = gelu_derivative(x, approximate);
  return gelu_of(x, approximate);
}

#else

static inline real exp_of(real x) { return tf_cpu_math_exp(x); }
static inline real tanh_of(real x) { return tf_cpu_math_tanh(x); }
static inline real sigmoid_of(real x) { return tf_cpu_math_sigmoid(x); }

/* s (1 + x (1 - s)), 1 - s = sigmoid(-x) computed as such. */
static inline real silu_derivative(real x) {
  float s, complement;
  tf_cpu_math_sigmoid_pair(x, &s, &complement);
  return s * (1.0f + x * complement);
}

/* The tanh form: 0.5 x (1 + tanh u) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x³), so that
 * 1 + tanh u never cancels (it did for x < -3 in the textbook form); s(1 - s) = a / (1 + a)² with
 * a = e^{-2|u|} for the derivative s + 2 x u' s (1 - s). */
static inline float gelu_tanh(float x, float *derivative) {
  const float u = (float)SQRT_2_OVER_PI * (x + (float)GELU_CUBIC * x * x * x);
  const float a = tf_cpu_math_exp(u < 0 ? 2.0f * u : -2.0f * u), larger = 1.0f / (1.0f + a);
  const float s = u < 0 ? a * larger : larger;
  const float u_derivative = (float)SQRT_2_OVER_PI * (1.0f + (float)(3 * GELU_CUBIC) * x * x);
  *derivative = s + 2.0f * x * u_derivative * a * larger * larger;
  return x * s;
}

/* The erf form: x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2) from its tail 0.5 erfc(|x| / sqrt 2), so
 * that Phi never cancels for x < 0 (1 + erf did); the tail's e^{-x²/2} is also the density's. */
static inline float gelu_erf(float x, float *derivative) {
  const float magnitude = x < 0 ? -x : x, gaussian = tf_cpu_math_exp(-0.5f * x * x);
  const float tail = tf_cpu_math_half_erfc(magnitude * (float)SQRT_HALF, gaussian);
  const float cdf = x < 0 ? tail : 1.0f - tail;
  *derivative = cdf + x * (float)INV_SQRT_2PI * gaussian;
  return x * cdf;
}

/* gelu(x), and its derivative into *derivative, from one evaluation of either form. */
static inline real gelu_and_derivative(real x, bool approximate, real *derivative) {
  return approximate ? gelu_tanh(x, derivative) : gelu_erf(x, derivative);
}

static inline real gelu_of(real x, bool approximate) {
  float unused;
  return gelu_and_derivative(x, approximate, &unused);
}

static inline real gelu_derivative(real x, bool approximate) {
  float derivative;
  gelu_and_derivative(x, approximate, &derivative);
  return derivative;
}

#endif

/* ---- broadcasting binaries ---- */

/* One run along the innermost axis: n elements, strides 0 (broadcast) or 1 for each operand. */
typedef void (*segment_fn)(const real *a, int64_t a_stride, const real *b, int64_t b_stride, real *out, int64_t n);

/* The four stride patterns get their own loops so that the compiler vectorises the common ones
 * (same shape, and a trailing bias vector after tf_cpu_collapse). The loops are `omp simd`, like the
 * unary spans below: the plan often writes the output over `a` (in place), which a runtime alias
 * check would send to the scalar loop; within a vector iteration every element is loaded before it
 * is stored. Maps, so they take the wider clones too (TF_CPU_VECTOR_CLONES). */
#define DEFINE_SEGMENT(name, EXPR)                                                                                     \
  TF_CPU_VECTOR_CLONES static void name##_segment(const real *a, int64_t a_stride, const real *b, int64_t b_stride,    \
                                                  real *out, int64_t n) {                                              \
    if (a_stride == 1 && b_stride == 1) {                                                                              \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                            \
        real x = a[i], y = b[i];                                                                                       \
        out[i] = EXPR;                                                                                                 \
      }                                                                                                                \
    } else if (a_stride == 1) {                                                                                        \
      const real y = b[0];                                                                                             \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                            \
        real x = a[i];                                                                                                 \
        out[i] = EXPR;                                                                                                 \
      }                                                                                                                \
    } else if (b_stride == 1) {                                                                                        \
      const real x = a[0];                                                                                             \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                            \
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
DEFINE_SEGMENT(keep, y == 0 ? (real)0 : x) /* a select: 0 where y is 0 (a NaN of x too); a NaN y keeps x */
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
void TF_REAL_NAME(tf_cpu_keep)(const tf_cpu_args *args) { binary_run(args, keep_segment); }

/* min(max(x, lo), hi): lo > hi gives hi everywhere (torch.clamp's rule), and a NaN x stays NaN (both
 * comparisons are false). */
static inline real clip_of(real x, real lo, real hi) {
  const real y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

/* ---- unaries and activation gradients ----
 * Each kernel cuts its elements into chunks of TF_CPU_CHUNK (one thread each) and runs a span
 * function over a chunk. The span's loop is `omp simd`: it vectorises at -O2 as at -O3, and needs
 * no runtime alias check, which an in-place call (out == in) would fail, falling back to scalar
 * code. Within a vector iteration every element is loaded before it is stored, so out == in is
 * still correct; partial overlap never occurs (the plan aliases whole tensors). */

/* `a` and `b` are the op's float attributes (leaky_relu's alpha in a; clip's lo and hi); the other
 * spans ignore them. */
typedef void (*unary_span)(const real *in, real *out, int64_t n, real a, real b);
typedef void (*grad_span)(const real *value, const real *upstream, real *out, int64_t n, real a, real b);

static void unary_run(const tf_cpu_args *args, unary_span span, real a, real b) {
  const real *in = args->inputs[0].data;
  real *out = args->outputs[0].data;
  const int64_t n = args->outputs[0].count, chunks = (n + TF_CPU_CHUNK - 1) / TF_CPU_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), chunks > 1), for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int64_t begin = chunk * TF_CPU_CHUNK, length = n - begin < TF_CPU_CHUNK ? n - begin : TF_CPU_CHUNK;
        span(in + begin, out + begin, length, a, b);
      });
}

static void grad_run(const tf_cpu_args *args, grad_span span, real a, real b) {
  const real *value = args->inputs[0].data, *upstream = args->inputs[1].data;
  real *out = args->outputs[0].data;
  const int64_t n = args->outputs[0].count, chunks = (n + TF_CPU_CHUNK - 1) / TF_CPU_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), chunks > 1), for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int64_t begin = chunk * TF_CPU_CHUNK, length = n - begin < TF_CPU_CHUNK ? n - begin : TF_CPU_CHUNK;
        span(value + begin, upstream + begin, out + begin, length, a, b);
      });
}

/* y[i] = EXPR(x): the span alone, and the span with its kernel. */
#define DEFINE_UNARY_SPAN(name, EXPR)                                                                                  \
  TF_CPU_VECTOR_CLONES static void name##_span(const real *in, real *out, int64_t n, real a, real b) {                 \
    (void)a, (void)b;                                                                                                  \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                              \
      real x = in[i];                                                                                                  \
      out[i] = EXPR;                                                                                                   \
    }                                                                                                                  \
  }
#define DEFINE_UNARY(name, EXPR)                                                                                       \
  DEFINE_UNARY_SPAN(name, EXPR)                                                                                        \
  void TF_REAL_NAME(tf_cpu_##name)(const tf_cpu_args *args) { unary_run(args, name##_span, 0, 0); }

// clang-format off
DEFINE_UNARY(neg, -x)
DEFINE_UNARY(exp, exp_of(x))
DEFINE_UNARY(log, TF_REAL_LOG(x))
DEFINE_UNARY(sqrt, TF_REAL_SQRT(x))
DEFINE_UNARY(rsqrt, (real)1 / TF_REAL_SQRT(x))
DEFINE_UNARY(relu, x > 0 ? x : (real)0)
DEFINE_UNARY(silu, x * sigmoid_of(x))
DEFINE_UNARY(sigmoid, sigmoid_of(x))
DEFINE_UNARY(tanh, tanh_of(x))
DEFINE_UNARY(softplus, x > (real)SOFTPLUS_THRESHOLD ? x : TF_REAL_LOG1P(TF_REAL_EXP(x)))
DEFINE_UNARY_SPAN(gelu_erf, gelu_of(x, false))
DEFINE_UNARY_SPAN(gelu_tanh, gelu_of(x, true))
DEFINE_UNARY_SPAN(leaky_relu, x > 0 ? x : x * a) /* PyTorch's: x * negative_slope at x <= 0 */
DEFINE_UNARY_SPAN(clip, clip_of(x, a, b))
DEFINE_UNARY(abs, TF_REAL_FABS(x))
DEFINE_UNARY(erf, TF_REAL_ERF(x))
DEFINE_UNARY(sin, TF_REAL_SIN(x))
DEFINE_UNARY(cos, TF_REAL_COS(x))
DEFINE_UNARY(asin, TF_REAL_ASIN(x))
DEFINE_UNARY(acos, TF_REAL_ACOS(x))
DEFINE_UNARY(atan, TF_REAL_ATAN(x))
DEFINE_UNARY(tan, TF_REAL_TAN(x))
DEFINE_UNARY(sinh, TF_REAL_SINH(x))
DEFINE_UNARY(cosh, TF_REAL_COSH(x))
DEFINE_UNARY(asinh, TF_REAL_ASINH(x))
DEFINE_UNARY(acosh, TF_REAL_ACOSH(x))
DEFINE_UNARY(atanh, TF_REAL_ATANH(x))
DEFINE_UNARY(stop_gradient, x) /* the identity: only autodiff treats it otherwise */
DEFINE_UNARY(floor, TF_REAL_FLOOR(x))
DEFINE_UNARY(ceil, TF_REAL_CEIL(x))
DEFINE_UNARY(round, TF_REAL_ROUND_EVEN(x)) /* ties to even: the default rounding mode, never changed here */
DEFINE_UNARY(sign, x > 0 ? (real)1 : x < 0 ? (real)-1 : x) /* a NaN and a signed zero kept */
// clang-format on

void TF_REAL_NAME(tf_cpu_gelu)(const tf_cpu_args *args) {
  unary_run(args, args->attrs->u.gelu.approximate ? gelu_tanh_span : gelu_erf_span, 0, 0);
}

/* gelu_pair: y = gelu(x) and dydx = gelu'(x) from one evaluation, the bits of gelu's and of the
 * derivative gelu_grad multiplies dy by (its dx is dy dydx exactly). */
#define DEFINE_GELU_PAIR_SPAN(name, APPROXIMATE)                                                                       \
  TF_CPU_VECTOR_CLONES static void name##_span(const real *in, real *out, real *derivative, int64_t n) {               \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                              \
      const real x = in[i];                                                                                            \
      real d;                                                                                                          \
      out[i] = gelu_and_derivative(x, APPROXIMATE, &d);                                                                \
      derivative[i] = d;                                                                                               \
    }                                                                                                                  \
  }
DEFINE_GELU_PAIR_SPAN(gelu_erf_pair, false)
DEFINE_GELU_PAIR_SPAN(gelu_tanh_pair, true)

void TF_REAL_NAME(tf_cpu_gelu_pair)(const tf_cpu_args *args) {
  const real *in = args->inputs[0].data;
  real *out = args->outputs[0].data, *derivative = args->outputs[1].data;
  const bool approximate = args->attrs->u.gelu.approximate;
  const int64_t n = args->outputs[0].count, chunks = (n + TF_CPU_CHUNK - 1) / TF_CPU_CHUNK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), chunks > 1), for (int64_t chunk = 0; chunk < chunks; chunk++) {
        const int64_t begin = chunk * TF_CPU_CHUNK, length = n - begin < TF_CPU_CHUNK ? n - begin : TF_CPU_CHUNK;
        (approximate ? gelu_tanh_pair_span : gelu_erf_pair_span)(in + begin, out + begin, derivative + begin, length);
      });
}

void TF_REAL_NAME(tf_cpu_leaky_relu)(const tf_cpu_args *args) {
  unary_run(args, leaky_relu_span, (real)args->attrs->u.leaky_relu.alpha, 0);
}

void TF_REAL_NAME(tf_cpu_clip)(const tf_cpu_args *args) {
  unary_run(args, clip_span, (real)args->attrs->u.clip.lo, (real)args->attrs->u.clip.hi);
}

/* dx[i] = EXPR(v, dy), v = x or y as the op's comment in graph.h says: the span, and with its kernel. */
#define DEFINE_GRAD_SPAN(name, EXPR)                                                                                   \
  TF_CPU_VECTOR_CLONES static void name##_span(const real *value, const real *upstream, real *out, int64_t n, real a,  \
                                               real b) {                                                               \
    (void)a, (void)b;                                                                                                  \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                                                              \
      real v = value[i], dy = upstream[i];                                                                             \
      out[i] = EXPR;                                                                                                   \
    }                                                                                                                  \
  }
#define DEFINE_GRAD(name, EXPR)                                                                                        \
  DEFINE_GRAD_SPAN(name, EXPR)                                                                                         \
  void TF_REAL_NAME(tf_cpu_##name)(const tf_cpu_args *args) { grad_run(args, name##_span, 0, 0); }

/* relu'(0) = 0, as in PyTorch's threshold_backward. clang-format would read "dy * f(v)" as a
 * declaration. */
// clang-format off
DEFINE_GRAD(relu_grad, v > 0 ? dy : (real)0)
DEFINE_GRAD(silu_grad, dy * silu_derivative(v))
DEFINE_GRAD(sigmoid_grad, dy * v * ((real)1 - v))
DEFINE_GRAD(tanh_grad, dy * ((real)1 - v * v))
DEFINE_GRAD_SPAN(gelu_erf_grad, dy * gelu_derivative(v, false))
DEFINE_GRAD_SPAN(gelu_tanh_grad, dy * gelu_derivative(v, true))
DEFINE_GRAD_SPAN(leaky_relu_grad, v > 0 ? dy : dy * a) /* PyTorch's leaky_relu_backward */
DEFINE_GRAD_SPAN(clip_grad, v > a && v < b ? dy : (real)0) /* PyTorch's hardtanh_backward: 0 at a bound */
/* PyTorch's dy sgn(x): sgn is 0 at 0 and for a NaN x, and 0 times an infinite dy is NaN */
DEFINE_GRAD(abs_grad, dy * (v > 0 ? (real)1 : v < 0 ? (real)-1 : (real)0))
DEFINE_GRAD(erf_grad, dy * ((real)TWO_OVER_SQRT_PI * exp_of(-v * v)))
// clang-format on

void TF_REAL_NAME(tf_cpu_gelu_grad)(const tf_cpu_args *args) {
  grad_run(args, args->attrs->u.gelu.approximate ? gelu_tanh_grad_span : gelu_erf_grad_span, 0, 0);
}

void TF_REAL_NAME(tf_cpu_leaky_relu_grad)(const tf_cpu_args *args) {
  grad_run(args, leaky_relu_grad_span, (real)args->attrs->u.leaky_relu.alpha, 0);
}

void TF_REAL_NAME(tf_cpu_clip_grad)(const tf_cpu_args *args) {
  grad_run(args, clip_grad_span, (real)args->attrs->u.clip.lo, (real)args->attrs->u.clip.hi);
}
