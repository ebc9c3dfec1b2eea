/* tf_plan_verify: every invariant of a plan, checked before a plan is saved and after it is loaded
 * (a plan file is untrusted input; the runtime allocates and indexes memory by its numbers).
 *
 * The checks run in an order where each relies only on what came before: the plan's header and
 * counts; each buffer on its own (role, region, dtype, shape, exact size, aligned offset inside its
 * region, live interval); buffers that refer to others (owner, io_twin, ZeRO's views:
 * plan_verify_views.c); memory (persistent
 * regions disjoint, arena buffers live at a common step disjoint: plan_verify_memory.c); each step
 * (op, phase, arity, operands, liveness, the op's shape rule); every arena buffer written; and the
 * report against the numbers it summarises. Messages name the buffer or step and the numbers. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linear_loss.h"
#include "core/ops.h"
#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

tf_plan_label tf_plan_buffer_label(const tf_plan *plan, int32_t id) {
  tf_plan_label label;
  const char *name = plan->buffers[id].name ? plan->buffers[id].name : "";
  size_t length = strlen(name);
  if (length > 80)
    snprintf(label.text, sizeof(label.text), "buffer %" PRId32 " '%.77s...'", id, name);
  else
    snprintf(label.text, sizeof(label.text), "buffer %" PRId32 " '%s'", id, name);
  return label;
}

const tf_plan_step *tf_plan_step_at(const tf_plan *plan, int32_t s) {
  return s < plan->n_steps ? &plan->steps[s] : &plan->host_steps[s - plan->n_steps];
}

tf_plan_label tf_plan_step_label(const tf_plan *plan, int32_t s) {
  tf_plan_label label;
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  const char *name = step->name ? step->name : "";
  const char *dots = strlen(name) > 80 ? "..." : "";
  if (s < plan->n_steps)
    snprintf(label.text, sizeof(label.text), "step %" PRId32 " '%.77s%s' (%s)", s, name, dots, tf_op_name(step->op));
  else
    snprintf(label.text, sizeof(label.text), "host step %" PRId32 " '%.77s%s' (%s)", s - plan->n_steps, name, dots,
             tf_op_name(step->op));
  return label;
}

static tf_plan_label shape_text(tf_dtype dtype, int32_t rank, const int64_t *shape) {
  tf_plan_label label;
  size_t used = (size_t)snprintf(label.text, sizeof(label.text), "%s [", tf_dtype_name(dtype));
  for (int32_t d = 0; d < rank && used < sizeof(label.text); d++)
    used += (size_t)snprintf(label.text + used, sizeof(label.text) - used, "%s%" PRId64, d ? "," : "", shape[d]);
  if (used < sizeof(label.text))
    snprintf(label.text + used, sizeof(label.text) - used, "]");
  return label;
}

static bool valid_id(const tf_plan *plan, int32_t id) { return id >= 0 && id < plan->n_buffers; }

/* The region a role's buffers live in. */
static tf_region region_of_role(tf_buffer_role role) {
  static const tf_region regions[TF_ROLE_COUNT] = {
      TF_REGION_PARAMETERS, TF_REGION_PARAMETERS, TF_REGION_GRADIENTS, TF_REGION_OPTIMIZER_STATE, TF_REGION_IO,
      TF_REGION_IO,         TF_REGION_ARENA,      TF_REGION_ARENA,     TF_REGION_PARAMETERS};
  return regions[role];
}

/* ---- the plan as a whole ---- */

/* Host steps of the micro-batch block that touch a gradient (an offloaded gradient's accumulation):
 * none at ZeRO stage 2, whose reductions at the pauses read the gradients' buckets as the backward
 * pass writes them (its host runs the updates and the activations' copies only); stage 1 sums the
 * whole gradients after the block, where they are. An operand out of range counts
 * (check_references refuses it later). */
static int32_t micro_gradient_steps(const tf_plan *plan) {
  int32_t count = 0;
  for (int32_t h = 0; h < plan->n_host_steps && plan->host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    bool touches = false;
    for (int32_t k = 0; step->phase != TF_PHASE_OPTIMIZER && k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      touches |= !valid_id(plan, id) || plan->buffers[id].role == TF_ROLE_GRADIENT;
    }
    count += touches;
  }
  return count;
}

