/* Element-by-element kernels: the broadcasting binaries (add, sub, mul, div), the float unaries
 * (neg ... tanh, gelu, softplus) and the activation gradients (relu_grad ... tanh_grad), as
 * kernels/cpu/elementwise.c computes them. Each output element is computed by one thread from its
 * own inputs, so an output may alias an input of its own shape. The transcendental functions are
 * CUDA's (expf, erff, tanhf: within 2 ulp of glibc's); nothing is built with fast math. Each kernel is
 * templated on the storage of its operands: f32, or f16/bf16 for the cuda target's half kernels
 * (each element loaded to f32 exactly, computed as on f32, the result rounded once: the bits of cast
 * up -> f32 kernel -> cast down). */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

#define SQRT_HALF 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_CUBIC 0.044715f
#define TWO_OVER_SQRT_PI 1.12837916709551257390f

__device__ inline float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The tanh form through s = 0.5 (1 + tanh u) = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), from
 * a = e^{-2|u|}, and the erf form through erfc: 1 + tanh u and 1 + erf(x / sqrt 2) cancel for x < 0
 * (kernels/cpu/elementwise.c's forms). The tanh form's derivative is s + 2 x u' s (1 - s), s (1 - s)
 * = a / (1 + a)^2; the erf form's Phi(x) + x phi(x). */
struct gelu_terms {
  float value, derivative;
};

__device__ inline gelu_terms gelu_and_derivative(float x, bool approximate) {
  if (approximate) {
    const float u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    const float a = expf(-2.0f * fabsf(u)), larger = 1.0f / (1.0f + a);
    const float s = u < 0 ? a * larger : larger;
    const float u_derivative = SQRT_2_OVER_PI * (1.0f + (float)(3 * 0.044715) * x * x);
    return {x * s, s + 2.0f * x * u_derivative * a * larger * larger};
  }
  const float cdf = 0.5f * erfcf(-x * SQRT_HALF);
  return {x * cdf, cdf + x * (INV_SQRT_2PI * expf(-0.5f * x * x))};
}

__device__ inline float gelu_of(float x, bool approximate) { return gelu_and_derivative(x, approximate).value; }

__device__ inline float gelu_derivative(float x, bool approximate) {
  return gelu_and_derivative(x, approximate).derivative;
}

/* ---- binaries ---- */

template <int OP> __device__ inline float binary_op(float x, float y) {
  switch (OP) {
  case TF_OP_ADD: return x + y;
  case TF_OP_SUB: return x - y;
  case TF_OP_MUL: return x * y;
  case TF_OP_DIV: return x / y;
  case TF_OP_KEEP: return y == 0.0f ? 0.0f : x; /* a select: 0 where y is 0 (a NaN of x too); a NaN y keeps x */
  default: return __int_as_float(0x7fc00000);   /* NaN: an op without a case here */
  }
}

/* Both operands walk the output contiguously (or one is a scalar: stride 0). */
template <int OP, typename T>
__global__ void binary_flat(const T *a, int64_t a_step, const T *b, int64_t b_step, T *out, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = from_f32<T>(binary_op<OP>(to_f32(a[i * a_step]), to_f32(b[i * b_step]))); }
}

template <int OP, typename T> __global__ void binary_strided(const T *a, const T *b, T *out, int64_t n, Strides s) {
  TF_CUDA_GRID_STRIDE(i, n) {
    out[i] = from_f32<T>(binary_op<OP>(to_f32(a[offset_of(s, 0, i)]), to_f32(b[offset_of(s, 1, i)])));
  }
}

template <int OP, typename T> tf_status binary_run(const tf_cuda_args *args) {
  const tf_cuda_tensor *a = &args->inputs[0], *b = &args->inputs[1], *out = &args->outputs[0];
  const int64_t n = out->count;
  if (n == 0)
    return NULL;
  Strides s;
  s.rank = out->rank;
  for (int32_t i = 0; i < out->rank; i++)
    s.shape[i] = out->shape[i];
  broadcast_strides(a, s.rank, s.shape, s.stride[0]);
  broadcast_strides(b, s.rank, s.shape, s.stride[1]);
  collapse(&s, 2);
  const T *x = (const T *)a->data, *y = (const T *)b->data;
  T *z = (T *)out->data;
  cudaStream_t stream = stream_of(args);
  if (s.rank == 1 && s.stride[0][0] <= 1 && s.stride[1][0] <= 1)
    binary_flat<OP, T><<<blocks_for(n), kThreads, 0, stream>>>(x, s.stride[0][0], y, s.stride[1][0], z, n);
  else
    binary_strided<OP, T><<<blocks_for(n), kThreads, 0, stream>>>(x, y, z, n, s);
  return launch_status();
}

