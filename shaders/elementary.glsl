// Elementary functions Vulkan's GLSL lacks or holds to too loose a precision (its log only to 2^-21
// absolute near 1, its asin/acos/atan only as atan2's 4096 ulp): log1p, the inverse trigonometric
// and the hyperbolic functions and their inverses, from cephes' single-precision polynomials
// (within a few units in the last place, as kernels/cpu's libm). Each keeps a NaN, and gives NaN
// outside its domain. Every division here has a divisor in [2^-126, 2^126] (Vulkan's precision
// holds there only); GLSL's exp and log are used only where their relative error is what we state.
// Included by unary.comp.

#define ELEMENTARY_NAN uintBitsToFloat(0x7fc00000u)
#define ELEMENTARY_INF uintBitsToFloat(0x7f800000u)

const float ELEMENTARY_PI = 3.14159265358979323846;
const float ELEMENTARY_PI_2 = 1.57079632679489661923;
const float ELEMENTARY_PI_4 = 0.78539816339744830962;
const float ELEMENTARY_LN2 = 0.69314718055994530942;

// log(1 + e), accurate in relative terms for small e: 1 + e = m 2^k with m in [sqrt(1/2), sqrt(2)),
// log(m) by cephes' logf polynomial in f = m - 1 (exact), plus what rounding 1 + e lost,
// ((e - (u - 1)) / u), and k ln 2 in two parts. -inf at -1, NaN below.
float log1p_of(float e) {
  precise float u = 1.0 + e;
  if (isnan(u) || isinf(u) || u <= 0.0)
    return u == 0.0 ? -ELEMENTARY_INF : (u > 0.0 ? u : ELEMENTARY_NAN);
  int k;
  float m = frexp(u, k); // u = m 2^k, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    k -= 1;
  }
  precise float lost = k > 0 ? (1.0 - (u - e)) / u : (e - (u - 1.0)) / u;
  precise float f = m - 1.0;
  float z = f * f;
  float p = ((((((((7.0376836292e-2 * f - 1.1514610310e-1) * f + 1.1676998740e-1) * f - 1.2420140846e-1) * f +
                 1.4249322787e-1) * f - 1.6668057665e-1) * f + 2.0000714765e-1) * f - 2.4999993993e-1) * f +
             3.3333331174e-1) * f * z;
  float fk = float(k);
  precise float y = ((f + ((p - 0.5 * z) + fk * -2.12194440e-4)) + lost) + fk * 0.693359375;
  return y;
}

// atan(x): |x| reduced to [0, tan(pi/8)] by pi/2 - atan(1/|x|) above tan(3pi/8) (pi/2 itself past
// 2^24, where 1/|x| no longer shows) and pi/4 + atan((|x| - 1)/(|x| + 1)) above tan(pi/8); cephes'
// atanf polynomial there.
float atan_of(float x) {
  float a = abs(x), base = 0.0;
  if (a > 2.414213562373095) {
    base = ELEMENTARY_PI_2;
    a = a > 16777216.0 ? 0.0 : -1.0 / a;
  } else if (a > 0.4142135623730950) {
    base = ELEMENTARY_PI_4;
    a = (a - 1.0) / (a + 1.0);
  }
  float z = a * a;
  float y = base + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) *
                        z * a + a);
  return x < 0.0 ? -y : y;
}

// asin(x): cephes' asinf polynomial in z = x² up to |x| = 1/2; beyond, pi/2 - 2 asin(sqrt(z)) with
// z = (1 - |x|)/2 (exact).
float asin_of(float x) {
  float a = abs(x);
  if (a > 1.0)
    return ELEMENTARY_NAN;
  bool wide = a > 0.5;
  float z = wide ? 0.5 * (1.0 - a) : a * a;
  float s = wide ? sqrt(z) : a;
  float p = ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z + 7.4953002686e-2) * z +
             1.6666752422e-1) * z * s + s;
  float y = wide ? ELEMENTARY_PI_2 - 2.0 * p : p;
  return x < 0.0 ? -y : y;
}

// acos(x): pi - 2 asin(sqrt((1 + x)/2)) below -1/2, 2 asin(sqrt((1 - x)/2)) above 1/2 (no
// cancellation near +-1), pi/2 - asin(x) between.
float acos_of(float x) {
  if (abs(x) > 1.0)
    return ELEMENTARY_NAN;
  if (x < -0.5)
    return ELEMENTARY_PI - 2.0 * asin_of(sqrt(0.5 * (1.0 + x)));
  if (x > 0.5)
    return 2.0 * asin_of(sqrt(0.5 * (1.0 - x)));
  return ELEMENTARY_PI_2 - asin_of(x);
}

// e^|x| / 2, overflowing only where the result does: past 88, (e^(|x|/2) / 2) e^(|x|/2).
float half_exp_of(float a) {
  if (a > 88.0) {
    float h = exp(0.5 * a);
    return (0.5 * h) * h;
  }
  return 0.5 * exp(a);
}

// sinh(x): cephes' sinhf polynomial up to |x| = 1, where (e^x - e^-x)/2 would cancel; e^|x|/2
// alone past 20, where e^-|x| no longer shows.
float sinh_of(float x) {
  float a = abs(x), y;
  if (a > 20.0 || isnan(a)) {
    y = half_exp_of(a);
  } else if (a > 1.0) {
    float e = exp(a);
    y = 0.5 * e - 0.5 / e;
  } else {
    float z = a * a;
    y = a + a * z * ((2.03721912945e-4 * z + 8.33028376239e-3) * z + 1.66667160211e-1);
  }
  return x < 0.0 ? -y : y;
}

// cosh(x) = (e^|x| + e^-|x|)/2, e^|x|/2 alone past 20.
float cosh_of(float x) {
  float a = abs(x);
  if (a > 20.0 || isnan(a))
    return half_exp_of(a);
  float e = exp(a);
  return 0.5 * e + 0.5 / e;
}

// asinh(x) = log1p(|x| + x²/(1 + sqrt(1 + x²))) (no cancellation for small x), log(|x|) + ln 2 past
// 2^12, where sqrt(1 + x²) is |x| to f32 precision; x's sign.
float asinh_of(float x) {
  float a = abs(x);
  float y = a > 4096.0 ? log(a) + ELEMENTARY_LN2 : log1p_of(a + a * a / (1.0 + sqrt(1.0 + a * a)));
  return x < 0.0 ? -y : y;
}

// acosh(x) = log1p(t + sqrt(2t + t²)), t = x - 1 (exact near 1), log(x) + ln 2 past 2^12; NaN below 1.
float acosh_of(float x) {
  if (x < 1.0)
    return ELEMENTARY_NAN;
  if (x > 4096.0)
    return log(x) + ELEMENTARY_LN2;
  float t = x - 1.0;
  return log1p_of(t + sqrt(2.0 * t + t * t));
}

// atanh(x) = log1p(2|x| / (1 - |x|)) / 2 (no cancellation for small x), x's sign; +-inf at +-1.
float atanh_of(float x) {
  float a = abs(x);
  if (a > 1.0)
    return ELEMENTARY_NAN;
  float y = a == 1.0 ? ELEMENTARY_INF : 0.5 * log1p_of(2.0 * a / (1.0 - a));
  return x < 0.0 ? -y : y;
}
