/* ZeRO stage 2's buckets (compiler/zero2.c), for the pass of compiler/zero.c. */
#ifndef TIGHTFIT_COMPILER_ZERO_H
#define TIGHTFIT_COMPILER_ZERO_H

#include "tightfit/plan.h"

/* The bucket of each gradient g with bucket_of[g] == 0 (the gradients the updates read, shards now):
 * a buffer like it, appended to plan->buffers (the caller made room), every rank's, that the
 * micro-batch block writes instead; bucket_of[g] its id, -1 for the other buffers of [0, old). A
 * gradient of the gradients region that no update reads is refused. */
tf_status tf_zero2_buckets(tf_plan *plan, int32_t *bucket_of, int32_t old) TF_MUST_USE;
/* Places the buckets in the gradients region past the shards (shards_end bytes): two buckets live at
 * one step of the micro-batch block (from their first to their last step there) on other bytes;
 * *area the bytes they take. */
tf_status tf_zero2_place_buckets(tf_plan *plan, int64_t shards_end, int64_t *area) TF_MUST_USE;

#endif
