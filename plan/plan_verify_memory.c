/* The memory half of tf_plan_verify(): no two buffers that can hold data at the same time share a
 * byte, and the report's numbers are the plan's own. This is the promise itself: if these checks
 * pass, the regions' sizes are all the memory the program touches.
 *
 * Arena disjointness is a sweep over the program: at each step where buffers start, the buffers
 * whose intervals ended are removed from a list of live buffers kept sorted by offset, and each
 * new buffer is placed by binary search and checked against its two neighbours only. Live
 * buffers are pairwise disjoint (else the sweep has stopped), so a new buffer that overlaps any of
 * them overlaps a neighbour. Two intervals that intersect do so at the later one's first step, so
 * every intersecting pair meets in the list. The intervals are the counted ones
 * (tf_plan_counted_steps): the buffers of an alias chain share one memory, and between them cover
 * its live steps once each. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_verify_internal.h"

#define INVALID(...) tf_status_new(TF_ERR_INVALID_INPUT, __VA_ARGS__)

typedef struct keyed {
  int64_t key, offset; /* sorted by key, then offset */
  int32_t id;
} keyed;

static int by_key_then_offset(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  if (x->offset != y->offset)
    return x->offset < y->offset ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static tf_status out_of_memory(const tf_plan *plan) {
  return tf_status_new(TF_ERR_OUT_OF_MEMORY, "verifying a plan of %" PRId32 " buffers: out of host memory",
                       plan->n_buffers);
}

/* Buffers of the arena (or of the other regions) that hold at least one byte of their own (an empty
 * buffer cannot overlap; a ZeRO view lies on its parent, checked by tf_plan_check_views) and, given counted steps
 * from..to, count at one step at least; keyed by key_of, or by their first (`by_end` false) or last counted step. */
static keyed *collect(const tf_plan *plan, bool arena, int64_t (*key_of)(const tf_plan_buffer *), const int32_t *from,
                      const int32_t *to, bool by_end, int32_t *count) {
  keyed *items = malloc(sizeof(keyed) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  *count = 0;
  if (!items)
    return NULL;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if ((b->region == TF_REGION_ARENA) != arena || b->bytes <= 0 || (from && from[id] > to[id]) ||
        !tf_plan_buffer_has_memory(b) || (!arena && tf_plan_is_bucket(plan, b))) /* buckets: by their steps */
      continue;
    items[(*count)++] = (keyed){key_of ? key_of(b) : by_end ? to[id] : from[id], b->offset, id};
  }
  qsort(items, (size_t)*count, sizeof(keyed), by_key_then_offset);
  return items;
}

/* A region, and within the optimizer-state region of a ZeRO plan the rank holding the shard: the
 * shards of different ranks lie on the same bytes (each rank holds its own only). */
static int64_t region_key(const tf_plan_buffer *b) {
  return (int64_t)b->region * (TF_PLAN_MAX_RANKS + 1) + (b->held_by > 0 ? b->held_by : 0);
}

tf_status tf_plan_check_persistent_disjoint(const tf_plan *plan) {
  int32_t n;
  keyed *items = collect(plan, false, region_key, NULL, NULL, false, &n);
  if (!items)
    return out_of_memory(plan);
  tf_status status = NULL;
  for (int32_t i = 1; i < n && !status; i++) {
    const tf_plan_buffer *a = &plan->buffers[items[i - 1].id], *b = &plan->buffers[items[i].id];
    if (region_key(a) == region_key(b) && a->offset + a->bytes > b->offset)
      status = INVALID("%s (bytes [%" PRId64 ", %" PRId64 ")) and %s (bytes [%" PRId64 ", %" PRId64
                       ")) overlap in region %s; buffers of a persistent region are disjoint",
                       tf_plan_buffer_label(plan, items[i - 1].id).text, a->offset, a->offset + a->bytes,
                       tf_plan_buffer_label(plan, items[i].id).text, b->offset, b->offset + b->bytes,
                       tf_region_name(a->region));
  }
  free(items);
  return status;
}

/* ---- the arena sweep ---- */

typedef struct live_list {
  const tf_plan *plan;
  int32_t *ids; /* live arena buffers, by offset */
  int32_t count;
} live_list;

/* The first index whose buffer starts at or after `offset`. */
static int32_t lower_bound(const live_list *live, int64_t offset) {
  int32_t low = 0, high = live->count;
  while (low < high) {
    int32_t middle = low + (high - low) / 2;
    if (live->plan->buffers[live->ids[middle]].offset < offset)
      low = middle + 1;
    else
      high = middle;
  }
  return low;
}

static tf_status overlap(const tf_plan *plan, int32_t a, int32_t b, int32_t step) {
  const tf_plan_buffer *x = &plan->buffers[a], *y = &plan->buffers[b];
  return INVALID("arena buffers %s (bytes [%" PRId64 ", %" PRId64 "), live steps [%" PRId32 ", %" PRId32 "]) and %s "
                 "(bytes [%" PRId64 ", %" PRId64 "), live steps [%" PRId32 ", %" PRId32 "]) overlap in memory while "
                 "both are live at step %" PRId32 " (overlapping live arena buffers)",
                 tf_plan_buffer_label(plan, a).text, x->offset, x->offset + x->bytes, x->first_step, x->last_step,
                 tf_plan_buffer_label(plan, b).text, y->offset, y->offset + y->bytes, y->first_step, y->last_step,
                 step);
}

static tf_status insert(live_list *live, int32_t id, int64_t step) {
  const tf_plan_buffer *b = &live->plan->buffers[id];
  int32_t at = lower_bound(live, b->offset);
  if (at > 0) {
    const tf_plan_buffer *before = &live->plan->buffers[live->ids[at - 1]];
    if (before->offset + before->bytes > b->offset)
      return overlap(live->plan, live->ids[at - 1], id, (int32_t)step);
  }
  if (at < live->count && b->offset + b->bytes > live->plan->buffers[live->ids[at]].offset)
    return overlap(live->plan, live->ids[at], id, (int32_t)step);
  memmove(&live->ids[at + 1], &live->ids[at], sizeof(int32_t) * (size_t)(live->count - at));
  live->ids[at] = id;
  live->count++;
  return NULL;
}

static void erase(live_list *live, int32_t id) {
  int32_t at = lower_bound(live, live->plan->buffers[id].offset);
  /* Live offsets are distinct, so `at` holds id; a miss would be a bug here, not bad input. */
  if (at < live->count && live->ids[at] == id) {
    memmove(&live->ids[at], &live->ids[at + 1], sizeof(int32_t) * (size_t)(live->count - at - 1));
    live->count--;
  }
}

/* Each buffer written over its input (an alias whose step is not a reshape) finds the memory free:
 * no other buffer of its chain written before it is read after its step. `order` is the arena's
 * buffers by chain, then first step (tf_plan_chain_order). */
static tf_status check_written_over(const tf_plan *plan, const int32_t *root, const int32_t *order, int32_t n) {
  int32_t latest = -1, latest_id = -1; /* the chain's last read so far, and by which buffer */
  for (int32_t k = 0; k < n; k++) {
    int32_t id = order[k];
    const tf_plan_buffer *b = &plan->buffers[id];
    if (k == 0 || root[id] != root[order[k - 1]])
      latest = latest_id = -1;
    bool view = b->alias_of < 0 || plan->steps[b->first_step].op == TF_OP_RESHAPE;
    if (!view && latest > b->first_step)
      return INVALID("%s is written over %s's memory at step %" PRId32 ", but %s, on that memory, is read until step "
                     "%" PRId32 "; a step writes over its input only when nothing on that memory is read later",
                     tf_plan_buffer_label(plan, id).text, tf_plan_buffer_label(plan, b->alias_of).text, b->first_step,
                     tf_plan_buffer_label(plan, latest_id).text, latest);
    if (b->last_step > latest) {
      latest = b->last_step;
      latest_id = id;
    }
  }
  return NULL;
}

/* The sweep over the counted intervals from[id]..to[id]. */
static tf_status sweep(const tf_plan *plan, const int32_t *from, const int32_t *to) {
  int32_t n_starts, n_ends;
  keyed *starts = collect(plan, true, NULL, from, to, false, &n_starts);
  keyed *ends = collect(plan, true, NULL, from, to, true, &n_ends);
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_starts > 0 ? n_starts : 1));
  if (!starts || !ends || !ids) {
    free(starts);
    free(ends);
    free(ids);
    return out_of_memory(plan);
  }
  live_list live = {plan, ids, 0};
  tf_status status = NULL;
  for (int32_t i = 0, j = 0; !status && i < n_starts; i++) {
    for (; j < n_ends && ends[j].key < starts[i].key; j++)
      erase(&live, ends[j].id);
    status = insert(&live, starts[i].id, starts[i].key);
  }
  free(starts);
  free(ends);
  free(ids);
  return status;
}

