/* cast between f32, f16, bf16, i32, i64 and u8, with kernels/cpu/cast.c's rules ported operation by
 * operation (bit-exact): floating values pass through double; to f16/bf16 one round-to-nearest-even
 * from the exact value (overflow to infinity, NaN to a quiet NaN of the same sign); floating to
 * integer truncates toward zero, saturates, NaN to 0; integer to integer wraps (two's complement). */
#include "core/half_bits.h"
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

__device__ inline uint16_t round_to_format(double magnitude, int mantissa_bits, int bias) {
  const uint64_t bits = (uint64_t)__double_as_longlong(magnitude);
  const int exponent = (int)(bits >> 52) - 1023;
  const int min_exponent = 1 - bias;
  if (exponent > bias)
    return (uint16_t)((2 * bias + 1) << mantissa_bits);
  if (exponent < min_exponent - mantissa_bits - 1)
    return 0;
  const uint64_t significand = (bits & ((1ull << 52) - 1)) | (1ull << 52);
  const int shift = 52 - mantissa_bits + (exponent < min_exponent ? min_exponent - exponent : 0);
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    kept++;
  if (exponent < min_exponent)
    return (uint16_t)kept;
  return (uint16_t)(((uint32_t)(exponent - min_exponent + 1) << mantissa_bits) + (uint32_t)kept -
                    (1u << mantissa_bits));
}

__device__ inline uint16_t half_from_double(double value) {
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  if (value != value)
    return sign | 0x7E00;
  return sign | round_to_format(fabs(value), 10, 15);
}

__device__ inline uint16_t bf16_from_double(double value) {
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  if (value != value)
    return sign | 0x7FC0;
  return sign | round_to_format(fabs(value), 7, 127);
}

__device__ inline double half_to_double(uint16_t h) {
  const uint64_t sign = (uint64_t)(h >> 15) << 63;
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  uint64_t bits;
  if (exponent == 0) {
    bits = (uint64_t)__double_as_longlong((double)mantissa * (1.0 / 16777216.0)) | sign;
  } else if (exponent == 31) {
    bits = sign | 0x7FF0000000000000ull | ((uint64_t)mantissa << 42);
  } else {
    bits = sign | ((uint64_t)(exponent - 15 + 1023) << 52) | ((uint64_t)mantissa << 42);
  }
  return __longlong_as_double((long long)bits);
}

__device__ inline double bf16_to_double(uint16_t h) { return (double)__uint_as_float((uint32_t)h << 16); }

__device__ inline double load_real(const void *data, tf_dtype dtype, int64_t i) {
  switch (dtype) {
  case TF_F16: return half_to_double(((const uint16_t *)data)[i]);
  case TF_BF16: return bf16_to_double(((const uint16_t *)data)[i]);
  case TF_I32: return (double)((const int32_t *)data)[i];
  case TF_I64: return (double)((const int64_t *)data)[i];
  case TF_U8: return (double)((const uint8_t *)data)[i];
  default: return (double)((const float *)data)[i];
  }
}

__device__ inline void store_real(void *data, tf_dtype dtype, int64_t i, double v) {
  switch (dtype) {
  case TF_F16: ((uint16_t *)data)[i] = half_from_double(v); break;
  case TF_BF16: ((uint16_t *)data)[i] = bf16_from_double(v); break;
  case TF_I32:
    ((int32_t *)data)[i] = v != v ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
    break;
  case TF_I64:
    ((int64_t *)data)[i] = v != v                       ? 0
                           : v >= 9223372036854775808.0 ? INT64_MAX
                           : v < -9223372036854775808.0 ? INT64_MIN
                                                        : (int64_t)v;
    break;
  case TF_U8: ((uint8_t *)data)[i] = v != v || v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)v; break;
  default: ((float *)data)[i] = (float)v; break;
  }
}

__device__ inline int64_t load_integer(const void *data, tf_dtype dtype, int64_t i) {
  switch (dtype) {
  case TF_I32: return ((const int32_t *)data)[i];
  case TF_U8: return ((const uint8_t *)data)[i];
  default: return ((const int64_t *)data)[i];
  }
}

__device__ inline void store_integer(void *data, tf_dtype dtype, int64_t i, int64_t v) {
  switch (dtype) {
  case TF_I32: ((int32_t *)data)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
  case TF_U8: ((uint8_t *)data)[i] = (uint8_t)(uint64_t)v; break;
  default: ((int64_t *)data)[i] = v; break;
  }
}

__global__ void cast_kernel(const void *x, tf_dtype from, void *y, tf_dtype to, int64_t n, bool integers) {
  TF_CUDA_GRID_STRIDE(i, n) {
    if (integers)
      store_integer(y, to, i, load_integer(x, from, i));
    else
      store_real(y, to, i, load_real(x, from, i));
  }
}

/* f32 <-> f16 / bf16 on the floats' bits (core/half_bits.h, the CPU's own functions): no NaN passes
 * through a double conversion, which the device may make canonical (sign and payload lost). */
__global__ void half_kernel(const void *x, tf_dtype from, void *y, tf_dtype to, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) {
    if (to == TF_BF16)
      ((uint16_t *)y)[i] = tf_bf16_from_f32_bits(((const uint32_t *)x)[i]);
    else if (to == TF_F16)
      ((uint16_t *)y)[i] = tf_f16_from_f32_bits(((const uint32_t *)x)[i]);
    else if (from == TF_BF16)
      ((uint32_t *)y)[i] = tf_f32_bits_from_bf16(((const uint16_t *)x)[i]);
    else
      ((uint32_t *)y)[i] = tf_f32_bits_from_f16(((const uint16_t *)x)[i]);
  }
}

bool is_integer(tf_dtype dtype) { return dtype == TF_I32 || dtype == TF_I64 || dtype == TF_U8; }

bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

} // namespace

TF_CUDA_LAUNCHER(cast) {
  const tf_cuda_tensor *x = &args->inputs[0], *y = &args->outputs[0];
  const int64_t n = y->count;
  if (n == 0)
    return NULL;
  if (x->dtype == y->dtype) {
    if (x->data == y->data)
      return NULL;
    return copy(y->data, x->data, n * element_size(y->dtype), stream_of(args));
  }
  if ((x->dtype == TF_F32 && is_half(y->dtype)) || (is_half(x->dtype) && y->dtype == TF_F32)) {
    half_kernel<<<blocks_for(n), kThreads, 0, stream_of(args)>>>(x->data, x->dtype, y->data, y->dtype, n);
    return launch_status();
  }
  cast_kernel<<<blocks_for(n), kThreads, 0, stream_of(args)>>>(x->data, x->dtype, y->data, y->dtype, n,
                                                               is_integer(x->dtype) && is_integer(y->dtype));
  return launch_status();
}

/* cast_into (param, master): the cast of master into param's own memory. */
TF_CUDA_LAUNCHER(cast_into) {
  tf_cuda_args cast = *args;
  cast.n_inputs = 1;
  cast.inputs = &args->inputs[1];
  cast.n_outputs = 1;
  cast.outputs = &args->inputs[0];
  return launch_cast(&cast);
}

} // namespace tf_cuda