static tf_status check_header(const tf_plan *plan) {
  if (plan->version == 0)
    return INVALID("plan version is 0 (missing)");
  if (plan->version > TF_PLAN_VERSION)
    return INVALID("plan version %" PRIu32 " is newer than this build reads (up to %d)", plan->version,
                   TF_PLAN_VERSION);
  if (plan->alignment < 1 || (plan->alignment & (plan->alignment - 1)) != 0)
    return INVALID("alignment %" PRId64 " is not a power of two >= 1", plan->alignment);
  int64_t total = 0;
  for (int r = 0; r < TF_REGION_COUNT; r++) {
    if (plan->region_bytes[r] < 0)
      return INVALID("region %s has %" PRId64 " bytes; a size is >= 0", tf_region_name((tf_region)r),
                     plan->region_bytes[r]);
    if (__builtin_add_overflow(total, plan->region_bytes[r], &total))
      return INVALID("the regions' sizes sum past int64 (region %s adds %" PRId64 " bytes)",
                     tf_region_name((tf_region)r), plan->region_bytes[r]);
  }
  if (plan->n_buffers < 0 || (plan->n_buffers > 0 && !plan->buffers))
    return INVALID("%" PRId32 " buffers%s", plan->n_buffers, plan->n_buffers > 0 ? " but no buffer array" : "");
  if (plan->n_steps < 0 || (plan->n_steps > 0 && !plan->steps))
    return INVALID("%" PRId32 " steps%s", plan->n_steps, plan->n_steps > 0 ? " but no step array" : "");
  if (plan->n_host_steps < 0 || (plan->n_host_steps > 0 && !plan->host_steps))
    return INVALID("%" PRId32 " host steps%s", plan->n_host_steps, plan->n_host_steps > 0 ? " but no step array" : "");
  if (plan->host_bytes < 0 || (plan->n_host_steps == 0 && plan->host_bytes != 0))
    return INVALID("%" PRId64 " bytes of host memory for %" PRId32 " host steps; none without host steps, >= 0 with "
                   "them",
                   plan->host_bytes, plan->n_host_steps);
  if (plan->ranks < 0 || plan->ranks > TF_PLAN_MAX_RANKS || (plan->ranks > 1 && !plan->training))
    return INVALID("ranks %" PRId32 ": a data-parallel job has 1 to %d ranks, and only a training plan more than one",
                   plan->ranks, TF_PLAN_MAX_RANKS);
  if (plan->n_host_steps > 0 && !plan->training)
    return INVALID("an inference plan with %" PRId32 " host steps; only a training plan's updates run on the host",
                   plan->n_host_steps);
  TF_RETURN_IF_ERROR(tf_plan_check_host_positions(plan));
  const int32_t micro_host_steps = micro_gradient_steps(plan);
  if (plan->zero < 0 || plan->zero > 2 || (plan->zero > 0 && plan->ranks < 2) ||
      (plan->zero == 2 && micro_host_steps > 0))
    return INVALID("ZeRO stage %" PRId32 " of a plan of %" PRId32 " ranks with %" PRId32 " host steps in the "
                   "micro-batch block that touch a gradient; stages are 0, 1 and 2, 1 and 2 for a data-parallel "
                   "plan (2 ranks or more), and stage 2's host steps, if any, are the optimizer block's and the "
                   "activations' copies",
                   plan->zero, plan->ranks, micro_host_steps);
  if (plan->n_symbols < 0 || (plan->n_symbols > 0 && (!plan->symbol_names || !plan->symbol_values)))
    return INVALID("%" PRId32 " symbols%s", plan->n_symbols, plan->n_symbols > 0 ? " but no names or values" : "");
  if (plan->n_outputs < 0 || (plan->n_outputs > 0 && !plan->outputs))
    return INVALID("%" PRId32 " outputs%s", plan->n_outputs, plan->n_outputs > 0 ? " but no output array" : "");
  for (int32_t i = 0; i < plan->n_symbols; i++) {
    if (!plan->symbol_names[i])
      return INVALID("symbol %" PRId32 " has no name", i);
    if (plan->symbol_values[i] < 1)
      return INVALID("symbol %" PRId32 " '%s' is bound to %" PRId64 "; symbol values are >= 1", i,
                     plan->symbol_names[i], plan->symbol_values[i]);
  }
  return NULL;
}

/* The device overhead: at most TF_MAX_OVERHEAD_PARTS named parts of >= 0 bytes whose sum, with
 * the regions', stays inside int64 (a budget is compared with that sum). */
static tf_status check_overhead(const tf_plan *plan) {
  const tf_device_overhead *o = &plan->overhead;
  if (o->n_parts < 0 || o->n_parts > TF_MAX_OVERHEAD_PARTS)
    return INVALID("%" PRId32 " device overhead parts; a plan holds 0..%d", o->n_parts, TF_MAX_OVERHEAD_PARTS);
  for (int32_t i = 0; i < o->n_parts; i++) {
    const tf_overhead_part *part = &o->parts[i];
    if (!memchr(part->name, 0, sizeof(part->name)) || !memchr(part->source, 0, sizeof(part->source)) ||
        part->name[0] == '\0')
      return INVALID("device overhead part %" PRId32 " has no name or an unterminated one", i);
    if (part->bytes < 0)
      return INVALID("device overhead part '%s' has %" PRId64 " bytes; a size is >= 0", part->name, part->bytes);
  }
  if (tf_plan_device_total(plan) == INT64_MAX)
    return INVALID("the regions and the device overhead sum past int64");
  return NULL;
}

static tf_status check_program(const tf_plan *plan) {
  if (plan->micro_steps < 0 || plan->micro_steps > plan->n_steps)
    return INVALID("micro_steps is %" PRId32 "; the micro-batch block is steps [0, micro_steps) of %" PRId32
                   ", so it must be in [0, %" PRId32 "]",
                   plan->micro_steps, plan->n_steps, plan->n_steps);
  if (plan->accumulate < 1)
    return INVALID("accumulate is %" PRId32 "; the micro-batch block runs k >= 1 times", plan->accumulate);
  if (plan->micro_batch < 0 || plan->global_batch < 0)
    return INVALID("micro_batch %" PRId64 " and global_batch %" PRId64 " must be >= 0", plan->micro_batch,
                   plan->global_batch);
  if (plan->training) {
    int64_t product;
    if (plan->micro_batch < 1)
      return INVALID("a training plan's micro_batch is %" PRId64 "; it must be >= 1", plan->micro_batch);
    const int64_t ranks = plan->ranks > 1 ? plan->ranks : 1;
    if (__builtin_mul_overflow(plan->micro_batch, (int64_t)plan->accumulate * ranks, &product) ||
        product != plan->global_batch)
      return INVALID("micro_batch %" PRId64 " x accumulate %" PRId32 " x ranks %" PRId64
                     " must equal global_batch %" PRId64,
                     plan->micro_batch, plan->accumulate, ranks, plan->global_batch);
    if (plan->loss == -1)
      return INVALID("a training plan has no loss buffer (loss is -1)");
  }
  if (plan->loss != -1 && !valid_id(plan, plan->loss))
    return INVALID("loss is buffer id %" PRId32 ", outside 0..%" PRId32 " (or -1)", plan->loss, plan->n_buffers - 1);
  for (int32_t i = 0; i < plan->n_outputs; i++)
    if (!valid_id(plan, plan->outputs[i]))
      return INVALID("output %" PRId32 " is buffer id %" PRId32 ", outside 0..%" PRId32, i, plan->outputs[i],
                     plan->n_buffers - 1);
  return NULL;
}