tf_status tf_plan_check_arena_disjoint(const tf_plan *plan) {
  size_t n_buffers = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *root = malloc(sizeof(int32_t) * n_buffers), *from = malloc(sizeof(int32_t) * n_buffers),
          *to = malloc(sizeof(int32_t) * n_buffers);
  int32_t n = 0, *order = root ? tf_plan_chain_order(plan, root, &n) : NULL;
  tf_status status = NULL;
  if (!order || !from || !to)
    status = out_of_memory(plan);
  if (!status)
    status = check_written_over(plan, root, order, n);
  if (!status)
    status = tf_plan_counted_steps(plan, from, to);
  if (!status)
    status = sweep(plan, from, to);
  free(root);
  free(order);
  free(from);
  free(to);
  return status;
}

/* ---- the report ---- */

/* Bytes per role, each byte once: a ZeRO view on its parent's memory and a buffer held in pieces
 * count none (the parent and the pieces count them). */
static tf_status check_role_bytes(const tf_plan *plan) {
  int64_t sums[TF_ROLE_COUNT] = {0};
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (tf_plan_buffer_has_memory(b) && __builtin_add_overflow(sums[b->role], b->bytes, &sums[b->role]))
      return INVALID("the %s buffers' bytes sum past int64", tf_role_name(b->role));
  }
  for (int role = 0; role < TF_ROLE_COUNT; role++)
    if (plan->report.role_bytes[role] != sums[role])
      return INVALID("report: role_bytes[%s] is %" PRId64 " but the %s buffers hold %" PRId64 " bytes",
                     tf_role_name((tf_buffer_role)role), plan->report.role_bytes[role],
                     tf_role_name((tf_buffer_role)role), sums[role]);
  return NULL;
}

