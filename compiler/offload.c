/* Offloaded optimizer state and gradients (--offload optimizer | gradients; ZeRO-Offload's split):
 * a pass over the emitted plan that moves steps to the host's cores and what they keep to host
 * memory.
 *
 * optimizer: the optimizer block's steps from its first update on become host steps, run after
 * the device's steps of each optimizer step, but the gradients' zeroing, which stays on the device
 * (each after the update that reads the gradient); the optimizer state moves to TF_REGION_HOST at
 * the offsets it had. What the updates read in the arena (the global gradient norm) lives to the end
 * of the device steps.
 *
 * gradients (and the optimizer state): the optimizer pass gave every gradient part its own arena
 * temporary and an accumulate step (compiler/optimizer.c); those steps become host steps of the
 * micro-batch block, each run right where it was scheduled (host_at: before the device step that
 * followed it), adding the part to its gradient in host memory with every micro-batch; the whole
 * optimizer block (norm, updates, zeroing) runs on the host after the device's steps. The
 * gradients follow the state in the host region, then what the host steps write (the norm).
 * At ZeRO stage 2 the backward pass writes each gradient into a bucket on the device, which the job
 * reduces into its owner's shard (compiler/zero2.c): the buckets and every step of the micro-batch
 * block stay on the device, the shards move to the host region (the buckets' area then starts at
 * the gradients region's offset 0), and the optimizer block runs on the host.
 *
 * The device steps keep their order; removing the host steps renumbers them, and an arena buffer
 * a host step reads last is live to the device step before it (nothing later overwrites it before
 * that host step has run, since the layout kept it live through the removed step). The device
 * total then holds neither; host_bytes and the bytes moved per step say what it costs instead. */
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

/* Whether buffer b moves to host memory with the gradients: one of the gradients region, but at ZeRO
 * stage 2 a bucket (held by every rank, written by the device's backward pass). */
static bool moves_with_gradients(const tf_plan *plan, const tf_plan_buffer *b) {
  return b->region == TF_REGION_GRADIENTS && (plan->zero < 2 || b->held_by != 0);
}

/* Whether step s adds to a gradient in place (a micro-batch's accumulate). */
static bool adds_to_gradient(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs; k++) {
    bool written;
    const int32_t id = tf_plan_step_operand(step, k, &written);
    if (written && plan->buffers[id].region == TF_REGION_GRADIENTS)
      return true;
  }
  return false;
}

/* Whether step s reads or writes a buffer in host memory (an offloaded activation's copy, which the
 * emitted plan already places there: compiler/offload_activations.c). */
static bool touches_host(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    bool written;
    if (plan->buffers[tf_plan_step_operand(step, k, &written)].region == TF_REGION_HOST)
      return true;
  }
  return false;
}

/* Whether step s zeroes what stays on the device (a gradient, when only the state moves): it stays
 * there too, after the host's update has read the gradient, instead of a host step uploading zeros
 * (the whole gradients each step, with accumulation). */
static bool zeroes_on_device(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  if (step->op != TF_OP_ZERO)
    return false;
  for (int32_t k = 0; k < step->n_inputs; k++)
    if (plan->buffers[step->inputs[k]].region != TF_REGION_GRADIENTS)
      return false;
  return step->n_inputs > 0;
}

/* Marks the steps that run on the host in on_host[0, n_steps): the activations' copies, and with
 * `optimizer` the updates and what follows them but the gradients' zeroing (with `gradients` the
 * accumulations and the whole optimizer block); why not, or NULL. */
static const char *mark_host_steps(const tf_plan *plan, bool optimizer, bool gradients, bool *on_host, char *why,
                                   size_t size) {
  const int32_t first = optimizer || gradients ? first_update(plan) : plan->n_steps;
  if (first < 0) {
    snprintf(why, size,
             "graph '%s' has no update after the backward pass to run on the host (an inference plan, or one compiled "
             "with --update-in-backward)",
             plan->graph_name);
    return why;
  }
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const bool accumulation = gradients && plan->zero < 2 && s < plan->micro_steps && adds_to_gradient(plan, s);
    on_host[s] = touches_host(plan, s) || accumulation ||
                 (gradients ? s >= plan->micro_steps : s >= first && !zeroes_on_device(plan, s));
    if (accumulation && plan->steps[s].op != TF_OP_ACCUMULATE) {
      snprintf(why, size, "step '%s' (%s) adds to a gradient on the device (only accumulate moves to the host)",
               plan->steps[s].name, tf_op_name(plan->steps[s].op));
      return why;
    }
  }
  return NULL;
}

/* Whether arena buffer id, written by a host step, moves to host memory: no device step lies in its
 * live steps (the norm the host's updates read). One a device step reads stays in the arena, written
 * there by the host step (an offloaded activation's copy back). */
static bool moves_to_host(const tf_plan *plan, const bool *on_host, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->region != TF_REGION_ARENA)
    return false;
  for (int32_t s = b->first_step; s <= b->last_step; s++)
    if (!on_host[s])
      return false;
  return true;
}

