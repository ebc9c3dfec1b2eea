/* ZeRO stages 1 and 2 with parameters split across ranks (compiler/zero.c, plan/plan_verify_views.c): the
 * one-layer zoo gpt compiled for 4 ranks shards its AdamW state into 4 shards of a quarter each (within
 * the alignment of its pieces), splitting the updates the cuts fall in into ranges whose parameter and
 * gradient are views on their bytes and whose state pieces lie in their rank's shard; the plan
 * verifies and round-trips its views through the file format. Malformed views are refused by name:
 * overlapping views, a view outside its parent, a view of another region, a view that does not lie
 * on its parent's bytes, a buffer held in pieces without pieces, a step every rank runs reading a
 * view, and a range whose operands cover other elements. Stage 2 (compiler/zero2.c,
 * plan/plan_verify_buckets.c) shards the gradients alike, a quarter a rank, the backward pass writing
 * buckets past the shards, live ones on other bytes; refused by name: a bucket on the shards' bytes,
 * two live buckets overlapping, an update reading a bucket, a shard made a second bucket, a norm of
 * the whole gradients, a bucket accumulated into before any step wrote it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/ops.h"
#include "tightfit/compiler.h"
#include "tightfit/plan.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

#define RANKS 4

/* gpt (1 layer) at N=2, T=32 with AdamW over RANKS ranks for `target`, the optimizer state (`state`)
 * and the activations kept for the backward pass (`activations`) in host memory or not. */
static tf_plan *plan_offloading(tf_target_kind target, int32_t zero, double clip_norm, int32_t accumulate, bool state,
                                bool activations, bool gradients) {
  const char *const overrides[] = {"layers=1"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build("gpt", overrides, 1, &g));
  tf_compile_options options = tf_compile_options_default(target);
  options.offload_optimizer = state;
  options.offload_activations = activations;
  options.offload_gradients = gradients;
  options.bindings = "N=2,T=32";
  options.optimizer = TF_OPTIMIZER_ADAMW;
  options.ranks = RANKS;
  options.zero = zero;
  options.clip_norm = clip_norm;
  options.accumulate = accumulate;
  if (accumulate > 1)
    options.update_in_backward = TF_CHOICE_OFF;
  tf_plan *plan = NULL;
  if (g)
    CHECK_OK(&counts, tf_compile(g, &options, &plan));
  tf_graph_destroy(g);
  return plan;
}

static tf_plan *plan_of(tf_target_kind target, int32_t zero, double clip_norm, int32_t accumulate, bool state,
                        bool activations) {
  return plan_offloading(target, zero, clip_norm, accumulate, state, activations, false);
}

/* The cpu target's plan; `offload`: the vulkan target's with the optimizer state in host memory
 * (ZeRO-Offload). */
static tf_plan *compiled_for(int32_t zero, double clip_norm, int32_t accumulate, bool offload) {
  return plan_of(offload ? TF_TARGET_VULKAN : TF_TARGET_CPU, zero, clip_norm, accumulate, offload, false);
}

/* The vulkan target's plan, the state and the activations in host memory or not. */
static tf_plan *vulkan_plan(int32_t zero, bool state, bool activations) {
  return plan_of(TF_TARGET_VULKAN, zero, 0.0, 1, state, activations);
}

static tf_plan *compiled_with(int32_t zero, double clip_norm, int32_t accumulate) {
  return compiled_for(zero, clip_norm, accumulate, false);
}

static tf_plan *compiled(int32_t zero, double clip_norm) { return compiled_with(zero, clip_norm, 1); }

/* A fresh copy of `plan` through the file format (verified on the way back). */
static tf_plan *copy_of(const tf_plan *plan) {
  void *data = NULL;
  size_t size = 0;
  tf_plan *back = NULL;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  CHECK_OK(&counts, tf_plan_parse(data, size, "zero plan", &back));
  free(data);
  return back;
}

/* The first view of `role` whose parent has another view after it: *next is that one. */
static int32_t split_view(const tf_plan *plan, tf_buffer_role role, int32_t *next) {
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->view_of == 0 || b->role != role || b->view_at != 0)
      continue;
    for (int32_t other = 0; other < plan->n_buffers; other++)
      if (plan->buffers[other].view_of == b->view_of && plan->buffers[other].view_at == b->bytes) {
        *next = other;
        return id;
      }
  }
  return -1;
}