/* ---- buffers ---- */

/* bytes == dtype size x elements, with every product checked. */
static tf_status check_size(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->rank < 0 || b->rank > TF_MAX_RANK)
    return INVALID("%s has rank %" PRId32 "; ranks are 0 to %d", tf_plan_buffer_label(plan, id).text, b->rank,
                   TF_MAX_RANK);
  int64_t elements = 1;
  bool overflow = false;
  for (int32_t d = 0; d < b->rank; d++) {
    if (b->shape[d] < 0)
      return INVALID("%s has dim %" PRId64 " at axis %" PRId32 "; dims are >= 0", tf_plan_buffer_label(plan, id).text,
                     b->shape[d], d);
    overflow = overflow || __builtin_mul_overflow(elements, b->shape[d], &elements);
  }
  int64_t bytes;
  if (overflow || __builtin_mul_overflow(elements, tf_dtype_size(b->dtype), &bytes))
    return INVALID("%s: %s holds more bytes than int64 can count", tf_plan_buffer_label(plan, id).text,
                   shape_text(b->dtype, b->rank, b->shape).text);
  if (b->bytes != bytes)
    return INVALID("%s has %" PRId64 " bytes but %s needs %" PRId64 " (dtype size %" PRId64 " x %" PRId64
                   " elements): bytes must equal dtype x shape",
                   tf_plan_buffer_label(plan, id).text, b->bytes, shape_text(b->dtype, b->rank, b->shape).text, bytes,
                   tf_dtype_size(b->dtype), elements);
  return NULL;
}

static tf_status check_placement(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  int64_t region_size = b->region == TF_REGION_HOST ? plan->host_bytes : plan->region_bytes[b->region];
  if (b->offset < 0 || b->offset % plan->alignment != 0)
    return INVALID("%s is at offset %" PRId64
                   " in region %s: misaligned, offsets are multiples of the alignment %" PRId64 " and >= 0",
                   tf_plan_buffer_label(plan, id).text, b->offset, tf_region_name(b->region), plan->alignment);
  if (b->offset > region_size || b->bytes > region_size - b->offset)
    return INVALID("%s at offset %" PRId64 " with %" PRId64 " bytes ends past its region %s of %" PRId64 " bytes",
                   tf_plan_buffer_label(plan, id).text, b->offset, b->bytes, tf_region_name(b->region), region_size);
  return NULL;
}

static tf_status check_interval(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->region == TF_REGION_ARENA) {
    if (b->first_step < 0 || b->first_step > b->last_step || b->last_step >= plan->n_steps)
      return INVALID("%s in the arena is live over steps [%" PRId32 ", %" PRId32
                     "]; arena buffers need 0 <= first_step "
                     "<= last_step < %" PRId32 " (the step count)",
                     tf_plan_buffer_label(plan, id).text, b->first_step, b->last_step, plan->n_steps);
  } else if (b->first_step != -1 || b->last_step != -1) {
    return INVALID("%s in region %s has live steps [%" PRId32 ", %" PRId32 "]; only arena buffers have them (-1, -1)",
                   tf_plan_buffer_label(plan, id).text, tf_region_name(b->region), b->first_step, b->last_step);
  }
  return NULL;
}

static tf_status check_buffer(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (!b->name)
    return INVALID("buffer %" PRId32 " has no name", id);
  if ((int)b->role < 0 || b->role >= TF_ROLE_COUNT)
    return INVALID("%s has unknown role %d (roles are 0..%d)", tf_plan_buffer_label(plan, id).text, (int)b->role,
                   TF_ROLE_COUNT - 1);
  if ((int)b->region < 0 || b->region > TF_REGION_HOST)
    return INVALID("%s has unknown region %d (regions are 0..%d)", tf_plan_buffer_label(plan, id).text, (int)b->region,
                   TF_REGION_HOST);
  if (tf_dtype_size(b->dtype) <= 0)
    return INVALID("%s has unknown dtype %d", tf_plan_buffer_label(plan, id).text, (int)b->dtype);
  /* offloaded: optimizer state, gradients and what the host steps write (check_outputs) */
  const bool offloaded =
      b->region == TF_REGION_HOST && plan->n_host_steps > 0 &&
      (b->role == TF_ROLE_OPTIMIZER_STATE || b->role == TF_ROLE_GRADIENT || b->role == TF_ROLE_ACTIVATION);
  if (b->region != region_of_role(b->role) && !offloaded)
    return INVALID("%s has role %s in region %s; role %s belongs in region %s (wrong role/region)",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), tf_region_name(b->region),
                   tf_role_name(b->role), tf_region_name(region_of_role(b->role)));
  TF_RETURN_IF_ERROR(check_size(plan, id));
  if (b->held_by >= 0) /* else held in pieces, no memory of its own (tf_plan_check_views) */
    TF_RETURN_IF_ERROR(check_placement(plan, id));
  TF_RETURN_IF_ERROR(check_interval(plan, id));
  if ((int)b->init.kind < 0 || b->init.kind >= TF_INIT_COUNT)
    return INVALID("%s has unknown initializer kind %d", tf_plan_buffer_label(plan, id).text, (int)b->init.kind);
  if (b->init.kind == TF_INIT_EXTERNAL && (!b->init.file || !b->init.key))
    return INVALID("%s is initialised from an external file but names no file or key",
                   tf_plan_buffer_label(plan, id).text);
  return NULL;
}