/* Why host step s cannot run on the host, or NULL: it needs scratch memory in the device's arena, or
 * has a half operand (the CPU kernels of the host steps compute on f32 data; a copy moves any, a
 * cast converts any: cast_into writes a half parameter from its master). */
static const char *host_step_refusal(const tf_plan *plan, int32_t s, char *why, size_t size) {
  const tf_plan_step *step = &plan->steps[s];
  if (step->workspace >= 0) {
    snprintf(why, size, "step '%s' (%s) needs scratch memory in the device's arena", step->name, tf_op_name(step->op));
    return why;
  }
  const bool any = step->op == TF_OP_RESHAPE || tf_op_info_get(step->op)->dtypes == TF_DTYPES_ANY;
  for (int32_t k = 0; !any && k < step->n_inputs + step->n_outputs; k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    if (b->dtype == TF_F16 || b->dtype == TF_BF16) {
      snprintf(why, size, "step '%s' (%s) reads or writes '%s' in %s; the host steps compute on f32 data", step->name,
               tf_op_name(step->op), b->name, tf_dtype_name(b->dtype));
      return why;
    }
  }
  return NULL;
}

/* Why a device step cannot stay on the device, or NULL: it touches what moves to host memory. */
static const char *device_step_refusal(const tf_plan *plan, bool optimizer, bool gradients, int32_t s, char *why,
                                       size_t size) {
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    bool written;
    const tf_plan_buffer *b = &plan->buffers[tf_plan_step_operand(step, k, &written)];
    if ((optimizer && b->region == TF_REGION_OPTIMIZER_STATE) || (gradients && moves_with_gradients(plan, b))) {
      snprintf(why, size, "device step '%s' (%s) uses '%s', which would move to host memory", step->name,
               tf_op_name(step->op), b->name);
      return why;
    }
  }
  return NULL;
}

static const char *refusal(const tf_plan *plan, bool optimizer, bool gradients, const bool *on_host, char *why,
                           size_t size) {
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const char *reason = on_host[s] ? host_step_refusal(plan, s, why, size)
                                    : device_step_refusal(plan, optimizer, gradients, s, why, size);
    if (reason)
      return reason;
  }
  return NULL;
}

static int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

/* Moves a persistent region's buffers to the host region from offset `base` on; returns its end. A
 * ZeRO plan's region is the largest rank's shard (each rank's from offset 0): so is what moves; a
 * buffer held in pieces (held_by -1) has no bytes of its own there, its pieces do. */
static int64_t move_region(tf_plan *plan, tf_region region, int64_t base) {
  int64_t end = base;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != region)
      continue;
    b->region = TF_REGION_HOST;
    b->offset += base;
    if (b->held_by >= 0)
      end = b->offset + b->bytes > end ? b->offset + b->bytes : end;
  }
  plan->region_bytes[region] = 0;
  return end;
}

/* ZeRO stage 2: the gradients' shards (held by a rank, or in pieces) move to the host region from
 * offset `base` on, as move_region moves a region; the buckets stay, moved down to the region's
 * start (they lay past the shards). Returns the end of what moved. */
static int64_t move_shards(tf_plan *plan, int64_t base) {
  int64_t start = plan->region_bytes[TF_REGION_GRADIENTS]; /* the buckets' first byte */
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_GRADIENTS && !moves_with_gradients(plan, b) && b->offset < start)
      start = b->offset;
  }
  int64_t end = base;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_GRADIENTS)
      continue;
    if (!moves_with_gradients(plan, b)) {
      b->offset -= start;
      continue;
    }
    b->region = TF_REGION_HOST;
    b->offset += base;
    if (b->held_by >= 0)
      end = b->offset + b->bytes > end ? b->offset + b->bytes : end;
  }
  plan->region_bytes[TF_REGION_GRADIENTS] -= start;
  return end;
}

/* The host region: the activations' copies where the plan placed them, then (optimizer) the
 * optimizer state, then (gradients) the gradients, each at its offset, then each arena buffer that
 * moves (moves_to_host); plan->host_bytes its size. */
static void place_on_host(tf_plan *plan, bool optimizer, bool gradients, const bool *on_host) {
  int64_t end = plan->host_bytes;
  if (optimizer)
    end = move_region(plan, TF_REGION_OPTIMIZER_STATE, align_up(end, plan->alignment));
  if (gradients && plan->zero == 2)
    end = move_shards(plan, align_up(end, plan->alignment));
  else if (gradients)
    end = move_region(plan, TF_REGION_GRADIENTS, align_up(end, plan->alignment));
  for (int32_t s = 0; s < plan->n_steps; s++)
    for (int32_t k = 0; on_host[s] && k < plan->steps[s].n_outputs; k++) {
      if (!moves_to_host(plan, on_host, plan->steps[s].outputs[k]))
        continue;
      tf_plan_buffer *b = &plan->buffers[plan->steps[s].outputs[k]];
      plan->report.arena_naive -= align_up(b->bytes, plan->alignment); /* its arena slot, without reuse */
      b->region = TF_REGION_HOST;
      b->offset = align_up(end, plan->alignment);
      b->first_step = b->last_step = -1;
      b->alias_of = -1;
      end = b->offset + b->bytes;
    }
  plan->host_bytes = end;
}

