/* The arena packing (pass 10's greedy best fit, as TFLite's and XLA's planners do): each item, in
 * the order tried, goes into the smallest gap that fits among the placed items live at the same
 * time as it, else above them all. The placed items are kept in offset order in blocks of about
 * sqrt(n), each with a summary (the range of its items' first and last steps, its highest end,
 * its widest inner gap), so that a block whose items are all live beside the new one, and leave no
 * gap it fits, is passed in one step, and a block of which none is live beside it is skipped: the
 * placement is the item-by-item scan's, without its n^2 work on long graphs (a 100,000-op chain
 * keeps 100,000 activations for its backward pass, all live at once). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/arena_pack.h"

typedef struct block {
  arena_item **items; /* in offset order; `capacity` entries */
  int32_t count;
  int32_t min_first, max_first, min_last, max_last;
  int64_t max_end;   /* the highest offset + size */
  int64_t inner_gap; /* the widest gap before an item but the first (INT64_MIN for one item) */
} block;

typedef struct placed_list {
  block *blocks;
  int32_t n_blocks, cap_blocks;
  int32_t capacity; /* items per block; a full block splits in two */
} placed_list;

static void summarise(block *b) {
  b->min_first = b->min_last = INT32_MAX;
  b->max_first = b->max_last = INT32_MIN;
  b->max_end = INT64_MIN;
  b->inner_gap = INT64_MIN;
  for (int32_t k = 0; k < b->count; k++) {
    const arena_item *item = b->items[k];
    if (k > 0 && item->offset - b->max_end > b->inner_gap)
      b->inner_gap = item->offset - b->max_end;
    b->min_first = item->first < b->min_first ? item->first : b->min_first;
    b->max_first = item->first > b->max_first ? item->first : b->max_first;
    b->min_last = item->last < b->min_last ? item->last : b->min_last;
    b->max_last = item->last > b->max_last ? item->last : b->max_last;
    b->max_end = item->offset + item->size > b->max_end ? item->offset + item->size : b->max_end;
  }
}

static void clear(placed_list *list) {
  for (int32_t b = 0; b < list->n_blocks; b++)
    free(list->blocks[b].items);
  list->n_blocks = 0;
}

/* A new empty block at index `at`; false when memory runs out. */
static bool open_block(placed_list *list, int32_t at) {
  if (list->n_blocks == list->cap_blocks) {
    int32_t cap = list->cap_blocks ? 2 * list->cap_blocks : 16;
    block *grown = realloc(list->blocks, sizeof(block) * (size_t)cap);
    if (!grown)
      return false;
    list->blocks = grown;
    list->cap_blocks = cap;
  }
  arena_item **items = malloc(sizeof(arena_item *) * (size_t)list->capacity);
  if (!items)
    return false;
  memmove(&list->blocks[at + 1], &list->blocks[at], sizeof(block) * (size_t)(list->n_blocks - at));
  list->blocks[at] = (block){.items = items};
  list->n_blocks++;
  return true;
}

/* Inserts `item` after the last placed item whose offset is not above its own (the order the
 * scan reads them in: items of equal offset in any order, since the gap found does not depend on
 * theirs). */
static bool insert(placed_list *list, arena_item *item) {
  if (list->n_blocks == 0 && !open_block(list, 0))
    return false;
  int32_t lo = 0, hi = list->n_blocks - 1; /* the last block whose first item is not above `item` */
  while (lo < hi) {
    int32_t mid = lo + (hi - lo + 1) / 2;
    if (list->blocks[mid].items[0]->offset <= item->offset)
      lo = mid;
    else
      hi = mid - 1;
  }
  block *b = &list->blocks[lo];
  int32_t at = b->count;
  while (at > 0 && b->items[at - 1]->offset > item->offset)
    at--;
  memmove(&b->items[at + 1], &b->items[at], sizeof(arena_item *) * (size_t)(b->count - at));
  b->items[at] = item;
  b->count++;
  if (b->count < list->capacity) {
    summarise(b);
    return true;
  }
  if (!open_block(list, lo + 1))
    return false;
  block *full = &list->blocks[lo], *next = &list->blocks[lo + 1];
  next->count = full->count / 2;
  full->count -= next->count;
  memcpy(next->items, &full->items[full->count], sizeof(arena_item *) * (size_t)next->count);
  summarise(full);
  summarise(next);
  return true;
}