static void test_shards(void) {
  tf_plan *stage0 = compiled(0, 0), *plan = compiled(1, 0);
  if (!stage0 || !plan) {
    tf_plan_destroy(stage0);
    tf_plan_destroy(plan);
    return;
  }
  CHECK_OK(&counts, tf_plan_verify(plan));
  const int64_t whole = stage0->region_bytes[TF_REGION_OPTIMIZER_STATE];
  const int64_t shard = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  int32_t views = 0, in_pieces = 0, ranges = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    views += plan->buffers[id].view_of != 0;
    in_pieces += plan->buffers[id].held_by == -1;
  }
  int64_t held[RANKS] = {0};
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    ranges += step->held_by > 0 && plan->buffers[step->inputs[0]].view_of != 0;
    for (int32_t k = 0; step->held_by > 0 && k < step->n_inputs; k++)
      if (plan->buffers[step->inputs[k]].region == TF_REGION_OPTIMIZER_STATE)
        held[step->held_by - 1] += plan->buffers[step->inputs[k]].bytes;
  }
  printf("gpt 1 layer, %d ranks: state %lld of %lld bytes per rank (a quarter: %lld), ranks hold %lld %lld %lld %lld; "
         "%d views, %d state buffers in pieces, %d range steps\n",
         RANKS, (long long)shard, (long long)whole, (long long)(whole / RANKS), (long long)held[0], (long long)held[1],
         (long long)held[2], (long long)held[3], views, in_pieces, ranges);
  /* each shard within the padding of its buffers (16 updates x 2 moments x 64 bytes) of a quarter */
  for (int r = 0; r < RANKS; r++)
    CHECK(&counts, held[r] > whole / RANKS - 4096 && held[r] < whole / RANKS + 4096,
          "rank %d holds %lld bytes of state, a quarter is %lld", r, (long long)held[r], (long long)(whole / RANKS));
  CHECK(&counts, shard <= whole / RANKS + 4096, "the state region %lld, a quarter %lld", (long long)shard,
        (long long)(whole / RANKS));
  CHECK(&counts, in_pieces >= 2 && ranges >= RANKS && views == ranges * 4, "%d in pieces, %d ranges, %d views",
        in_pieces, ranges, views);
  tf_plan *back = copy_of(plan);
  int32_t next = -1, first = back ? split_view(back, TF_ROLE_PARAMETER, &next) : -1;
  CHECK(&counts, first >= 0 && back->buffers[next].view_at == back->buffers[first].bytes,
        "the views survive the file format");

  tf_plan *bad = copy_of(plan);
  if (bad && first >= 0) { /* the next range starts one alignment early, on the first's last elements */
    bad->buffers[next].view_at -= bad->alignment;
    bad->buffers[next].offset -= bad->alignment;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "overlapping views"), "overlapping views: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  if (bad && first >= 0) { /* the first range moved past its parameter's end */
    bad->buffers[first].view_at = bad->buffers[bad->buffers[first].view_of - 1].bytes;
    bad->buffers[first].offset = bad->buffers[bad->buffers[first].view_of - 1].offset + bad->buffers[first].view_at;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "a view outside its parent"), "outside: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  int32_t gradient = -1;
  for (int32_t id = 0; bad && id < bad->n_buffers && gradient < 0; id++)
    gradient = bad->buffers[id].role == TF_ROLE_GRADIENT && bad->buffers[id].view_of == 0 ? id : -1;
  if (bad && first >= 0 && gradient >= 0) { /* a parameter's range said to be a gradient's */
    bad->buffers[first].view_of = gradient + 1;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "a view of another region"), "another region: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  if (bad && first >= 0) { /* the first range at its own offset, off its parameter's bytes */
    bad->buffers[first].offset += bad->alignment;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "it lies on its bytes"), "off its parent: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  if (bad && first >= 0) { /* a file's extremes (found by fuzz_plan_load): no arithmetic on them overflows */
    bad->buffers[first].view_of = INT32_MIN;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "not another buffer"), "view_of INT32_MIN: %s", message);
    tf_status_free(status);
    bad->buffers[first].view_of = bad->buffers[next].view_of;
    bad->buffers[first].view_at = INT64_MAX - 7;
    status = tf_plan_verify(bad);
    message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "a view outside its parent"), "view_at INT64_MAX: %s", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  tf_plan_destroy(back);
  tf_plan_destroy(stage0);
  tf_plan_destroy(plan);
}

