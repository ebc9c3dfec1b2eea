/* ZeRO stages 1 and 2 (--ranks R --zero 1|2; Rajbhandari et al., "ZeRO: memory optimizations toward training
 * trillion parameter models"): a pass over the emitted data-parallel plan that shards the optimizer
 * state across the ranks, each rank holding about 1/R of it (8Ψ/R bytes for f32 AdamW).
 *
 * The partition is DeepSpeed's: the updates' state laid end to end in step order and cut into R equal
 * runs, rank r holding the r-th. An update whose state lies in one run is held whole by that rank
 * (held_by = 1 + the rank: its step and its state buffers). An update a cut falls in (sgd and adamw,
 * which are elementwise) is split at the cut, rounded to a multiple of the plan's alignment in
 * elements: each rank updates a contiguous element range of it with its own step, whose operands
 * are flat views of the parameter and of its gradient (buffers on their bytes: view_of, view_at),
 * and pieces of its state (buffers of the range's bytes in that rank's shard); the whole state
 * buffer stays in the plan, held in pieces (held_by -1, no memory of its own), under its own name,
 * so a checkpoint holds it as a stage-0 plan's does. A split update's pieces run in its place, in
 * order, before anything after it (its gradient's zeroing); each added step gets a workspace like
 * the original's, on its bytes. An update that cannot be split (adamw8bit's blocks) goes whole to
 * the rank its middle falls in.
 *
 * Each rank's shard is packed from offset 0 of the optimizer-state region, on the same bytes as every
 * other rank's, so the region is the largest shard: the device total of every rank's plan. Every rank
 * still sums the whole gradients (the clipping norm reads them whole), runs the updates it holds, and
 * the runtime sends each updated range from its owner to the others (tools/dist_zero.c).
 *
 * Stage 2 (--zero 2) shards the gradients by the same partition: an update's gradient held by its
 * rank in that rank's shard of the gradients region (packed from offset 0 as the state's), a split
 * update's held in pieces, its views pieces in their ranks' shards. The micro-batch block writes
 * buckets in their place (compiler/zero2.c), a bucket it accumulates into zeroed first by a step of
 * its own; the optimizer block's zeroing of the gradients goes (the reduction writes a step's first
 * micro-batch's sum). The gradients region is the largest shard and the buckets' area. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "compiler/stages.h"
#include "compiler/zero.h"
#include "core/ops.h"
#include "tightfit/plan.h"

typedef struct update {
  int32_t step;
  int64_t elements; /* of its parameter */
  int64_t bytes;    /* where it lies in the row of all updates' state (its state, or its parameter) */
  bool splittable;
  int32_t first_piece, n_pieces;
} update;

typedef struct piece {
  int64_t first, count; /* elements of the parameter */
  int32_t rank;
} piece;

typedef struct partition {
  update *updates;
  int32_t n_updates;
  piece *pieces;
  int32_t n_pieces;
} partition;