/* Whether step s reads `id` as an input that its op lets output 0 lie on (tf_op_output_may_alias),
 * and no other arena input of the step overlaps that memory. Operand ids are range-checked here:
 * steps are validated later. */
static bool alias_step_ok(const tf_plan *plan, const tf_plan_step *step, int32_t id) {
  const tf_plan_buffer *a = &plan->buffers[id];
  int32_t aliased = -1;
  for (int32_t i = 0; i < step->n_inputs && step->inputs; i++) {
    int32_t in = step->inputs[i];
    if (!valid_id(plan, in))
      return false;
    if (in == id && aliased < 0 && tf_op_output_may_alias(step->op, i)) {
      aliased = i;
      continue;
    }
    const tf_plan_buffer *other = &plan->buffers[in];
    if (other->region == TF_REGION_ARENA && other->offset < a->offset + a->bytes &&
        a->offset < other->offset + other->bytes)
      return false;
  }
  return aliased >= 0;
}

/* An alias is an output on its input's memory (a reshape's, or another op's that
 * tf_op_output_may_alias allows): both arena activations with the same offset, bytes and dtype. A
 * reshape's output is a view: its input may live on. Any other op writes over its input, so the
 * input's last step is the one that writes the output (and nothing else on that memory lives on:
 * tf_plan_check_arena_disjoint). */
static tf_status check_alias(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->alias_of == -1)
    return NULL;
  if (!valid_id(plan, b->alias_of) || b->alias_of == id)
    return INVALID("%s has alias_of %" PRId32 ", not another buffer", tf_plan_buffer_label(plan, id).text, b->alias_of);
  const tf_plan_buffer *a = &plan->buffers[b->alias_of];
  bool shape_ok = a->region == TF_REGION_ARENA && b->region == TF_REGION_ARENA && a->role == TF_ROLE_ACTIVATION &&
                  b->role == TF_ROLE_ACTIVATION && a->offset == b->offset && a->bytes == b->bytes &&
                  a->dtype == b->dtype && a->alias_of != id;
  int32_t s = b->first_step;
  const tf_plan_step *step = s >= 0 && s < plan->n_steps ? &plan->steps[s] : NULL;
  bool view = step && step->op == TF_OP_RESHAPE;
  bool step_ok = step && step->n_outputs >= 1 && step->outputs[0] == id &&
                 (view ? a->last_step >= s : a->last_step == s) && alias_step_ok(plan, step, b->alias_of);
  if (!shape_ok || !step_ok)
    return INVALID(
        "%s aliases %s, but an alias must be the output of a step that may write over that input (a "
        "reshape, cross_entropy_grad), on the same offset and bytes, and the step must read the input (last, "
        "unless a reshape) and no other overlapping input (input live to step %" PRId32 ", output from step %" PRId32
        ")",
        tf_plan_buffer_label(plan, id).text, tf_plan_buffer_label(plan, b->alias_of).text, a->last_step, b->first_step);
  return NULL;
}

/* The feed cuts a batched input's file into micro_batch rows of shape[1..]: its first dim must be the
 * micro-batch, or the rows would fall short of the buffer or run past it. */
static tf_status check_batch_axis(const tf_plan *plan, int32_t id, bool fed) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (!fed && b->unbatched)
    return INVALID("%s (role %s) is marked unbatched; only inputs and labels are fed",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role));
  if (!fed || b->unbatched || (b->rank >= 1 && b->shape[0] == plan->micro_batch))
    return NULL;
  return INVALID("%s %s is fed by micro-batches of %" PRId64 " samples, but its first dim is not %" PRId64
                 " (a plan of an older tightfit that fed static shapes wrong: compile the graph again)",
                 tf_plan_buffer_label(plan, id).text, shape_text(b->dtype, b->rank, b->shape).text, plan->micro_batch,
                 plan->micro_batch);
}

/* owner and io_twin point at buffers that check_buffer has accepted. */
static tf_status check_references(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  bool owned = b->role == TF_ROLE_GRADIENT || b->role == TF_ROLE_OPTIMIZER_STATE;
  if (!owned && b->owner != -1)
    return INVALID("%s (role %s) has owner %" PRId32 "; only gradients and optimizer state have an owner (-1)",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), b->owner);
  if (owned && (!valid_id(plan, b->owner) || plan->buffers[b->owner].role != TF_ROLE_PARAMETER))
    return INVALID("%s (role %s) has owner %" PRId32 ", which is not a parameter buffer",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), b->owner);
  bool fed = b->role == TF_ROLE_INPUT || b->role == TF_ROLE_LABEL;
  if (!fed && b->io_twin != -1)
    return INVALID("%s (role %s) has io_twin %" PRId32 "; only inputs and labels have one (-1)",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), b->io_twin);
  if (fed && b->io_twin != -1) {
    if (!valid_id(plan, b->io_twin) || b->io_twin == id)
      return INVALID("%s has io_twin %" PRId32 ", not another buffer (ids 0..%" PRId32 ", or -1)",
                     tf_plan_buffer_label(plan, id).text, b->io_twin, plan->n_buffers - 1);
    const tf_plan_buffer *twin = &plan->buffers[b->io_twin];
    if (twin->io_twin != id || twin->role != b->role || twin->dtype != b->dtype || twin->rank != b->rank ||
        memcmp(twin->shape, b->shape, sizeof(int64_t) * (size_t)b->rank) != 0)
      return INVALID("%s (%s %s) and its io_twin %s (%s %s, twin %" PRId32 ") are not two halves of one double buffer",
                     tf_plan_buffer_label(plan, id).text, tf_role_name(b->role),
                     shape_text(b->dtype, b->rank, b->shape).text, tf_plan_buffer_label(plan, b->io_twin).text,
                     tf_role_name(twin->role), shape_text(twin->dtype, twin->rank, twin->shape).text, twin->io_twin);
    if (twin->unbatched != b->unbatched)
      return INVALID("%s and its io_twin %s disagree on whether they hold a micro-batch (unbatched)",
                     tf_plan_buffer_label(plan, id).text, tf_plan_buffer_label(plan, b->io_twin).text);
  }
  return check_batch_axis(plan, id, fed);
}

