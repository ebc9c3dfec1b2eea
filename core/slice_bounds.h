/* A slice's bounds, one definition for the shape rule, the compiler and every backend's lowering:
 * Python's rule, a negative bound counts from the end, then clamps to [0, dim]. */
#ifndef TIGHTFIT_CORE_SLICE_BOUNDS_H
#define TIGHTFIT_CORE_SLICE_BOUNDS_H

#include <stdint.h>

/* `bound` (a slice's start or end) on an axis of `dim` elements, as an index in [0, dim]. */
static inline int64_t tf_slice_bound(int64_t bound, int64_t dim) {
  if (bound < 0)
    bound += dim; /* dim >= 0, so this cannot overflow */
  if (bound < 0)
    return 0;
  return bound > dim ? dim : bound;
}

#endif
