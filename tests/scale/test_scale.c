/* Compile work linear in graph size (issue 49, fault 9: a 100,000-op chain compiled in 152 s).
 * 1. The arena packing (compiler/arena_pack.c) on the buffers of a training chain of n ops (n
 *    activations saved for the backward pass, all live at once, and n short-lived gradients):
 *    its placements equal the plain item-by-item best-fit scan's (written out below), and the
 *    work it counts grows about as n^1.5 from n = 10,000 to 20,000 (the scan's grows as n^2).
 *    Random item sets check the placements too.
 * 2. Chains of 10,000 and 20,000 ops (chain.h) compiled for training and inference: each plan is
 *    verified by the compiler, and its steps and arena grow by exactly the ops added (an in-place
 *    relu chain's inference arena does not grow at all). No time is measured. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compiler/arena_pack.h"
#include "scale/chain.h"
#include "tightfit/compiler.h"

/* The packing as it was: each item scans every placed item, in offset order. */
static int64_t scan_place(arena_item *item, arena_item **placed, int32_t n) {
  int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
  for (int32_t k = 0; k < n; k++) {
    const arena_item *other = placed[k];
    if (other->first > item->last || item->first > other->last)
      continue;
    int64_t gap = other->offset - cursor;
    if (gap >= item->size && gap < best_gap) {
      best = cursor;
      best_gap = gap;
    }
    if (other->offset + other->size > cursor)
      cursor = other->offset + other->size;
  }
  item->offset = best >= 0 ? best : cursor;
  int32_t at = n;
  while (at > 0 && placed[at - 1]->offset > item->offset)
    at--;
  memmove(&placed[at + 1], &placed[at], sizeof(arena_item *) * (size_t)(n - at));
  placed[at] = item;
  return n;
}

static int by_size_desc(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? 1 : -1;
  if (x->first != y->first)
    return x->first - y->first;
  return x->id - y->id;
}

static int by_id(const void *a, const void *b) { return ((const arena_item *)a)->id - ((const arena_item *)b)->id; }

/* Packs a copy of items[0..n) with tf_arena_pack, largest first only (a lower bound above any arena
 * stops it after its first order), and unless scan_work is NULL with the scan too; returns how many
 * placements differ (0 without the scan), and the work of each. */
static int32_t compare_packings(const arena_item *items, int32_t n, int64_t *work, int64_t *scan_work, int64_t *arena) {
  arena_item *mine = malloc(sizeof(arena_item) * (size_t)n), *theirs = malloc(sizeof(arena_item) * (size_t)n);
  arena_item **placed = malloc(sizeof(arena_item *) * (size_t)n);
  if (!mine || !theirs || !placed) {
    free(mine);
    free(theirs);
    free(placed);
    return n;
  }
  memcpy(mine, items, sizeof(arena_item) * (size_t)n);
  memcpy(theirs, items, sizeof(arena_item) * (size_t)n);
  tf_status status = tf_arena_pack(mine, n, INT64_MAX - 1, arena, work);
  qsort(theirs, (size_t)n, sizeof(arena_item), by_size_desc);
  for (int32_t i = 0; i < n && scan_work; i++)
    *scan_work += scan_place(&theirs[i], placed, i);
  qsort(mine, (size_t)n, sizeof(arena_item), by_id);
  qsort(theirs, (size_t)n, sizeof(arena_item), by_id);
  int32_t differ = status ? n : 0;
  for (int32_t i = 0; i < n && !status; i++)
    differ += scan_work && mine[i].offset != theirs[i].offset;
  tf_status_free(status);
  free(mine);
  free(theirs);
  free(placed);
  return differ;
}

/* The arena items of a training chain of n ops: activation i lives from step i to its gradient's
 * step 2n - i, gradient i for two steps there. */
static arena_item *chain_items(int32_t n) {
  arena_item *items = malloc(sizeof(arena_item) * 2 * (size_t)n);
  for (int32_t i = 0; items && i < n; i++) {
    items[2 * i] = (arena_item){128, i, 2 * n - i, 2 * i, 0};
    items[2 * i + 1] = (arena_item){128, 2 * n - i, 2 * n - i + 1, 2 * i + 1, 0};
  }
  return items;
}

