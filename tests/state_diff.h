/* Comparing two training sessions' weights byte for byte (tests that check two plans train to the
 * same bits: updates in the backward pass, the fused head's single pass). */
#ifndef TIGHTFIT_TESTS_STATE_DIFF_H
#define TIGHTFIT_TESTS_STATE_DIFF_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tightfit/runtime.h"

/* Bytes of parameters and optimizer state that differ between session a (plan pa) and session b
 * (plan pb), buffers matched by name; -1 when a buffer of a is missing from b or of another size. */
static inline int64_t tf_test_state_difference(tf_test_counts *counts, tf_session *a, const tf_plan *pa, tf_session *b,
                                               const tf_plan *pb) {
  int64_t differ = 0;
  for (int32_t i = 0; i < pa->n_buffers; i++) {
    const tf_plan_buffer *x = &pa->buffers[i];
    if (x->role != TF_ROLE_PARAMETER && x->role != TF_ROLE_OPTIMIZER_STATE)
      continue;
    int32_t j = 0;
    while (j < pb->n_buffers && strcmp(pb->buffers[j].name, x->name) != 0)
      j++;
    if (j == pb->n_buffers || pb->buffers[j].bytes != x->bytes)
      return -1;
    unsigned char *u = malloc((size_t)x->bytes), *v = malloc((size_t)x->bytes);
    CHECK(counts, u && v, "out of memory comparing '%s'", x->name);
    if (u && v) {
      CHECK_OK(counts, tf_session_read_range(a, i, 0, u, x->bytes));
      CHECK_OK(counts, tf_session_read_range(b, j, 0, v, x->bytes));
      for (int64_t e = 0; e < x->bytes; e++)
        differ += u[e] != v[e];
    }
    free(u);
    free(v);
  }
  return differ;
}

#endif
