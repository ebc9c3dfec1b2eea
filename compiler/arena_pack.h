/* The arena packing of pass 10 (compiler/assign.c): items with a size and a live interval of
 * steps, each placed at the offset of the best-fitting gap among the items already placed that
 * are live at the same time (compiler/arena_pack.c). */
#ifndef TIGHTFIT_COMPILER_ARENA_PACK_H
#define TIGHTFIT_COMPILER_ARENA_PACK_H

#include <stdint.h>

#include "tightfit/status.h"

typedef struct arena_item {
  int64_t size; /* aligned */
  int32_t first, last;
  int32_t id; /* tensor id, or -(step + 1) for a step's workspace */
  int64_t offset;
} arena_item;

/* Packs items[0..n) largest first; when that arena is above `lower_bound` (no packing is
 * smaller), also longest-lived first and largest area first, and keeps the smallest arena, the
 * earlier order on a tie. Leaves the items placed that way (items reordered) and sets *arena to
 * its size; *examined (unless NULL) counts the placed items and blocks the scans looked at, the
 * packing's work (tests/scale checks it grows about as n^1.5, not n^2). Fails only when memory runs out. */
tf_status tf_arena_pack(arena_item *items, int32_t n, int64_t lower_bound, int64_t *arena,
                        int64_t *examined) TF_MUST_USE;

#endif
