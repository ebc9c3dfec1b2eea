/* The test side of the allocation probe (alloc_probe.h): find it, mark phases, judge them.
 * Header-only, so that any test can include it ("alloc_probe/probe_client.h") without a build
 * change.
 *
 * tf_probe_attach() finds tf_probe_mark with dlsym(RTLD_DEFAULT). When the process runs without the
 * probe but the library was built beside the test executable (build/tests/libtf_alloc_probe.so),
 * it executes the program again with the library in LD_PRELOAD, once; TF_PROBE_NO_REEXEC=1 turns
 * that off. A test without the probe must say so (SKIP), never pass the measured checks silently.
 *
 * The checks after tf_session_create(), on what the program allocates (alloc_probe.h splits it
 * from what a GPU driver allocates):
 *   - "region-sized": no single heap allocation as large as the plan's smallest non-empty region,
 *     clamped to [4 KiB, 64 KiB]. On the CPU backend device memory is host memory, so a device
 *     allocation of even the smallest region shows up as such a block. The 64 KiB cap keeps the
 *     check meaningful for large plans; the 4 KiB floor keeps it from mistaking library bookkeeping
 *     for a region when a region is tiny (a 512-byte io region): libgomp's team and thread records
 *     are 1.5 to 1.8 KiB. Smaller allocations are still caught by the next rule in the steps.
 *   - "flat": after a warm-up (first-touch work inside libraries: libgomp starting its threads),
 *     training steps make no heap allocation at all.
 * What a GPU driver allocates is judged separately (test_alloc_probe.c: lavapipe allocates on
 * every submission, for reasons inside Mesa). */
#ifndef TIGHTFIT_TESTS_ALLOC_PROBE_CLIENT_H
#define TIGHTFIT_TESTS_ALLOC_PROBE_CLIENT_H

#ifndef _GNU_SOURCE
#error "probe_client.h needs _GNU_SOURCE (dlsym(RTLD_DEFAULT)); define it before any include"
#endif

#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_probe/alloc_probe.h"
#include "tightfit/plan.h"

#define TF_PROBE_LIBRARY "libtf_alloc_probe.so"
#define TF_PROBE_CAP_BYTES ((int64_t)64 << 10)
#define TF_PROBE_FLOOR_BYTES ((int64_t)4 << 10)
/* The CPU backend's region alignment (backends/cpu/cpu_backend.c): what a region request is rounded to. */
#define TF_PROBE_CPU_REGION_ALIGN 64

typedef struct tf_probe {
  tf_probe_mark_fn mark; /* NULL: no probe in this process */
  int mode;              /* TF_PROBE_INTERPOSED or TF_PROBE_HOOKED when counting */
  char absent[1400];     /* why there is none, for the SKIP line */
} tf_probe;

static inline const char *tf_probe_mode_name(int mode) {
  return mode == TF_PROBE_INTERPOSED ? "interposed malloc"
         : mode == TF_PROBE_HOOKED   ? "sanitizer allocator hooks"
                                     : "not counting";
}

/* Executes this program again with the probe preloaded; returns only when that cannot be done. */
static inline void tf_probe_reexec(char **argv, const char *library, tf_probe *probe) {
  const char *preload = getenv("LD_PRELOAD");
  char value[4096];
  snprintf(value, sizeof(value), "%s%s%s", library, preload ? " " : "", preload ? preload : "");
  setenv("LD_PRELOAD", value, 1);
  setenv("TF_PROBE_REEXEC", "1", 1);
#if defined(__SANITIZE_ADDRESS__)
  /* The probe is not instrumented and comes before the sanitizer runtime in the preload order,
   * which AddressSanitizer refuses by default; the probe replaces no allocator function there. */
  const char *options = getenv("ASAN_OPTIONS");
  snprintf(value, sizeof(value), "%s%sverify_asan_link_order=0", options ? options : "", options ? ":" : "");
  setenv("ASAN_OPTIONS", value, 1);
#endif
  char *self_argv[] = {(char *)"/proc/self/exe", NULL};
  fflush(NULL);
  execv("/proc/self/exe", argv ? argv : self_argv);
  snprintf(probe->absent, sizeof(probe->absent), "cannot execute this program again under %s", library);
}

