/* Lowering: what one plan step becomes on the Vulkan backend (a few dispatches, fills or copies).
 * Shared by the vk_lower*.c files, one op family each. Pure host logic: nothing here calls Vulkan,
 * so each lowering can be read next to its shader (shaders/<family>.comp) and its CPU kernel. */
#ifndef TIGHTFIT_BACKENDS_VULKAN_VK_LOWER_H
#define TIGHTFIT_BACKENDS_VULKAN_VK_LOWER_H

#include "backends/vulkan/vk_internal.h"
#include "core/linear_loss.h"

typedef struct vk_lower {
  const tf_plan *plan;
  const tf_plan_step *step;
  int32_t index; /* the step's index in the plan */
  vk_program *program;
  const vk_limits *limits;
} vk_lower;

typedef tf_status (*vk_lower_fn)(vk_lower *l);

/* ---- families (one file each) ---- */
tf_status vk_lower_binary(vk_lower *l);    /* add sub mul div accumulate */
tf_status vk_lower_unary(vk_lower *l);     /* neg ... tanh, gelu and the activation gradients */
tf_status vk_lower_gelu_pair(vk_lower *l); /* gelu and its derivative: two unary dispatches */
tf_status vk_lower_zero(vk_lower *l);
tf_status vk_lower_dropout(vk_lower *l);
tf_status vk_lower_cast(vk_lower *l);      /* f32 to and from i32, f16 and bf16 */
tf_status vk_lower_cast_into(vk_lower *l); /* (param, master): the cast written over param */
tf_status vk_lower_layout(vk_lower *l);    /* reshape transpose expand slice slice_grad concat */
tf_status vk_lower_reduce(vk_lower *l);    /* sum mean max sum_to max_grad */
tf_status vk_lower_global_norm_sq(vk_lower *l);
tf_status vk_lower_softmax(vk_lower *l); /* softmax log_softmax and their gradients */
tf_status vk_lower_matmul(vk_lower *l);
tf_status vk_lower_conv(vk_lower *l);                 /* conv1d conv2d conv_transpose2d, input/weight gradients */
tf_status vk_lower_attention(vk_lower *l);            /* attention attention_grad (vk_lower_attention.c) */
tf_status vk_lower_norm(vk_lower *l);                 /* layer_norm rms_norm and gradients */
tf_status vk_lower_batch_norm(vk_lower *l);           /* batch_norm and its gradient */
tf_status vk_lower_batch_norm_running(vk_lower *l);   /* the running statistics' update, in place */
tf_status vk_lower_embedding(vk_lower *l);            /* embedding embedding_grad */
tf_status vk_lower_pool(vk_lower *l);                 /* max/avg pool2d and gradients */
tf_status vk_lower_loss(vk_lower *l);                 /* cross_entropy mse bce_with_logits and gradients */
tf_status vk_lower_optimizer(vk_lower *l);            /* sgd adamw */
tf_status vk_lower_adamw8bit(vk_lower *l);            /* adamw8bit */
tf_status vk_lower_linear_cross_entropy(vk_lower *l); /* linear_cross_entropy and its gradient */
/* ... on f16/bf16 x, weight and gradients (an f32 loss and dloss): vk_lower_linear_loss_half.c */
tf_status vk_lower_linear_cross_entropy_half(vk_lower *l);
tf_status vk_lower_ctc(vk_lower *l); /* ctc_loss and its gradient (vk_lower_ctc.c) */

/* The operands of a fused loss head step (linear_cross_entropy in any form) as plan buffer ids, -1
 * for none, with its geometry: what the f32 and the half lowerings both start from. */
typedef struct vk_loss_head {
  tf_linear_loss_geometry g;
  int32_t x, weight, labels, dloss, bias, work; /* inputs and the workspace */
  int32_t loss, dx, dweight, dbias;             /* outputs (or accumulators) */
  bool accumulate;                              /* dweight and dbias are accumulators among the inputs */
} vk_loss_head;
/* The head of step l->step (vk_lower_linear_loss.c); refuses labels that are not i32 or i64. */
tf_status vk_loss_head_of(vk_lower *l, vk_loss_head *h);

/* ---- emitting commands ---- */

/* The subgroup variant of `plain` when the device runs them (vk_limits.subgroup_size) and one
 * exists, else `plain`. */
vk_shader vk_variant(const vk_lower *l, vk_shader plain);