/* The offset of the best-fitting gap for `item` between the placed items live at the same time as
 * it (the smallest that fits, the lowest of equal ones), else the highest end among them (0 for
 * none). */
static int64_t best_fit(const placed_list *list, const arena_item *item, int64_t *examined) {
  int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
  for (int32_t b = 0; b < list->n_blocks && best_gap != item->size; b++) {
    const block *bl = &list->blocks[b];
    (*examined)++;
    if (bl->max_last < item->first || bl->min_first > item->last)
      continue; /* none live beside it */
    if (bl->max_first <= item->last && bl->min_last >= item->first && bl->inner_gap < item->size) {
      /* all live beside it: only the gap below the block's first item may fit (a gap after it is
       * at most the block's own inner gap) */
      int64_t gap = bl->items[0]->offset - cursor;
      if (gap >= item->size && gap < best_gap) {
        best = cursor;
        best_gap = gap;
      }
      cursor = bl->max_end > cursor ? bl->max_end : cursor;
      continue;
    }
    *examined += bl->count;
    for (int32_t k = 0; k < bl->count; k++) {
      const arena_item *other = bl->items[k];
      if (other->first > item->last || item->first > other->last)
        continue;
      int64_t gap = other->offset - cursor;
      if (gap >= item->size && gap < best_gap) {
        best = cursor;
        best_gap = gap;
      }
      int64_t end = other->offset + other->size;
      if (end > cursor)
        cursor = end;
    }
  }
  return best >= 0 ? best : cursor;
}

/* Packs items[0..n) in the order `compare` gives, best fit each; sets *arena to the arena's size. */
static bool pack(arena_item *items, int32_t n, int (*compare)(const void *, const void *), placed_list *list,
                 int64_t *arena, int64_t *examined) {
  qsort(items, (size_t)n, sizeof(arena_item), compare);
  clear(list);
  *arena = 0;
  for (int32_t i = 0; i < n; i++) {
    items[i].offset = best_fit(list, &items[i], examined);
    if (!insert(list, &items[i]))
      return false;
    if (items[i].offset + items[i].size > *arena)
      *arena = items[i].offset + items[i].size;
  }
  return true;
}

static int by_size_desc(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? 1 : -1;
  if (x->first != y->first)
    return x->first - y->first;
  return x->id - y->id;
}

/* Longest-lived first, then by size: long-lived buffers (a chain of reshapes viewing one tensor, a
 * stored activation) laid down first leave the short ones to fill the gaps around them. */
static int by_lifetime_desc(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  int32_t lx = x->last - x->first, ly = y->last - y->first;
  if (lx != ly)
    return lx < ly ? 1 : -1;
  return by_size_desc(a, b);
}

/* Largest area (bytes times steps) first. */
static int by_area_desc(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  double ax = (double)x->size * (x->last - x->first + 1), ay = (double)y->size * (y->last - y->first + 1);
  if (ax != ay)
    return ax < ay ? 1 : -1;
  return by_size_desc(a, b);
}

/* About sqrt(n) items per block (at least 32): a scan passes n / capacity blocks and looks into a
 * few of them item by item. */
static int32_t block_capacity(int32_t n) {
  int32_t root = 1;
  while ((int64_t)root * root < n)
    root++;
  return 2 * (root > 32 ? root : 32);
}

tf_status tf_arena_pack(arena_item *items, int32_t n, int64_t lower_bound, int64_t *arena, int64_t *examined) {
  int (*const orders[])(const void *, const void *) = {by_size_desc, by_lifetime_desc, by_area_desc};
  placed_list list = {.capacity = block_capacity(n)};
  int32_t best = 0, tried = 0;
  int64_t best_arena = INT64_MAX, size = 0, looked = 0;
  bool ok = true;
  for (int32_t k = 0; k < 3 && best_arena > lower_bound && ok; k++) {
    ok = pack(items, n, orders[k], &list, &size, &looked);
    tried = k;
    if (size < best_arena) {
      best_arena = size;
      best = k;
    }
  }
  if (ok && best != tried)
    ok = pack(items, n, orders[best], &list, &best_arena, &looked);
  clear(&list);
  free(list.blocks);
  *arena = best_arena;
  if (examined)
    *examined = looked;
  return ok ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "assign: no memory to pack %d arena buffers", n);
}