static int64_t align_up(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

static int64_t elements_of(const tf_plan_buffer *b) {
  const int64_t size = tf_dtype_size(b->dtype);
  return size > 0 ? b->bytes / size : 0;
}

/* The operands of an elementwise update that cover its parameter: param, grad, then its state (sgd:
 * the momentum; adamw: both moments); the norm after them is a scalar every range reads whole. */
static int32_t flat_operands(tf_op op) { return op == TF_OP_ADAMW ? 4 : op == TF_OP_SGD ? 3 : 0; }

/* The optimizer-state bytes update step s reads. */
static int64_t state_bytes(const tf_plan *plan, const tf_plan_step *step) {
  int64_t bytes = 0;
  for (int32_t k = 0; k < step->n_inputs; k++)
    if (plan->buffers[step->inputs[k]].region == TF_REGION_OPTIMIZER_STATE)
      bytes += plan->buffers[step->inputs[k]].bytes;
  return bytes;
}

/* Whether update step s may run as ranges: sgd or adamw whose flat operands all have its parameter's
 * elements (and dtype sizes that keep a range of `quantum` elements aligned), long enough to cut. */
static bool splittable(const tf_plan *plan, const tf_plan_step *step, int64_t quantum) {
  const int32_t flat = flat_operands(step->op);
  if (flat == 0 || step->n_inputs < flat)
    return false;
  const int64_t elements = elements_of(&plan->buffers[step->inputs[0]]);
  for (int32_t k = 0; k < flat; k++) {
    const tf_plan_buffer *b = &plan->buffers[step->inputs[k]];
    if (elements_of(b) != elements || b->view_of != 0 || (k >= 2 && b->region != TF_REGION_OPTIMIZER_STATE))
      return false;
  }
  return elements >= 2 * quantum;
}

/* Where rank r's run of the row starts: r / ranks of `total`. */
static int64_t run_start(int64_t total, int32_t r, int32_t ranks) { return (int64_t)((__int128)total * r / ranks); }

/* Cuts the row of updates into the ranks' runs (see the file's comment): fills p->pieces. */
static void cut(const tf_plan *plan, partition *p, int64_t total, int64_t quantum) {
  int64_t at = 0; /* bytes of the row placed so far */
  int32_t rank = 0;
  const int32_t ranks = plan->ranks;
  for (int32_t i = 0; i < p->n_updates; i++) {
    update *u = &p->updates[i];
    u->first_piece = p->n_pieces;
    const int64_t per_element = u->splittable ? u->bytes / u->elements : 0;
    int64_t done = 0;
    while (done < u->elements) {
      const int64_t end = rank + 1 < ranks ? run_start(total, rank + 1, ranks) : INT64_MAX;
      bool whole = rank + 1 == ranks;
      int64_t until = u->elements;
      if (!whole && !u->splittable) {
        if (at + u->bytes / 2 >= end) { /* its middle lies in a later run */
          rank++;
          continue;
        }
        whole = true;
      }
      if (!whole) {
        if (at >= end) {
          rank++;
          continue;
        }
        until = (done + (end - at) / per_element + quantum / 2) / quantum * quantum;
        if (until <= done) {
          rank++;
          continue;
        }
        until = until < u->elements ? until : u->elements;
      }
      p->pieces[p->n_pieces++] = (piece){done, until - done, rank};
      at += u->splittable ? (until - done) * per_element : u->bytes;
      done = until;
      if (until < u->elements)
        rank++;
    }
    u->n_pieces = p->n_pieces - u->first_piece;
  }
}

/* ---- building the plan ---- */

typedef struct builder {
  tf_plan *plan;
  int32_t stage;            /* 1, or 2: the gradients sharded too */
  int64_t *shard_end;       /* per rank: the end of its state shard so far; then per rank its gradient shard's */
  const int32_t *bucket_of; /* stage 2, per old buffer: the bucket of a sharded gradient, else -1 */
  bool *bucket_written;     /* stage 2, per buffer: a bucket the new program has written already */
  tf_plan_step *steps;      /* the new program */
  int32_t n_steps;
  bool *added;                 /* per new step: a split update's range (else an old step moved) */
  int32_t *first_of, *last_of; /* per old step: where it starts and ends in the new program */
} builder;

static char *range_name(const char *name, int64_t first, int64_t count) {
  const size_t size = strlen(name) + 48;
  char *text = malloc(size);
  if (text)
    snprintf(text, size, "%s[%lld:%lld]", name, (long long)first, (long long)(first + count));
  return text;
}

/* Places state (or, at stage 2, gradient) buffer id at the end of rank's shard of its region. */
static void place_in_shard(builder *b, int32_t id, int32_t rank) {
  tf_plan_buffer *buffer = &b->plan->buffers[id];
  int64_t *end = &b->shard_end[(buffer->region == TF_REGION_GRADIENTS ? b->plan->ranks : 0) + rank];
  buffer->held_by = rank + 1;
  buffer->offset = *end;
  *end = align_up(buffer->offset + buffer->bytes, b->plan->alignment);
}

/* A new buffer: elements [first, first + count) of buffer `of` as a flat view (a piece when `of` is
 * held in pieces: then placed in rank's shard). Its id, or -1 when out of memory. */
static int32_t add_view(builder *b, int32_t of, int64_t first, int64_t count, int32_t rank) {
  tf_plan *plan = b->plan;
  const int32_t id = plan->n_buffers;
  tf_plan_buffer *v = &plan->buffers[id];
  const tf_plan_buffer *parent = &plan->buffers[of];
  memset(v, 0, sizeof(*v));
  v->name = range_name(parent->name, first, count);
  if (!v->name)
    return -1;
  plan->n_buffers++;
  const int64_t size = tf_dtype_size(parent->dtype);
  v->role = parent->role;
  v->region = parent->region;
  v->dtype = parent->dtype;
  v->rank = 1;
  v->shape[0] = count;
  v->bytes = count * size;
  v->first_step = v->last_step = -1;
  v->owner = parent->owner;
  v->io_twin = v->alias_of = -1;
  v->view_of = of + 1;
  v->view_at = first * size;
  v->offset = parent->offset + v->view_at;
  if (parent->role == TF_ROLE_OPTIMIZER_STATE && parent->init.kind != TF_INIT_NONE) {
    /* a half parameter's master in pieces: each drawn as its range of the whole (runtime/session.c) */
    v->init = parent->init;
    v->init.file = tf_copy_string(parent->init.file);
    v->init.key = tf_copy_string(parent->init.key);
    if ((parent->init.file && !v->init.file) || (parent->init.key && !v->init.key))
      return -1;
  }
  if (parent->held_by < 0)
    place_in_shard(b, id, rank);
  return id;
}

/* A workspace for the added step at new index s, on the bytes of step `like`'s; -1 if it has none,
 * -2 when out of memory. */
static int32_t add_workspace(builder *b, int32_t like, int32_t s) {
  tf_plan *plan = b->plan;
  if (like < 0)
    return -1;
  tf_plan_buffer *w = &plan->buffers[plan->n_buffers];
  *w = plan->buffers[like];
  memset(&w->init, 0, sizeof(w->init));
  w->name = range_name(plan->buffers[like].name, s, 1);
  if (!w->name)
    return -2;
  w->first_step = w->last_step = s;
  plan->report.arena_naive += align_up(w->bytes, plan->alignment);
  plan->report.role_bytes[TF_ROLE_WORKSPACE] += w->bytes;
  return plan->n_buffers++;
}

/* Update step `step` (old index) split into u->n_pieces range steps at the end of the new program. */
static tf_status split(builder *b, const partition *p, const update *u) {
  tf_plan *plan = b->plan;
  tf_plan_step *original = &plan->steps[u->step];
  const int32_t flat = flat_operands(original->op);
  for (int32_t k = 0; k < flat; k++) { /* the whole state (a half parameter's master too; and gradient): in pieces */
    tf_plan_buffer *x = &plan->buffers[original->inputs[k]];
    if (x->region == TF_REGION_OPTIMIZER_STATE || (b->stage == 2 && k == 1))
      x->held_by = -1, x->offset = 0;
  }
  for (int32_t i = 0; i < u->n_pieces; i++) {
    const piece *c = &p->pieces[u->first_piece + i];
    tf_plan_step *step = &b->steps[b->n_steps];
    *step = *original;
    step->name = range_name(original->name, c->first, c->count);
    step->inputs = malloc(sizeof(int32_t) * (size_t)original->n_inputs);
    b->added[b->n_steps++] = true; /* its name and inputs are its own */
    if (!step->name || !step->inputs)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory to split '%s'", b->stage, original->name);
    memcpy(step->inputs, original->inputs, sizeof(int32_t) * (size_t)original->n_inputs);
    for (int32_t k = 0; k < flat; k++)
      if ((step->inputs[k] = add_view(b, original->inputs[k], c->first, c->count, c->rank)) < 0)
        return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory to split '%s'", b->stage, original->name);
    step->held_by = c->rank + 1;
    step->flops = original->flops * (double)c->count / (double)u->elements;
    if (i > 0 && (step->workspace = add_workspace(b, original->workspace, b->n_steps - 1)) == -2)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory to split '%s'", b->stage, original->name);
  }
  return NULL;
}

/* Old step u->step + 1 when it is the cast_into writing a half parameter from the master update u
 * changed (compiler/optimizer.c emits it right after the update), else -1. */
static int32_t cast_after(const tf_plan *plan, const update *u) {
  const int32_t c = u->step + 1;
  if (c >= plan->n_steps)
    return -1;
  const tf_plan_step *cast = &plan->steps[c];
  return cast->op == TF_OP_CAST_INTO && cast->n_inputs == 2 && cast->inputs[1] == plan->steps[u->step].inputs[0] ? c
                                                                                                                 : -1;
}

/* cast_into step c (old index) run where update u runs: whole by its rank, or one range per piece,
 * over a view of the parameter and that piece's view of the master (the split's range steps from new
 * index first_range), so each owner writes its range of the parameter and sends it. */
static tf_status place_cast(builder *b, const partition *p, const update *u, int32_t c, int32_t first_range) {
  const tf_plan_step *original = &b->plan->steps[c];
  if (u->n_pieces <= 1) {
    b->steps[b->n_steps] = *original;
    b->steps[b->n_steps++].held_by = p->pieces[u->first_piece].rank + 1;
    return NULL;
  }
  for (int32_t i = 0; i < u->n_pieces; i++) {
    const piece *range = &p->pieces[u->first_piece + i];
    tf_plan_step *step = &b->steps[b->n_steps];
    *step = *original;
    step->name = range_name(original->name, range->first, range->count);
    step->inputs = malloc(sizeof(int32_t) * 2);
    b->added[b->n_steps++] = true;
    if (!step->name || !step->inputs ||
        (step->inputs[0] = add_view(b, original->inputs[0], range->first, range->count, range->rank)) < 0)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory to split '%s'", b->stage, original->name);
    step->inputs[1] = b->steps[first_range + i].inputs[0];
    step->held_by = range->rank + 1;
    step->flops = original->flops * (double)range->count / (double)u->elements;
  }
  return NULL;
}

/* Stage 2: whether old step s is the optimizer block's zeroing of a sharded gradient (dropped: the
 * reduction of each step's first micro-batch writes the shard, tools/dist_zero.c). */
static bool zeroes_shard(const builder *b, int32_t s) {
  const tf_plan_step *step = &b->plan->steps[s];
  return b->stage == 2 && s >= b->plan->micro_steps && step->op == TF_OP_ZERO && step->n_inputs == 1 &&
         b->bucket_of[step->inputs[0]] >= 0;
}

/* Stage 2: step `step` of the micro-batch block on the buckets, not the shards; a bucket it updates in
 * place before any step wrote it (accumulating into it) first zeroed by a step of its own. */
static tf_status to_buckets(builder *b, tf_plan_step *step) {
  tf_plan *plan = b->plan;
  for (int32_t k = 0; k < step->n_outputs; k++)
    if (b->bucket_of[step->outputs[k]] >= 0)
      b->bucket_written[step->outputs[k] = b->bucket_of[step->outputs[k]]] = true;
  for (int32_t k = 0; k < step->n_inputs; k++) {
    const int32_t bucket = b->bucket_of[step->inputs[k]];
    if (bucket < 0)
      continue;
    step->inputs[k] = bucket;
    if (b->bucket_written[bucket])
      continue;
    b->bucket_written[bucket] = true;
    tf_plan_step *zero = &b->steps[b->n_steps];
    memset(zero, 0, sizeof(*zero));
    const size_t size = strlen(plan->buffers[bucket].name) + 8;
    zero->name = malloc(size);
    zero->inputs = malloc(sizeof(int32_t));
    b->added[b->n_steps++] = true;
    if (!zero->name || !zero->inputs)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero 2: no memory to zero '%s'", plan->buffers[bucket].name);
    snprintf(zero->name, size, "zero/%s", plan->buffers[bucket].name);
    zero->op = TF_OP_ZERO;
    zero->phase = step->phase;
    zero->n_inputs = 1;
    zero->inputs[0] = bucket;
    zero->workspace = -1;
    zero->flops = (double)elements_of(&plan->buffers[bucket]);
  }
  return NULL;
}

/* The new program: each old step in place, a split update as its range steps; at stage 2 the
 * micro-batch block on the buckets and the shards' zeroing gone. */
static tf_status build_steps(builder *b, const partition *p) {
  tf_plan *plan = b->plan;
  int32_t next = 0, cast = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    if (s == cast) /* placed with its update, below */
      continue;
    const update *u = next < p->n_updates && p->updates[next].step == s ? &p->updates[next++] : NULL;
    if (zeroes_shard(b, s)) { /* freed by apply once the new program stands */
      b->first_of[s] = b->n_steps;
      b->last_of[s] = b->n_steps - 1;
      continue;
    }
    if (b->stage == 2 && s < plan->micro_steps)
      TF_RETURN_IF_ERROR(to_buckets(b, &plan->steps[s]));
    b->first_of[s] = b->n_steps;
    if (u && u->n_pieces > 1) {
      TF_RETURN_IF_ERROR(split(b, p, u));
    } else {
      b->steps[b->n_steps++] = plan->steps[s];
      if (u) {
        tf_plan_step *step = &b->steps[b->n_steps - 1];
        step->held_by = p->pieces[u->first_piece].rank + 1;
        for (int32_t k = 0; k < step->n_inputs; k++) {
          const tf_plan_buffer *x = &plan->buffers[step->inputs[k]];
          const bool shard = x->region == TF_REGION_OPTIMIZER_STATE || (b->stage == 2 && k == 1);
          if (shard && x->held_by == 0 && x->view_of == 0)
            place_in_shard(b, step->inputs[k], step->held_by - 1);
        }
      }
    }
    b->last_of[s] = b->n_steps - 1;
    if (u && (cast = cast_after(plan, u)) >= 0) {
      b->first_of[cast] = b->n_steps;
      TF_RETURN_IF_ERROR(place_cast(b, p, u, cast, b->first_of[s]));
      b->last_of[cast] = b->n_steps - 1;
    }
  }
  b->first_of[plan->n_steps] = b->n_steps;
  return NULL;
}

