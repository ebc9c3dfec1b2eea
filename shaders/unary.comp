#version 450
// Float unaries y = f(x) and activation gradients dx = dy f'(v) (kernels/cpu/elementwise.c):
// v is x, except y for sigmoid_grad and tanh_grad, as core/op_table.h says.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "op_codes.glsl"
#include "elementary.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer V { ELEMENT v[]; };
layout(std430, set = 0, binding = 1) readonly buffer DY { ELEMENT dy[]; }; // gradients only
layout(std430, set = 0, binding = 2) writeonly buffer Y { ELEMENT y[]; };

layout(push_constant) uniform Push {
  uint count;
  uint op;          // the tf_op number: TF_OP_* from op_codes.glsl (generated from core/op_table.h)
  uint approximate; // gelu, gelu_grad: the tanh form
  uint gradient;    // 0: y = f(x); 1: dx = dy f'(v), dy at binding 1; 2: y = f'(v) (gelu_pair)
  float slope;      // leaky_relu, leaky_relu_grad: alpha
  float lo, hi;     // clip, clip_grad: the bounds
} pc;

// What an op without a case here computes: NaN, so that the parity tests see it.
#define MISSING uintBitsToFloat(0x7fc00000u)

const float SQRT_HALF = 0.70710678118654752440;
const float INV_SQRT_2PI = 0.39894228040143267794;
const float SQRT_2_OVER_PI = 0.79788456080286535588;
const float GELU_CUBIC = 0.044715;
const float TWO_OVER_SQRT_PI = 1.12837916709551257390;

// erfc(z) for z >= 0 with a relative error below 1.2e-7 (Numerical Recipes' erfcc, Chebyshev).
float erfc_positive(float z) {
  float t = 1.0 / (1.0 + 0.5 * z);
  float p = -z * z - 1.26551223 +
            t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
            t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp(p);
}

// The normal CDF 0.5 (1 + erf(x / sqrt 2)), accurate in relative terms on the negative side too.
float normal_cdf(float x) {
  float e = erfc_positive(abs(x) * SQRT_HALF);
  return x >= 0.0 ? 1.0 - 0.5 * e : 0.5 * e;
}

// erf(x): its Maclaurin series below |x| = 0.5, where 1 - erfc(|x|) would cancel (the last term left
// out is below 1e-9 of the sum), 1 - erfc(|x|) with erfc's sign symmetry above.
float erf_of(float x) {
  float a = abs(x);
  if (a < 0.5) {
    float s = x * x;
    return TWO_OVER_SQRT_PI * x *
           (1.0 + s * (-1.0 / 3.0 + s * (0.1 + s * (-1.0 / 42.0 + s * (1.0 / 216.0 + s * (-1.0 / 1320.0 +
            s * (1.0 / 9360.0)))))));
  }
  float e = 1.0 - erfc_positive(a);
  return x < 0.0 ? -e : e;
}

// sin(x) (phase 0) or cos(x) (phase 1), not GLSL's sin and cos, which Vulkan holds only to 2^-11
// absolute on [-pi, pi]: x less k pi/2 (k = round(x 2/pi)) in three parts (Cody and Waite's; the
// first part has 8 bits, so k times it is exact for |k| < 2^16), then cephes' sinf/cosf polynomials
// on [-pi/4, pi/4]; cos(x) = sin(x + pi/2), a quadrant further. Within a few units in the last place
// for |x| < 1e5; NaN for infinities and NaN.
float sin_cos_of(float x, uint phase) {
  precise float k = round(x * 0.63661977236758134308);
  precise float r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.549789954891882e-8;
  uint quadrant = (uint(int(k)) + phase) & 3u;
  float z = r * r;
  float s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
  float c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  float v = (quadrant & 1u) != 0u ? c : s;
  return (quadrant & 2u) != 0u ? -v : v;
}

// tanh without inf/inf for large |x|: tanh(15) rounds to 1 in f32 already.
float tanh_of(float x) { return tanh(clamp(x, -15.0, 15.0)); }

float sigmoid_of(float x) { return 1.0 / (1.0 + exp(-x)); }

// The tanh form through s = 0.5 (1 + tanh u) = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), from
// a = e^{-2|u|}: 1 + tanh u cancels for u < 0 (kernels/cpu/elementwise.c's form). *derivative is
// s + 2 x u' s (1 - s), s (1 - s) = a / (1 + a)^2.
float gelu_tanh_and_derivative(float x, out float derivative) {
  float u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
  float a = exp(-2.0 * abs(u)), larger = 1.0 / (1.0 + a);
  float s = u < 0.0 ? a * larger : larger;
  derivative = s + 2.0 * x * (SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x)) * a * larger * larger;
  return x * s;
}

