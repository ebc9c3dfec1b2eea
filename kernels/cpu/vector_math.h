/* float32 exp, tanh, sigmoid and the normal distribution's tails, written so that the compiler
 * vectorises a loop that calls them (SSE2/AVX on x86-64, NEON on aarch64, no -march needed):
 * straight-line arithmetic, selects instead of branches, no table lookups, no libm calls. libm's
 * expf, tanhf, expm1f and erff are a call per element, which kept the kernels' loops scalar (a
 * quarter of the char-gpt training step was tanhf/expm1f of the GELU). Only the f32 build uses
 * them: the f64 build keeps libm, the reference these are tested against.
 *
 * Stated accuracy, against libm in double (tests/ops_elementwise/test_vector_math.c sweeps every
 * 97th float of both signs, subnormals to the largest, and ±0, ±inf, NaN; it fails past these
 * bounds; measured worst in brackets):
 *   tf_cpu_math_exp        2 ulp [1.2]; overflows to +inf above 88.72 and goes through the
 *                          subnormals to 0 below -87.3, as expf does; NaN in, NaN out
 *   tf_cpu_math_tanh       3 ulp [1.5]; odd; NaN -> NaN
 *   tf_cpu_math_sigmoid    3 ulp [2.6] for sigmoid(x) and sigmoid(-x) (an ulp of a subnormal
 *                          result is 2^-149)
 *   tf_cpu_math_half_erfc  8 ulp [6.4] given e^{-a²} rounded once; a caller that computes
 *                          e^{-a²} in float also pays the rounding of a² in the exponent: a
 *                          relative a² 2^-24 (4e-7 at a = 2.5, 3e-6 at a = 7, where the result
 *                          is 1e-23). The same test bounds the GELU kernels built on these.
 *
 * The selects compare floats, which GCC if-converts only without -ftrapping-math (the kernels are
 * built with -fno-trapping-math, kernels/cpu/CMakeLists.txt; no kernel unmasks FP traps). */
#ifndef TIGHTFIT_KERNELS_CPU_VECTOR_MATH_H
#define TIGHTFIT_KERNELS_CPU_VECTOR_MATH_H

#include <stdint.h>

#define TF_CPU_LOG2E 1.44269504088896341f
#define TF_CPU_LN2_HIGH 0.693145751953125f /* ln 2 in 16 bits: n ln2_high is exact for |n| < 256 */
#define TF_CPU_LN2_LOW 1.42860682030941723212e-6f
#define TF_CPU_ROUNDING_SHIFT 12582912.0f /* 1.5 x 2^23: adding it rounds to an integer */

/* 2^n for an integer n in [-126, 127], from the exponent field. */
static inline float tf_cpu_math_exp2i(int32_t n) {
  union {
    uint32_t u;
    float f;
  } scale = {(uint32_t)(n + 127) << 23};
  return scale.f;
}

/* e^x = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 in two parts (|r| <= 0.347), e^r by its
 * degree-7 Taylor polynomial (truncation 6e-9 relative, under f32 rounding). x is clamped to
 * [-104, 89] first (e^-104 is under half the smallest subnormal, e^89 over the largest float), so
 * n stays in [-150, 129]; 2^n is applied as 2^(n/2) 2^(n - n/2), each factor a normal float, so
 * the product overflows and underflows where e^x does. NaN fails both comparisons and stays NaN. */
static inline float tf_cpu_math_exp(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  union {
    float f;
    uint32_t u;
  } shifted = {x * TF_CPU_LOG2E + TF_CPU_ROUNDING_SHIFT};
  const float n = shifted.f - TF_CPU_ROUNDING_SHIFT;
  const float r = (x - n * TF_CPU_LN2_HIGH) - n * TF_CPU_LN2_LOW;
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 +
                                          r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  // n from the low mantissa bits, not (int32_t)n: converting a NaN to an integer is undefined.
  const int32_t whole = (int32_t)(shifted.u - 0x4B400000u), half = whole / 2;
  return p * tf_cpu_math_exp2i(half) * tf_cpu_math_exp2i(whole - half);
}

