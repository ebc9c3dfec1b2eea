/* The plan verifier's checks of host steps (an offloaded plan's, placed among the device steps by
 * host_at) and of ZeRO's shards (tf_plan_verify, plan_verify.c). */
#include <inttypes.h>

#include "core/ops.h"
#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

static bool valid_id(const tf_plan *plan, int32_t id) { return id >= 0 && id < plan->n_buffers; }

/* Where the host steps run: host step i before device step host_at[i], in 0..n_steps; one of the
 * micro-batch block (a phase other than optimizer) within it (at most micro_steps), one of the
 * optimizer block within that (at least micro_steps); in the order they run (the micro-batch
 * block's first, each block's by position). */
tf_status tf_plan_check_host_positions(const tf_plan *plan) {
  if (plan->n_host_steps > 0 && !plan->host_at)
    return INVALID("%" PRId32 " host steps but no host_at (where each runs)", plan->n_host_steps);
  int64_t previous = -1;
  for (int32_t i = 0; i < plan->n_host_steps; i++) {
    const int32_t at = plan->host_at[i];
    const tf_phase phase = plan->host_steps[i].phase;
    if (phase == TF_PHASE_BACKWARD || (int)phase < 0 || phase >= TF_PHASE_COUNT)
      return INVALID("host step %" PRId32 " '%s' is in phase %s; host steps are the optimizer block's, a gradient's "
                     "accumulation or an activation's copy (forward, recompute)",
                     i, plan->host_steps[i].name ? plan->host_steps[i].name : "", tf_phase_name(phase));
    const bool optimizer = phase == TF_PHASE_OPTIMIZER;
    const int32_t low = optimizer ? plan->micro_steps : 0, high = optimizer ? plan->n_steps : plan->micro_steps;
    if (at < low || at > high)
      return INVALID("host step %" PRId32 " '%s' runs before device step %" PRId32 "; a host step of the %s block runs "
                     "within it, before a step of %" PRId32 "..%" PRId32,
                     i, plan->host_steps[i].name ? plan->host_steps[i].name : "", at,
                     optimizer ? "optimizer" : "micro-batch", low, high);
    const int64_t key = (int64_t)optimizer * ((int64_t)plan->n_steps + 1) + at;
    if (key < previous)
      return INVALID("host step %" PRId32 " '%s' runs before device step %" PRId32 " of the %s block, earlier than "
                     "host step %" PRId32 " before it in the list; host steps are listed in the order they run",
                     i, plan->host_steps[i].name ? plan->host_steps[i].name : "", at,
                     optimizer ? "optimizer" : "micro-batch", i - 1);
    previous = key;
  }
  return NULL;
}

/* Whether a host step placed before device step s writes arena buffer id (an activation's copy
 * back, which device step s may read; check_host_outputs holds it to its live steps). */
bool tf_plan_host_writes_before(const tf_plan *plan, int32_t id, int32_t s) {
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    for (int32_t k = 0; plan->host_at[h] <= s && k < plan->host_steps[h].n_outputs; k++)
      if (plan->host_steps[h].outputs[k] == id)
        return true;
  return false;
}

/* A host step's outputs: activations in host memory, or in the arena from the device step it runs
 * before (an offloaded activation's copy back: first_step is host_at), each written once; it has
 * no workspace (the host has no arena). A host activation is read by later host steps only. */
