/* Offloaded optimizer state (--offload optimizer; ZeRO-Offload's split): the optimizer state lives
 * in host memory and the updates run on the host's cores. A pass over the emitted plan: the
 * optimizer block's steps from its first update on become the plan's host steps (the runtime runs
 * them after the device's steps of each optimizer step, copying each device operand down and, when
 * the step writes it, up again), the optimizer-state buffers move to TF_REGION_HOST at the offsets
 * they had, and the device's optimizer-state region is empty. What the updates read in the arena
 * (the global gradient norm) lives to the end of the device steps; nothing after them reuses it.
 * The device total then holds no optimizer state; host_bytes and the bytes moved per step say what
 * it costs instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/stages.h"
#include "core/ops.h"
#include "tightfit/plan.h"

/* The first update of the optimizer block, or -1 when it has none (an inference plan, or updates
 * that run in the backward pass). */
static int32_t first_update(const tf_plan *plan) {
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++)
    if (tf_op_is_update(plan->steps[s].op))
      return s;
  return -1;
}

/* Why the steps from `first` on cannot run on the host, or NULL when they can: each must only update
 * its inputs in place (no output, no workspace: the host has neither arena nor scratch of the plan),
 * and an arena buffer it reads must be written before `first`. */
static const char *host_refusal(const tf_plan *plan, int32_t first, char *why, size_t size) {
  for (int32_t s = first; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->n_outputs > 0 || step->workspace >= 0) {
      snprintf(why, size, "step '%s' (%s) after the first update %s (the host steps update their inputs in place only)",
               step->name, tf_op_name(step->op),
               step->n_outputs > 0 ? "writes a new buffer" : "needs scratch memory in the device's arena");
      return why;
    }
    for (int32_t i = 0; i < step->n_inputs; i++) {
      const tf_plan_buffer *b = &plan->buffers[step->inputs[i]];
      if (b->region == TF_REGION_ARENA && b->first_step >= first) {
        snprintf(why, size, "step '%s' reads '%s', which is written after the first update", step->name, b->name);
        return why;
      }
    }
  }
  return NULL;
}

/* The arena's live bytes and peak over the device steps that remain. */
static void trim_report(tf_plan *plan) {
  tf_plan_report *r = &plan->report;
  r->arena_lower_bound = 0;
  r->peak_step = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (r->live_bytes[s] > r->arena_lower_bound) {
      r->arena_lower_bound = r->live_bytes[s];
      r->peak_step = s;
    }
}

tf_status tf_offload_pass(tf_plan *plan, const tf_target *target) {
  if (target->kind == TF_TARGET_CPU)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--offload optimizer: the cpu target's device memory is host memory already; offloading "
                         "moves nothing (compile for --target cuda or vulkan)");
  const int32_t first = first_update(plan);
  if (first < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--offload optimizer: graph '%s' has no update after the backward pass to run on the host "
                         "(an inference plan, or one compiled with --update-in-backward)",
                         plan->graph_name);
  char why[512];
  if (host_refusal(plan, first, why, sizeof(why)))
    return tf_status_new(TF_ERR_UNSUPPORTED, "--offload optimizer: graph '%s': %s", plan->graph_name, why);
  plan->n_host_steps = plan->n_steps - first;
  plan->host_steps = malloc(sizeof(tf_plan_step) * (size_t)plan->n_host_steps);
  if (!plan->host_steps)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--offload optimizer: no memory for %d host steps", plan->n_host_steps);
  memcpy(plan->host_steps, plan->steps + first, sizeof(tf_plan_step) * (size_t)plan->n_host_steps);
  plan->n_steps = first; /* the host steps own their names and inputs now */
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_OPTIMIZER_STATE)
      b->region = TF_REGION_HOST;
    else if (b->region == TF_REGION_ARENA && b->last_step >= first)
      b->last_step = first - 1; /* read by a host step: live to the end of the device steps */
  }
  plan->host_bytes = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  plan->region_bytes[TF_REGION_OPTIMIZER_STATE] = 0;
  trim_report(plan);
  tf_target_plan_overhead(target, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
  char line[320];
  snprintf(line, sizeof(line),
           "optimizer state offloaded: %.2f MiB in host memory, %d updates on the host's cores, %.2f MiB moved "
           "between device and host per step\n",
           (double)plan->host_bytes / 1048576.0, plan->n_host_steps,
           (double)tf_plan_host_moved_bytes(plan) / 1048576.0);
  tf_plan_note(plan, line);
  return NULL;
}
