/* cast on raw storage: IEEE half and bfloat16 rounding (to nearest, ties to even; overflow,
 * subnormals, NaN), exact round trips of every 16-bit pattern, saturating float -> integer, wrapping
 * integer -> integer, and single rounding from double in the f64 build. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "kernels/cpu/list.h"

static void cast(bool f64, tf_dtype from, tf_dtype to, const void *in, void *out, int64_t n) {
  tf_cpu_tensor x = {(void *)in, from, 1, {n}, n}, y = {out, to, 1, {n}, n};
  tf_attrs attrs = th_no_attrs();
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = to;
  tf_cpu_args args = {.op = TF_OP_CAST,
                      .attrs = &attrs,
                      .n_inputs = 1,
                      .inputs = &x,
                      .n_outputs = 1,
                      .outputs = &y,
                      .context = &th_context};
  (f64 ? tf_cpu_cast_f64 : tf_cpu_cast_f32)(&args);
}

typedef struct float_case {
  double value;
  uint16_t half, bf16;
} float_case;

static void check_16_bit(tf_test_counts *counts) {
  static const float_case cases[] = {
      {0.0, 0x0000, 0x0000},
      {-0.0, 0x8000, 0x8000},
      {1.0, 0x3C00, 0x3F80},
      {1.0 + 0x1p-11, 0x3C00, 0x3F80},     // half tie: to even (down)
      {1.0 + 3 * 0x1p-11, 0x3C02, 0x3F80}, // half tie: to even (up)
      {1.0 + 0x1p-8, 0x3C04, 0x3F80},      // bf16 tie: to even (down)
      {1.0 + 3 * 0x1p-8, 0x3C0C, 0x3F82},  // bf16 tie: to even (up)
      {65504, 0x7BFF, 0x4780},
      {65519.99, 0x7BFF, 0x4780},
      {65520, 0x7C00, 0x4780}, // half overflow: rounds to infinity
      {-1e6, 0xFC00, 0xC974},
      {0x1p-24, 0x0001, 0x3380}, // smallest half subnormal
      {0x1p-25, 0x0000, 0x3300}, // exactly half of it: ties to even, 0
      {3 * 0x1p-26, 0x0001, 0x3340},
      {0x1p-14 - 0x1p-25, 0x0400, 0x3880},     // rounds up into the smallest normal
      {3.4028234663852886e38, 0x7C00, 0x7F80}, // FLT_MAX: bf16 rounds to infinity
      {3.3895313892515355e38, 0x7C00, 0x7F7F}, // largest bf16
      {0x1p-133, 0x0000, 0x0001},              // smallest bf16 subnormal
      {INFINITY, 0x7C00, 0x7F80},
      {-INFINITY, 0xFC00, 0xFF80},
  };
  const int n = (int)(sizeof(cases) / sizeof(cases[0]));
  float in32[32];
  double in64[32];
  uint16_t half[32], bf16[32], half64[32], bf64[32];
  for (int i = 0; i < n; i++) {
    in32[i] = (float)cases[i].value;
    in64[i] = cases[i].value;
  }
  cast(false, TF_F32, TF_F16, in32, half, n);
  cast(false, TF_F32, TF_BF16, in32, bf16, n);
  cast(true, TF_F32, TF_F16, in64, half64, n);
  cast(true, TF_F32, TF_BF16, in64, bf64, n);
  for (int i = 0; i < n; i++) {
    // Values that are not floats are checked in the f64 build only.
    bool representable = (double)in32[i] == cases[i].value || isinf(cases[i].value);
    CHECK(counts, half64[i] == cases[i].half, "%.17g -> f16 (f64): %04x, expected %04x", cases[i].value, half64[i],
          cases[i].half);
    CHECK(counts, bf64[i] == cases[i].bf16, "%.17g -> bf16 (f64): %04x, expected %04x", cases[i].value, bf64[i],
          cases[i].bf16);
    if (representable) {
      CHECK(counts, half[i] == cases[i].half, "%.17g -> f16: %04x, expected %04x", cases[i].value, half[i],
            cases[i].half);
      CHECK(counts, bf16[i] == cases[i].bf16, "%.17g -> bf16: %04x, expected %04x", cases[i].value, bf16[i],
            cases[i].bf16);
    }
  }
  float nan_in[2] = {NAN, -NAN};
  uint16_t nan_half[2], nan_bf16[2];
  cast(false, TF_F32, TF_F16, nan_in, nan_half, 2);
  cast(false, TF_F32, TF_BF16, nan_in, nan_bf16, 2);
  CHECK(counts, (nan_half[0] & 0x7FFF) > 0x7C00 && (nan_half[1] & 0x7FFF) > 0x7C00, "NaN -> f16 is not NaN");
  CHECK(counts, (nan_bf16[0] & 0x7FFF) > 0x7F80 && (nan_bf16[1] & 0x7FFF) > 0x7F80, "NaN -> bf16 is not NaN");
  // Single rounding from double: 1 + 2^-11 + 2^-40 is above the tie, though (float) of it is the tie.
  double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  uint16_t bits;
  cast(true, TF_F32, TF_F16, &above_tie, &bits, 1);
  CHECK(counts, bits == 0x3C01, "1 + 2^-11 + 2^-40 -> f16 (f64 build): %04x, expected 3c01 (one rounding)", bits);
  printf("f16/bf16 rounding: %d values (ties, overflow, subnormals, infinities) in both builds, NaN, single rounding "
         "from double\n",
         n);
}

static void check_round_trips(tf_test_counts *counts) {
  static uint16_t patterns[65536], back[65536];
  static float wide[65536];
  static const tf_dtype formats[2] = {TF_F16, TF_BF16};
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 65536; i++)
      patterns[i] = (uint16_t)i;
    cast(false, formats[k], TF_F32, patterns, wide, 65536);
    cast(false, TF_F32, formats[k], wide, back, 65536);
    int wrong = 0;
    for (int i = 0; i < 65536; i++) {
      bool is_nan = isnan(wide[i]);
      bool pattern_nan = k == 0 ? (i & 0x7FFF) > 0x7C00 : (i & 0x7FFF) > 0x7F80;
      if (is_nan != pattern_nan || (!is_nan && back[i] != patterns[i]))
        wrong++;
    }
    printf("%s -> f32 -> %s: %d of 65536 patterns differ\n", tf_dtype_name(formats[k]), tf_dtype_name(formats[k]),
           wrong);
    CHECK(counts, wrong == 0, "%s round trip: %d patterns wrong", tf_dtype_name(formats[k]), wrong);
  }
}

static void check_integers(tf_test_counts *counts) {
  const float floats[] = {-2.7f, 2.7f, 3e9f, -3e9f, NAN, 254.9f, 300.0f, -5.0f, 1e20f, -1e20f};
  const int32_t to_i32[] = {-2, 2, INT32_MAX, INT32_MIN, 0, 254, 300, -5, INT32_MAX, INT32_MIN};
  const int64_t to_i64[] = {-2, 2, 3000000000LL, -3000000000LL, 0, 254, 300, -5, INT64_MAX, INT64_MIN};
  const uint8_t to_u8[] = {0, 2, 255, 0, 0, 254, 255, 0, 255, 0};
  int32_t i32[10];
  int64_t i64[10];
  uint8_t u8[10];
  cast(false, TF_F32, TF_I32, floats, i32, 10);
  cast(false, TF_F32, TF_I64, floats, i64, 10);
  cast(false, TF_F32, TF_U8, floats, u8, 10);
  CHECK(counts, memcmp(i32, to_i32, sizeof(i32)) == 0, "f32 -> i32 (truncate, saturate, NaN -> 0)");
  CHECK(counts, memcmp(i64, to_i64, sizeof(i64)) == 0, "f32 -> i64 (truncate, saturate, NaN -> 0)");
  CHECK(counts, memcmp(u8, to_u8, sizeof(u8)) == 0, "f32 -> u8 (truncate, saturate, NaN -> 0)");
  const int64_t wide[] = {((int64_t)1 << 32) + 5, -1, 257, INT64_MIN};
  const int32_t narrow[] = {5, -1, 257, 0};
  const uint8_t bytes[] = {5, 255, 1, 0};
  cast(false, TF_I64, TF_I32, wide, i32, 4);
  cast(false, TF_I64, TF_U8, wide, u8, 4);
  CHECK(counts, memcmp(i32, narrow, sizeof(narrow)) == 0, "i64 -> i32 wraps");
  CHECK(counts, memcmp(u8, bytes, sizeof(bytes)) == 0, "i64 -> u8 wraps");
  const uint8_t small[] = {0, 7, 255};
  float f[3];
  double d[3];
  cast(false, TF_U8, TF_F32, small, f, 3);
  cast(true, TF_U8, TF_F32, small, d, 3);
  CHECK(counts, f[0] == 0 && f[1] == 7 && f[2] == 255 && d[2] == 255, "u8 -> f32");
  float same[3] = {1, 2, 3}, copy[3];
  cast(false, TF_F32, TF_F32, same, copy, 3);
  CHECK(counts, memcmp(same, copy, sizeof(same)) == 0, "f32 -> f32 copies");
  printf("integers: f32 -> i32/i64/u8 truncate and saturate (NaN -> 0), i64 -> i32/u8 wrap, u8 -> f32 exact\n");
}

/* The f32 build converts f32 <-> f16/bf16 on float bits; the f64 build through double, rounding
 * each float's exact value once. They must agree bit for bit: every 16-bit value to f32, and to
 * f16/bf16 every float whose bits are a multiple of 61 plus the ends of each format's range. */