tf_status tf_plan_check_host_outputs(const tf_plan *plan, int32_t s, int32_t *writer) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  if (step->workspace != -1)
    return INVALID("%s has workspace %" PRId32 "; a host step has none (-1): the host has no arena",
                   tf_plan_step_label(plan, s).text, step->workspace);
  for (int32_t i = 0; i < step->n_outputs; i++) {
    const int32_t id = step->outputs[i];
    if (!valid_id(plan, id))
      return INVALID("%s: output %" PRId32 " is buffer id %" PRId32 ", outside 0..%" PRId32,
                     tf_plan_step_label(plan, s).text, i, id, plan->n_buffers - 1);
    const tf_plan_buffer *b = &plan->buffers[id];
    const int32_t at = plan->host_at[s - plan->n_steps];
    if (b->role != TF_ROLE_ACTIVATION || (b->region != TF_REGION_HOST && b->region != TF_REGION_ARENA))
      return INVALID("%s writes output %" PRId32 " to %s, role %s in region %s; a host step writes activations in "
                     "host memory or the arena",
                     tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, tf_role_name(b->role),
                     tf_region_name(b->region));
    if (b->region == TF_REGION_ARENA && b->first_step != at)
      return INVALID("%s writes %s in the arena before device step %" PRId32 ", but its live steps start at %" PRId32
                     " (output first_step mismatch)",
                     tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, at, b->first_step);
    if (writer[id] >= 0)
      return INVALID("%s writes %s twice", tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
    writer[id] = s;
  }
  for (int32_t i = 0; i < step->n_inputs; i++) {
    const int32_t id = step->inputs[i];
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_HOST && b->role == TF_ROLE_ACTIVATION && (writer[id] < 0 || writer[id] >= s))
      return INVALID("%s reads %s before a host step writes it (read before write)", tf_plan_step_label(plan, s).text,
                     tf_plan_buffer_label(plan, id).text);
  }
  return NULL;
}

/* ZeRO's shards (tf_plan.zero 1): every optimizer-state buffer, and only those, is held by one rank
 * (held_by 1..ranks) or in pieces (-1: its views, tf_plan_check_views); a step held by one rank is an
 * update of the optimizer block (on the device, or on the host with --offload optimizer) reading
 * that rank's shard only; a step every rank runs reads no
 * shard; no step reads a buffer held in pieces (its ranges' steps read the pieces). */
tf_status tf_plan_check_shards(const tf_plan *plan) {
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    const bool state = b->role == TF_ROLE_OPTIMIZER_STATE;
    /* stage 2: a gradient is a shard (held; in host memory with --offload gradients) or a bucket
     * (every rank's), tf_plan_check_buckets */
    const bool either = plan->zero == 2 && b->role == TF_ROLE_GRADIENT &&
                        (b->region == TF_REGION_GRADIENTS || b->region == TF_REGION_HOST);
    if (b->held_by < -1 || b->held_by > plan->ranks || (!either && (b->held_by != 0) != (plan->zero > 0 && state)))
      return INVALID("%s (role %s) has held_by %" PRId32 " (1 + a rank, 0: every rank, -1: in pieces); %s",
                     tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), b->held_by,
                     plan->zero > 0 ? "under ZeRO each optimizer-state buffer (at stage 2 each gradient's shard too), "
                                      "and nothing else, is held by one rank of the plan's or in pieces"
                                    : "a plan without ZeRO has every buffer held by every rank (0)");
  }
  for (int32_t s = 0; s < plan->n_steps + plan->n_host_steps; s++) {
    const tf_plan_step *step = tf_plan_step_at(plan, s);
    /* a device step after the micro-batch block, or a host step of the optimizer phase (--offload) */
    const bool optimizer_block = s < plan->n_steps ? s >= plan->micro_steps : step->phase == TF_PHASE_OPTIMIZER;
    if (step->held_by < 0 || step->held_by > plan->ranks ||
        (step->held_by > 0 &&
         (plan->zero == 0 || !optimizer_block || !(tf_op_is_update(step->op) || step->op == TF_OP_CAST_INTO))))
      return INVALID("%s is held by %" PRId32 "; only the updates of a ZeRO plan's optimizer block run on one rank "
                     "(1 + a rank below %" PRId32 "; and the cast_into writing a half parameter from its master)",
                     tf_plan_step_label(plan, s).text, step->held_by, plan->ranks);
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      const int32_t held = plan->buffers[id].held_by;
      if (held < 0)
        return INVALID("%s reads %s, which no rank holds whole (it is held in pieces: the steps of its ranges read "
                       "them)",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
      if (held > 0 && held != step->held_by)
        return INVALID("%s (run by %s) reads %s, which only rank %" PRId32 " holds", tf_plan_step_label(plan, s).text,
                       step->held_by > 0 ? "one rank" : "every rank", tf_plan_buffer_label(plan, id).text, held - 1);
    }
  }
  TF_RETURN_IF_ERROR(tf_plan_check_view_updates(plan));
  return plan->zero == 2 ? tf_plan_check_buckets(plan) : NULL;
}