/* The steps' side: a step every rank runs reading a view (clipping's norm reading a range of a
 * gradient for the whole), a range over other elements, a state held in pieces whose pieces are gone. */
static void test_steps(void) {
  tf_plan *plan = compiled(1, 1.0);
  if (!plan)
    return;
  CHECK_OK(&counts, tf_plan_verify(plan));
  int32_t range = -1, norm = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    range = range < 0 && plan->steps[s].held_by > 0 && plan->buffers[plan->steps[s].inputs[0]].view_of != 0 ? s : range;
    norm = plan->steps[s].op == TF_OP_GLOBAL_NORM_SQ ? s : norm;
  }
  CHECK(&counts, range >= 0 && norm >= 0 && norm < range, "a range step %d after the norm %d", range, norm);
  tf_plan *bad = copy_of(plan);
  if (bad && range >= 0 && norm >= 0) {
    const int32_t view = bad->steps[range].inputs[1], gradient = bad->buffers[view].view_of - 1;
    for (int32_t k = 0; k < bad->steps[norm].n_inputs; k++)
      bad->steps[norm].inputs[k] = bad->steps[norm].inputs[k] == gradient ? view : bad->steps[norm].inputs[k];
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "reads a view; only an sgd or adamw step held by one rank"),
          "every rank: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  if (bad && range >= 0) { /* the gradient's two ranges trade places: the first range reads its last elements */
    tf_plan_step *step = &bad->steps[range];
    tf_plan_buffer *first_range = &bad->buffers[step->inputs[1]];
    const tf_plan_buffer *parent = &bad->buffers[first_range->view_of - 1];
    int32_t other = -1;
    for (int32_t id = 0; id < bad->n_buffers && other < 0; id++)
      other = bad->buffers[id].view_of == first_range->view_of && id != step->inputs[1] ? id : -1;
    CHECK(&counts, other >= 0 && first_range->view_at == 0 && bad->buffers[other].view_at == first_range->bytes,
          "two ranges of the gradient");
    if (other >= 0) {
      first_range->view_at = bad->buffers[other].bytes;
      first_range->offset = parent->offset + first_range->view_at;
      bad->buffers[other].view_at = 0;
      bad->buffers[other].offset = parent->offset;
      tf_status status = tf_plan_verify(bad);
      const char *message = tf_status_message(status);
      CHECK(&counts, status && strstr(message, "a range reads the same elements"), "other elements: %s", message);
      printf("refused: %s\n", message);
      tf_status_free(status);
    }
  }
  tf_plan_destroy(bad);
  bad = copy_of(plan);
  if (bad && range >= 0) { /* the pieces of its first moment made whole buffers of no one */
    const int32_t whole = bad->buffers[bad->steps[range].inputs[2]].view_of;
    for (int32_t id = 0; id < bad->n_buffers; id++)
      if (bad->buffers[id].view_of == whole)
        bad->buffers[id].view_of = 0;
    tf_status status = tf_plan_verify(bad);
    const char *message = tf_status_message(status);
    CHECK(&counts, status && strstr(message, "is held in pieces (held_by -1) but has none"), "no pieces: %s", message);
    printf("refused: %s\n", message);
    tf_status_free(status);
  }
  tf_plan_destroy(bad);
  tf_plan_destroy(plan);
}

/* Whether b is a stage-2 bucket: a gradient of the gradients region every rank holds. */
static bool bucket(const tf_plan_buffer *b) {
  return b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by == 0 && b->view_of == 0;
}