/* ---- steps ---- */

/* Attributes the shape rules trust: the op's family, and counts inside their arrays. */
static tf_status check_attrs(const tf_plan *plan, int32_t s, const tf_op_info *info) {
  const tf_attrs *attrs = &tf_plan_step_at(plan, s)->attrs;
  if (attrs->kind != info->attrs)
    return INVALID("%s carries %s attributes (kind %d); %s takes %s attributes", tf_plan_step_label(plan, s).text,
                   tf_attr_kind_name(attrs->kind), (int)attrs->kind, info->name, tf_attr_kind_name(info->attrs));
  int32_t count = attrs->kind == TF_ATTR_REDUCE      ? attrs->u.reduce.n_axes
                  : attrs->kind == TF_ATTR_TRANSPOSE ? attrs->u.transpose.rank
                  : attrs->kind == TF_ATTR_SHAPE     ? attrs->u.shape.shape.rank
                                                     : 0;
  if (count < 0 || count > TF_MAX_RANK)
    return INVALID("%s: its %s attributes hold %" PRId32 " entries; at most %d", tf_plan_step_label(plan, s).text,
                   tf_attr_kind_name(attrs->kind), count, TF_MAX_RANK);
  for (int32_t d = 0; attrs->kind == TF_ATTR_SHAPE && d < count; d++) {
    tf_dim dim = attrs->u.shape.shape.dims[d];
    if (dim.symbol != -1 || dim.size < -1)
      return INVALID("%s: target dim %" PRId32 " is {size %" PRId64 ", symbol %" PRId32 "}; plans hold numbers only "
                     "(size >= -1, symbol -1)",
                     tf_plan_step_label(plan, s).text, d, dim.size, dim.symbol);
  }
  return NULL;
}

/* The phase belongs to the block the step is in, and inference plans only run forward. */
static tf_status check_phase(const tf_plan *plan, int32_t s) {
  tf_phase phase = tf_plan_step_at(plan, s)->phase;
  if (s >= plan->n_steps)
    return NULL; /* a host step's phase is its block's (tf_plan_check_host_positions) */
  if ((int)phase < 0 || phase >= TF_PHASE_COUNT)
    return INVALID("%s has unknown phase %d (phases are 0..%d)", tf_plan_step_label(plan, s).text, (int)phase,
                   TF_PHASE_COUNT - 1);
  if (!plan->training && phase != TF_PHASE_FORWARD)
    return INVALID("%s is in phase %s in an inference plan, which runs forward steps only",
                   tf_plan_step_label(plan, s).text, tf_phase_name(phase));
  if (phase == TF_PHASE_FORWARD && s > 0 && plan->steps[s - 1].phase != TF_PHASE_FORWARD)
    return INVALID("%s is a forward step after step %" PRId32 " in phase %s; the forward steps are a prefix of the "
                   "micro-batch block (a loss is evaluated by running them alone)",
                   tf_plan_step_label(plan, s).text, s - 1, tf_phase_name(plan->steps[s - 1].phase));
  bool in_micro_block = s < plan->micro_steps;
  /* With one micro-batch per step the block runs once, and an update may run in the backward pass
   * (check_updates_in_backward orders it after its gradient and its parameter's readers). */
  if (phase == TF_PHASE_OPTIMIZER && in_micro_block && plan->accumulate != 1)
    return INVALID("%s is an optimizer step inside the micro-batch block [0, %" PRId32 "), which runs %" PRId32
                   " times per training step",
                   tf_plan_step_label(plan, s).text, plan->micro_steps, plan->accumulate);
  if ((phase == TF_PHASE_FORWARD || phase == TF_PHASE_RECOMPUTE || phase == TF_PHASE_BACKWARD) && !in_micro_block)
    return INVALID("%s in phase %s lies in the optimizer block [%" PRId32 ", %" PRId32
                   "); it belongs in the micro-batch "
                   "block",
                   tf_plan_step_label(plan, s).text, tf_phase_name(phase), plan->micro_steps, plan->n_steps);
  return NULL;
}

/* Bit i of an op table mask (8 bits: variadic ops have up to 127 inputs, none of them flagged). */
static bool has_bit(uint8_t mask, int32_t i) { return i < 8 && ((mask >> i) & 1u); }

