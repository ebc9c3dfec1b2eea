/* The allocation probe's interface: what a test driver finds, through dlsym(RTLD_DEFAULT,
 * TF_PROBE_MARK_SYMBOL), in a process that runs with the probe library (alloc_probe.c) preloaded.
 *
 * The probe counts heap allocations from outside tightfit: it interposes malloc and its relatives
 * (or, in a sanitizer build, installs the sanitizer's allocation hooks), so it sees every heap
 * allocation of the process, whoever makes it: tightfit, libgomp, OpenBLAS, stdio, the Vulkan
 * driver. Time is cut into phases that the driver names; the probe counts per phase, and splits
 * the counts by who called the allocator: a GPU driver stack (see `driver` below) or the program.
 *
 * Environment, read when the probe loads:
 *   TF_PROBE_LOG=1            one line on stderr per ended phase ("alloc_probe: phase ...")
 *   TF_PROBE_BACKTRACE=1      a backtrace on stderr of each allocation made in a phase whose name
 *                             begins with "step"; any other value is the phase-name prefix to trace
 *   TF_PROBE_BACKTRACE_MAX=N  at most N backtraces (default 100)
 *   TF_PROBE_BACKTRACE_MIN=N  only of allocations of N bytes or more */
#ifndef TIGHTFIT_TESTS_ALLOC_PROBE_H
#define TIGHTFIT_TESTS_ALLOC_PROBE_H

#include <stdint.h>

#define TF_PROBE_MARK_SYMBOL "tf_probe_mark"

/* A phase whose name begins with this character is not split by stack walks: an allocation is the
 * driver's only when a driver library called the allocator directly, so only the two sides' sum
 * means anything. A walk per allocation costs microseconds, and a session create on a cold shader
 * cache makes millions of allocations inside LLVM (through libstdc++, which needs the walk):
 * minutes instead of seconds. */
#define TF_PROBE_UNSPLIT '~'

/* How many of a phase's largest requests a tally keeps (tf_probe_tally.top). */
#define TF_PROBE_TOP 64

/* How the probe sees allocations (tf_probe_mark's result). */
enum {
  TF_PROBE_OFF = 0,        /* loaded, but it counts nothing (a sanitizer build without hooks) */
  TF_PROBE_INTERPOSED = 1, /* it replaced malloc, calloc, realloc, free and the aligned allocators */
  TF_PROBE_HOOKED = 2,     /* sanitizer build: __sanitizer_install_malloc_and_free_hooks; all counts
                            * are the program's (no driver split) */
};

/* The heap activity of one phase, for one side. An allocation is any call that returned new heap
 * memory: malloc, calloc, realloc (to a non-zero size), aligned_alloc, posix_memalign, memalign,
 * valloc, pvalloc. A release is free() of a non-NULL block, or the old block of such a realloc. */
typedef struct tf_probe_tally {
  int64_t allocations;
  int64_t bytes;   /* the sizes those calls asked for */
  int64_t largest; /* the largest single request */
  int64_t frees;   /* releases */
  int64_t held;    /* bytes allocated minus bytes released in the phase (the allocator's
                    * usable sizes): what the phase left on the heap, negative when it
                    * released more than it took */
  /* The TF_PROBE_TOP largest requests of the phase, largest first (0 past the last): enough to see
   * each region of a plan allocated at its size among a session create's other allocations. */
  int64_t top[TF_PROBE_TOP];
} tf_probe_tally;

typedef struct tf_probe_counts {
  /* Called from a GPU driver stack: Mesa (lavapipe), LLVM, the Vulkan loader and layers, the CUDA
   * driver and libraries, or code in no loaded module at all (shaders JIT-compiled by the driver). */
  tf_probe_tally driver;
  /* Everything else: tightfit, the test, libc, libgomp, OpenBLAS. */
  tf_probe_tally program;
} tf_probe_counts;

/* Ends the current phase, copying its counts into *ended (when not NULL), and begins the phase
 * `name`, which must outlive it (a string literal). Returns a TF_PROBE_* mode. Counts from several
 * threads are exact; an allocation racing with the mark may land on either side of it. */
typedef int (*tf_probe_mark_fn)(const char *name, tf_probe_counts *ended);

#endif