/* tf_plan_verify(bad) refuses, naming `reason`; bad destroyed. */
static void refused(tf_plan *bad, const char *reason) {
  tf_status status = bad ? tf_plan_verify(bad) : NULL;
  const char *message = tf_status_message(status);
  CHECK(&counts, status && strstr(message, reason), "%s: %s", reason, message ? message : "(verified)");
  printf("refused: %s\n", message ? message : "(verified)");
  tf_status_free(status);
  tf_plan_destroy(bad);
}

/* The steps of the micro-batch block that touch buffer id: the first and the last, -1 for none. */
static void touched(const tf_plan *plan, int32_t id, int32_t *first, int32_t *last) {
  *first = *last = -1;
  for (int32_t s = 0; s < plan->micro_steps; s++)
    for (int32_t k = 0; k < plan->steps[s].n_inputs + plan->steps[s].n_outputs; k++) {
      bool written;
      if (tf_plan_step_operand(&plan->steps[s], k, &written) == id) {
        *first = *first < 0 ? s : *first;
        *last = s;
      }
    }
}

/* ZeRO stage 2: the gradients sharded as the state (a quarter a rank, within the alignment of its
 * pieces), a bucket a gradient (the whole gradients in buckets, their region the shard and the
 * buckets' area), and malformed buckets refused by name. */