static tf_status check_input(const tf_plan *plan, int32_t s, int32_t i, const tf_op_info *info) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  int32_t id = step->inputs[i];
  if (!valid_id(plan, id))
    return INVALID("%s: input %" PRId32 " is buffer id %" PRId32 ", outside 0..%" PRId32,
                   tf_plan_step_label(plan, s).text, i, id, plan->n_buffers - 1);
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->region == TF_REGION_HOST && s < plan->n_steps)
    return INVALID("%s reads %s, which lies in host memory; only host steps touch the host region",
                   tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
  /* A host step runs before device step host_at (after step host_at - 1): an arena buffer it reads is
   * written by then and still live. */
  const int32_t before = s >= plan->n_steps ? plan->host_at[s - plan->n_steps] - 1 : 0;
  if (s >= plan->n_steps && b->region == TF_REGION_ARENA && !has_bit(info->shape_only, i) &&
      (b->first_step > before || b->last_step < before))
    return INVALID("%s reads %s, live over device steps [%" PRId32 ", %" PRId32 "]; the host step runs after device "
                   "step %" PRId32 ", so what it reads in the arena is written before it and lives to it",
                   tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, b->first_step, b->last_step,
                   before);
  if (has_bit(info->in_place, i)) {
    bool writable = b->role == TF_ROLE_PARAMETER || b->role == TF_ROLE_GRADIENT || b->role == TF_ROLE_OPTIMIZER_STATE ||
                    (b->role == TF_ROLE_STATE && step->op == TF_OP_BATCH_NORM_RUNNING);
    if (!writable)
      return INVALID("%s updates input %" PRId32 " %s in place, but it has role %s in region %s; in-place operands are "
                     "parameters, gradients or optimizer state (and running statistics, by batch_norm_running), never "
                     "arena buffers",
                     tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, tf_role_name(b->role),
                     tf_region_name(b->region));
    /* Running statistics change once per micro-batch, in its forward pass: a recomputed or
     * optimizer-block update would count a micro-batch twice or not at all. */
    if (b->role == TF_ROLE_STATE && (s >= plan->micro_steps || step->phase != TF_PHASE_FORWARD))
      return INVALID("%s updates running statistics %s in phase %s%s; they are updated in the forward pass of the "
                     "micro-batch block [0, %" PRId32 ") only",
                     tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, tf_phase_name(step->phase),
                     s >= plan->micro_steps ? " in the optimizer block" : "", plan->micro_steps);
    /* The micro-batch block runs `accumulate` times per step: what its steps update in place is the
     * gradient being summed (accumulate, embedding_grad_accumulate, matmul_accumulate). */
    bool update_in_backward = plan->accumulate == 1 && step->phase == TF_PHASE_OPTIMIZER;
    if (s < plan->micro_steps && b->role != TF_ROLE_GRADIENT && b->role != TF_ROLE_STATE && !update_in_backward)
      return INVALID("%s updates input %" PRId32 " %s (role %s) in place inside the micro-batch block [0, %" PRId32
                     "), which runs %" PRId32 " times per training step; there in-place operands are gradients "
                     "(parameters and optimizer state change in the optimizer block only)",
                     tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, tf_role_name(b->role),
                     plan->micro_steps, plan->accumulate);
    /* The kernels read their other inputs while they write this one (a gemm with beta = 1 reads A
     * and B while it writes C): the same buffer twice would read partly updated values. */
    for (int32_t j = 0; j < step->n_inputs; j++)
      if (j != i && step->inputs[j] == id)
        return INVALID("%s updates input %" PRId32 " %s in place and also reads it as input %" PRId32
                       " (an in-place operand aliased by another input)",
                       tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, j);
  }
  if (b->region != TF_REGION_ARENA || has_bit(info->shape_only, i) || s >= plan->n_steps)
    return NULL;
  if (b->first_step > s || (b->first_step == s && !tf_plan_host_writes_before(plan, id, s)))
    return INVALID("%s reads input %" PRId32 " %s before it is written: it is written at step %" PRId32
                   " (read before write)",
                   tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, b->first_step);
  if (b->last_step < s)
    return INVALID("%s reads input %" PRId32 " %s after its last step %" PRId32
                   ": its memory may already hold another buffer (read after last_step)",
                   tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, b->last_step);
  return NULL;
}

/* writer[b]: the step that writes arena buffer b (or gradient b, with accumulate 1), -1 until one does. */
static tf_status check_outputs(const tf_plan *plan, int32_t s, int32_t *writer) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  if (s >= plan->n_steps)
    return tf_plan_check_host_outputs(plan, s, writer);
  for (int32_t i = 0; i < step->n_outputs; i++) {
    int32_t id = step->outputs[i];
    if (!valid_id(plan, id))
      return INVALID("%s: output %" PRId32 " is buffer id %" PRId32 ", outside 0..%" PRId32,
                     tf_plan_step_label(plan, s).text, i, id, plan->n_buffers - 1);
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_HOST)
      return INVALID("%s writes output %" PRId32 " to %s, which lies in host memory; only host steps touch the host "
                     "region",
                     tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text);
    /* With one micro-batch per step, a backward step (or the fused loss head's single pass, in the
     * forward pass) may write a parameter's gradient straight into the gradients region (once;
     * check_gradient_reads orders its readers after it). */
    bool gradient = b->role == TF_ROLE_GRADIENT && plan->accumulate == 1 && s < plan->micro_steps &&
                    (step->phase == TF_PHASE_BACKWARD ||
                     (tf_linear_loss_is_train(step->op) && i > 0)); /* the fused head's gradients */
    if (b->role != TF_ROLE_ACTIVATION && !gradient)
      return INVALID("%s writes output %" PRId32 " to %s, role %s in region %s; step outputs are arena activations, "
                     "or gradients written by a backward step when the plan accumulates 1 micro-batch",
                     tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, tf_role_name(b->role),
                     tf_region_name(b->region));
    if (gradient) {
      if (writer[id] >= 0)
        return INVALID("%s writes %s twice", tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
      writer[id] = s;
      continue;
    }
    if (b->first_step != s)
      return INVALID("%s writes output %s, whose first_step is %" PRId32 ": an output's live interval starts at the "
                     "step that writes it (output first_step mismatch)",
                     tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, b->first_step);
    if (writer[id] >= 0)
      return INVALID("%s writes %s twice", tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text);
    writer[id] = s;
  }
  int32_t w = step->workspace;
  if (w == -1)
    return NULL;
  if (!valid_id(plan, w) || plan->buffers[w].role != TF_ROLE_WORKSPACE || plan->buffers[w].first_step != s ||
      plan->buffers[w].last_step != s)
    return INVALID("%s has workspace %" PRId32 "%s%s; a workspace is a workspace-role arena buffer live at its step "
                   "only (bad workspace)",
                   tf_plan_step_label(plan, s).text, w, valid_id(plan, w) ? ", " : " (no such buffer)",
                   valid_id(plan, w) ? tf_plan_buffer_label(plan, w).text : "");
  if (writer[w] >= 0)
    return INVALID("%s: workspace %s is also used by step %" PRId32, tf_plan_step_label(plan, s).text,
                   tf_plan_buffer_label(plan, w).text, writer[w]);
  writer[w] = s;
  return NULL;
}

