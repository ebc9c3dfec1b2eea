/* The verifier's checks of ZeRO's views (tf_plan_verify, plan_verify.c): a ZeRO plan splits the
 * update of a large parameter across ranks (compiler/zero.c), each rank's step reading flat views of
 * the parameter and its gradient (on their memory) and pieces of its state (in the rank's shard, the
 * whole state held in pieces). A view is the one kind of buffer allowed on another's bytes, so these
 * checks allow exactly those and nothing else: a view inside its parent, of its region, role and
 * dtype, the views of a parent tiling it, each read by the one update step of its range. */
#include <inttypes.h>
#include <stdlib.h>

#include "core/ops.h"
#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

static bool viewable(tf_buffer_role role) {
  return role == TF_ROLE_PARAMETER || role == TF_ROLE_GRADIENT || role == TF_ROLE_OPTIMIZER_STATE;
}

/* A buffer held in pieces (held_by -1): optimizer state of a ZeRO plan, never itself a view. */
static tf_status check_in_pieces(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  if (b->held_by >= 0)
    return NULL;
  const bool shardable = b->role == TF_ROLE_OPTIMIZER_STATE || (plan->zero == 2 && b->role == TF_ROLE_GRADIENT);
  if (plan->zero == 0 || !shardable || b->view_of != 0 || b->held_by != -1)
    return INVALID("%s (role %s) has held_by %" PRId32 "; only a ZeRO plan's optimizer state (and at stage 2 its "
                   "gradients) is held in pieces (-1), by views of it held one by a rank each",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), b->held_by);
  return NULL;
}

/* View id on its own: its parent, where it lies in it and who holds it. */
static tf_status check_view(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  const int64_t of = (int64_t)b->view_of - 1; /* a file may say INT32_MIN */
  if (plan->zero == 0)
    return INVALID("%s is a view (view_of %" PRId32 "); only a ZeRO plan's split updates read views",
                   tf_plan_buffer_label(plan, id).text, b->view_of);
  if (of < 0 || of >= plan->n_buffers || of == id)
    return INVALID("%s is a view of buffer %" PRId64 ", not another buffer (view_of is 1 + its id)",
                   tf_plan_buffer_label(plan, id).text, of);
  const tf_plan_buffer *p = &plan->buffers[of];
  if (p->view_of != 0)
    return INVALID("%s is a view of %s, itself a view; a view's parent is a whole buffer",
                   tf_plan_buffer_label(plan, id).text, tf_plan_buffer_label(plan, of).text);
  if (p->region != b->region)
    return INVALID("%s in region %s is a view of %s in region %s (a view of another region)",
                   tf_plan_buffer_label(plan, id).text, tf_region_name(b->region), tf_plan_buffer_label(plan, of).text,
                   tf_region_name(p->region));
  /* a piece of a half parameter's master carries its whole's initialiser: drawn as its range of it */
  const bool drawn =
      b->init.kind == TF_INIT_NONE || (b->role == TF_ROLE_OPTIMIZER_STATE && b->init.kind == p->init.kind &&
                                       b->init.a == p->init.a && b->init.b == p->init.b);
  if (!viewable(b->role) || p->role != b->role || p->dtype != b->dtype || b->rank != 1 || !drawn)
    return INVALID("%s (role %s, %s, rank %" PRId32 ") is a view of %s (role %s, %s); a view is a flat range of a "
                   "parameter, gradient or optimizer state, of its role and dtype, with no initializer (a master's "
                   "piece: its whole's)",
                   tf_plan_buffer_label(plan, id).text, tf_role_name(b->role), tf_dtype_name(b->dtype), b->rank,
                   tf_plan_buffer_label(plan, of).text, tf_role_name(p->role), tf_dtype_name(p->dtype));
  const int64_t size = tf_dtype_size(b->dtype);
  if (b->view_at < 0 || b->view_at % size != 0 || b->view_at > p->bytes || b->bytes > p->bytes - b->view_at)
    return INVALID(
        "%s is %" PRId64 " bytes from byte %" PRId64 " of %s, which has %" PRId64 " (a view outside its parent)",
        tf_plan_buffer_label(plan, id).text, b->bytes, b->view_at, tf_plan_buffer_label(plan, of).text, p->bytes);
  if (p->held_by == 0 && (b->held_by != 0 || b->offset != p->offset + b->view_at))
    return INVALID("%s (offset %" PRId64 ", held_by %" PRId32 ") is a view of %s, which every rank holds at offset "
                   "%" PRId64 ": it lies on its bytes (offset %" PRId64 ", held_by 0)",
                   tf_plan_buffer_label(plan, id).text, b->offset, b->held_by, tf_plan_buffer_label(plan, of).text,
                   p->offset, p->offset + b->view_at);
  if (p->held_by != 0 && (p->held_by != -1 || b->held_by <= 0))
    return INVALID("%s (held_by %" PRId32 ") is a view of %s (held_by %" PRId32 "); a view of a buffer not every rank "
                   "holds is a piece of one held in pieces (-1), held by one rank",
                   tf_plan_buffer_label(plan, id).text, b->held_by, tf_plan_buffer_label(plan, of).text, p->held_by);
  return NULL;
}