/* ---- unaries ---- */

/* An activation's attributes: gelu's tanh form, leaky_relu's slope, clip's bounds. */
struct activation {
  bool approximate;
  float slope, lo, hi;
};

static activation activation_of(const tf_attrs *attrs) {
  activation a = {false, 0.0f, 0.0f, 0.0f};
  if (attrs && attrs->kind == TF_ATTR_GELU)
    a.approximate = attrs->u.gelu.approximate;
  if (attrs && attrs->kind == TF_ATTR_LEAKY_RELU)
    a.slope = attrs->u.leaky_relu.alpha;
  if (attrs && attrs->kind == TF_ATTR_CLIP) {
    a.lo = attrs->u.clip.lo;
    a.hi = attrs->u.clip.hi;
  }
  return a;
}

/* min(max(x, lo), hi), as kernels/cpu/elementwise.c's clip_of: hi everywhere when lo > hi, NaN kept. */
__device__ inline float clip_of(float x, float lo, float hi) {
  const float y = x < lo ? lo : x;
  return y > hi ? hi : y;
}

template <int OP> __device__ inline float unary_op(float x, activation a) {
  switch (OP) {
  case TF_OP_NEG: return -x;
  case TF_OP_EXP: return expf(x);
  case TF_OP_LOG: return logf(x);
  case TF_OP_SQRT: return sqrtf(x);
  case TF_OP_RSQRT: return 1.0f / sqrtf(x);
  case TF_OP_RELU: return x > 0 ? x : 0.0f;
  case TF_OP_GELU: return gelu_of(x, a.approximate);
  case TF_OP_SILU: return x * sigmoid_of(x);
  case TF_OP_SIGMOID: return sigmoid_of(x);
  case TF_OP_TANH: return tanhf(x);
  case TF_OP_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
  case TF_OP_LEAKY_RELU: return x > 0 ? x : x * a.slope;
  case TF_OP_CLIP: return clip_of(x, a.lo, a.hi);
  case TF_OP_ABS: return fabsf(x);
  case TF_OP_ERF: return erff(x);
  case TF_OP_SIN: return sinf(x); /* not fast math: within 2 ulp, with full range reduction */
  case TF_OP_COS: return cosf(x);
  case TF_OP_ASIN: return asinf(x);
  case TF_OP_ACOS: return acosf(x);
  case TF_OP_ATAN: return atanf(x);
  case TF_OP_TAN: return tanf(x);
  case TF_OP_SINH: return sinhf(x);
  case TF_OP_COSH: return coshf(x);
  case TF_OP_ASINH: return asinhf(x);
  case TF_OP_ACOSH: return acoshf(x);
  case TF_OP_ATANH: return atanhf(x);
  case TF_OP_STOP_GRADIENT: return x;
  case TF_OP_FLOOR: return floorf(x);
  case TF_OP_CEIL: return ceilf(x);
  case TF_OP_ROUND: return rintf(x); /* ties to even */
  case TF_OP_SIGN: return x > 0 ? 1.0f : x < 0 ? -1.0f : x;
  default: return __int_as_float(0x7fc00000); /* NaN: an op without a case here */
  }
}

template <int OP, typename T> __global__ void unary_kernel(const T *in, T *out, int64_t n, activation a) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = from_f32<T>(unary_op<OP>(to_f32(in[i]), a)); }
}

template <int OP, typename T> tf_status unary_run(const tf_cuda_args *args) {
  const int64_t n = args->outputs[0].count;
  if (n == 0)
    return NULL;
  unary_kernel<OP, T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
      (const T *)args->inputs[0].data, (T *)args->outputs[0].data, n, activation_of(args->attrs));
  return launch_status();
}

/* ---- activation gradients: dx = f(v, dy), v = x or y as graph.h says ---- */

