/* Times tightfit training steps one by one, for bench/run-vs-pytorch:
 *   tf_step_timer P.tfplan DATA_DIR STEPS THREADS
 * One JSON line per optimizer step, {"step": i, "seconds": s, "cpu_seconds": c, "loss": l}, where
 * `seconds` is the monotonic wall time of the whole step and `cpu_seconds` the process's CPU time
 * (every thread's) over it: feeding every micro-batch (tf_feed_next, a copy from the
 * memory-mapped .npy files), forward + backward (tf_session_micro_step) and the optimizer update
 * (tf_session_optimizer_step). No gradient NaN scan (unlike `tightfit train`, which scans the
 * first 10 steps by default). Then one summary line with the plan's exact total bytes and this
 * process's resident memory: rss_before_kib (after loading the plan, before the session exists),
 * hwm_kib (the peak resident set from then to the end; VmHWM is reset through /proc/self/clear_refs
 * before the session is created). `tightfit train` has no per-step timing, hence this driver. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/feed.h"
#include "tightfit/plan.h"
#include "tightfit/runtime.h"

static double seconds_of(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now(void) { return seconds_of(CLOCK_MONOTONIC); }

/* The CPU time of every thread of this process: on a machine others are using, a step's own work
 * without the time it waited for a core (with T > 1 threads, up to T times the wall time). */
static double cpu_now(void) { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 when unreadable. */
static long status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  long value = -1;
  size_t length = strlen(field);
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, field, length) == 0 && line[length] == ':') {
      value = atol(line + length + 1);
      break;
    }
  fclose(f);
  return value;
}

/* Resets VmHWM to the current resident set (Linux >= 4.0); false when not allowed. */
static int reset_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f)
    return 0;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

static int fail(tf_status status) {
  fprintf(stderr, "tf_step_timer: %s\n", tf_status_message(status));
  tf_status_free(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: tf_step_timer P.tfplan DATA_DIR STEPS THREADS\n");
    return 2;
  }
  int64_t steps = atoll(argv[3]);
  tf_plan *plan;
  tf_status status = tf_plan_load(argv[1], &plan);
  if (status)
    return fail(status);
  int peak_reset = reset_peak();
  long rss_before = status_kib("VmRSS");
  tf_session_options options = tf_session_options_default();
  options.threads = atoi(argv[4]);
  tf_session *session = NULL;
  tf_feed *feed = NULL;
  status = tf_session_create(plan, &options, &session);
  if (!status)
    status = tf_feed_open(plan, argv[2], 0, &feed);
  for (int64_t s = 0; s < steps && !status; s++) {
    double start = now(), cpu_start = cpu_now(), sum = 0;
    for (int32_t m = 0; m < plan->accumulate && !status; m++) {
      double loss = 0;
      status = tf_feed_next(feed, session);
      if (!status)
        status = tf_session_micro_step(session, &loss);
      sum += loss;
    }
    if (!status)
      status = tf_session_optimizer_step(session);
    if (!status)
      printf("{\"step\": %" PRId64 ", \"seconds\": %.9f, \"cpu_seconds\": %.9f, \"loss\": %.6f}\n", s, now() - start,
             cpu_now() - cpu_start, sum / plan->accumulate);
    fflush(stdout);
  }
  if (!status) {
    tf_session_memory m = tf_session_memory_use(session);
    printf("{\"planned_bytes\": %" PRId64 ", \"allocated_bytes\": %" PRId64
           ", \"rss_before_kib\": %ld, \"hwm_kib\": %ld, \"peak_reset\": %s}\n",
           m.planned_bytes, m.allocated_bytes, rss_before, status_kib("VmHWM"), peak_reset ? "true" : "false");
  }
  tf_feed_close(feed);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status ? fail(status) : 0;
}
