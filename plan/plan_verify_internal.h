/* Pieces of tf_plan_verify() shared by plan/plan_verify.c (header, buffers, steps),
 * plan/plan_verify_host.c (host steps, shards) and plan/plan_verify_memory.c (disjointness and the
 * report); not used elsewhere. */
#ifndef TIGHTFIT_PLAN_PLAN_VERIFY_INTERNAL_H
#define TIGHTFIT_PLAN_PLAN_VERIFY_INTERNAL_H

#include "tightfit/plan.h"

/* A short description for messages, returned by value so that it can sit in a printf argument list. */
typedef struct tf_plan_label {
  char text[160];
} tf_plan_label;

/* "buffer 3 'h'" and "step 4 'fc1' (matmul)"; long names are cut. The id must be in range. */
tf_plan_label tf_plan_buffer_label(const tf_plan *plan, int32_t id);
tf_plan_label tf_plan_step_label(const tf_plan *plan, int32_t s);

/* The arena buffers (count of them) ordered by the buffer their memory chain starts at (root[id],
 * filled for every buffer: alias_of followed; id itself outside the arena or for a broken chain),
 * then by first step; a malloc'ed array, NULL when out of memory (plan/plan_live.c). */
int32_t *tf_plan_chain_order(const tf_plan *plan, int32_t *root, int32_t *count);

/* Step s: a device step for s < n_steps, host step s - n_steps after them. */
const tf_plan_step *tf_plan_step_at(const tf_plan *plan, int32_t s);

/* Host steps and shards (plan_verify_host.c). Where they run: host step i before device step
 * host_at[i], within its block (optimizer phase: the optimizer block; forward, recompute or
 * accumulate: the micro-batch block), listed in the order they run. */
tf_status tf_plan_check_host_positions(const tf_plan *plan) TF_MUST_USE;
/* Whether a host step placed at or before device step s writes arena buffer id (an activation's
 * copy back, which device step s may then read). */
bool tf_plan_host_writes_before(const tf_plan *plan, int32_t id, int32_t s);
/* Host step s's outputs (activations in host memory, or in the arena live from its place) and what
 * it reads in host memory written before; writer[b] records the step that writes buffer b. */
tf_status tf_plan_check_host_outputs(const tf_plan *plan, int32_t s, int32_t *writer) TF_MUST_USE;
/* ZeRO (tf_plan.zero 1): every optimizer-state buffer, and nothing else, held by one rank or in
 * pieces; a held step is an update of the optimizer block reading its rank's shard only, and the
 * views it reads are the ranges of one parameter's update (plan_verify_views.c). */
tf_status tf_plan_check_shards(const tf_plan *plan) TF_MUST_USE;

/* Whether buffer b is a ZeRO stage-2 plan's gradient bucket: a gradient of the gradients region that
 * every rank holds (the micro-batch block writes it; its sums go to the shard of the same owner). */
static inline bool tf_plan_is_bucket(const tf_plan *plan, const tf_plan_buffer *b) {
  return plan->zero == 2 && b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by == 0 &&
         b->view_of == 0;
}
/* ZeRO stage 2's buckets (plan_verify_buckets.c), after the shards' checks: each bucket has one shard
 * (a gradient of its owner held by a rank or in pieces, of its bytes) and each shard one bucket; a
 * bucket is touched in the micro-batch block only, first by a step that writes it whole (an output,
 * or a zero), lies past every rank's shards, and two buckets live at one step of the block (from the
 * first step that touches each to the last) lie on other bytes; no norm reads the whole gradients. */
tf_status tf_plan_check_buckets(const tf_plan *plan) TF_MUST_USE;

/* Whether buffer b has bytes of its own: not a ZeRO view on its parent's memory (view_of, held by
 * every rank) nor a buffer held in pieces (held_by -1). */
static inline bool tf_plan_buffer_has_memory(const tf_plan_buffer *b) {
  return b->held_by >= 0 && !(b->view_of != 0 && b->held_by == 0);
}

/* ZeRO's views (plan_verify_views.c), once every buffer passed its own checks: each view a flat
 * range inside its parent (a parameter, gradient or optimizer state of a ZeRO plan, not a view),
 * of its role, dtype and region, on its parent's bytes (offset = parent's + view_at) when every rank
 * holds the parent, else a piece held by one rank of a parent held in pieces; the views of a parent
 * tile it (no overlap, no gap); a buffer held in pieces is optimizer state with pieces. */
tf_status tf_plan_check_views(const tf_plan *plan) TF_MUST_USE;
/* The steps that read views (after every step passed its checks): each view is read by one step
 * only, an sgd/adamw held by one rank whose flat operands (parameter, gradient, state) are all views,
 * of one parameter, its gradient and its state, over the same elements. */
tf_status tf_plan_check_view_updates(const tf_plan *plan) TF_MUST_USE;

/* The checks below assume every buffer passed its own checks (valid role, region, exact bytes,
 * placement inside its region, live interval inside the program). */

/* Buffers of the same persistent region (all but the arena) never share a byte. */
tf_status tf_plan_check_persistent_disjoint(const tf_plan *plan) TF_MUST_USE;
/* Arena buffers whose live intervals [first_step, last_step] intersect never share a byte.
 * O(A log A + A x L) for A arena buffers and at most L live at once. */
tf_status tf_plan_check_arena_disjoint(const tf_plan *plan) TF_MUST_USE;
/* The report equals what it summarises: bytes per role, live bytes per step, the lower bound, the
 * naive total and the peak step; FLOP estimates are finite and >= 0. Runs after the memory checks. */
tf_status tf_plan_check_report(const tf_plan *plan) TF_MUST_USE;

/* Dynamic loss scaling (plan_verify_scaling.c): loss_scale_seed an f32 scalar constant no step
 * writes, in a training plan with an overflow check and a power-of-two initial scale in range;
 * overflow_check an f32 arena scalar written by one optimizer-block step and live to the last. */
tf_status tf_plan_check_loss_scaling(const tf_plan *plan) TF_MUST_USE;

#endif
