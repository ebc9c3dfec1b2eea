/* The test of the test: linked into alloc_probe_broken_N with -Wl,--wrap=tf_session_micro_step, so
 * that every micro-step the test runs first does what a runtime must never do, then the real step;
 * test_alloc_probe must then fail with the message of the check it breaks. The library itself is
 * untouched. TF_TEST_BREAK_STEP_ALLOC 1: a block the size of the plan's largest region, allocated
 * and freed (a device allocation on a host-memory device); 2: a small block leaked. */
#include <stdlib.h>

#include "tightfit/plan.h"
#include "tightfit/runtime.h"

tf_status __real_tf_session_micro_step(tf_session *session, double *loss);
tf_status __wrap_tf_session_micro_step(tf_session *session, double *loss);

static void break_step_alloc(const tf_session *session) {
  if (TF_TEST_BREAK_STEP_ALLOC == 1) {
    const tf_plan *plan = tf_session_plan(session);
    int64_t largest = 0;
    for (int r = 0; r < TF_REGION_COUNT; r++)
      largest = plan->region_bytes[r] > largest ? plan->region_bytes[r] : largest;
    char *volatile block = malloc((size_t)largest); /* volatile: the compiler may not drop the pair */
    if (block)
      block[0] = 1;
    free(block);
  } else {
    char *volatile leaked = malloc(24);
    if (leaked)
      leaked[0] = 1;
  }
}

tf_status __wrap_tf_session_micro_step(tf_session *session, double *loss) {
  break_step_alloc(session);
  return __real_tf_session_micro_step(session, loss);
}