static tf_shape_operand operand_of(const tf_plan_buffer *b) {
  static const tf_tensor_kind kinds[TF_ROLE_COUNT] = {TF_PARAMETER, TF_CONSTANT, TF_ACTIVATION, TF_ACTIVATION,
                                                      TF_INPUT,     TF_LABEL,    TF_ACTIVATION, TF_ACTIVATION};
  return (tf_shape_operand){b->name, b->dtype, kinds[b->role], b->rank, b->shape};
}

/* The op's shape rule, run on the input buffers, reproduces every output buffer exactly. */
static tf_status check_shapes(const tf_plan *plan, int32_t s, const tf_op_info *info) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  tf_shape_operand operands[TF_OP_VARIADIC_INTERNAL];
  for (int32_t i = 0; i < step->n_inputs; i++)
    operands[i] = operand_of(&plan->buffers[step->inputs[i]]);
  tf_shape_query query = {step->op, &step->attrs, step->n_inputs, operands, NULL, NULL};
  tf_shape_result results[TF_MAX_OUTPUTS];
  memset(results, 0, sizeof(results));
  tf_status status = info->shape_rule(&query, results);
  if (status)
    return tf_status_prefix(status, "%s", tf_plan_step_label(plan, s).text);
  for (int32_t i = 0; i < step->n_outputs; i++) {
    const tf_plan_buffer *b = &plan->buffers[step->outputs[i]];
    const tf_shape_result *r = &results[i];
    if (b->dtype != r->dtype || b->rank != r->rank ||
        memcmp(b->shape, r->shape, sizeof(int64_t) * (size_t)b->rank) != 0)
      return tf_status_new(TF_ERR_SHAPE,
                           "%s writes output %" PRId32 " %s as %s but the op gives %s (wrong output shape)",
                           tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, step->outputs[i]).text,
                           shape_text(b->dtype, b->rank, b->shape).text, shape_text(r->dtype, r->rank, r->shape).text);
  }
  return NULL;
}

static tf_status check_step(const tf_plan *plan, int32_t s, int32_t *writer) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  if (!step->name)
    return INVALID("step %" PRId32 " has no name", s);
  const tf_op_info *info = tf_op_info_get(step->op);
  if (!info)
    return INVALID("step %" PRId32 " '%s' has unknown op %d (this build knows ops 0..%d)", s, step->name, (int)step->op,
                   TF_OP_COUNT - 1);
  TF_RETURN_IF_ERROR(check_phase(plan, s));
  TF_RETURN_IF_ERROR(check_attrs(plan, s, info));
  if (step->n_inputs < info->min_inputs || step->n_inputs > info->max_inputs || (step->n_inputs > 0 && !step->inputs))
    return INVALID("%s has %" PRId32 " inputs; %s takes %d to %d (wrong arity)", tf_plan_step_label(plan, s).text,
                   step->n_inputs, info->name, info->min_inputs, info->max_inputs);
  if (step->n_outputs != info->n_outputs)
    return INVALID("%s has %" PRId32 " outputs; %s has %d (wrong arity)", tf_plan_step_label(plan, s).text,
                   step->n_outputs, info->name, info->n_outputs);
  if (!isfinite(step->flops) || step->flops < 0)
    return INVALID("%s estimates %g flops; an estimate is finite and >= 0", tf_plan_step_label(plan, s).text,
                   step->flops);
  for (int32_t i = 0; i < step->n_inputs; i++)
    TF_RETURN_IF_ERROR(check_input(plan, s, i, info));
  TF_RETURN_IF_ERROR(check_outputs(plan, s, writer));
  return check_shapes(plan, s, info);
}

/* Every arena buffer has the step that writes it: an interval alone does not put data there. */
static tf_status check_written(const tf_plan *plan, const int32_t *writer) {
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_ARENA && writer[id] < 0)
      return INVALID("%s in the arena (live steps [%" PRId32 ", %" PRId32 "]) is never written: no step has it as an "
                     "output or workspace",
                     tf_plan_buffer_label(plan, id).text, b->first_step, b->last_step);
    if (b->region == TF_REGION_HOST && b->role == TF_ROLE_ACTIVATION && writer[id] < 0)
      return INVALID("%s, an activation in host memory, is never written: no host step has it as an output",
                     tf_plan_buffer_label(plan, id).text);
  }
  return NULL;
}

/* A gradient that a step writes (accumulate 1) is read, and updated in place, only after that step:
 * before it, the region holds the previous step's gradient. */
static tf_status check_gradient_reads(const tf_plan *plan, const int32_t *writer) {
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t i = 0; i < step->n_inputs; i++) {
      int32_t id = step->inputs[i];
      if (plan->buffers[id].role == TF_ROLE_GRADIENT && writer[id] >= s)
        return INVALID("%s reads input %" PRId32 " %s before step %" PRId32
                       " writes it: the gradient would be the previous step's (read before write)",
                       tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, writer[id]);
    }
  }
  return NULL;
}