typedef struct ranged {
  int32_t parent, id;
  int64_t at;
} ranged;

static int by_parent_then_start(const void *a, const void *b) {
  const ranged *x = a, *y = b;
  if (x->parent != y->parent)
    return x->parent < y->parent ? -1 : 1;
  if (x->at != y->at)
    return x->at < y->at ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* The views of each parent, by start, cover it exactly: [0, bytes) without overlap or gap. */
static tf_status check_tiling(const tf_plan *plan, const ranged *views, int32_t n) {
  for (int32_t i = 0; i < n; i++) {
    const tf_plan_buffer *p = &plan->buffers[views[i].parent], *v = &plan->buffers[views[i].id];
    const bool first = i == 0 || views[i - 1].parent != views[i].parent;
    const int64_t expected = first ? 0 : views[i - 1].at + plan->buffers[views[i - 1].id].bytes;
    if (views[i].at < expected)
      return INVALID("%s (bytes [%" PRId64 ", %" PRId64 ")) and %s (bytes [%" PRId64 ", %" PRId64 ")) of %s overlap "
                     "(overlapping views): each byte of a parameter is updated by one rank",
                     tf_plan_buffer_label(plan, views[i - 1].id).text, views[i - 1].at, expected,
                     tf_plan_buffer_label(plan, views[i].id).text, views[i].at, views[i].at + v->bytes,
                     tf_plan_buffer_label(plan, views[i].parent).text);
    const bool last = i + 1 == n || views[i + 1].parent != views[i].parent;
    const int64_t end = views[i].at + v->bytes;
    if (views[i].at > expected || (last && end != p->bytes))
      return INVALID("the views of %s leave its bytes [%" PRId64 ", %" PRId64 ") out; the views of a buffer cover it "
                     "(each byte updated by one rank)",
                     tf_plan_buffer_label(plan, views[i].parent).text, views[i].at > expected ? expected : end,
                     views[i].at > expected ? views[i].at : p->bytes);
  }
  return NULL;
}

tf_status tf_plan_check_views(const tf_plan *plan) {
  int32_t n = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    TF_RETURN_IF_ERROR(check_in_pieces(plan, id));
    n += plan->buffers[id].view_of != 0;
  }
  if (n == 0)
    return NULL;
  ranged *views = malloc(sizeof(ranged) * (size_t)n);
  if (!views)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "verifying %" PRId32 " views: out of host memory", n);
  tf_status status = NULL;
  int32_t count = 0;
  for (int32_t id = 0; id < plan->n_buffers && !status; id++)
    if (plan->buffers[id].view_of != 0 && !(status = check_view(plan, id)))
      views[count++] = (ranged){plan->buffers[id].view_of - 1, id, plan->buffers[id].view_at};
  if (!status) {
    qsort(views, (size_t)count, sizeof(ranged), by_parent_then_start);
    status = check_tiling(plan, views, count);
  }
  for (int32_t id = 0, i = 0; id < plan->n_buffers && !status; id++) { /* views: sorted by parent */
    while (i < count && views[i].parent < id)
      i++;
    if (plan->buffers[id].held_by == -1 && (i == count || views[i].parent != id))
      status = INVALID("%s is held in pieces (held_by -1) but has none (no view of it)",
                       tf_plan_buffer_label(plan, id).text);
  }
  free(views);
  return status;
}

/* ---- the steps that read them ---- */

static int32_t flat_operands(tf_op op) {
  return op == TF_OP_ADAMW ? 4 : op == TF_OP_SGD ? 3 : op == TF_OP_CAST_INTO ? 2 : 0;
}

/* The role operand k of a range step reads: an update's parameter (or a half parameter's master,
 * optimizer state), gradient, state; cast_into's parameter and master. */
