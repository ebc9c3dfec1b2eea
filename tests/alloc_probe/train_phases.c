/* The phases of `tightfit train` for the allocation probe, marked from outside the library: linked
 * into tightfit_probed (the CLI's own objects, tools/main.c over tightfit_tools) with the linker's
 * --wrap around the calls that begin each phase, so that neither the library nor the command knows
 * the probe exists. The phases, in order:
 *   train: create   from tf_session_create
 *   train: feed     from tf_feed_open (the data feed's buffers)
 *   train: warm-up  from the first tf_feed_next (two steps: first-touch work inside libraries)
 *   train: steps    from the feed of the third optimizer step; no heap allocation allowed
 *   train: finish   from tf_tool_train_check_final_weights (the final scan, saves, evaluation)
 * Without the probe preloaded (dlsym finds no tf_probe_mark) the wrappers only call through. */
#define _GNU_SOURCE /* dlsym(RTLD_DEFAULT) */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "alloc_probe/alloc_probe.h"
#include "tightfit/feed.h"
#include "tightfit/runtime.h"
#include "tools/train_checks.h"

tf_status __real_tf_session_create(const tf_plan *plan, const tf_session_options *options, tf_session **out);
tf_status __wrap_tf_session_create(const tf_plan *plan, const tf_session_options *options, tf_session **out);
tf_status __real_tf_feed_open(const tf_plan *plan, const char *folder, uint64_t seed, tf_feed **out);
tf_status __wrap_tf_feed_open(const tf_plan *plan, const char *folder, uint64_t seed, tf_feed **out);
tf_status __real_tf_feed_next(tf_feed *feed, tf_session *session);
tf_status __wrap_tf_feed_next(tf_feed *feed, tf_session *session);
tf_status __real_tf_tool_train_check_final_weights(tf_session *session, bool checkpoint);
tf_status __wrap_tf_tool_train_check_final_weights(tf_session *session, bool checkpoint);

/* Where the run is; one `tightfit train` per process, so file scope is its whole life. */
static struct {
  bool looked_up;
  tf_probe_mark_fn mark;
  bool warm_up_marked, steps_marked;
  int64_t first_step; /* the optimizer step the run starts from (a resumed run: the checkpoint's) */
} phases;

/* Looked up once, at the first wrapped call (setup): a failed dlsym allocates its error message. */
static void mark(const char *phase) {
  if (!phases.looked_up) {
    void *symbol = dlsym(RTLD_DEFAULT, TF_PROBE_MARK_SYMBOL);
    memcpy(&phases.mark, &symbol, sizeof(phases.mark)); /* ISO C has no object-to-function cast */
    phases.looked_up = true;
  }
  if (phases.mark)
    phases.mark(phase, NULL);
}

tf_status __wrap_tf_session_create(const tf_plan *plan, const tf_session_options *options, tf_session **out) {
  mark("train: create");
  return __real_tf_session_create(plan, options, out);
}

tf_status __wrap_tf_feed_open(const tf_plan *plan, const char *folder, uint64_t seed, tf_feed **out) {
  if (!phases.warm_up_marked) /* not the held-out evaluation's feed, after the steps */
    mark("train: feed");
  return __real_tf_feed_open(plan, folder, seed, out);
}

tf_status __wrap_tf_feed_next(tf_feed *feed, tf_session *session) {
  const int64_t step = tf_session_optimizer_steps(session);
  if (!phases.warm_up_marked) {
    phases.warm_up_marked = true;
    phases.first_step = step;
    mark("train: warm-up");
  } else if (!phases.steps_marked && step == phases.first_step + 2) {
    phases.steps_marked = true;
    mark("train: steps");
  }
  return __real_tf_feed_next(feed, session);
}

tf_status __wrap_tf_tool_train_check_final_weights(tf_session *session, bool checkpoint) {
  mark("train: finish");
  return __real_tf_tool_train_check_final_weights(session, checkpoint);
}