float gelu_tanh(float x) {
  float unused;
  return gelu_tanh_and_derivative(x, unused);
}

float forward(uint op, float x) {
  switch (op) {
  case TF_OP_NEG: return -x;
  case TF_OP_EXP: return exp(x);
  case TF_OP_LOG: return log(x);
  case TF_OP_SQRT: return sqrt(x);
  case TF_OP_RSQRT: return 1.0 / sqrt(x);
  case TF_OP_RELU: return x > 0.0 ? x : 0.0;
  case TF_OP_GELU: return pc.approximate != 0u ? gelu_tanh(x) : x * normal_cdf(x);
  case TF_OP_SILU: return x * sigmoid_of(x);
  case TF_OP_SIGMOID: return sigmoid_of(x);
  case TF_OP_TANH: return tanh_of(x);
  case TF_OP_SOFTPLUS: return x > 20.0 ? x : log1p_of(exp(x));
  case TF_OP_LEAKY_RELU: return x > 0.0 ? x : x * pc.slope;
  case TF_OP_CLIP: { // min(max(x, lo), hi): hi everywhere when lo > hi, NaN kept
    float y = x < pc.lo ? pc.lo : x;
    return y > pc.hi ? pc.hi : y;
  }
  case TF_OP_ABS: return abs(x);
  case TF_OP_ERF: return erf_of(x);
  case TF_OP_SIN: return sin_cos_of(x, 0u);
  case TF_OP_COS: return sin_cos_of(x, 1u);
  case TF_OP_ASIN: return asin_of(x);
  case TF_OP_ACOS: return acos_of(x);
  case TF_OP_ATAN: return atan_of(x);
  case TF_OP_TAN: return sin_cos_of(x, 0u) / sin_cos_of(x, 1u);
  case TF_OP_SINH: return sinh_of(x);
  case TF_OP_COSH: return cosh_of(x);
  case TF_OP_ASINH: return asinh_of(x);
  case TF_OP_ACOSH: return acosh_of(x);
  case TF_OP_ATANH: return atanh_of(x);
  case TF_OP_STOP_GRADIENT: return x;
  case TF_OP_FLOOR: return floor(x);
  case TF_OP_CEIL: return ceil(x);
  case TF_OP_ROUND: return roundEven(x);
  case TF_OP_SIGN: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x);
  }
  return MISSING;
}

float derivative(uint op, float v) {
  switch (op) {
  case TF_OP_GELU_GRAD:
    if (pc.approximate != 0u) {
      float derivative;
      gelu_tanh_and_derivative(v, derivative);
      return derivative;
    }
    return normal_cdf(v) + v * INV_SQRT_2PI * exp(-0.5 * v * v);
  case TF_OP_SILU_GRAD: {
    float s = sigmoid_of(v);
    return s * (1.0 + v * (1.0 - s));
  }
  case TF_OP_SIGMOID_GRAD: return v * (1.0 - v);
  case TF_OP_TANH_GRAD: return 1.0 - v * v;
  case TF_OP_LEAKY_RELU_GRAD: return v > 0.0 ? 1.0 : pc.slope; // dy * 1 is dy exactly
  case TF_OP_CLIP_GRAD: return v > pc.lo && v < pc.hi ? 1.0 : 0.0;
  case TF_OP_ABS_GRAD: return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0); // sgn(NaN) = 0, as PyTorch
  case TF_OP_ERF_GRAD: return TWO_OVER_SQRT_PI * exp(-v * v);
  }
  return MISSING;
}

void main() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    float x = TO_F32(v[i]);
    if (pc.gradient == 0u) {
      y[i] = FROM_F32(forward(pc.op, x));
    } else if (pc.gradient == 2u) {
      y[i] = FROM_F32(derivative(pc.op, x));
    } else {
      float g = TO_F32(dy[i]);
      // relu_grad and clip_grad select rather than multiply: dy stays exact (and 0 * inf does not make NaN).
      bool passes = pc.op == TF_OP_RELU_GRAD ? x > 0.0 : x > pc.lo && x < pc.hi;
      bool selects = pc.op == TF_OP_RELU_GRAD || pc.op == TF_OP_CLIP_GRAD;
      y[i] = FROM_F32(selects ? (passes ? g : 0.0) : g * derivative(pc.op, x));
    }
  }
}