/* A buffer's size rounded up to the plan's alignment: the slot it takes in the arena. False when
 * that passes int64 (a hostile plan: a valid one's slots fit its arena). */
static bool aligned_size(int64_t bytes, int64_t alignment, int64_t *slot) {
  int64_t remainder = bytes % alignment;
  return !__builtin_add_overflow(bytes, remainder == 0 ? 0 : alignment - remainder, slot);
}

/* Without reuse every arena buffer has a slot of its own at an aligned offset: the naive arena is
 * the sum of the buffers' sizes, each rounded up to the alignment. */
static tf_status check_arena_naive(const tf_plan *plan) {
  int64_t naive = 0, alignment = plan->alignment, slot;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_ARENA)
      continue;
    if (!aligned_size(b->bytes, alignment, &slot) || __builtin_add_overflow(naive, slot, &naive))
      return INVALID("the arena buffers' aligned sizes sum past int64");
  }
  if (plan->report.arena_naive != naive)
    return INVALID("report: arena_naive is %" PRId64 " but the arena buffers, each rounded up to the alignment %" PRId64
                   ", sum to %" PRId64 " bytes",
                   plan->report.arena_naive, alignment, naive);
  return NULL;
}

/* live_bytes[s] == the bytes of arena buffers live at s, each counted at its size rounded up to the
 * plan's alignment (no two buffers can share an alignment slot, so this is still a lower bound on
 * any valid arena); the lower bound is their maximum, reached at peak_step. Running sums stay
 * within the arena: the sweep has shown live buffers disjoint. */