/* The device steps' new numbers: index[s] for a kept step; for a host step, the device step it
 * runs before. */
static int32_t renumber(const tf_plan *plan, const bool *on_host, int32_t *index) {
  int32_t kept = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    index[s] = on_host[s] ? kept : kept++;
  return kept;
}

/* The arena buffers' live steps in the new numbers: one a host step reads last lives to the device
 * step before it. */
static void renumber_buffers(tf_plan *plan, const bool *on_host, const int32_t *index) {
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_ARENA)
      continue;
    b->first_step = index[b->first_step];
    b->last_step = on_host[b->last_step] ? index[b->last_step] - 1 : index[b->last_step];
  }
}

/* Splits the step list: the host steps into plan->host_steps with their positions, the device steps
 * compacted in order (each step struct moves, names and inputs with it), live_bytes and the
 * micro-batch block's end renumbered. */
static tf_status split_steps(tf_plan *plan, const bool *on_host, const int32_t *index, int32_t kept) {
  const int32_t n_host = plan->n_steps - kept;
  plan->host_steps = malloc(sizeof(tf_plan_step) * (size_t)n_host);
  plan->host_at = malloc(sizeof(int32_t) * (size_t)n_host);
  if (!plan->host_steps || !plan->host_at) {
    free(plan->host_steps);
    free(plan->host_at);
    plan->host_steps = NULL;
    plan->host_at = NULL;
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--offload: no memory for %d host steps", n_host);
  }
  int32_t h = 0, micro = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    if (on_host[s]) {
      plan->host_steps[h] = plan->steps[s];
      plan->host_at[h++] = index[s];
      continue;
    }
    micro += s < plan->micro_steps;
    plan->steps[index[s]] = plan->steps[s];
    plan->report.live_bytes[index[s]] = plan->report.live_bytes[s];
  }
  plan->n_host_steps = n_host;
  plan->n_steps = kept;
  plan->micro_steps = micro;
  return NULL;
}

/* The arena's peak over the device steps that remain. */
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

/* What an offload moves (the --offload values). */
typedef struct offload_mode {
  bool optimizer, gradients, activations;
} offload_mode;

/* The --offload values of `mode` as the option lists them ("optimizer", "gradients,activations"). */
static const char *mode_name(offload_mode mode) {
  static const char *const names[8] = {"",          "activations",           "optimizer", "optimizer,activations",
                                       "gradients", "gradients,activations", "gradients", "gradients,activations"};
  return names[(mode.gradients ? 4 : 0) | (mode.optimizer ? 2 : 0) | (mode.activations ? 1 : 0)];
}

static void note(tf_plan *plan) {
  int32_t per_micro_batch = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    per_micro_batch += plan->host_steps[h].phase != TF_PHASE_OPTIMIZER;
  char line[400];
  snprintf(line, sizeof(line),
           "%s offloaded: %.2f MiB in host memory, %d steps on the host's cores (%d with each micro-batch), %.2f MiB "
           "moved between device and host per step\n",
           tf_plan_host_contents(plan), (double)plan->host_bytes / 1048576.0, plan->n_host_steps, per_micro_batch,
           (double)tf_plan_host_moved_bytes(plan) / 1048576.0);
  tf_plan_note(plan, line);
}

static tf_status offload(tf_plan *plan, const tf_target *target, offload_mode mode, bool *on_host, int32_t *index) {
  char why[512];
  if (mark_host_steps(plan, mode.optimizer, mode.gradients, on_host, why, sizeof(why)) ||
      refusal(plan, mode.optimizer, mode.gradients, on_host, why, sizeof(why)))
    return tf_status_new(TF_ERR_UNSUPPORTED, "--offload %s: graph '%s': %s", mode_name(mode), plan->graph_name, why);
  place_on_host(plan, mode.optimizer, mode.gradients, on_host);
  const int32_t kept = renumber(plan, on_host, index);
  renumber_buffers(plan, on_host, index);
  TF_RETURN_IF_ERROR(split_steps(plan, on_host, index, kept));
  trim_report(plan);
  tf_target_plan_overhead(target, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
  tf_target_plan_collectives(target, plan->ranks, &plan->overhead);
  note(plan);
  return NULL;
}

tf_status tf_offload_pass(tf_plan *plan, const tf_target *target, bool optimizer, bool gradients) {
  /* the activations' copies are in the emitted plan already: buffers in host memory */
  const offload_mode mode = {optimizer || gradients, gradients, plan->host_bytes > 0};
  if (target->kind == TF_TARGET_CPU)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--offload %s: the cpu target's device memory is host memory already; offloading moves "
                         "nothing (compile for --target cuda or vulkan)",
                         mode_name(mode));
  bool *on_host = calloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1), sizeof(bool));
  int32_t *index = calloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1), sizeof(int32_t));
  tf_status status = on_host && index ? offload(plan, target, mode, on_host, index)
                                      : tf_status_new(TF_ERR_OUT_OF_MEMORY, "--offload %s: no memory for %d steps",
                                                      mode_name(mode), plan->n_steps);
  free(on_host);
  free(index);
  return status;
}
