/* The geometry of the fused loss head, linear_cross_entropy(x, weight, labels [, bias]) and its
 * gradients: x [.., d] is `rows` rows of d features, weight [V, d] (transpose_weight) or [d, V], an
 * optional bias [V] is added to every row of logits, and the [rows, V] logits are computed
 * `chunk_rows` rows at a time into the step's workspace. The CPU and CUDA kernels, the Vulkan
 * lowering and the workspace formulas all read it from here. */
#ifndef TIGHTFIT_CORE_LINEAR_LOSS_H
#define TIGHTFIT_CORE_LINEAR_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "tightfit/types.h"

typedef struct tf_linear_loss_geometry {
  int64_t rows, features, classes;
  int64_t chunk_rows; /* 1..rows (0 when rows is 0) */
  bool transpose_weight;
} tf_linear_loss_geometry;

/* The geometry of an op whose inputs are (x, weight, ...), shapes checked by the plan verifier. */
static inline tf_linear_loss_geometry tf_linear_loss_geometry_of(const tf_attrs *attrs, const tf_tensor_ref *x,
                                                                 const tf_tensor_ref *weight) {
  tf_linear_loss_geometry g;
  g.transpose_weight = attrs->u.cross_entropy.transpose_weight;
  g.features = x->rank > 0 ? x->shape[x->rank - 1] : 1;
  g.rows = g.features > 0 ? x->count / g.features : 0;
  g.classes = weight->shape[g.transpose_weight ? 0 : 1];
  int64_t chunk = attrs->u.cross_entropy.chunk_rows;
  g.chunk_rows = chunk <= 0 || chunk > g.rows ? g.rows : chunk;
  return g;
}

/* Whether `op` is a fused loss head's step (the forward, single-pass, gradient and accumulating
 * forms): each takes (x, weight, labels, ...), its class count the weight's V. */
static inline bool tf_linear_loss_op(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD || op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE;
}

/* The input index of the bias of a fused loss head step of `op` with `n_inputs` inputs, or -1 when
 * it has none: the bias follows (x, weight, labels) in linear_cross_entropy and (x, weight, labels,
 * dloss) in linear_cross_entropy_bias_grad, _bias_train and _bias_grad_accumulate. */
static inline int32_t tf_linear_loss_bias_input(tf_op op, int32_t n_inputs) {
  if (op == TF_OP_LINEAR_CROSS_ENTROPY)
    return n_inputs == 4 ? 3 : -1;
  if (op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE)
    return n_inputs == 7 ? 4 : -1;
  return (op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD || op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN) && n_inputs == 5
             ? 4
             : -1;
}

/* Whether `op` adds the weight's (and bias's) gradient into accumulators it takes as inputs: then
 * dweight_sum is input tf_linear_loss_bias_input() + 1 (5 without a bias: input 4) and dbias_sum the
 * one after it, and the only output is dx. */
static inline bool tf_linear_loss_accumulates(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE || op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE;
}

/* The input index of dweight_sum in an accumulating gradient step (see above). */
static inline int32_t tf_linear_loss_dweight_input(tf_op op, int32_t n_inputs) {
  const int32_t bias = tf_linear_loss_bias_input(op, n_inputs);
  return bias >= 0 ? bias + 1 : 4;
}

/* Whether `op` is one of the single-pass forms (loss and gradients together): their outputs are
 * (loss, dx, dweight [, dbias]), the gradient forms' (dx, dweight [, dbias]) one place later. */
static inline bool tf_linear_loss_is_train(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN || op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN;
}

/* The output index of dx in a gradient or single-pass step of `op`: dweight and dbias follow it. */
static inline int32_t tf_linear_loss_dx_output(tf_op op) { return tf_linear_loss_is_train(op) ? 1 : 0; }

/* Elements of one chunk's logits (or their gradient): chunk_rows x classes. */
static inline int64_t tf_linear_loss_chunk_elements(const tf_linear_loss_geometry *g) {
  return g->chunk_rows * g->classes;
}

