/* cast between the storage dtypes f32, f16, bf16, i32, i64 and u8.
 *
 * An "f32" tensor holds the compute type: float in the f32 build and, in the f64 build, double
 * (the reference build reads and writes f32 tensors as double buffers, like every other kernel;
 * f16, bf16 and the integer dtypes are stored as declared in both builds).
 *
 * Rules:
 * - to f16 and bf16: IEEE round to nearest, ties to even, from the exact value (one rounding, also
 *   from double); overflow gives infinity, NaN a quiet NaN of the same sign.
 * - floating to integer: truncation toward zero (as C and PyTorch do), saturated to the target's
 *   range, NaN to 0 (C leaves out-of-range conversions undefined; PyTorch's results there are
 *   platform-dependent).
 * - integer to integer: two's-complement wrap-around (i64 -> i32, i32/i64 -> u8), as in PyTorch.
 * - integer to floating: rounded to nearest; from i64 through double, so magnitudes above 2^53 can
 *   round twice.
 * Elements move through a small stack buffer, as double or as int64, one block at a time. */
#include <string.h>

#include "core/half_bits.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"

#define BLOCK 256

/* ---- 16-bit floats ---- */

/* Rounds a finite magnitude to the binary format with `mantissa_bits` stored mantissa bits and
 * exponent bias `bias`, to nearest even; returns the format's bits without the sign. */
static uint16_t round_to_format(double magnitude, int mantissa_bits, int bias) {
  uint64_t bits;
  memcpy(&bits, &magnitude, sizeof(bits));
  const int exponent = (int)(bits >> 52) - 1023; // double subnormals (-1023) lie far below either format
  const int min_exponent = 1 - bias;
  if (exponent > bias)
    return (uint16_t)((2 * bias + 1) << mantissa_bits); // infinity
  if (exponent < min_exponent - mantissa_bits - 1)
    return 0; // below half the smallest subnormal (exactly half rounds to even: 0 too)
  const uint64_t significand = (bits & ((1ull << 52) - 1)) | (1ull << 52);
  const int shift = 52 - mantissa_bits + (exponent < min_exponent ? min_exponent - exponent : 0);
  uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    kept++;
  if (exponent < min_exponent)
    return (uint16_t)kept; // subnormal; rounding up to the smallest normal gives its bits too
  // The implicit leading bit is dropped; a carry out of the mantissa bumps the exponent (to
  // infinity at the top), which is exactly the right result.
  return (uint16_t)(((uint32_t)(exponent - min_exponent + 1) << mantissa_bits) + (uint32_t)kept -
                    (1u << mantissa_bits));
}

static uint16_t half_from_double(double value) {
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  if (value != value)
    return sign | 0x7E00;
  return sign | round_to_format(fabs(value), 10, 15);
}

static uint16_t bf16_from_double(double value) {
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  if (value != value)
    return sign | 0x7FC0;
  return sign | round_to_format(fabs(value), 7, 127);
}

static double half_to_double(uint16_t h) {
  const uint64_t sign = (uint64_t)(h >> 15) << 63;
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  uint64_t bits;
  if (exponent == 0) {
    const double magnitude = (double)mantissa * (1.0 / 16777216.0); // exact: mantissa x 2^-24
    memcpy(&bits, &magnitude, sizeof(bits));
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7FF0000000000000ull | ((uint64_t)mantissa << 42);
  } else {
    bits = sign | ((uint64_t)(exponent - 15 + 1023) << 52) | ((uint64_t)mantissa << 42);
  }
  double value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

static double bf16_to_double(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float value;
  memcpy(&value, &bits, sizeof(value));
  return (double)value;
}

/* ---- loads and stores of one block ---- */

static void load_reals(const tf_cpu_tensor *t, int64_t begin, int64_t n, double *out) {
  switch (t->dtype) {
  case TF_F16:
    for (int64_t i = 0; i < n; i++)
      out[i] = half_to_double(((const uint16_t *)t->data)[begin + i]);
    break;
  case TF_BF16:
    for (int64_t i = 0; i < n; i++)
      out[i] = bf16_to_double(((const uint16_t *)t->data)[begin + i]);
    break;
  case TF_I32:
    for (int64_t i = 0; i < n; i++)
      out[i] = (double)((const int32_t *)t->data)[begin + i];
    break;
  case TF_I64:
    for (int64_t i = 0; i < n; i++)
      out[i] = (double)((const int64_t *)t->data)[begin + i];
    break;
  case TF_U8:
    for (int64_t i = 0; i < n; i++)
      out[i] = (double)((const uint8_t *)t->data)[begin + i];
    break;
  default:
    for (int64_t i = 0; i < n; i++)
      out[i] = (double)((const real *)t->data)[begin + i];
    break;
  }
}

static int64_t to_i64(double v) {
  if (v != v)
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v < -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

static int32_t to_i32(double v) {
  if (v != v)
    return 0;
  if (v >= 2147483647.0)
    return INT32_MAX;
  if (v <= -2147483648.0)
    return INT32_MIN;
  return (int32_t)v;
}

static uint8_t to_u8(double v) {
  if (v != v || v <= 0.0)
    return 0;
  return v >= 255.0 ? 255 : (uint8_t)v;
}

static void store_reals(const tf_cpu_tensor *t, int64_t begin, int64_t n, const double *in) {
  switch (t->dtype) {
  case TF_F16:
    for (int64_t i = 0; i < n; i++)
      ((uint16_t *)t->data)[begin + i] = half_from_double(in[i]);
    break;
  case TF_BF16:
    for (int64_t i = 0; i < n; i++)
      ((uint16_t *)t->data)[begin + i] = bf16_from_double(in[i]);
    break;
  case TF_I32:
    for (int64_t i = 0; i < n; i++)
      ((int32_t *)t->data)[begin + i] = to_i32(in[i]);
    break;
  case TF_I64:
    for (int64_t i = 0; i < n; i++)
      ((int64_t *)t->data)[begin + i] = to_i64(in[i]);
    break;
  case TF_U8:
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)t->data)[begin + i] = to_u8(in[i]);
    break;
  default:
    for (int64_t i = 0; i < n; i++)
      ((real *)t->data)[begin + i] = (real)in[i];
    break;
  }
}