static void check_packing(tf_test_counts *c) {
  int64_t work[2], scan_work[2] = {0, 0};
  for (int32_t k = 0; k < 2; k++) {
    const int32_t n = 10000 * (k + 1);
    arena_item *items = chain_items(n);
    int64_t arena = 0;
    /* the scan's work is n^2 / 2 for n items: it runs at 10,000 ops only */
    int32_t differ = items ? compare_packings(items, 2 * n, &work[k], k == 0 ? &scan_work[0] : NULL, &arena) : -1;
    printf("chain of %" PRId32 " ops: %" PRId32 " items, arena %" PRId64 " bytes, work %" PRId64 "; ", n, 2 * n, arena,
           work[k]);
    if (k == 0)
      printf("the scan's work %" PRId64 ", placements differing from the scan's: %" PRId32 "\n", scan_work[0], differ);
    else
      printf("(not compared with the scan)\n");
    CHECK(c, differ == 0, "%" PRId32 " of %" PRId32 " placements differ", differ, 2 * n);
    free(items);
  }
  double ratio = (double)work[1] / (double)work[0];
  printf("work from 10,000 to 20,000 ops: x%.2f (n^1.5: x2.83; the scan's n^2: x4)\n", ratio);
  CHECK(c, ratio < 3.2, "the packing's work grew x%.2f for twice the items", ratio);
  CHECK(c, work[0] < scan_work[0] / 20, "work %" PRId64 " is not far below the scan's %" PRId64, work[0], scan_work[0]);

  srand(49);
  int32_t sets = 0, differ = 0;
  for (int32_t set = 0; set < 200; set++) {
    const int32_t n = 1 + rand() % 600, steps = set % 2 ? 2 + rand() % 6 : 1 + rand() % (n / 4 + 1);
    arena_item *items = malloc(sizeof(arena_item) * (size_t)n);
    for (int32_t i = 0; items && i < n; i++) {
      int32_t first = rand() % steps, length = rand() % 3 == 0 ? steps - first + rand() % 3 : rand() % 8;
      int64_t size = rand() % 7 == 0 ? 0 : 64 * (1 + rand() % 6) * (rand() % 3 == 0 ? 3 : 1);
      items[i] = (arena_item){size, first, first + length, i, 0};
    }
    int64_t w, sw = 0, arena;
    differ += items && compare_packings(items, n, &w, &sw, &arena) != 0;
    sets += items != NULL;
    free(items);
  }
  printf("random item sets: %" PRId32 " of %" PRId32 " packed differently from the scan\n", differ, sets);
  CHECK(c, differ == 0 && sets == 200, "%" PRId32 " of %" PRId32 " sets differ", differ, sets);
}

typedef struct chain_plan {
  int32_t steps;
  int64_t arena;
} chain_plan;

static chain_plan compile_chain(tf_test_counts *c, bool add, int32_t length, bool training) {
  chain_plan result = {-1, -1};
  tf_graph *g = build_chain(add, length);
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.training = training;
  tf_plan *plan = NULL;
  CHECK(c, g != NULL, "cannot build the chain");
  if (g)
    CHECK_OK(c, tf_compile(g, &options, &plan));
  if (plan)
    result = (chain_plan){plan->n_steps, plan->region_bytes[TF_REGION_ARENA]};
  printf("%s chain of %" PRId32 " ops, %s: %" PRId32 " steps, arena %" PRId64 " bytes\n", add ? "add" : "relu", length,
         training ? "training" : "inference", result.steps, result.arena);
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
  return result;
}

static void check_chains(tf_test_counts *c) {
  for (int32_t training = 0; training < 2; training++) {
    for (int32_t add = 0; add < 2; add++) {
      chain_plan small = compile_chain(c, add, 10000, training), large = compile_chain(c, add, 20000, training);
      const int32_t steps_per_op = training ? 2 : 1; /* forward, and its gradient */
      CHECK(c, large.steps - small.steps == 10000 * steps_per_op, "%" PRId32 " more steps; wanted %" PRId32,
            large.steps - small.steps, 10000 * steps_per_op);
      /* relu's gradient reads its output: training keeps 10,000 more [4, 8] f32 activations */
      const int64_t more_arena = training && !add ? 10000 * 128 : 0;
      CHECK(c, large.arena - small.arena == more_arena, "arena %" PRId64 " vs %" PRId64 "; wanted %" PRId64 " more",
            large.arena, small.arena, more_arena);
    }
  }
}

int main(void) {
  tf_test_counts counts = {0, 0};
  check_packing(&counts);
  check_chains(&counts);
  return tf_test_finish("test_scale", &counts);
}
