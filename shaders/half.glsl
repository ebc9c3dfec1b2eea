// The f16 and bf16 conversions, integer code bit for bit those of kernels/cpu/cast.c: to f16/bf16
// rounded to nearest even, overflow to infinity, NaN to the quiet NaN of its sign (0x7E00, 0x7FC0),
// -0 kept, f16 subnormals exact; to f32 exact, a NaN quieted (payload and sign kept). No 16-bit
// arithmetic type and no float controls: the same bits on every device. Used by the casts
// (layout.comp) and by the f16/bf16 storage variants (ELEMENT_F16, ELEMENT_BF16: common.glsl), so
// an op on half data computes exactly what cast up -> the f32 op -> cast down computes.

// f32 bits -> f16 bits, round to nearest even.
uint half_from_f32(uint f) {
  uint sign = (f >> 16) & 0x8000u, magnitude = f & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)
    return sign | 0x7E00u; // NaN
  if (magnitude >= 0x477FF000u)
    return sign | 0x7C00u; // 65520 (halfway from 65504 to 2^16) and up, infinity too
  if (magnitude >= 0x38800000u) { // 2^-14 and up: normal; rebias the exponent from 127 to 15
    uint h = (magnitude >> 13) - (112u << 10), rest = magnitude & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u))
      h++; // a carry out of the mantissa bumps the exponent: still the right bits
    return sign | h;
  }
  if (magnitude <= 0x33000000u)
    return sign; // at most 2^-25, half the smallest subnormal (a tie, to the even 0)
  // Subnormal: the significand in units of 2^-24. Rounding up from 0x3FF gives 0x400, the smallest
  // normal's bits.
  uint significand = (magnitude & 0x7FFFFFu) | 0x800000u, shift = 126u - (magnitude >> 23);
  uint kept = significand >> shift, rest = significand & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
  if (rest > tie || (rest == tie && (kept & 1u) != 0u))
    kept++;
  return sign | kept;
}

// f16 bits -> f32 bits, exact.
uint f32_from_half(uint h) {
  uint sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 31u, mantissa = h & 0x3FFu;
  if (exponent == 31u)
    return sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0u ? 0x400000u : 0u);
  if (exponent != 0u)
    return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0u)
    return sign;
  int top = findMSB(mantissa); // mantissa x 2^-24 = 2^(top - 24) x (mantissa / 2^top)
  return sign | (uint(top + 103) << 23) | ((mantissa << uint(23 - top)) & 0x7FFFFFu);
}

// f32 bits -> bf16 bits (the high half), round to nearest even.
uint bf16_from_f32(uint f) {
  if ((f & 0x7FFFFFFFu) > 0x7F800000u)
    return ((f >> 16) & 0x8000u) | 0x7FC0u; // NaN
  uint h = f >> 16, rest = f & 0xFFFFu;
  if (rest > 0x8000u || (rest == 0x8000u && (h & 1u) != 0u))
    h++; // the largest finite values round up to infinity by the carry
  return h;
}

// bf16 bits -> f32 bits, exact.
uint f32_from_bf16(uint h) {
  uint f = h << 16;
  return (f & 0x7FFFFFFFu) > 0x7F800000u ? f | 0x400000u : f;
}

// Four f16 / bf16 elements (widened to uints) -> f32 bits.
uvec4 f32_from_half4(uvec4 h) {
  return uvec4(f32_from_half(h.x), f32_from_half(h.y), f32_from_half(h.z), f32_from_half(h.w));
}

uvec4 f32_from_bf16_4(uvec4 h) {
  return uvec4(f32_from_bf16(h.x), f32_from_bf16(h.y), f32_from_bf16(h.z), f32_from_bf16(h.w));
}
