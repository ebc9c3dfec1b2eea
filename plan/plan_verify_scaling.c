/* The plan verifier's checks of dynamic loss scaling (tf_plan_verify, plan_verify.c): the seed the
 * runtime writes and the overflow check it reads must be what it takes them for. */
#include <inttypes.h>
#include <math.h>

#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

static bool valid_id(const tf_plan *plan, int32_t id) { return id >= 0 && id < plan->n_buffers; }

/* An f32 scalar (4 bytes, one element) in `region`. */
static bool is_f32_scalar(const tf_plan *plan, int32_t id, tf_region region) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return b->dtype == TF_F32 && b->bytes == 4 && b->region == region;
}

/* The step that writes buffer `id`, or -1 (the first one; the caller checks there is one at most
 * where that matters). */
static int32_t writer_of(const tf_plan *plan, int32_t id, int32_t *writers) {
  int32_t first = -1;
  *writers = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    for (int32_t k = 0; k < plan->steps[s].n_outputs; k++)
      if (plan->steps[s].outputs[k] == id) {
        first = first < 0 ? s : first;
        (*writers)++;
      }
  return first;
}

/* An overflow check in host memory (offloaded gradients): written by exactly one host step, of the
 * optimizer block; the host region keeps it for the runtime to read after the block. */
static tf_status check_on_host(const tf_plan *plan, int32_t check) {
  int32_t writers = 0, phase_ok = 1;
  for (int32_t s = 0; s < plan->n_host_steps; s++)
    for (int32_t k = 0; k < plan->host_steps[s].n_outputs; k++)
      if (plan->host_steps[s].outputs[k] == check) {
        writers++;
        phase_ok &= plan->host_steps[s].phase == TF_PHASE_OPTIMIZER;
      }
  if (writers != 1 || !phase_ok)
    return INVALID("overflow_check %s in host memory must be written by exactly one host step of the optimizer block "
                   "(written by %" PRId32 "%s)",
                   tf_plan_buffer_label(plan, check).text, writers, phase_ok ? "" : ", one outside that block");
  return NULL;
}

/* A ZeRO stage-2 plan's norm (clipping, loss scaling): an f32 scalar constant that no step writes, the
 * data-parallel job's sum of the ranks' partial sums of squares, written before each optimizer block,
 * so every rank reads the same value and skips (or not) the same update. */
static tf_status check_summed_by_job(const tf_plan *plan, int32_t check) {
  int32_t writers;
  writer_of(plan, check, &writers);
  if (!is_f32_scalar(plan, check, TF_REGION_PARAMETERS) || writers != 0)
    return INVALID("overflow_check %s of a ZeRO stage-2 plan must be an f32 scalar constant that no step writes (the "
                   "job sums it from the ranks; written by %" PRId32 " steps)",
                   tf_plan_buffer_label(plan, check).text, writers);
  return NULL;
}

/* Dynamic loss scaling and the skipped update: the runtime writes the seed and reads the overflow
 * check, so both must be what it takes them for. */
tf_status tf_plan_check_loss_scaling(const tf_plan *plan) {
  const int32_t seed = plan->loss_scale_seed, check = plan->overflow_check;
  int32_t writers;
  if (seed != -1) {
    if (!valid_id(plan, seed))
      return INVALID("loss_scale_seed is buffer id %" PRId32 ", outside 0..%" PRId32 " (or -1)", seed,
                     plan->n_buffers - 1);
    if (!plan->training)
      return INVALID("loss_scale_seed is set (%s), but only training plans scale the loss",
                     tf_plan_buffer_label(plan, seed).text);
    if (!is_f32_scalar(plan, seed, TF_REGION_PARAMETERS) || plan->buffers[seed].role != TF_ROLE_CONSTANT)
      return INVALID("loss_scale_seed %s must be an f32 scalar constant in the parameters region",
                     tf_plan_buffer_label(plan, seed).text);
    if (writer_of(plan, seed, &writers) >= 0)
      return INVALID("loss_scale_seed %s is written by a step; the runtime alone sets it",
                     tf_plan_buffer_label(plan, seed).text);
    if (check == -1)
      return INVALID("loss_scale_seed is set but overflow_check is -1: a scaled plan must detect overflow");
    int exponent;
    const double scale = plan->training_config.loss_scale;
    if (frexp(scale, &exponent) != 0.5 || exponent - 1 < TF_LOSS_SCALE_MIN_LOG2 ||
        exponent - 1 > TF_LOSS_SCALE_MAX_LOG2)
      return INVALID("the initial loss scale is %g; it must be a power of two from 2^%d to 2^%d", scale,
                     TF_LOSS_SCALE_MIN_LOG2, TF_LOSS_SCALE_MAX_LOG2);
  }
  if (check == -1)
    return NULL;
  if (!valid_id(plan, check))
    return INVALID("overflow_check is buffer id %" PRId32 ", outside 0..%" PRId32 " (or -1)", check,
                   plan->n_buffers - 1);
  if (is_f32_scalar(plan, check, TF_REGION_HOST))
    return check_on_host(plan, check);
  if (plan->zero == 2 && plan->buffers[check].role == TF_ROLE_CONSTANT) /* the ranks' sum, the job writes it */
    return check_summed_by_job(plan, check);
  if (!is_f32_scalar(plan, check, TF_REGION_ARENA))
    return INVALID("overflow_check %s must be an f32 scalar in the arena (or in host memory, written by a host step)",
                   tf_plan_buffer_label(plan, check).text);
  const int32_t writer = writer_of(plan, check, &writers);
  if (writer < plan->micro_steps || writers != 1)
    return INVALID("overflow_check %s must be written by exactly one step of the optimizer block (written by %" PRId32
                   " steps, the first %" PRId32 ")",
                   tf_plan_buffer_label(plan, check).text, writers, writer);
  if (plan->buffers[check].last_step != plan->n_steps - 1)
    return INVALID("overflow_check %s is live to step %" PRId32 "; the runtime reads it after the last step (%" PRId32
                   ")",
                   tf_plan_buffer_label(plan, check).text, plan->buffers[check].last_step, plan->n_steps - 1);
  return NULL;
}