static void load_integers(const tf_cpu_tensor *t, int64_t begin, int64_t n, int64_t *out) {
  switch (t->dtype) {
  case TF_I32:
    for (int64_t i = 0; i < n; i++)
      out[i] = ((const int32_t *)t->data)[begin + i];
    break;
  case TF_U8:
    for (int64_t i = 0; i < n; i++)
      out[i] = ((const uint8_t *)t->data)[begin + i];
    break;
  default:
    for (int64_t i = 0; i < n; i++)
      out[i] = ((const int64_t *)t->data)[begin + i];
    break;
  }
}

static void store_integers(const tf_cpu_tensor *t, int64_t begin, int64_t n, const int64_t *in) {
  // Through uint64: the wrap-around is defined for unsigned types and then fits the target.
  switch (t->dtype) {
  case TF_I32:
    for (int64_t i = 0; i < n; i++) {
      const uint32_t low = (uint32_t)(uint64_t)in[i];
      int32_t value;
      memcpy(&value, &low, sizeof(value));
      ((int32_t *)t->data)[begin + i] = value;
    }
    break;
  case TF_U8:
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)t->data)[begin + i] = (uint8_t)(uint64_t)in[i];
    break;
  default:
    for (int64_t i = 0; i < n; i++)
      ((int64_t *)t->data)[begin + i] = in[i];
    break;
  }
}

/* The f32 <-> f16 / bf16 pairs on the floats' bits (core/half_bits.h, which the CUDA kernel shares;
 * integer operations the compiler vectorises), bit for bit what the block path below gives: false
 * for every other pair, and in the f64 build, where "f32" tensors hold doubles. */
static bool cast_half_fast(const tf_cpu_args *args) {
#ifdef TF_REAL_F64
  (void)args;
  return false;
#else
  const tf_cpu_tensor *x = &args->inputs[0], *y = &args->outputs[0];
  const int64_t n = y->count;
  const int team = tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK);
  if (x->dtype == TF_F32 && (y->dtype == TF_BF16 || y->dtype == TF_F16)) {
    const uint32_t *in = x->data; /* the floats' bits */
    uint16_t *out = y->data;
    if (y->dtype == TF_BF16)
      TF_CPU_PARALLEL_FOR(
          team, for (int64_t i = 0; i < n; i++) { out[i] = tf_bf16_from_f32_bits(in[i]); });
    else
      TF_CPU_PARALLEL_FOR(
          team, for (int64_t i = 0; i < n; i++) { out[i] = tf_f16_from_f32_bits(in[i]); });
    return true;
  }
  if (y->dtype == TF_F32 && (x->dtype == TF_BF16 || x->dtype == TF_F16)) {
    const uint16_t *in = x->data;
    uint32_t *out = y->data; /* the floats' bits */
    if (x->dtype == TF_BF16)
      TF_CPU_PARALLEL_FOR(
          team, for (int64_t i = 0; i < n; i++) { out[i] = tf_f32_bits_from_bf16(in[i]); });
    else
      TF_CPU_PARALLEL_FOR(
          team, for (int64_t i = 0; i < n; i++) { out[i] = tf_f32_bits_from_f16(in[i]); });
    return true;
  }
  return false;
#endif
}

void TF_REAL_NAME(tf_cpu_cast)(const tf_cpu_args *args) {
  const tf_cpu_tensor *x = &args->inputs[0], *y = &args->outputs[0];
  const int64_t n = y->count;
  if (x->dtype == y->dtype) {
    if (x->data != y->data)
      memcpy(y->data, x->data, (size_t)(n * tf_cpu_element_size(y)));
    return;
  }
  if (cast_half_fast(args))
    return;
  const bool integers = tf_cpu_is_integer(x->dtype) && tf_cpu_is_integer(y->dtype);
  const int64_t blocks = (n + BLOCK - 1) / BLOCK;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK), for (int64_t b = 0; b < blocks; b++) {
        const int64_t begin = b * BLOCK, count = n - begin < BLOCK ? n - begin : BLOCK;
        if (integers) {
          int64_t buffer[BLOCK];
          load_integers(x, begin, count, buffer);
          store_integers(y, begin, count, buffer);
        } else {
          double buffer[BLOCK];
          load_reals(x, begin, count, buffer);
          store_reals(y, begin, count, buffer);
        }
      });
}

/* cast_into (param, master): the cast of master into param's own memory. */
void TF_REAL_NAME(tf_cpu_cast_into)(const tf_cpu_args *args) {
  tf_cpu_args cast = *args;
  cast.n_inputs = 1;
  cast.inputs = &args->inputs[1];
  cast.n_outputs = 1;
  cast.outputs = &args->inputs[0];
  TF_REAL_NAME(tf_cpu_cast)(&cast);
}