static void test_stage2(void) {
  tf_plan *stage1 = compiled(1, 0), *plan = compiled(2, 0), *accumulating = compiled_with(2, 0, 2);
  if (!stage1 || !plan || !accumulating) {
    tf_plan_destroy(stage1);
    tf_plan_destroy(plan);
    tf_plan_destroy(accumulating);
    return;
  }
  CHECK_OK(&counts, tf_plan_verify(plan));
  CHECK_OK(&counts, tf_plan_verify(accumulating));
  const int64_t whole = stage1->region_bytes[TF_REGION_GRADIENTS];
  int64_t held[RANKS] = {0}, buckets = 0, shards_end = 0, area_start = INT64_MAX, area_end = 0;
  int32_t n_buckets = 0, in_pieces = 0, long_bucket = -1, short_bucket = -1;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->role != TF_ROLE_GRADIENT)
      continue;
    in_pieces += b->held_by == -1;
    if (b->held_by > 0) {
      held[b->held_by - 1] += b->bytes;
      shards_end = b->offset + b->bytes > shards_end ? b->offset + b->bytes : shards_end;
    }
    if (!bucket(b))
      continue;
    n_buckets++;
    buckets += b->bytes;
    area_start = b->offset < area_start ? b->offset : area_start;
    area_end = b->offset + b->bytes > area_end ? b->offset + b->bytes : area_end;
    int32_t first, last, from = 0, to = -1;
    touched(plan, id, &first, &last);
    if (long_bucket >= 0)
      touched(plan, long_bucket, &from, &to);
    long_bucket = last - first > to - from ? id : long_bucket;
  }
  int32_t from = 0, to = -1;
  if (long_bucket >= 0)
    touched(plan, long_bucket, &from, &to);
  for (int32_t id = 0; id < plan->n_buffers && short_bucket < 0; id++) { /* one live within the longest's steps */
    int32_t first, last;
    touched(plan, id, &first, &last);
    short_bucket = bucket(&plan->buffers[id]) && first == last && from < first && last < to ? id : -1;
  }
  printf(
      "stage 2, %d ranks: gradients %lld bytes per rank of %lld (ranks hold %lld %lld %lld %lld), %d buckets of %lld "
      "bytes on %lld, %d gradients in pieces\n",
      RANKS, (long long)plan->region_bytes[TF_REGION_GRADIENTS], (long long)whole, (long long)held[0],
      (long long)held[1], (long long)held[2], (long long)held[3], n_buckets, (long long)buckets,
      (long long)(area_end - area_start), in_pieces);
  for (int r = 0; r < RANKS; r++)
    CHECK(&counts, held[r] > whole / RANKS - 4096 && held[r] < whole / RANKS + 4096,
          "rank %d holds %lld bytes of gradients, a quarter is %lld", r, (long long)held[r],
          (long long)(whole / RANKS));
  int64_t gradients = 0; /* stage 1's gradients, every rank's whole */
  for (int32_t id = 0; id < stage1->n_buffers; id++)
    gradients += stage1->buffers[id].role == TF_ROLE_GRADIENT && stage1->buffers[id].view_of == 0
                     ? stage1->buffers[id].bytes
                     : 0;
  CHECK(&counts, buckets == gradients && n_buckets == 16 && in_pieces >= 1,
        "%d buckets of %lld bytes (the gradients: %lld), %d in pieces", n_buckets, (long long)buckets,
        (long long)gradients, in_pieces);
  CHECK(&counts,
        area_start >= shards_end && area_end - area_start < buckets / 2 &&
            plan->region_bytes[TF_REGION_GRADIENTS] == area_end,
        "the buckets' area [%lld, %lld) past the shards (%lld), below half their %lld bytes", (long long)area_start,
        (long long)area_end, (long long)shards_end, (long long)buckets);
  CHECK(&counts, long_bucket >= 0 && short_bucket >= 0, "a bucket living through the backward pass and one step");

  tf_plan *bad = copy_of(plan);
  if (bad && short_bucket >= 0) /* a bucket moved onto the shards */
    bad->buffers[short_bucket].offset = 0;
  refused(bad, "a bucket on the shards' bytes");
  bad = copy_of(plan);
  if (bad && long_bucket >= 0 && short_bucket >= 0) { /* a bucket onto another live at its step */
    bad->buffers[short_bucket].offset = bad->buffers[long_bucket].offset;
  }
  refused(bad, "overlapping live buckets");
  bad = copy_of(plan);
  int32_t update = -1;
  for (int32_t s = plan->micro_steps; s < plan->n_steps && update < 0; s++)
    update = plan->steps[s].held_by > 0 && plan->buffers[plan->steps[s].inputs[1]].view_of == 0 ? s : -1;
  if (bad && update >= 0 && short_bucket >= 0) { /* an update reading a bucket, not its shard */
    const int32_t shard = bad->steps[update].inputs[1];
    for (int32_t id = 0; id < bad->n_buffers; id++)
      if (bucket(&bad->buffers[id]) && bad->buffers[id].owner == bad->buffers[shard].owner)
        bad->steps[update].inputs[1] = id;
  }
  refused(bad, "a bucket read in the optimizer block");
  bad = copy_of(plan);
  if (bad && update >= 0) /* a shard made every rank's: a second bucket of its parameter */
    bad->buffers[bad->steps[update].inputs[1]].held_by = 0;
  refused(bad, "a bucket without its shard");
  bad = copy_of(plan);
  if (bad)
    bad->overflow_check = bad->buffers[0].role == TF_ROLE_GRADIENT ? 0 : bad->loss;
  refused(bad, "reads the norm of the whole gradients");

  /* accumulating: each bucket zeroed first in the micro-batch block; one zero step on another's bucket */
  int32_t zeros[2] = {-1, -1}, n_zeros = 0;
  for (int32_t s = 0; s < accumulating->micro_steps && n_zeros < 2; s++)
    if (accumulating->steps[s].op == TF_OP_ZERO)
      zeros[n_zeros++] = s;
  CHECK(&counts, n_zeros == 2, "the accumulating plan zeroes its buckets in the micro-batch block");
  bad = copy_of(accumulating);
  if (bad && n_zeros == 2)
    bad->steps[zeros[0]].inputs[0] = bad->steps[zeros[1]].inputs[0];
  refused(bad, "a bucket read before it is written");
  tf_plan_destroy(stage1);
  tf_plan_destroy(plan);
  tf_plan_destroy(accumulating);
}

/* ZeRO-Offload (--zero 1 --offload optimizer): the updates are host steps, each held by the rank of
 * its shard (every rank runs some), the shards in the host region (its size the largest shard's, the
 * device's state region empty), kept through the file format; a rank moves about a quarter of what a
 * stage-0 offloaded plan moves. A held host step outside the optimizer block is refused, and so is a
 * ZeRO plan with a host step in its micro-batch block. */