/* The arena's live intervals in the new program (a buffer read by a split update lives to its last
 * range step; a workspace stays at its step), and the report's live bytes from them. */
static tf_status renumber(builder *b, int32_t old_buffers) {
  tf_plan *plan = b->plan;
  for (int32_t id = 0; id < old_buffers; id++) {
    tf_plan_buffer *x = &plan->buffers[id];
    if (x->region != TF_REGION_ARENA)
      continue;
    x->first_step = b->first_of[x->first_step];
    x->last_step = x->role == TF_ROLE_WORKSPACE ? x->first_step : b->last_of[x->last_step];
  }
  const size_t n = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *from = malloc(sizeof(int32_t) * n), *to = malloc(sizeof(int32_t) * n);
  int64_t *delta = calloc((size_t)plan->n_steps + 1, sizeof(int64_t));
  int64_t *live = malloc(sizeof(int64_t) * (size_t)(plan->n_steps > 0 ? plan->n_steps : 1));
  tf_status status = from && to && delta && live ? tf_plan_counted_steps(plan, from, to)
                                                 : tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero 1: no memory");
  for (int32_t id = 0; id < plan->n_buffers && !status; id++)
    if (plan->buffers[id].region == TF_REGION_ARENA && from[id] <= to[id]) {
      const int64_t slot = align_up(plan->buffers[id].bytes, plan->alignment);
      delta[from[id]] += slot;
      delta[to[id] + 1] -= slot;
    }
  int64_t sum = 0;
  plan->report.arena_lower_bound = 0;
  for (int32_t s = 0; s < plan->n_steps && !status; s++) {
    live[s] = sum += delta[s];
    if (live[s] > plan->report.arena_lower_bound || s == 0) {
      plan->report.arena_lower_bound = live[s];
      plan->report.peak_step = s;
    }
  }
  if (!status) {
    free(plan->report.live_bytes);
    plan->report.live_bytes = live;
    live = NULL;
  }
  free(from);
  free(to);
  free(delta);
  free(live);
  return status;
}

