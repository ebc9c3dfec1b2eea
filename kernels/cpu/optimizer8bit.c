/* adamw8bit: AdamW (optimizer.c's tf_cpu_adamw, step by step) with its two moments stored in 8 bits,
 * bitsandbytes-style block-wise quantization.
 *
 * Storage, per moment of a parameter of n elements: n u8 codes and one f32 scale per block of
 * B = TF_ADAMW8BIT_BLOCK (256) elements, the last block partial: 2 B/param + 8 B per 256 elements,
 * 2.03 B/param against AdamW's 8. Zero-initialised state (codes 0, scales 0) is all-zero moments.
 *   m (signed):       linear absmax, round to nearest (ties away from zero). scale s = max |m| over the
 *                     block; code q = round(127 m / s) in [-127, 127], stored as int8 two's complement;
 *                     m = q s / 127.
 *   v (non-negative): linear absmax of v^(1/4), round to nearest. scale r = max v^(1/4) over the
 *                     block; code c = round(255 v^(1/4) / r) in [0, 255]; v = (c r / 255)^4.
 * Why v^(1/4) and not v: the update divides by sqrt(v). A linear code of v (or of sqrt(v)) rounds to
 * zero every element below 1/510 of the block's largest v (sqrt(v)); the update there becomes
 * m / eps, far larger than AdamW's. Measured: with v coded linearly, the 200-step gpt run of
 * tests/optimizer8bit reaches a NaN loss; through the fourth root it ends within 0.05% of AdamW's.
 * There code 1 is sqrt(v) at 1.5e-5 of the block's largest and the relative error of sqrt(v) at
 * code k is ~1/k, so the denominator keeps its magnitude over ten orders of v (docs/memory.md).
 *
 * One block at a time, deterministically: dequantize m and v, run AdamW's element update with the
 * fresh f32 moments (bias corrections, decoupled weight decay, epsilon as tf_cpu_adamw), keep them,
 * then the block's new scales (the largest |m| and v^(1/4)), then its codes. Blocks are independent,
 * so threads split the blocks and every thread count gives the same bits. Compiled as f32 and as the
 * f64 reference (real.h); the codes are u8 in both, the scales the compute type. */
#include "core/ops.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/update_factor.h"
#include "kernels/cpu/vector_math.h"

typedef struct adam_scalars {
  real factor, decay, b1, b2, one_minus_b1, one_minus_b2, step_size, correction2_sqrt, epsilon;
} adam_scalars;

/* round to nearest, ties away from zero, of x >= 0: floor(x + 0.5) in the compute type (a float's
 * floor is a float: the f32 build once took it in double, a libm call per element, to the same
 * value) */
static inline real round_positive(real x) { return TF_REAL_FLOOR(x + (real)0.5); }

/* The block's loops are maps over restrict operands, so they take the wider clones
 * (TF_CPU_VECTOR_CLONES: the same operations at every width, the same bits), and the two largest
 * values are taken in TF_CPU_MAX_LANES fixed lanes (element i in lane i % lanes): a maximum is exact
 * in any order, and NaNs are passed over in every lane as by one scalar loop. gpt2-small-l2-2's
 * update (53.5M parameters) took 1,081 ms a step on a Zen 2 core as one scalar loop with a floor()
 * call per code, and takes 135 ms so. */
#define TF_CPU_MAX_LANES 16

/* The dequantized moments' update and the parameter's (tf_cpu_adamw's arithmetic) into m and v. */
TF_CPU_VECTOR_CLONES static void update_moments(const adam_scalars *s, real *restrict param, const real *restrict grad,
                                                const uint8_t *restrict m_codes, const uint8_t *restrict v_codes,
                                                real m_step, real v_step, int64_t count, real *restrict m,
                                                real *restrict v) {
  const real factor = s->factor, decay = s->decay, b1 = s->b1, b2 = s->b2, one_minus_b1 = s->one_minus_b1;
  const real one_minus_b2 = s->one_minus_b2, step_size = s->step_size, correction2_sqrt = s->correction2_sqrt;
  const real epsilon = s->epsilon;
  for (int64_t i = 0; i < count; i++) {
    const real r = (real)v_codes[i] * v_step;
    const real m_old = (real)(int8_t)m_codes[i] * m_step, v_old = (r * r) * (r * r);
    const real g = grad[i] * factor;
    param[i] *= decay;
    m[i] = m_old * b1 + one_minus_b1 * g;
    v[i] = v_old * b2 + one_minus_b2 * g * g;
    param[i] -= step_size * (m[i] / (TF_REAL_SQRT(v[i]) / correction2_sqrt + epsilon));
  }
}

