/* Half values in the CPU kernels that read and write f16/bf16 storage themselves (the fused loss
 * head's and embedding's half kernels): one element widened to f32 exactly, or an f32 rounded to
 * the half type as the cast kernel rounds it (core/half_bits.h). */
#ifndef TIGHTFIT_KERNELS_CPU_HALF_VALUE_H
#define TIGHTFIT_KERNELS_CPU_HALF_VALUE_H

#include <stdint.h>
#include <string.h>

#include "core/half_bits.h"
#include "tightfit/types.h"

/* The value of the `half` (TF_F16 or TF_BF16) element with bits `bits`, exactly. */
static inline float tf_cpu_half_widen(tf_dtype half, uint16_t bits) {
  const uint32_t wide = half == TF_BF16 ? tf_f32_bits_from_bf16(bits) : tf_f32_bits_from_f16(bits);
  float value;
  memcpy(&value, &wide, sizeof(value));
  return value;
}

/* The bits of `value` rounded to `half` (nearest even; the cast kernel's rounding). */
static inline uint16_t tf_cpu_half_narrow(tf_dtype half, float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return half == TF_BF16 ? tf_bf16_from_f32_bits(bits) : tf_f16_from_f32_bits(bits);
}

#endif