static tf_status check_live_bytes(const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  if (plan->n_steps == 0) {
    if (r->arena_lower_bound != 0 || r->peak_step != -1)
      return INVALID("report: a plan without steps has arena_lower_bound 0 and peak_step -1, not %" PRId64
                     " and %" PRId32,
                     r->arena_lower_bound, r->peak_step);
    return NULL;
  }
  if (!r->live_bytes)
    return INVALID("report: live_bytes is missing; it has one entry per step (%" PRId32 ")", plan->n_steps);
  size_t n_buffers = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int64_t *delta = calloc((size_t)plan->n_steps + 1, sizeof(int64_t));
  int32_t *from = malloc(sizeof(int32_t) * n_buffers), *to = malloc(sizeof(int32_t) * n_buffers);
  tf_status status = delta && from && to ? tf_plan_counted_steps(plan, from, to) : out_of_memory(plan);
  /* Overflow-checked: the slots of disjoint buffers fit the arena only up to its last padding. */
  for (int32_t id = 0; id < plan->n_buffers && !status; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    int64_t slot;
    if (b->region == TF_REGION_ARENA && from[id] <= to[id] &&
        (!aligned_size(b->bytes, plan->alignment, &slot) ||
         __builtin_add_overflow(delta[from[id]], slot, &delta[from[id]]) ||
         __builtin_sub_overflow(delta[to[id] + 1], slot, &delta[to[id] + 1])))
      status = INVALID("the live arena buffers' aligned sizes sum past int64");
  }
  free(from);
  free(to);
  int64_t live = 0, peak = 0;
  for (int32_t s = 0; s < plan->n_steps && !status; s++) {
    if (__builtin_add_overflow(live, delta[s], &live)) {
      status = INVALID("the arena bytes live at step %" PRId32 " sum past int64", s);
      break;
    }
    if (r->live_bytes[s] != live)
      status = INVALID("report: live_bytes[%" PRId32 "] is %" PRId64 " but the arena buffers live at step %" PRId32
                       " hold %" PRId64 " bytes",
                       s, r->live_bytes[s], s, live);
    if (live > peak)
      peak = live;
  }
  free(delta);
  if (status)
    return status;
  if (r->arena_lower_bound != peak)
    return INVALID("report: arena_lower_bound is %" PRId64 " but the most bytes live at one step is %" PRId64,
                   r->arena_lower_bound, peak);
  if (r->peak_step < 0 || r->peak_step >= plan->n_steps || r->live_bytes[r->peak_step] != peak)
    return INVALID("report: peak_step %" PRId32 " is not a step where the arena's live bytes peak (%" PRId64 ")",
                   r->peak_step, peak);
  return NULL;
}

tf_status tf_plan_check_report(const tf_plan *plan) {
  TF_RETURN_IF_ERROR(check_role_bytes(plan));
  TF_RETURN_IF_ERROR(check_arena_naive(plan));
  TF_RETURN_IF_ERROR(check_live_bytes(plan));
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    if (!isfinite(plan->report.flops[phase]) || plan->report.flops[phase] < 0)
      return INVALID("report: flops[%s] is %g; an estimate is finite and >= 0", tf_phase_name((tf_phase)phase),
                     plan->report.flops[phase]);
  return NULL;
}