/* The updates of the optimizer block, each with its place in the row; the whole row's bytes. */
static int64_t list_updates(const tf_plan *plan, partition *p, int64_t quantum) {
  int64_t total = 0, parameters = 0;
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (!tf_op_is_update(step->op))
      continue;
    const tf_plan_buffer *param = &plan->buffers[step->inputs[0]];
    p->updates[p->n_updates++] =
        (update){s, elements_of(param), state_bytes(plan, step), splittable(plan, step, quantum), 0, 0};
    total += state_bytes(plan, step);
    parameters += param->bytes;
  }
  for (int32_t i = 0; total == 0 && i < p->n_updates; i++) /* no state (sgd without momentum): the parameters */
    p->updates[i].bytes = plan->buffers[plan->steps[p->updates[i].step].inputs[0]].bytes;
  for (int32_t i = 0; i < p->n_updates; i++) /* a range's state is whole elements'; none: nothing to split */
    p->updates[i].splittable =
        p->updates[i].splittable && total > 0 && p->updates[i].bytes % p->updates[i].elements == 0;
  return total > 0 ? total : parameters;
}

/* Stage 2: the gradients the updates read (each a shard now) and their buckets, appended to the
 * plan's buffers (room made); bucket_of[g] for each old buffer. */
static tf_status add_buckets(tf_plan *plan, const partition *p, int32_t *bucket_of, int32_t old_buffers) {
  for (int32_t id = 0; id < old_buffers; id++)
    bucket_of[id] = -1;
  for (int32_t i = 0; i < p->n_updates; i++)
    bucket_of[plan->steps[p->updates[i].step].inputs[1]] = 0;
  return tf_zero2_buckets(plan, bucket_of, old_buffers);
}

