/* f32 <-> f16 / bf16 on the values' bits, for the CPU and CUDA cast kernels alike (one definition,
 * so both backends give the same bits; shaders/layout.comp is its GLSL twin). The rules are
 * kernels/cpu/cast.c's: round to nearest, ties to even, from the float's exact value; overflow to
 * infinity; a NaN becomes the quiet NaN of its sign (to f16 0x7E00, to bf16 0x7FC0) and, widened
 * to f32, keeps its payload with the quiet bit set; subnormals exact. */
#ifndef TIGHTFIT_CORE_HALF_BITS_H
#define TIGHTFIT_CORE_HALF_BITS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TF_HALF_BITS_FN static inline __host__ __device__
#else
#define TF_HALF_BITS_FN static inline
#endif

/* The bf16 bits of the float with bits `bits`. */
TF_HALF_BITS_FN uint16_t tf_bf16_from_f32_bits(uint32_t bits) {
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    return (uint16_t)(((bits >> 16) & 0x8000u) | 0x7FC0u);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16); /* a carry into the exponent reaches inf */
}

/* The f16 bits of the float with bits `bits`. */
TF_HALF_BITS_FN uint16_t tf_f16_from_f32_bits(uint32_t bits) {
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  if (magnitude > 0x7F800000u)
    return (uint16_t)(sign | 0x7E00u);
  if (magnitude >= 0x477FF000u) /* 65520 and above round to infinity */
    return (uint16_t)(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) { /* a normal f16 (2^-14 and above): rebias by 112, round at bit 13 */
    const uint32_t rebiased = magnitude - 0x38000000u;
    return (uint16_t)(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (magnitude <= 0x33000000u) /* 2^-25 and below (f32 subnormals too) round to 0 */
    return sign;
  /* an f16 subnormal: round(significand x 2^(e - 126)), a shift of 14..24 */
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u, shift = 126u - (magnitude >> 23);
  uint32_t kept = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  kept += (rest > half || (rest == half && (kept & 1u))) ? 1u : 0u;
  return (uint16_t)(sign | kept);
}

/* The float bits of f16 `h` (exact). */
TF_HALF_BITS_FN uint32_t tf_f32_bits_from_f16(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 31u, mantissa = h & 1023u;
  if (exponent == 31)
    return sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u);
  if (exponent != 0)
    return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0)
    return sign;
  uint32_t top = 9; /* a subnormal, mantissa x 2^-24: normalise on its leading bit */
  while (!(mantissa >> top))
    top--;
  return sign | ((top + 103u) << 23) | ((mantissa << (23u - top)) & 0x7FFFFFu);
}

/* The float bits of bf16 `h` (exact). */
TF_HALF_BITS_FN uint32_t tf_f32_bits_from_bf16(uint16_t h) {
  return ((uint32_t)h << 16) | ((h & 0x7FFFu) > 0x7F80u ? 0x400000u : 0u);
}

/* count floats at `from` (any alignment) rounded to bf16 (to_bf16) or f16 bits into `to`: host
 * staging (initial values, data read as float32 for a half input). */
static inline void tf_half_from_f32_array(const void *from, uint16_t *to, int64_t count, int to_bf16) {
  for (int64_t i = 0; i < count; i++) {
    uint32_t bits;
    memcpy(&bits, (const char *)from + 4 * i, 4);
    to[i] = to_bf16 ? tf_bf16_from_f32_bits(bits) : tf_f16_from_f32_bits(bits);
  }
}

/* count bf16 (from_bf16) or f16 values at `from` (any alignment) widened to float bits into `to`. */
static inline void tf_f32_from_half_array(const void *from, uint32_t *to, int64_t count, int from_bf16) {
  for (int64_t i = 0; i < count; i++) {
    uint16_t h;
    memcpy(&h, (const char *)from + 2 * i, 2);
    to[i] = from_bf16 ? tf_f32_bits_from_bf16(h) : tf_f32_bits_from_f16(h);
  }
}

#endif