/* The Vulkan head's dx product of a chunk, [chunk_rows, d] summed over the V classes, has few output
 * tiles and a long depth (gpt2-small at 8 x 1024: 48 tiles of 64 x 64, 50,257 classes deep): too few
 * workgroups to fill a GPU. Where its output has fewer than 128 such tiles and V >= 4,096, it runs as
 * one batched product over this many equal slices of the classes (V / slices each, 2,048 or more; 8
 * slices at most) into the workspace, the V mod slices classes left over as a product straight into
 * dx, then one pass adds the slices to dx in slice order; else 1 (one product straight into dx).
 * Chosen by shape alone: the plan reserves what the lowering uses. So the workspace is not monotone
 * in chunk_rows: where a smaller chunk crosses below 128 tiles, the partial products appear (gpt2-small:
 * a 640-row chunk needs 36.1M words, a 704-row one 35.4M); the budget search compiles every chunk it
 * tries (compiler/budget.c). A plan compiled before the slices runs dx as one product. */
static inline int64_t tf_linear_loss_vulkan_dx_slices(const tf_linear_loss_geometry *g) {
  const int64_t tiles = ((g->chunk_rows + 63) / 64) * ((g->features + 63) / 64);
  if (tiles >= 128 || g->classes < 4096)
    return 1;
  return g->classes / 2048 < 8 ? g->classes / 2048 : 8;
}

/* The Vulkan workspace of a fused loss head, in f32 words (backends/vulkan/vk_lower_linear_loss.c):
 * one chunk of logits, then each row's loss term (every row of the step: the loss is summed once,
 * in a fixed order, after the last chunk), then the count of the labels that count (a u32), then,
 * for a gradient step whose dx runs in slices, each slice's [chunk_rows, d] product (from a multiple
 * of 64 words). */
static inline int64_t tf_linear_loss_vulkan_terms_at(const tf_linear_loss_geometry *g) {
  return tf_linear_loss_chunk_elements(g);
}
static inline int64_t tf_linear_loss_vulkan_count_at(const tf_linear_loss_geometry *g) {
  return tf_linear_loss_vulkan_terms_at(g) + g->rows;
}
static inline int64_t tf_linear_loss_vulkan_partials_at(const tf_linear_loss_geometry *g) {
  return (tf_linear_loss_vulkan_count_at(g) + 1 + 63) / 64 * 64;
}
static inline int64_t tf_linear_loss_vulkan_workspace_words(const tf_linear_loss_geometry *g, bool gradients) {
  const int64_t slices = gradients ? tf_linear_loss_vulkan_dx_slices(g) : 1;
  return slices > 1 ? tf_linear_loss_vulkan_partials_at(g) + slices * g->chunk_rows * g->features
                    : tf_linear_loss_vulkan_count_at(g) + 1;
}

/* The CPU's fused loss head on f16/bf16 data (kernels/cpu/linear_loss_half.c) walks the classes in
 * spans of this many outside and the row chunks inside. */
#define TF_LINEAR_LOSS_HALF_SPAN 2048

/* Where that kernel's workspace parts start (bytes, each 64-byte aligned), and its size; span, the
 * classes of a span as laid out: TF_LINEAR_LOSS_HALF_SPAN, or every class when there are fewer. Per
 * row its running max, sum and label logit (3 doubles); a span of the weight widened (span x d f32);
 * a chunk of x widened (chunk_rows x d f32); a chunk of a span's logits (chunk_rows x span f32);
 * with the gradients, a span of dweight (span x d f32), of dbias (span doubles, with a bias) and the
 * f32 sums of dx (rows x d). */
typedef struct tf_linear_loss_half_workspace {
  int64_t span, statistics, weight_span, x_chunk, logits, dweight_span, dbias_span, dx_sum, bytes;
} tf_linear_loss_half_workspace;

