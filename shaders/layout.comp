#version 450
// Moving elements without computing (kernels/cpu/layout.c): transpose, expand, slice, concat (one
// dispatch per input) and slice_grad's placement are all dst[dst_base + sum(i_d dst_stride_d)] =
// src[src_base + sum(i_d src_stride_d)] over an iteration shape of at most 9 axes (a tensor's 8, and
// the words of an 8-byte element; 128 bytes of push constants, the least a device has). Elements are
// 32-bit words: the host describes an 8-byte element as an extra innermost axis of 2 words, so
// any dtype of 4 or 8 bytes moves bit for bit. cast between f32 and i32 is the same walk with a
// conversion (kernels/cpu/cast.c: truncation toward zero, saturated, NaN to 0; to f32 rounded).
//
// cast between f32 and f16 or bf16 (convert 3..6) walks the 16-bit side by 32-bit words, each
// invocation a pair of elements packed in one uint, so no 16-bit storage feature is needed. The
// conversions are integer code, bit for bit those of kernels/cpu/cast.c: to f16/bf16 rounded to
// nearest even, overflow to infinity, NaN to the quiet NaN of its sign (0x7E00, 0x7FC0), -0 kept,
// f16 subnormals exact; to f32 exact, a NaN quieted (payload and sign kept), as the CPU's pass
// through double does. With an odd count the last word holds one element and 2 bytes past the
// buffer: the cast down writes them as 0. They belong to no other buffer: every buffer starts at a
// multiple of the plan's alignment (4 or more, which the lowering checks), and the binding's range
// is the buffer's size rounded up to 4 bytes (vk_record.c).
//
// With -DLAYOUT16 (the layout16 module, used where the device has storageBuffer16BitAccess) the
// walk moves 16-bit elements (f16, bf16) one per index: the layout ops of half-precision data.
// Only the copy (convert 0) is compiled in. With -DLAYOUT8 (layout8, where the device has
// storageBuffer8BitAccess) the same walk moves bytes (u8: a bool mask), one per index.
//
// cast from i64 to f32 (convert 7) reads each element's two words and writes one.
//
// cast from f32 to i64 (convert 10) writes each element's two words, as kernels/cpu/cast.c:
// truncation toward zero, saturated to int64's range, NaN to 0. The magnitude, split at 2^32, gives
// two whole numbers an f32 holds exactly (an f32 of 2^32 or more is a multiple of 2^9); a negative
// value is then negated in two's complement on the words.
//
// cast from i32 to i64 (convert 11) sign-extends each element to two words; from i64 to i32
// (convert 12) keeps the low word (two's-complement wrap-around, as kernels/cpu/cast.c).
//
// cast between u8 and f32 (convert 8: u8 -> f32, 9: f32 -> u8) walks the u8 side by 32-bit words,
// four elements to a word (byte k of word i is element 4i + k), so no 8-bit storage feature is
// needed; to u8 an invocation writes a whole word, the bytes past the count as 0 (as the cast down
// to 16 bits above). f32 to u8 as kernels/cpu/cast.c: truncation toward zero, saturated to
// [0, 255], NaN to 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
#if defined(LAYOUT8)
layout(std430, set = 0, binding = 0) readonly buffer Src { uint8_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint8_t dst[]; };
#elif defined(LAYOUT16)
layout(std430, set = 0, binding = 0) readonly buffer Src { uint16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint16_t dst[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
#endif

layout(push_constant) uniform Push {
  uint count;
  uint rank;
  uint src_base;
  uint dst_base;
  uint shape[9];
  uint src_stride[9];
  uint dst_stride[9];
  uint convert;    // 0: copy, 1: f32 -> i32, 2: i32 -> f32, 3: f32 -> f16, 4: f16 -> f32, 5: f32 -> bf16,
                   // 6: bf16 -> f32, 7: i64 -> f32, 8: u8 -> f32, 9: f32 -> u8, 10: f32 -> i64,
                   // 11: i32 -> i64, 12: i64 -> i32, 13: u8 -> i32, 14: u8 -> i64, 15: i32 -> u8,
                   // 16: i64 -> u8 (3..16: count is in elements, contiguous, bases and strides unused)
} pc;

const uint CONVERT_TO_F16 = 3u, CONVERT_FROM_F16 = 4u, CONVERT_TO_BF16 = 5u, CONVERT_FROM_BF16 = 6u;
const uint CONVERT_FROM_I64 = 7u, CONVERT_FROM_U8 = 8u, CONVERT_TO_U8 = 9u, CONVERT_TO_I64 = 10u;
const uint CONVERT_I32_TO_I64 = 11u, CONVERT_I64_TO_I32 = 12u;
const uint CONVERT_U8_TO_I32 = 13u, CONVERT_U8_TO_I64 = 14u, CONVERT_I32_TO_U8 = 15u, CONVERT_I64_TO_U8 = 16u;

#if !defined(LAYOUT16) && !defined(LAYOUT8)
// Element pairs: word i of the 16-bit side holds elements 2i (low half) and 2i + 1 (high half).
void cast_pairs() {
  uint words = (pc.count + 1u) / 2u;
  bool down = pc.convert == CONVERT_TO_F16 || pc.convert == CONVERT_TO_BF16;
  bool f16 = pc.convert == CONVERT_TO_F16 || pc.convert == CONVERT_FROM_F16;
  for (uint i = gl_GlobalInvocationID.x; i < words; i += grid_size()) {
    bool pair = 2u * i + 1u < pc.count;
    if (down) {
      uint low = src[2u * i], high = pair ? src[2u * i + 1u] : 0u;
      low = f16 ? half_from_f32(low) : bf16_from_f32(low);
      high = pair ? (f16 ? half_from_f32(high) : bf16_from_f32(high)) : 0u;
      dst[i] = low | (high << 16);
    } else {
      uint word = src[i];
      dst[2u * i] = f16 ? f32_from_half(word & 0xFFFFu) : f32_from_bf16(word & 0xFFFFu);
      if (pair)
        dst[2u * i + 1u] = f16 ? f32_from_half(word >> 16) : f32_from_bf16(word >> 16);
    }
  }
}

// ---- i64 -> f32 as kernels/cpu/cast.c does it: through double, so rounded to nearest even twice,
// to 53 significant bits and then to 24, in integer code on the magnitude (v.x the low word, v.y
// the high). Used for integer data (a padding mask) that an f32 op reads.

uvec2 u64_shr(uvec2 v, uint s) {
  if (s == 0u)
    return v;
  return s < 32u ? uvec2((v.x >> s) | (v.y << (32u - s)), v.y >> s) : uvec2(v.y >> (s - 32u), 0u);
}

uvec2 u64_shl(uvec2 v, uint s) {
  if (s == 0u)
    return v;
  return s < 32u ? uvec2(v.x << s, (v.y << s) | (v.x >> (32u - s))) : uvec2(0u, v.x << (s - 32u));
}

int u64_msb(uvec2 v) { return v.y != 0u ? 32 + findMSB(v.y) : findMSB(v.x); }

// v rounded to `keep` significant bits, nearest even (v < 2^63, or exactly 2^63).
uvec2 u64_round(uvec2 v, int keep) {
  int top = u64_msb(v);
  if (top < keep)
    return v;
  uint shift = uint(top + 1 - keep);
  uvec2 q = u64_shr(v, shift), kept = u64_shl(q, shift);
  uvec2 rest = uvec2(v.x - kept.x, v.y - kept.y - (v.x < kept.x ? 1u : 0u));
  uvec2 half_unit = u64_shl(uvec2(1u, 0u), shift - 1u);
  bool above = rest.y > half_unit.y || (rest.y == half_unit.y && rest.x > half_unit.x);
  bool tie = rest == half_unit;
  if (above || (tie && (q.x & 1u) == 1u))
    q = uvec2(q.x + 1u, q.y + (q.x == 0xFFFFFFFFu ? 1u : 0u));
  return u64_shl(q, shift);
}

uint f32_from_i64(uint low, uint high) {
  bool negative = (high & 0x80000000u) != 0u;
  uvec2 v = uvec2(low, high);
  if (negative) // two's-complement magnitude (2^63 for the most negative value)
    v = uvec2(~low + 1u, ~high + (low == 0u ? 1u : 0u));
  if (v == uvec2(0u))
    return 0u;
  v = u64_round(u64_round(v, 53), 24);
  int top = u64_msb(v);
  uint mantissa = top >= 23 ? u64_shr(v, uint(top - 23)).x : v.x << uint(23 - top);
  return (negative ? 0x80000000u : 0u) | (uint(top + 127) << 23) | (mantissa & 0x7FFFFFu);
}

void cast_from_i64() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size())
    dst[i] = f32_from_i64(src[2u * i], src[2u * i + 1u]);
}