static tf_status apply(tf_plan *plan, partition *p, int64_t *shard_end, int32_t stage) {
  int32_t extra_steps = 0, extra_buffers = 0;
  for (int32_t i = 0; i < p->n_updates; i++)
    if (p->updates[i].n_pieces > 1) {
      const tf_plan_step *step = &plan->steps[p->updates[i].step];
      /* and its cast_into's ranges, each with a view of the parameter, where it has one */
      extra_steps += 2 * (p->updates[i].n_pieces - 1);
      extra_buffers += p->updates[i].n_pieces * (flat_operands(step->op) + 2);
    }
  if (stage == 2) /* a bucket per update's gradient, and maybe a step zeroing it */
    extra_steps += p->n_updates, extra_buffers += p->n_updates;
  const int32_t old_buffers = plan->n_buffers, old_steps = plan->n_steps;
  tf_plan_buffer *buffers = realloc(plan->buffers, sizeof(tf_plan_buffer) * (size_t)(old_buffers + extra_buffers + 1));
  if (buffers)
    plan->buffers = buffers;
  const size_t new_steps = (size_t)(old_steps + extra_steps + 1);
  int32_t *bucket_of = malloc(sizeof(int32_t) * (size_t)(old_buffers + 1));
  builder b = {plan,
               stage,
               shard_end,
               bucket_of,
               calloc((size_t)(old_buffers + extra_buffers + 1), sizeof(bool)),
               malloc(sizeof(tf_plan_step) * new_steps),
               0,
               calloc(new_steps, sizeof(bool)),
               malloc(sizeof(int32_t) * (size_t)(old_steps + 1)),
               malloc(sizeof(int32_t) * (size_t)(old_steps + 1))};
  tf_status status = buffers && bucket_of && b.bucket_written && b.steps && b.added && b.first_of && b.last_of
                         ? NULL
                         : tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory for %d steps", stage, old_steps);
  if (!status && stage == 2)
    status = add_buckets(plan, p, bucket_of, old_buffers);
  if (!status)
    status = build_steps(&b, p);
  for (int32_t s = 0; status && b.steps && s < b.n_steps; s++) /* failed: the ranges made so far */
    if (b.added[s]) {
      free(b.steps[s].name);
      free(b.steps[s].inputs);
    }
  for (int32_t i = 0; !status && i < p->n_updates; i++)
    if (p->updates[i].n_pieces > 1) {
      const int32_t cast = cast_after(plan, &p->updates[i]);
      free(plan->steps[p->updates[i].step].name);
      free(plan->steps[p->updates[i].step].inputs);
      if (cast >= 0) {
        free(plan->steps[cast].name);
        free(plan->steps[cast].inputs);
      }
    }
  for (int32_t s = 0; !status && s < old_steps; s++) /* the shards' zeroing, dropped */
    if (zeroes_shard(&b, s)) {
      free(plan->steps[s].name);
      free(plan->steps[s].inputs);
    }
  if (!status) {
    free(plan->steps);
    plan->steps = b.steps;
    plan->n_steps = b.n_steps;
    plan->micro_steps = b.first_of[plan->micro_steps];
    b.steps = NULL;
    status = renumber(&b, old_buffers);
  }
  free(bucket_of);
  free(b.bucket_written);
  free(b.steps);
  free(b.added);
  free(b.first_of);
  free(b.last_of);
  return status;
}

