/* Pieces of tf_plan_verify() shared by plan/plan_verify.c (header, buffers, steps) and
 * plan/plan_verify_memory.c (disjointness and the report); not used elsewhere. */
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