static void test_offloaded(void) {
  tf_plan *plan = compiled_for(1, 0.0, 1, true);
  if (!plan)
    return;
  CHECK_OK(&counts, tf_plan_verify(plan));
  tf_plan *device = vulkan_plan(1, false, false); /* the same shards on the device */
  tf_plan *plain = vulkan_plan(0, true, false);   /* every rank's whole state offloaded */
  int32_t per_rank[RANKS] = {0}, held = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    if (step->held_by > 0 && step->held_by <= RANKS && tf_op_is_update(step->op))
      per_rank[step->held_by - 1]++, held++;
  }
  bool every_rank = true;
  for (int32_t r = 0; r < RANKS; r++)
    every_rank = every_rank && per_rank[r] > 0;
  const int64_t shard = device ? device->region_bytes[TF_REGION_OPTIMIZER_STATE] : -1;
  const int64_t moved = tf_plan_host_moved_bytes(plan), moved_whole = plain ? tf_plan_host_moved_bytes(plain) : 0;
  CHECK(&counts, held > 0 && every_rank, "%d held host steps, each rank some", held);
  CHECK(&counts,
        plan->region_bytes[TF_REGION_OPTIMIZER_STATE] == 0 && plan->host_bytes == shard &&
            shard < plain->host_bytes / 2,
        "host region %lld bytes = the device plan's largest shard %lld (the whole state %lld), device state %lld",
        (long long)plan->host_bytes, (long long)shard, (long long)(plain ? plain->host_bytes : -1),
        (long long)plan->region_bytes[TF_REGION_OPTIMIZER_STATE]);
  CHECK(&counts, moved > 0 && moved < moved_whole / 2, "a rank moves %lld bytes a step, a stage-0 offload %lld",
        (long long)moved, (long long)moved_whole);
  printf("ZeRO-Offload over %d ranks: %d updates on the host (%d %d %d %d a rank), host region %lld bytes (the "
         "largest shard; the whole state %lld), %lld bytes moved a step on the busiest rank (stage 0: %lld)\n",
         RANKS, held, per_rank[0], per_rank[1], per_rank[2], per_rank[3], (long long)plan->host_bytes,
         (long long)(plain ? plain->host_bytes : -1), (long long)moved, (long long)moved_whole);
  tf_plan *back = copy_of(plan);
  bool kept = back && back->n_host_steps == plan->n_host_steps && back->host_bytes == plan->host_bytes;
  for (int32_t h = 0; kept && h < plan->n_host_steps; h++)
    kept = back->host_steps[h].held_by == plan->host_steps[h].held_by;
  CHECK(&counts, kept, "the held host steps survive the file format");
  tf_plan_destroy(back);
  int32_t first_held = -1;
  for (int32_t h = 0; h < plan->n_host_steps && first_held < 0; h++)
    first_held = plan->host_steps[h].held_by > 0 ? h : -1;
  if ((back = copy_of(plan)) && first_held >= 0)
    back->host_steps[first_held].phase = TF_PHASE_FORWARD; /* a held update moved into the micro-batch block */
  refused(back, "only the updates of a ZeRO plan's optimizer block run on one rank");
  if ((back = copy_of(plan)) && first_held >= 0)
    back->host_steps[first_held].held_by = RANKS + 1;
  refused(back, "only the updates of a ZeRO plan's optimizer block run on one rank");
  tf_plan_destroy(device);
  tf_plan_destroy(plain);
  tf_plan_destroy(plan);
}

/* ZeRO with offloaded activations (vulkan target, stages 1 and 2): the copies are host steps of the
 * micro-batch block that touch no gradient, and the plan verifies; at stage 2 one of them made to
 * read a gradient (an offloaded gradient's accumulation, which the reductions at the pauses would
 * have to wait for) is refused. */