void cast_to_i64() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    float v = uintBitsToFloat(src[i]);
    uint low = 0u, high = 0u;
    if (v >= 9223372036854775808.0) {
      low = 0xffffffffu;
      high = 0x7fffffffu;
    } else if (v < -9223372036854775808.0) {
      high = 0x80000000u;
    } else if (!isnan(v)) { /* |trunc(v)| split at 2^32, then negated in two's complement */
      float t = trunc(v), m = abs(t), upper = floor(m / 4294967296.0);
      low = uint(m - upper * 4294967296.0);
      high = uint(upper);
      if (t < 0.0) {
        low = ~low + 1u;
        high = ~high + (low == 0u ? 1u : 0u);
      }
    }
    dst[2u * i] = low;
    dst[2u * i + 1u] = high;
  }
}

void cast_integers() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    if (pc.convert == CONVERT_I64_TO_I32) {
      dst[i] = src[2u * i];
    } else {
      dst[2u * i] = src[i];
      dst[2u * i + 1u] = int(src[i]) < 0 ? 0xffffffffu : 0u;
    }
  }
}

uint u8_of(float v) { return isnan(v) || v <= 0.0 ? 0u : v >= 255.0 ? 255u : uint(v); }

void cast_bytes() {
  if (pc.convert == CONVERT_FROM_U8) {
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size())
      dst[i] = floatBitsToUint(float((src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu));
    return;
  }
  uint words = (pc.count + 3u) / 4u;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += grid_size()) {
    uint word = 0u;
    for (uint k = 0u; k < 4u && 4u * w + k < pc.count; k++)
      word |= u8_of(uintBitsToFloat(src[4u * w + k])) << (8u * k);
    dst[w] = word;
  }
}