static void check_fast_path(tf_test_counts *counts) {
  static uint16_t patterns[65536];
  static float wide[65536];
  static double reference[65536];
  static const tf_dtype formats[2] = {TF_F16, TF_BF16};
  for (int i = 0; i < 65536; i++)
    patterns[i] = (uint16_t)i;
  for (int k = 0; k < 2; k++) {
    cast(false, formats[k], TF_F32, patterns, wide, 65536);
    cast(true, formats[k], TF_F32, patterns, reference, 65536);
    int wrong = 0;
    for (int i = 0; i < 65536; i++) {
      const float narrowed = (float)reference[i];
      wrong += memcmp(&narrowed, &wide[i], sizeof(float)) != 0;
    }
    CHECK(counts, wrong == 0, "%s -> f32: %d of 65536 values differ from the f64 build's", tf_dtype_name(formats[k]),
          wrong);
    printf("%s -> f32 on float bits: %d of 65536 values differ from the f64 build's\n", tf_dtype_name(formats[k]),
           wrong);
  }
  enum { BLOCK = 4096 };
  static float floats[BLOCK];
  static double doubles[BLOCK];
  static uint16_t fast[2][BLOCK], slow[2][BLOCK];
  int64_t checked = 0, wrong[2] = {0, 0};
  for (uint64_t bits = 0; bits < ((uint64_t)1 << 32);) {
    int n = 0;
    for (; n < BLOCK && bits < ((uint64_t)1 << 32); n++, bits += 61) {
      uint32_t b = (uint32_t)bits;
      memcpy(&floats[n], &b, sizeof(float));
      doubles[n] = (double)floats[n];
    }
    for (int k = 0; k < 2; k++) {
      cast(false, TF_F32, formats[k], floats, fast[k], n);
      cast(true, TF_F32, formats[k], doubles, slow[k], n);
      for (int i = 0; i < n; i++)
        wrong[k] += fast[k][i] != slow[k][i];
    }
    checked += n;
  }
  for (int k = 0; k < 2; k++) {
    CHECK(counts, wrong[k] == 0, "f32 -> %s: %lld of %lld floats differ from the f64 build's",
          tf_dtype_name(formats[k]), (long long)wrong[k], (long long)checked);
    printf("f32 -> %s on float bits: %lld of %lld floats differ from the f64 build's\n", tf_dtype_name(formats[k]),
           (long long)wrong[k], (long long)checked);
  }
}

int main(void) {
  tf_test_counts counts = {0, 0};
  check_16_bit(&counts);
  check_round_trips(&counts);
  check_fast_path(&counts);
  check_integers(&counts);
  return tf_test_finish("ops_elementwise cast", &counts);
}