template <int OP> __device__ inline float grad_op(float v, float dy, activation a) {
  switch (OP) {
  case TF_OP_RELU_GRAD: return v > 0 ? dy : 0.0f;
  case TF_OP_GELU_GRAD: return dy * gelu_derivative(v, a.approximate);
  case TF_OP_SILU_GRAD: {
    float s = sigmoid_of(v);
    return dy * (s * (1.0f + v * (1.0f - s)));
  }
  case TF_OP_SIGMOID_GRAD: return dy * v * (1.0f - v);
  case TF_OP_TANH_GRAD: return dy * (1.0f - v * v);
  case TF_OP_LEAKY_RELU_GRAD: return v > 0 ? dy : dy * a.slope;
  case TF_OP_CLIP_GRAD: return v > a.lo && v < a.hi ? dy : 0.0f;
  case TF_OP_ABS_GRAD: return dy * (v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f); /* sgn(NaN) = 0, as PyTorch */
  case TF_OP_ERF_GRAD: return dy * (TWO_OVER_SQRT_PI * expf(-v * v));
  default: return __int_as_float(0x7fc00000); /* NaN: an op without a case here */
  }
}

template <int OP, typename T>
__global__ void grad_kernel(const T *value, const T *upstream, T *out, int64_t n, activation a) {
  TF_CUDA_GRID_STRIDE(i, n) { out[i] = from_f32<T>(grad_op<OP>(to_f32(value[i]), to_f32(upstream[i]), a)); }
}

template <int OP, typename T> tf_status grad_run(const tf_cuda_args *args) {
  const int64_t n = args->outputs[0].count;
  if (n == 0)
    return NULL;
  grad_kernel<OP, T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
      (const T *)args->inputs[0].data, (const T *)args->inputs[1].data, (T *)args->outputs[0].data, n,
      activation_of(args->attrs));
  return launch_status();
}

/* ---- gelu_pair: y = gelu(x) and dydx = gelu'(x), the derivative gelu_grad multiplies dy by ---- */

template <typename T>
__global__ void gelu_pair_kernel(const T *in, T *out, T *derivative, int64_t n, bool approximate) {
  TF_CUDA_GRID_STRIDE(i, n) {
    const gelu_terms terms = gelu_and_derivative(to_f32(in[i]), approximate);
    out[i] = from_f32<T>(terms.value);
    derivative[i] = from_f32<T>(terms.derivative);
  }
}

tf_status gelu_pair_run(const tf_cuda_args *args) {
  const int64_t n = args->outputs[0].count;
  if (n == 0)
    return NULL;
  return with_storage(args->outputs[0].dtype, [&](auto storage) {
    using T = decltype(storage);
    gelu_pair_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(
        (const T *)args->inputs[0].data, (T *)args->outputs[0].data, (T *)args->outputs[1].data, n,
        activation_of(args->attrs).approximate);
    return launch_status();
  });
}

tf_status not_elementwise(const tf_cuda_args *args) {
  return tf_status_new(TF_ERR_INTERNAL, "cuda element-wise kernels: op %d (%s) is not an element-wise op",
                       (int)args->op, tf_op_name(args->op));
}

/* Runs op OP's kernel: its row of the op table (core/op_table.h) names one of this file's
 * launchers, which instantiates its template for OP and the storage of the step's data (output 0's
 * dtype: f32, or f16/bf16 for a half kernel, every operand of that type). */
template <int OP> tf_status run(const tf_cuda_args *args) {
  if constexpr (kLaunchers[OP] == launch_binary || kLaunchers[OP] == launch_unary ||
                kLaunchers[OP] == launch_activation_grad)
    return with_storage(args->outputs[0].dtype, [&](auto storage) {
      using T = decltype(storage);
      if constexpr (kLaunchers[OP] == launch_binary)
        return binary_run<OP, T>(args);
      else if constexpr (kLaunchers[OP] == launch_unary)
        return unary_run<OP, T>(args);
      else
        return grad_run<OP, T>(args);
    });
  else
    return not_elementwise(args);
}

/* args->op as a template argument: a case per row of the op table. */
tf_status dispatch(const tf_cuda_args *args) {
  switch (args->op) {
#define TF_CUDA_ELEMENTWISE_CASE(ID, ...)                                                                              \
  case TF_OP_##ID: return run<TF_OP_##ID>(args);
    TF_OP_TABLE(TF_CUDA_ELEMENTWISE_CASE)
#undef TF_CUDA_ELEMENTWISE_CASE
  default: return not_elementwise(args);
  }
}

} // namespace

TF_CUDA_LAUNCHER(binary) { return dispatch(args); }
TF_CUDA_LAUNCHER(unary) { return dispatch(args); }
TF_CUDA_LAUNCHER(activation_grad) { return dispatch(args); }
TF_CUDA_LAUNCHER(gelu_pair) { return gelu_pair_run(args); }

} // namespace tf_cuda
