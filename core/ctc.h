/* The CTC loss's geometry and workspace layout (ctc_loss, ctc_loss_grad), one formula for the
 * planner and every backend's kernels: kernels/cpu/loss_ctc.c, kernels/cuda/ctc.cu, shaders/ctc.comp.
 *
 * logits [N, T, C], labels [N, S]: sequence n's target is its labels before the first negative one
 * (S_n of them, padding after), its extended target the S_n labels with a blank before, between and
 * after them (L_n = 2 S_n + 1 positions; L = 2 S + 1 at most). The workspace holds, in elements of
 * the compute type (f32; f64 in the CPU reference), for every sequence: log alpha [T, L], log beta
 * [T, L] (Graves' forward and backward variables, both including frame t's emission), the
 * log-sum-exp of each frame's logits [T], and its loss [1]. Header-only plain C (also valid C++). */
#ifndef TIGHTFIT_CORE_CTC_H
#define TIGHTFIT_CORE_CTC_H

#include <stdint.h>

#include "core/tensor.h"

/* The offsets are read on the device too (kernels/cuda/ctc.cu). */
#ifdef __CUDACC__
#define TF_CTC_FN static inline __host__ __device__
#else
#define TF_CTC_FN static inline
#endif

typedef struct tf_ctc_geometry {
  int64_t batch, frames, classes, label_length; /* N, T, C, S */
  int64_t extended;                             /* L = 2 S + 1 */
} tf_ctc_geometry;

/* The geometry of logits [N, T, C] and labels [N, S] (shapes already checked by the shape rule). */
static inline tf_ctc_geometry tf_ctc_geometry_of(const tf_tensor_ref *logits, const tf_tensor_ref *labels) {
  tf_ctc_geometry g;
  g.batch = logits->shape[0];
  g.frames = logits->shape[1];
  g.classes = logits->shape[2];
  g.label_length = labels->shape[1];
  g.extended = 2 * g.label_length + 1;
  return g;
}

/* a x b and a + b saturated at INT64_MAX (a plan that large never fits; it must not wrap). */
static inline int64_t tf_ctc_mul(int64_t a, int64_t b) { return a > 0 && b > INT64_MAX / a ? INT64_MAX : a * b; }
static inline int64_t tf_ctc_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

/* Elements of the workspace: N (2 T L + T + 1). */
static inline int64_t tf_ctc_workspace_elements(const tf_ctc_geometry *g) {
  int64_t per_sequence = tf_ctc_add(tf_ctc_mul(2, tf_ctc_mul(g->frames, g->extended)), tf_ctc_add(g->frames, 1));
  return tf_ctc_mul(g->batch, per_sequence);
}

/* Where sequence n's parts start, in elements from the workspace's start. */
TF_CTC_FN int64_t tf_ctc_alpha_offset(const tf_ctc_geometry *g, int64_t n) { return n * g->frames * g->extended; }
TF_CTC_FN int64_t tf_ctc_beta_offset(const tf_ctc_geometry *g, int64_t n) {
  return (g->batch + n) * g->frames * g->extended;
}
TF_CTC_FN int64_t tf_ctc_lse_offset(const tf_ctc_geometry *g, int64_t n) {
  return 2 * g->batch * g->frames * g->extended + n * g->frames;
}
TF_CTC_FN int64_t tf_ctc_loss_offset(const tf_ctc_geometry *g, int64_t n) {
  return 2 * g->batch * g->frames * g->extended + g->batch * g->frames + n;
}

#endif