static void test_offloaded_activations(void) {
  for (int32_t zero = 1; zero <= 2; zero++) {
    tf_plan *plan = vulkan_plan(zero, false, true);
    if (!plan)
      continue;
    int32_t copy = -1, gradient = -1;
    for (int32_t h = 0; h < plan->n_host_steps && copy < 0; h++)
      copy = plan->host_steps[h].phase != TF_PHASE_OPTIMIZER && plan->host_steps[h].n_inputs > 0 ? h : -1;
    for (int32_t id = 0; id < plan->n_buffers && gradient < 0; id++)
      gradient = plan->buffers[id].role == TF_ROLE_GRADIENT ? id : -1;
    CHECK(&counts, copy >= 0 && plan->zero == zero, "ZeRO %d: an activation's copy among %d host steps", zero,
          plan->n_host_steps);
    CHECK_OK(&counts, tf_plan_verify(plan));
    tf_plan *back = zero == 2 ? copy_of(plan) : NULL;
    if (back && copy >= 0 && gradient >= 0) {
      back->host_steps[copy].inputs[0] = gradient;
      tf_status status = tf_plan_verify(back);
      const char *message = tf_status_message(status);
      CHECK(&counts, status && strstr(message, "host steps in the micro-batch block that touch a gradient"),
            "ZeRO %d, a copy reading a gradient: %s", zero, message);
      printf("refused: %s\n", message);
      tf_status_free(status);
    }
    tf_plan_destroy(back);
    tf_plan_destroy(plan);
  }
}

/* ZeRO stage 1 with offloaded gradients (vulkan target): the plan verifies with host steps of the
 * micro-batch block adding into gradients in host memory, and the split updates' gradient views lie
 * in host memory inside their parents; the same plan marked stage 2 is refused. */
static void test_offloaded_gradients(void) {
  tf_plan *plan = plan_offloading(TF_TARGET_VULKAN, 1, 0.0, 1, false, false, true);
  if (!plan)
    return;
  int32_t accumulations = 0, views = 0, views_in_host = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    for (int32_t k = 0; step->phase != TF_PHASE_OPTIMIZER && k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      if (written && plan->buffers[id].role == TF_ROLE_GRADIENT) {
        accumulations++;
        break;
      }
    }
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->role != TF_ROLE_GRADIENT || b->view_of == 0)
      continue;
    const tf_plan_buffer *parent = &plan->buffers[b->view_of - 1];
    views++;
    views_in_host +=
        b->region == TF_REGION_HOST && parent->region == TF_REGION_HOST && b->offset == parent->offset + b->view_at;
  }
  CHECK_OK(&counts, tf_plan_verify(plan));
  CHECK(&counts, plan->zero == 1 && accumulations > 0 && views > 0 && views_in_host == views,
        "ZeRO 1, offloaded gradients: %d accumulations on the host, %d of %d gradient views in host memory at their "
        "parents' bytes",
        accumulations, views_in_host, views);
  printf("ZeRO 1 with offloaded gradients: %d accumulations on the host, %d gradient views in host memory\n",
         accumulations, views);
  tf_plan *back = copy_of(plan);
  if (back) {
    back->zero = 2;
    tf_status status = tf_plan_verify(back);
    CHECK(&counts,
          status && strstr(tf_status_message(status), "host steps in the micro-batch block that touch a gradient"),
          "marked stage 2: %s", tf_status_message(status));
    tf_status_free(status);
  }
  tf_plan_destroy(back);
  tf_plan_destroy(plan);
}

/* Whether b is a ZeRO stage-2 gradient bucket (every rank's, written by the backward pass). */
static bool is_bucket(const tf_plan_buffer *b) {
  return b->role == TF_ROLE_GRADIENT && b->held_by == 0 && b->view_of == 0;
}

/* ZeRO stage 2 with offloaded gradients (vulkan target, 2 micro-batches, clipping): the plan verifies;
 * no host step runs in the micro-batch block (the device's buckets, reduced at the pauses, do the
 * summing); every shard, whole or a piece, is in host memory, every bucket stays in the gradients
 * region, which is the offload-optimizer plan's less its shards' bytes; a shard put back on the
 * buckets' bytes is refused, and so is a bucket moved to host memory (device steps write it). */
