/* Half-precision values in tests: the bits of core/half_bits.h (the casts' own rounding) as floats. */
#ifndef TIGHTFIT_TESTS_HALF_VALUES_H
#define TIGHTFIT_TESTS_HALF_VALUES_H
#include <string.h>

#include "core/half_bits.h"
#include "tightfit/types.h"

/* The f32 whose bits these are. */
static inline float tf_test_bits_float(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

/* The f32 value of f16/bf16 `half` (bits of `dtype`), exact. */
static inline float tf_test_half_value(tf_dtype dtype, uint16_t half) {
  return tf_test_bits_float(dtype == TF_F16 ? tf_f32_bits_from_f16(half) : tf_f32_bits_from_bf16(half));
}

/* v as a kernel stores it in `dtype` (f16 or bf16): to f32, then to nearest even. */
static inline uint16_t tf_test_half_bits(tf_dtype dtype, double v) {
  const float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return dtype == TF_F16 ? tf_f16_from_f32_bits(bits) : tf_bf16_from_f32_bits(bits);
}

/* v rounded to `dtype` and widened back. */
static inline float tf_test_half_round(tf_dtype dtype, double v) {
  return tf_test_half_value(dtype, tf_test_half_bits(dtype, v));
}
#endif
