/* kernels/cpu/vector_math.h and the f32 activation kernels built on it, over the whole float range.
 *
 * 1. Each function against libm in double at every 97th float bit pattern of both signs (about 88
 *    million inputs: every exponent, subnormals to the largest float), plus 0, ±inf and NaN. The
 *    error is counted in ulps of the reference rounded to float (an ulp of a subnormal is 2^-149);
 *    the worst must stay within the bound the header states.
 * 2. The f32 kernels of exp, tanh, sigmoid, silu, gelu (both forms) and their gradients against
 *    their f64 kernels (libm, the textbook formulas) on inputs spread over [-1e4, 1e4] on a log
 *    scale with 0, ±inf and NaN, element by element: |y32 - y64| <= ulps x ulp(y64) + the
 *    rounding of the input's own square where the function takes e^{-x²/2} (the erf form), and
 *    NaN exactly where the reference is NaN. The old f32 kernels (libm's f32 functions in the
 *    textbook forms) failed this in the tails: 1 + tanh u and 1 + erf(x / sqrt 2) cancel for x < -3.
 * Prints the worst error per function and where it was. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "kernels/cpu/vector_math.h"

#define STRIDE 97u

/* ulp of v as a float: 2^(exponent - 23), at least 2^-149. */
static double ulp_of(double v) {
  v = fabs(v);
  if (v < 0x1p-126)
    return 0x1p-149;
  if (isinf(v) || v >= 0x1p128)
    return ldexp(1, 104);
  int exponent;
  frexp(v, &exponent); // v = m 2^exponent, m in [0.5, 1)
  return ldexp(1, exponent - 24);
}

/* The error of y against the double reference in ulps of the reference; inf when one is NaN and
 * the other not, or the infinities differ; 0 when both are the same infinity or both NaN. */
static double ulps(float y, double reference) {
  if (isnan(reference) || isnan(y))
    return isnan(reference) && isnan(y) ? 0 : INFINITY;
  double rounded = (double)(float)reference;
  if (isinf(rounded) || isinf(y))
    return rounded == (double)y ? 0 : INFINITY;
  return fabs((double)y - reference) / ulp_of(reference);
}

typedef struct worst {
  double ulps, at;
} worst;

static void note(worst *w, double error, double at) {
  if (error > w->ulps || isnan(error))
    *w = (worst){error, at};
}

static float float_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

static double sigmoid64(double x) { return 1 / (1 + exp(-x)); }

static void sweep_functions(tf_test_counts *counts) {
  worst exp_w = {0, 0}, tanh_w = {0, 0}, sigmoid_w = {0, 0}, complement_w = {0, 0}, erfc_w = {0, 0};
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.72284f, -87.33654f, -103.97f, -104.5f};
  const int n_specials = (int)(sizeof(specials) / sizeof(specials[0]));
  for (uint64_t k = 0;; k++) {
    float x;
    if (k < (uint64_t)n_specials)
      x = specials[k];
    else if ((k - n_specials) * STRIDE <= 0xFFFFFFFFu)
      x = float_of((uint32_t)((k - n_specials) * STRIDE));
    else
      break;
    note(&exp_w, ulps(tf_cpu_math_exp(x), exp((double)x)), x);
    note(&tanh_w, ulps(tf_cpu_math_tanh(x), tanh((double)x)), x);
    float s, complement;
    tf_cpu_math_sigmoid_pair(x, &s, &complement);
    note(&sigmoid_w, ulps(s, sigmoid64(x)), x);
    note(&complement_w, ulps(complement, sigmoid64(-(double)x)), x);
    if (x >= 0 && !isnan(x)) {
      // The tail alone: e^{-a²} rounded once from double, so the error is the polynomial's.
      const double a = x;
      note(&erfc_w, ulps(tf_cpu_math_half_erfc(x, (float)exp(-a * a)), 0.5 * erfc(a)), x);
    }
  }
  printf("vector_math.h against libm in double, every %u-th float and the specials: worst error\n", STRIDE);
  printf("  exp            %6.2f ulp at %.9g (bound 2)\n", exp_w.ulps, exp_w.at);
  printf("  tanh           %6.2f ulp at %.9g (bound 3)\n", tanh_w.ulps, tanh_w.at);
  printf("  sigmoid(x)     %6.2f ulp at %.9g (bound 3)\n", sigmoid_w.ulps, sigmoid_w.at);
  printf("  sigmoid(-x)    %6.2f ulp at %.9g (bound 3)\n", complement_w.ulps, complement_w.at);
  printf("  0.5 erfc(a)    %6.2f ulp at %.9g (bound 8, given e^{-a^2} rounded)\n", erfc_w.ulps, erfc_w.at);
  CHECK(counts, exp_w.ulps <= 2, "exp: %.2f ulp at %.9g", exp_w.ulps, exp_w.at);
  CHECK(counts, tanh_w.ulps <= 3, "tanh: %.2f ulp at %.9g", tanh_w.ulps, tanh_w.at);
  CHECK(counts, sigmoid_w.ulps <= 3, "sigmoid: %.2f ulp at %.9g", sigmoid_w.ulps, sigmoid_w.at);
  CHECK(counts, complement_w.ulps <= 3, "sigmoid(-x): %.2f ulp at %.9g", complement_w.ulps, complement_w.at);
  CHECK(counts, erfc_w.ulps <= 8, "0.5 erfc: %.2f ulp at %.9g", erfc_w.ulps, erfc_w.at);
}