/* tanh x. |x| < 0.55: x + x³ P(x²), P of degree 4 (relative error 1e-9 on the interval); beyond:
 * (1 - a) / (1 + a) with a = e^{-2|x|} <= 0.333, which loses no more than a bit to the
 * subtraction and cannot overflow. The sign is put back last. */
static inline float tf_cpu_math_tanh(float x) {
  const float magnitude = x < 0 ? -x : x, z = x * x;
  const float small =
      magnitude + magnitude * z *
                      (-0.3333331755982263f +
                       z * (0.13332586142997543f +
                            z * (-0.05385231033871301f + z * (0.021071680684130636f + z * -0.0062742416794773275f))));
  const float a = tf_cpu_math_exp(-2.0f * magnitude);
  const float large = (1.0f - a) / (1.0f + a);
  const float t = magnitude < 0.55f ? small : large;
  return x < 0 ? -t : t;
}

/* The logistic function at x and at -x (= 1 - sigmoid(x)), both without cancellation: with
 * a = e^{-|x|} in (0, 1], 1 / (1 + a) is the larger and a / (1 + a) the smaller. */
static inline void tf_cpu_math_sigmoid_pair(float x, float *of_x, float *of_minus_x) {
  const float a = tf_cpu_math_exp(x < 0 ? x : -x), larger = 1.0f / (1.0f + a), smaller = a * larger;
  *of_x = x < 0 ? smaller : larger;
  *of_minus_x = x < 0 ? larger : smaller;
}

static inline float tf_cpu_math_sigmoid(float x) {
  float of_x, of_minus_x;
  tf_cpu_math_sigmoid_pair(x, &of_x, &of_minus_x);
  return of_x;
}

/* 0.5 erfc(a) for a >= 0 (+inf included), given e = e^{-a²}: 0.5 t e Q(t) with t = 1 / (1 + a/2)
 * in (0, 1] and Q(t) = erfc(a) e^{a²} / t, a smooth function from 1/(2 sqrt(pi)) at t = 0 to 1 at
 * t = 1, by a polynomial of degree 10 (relative error 1.1e-8, a weighted least-squares fit on
 * Chebyshev nodes iterated towards minimax). The largest value is 0.5 (a = 0): no cancellation. */
static inline float tf_cpu_math_half_erfc(float a, float e) {
  const float t = 1.0f / (1.0f + 0.5f * a);
  const float q =
      0.2820947947966232f +
      t * (0.28209385272792314f +
           t * (0.24688058446340536f +
                t * (0.17537685790895258f +
                     t * (0.09300037185186082f +
                          t * (-0.057231537853922654f +
                               t * (0.12708696358615099f +
                                    t * (-0.4469734018482493f +
                                         t * (0.48617495905121033f +
                                              t * (-0.23085559227288138f + t * 0.042352136883791205f)))))))));
  return 0.5f * t * e * q;
}

/* On x86-64 Linux with GCC, a loop function marked TF_CPU_VECTOR_CLONES is built three times, for
 * the baseline (SSE2, 4 floats a vector), AVX2 (8) and AVX-512F (16), and the loader picks the best
 * one the CPU runs (an ifunc). The same operations on wider vectors, so all give the same bits: AVX2
 * has no FMA, and AVX-512F's is never used, as GCC contracts no a * b + c in ISO C mode (-std=c11:
 * -ffp-contract=off). Only for element-wise maps, and for reductions over lanes fixed in the source
 * (xent_row.h): a reduction the compiler vectorises would take its lane order from the vector
 * width. Elsewhere (aarch64, clang, the f64 reference) it is nothing, and TF_CPU_NO_CLONES turns it
 * off (tests/ops_dense/test_vector_widths.c builds each width on its own). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(TF_REAL_F64) &&  \
    !defined(TF_CPU_NO_CLONES)
#define TF_CPU_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TF_CPU_VECTOR_CLONES
#endif

/* exp in the kernel file's compute type (kernels/cpu/real.h): libm's in the f64 build (the
 * reference), tf_cpu_math_exp in the f32 build. */
#ifdef TF_REAL_F64
#define TF_CPU_VECTOR_EXP exp
#else
#define TF_CPU_VECTOR_EXP tf_cpu_math_exp
#endif

#endif