// Between bytes and integers as kernels/cpu/cast.c casts them: a byte widened, an integer's low byte
// kept (C's conversion to uint8_t).
void cast_integer_bytes() {
  if (pc.convert == CONVERT_U8_TO_I32 || pc.convert == CONVERT_U8_TO_I64) {
    bool wide = pc.convert == CONVERT_U8_TO_I64;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
      uint b = (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu;
      if (wide) {
        dst[2u * i] = b;
        dst[2u * i + 1u] = 0u;
      } else {
        dst[i] = b;
      }
    }
    return;
  }
  uint step = pc.convert == CONVERT_I64_TO_U8 ? 2u : 1u; // an i64's low word comes first
  uint words = (pc.count + 3u) / 4u;
  for (uint w = gl_GlobalInvocationID.x; w < words; w += grid_size()) {
    uint word = 0u;
    for (uint k = 0u; k < 4u && 4u * w + k < pc.count; k++)
      word |= (src[step * (4u * w + k)] & 0xffu) << (8u * k);
    dst[w] = word;
  }
}

uint converted(uint word) {
  if (pc.convert == 1u) {
    float v = uintBitsToFloat(word);
    int r = isnan(v) ? 0 : v >= 2147483648.0 ? 2147483647 : v <= -2147483648.0 ? int(0x80000000u) : int(v);
    return uint(r);
  }
  if (pc.convert == 2u)
    return floatBitsToUint(float(int(word)));
  return word;
}

#endif

void gather() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    uint rest = i, s = pc.src_base, d = pc.dst_base;
    for (int axis = int(pc.rank) - 1; axis >= 0; axis--) {
      uint index = rest % pc.shape[axis];
      rest /= pc.shape[axis];
      s += index * pc.src_stride[axis];
      d += index * pc.dst_stride[axis];
    }
#if defined(LAYOUT16) || defined(LAYOUT8)
    dst[d] = src[s];
#else
    dst[d] = converted(src[s]);
#endif
  }
}

void main() {
#if defined(LAYOUT16) || defined(LAYOUT8)
  gather();
#else
  if (pc.convert == CONVERT_FROM_I64)
    cast_from_i64();
  else if (pc.convert == CONVERT_TO_I64)
    cast_to_i64();
  else if (pc.convert == CONVERT_I32_TO_I64 || pc.convert == CONVERT_I64_TO_I32)
    cast_integers();
  else if (pc.convert == CONVERT_FROM_U8 || pc.convert == CONVERT_TO_U8)
    cast_bytes();
  else if (pc.convert >= CONVERT_U8_TO_I32)
    cast_integer_bytes();
  else if (pc.convert >= CONVERT_TO_F16)
    cast_pairs();
  else
    gather();
#endif
}