/* Finds the probe (see the top of this file); `argv` is main's, or NULL for a program that takes no
 * arguments. */
static inline tf_probe tf_probe_attach(char **argv) {
  tf_probe probe;
  memset(&probe, 0, sizeof(probe));
  void *symbol = dlsym(RTLD_DEFAULT, TF_PROBE_MARK_SYMBOL);
  if (symbol) {
    memcpy(&probe.mark, &symbol, sizeof(probe.mark)); /* ISO C has no object-to-function cast */
    probe.mode = probe.mark("~attached", NULL);
    if (probe.mode == TF_PROBE_OFF) {
      snprintf(probe.absent, sizeof(probe.absent),
               "the probe is loaded but counts nothing (a sanitizer build "
               "without __sanitizer_install_malloc_and_free_hooks?)");
      probe.mark = NULL;
    }
    return probe;
  }
  char exe[1024], library[1100];
  ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[length > 0 ? length : 0] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash)
    *slash = '\0';
  snprintf(library, sizeof(library), "%s/%s", exe, TF_PROBE_LIBRARY);
  const char *no_reexec = getenv("TF_PROBE_NO_REEXEC");
  if (no_reexec && strcmp(no_reexec, "0") != 0)
    snprintf(probe.absent, sizeof(probe.absent), "no probe preloaded (TF_PROBE_NO_REEXEC is set)");
  else if (getenv("TF_PROBE_REEXEC"))
    snprintf(probe.absent, sizeof(probe.absent), "%s was preloaded, but tf_probe_mark is not visible", library);
  else if (access(library, R_OK) != 0)
    snprintf(probe.absent, sizeof(probe.absent), "no probe preloaded and none built at %s", library);
  else
    tf_probe_reexec(argv, library, &probe);
  return probe;
}

/* Ends the current phase (its counts are returned) and begins `next` (a string literal). */
static inline tf_probe_counts tf_probe_phase(const tf_probe *probe, const char *next) {
  tf_probe_counts counts;
  memset(&counts, 0, sizeof(counts));
  if (probe->mark)
    probe->mark(next, &counts);
  return counts;
}

/* The probe's own check: a malloc it must see, of a size nothing else in the phase makes, charged
 * to the program and given back. Without it a probe that counted nothing would pass everything. */
static inline bool tf_probe_calibrate(const tf_probe *probe, char *why, size_t size) {
  const size_t bytes = 123457;
  bool ok = false;
  /* Up to three tries: something the process sets up lazily on first use can allocate (and keep) a
   * few bytes inside the first try (seen under the sanitizer hooks: 32 bytes held, once in a while);
   * it does not recur. A probe that does not count fails every try. */
  for (int attempt = 1; attempt <= 3 && !ok; attempt++) {
    tf_probe_phase(probe, "calibration");
    char *volatile block = malloc(bytes); /* volatile: the compiler may not remove the call */
    if (block)
      block[0] = 1;
    free(block);
    tf_probe_tally seen = tf_probe_phase(probe, "~after calibration").program;
    ok = seen.allocations >= 1 && seen.largest == (int64_t)bytes && seen.frees >= 1 && seen.held == 0;
    snprintf(why, size,
             "calibration (try %d): malloc(%zu) + free seen as %" PRId64 " allocations, largest %" PRId64 ", %" PRId64
             " frees, %" PRId64 " bytes held",
             attempt, bytes, seen.allocations, seen.largest, seen.frees, seen.held);
  }
  return ok;
}

/* The smallest non-empty region of the plan. */
static inline int64_t tf_probe_smallest_region(const tf_plan *plan) {
  int64_t smallest = 0;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (plan->region_bytes[r] > 0 && (smallest == 0 || plan->region_bytes[r] < smallest))
      smallest = plan->region_bytes[r];
  return smallest;
}

