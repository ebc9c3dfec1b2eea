/* The verifier's checks of ZeRO stage 2's gradient buckets (tf_plan_verify, plan_verify_host.c): at
 * stage 2 each rank holds the gradients of its shard only (compiler/zero2.c); the micro-batch block
 * writes every gradient whole into a bucket every rank holds, which the runtime reduces to the shard
 * of the same owner after the last step of the block that touches it (tools/dist_zero.c). A bucket
 * is a gradient of the gradients region that every rank holds (held_by 0); these checks hold the
 * buckets and the shards to that: one bucket a shard, touched in the micro-batch block only and
 * written whole before anything reads it, past the shards, two live at once on other bytes. */
#include <inttypes.h>
#include <stdlib.h>

#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

/* A gradient held by a rank or in pieces (not a piece itself), in the gradients region or (--offload
 * gradients) in host memory. */
static bool is_shard(const tf_plan_buffer *b) {
  return b->role == TF_ROLE_GRADIENT && (b->region == TF_REGION_GRADIENTS || b->region == TF_REGION_HOST) &&
         b->held_by != 0 && b->view_of == 0;
}

/* Each bucket and each shard paired with one of the other kind: the same owner, dtype and bytes. */
static tf_status check_pairs(const tf_plan *plan) {
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    const bool bucket = tf_plan_is_bucket(plan, b);
    if (!bucket && !is_shard(b))
      continue;
    int32_t partners = 0;
    for (int32_t other = 0; other < plan->n_buffers; other++) {
      const tf_plan_buffer *o = &plan->buffers[other];
      partners += (bucket ? is_shard(o) : tf_plan_is_bucket(plan, o)) && o->owner == b->owner && o->dtype == b->dtype &&
                  o->bytes == b->bytes;
    }
    if (partners != 1)
      return INVALID("%s is a gradient %s of parameter %" PRId32 " with %" PRId32 " %s of its owner, dtype and bytes; "
                     "at ZeRO stage 2 each gradient has one bucket (every rank's) and one shard (%s)",
                     tf_plan_buffer_label(plan, id).text, bucket ? "bucket" : "shard", b->owner, partners,
                     bucket ? "shards" : "buckets", bucket ? "a bucket without its shard" : "a shard without a bucket");
  }
  return NULL;
}

/* The steps of the block that touch each bucket: first[id] and last[id], -1 for none; a bucket
 * touched in the optimizer block, or first by a step that reads it, is refused. */
static tf_status live_steps(const tf_plan *plan, int32_t *first, int32_t *last) {
  for (int32_t id = 0; id < plan->n_buffers; id++)
    first[id] = last[id] = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      if (!tf_plan_is_bucket(plan, &plan->buffers[id]))
        continue;
      if (s >= plan->micro_steps)
        return INVALID("%s (optimizer block) touches %s, a gradient bucket; the updates read the shards, and a bucket "
                       "lives in the micro-batch block only (a bucket read in the optimizer block)",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
      if ((first[id] < 0 || first[id] == s) && tf_plan_step_reads(step, k))
        return INVALID("%s reads %s, a gradient bucket no step has written in this micro-batch: it holds another "
                       "gradient's bytes (a bucket read before it is written; zero it first)",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
      first[id] = first[id] < 0 ? s : first[id];
      last[id] = s;
    }
  }
  for (int32_t id = 0; id < plan->n_buffers; id++)
    if (tf_plan_is_bucket(plan, &plan->buffers[id]) && first[id] < 0)
      return INVALID("%s is a gradient bucket no step of the micro-batch block writes (a bucket never written)",
                     tf_plan_buffer_label(plan, id).text);
  return NULL;
}

/* Every bucket past every shard's bytes in the gradients region (none there when they are in host
 * memory); two buckets live at one step on other bytes. */
static tf_status check_bytes(const tf_plan *plan, const int32_t *first, const int32_t *last) {
  int64_t shards_end = 0;
  int32_t last_shard = -1;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by > 0 &&
        b->offset + b->bytes > shards_end) {
      shards_end = b->offset + b->bytes;
      last_shard = id;
    }
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (!tf_plan_is_bucket(plan, b) || b->bytes == 0)
      continue;
    if (b->offset < shards_end)
      return INVALID("%s (bytes [%" PRId64 ", %" PRId64 ")) lies on the shards' bytes, which %s ends at %" PRId64
                     " (a bucket on the shards' bytes)",
                     tf_plan_buffer_label(plan, id).text, b->offset, b->offset + b->bytes,
                     tf_plan_buffer_label(plan, last_shard).text, shards_end);
    for (int32_t other = id + 1; other < plan->n_buffers; other++) {
      const tf_plan_buffer *o = &plan->buffers[other];
      if (!tf_plan_is_bucket(plan, o) || o->bytes == 0 || first[other] > last[id] || first[id] > last[other] ||
          o->offset >= b->offset + b->bytes || b->offset >= o->offset + o->bytes)
        continue;
      return INVALID("%s (bytes [%" PRId64 ", %" PRId64 "), steps [%" PRId32 ", %" PRId32 "]) and %s (bytes [%" PRId64
                     ", %" PRId64 "), steps [%" PRId32 ", %" PRId32 "]) overlap while both are live (overlapping live "
                     "buckets)",
                     tf_plan_buffer_label(plan, id).text, b->offset, b->offset + b->bytes, first[id], last[id],
                     tf_plan_buffer_label(plan, other).text, o->offset, o->offset + o->bytes, first[other],
                     last[other]);
    }
  }
  return NULL;
}

tf_status tf_plan_check_buckets(const tf_plan *plan) {
  if (plan->overflow_check >= 0 && plan->buffers[plan->overflow_check].role != TF_ROLE_CONSTANT)
    return INVALID("a ZeRO stage-2 plan reads the norm of the whole gradients (overflow_check %s); each rank holds its "
                   "shard of them only, so the norm is a constant the job writes",
                   tf_plan_buffer_label(plan, plan->overflow_check).text);
  TF_RETURN_IF_ERROR(check_pairs(plan));
  const size_t n = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *first = malloc(sizeof(int32_t) * n), *last = malloc(sizeof(int32_t) * n);
  tf_status status = first && last ? live_steps(plan, first, last)
                                   : tf_status_new(TF_ERR_OUT_OF_MEMORY,
                                                   "verifying %" PRId32 " buckets: out of host "
                                                   "memory",
                                                   plan->n_buffers);
  if (!status)
    status = check_bytes(plan, first, last);
  free(first);
  free(last);
  return status;
}