static bool range_role(tf_op op, int32_t k, const tf_plan_buffer *whole) {
  const bool master = whole->role == TF_ROLE_OPTIMIZER_STATE && whole->init.kind != TF_INIT_NONE;
  if (op == TF_OP_CAST_INTO)
    return k == 0 ? whole->role == TF_ROLE_PARAMETER : master;
  return k == 0   ? whole->role == TF_ROLE_PARAMETER || master
         : k == 1 ? whole->role == TF_ROLE_GRADIENT
                  : whole->role == TF_ROLE_OPTIMIZER_STATE;
}

/* The first element of view v. */
static int64_t first_element(const tf_plan_buffer *v) { return v->view_at / tf_dtype_size(v->dtype); }

/* Step s reads views: an sgd/adamw held by one rank, its flat operands views over the same elements
 * of one parameter (operand 0; or of a half parameter's f32 master), that parameter's gradient (1)
 * and its state (2 on); or the cast_into after such a range, the same elements of the parameter (0)
 * and of its master (1). */
static tf_status check_ranged_update(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = tf_plan_step_at(plan, s);
  const int32_t flat = flat_operands(step->op);
  const bool host_update = s >= plan->n_steps && step->phase == TF_PHASE_OPTIMIZER; /* offloaded: on the host */
  if (flat == 0 || step->held_by <= 0 || (s >= plan->n_steps && !host_update))
    return INVALID("%s reads a view; only an sgd or adamw step held by one rank (a split update's range), and the "
                   "cast_into after it, reads views",
                   tf_plan_step_label(plan, s).text);
  const tf_plan_buffer *param = &plan->buffers[step->inputs[0]];
  const tf_plan_buffer *first =
      param->view_of > 0 && param->view_of <= plan->n_buffers ? &plan->buffers[param->view_of - 1] : param;
  const int32_t parameter = first->role == TF_ROLE_PARAMETER ? param->view_of - 1 : first->owner;
  for (int32_t k = 0; k < step->n_inputs; k++) {
    const tf_plan_buffer *v = &plan->buffers[step->inputs[k]];
    if ((k < flat) != (v->view_of != 0))
      return INVALID("%s reads %s as operand %" PRId32 "; a range's parameter, gradient and state are views (operands "
                     "0..%" PRId32 "), and nothing else",
                     tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, step->inputs[k]).text, k, flat - 1);
    if (k >= flat)
      continue;
    const tf_plan_buffer *whole = &plan->buffers[v->view_of - 1];
    const bool owned = whole->role == TF_ROLE_PARAMETER ? v->view_of - 1 == parameter : whole->owner == parameter;
    if (v->role != whole->role || !range_role(step->op, k, whole) || !owned ||
        first_element(v) != first_element(param) || v->shape[0] != param->shape[0])
      return INVALID("%s reads %s (elements from %" PRId64 ", %" PRId64 " of them) as operand %" PRId32 " with %s "
                     "(from %" PRId64 ", %" PRId64 "); a range reads the same elements of one parameter, its "
                     "gradient and its state",
                     tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, step->inputs[k]).text,
                     first_element(v), v->shape[0], k, tf_plan_buffer_label(plan, step->inputs[0]).text,
                     first_element(param), param->shape[0]);
  }
  return NULL;
}

tf_status tf_plan_check_view_updates(const tf_plan *plan) {
  int32_t *reader = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!reader)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "verifying a plan of %" PRId32 " buffers", plan->n_buffers);
  for (int32_t id = 0; id < plan->n_buffers; id++)
    reader[id] = -1;
  tf_status status = NULL;
  for (int32_t s = 0; s < plan->n_steps + plan->n_host_steps && !status; s++) {
    const tf_plan_step *step = tf_plan_step_at(plan, s);
    bool views = false;
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs && !status; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      if (plan->buffers[id].view_of == 0)
        continue;
      views = true;
      /* a master's piece is read by its update's range and the cast_into range after it */
      const bool cast = step->op == TF_OP_CAST_INTO && k == 1 && reader[id] >= 0 &&
                        tf_op_is_update(tf_plan_step_at(plan, reader[id])->op);
      if (reader[id] >= 0 && !cast)
        status = INVALID("%s reads %s, which step %" PRId32 " reads too; a view is the range of one update step",
                         tf_plan_step_label(plan, s).text, tf_plan_buffer_label(plan, id).text, reader[id]);
      reader[id] = s;
    }
    if (!status && views)
      status = check_ranged_update(plan, s);
  }
  for (int32_t id = 0; id < plan->n_buffers && !status; id++)
    if (plan->buffers[id].view_of != 0 && reader[id] < 0)
      status = INVALID("%s is a view no step reads; a view is the range of one update step",
                       tf_plan_buffer_label(plan, id).text);
  free(reader);
  return status;
}