static inline int64_t tf_probe_largest_region(const tf_plan *plan) {
  int64_t largest = 0;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    largest = plan->region_bytes[r] > largest ? plan->region_bytes[r] : largest;
  return largest;
}

/* The region-sized limit: the smallest region clamped to [4 KiB, 64 KiB] (see the top). */
static inline int64_t tf_probe_region_limit(const tf_plan *plan) {
  int64_t smallest = tf_probe_smallest_region(plan);
  return smallest < TF_PROBE_FLOOR_BYTES ? TF_PROBE_FLOOR_BYTES
         : smallest > TF_PROBE_CAP_BYTES ? TF_PROBE_CAP_BYTES
                                         : smallest;
}

/* The regions of `plan` as the process allocated them, seen from outside: each region of at least
 * TF_PROBE_FLOOR_BYTES must appear among the largest requests of `seen` (the phase around tf_session_create) at its
 * bytes rounded up to `align` (the backend's allocation granularity), once per region. False, with
 * the first region missing in `why`, otherwise. */
/* The largest request during create that is not a region: init staging is 1 MiB. */
#define TF_PROBE_STAGING_LIMIT ((int64_t)2 << 20)

static inline bool tf_probe_regions_allocated(const tf_plan *plan, const tf_probe_tally *seen, int64_t align, char *why,
                                              size_t size) {
  bool used[TF_PROBE_TOP] = {false};
  for (int r = 0; r < TF_REGION_COUNT; r++) {
    int64_t bytes = plan->region_bytes[r];
    if (bytes < TF_PROBE_FLOOR_BYTES)
      continue; /* tiny regions (an io region of a few samples) drown among create's bookkeeping */
    int64_t rounded = (bytes + align - 1) / align * align;
    bool found = false;
    for (int i = 0; i < TF_PROBE_TOP && !found; i++)
      if (!used[i] && seen->top[i] == rounded)
        used[i] = found = true;
    if (!found) {
      snprintf(why, size,
               "region %d (%" PRId64 " bytes, %" PRId64 " rounded to %" PRId64 ") was not allocated at that size: "
               "the largest requests were %" PRId64 ", %" PRId64 ", %" PRId64 ", ...",
               r, bytes, rounded, align, seen->top[0], seen->top[1], seen->top[2]);
      return false;
    }
  }
  /* Nothing else that large: staging a tensor's initial value whole would hold a second copy of it
   * (session.c stages at most 1 MiB at a time). */
  for (int i = 0; i < TF_PROBE_TOP; i++)
    if (!used[i] && seen->top[i] > TF_PROBE_STAGING_LIMIT) {
      snprintf(why, size,
               "a request of %" PRId64 " bytes that is no region came during create (above %" PRId64
               " bytes: a second copy of a tensor?)",
               seen->top[i], (int64_t)TF_PROBE_STAGING_LIMIT);
      return false;
    }
  snprintf(why, size,
           "every region allocated at its planned size (rounded to %" PRId64 "), nothing else above %" PRId64 " bytes",
           align, (int64_t)TF_PROBE_STAGING_LIMIT);
  return true;
}

/* Adds `more` to `total`: phases, or the two sides, measured as one. */
static inline void tf_probe_tally_add(tf_probe_tally *total, const tf_probe_tally *more) {
  total->allocations += more->allocations;
  total->bytes += more->bytes;
  total->frees += more->frees;
  total->held += more->held;
  total->largest = more->largest > total->largest ? more->largest : total->largest;
  int64_t merged[TF_PROBE_TOP];
  for (int i = 0, a = 0, b = 0; i < TF_PROBE_TOP; i++)
    merged[i] = total->top[a] >= more->top[b] ? total->top[a++] : more->top[b++];
  memcpy(total->top, merged, sizeof(merged));
}

/* Both sides of a phase as one tally. */
static inline tf_probe_tally tf_probe_total(const tf_probe_counts *c) {
  tf_probe_tally total = c->program;
  tf_probe_tally_add(&total, &c->driver);
  return total;
}

#endif
