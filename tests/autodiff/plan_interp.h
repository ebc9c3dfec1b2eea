/* A float64 interpreter of compiled plans, for tests: every buffer gets its own allocation (offsets
 * are ignored) and every step runs the f64 reference kernel. It checks what the compiler derived
 * (autodiff, optimizer, schedule) independently of memory assignment. */
#ifndef TIGHTFIT_TESTS_PLAN_INTERP_H
#define TIGHTFIT_TESTS_PLAN_INTERP_H

#include "kernels/cpu/kernels.h"
#include "tightfit/plan.h"

typedef struct tf_interp {
  const tf_plan *plan;
  void **data; /* per buffer: double for floating dtypes, else the dtype's own type */
  tf_cpu_context context;
} tf_interp;

/* Allocates every buffer (zeroed) and fills constants (fill, ones, zeros, arange). */
bool tf_interp_init(tf_interp *interp, const tf_plan *plan);
void tf_interp_free(tf_interp *interp);
/* The buffer named `name` (or -1). */
int32_t tf_interp_find(const tf_interp *interp, const char *name);
/* Runs steps [begin, end). False when a step has no kernel. */
bool tf_interp_run(tf_interp *interp, int32_t begin, int32_t end);
/* Element count of buffer `id`. */
int64_t tf_interp_count(const tf_interp *interp, int32_t id);

#endif