static inline int64_t tf_linear_loss_half_align(int64_t bytes) { return (bytes + 63) / 64 * 64; }

static inline tf_linear_loss_half_workspace tf_linear_loss_half_workspace_of(const tf_linear_loss_geometry *g,
                                                                             bool gradients, bool bias) {
  const int64_t span = g->classes < TF_LINEAR_LOSS_HALF_SPAN ? g->classes : TF_LINEAR_LOSS_HALF_SPAN;
  tf_linear_loss_half_workspace w;
  w.span = span;
  w.statistics = 0;
  w.weight_span = w.statistics + tf_linear_loss_half_align(g->rows * 3 * 8);
  w.x_chunk = w.weight_span + tf_linear_loss_half_align(span * g->features * 4);
  w.logits = w.x_chunk + tf_linear_loss_half_align(g->chunk_rows * g->features * 4);
  w.dweight_span = w.logits + tf_linear_loss_half_align(g->chunk_rows * span * 4);
  w.dbias_span = w.dweight_span + (gradients ? tf_linear_loss_half_align(span * g->features * 4) : 0);
  w.dx_sum = w.dbias_span + (gradients && bias ? tf_linear_loss_half_align(span * 8) : 0);
  w.bytes = w.dx_sum + (gradients ? tf_linear_loss_half_align(g->rows * g->features * 4) : 0);
  return w;
}

/* The Vulkan shaders' fused loss head on f16/bf16 data (backends/vulkan/vk_lower_linear_loss_half.c)
 * walks the classes in spans of tf_linear_loss_vulkan_half_span() outside and the row chunks inside,
 * as the CPU's half kernel does. Its workspace, in f32 words, each part starting at a multiple of 64
 * words: per row its running max, sum of exponentials and label logit (3 words); a span of the
 * weight widened (span x d); a chunk of x widened (chunk_rows x d); a chunk of a span's logits
 * (chunk_rows x span); with the gradients, a span of dweight (span x d), of dbias (span, with a bias)
 * and the f32 sums of dx (rows x d); then the count of the labels that count (a u32). */
typedef struct tf_linear_loss_vulkan_half_workspace {
  int64_t span, statistics, weight_span, x_chunk, logits, dweight_span, dbias_span, dx_sum, count, words;
} tf_linear_loss_vulkan_half_workspace;

static inline int64_t tf_linear_loss_vulkan_half_span(const tf_linear_loss_geometry *g) {
  return g->classes < TF_LINEAR_LOSS_HALF_SPAN ? g->classes : TF_LINEAR_LOSS_HALF_SPAN;
}

static inline int64_t tf_linear_loss_vulkan_half_align(int64_t words) { return (words + 63) / 64 * 64; }

static inline tf_linear_loss_vulkan_half_workspace
tf_linear_loss_vulkan_half_workspace_of(const tf_linear_loss_geometry *g, bool gradients, bool bias) {
  tf_linear_loss_vulkan_half_workspace w;
  w.span = tf_linear_loss_vulkan_half_span(g);
  w.statistics = 0;
  w.weight_span = w.statistics + tf_linear_loss_vulkan_half_align(g->rows * 3);
  w.x_chunk = w.weight_span + tf_linear_loss_vulkan_half_align(w.span * g->features);
  w.logits = w.x_chunk + tf_linear_loss_vulkan_half_align(g->chunk_rows * g->features);
  w.dweight_span = w.logits + tf_linear_loss_vulkan_half_align(g->chunk_rows * w.span);
  w.dbias_span = w.dweight_span + (gradients ? tf_linear_loss_vulkan_half_align(w.span * g->features) : 0);
  w.dx_sum = w.dbias_span + (gradients && bias ? tf_linear_loss_vulkan_half_align(w.span) : 0);
  w.count = w.dx_sum + (gradients ? tf_linear_loss_vulkan_half_align(g->rows * g->features) : 0);
  w.words = w.count + 1;
  return w;
}

#endif