/* ---- the kernels, f32 against double ---- */

#define POINTS 4001
#define SQRT_2_OVER_PI 0.79788456080286535588
#define GELU_CUBIC 0.044715
#define SQRT_2PI 2.50662827463100050242

/* Each function and the size of the terms it sums (where a derivative crosses 0 by cancellation,
 * as silu' near x = -1.28 and gelu' near -0.75, the error is a few ulps of the terms, not of the
 * result), in double, in forms that do not cancel in the tails. The f64 kernels keep the textbook
 * forms: 1 + tanh u and 1 + erf(x / sqrt 2) reach 0 in double below x = -7 and -9, so they are no
 * reference there. */
typedef enum which { EXP, TANH, SIGMOID, SILU, SILU_GRAD, GELU_TANH, GELU_TANH_GRAD, GELU_ERF, GELU_ERF_GRAD } which;

static double reference(which f, double x, double *terms) {
  const double s = sigmoid64(x), complement = sigmoid64(-x);
  const double u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
  const double u_derivative = SQRT_2_OVER_PI * (1 + 3 * GELU_CUBIC * x * x), s2 = sigmoid64(2 * u);
  const double cdf = 0.5 * erfc(-x / sqrt(2)), pdf = exp(-0.5 * x * x) / SQRT_2PI;
  double y = 0;
  switch (f) {
  case EXP: y = exp(x); break;
  case TANH: y = tanh(x); break;
  case SIGMOID: y = s; break;
  case SILU: y = x * s; break;
  case SILU_GRAD: *terms = s * (1 + fabs(x) * complement); return s * (1 + x * complement);
  case GELU_TANH: y = x * s2; break;
  case GELU_TANH_GRAD:
    *terms = s2 + fabs(2 * x * u_derivative * s2 * sigmoid64(-2 * u));
    return s2 + 2 * x * u_derivative * s2 * sigmoid64(-2 * u);
  case GELU_ERF: y = x * cdf; break;
  case GELU_ERF_GRAD: *terms = cdf + fabs(x * pdf); return cdf + x * pdf;
  }
  *terms = fabs(y);
  return y;
}

typedef struct kernel_case {
  const char *name;
  tf_op op;
  int gelu; /* -1 not gelu, 0 erf form, 1 tanh form */
  which function;
  double ulps;
  /* + what rounding the exponent's argument costs, as a relative error: e^{-x²/2} (erf form) with x²
   * rounded, x²/2 2^-24; e^{-2|u|} (tanh form) with u = sqrt(2/pi) (x + 0.044715 x³) rounded 4
   * times, 3 |2u| 2^-24. From x = -9 on these exceed the ulps: any f32 evaluation pays them. */
  int argument; /* 0 none, 1 erf form, 2 tanh form */
} kernel_case;