/* Appends a dispatch of `shader` binding buffers[0..n) (plan buffer ids, -1: the dummy), `writes`
 * bit i set when binding i is written, with `push_bytes` of push constants and a grid of groups. */
tf_status vk_emit_dispatch(vk_lower *l, vk_shader shader, int32_t n, const int32_t *buffers, uint32_t writes,
                           const void *push, size_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);
tf_status vk_emit_fill(vk_lower *l, int32_t buffer); /* buffer = 0 */
tf_status vk_emit_copy(vk_lower *l, int32_t from, int32_t to, int64_t bytes);
/* One GEMM C[m, n] (+)= op(A) op(B) over row blocks of plan buffers (shaders/matmul.comp, MODE 0):
 * a, b, c are plan buffer ids; the offsets are elements into them; A is [m, k] with row stride lda
 * ([k, m] when ta), B [k, n] with ldb ([n, k] when tb), C's rows n elements apart. */
typedef struct vk_gemm {
  int32_t a, b, c;
  int64_t a_offset, b_offset, c_offset, lda, ldb, m, n, k;
  bool ta, tb, accumulate;
  /* batches > 1: that many products, entry z reading A and B from z times their batch strides (in
   * elements) past their offsets and writing C's z-th [m, n] block after c_offset */
  int64_t batches, a_batch_stride, b_batch_stride;
} vk_gemm;
tf_status vk_emit_gemm(vk_lower *l, const vk_gemm *g);
/* An UNSUPPORTED status naming the step, its op and `why` (printf-style). */
tf_status vk_refuse(const vk_lower *l, const char *fmt, ...) TF_PRINTF(2, 3);

/* ---- operands ---- */
static inline int32_t vk_in(const vk_lower *l, int32_t k) { return l->step->inputs[k]; }
static inline int32_t vk_out(const vk_lower *l, int32_t k) { return l->step->outputs[k]; }
static inline const tf_plan_buffer *vk_buffer(const vk_lower *l, int32_t id) { return &l->plan->buffers[id]; }
int64_t vk_count(const tf_plan_buffer *b);
/* Workgroups for `items` work items of `per_group` each, capped at VK_GROUP_LIMIT (the shaders
 * loop over the rest with a grid stride); at least 1. */
uint32_t vk_groups(int64_t items, int64_t per_group);
/* Refuses a dispatch whose invocations may each run more than the device's loop limit of loop
 * iterations in all (lavapipe's; see vk_limits), naming the step. `iterations` is an estimate
 * from above. */
tf_status vk_check_loops(const vk_lower *l, int64_t iterations);
/* Whether a column sum over `outputs` may run split (core/workspace.h): the device allows it, its
 * blocks of TF_VULKAN_SPLIT_COLUMNS fit one grid dimension, and the plan gave the step the
 * `workspace_bytes` it needs (a plan compiled before the split runs unsplit). */
bool vk_split_columns_on(const vk_lower *l, int64_t outputs, int64_t workspace_bytes);
/* Rounds of a grid-stride loop over `items`, `per_group` a workgroup, with vk_groups' cap. */
int64_t vk_grid_rounds(int64_t items, int64_t per_group);
/* Refuses counts the 32-bit shader indices cannot address. */
tf_status vk_check_count(const vk_lower *l, int64_t count, const char *what);
/* Refuses a step whose plan gives it less workspace than the `needed` bytes its shaders use (a plan
 * compiled for another target), naming both numbers. */
tf_status vk_check_workspace(const vk_lower *l, int64_t needed);
/* The bytes of workspace the plan gives the step being lowered (0 when none). */
int64_t vk_workspace_bytes(const vk_lower *l);

/* Merges adjacent axes that every operand walks contiguously (strides[k][i] == strides[k][i+1] x
 * shape[i+1]) and drops axes of size 1; *rank becomes at least 1. strides holds n rows. */
void vk_collapse(int32_t *rank, int64_t *shape, int n, int64_t (*strides)[TF_MAX_RANK]);
/* Row-major strides of `b`; numpy broadcast strides of `b` against `shape` of `rank`. */
void vk_contiguous_strides(const tf_plan_buffer *b, int64_t *strides);
void vk_broadcast_strides(const tf_plan_buffer *b, int32_t rank, const int64_t *shape, int64_t *strides);

/* A float as push-constant bits. */
uint32_t vk_float_bits(float value);

#endif