static void test_stage2_offloaded_gradients(void) {
  tf_plan *plan = plan_offloading(TF_TARGET_VULKAN, 2, 1.0, 2, false, false, true);
  tf_plan *state = plan_offloading(TF_TARGET_VULKAN, 2, 1.0, 2, true, false, false);
  if (!plan || !state) {
    tf_plan_destroy(plan);
    tf_plan_destroy(state);
    return;
  }
  CHECK_OK(&counts, tf_plan_verify(plan));
  int32_t micro_host = 0, shards = 0, shards_in_host = 0, buckets = 0, buckets_on_device = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    micro_host += plan->host_steps[h].phase != TF_PHASE_OPTIMIZER;
  int64_t first_bucket = INT64_MAX, shard_bytes = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->role != TF_ROLE_GRADIENT)
      continue;
    if (is_bucket(b)) {
      buckets++;
      buckets_on_device += b->region == TF_REGION_GRADIENTS;
      first_bucket = b->offset < first_bucket ? b->offset : first_bucket;
      continue;
    }
    shards++;
    shards_in_host += b->region == TF_REGION_HOST;
  }
  for (int32_t id = 0; id < state->n_buffers; id++) { /* the device's shards in the state-offloaded plan */
    const tf_plan_buffer *b = &state->buffers[id];
    if (b->role == TF_ROLE_GRADIENT && !is_bucket(b) && b->held_by > 0 && b->offset + b->bytes > shard_bytes)
      shard_bytes = b->offset + b->bytes;
  }
  CHECK(&counts, micro_host == 0, "ZeRO 2, offloaded gradients: %d host steps in the micro-batch block", micro_host);
  CHECK(&counts, shards > 0 && shards_in_host == shards && buckets > 0 && buckets_on_device == buckets,
        "ZeRO 2, offloaded gradients: %d of %d shards in host memory, %d of %d buckets on the device", shards_in_host,
        shards, buckets_on_device, buckets);
  const int64_t device = plan->region_bytes[TF_REGION_GRADIENTS], before = state->region_bytes[TF_REGION_GRADIENTS];
  CHECK(&counts, first_bucket == 0 && shard_bytes > 0 && device < before && device >= before - shard_bytes,
        "ZeRO 2, offloaded gradients: gradients region %lld bytes (first bucket at %lld), %lld with the shards "
        "(%lld bytes of them) on the device",
        (long long)device, (long long)first_bucket, (long long)before, (long long)shard_bytes);
  printf("ZeRO 2 with offloaded gradients: %d shards in host memory, %d buckets on the device, gradients region "
         "%lld -> %lld bytes\n",
         shards, buckets, (long long)before, (long long)device);
  tf_plan *back = copy_of(plan);
  for (int32_t id = 0; back && id < back->n_buffers; id++) {
    tf_plan_buffer *b = &back->buffers[id];
    if (b->role == TF_ROLE_GRADIENT && b->held_by > 0 && b->view_of == 0 && b->region == TF_REGION_HOST) {
      b->region = TF_REGION_GRADIENTS; /* back on the device, at offset 0: the first bucket's bytes */
      b->offset = 0;
      tf_status status = tf_plan_verify(back);
      CHECK(&counts, status && strstr(tf_status_message(status), "a bucket on the shards' bytes"),
            "a shard on the buckets' bytes: %s", tf_status_message(status));
      tf_status_free(status);
      break;
    }
  }
  tf_plan_destroy(back);
  back = copy_of(plan);
  for (int32_t id = 0; back && id < back->n_buffers; id++) {
    tf_plan_buffer *b = &back->buffers[id];
    if (is_bucket(b) && b->region == TF_REGION_GRADIENTS) {
      b->region = TF_REGION_HOST; /* at offset 0 of the host region: in bounds, on another buffer's bytes */
      tf_status status = tf_plan_verify(back); /* the device's backward pass writes it */
      CHECK(&counts, status && strstr(tf_status_message(status), "which lies in host memory; only host steps"),
            "a bucket in host memory: %s", tf_status_message(status));
      tf_status_free(status);
      break;
    }
  }
  tf_plan_destroy(back);
  tf_plan_destroy(state);
  tf_plan_destroy(plan);
}

int main(void) {
  test_shards();
  test_steps();
  test_stage2();
  test_offloaded();
  test_offloaded_activations();
  test_offloaded_gradients();
  test_stage2_offloaded_gradients();
  return tf_test_finish("test_zero_plan", &counts);
}