static void sweep_kernels(tf_test_counts *counts) {
  th_tensor x = th_zeros(TF_F32, TH_SHAPE(POINTS + 4));
  for (int i = 0; i < POINTS; i++) { // +-10^[-8, 4] on a log scale, and 0
    const int half = POINTS / 2;
    const double magnitude = i == half ? 0 : pow(10, -8 + 12.0 * abs(i - half) / half);
    x.values[i] = (double)(float)(i < half ? -magnitude : magnitude);
  }
  x.values[POINTS] = INFINITY, x.values[POINTS + 1] = -INFINITY, x.values[POINTS + 2] = NAN;
  x.values[POINTS + 3] = -0.0;
  th_tensor dy = th_zeros(TF_F32, TH_SHAPE(POINTS + 4));
  for (int64_t i = 0; i < dy.count; i++)
    dy.values[i] = 1;
  static const kernel_case cases[] = {
      {"exp", TF_OP_EXP, -1, EXP, 2, 0},
      {"tanh", TF_OP_TANH, -1, TANH, 3, 0},
      {"sigmoid", TF_OP_SIGMOID, -1, SIGMOID, 3, 0},
      {"silu", TF_OP_SILU, -1, SILU, 4, 0},
      {"silu_grad", TF_OP_SILU_GRAD, -1, SILU_GRAD, 6, 0},
      {"gelu tanh", TF_OP_GELU, 1, GELU_TANH, 6, 2},
      {"gelu_grad tanh", TF_OP_GELU_GRAD, 1, GELU_TANH_GRAD, 8, 2},
      {"gelu erf", TF_OP_GELU, 0, GELU_ERF, 10, 1},
      {"gelu_grad erf", TF_OP_GELU_GRAD, 0, GELU_ERF_GRAD, 12, 1},
  };
  printf("f32 kernels against double, %d inputs in +-[1e-8, 1e4], 0, +-inf, NaN; error in ulps of the terms\n"
         "(of the result but where a derivative sums terms of both signs), + 4 (1 + |x|^3) 2^-149 absolute\n"
         "(a subnormal intermediate times x):\n",
         POINTS + 4);
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    const kernel_case *k = &cases[c];
    tf_attrs attrs = k->gelu >= 0 ? th_gelu(k->gelu == 1) : th_no_attrs();
    const int n_inputs = k->op == TF_OP_SILU_GRAD || k->op == TF_OP_GELU_GRAD ? 2 : 1;
    th_tensor in[2] = {th_copy(&x), th_copy(&dy)}, y;
    CHECK(counts, th_run(k->op, &attrs, in, n_inputs, &y, false) == 1, "%s: f32 run", k->name);
    worst w = {0, 0};
    int failures = 0;
    for (int64_t i = 0; i < x.count; i++) {
      const double v = x.values[i];
      double terms = 0;
      const double expected = reference(k->function, v, &terms);
      double error = 0;
      if (isnan(expected) || isnan(y.values[i]) || isinf(expected) || isinf(y.values[i]))
        error = ulps((float)y.values[i], expected) == 0 ? 0 : INFINITY;
      else {
        double allowed_ulps = k->ulps;
        const double u = SQRT_2_OVER_PI * (v + GELU_CUBIC * v * v * v);
        const double argument = k->argument == 1 ? 0.5 * v * v : k->argument == 2 ? 3 * fabs(2 * u) : 0;
        allowed_ulps += argument * 0x1p-24 * terms / ulp_of(terms);
        const double slack = 4 * (1 + fabs(v) * v * v) * 0x1p-149;
        error = fmax(0, fabs(y.values[i] - expected) - slack) / ulp_of(terms) / allowed_ulps * k->ulps;
      }
      if (!(error <= k->ulps) && failures++ < 5)
        CHECK(counts, false, "%s at x = %.9g: %.9g, expected %.9g (%.2f of %.0f ulp allowed)", k->name, v, y.values[i],
              expected, error, k->ulps);
      note(&w, error, v);
    }
    CHECK(counts, failures == 0, "%s: %d inputs past the bound", k->name, failures);
    printf("  %-15s %6.2f ulp at %.6g (bound %.0f%s)\n", k->name, w.ulps, w.at, k->ulps,
           k->argument == 1   ? " + x^2/2 2^-24 relative"
           : k->argument == 2 ? " + 3 |2u| 2^-24 relative"
                              : "");
  }
}

int main(void) {
  tf_test_counts counts = {0, 0};
  sweep_functions(&counts);
  sweep_kernels(&counts);
  th_release();
  return tf_test_finish("ops_elementwise vector math", &counts);
}