/* The largest of shard_end[0, ranks). */
static int64_t largest_of(const int64_t *shard_end, int32_t ranks, int64_t *smallest) {
  int64_t largest = 0;
  *smallest = ranks > 0 ? shard_end[0] : 0;
  for (int32_t r = 0; r < ranks; r++) {
    largest = shard_end[r] > largest ? shard_end[r] : largest;
    *smallest = shard_end[r] < *smallest ? shard_end[r] : *smallest;
  }
  return largest;
}

/* The compile note of a ZeRO plan. */
static void note(tf_plan *plan, const partition *p, int32_t stage, const int64_t *shard_end, int64_t whole_state,
                 int64_t whole_gradients, int64_t buckets) {
  int32_t split_updates = 0;
  for (int32_t i = 0; i < p->n_updates; i++)
    split_updates += p->updates[i].n_pieces > 1;
  int64_t smallest, smallest_gradients;
  const int64_t largest = largest_of(shard_end, plan->ranks, &smallest);
  const int64_t gradients = largest_of(shard_end + plan->ranks, plan->ranks, &smallest_gradients);
  char line[600];
  int used = snprintf(line, sizeof(line),
                      "ZeRO stage %d over %d ranks: %d updates sharded; optimizer state %.2f MiB per rank (shards %.2f "
                      "to %.2f MiB) of %.2f MiB; %d parameters split across ranks, in %d ranges\n",
                      stage, plan->ranks, p->n_updates, (double)largest / 1048576.0, (double)smallest / 1048576.0,
                      (double)largest / 1048576.0, (double)whole_state / 1048576.0, split_updates,
                      p->n_pieces - p->n_updates + split_updates);
  if (stage == 2 && used > 0 && used < (int)sizeof(line))
    snprintf(line + used, sizeof(line) - (size_t)used,
             "ZeRO stage 2: gradients %.2f MiB per rank (shards %.2f to %.2f MiB) of %.2f MiB, plus %.2f MiB of "
             "buckets (each gradient as the backward pass writes it, reduced to its owners after its last writer)\n",
             (double)gradients / 1048576.0, (double)smallest_gradients / 1048576.0, (double)gradients / 1048576.0,
             (double)whole_gradients / 1048576.0, (double)buckets / 1048576.0);
  tf_plan_note(plan, line);
}