/* Updates in the backward pass (an optimizer step inside the micro-batch block, accumulate 1): no
 * later step of the block reads what an update wrote in place (a parameter, its state, a zeroed
 * gradient: it would see the new value, where the plan without the move saw the old; optimizer
 * steps excepted, which read what the update before them wrote: cast_into a master), and no later
 * step but another optimizer step adds to a gradient an update has read (that part would be
 * lost). updated[b] / applied[b]: the step that did so, or -1. */
static tf_status check_updates_in_backward(const tf_plan *plan, int32_t *updated, int32_t *applied) {
  for (int32_t id = 0; id < plan->n_buffers; id++)
    updated[id] = applied[id] = -1;
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    const tf_op_info *info = tf_op_info_get(step->op);
    const bool optimizer = step->phase == TF_PHASE_OPTIMIZER;
    for (int32_t i = 0; i < step->n_inputs; i++) {
      const int32_t id = step->inputs[i];
      if (updated[id] >= 0 && !optimizer && !has_bit(info->shape_only, i))
        return INVALID("%s reads input %" PRId32 " %s after step %" PRId32 " updated it in place in the same pass: "
                       "it would see the new value (an update moved before a reader)",
                       tf_plan_step_label(plan, s).text, i, tf_plan_buffer_label(plan, id).text, updated[id]);
      if (applied[id] >= 0 && !optimizer && has_bit(info->in_place, i))
        return INVALID("%s adds to %s after step %" PRId32 " applied it to its parameter: this part of the gradient "
                       "would be lost (an update moved before its gradient is complete)",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, applied[id]);
    }
    for (int32_t i = 0; optimizer && i < step->n_inputs; i++) {
      int32_t *mark = has_bit(info->in_place, i) ? updated : applied;
      mark[step->inputs[i]] = s;
    }
  }
  return NULL;
}

/* Running statistics (role state): each is updated in place by exactly one step and read by no
 * other. A second update would count a micro-batch twice (a recomputed batch_norm's); another
 * reader would see them change within a step. updater[b]: that step, or -1. */
static tf_status check_state_updates(const tf_plan *plan, int32_t *updater) {
  for (int32_t id = 0; id < plan->n_buffers; id++)
    updater[id] = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    const tf_op_info *info = tf_op_info_get(step->op);
    for (int32_t i = 0; i < step->n_inputs; i++) {
      const int32_t id = step->inputs[i];
      if (plan->buffers[id].role != TF_ROLE_STATE)
        continue;
      if (!has_bit(info->in_place, i))
        return INVALID("%s reads running statistics %s as input %" PRId32 "; only the step that updates them may "
                       "read them",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, i);
      if (updater[id] >= 0)
        return INVALID("%s updates running statistics %s, which step %" PRId32 " updates too: a micro-batch would "
                       "count twice",
                       tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, updater[id]);
      updater[id] = s;
    }
  }
  for (int32_t id = 0; id < plan->n_buffers; id++)
    if (plan->buffers[id].role == TF_ROLE_STATE && updater[id] < 0)
      return INVALID("%s has role state (running statistics) but no step updates it",
                     tf_plan_buffer_label(plan, id).text);
  return NULL;
}

/* ---- the whole ---- */

static tf_status check_buffers_and_steps(const tf_plan *plan) {
  for (int32_t id = 0; id < plan->n_buffers; id++)
    TF_RETURN_IF_ERROR(check_buffer(plan, id));
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    TF_RETURN_IF_ERROR(check_references(plan, id));
    TF_RETURN_IF_ERROR(check_alias(plan, id));
  }
  TF_RETURN_IF_ERROR(tf_plan_check_views(plan));
  TF_RETURN_IF_ERROR(tf_plan_check_persistent_disjoint(plan));
  TF_RETURN_IF_ERROR(tf_plan_check_arena_disjoint(plan));
  int32_t *writer = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!writer)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "verifying a plan of %" PRId32 " buffers", plan->n_buffers);
  for (int32_t id = 0; id < plan->n_buffers; id++)
    writer[id] = -1;
  tf_status status = NULL;
  for (int32_t s = 0; s < plan->n_steps + plan->n_host_steps && !status; s++)
    status = check_step(plan, s, writer);
  if (!status)
    status = check_written(plan, writer);
  if (!status)
    status = check_gradient_reads(plan, writer);
  int32_t *applied = status ? NULL : malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!status && !applied)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "verifying a plan of %" PRId32 " buffers", plan->n_buffers);
  if (!status)
    status = check_updates_in_backward(plan, writer, applied);
  if (!status)
    status = check_state_updates(plan, writer);
  if (!status)
    status = tf_plan_check_shards(plan);
  free(applied);
  free(writer);
  return status;
}

tf_status tf_plan_verify(const tf_plan *plan) {
  if (!plan)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_plan_verify: plan is NULL");
  TF_RETURN_IF_ERROR(check_header(plan));
  TF_RETURN_IF_ERROR(check_overhead(plan));
  TF_RETURN_IF_ERROR(check_program(plan));
  TF_RETURN_IF_ERROR(check_buffers_and_steps(plan));
  TF_RETURN_IF_ERROR(tf_plan_check_loss_scaling(plan));
  if (plan->matmul_math != TF_F32 && plan->matmul_math != TF_BF16 && plan->matmul_math != TF_F16)
    return INVALID("matmul_math is %s (dtype %d); it must be f32, bf16 or f16", tf_dtype_name(plan->matmul_math),
                   (int)plan->matmul_math);
  return tf_plan_check_report(plan);
}