/* The largest |m[i]| and v[i] (0 when none is larger), in fixed lanes. */
TF_CPU_VECTOR_CLONES static void largest(const real *restrict m, const real *restrict v, int64_t count, real *m_max,
                                         real *v_max) {
  real m_lane[TF_CPU_MAX_LANES] = {0}, v_lane[TF_CPU_MAX_LANES] = {0};
  int64_t i = 0;
  for (; i + TF_CPU_MAX_LANES <= count; i += TF_CPU_MAX_LANES)
#pragma omp simd
    for (int j = 0; j < TF_CPU_MAX_LANES; j++) {
      const real magnitude = TF_REAL_FABS(m[i + j]);
      m_lane[j] = magnitude > m_lane[j] ? magnitude : m_lane[j];
      v_lane[j] = v[i + j] > v_lane[j] ? v[i + j] : v_lane[j];
    }
  for (int j = 0; i + j < count; j++) {
    const real magnitude = TF_REAL_FABS(m[i + j]);
    m_lane[j] = magnitude > m_lane[j] ? magnitude : m_lane[j];
    v_lane[j] = v[i + j] > v_lane[j] ? v[i + j] : v_lane[j];
  }
  real m_top = 0, v_top = 0;
  for (int j = 0; j < TF_CPU_MAX_LANES; j++) {
    m_top = m_lane[j] > m_top ? m_lane[j] : m_top;
    v_top = v_lane[j] > v_top ? v_lane[j] : v_top;
  }
  *m_max = m_top;
  *v_max = v_top;
}

/* The codes of m and v against the block's scales. */
TF_CPU_VECTOR_CLONES static void quantize(const real *restrict m, const real *restrict v, real m_inverse,
                                          real v_inverse, int64_t count, uint8_t *restrict m_codes,
                                          uint8_t *restrict v_codes) {
  for (int64_t i = 0; i < count; i++) {
    real q = round_positive(TF_REAL_FABS(m[i]) * m_inverse);
    q = q > 127 ? 127 : q;
    m_codes[i] = (uint8_t)(int8_t)(m[i] < 0 ? -(int)q : (int)q);
    real c = round_positive(TF_REAL_SQRT(TF_REAL_SQRT(v[i])) * v_inverse);
    v_codes[i] = (uint8_t)(c > 255 ? 255 : c);
  }
}

static void update_block(const adam_scalars *s, real *param, const real *grad, uint8_t *m_codes, real *m_scale,
                         uint8_t *v_codes, real *v_scale, int64_t count) {
  real m[TF_ADAMW8BIT_BLOCK], v[TF_ADAMW8BIT_BLOCK];
  update_moments(s, param, grad, m_codes, v_codes, *m_scale / (real)127, *v_scale / (real)255, count, m, v);
  real m_max, v_max;
  largest(m, v, count, &m_max, &v_max);
  const real root_max = TF_REAL_SQRT(TF_REAL_SQRT(v_max));
  *m_scale = m_max;
  *v_scale = root_max;
  const real m_inverse = m_max > 0 ? (real)127 / m_max : 0, v_inverse = root_max > 0 ? (real)255 / root_max : 0;
  quantize(m, v, m_inverse, v_inverse, count, m_codes, v_codes);
}

/* (param, grad, m_codes, m_scales, v_codes, v_scales [, norm_sq]), t = the session's step (>= 1) */
void TF_REAL_NAME(tf_cpu_adamw8bit)(const tf_cpu_args *args) {
  const tf_optimizer_attrs *a = &args->attrs->u.optimizer;
  real *param = args->inputs[0].data, *m_scales = args->inputs[3].data, *v_scales = args->inputs[5].data;
  const real *grad = args->inputs[1].data;
  uint8_t *m_codes = args->inputs[2].data, *v_codes = args->inputs[4].data;
  const int64_t n = args->inputs[0].count, blocks = tf_adamw8bit_blocks(n);
  if (overflowed(args, 6))
    return;
  const int64_t step = args->context && args->context->optimizer_step > 0 ? args->context->optimizer_step : 1;
  const double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
  const adam_scalars s = {
      .factor = (real)gradient_factor(args, 6),
      .decay = (real)(1.0 - lr * (double)a->weight_decay),
      .b1 = (real)beta1,
      .b2 = (real)beta2,
      .one_minus_b1 = (real)(1.0 - beta1),
      .one_minus_b2 = (real)(1.0 - beta2),
      .step_size = (real)(lr / (1.0 - pow(beta1, (double)step))),
      .correction2_sqrt = (real)sqrt(1.0 - pow(beta2, (double)step)),
      .epsilon = (real)a->epsilon,
  };
  TF_CPU_PARALLEL_FOR(
      tf_cpu_team(tf_cpu_threads(args), n > TF_CPU_CHUNK), for (int64_t b = 0; b < blocks; b++) {
        const int64_t start = b * TF_ADAMW8BIT_BLOCK;
        const int64_t count = n - start < TF_ADAMW8BIT_BLOCK ? n - start : TF_ADAMW8BIT_BLOCK;
        update_block(&s, param + start, grad + start, m_codes + start, &m_scales[b], v_codes + start, &v_scales[b],
                     count);
      });
}