tf_status tf_zero_pass(tf_plan *plan, const tf_target *target, int32_t stage) {
  if (plan->ranks < 2 || stage < 1 || stage > 2)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--zero %d: graph '%s' is planned for %d rank(s) (give --ranks R, "
                         "and stage 1 or 2)",
                         stage, plan->graph_name, plan->ranks);
  if (stage == 2 && plan->overflow_check >= 0 && plan->buffers[plan->overflow_check].role != TF_ROLE_CONSTANT)
    return tf_status_new(TF_ERR_INTERNAL,
                         "--zero 2: graph '%s' computes the norm of the whole gradients in its optimizer block; at "
                         "stage 2 the job sums it from the ranks' shards (compiler/optimizer.c)",
                         plan->graph_name);
  const size_t room = (size_t)(plan->n_steps > 0 ? plan->n_steps : 1);
  partition p = {malloc(sizeof(update) * room), 0, malloc(sizeof(piece) * (room + (size_t)plan->ranks)), 0};
  int64_t *shard_end = calloc((size_t)plan->ranks * 2, sizeof(int64_t));
  if (!p.updates || !p.pieces || !shard_end) {
    free(p.updates);
    free(p.pieces);
    free(shard_end);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "--zero %d: no memory for %d steps and %d ranks", stage, plan->n_steps,
                         plan->ranks);
  }
  const int64_t quantum = plan->alignment; /* elements: any dtype's range then starts aligned */
  const int64_t total = list_updates(plan, &p, quantum);
  cut(plan, &p, total, quantum);
  const int64_t whole = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  const int64_t whole_gradients = plan->region_bytes[TF_REGION_GRADIENTS];
  tf_status status = apply(plan, &p, shard_end, stage);
  int64_t smallest, buckets = 0;
  if (!status) {
    plan->region_bytes[TF_REGION_OPTIMIZER_STATE] = largest_of(shard_end, plan->ranks, &smallest);
    plan->zero = stage;
  }
  if (!status && stage == 2) {
    const int64_t shards = largest_of(shard_end + plan->ranks, plan->ranks, &smallest);
    status = tf_zero2_place_buckets(plan, shards, &buckets);
    plan->region_bytes[TF_REGION_GRADIENTS] = shards + buckets;
    memset(plan->report.flops, 0, sizeof(plan->report.flops)); /* the zeroing moved into the micro-batch block */
    for (int32_t s = 0; s < plan->n_steps; s++)
      plan->report.flops[plan->steps[s].phase] += plan->steps[s].flops;
  }
  if (!status) {
    tf_target_plan_overhead(target, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
    tf_target_plan_collectives(target, plan->ranks, &plan->overhead);
    note(plan, &p, stage, shard_end, whole, whole_gradients, buckets);
  }
  free(p.updates);
  free(p.pieces);
  free(shard_end);
  return status;
}
