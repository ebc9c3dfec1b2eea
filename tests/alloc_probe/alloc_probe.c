/* The allocation probe (alloc_probe.h): a shared library that a test preloads (LD_PRELOAD) to count
 * every heap allocation of the process from outside tightfit, per phase the test names.
 *
 * Two ways in, chosen when it is built:
 *   - plain builds interpose malloc, calloc, realloc, free, aligned_alloc, posix_memalign, memalign,
 *     valloc, pvalloc and malloc_usable_size, forwarding to the next definition (glibc's) found with
 *     dlsym(RTLD_NEXT). glibc calls its own malloc through the interposable symbol, so stdio,
 *     libgomp, OpenBLAS and the Vulkan driver are all seen;
 *   - sanitizer builds (TF_PROBE_SANITIZER_HOOKS) cannot replace malloc (AddressSanitizer owns it);
 *     there the probe installs __sanitizer_install_malloc_and_free_hooks, which the sanitizer's
 *     allocator calls for every allocation of the process, from any library.
 *
 * In plain builds an allocation is the driver's when a GPU driver's code is anywhere on the stack
 * that asked for it (a driver library, or code in no module at all: shaders the driver compiled),
 * the program's otherwise. Sanitizer builds charge everything to the program (caller_of() says
 * why).
 *
 * The hooks run inside malloc, so they must never allocate: counters are lock-free atomics, output
 * goes through write(2) with numbers formatted by hand, callers are found with dladdr() and
 * backtrace() (warmed up when the probe loads, since its first call loads libgcc_s), and
 * backtrace_symbols_fd() prints. This is test code: its counters are process-wide on purpose. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_probe.h"

#define TF_PROBE_EXPORT __attribute__((visibility("default")))

/* ---- output without malloc ---- */

static void write_text(const char *text) {
  size_t length = strlen(text);
  while (length > 0) {
    ssize_t written = write(STDERR_FILENO, text, length);
    if (written <= 0)
      return;
    text += written;
    length -= (size_t)written;
  }
}

static void write_number(int64_t value) {
  char digits[24];
  int n = sizeof(digits) - 1;
  digits[n] = '\0';
  uint64_t magnitude = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
  do {
    digits[--n] = (char)('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0);
  if (value < 0)
    digits[--n] = '-';
  write_text(digits + n);
}

/* ---- who asked ---- */

static bool name_begins(const char *path, const char *const *prefixes) {
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  for (size_t i = 0; prefixes[i]; i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

/* The unwinder allocates while it holds its own lock (registering the frames of JIT-compiled code),
 * and backtrace() takes that lock: walking the stack from there would deadlock. Its allocations are
 * charged to the driver without a walk: the only code that registers frames at run time is a
 * driver's JIT compiler. */
static const char *const unwinder_libraries[] = {"libgcc_s", NULL};
static const char *const driver_libraries[] = {"libvulkan", "libLLVM",   "libVkLayer", "libgallium",
                                               "libdrm",    "libcuda",   "libcublas",  "libnvidia",
                                               "libnvrtc",  "libcudart", NULL};

typedef enum caller_kind { CALLER_UNWINDER, CALLER_DRIVER, CALLER_PROGRAM } caller_kind;

static caller_kind kind_of_module(const void *address) {
  Dl_info info;
  if (!dladdr(address, &info) || !info.dli_fname)
    return CALLER_DRIVER; /* in no module: code a driver compiled at run time */
  if (name_begins(info.dli_fname, unwinder_libraries))
    return CALLER_UNWINDER;
  return name_begins(info.dli_fname, driver_libraries) ? CALLER_DRIVER : CALLER_PROGRAM;
}

/* kind_of_module() costs a dladdr(), a search of the module's symbols, and every allocation and
 * release asks it: a compile under the probe ran 4x slower. Call sites are few, so their kinds are
 * kept here, lock-free (a slot holds address << 2 | kind + 1; 0 is empty), and dropped whenever a
 * module is closed (dlclose() below), since another module may later load at the same address. */
#define CALLER_CACHE_SLOTS 8192
#define CALLER_CACHE_PROBES 16
static _Atomic uint64_t caller_cache[CALLER_CACHE_SLOTS];

static caller_kind kind_of(const void *address) {
  const uint64_t key = (uint64_t)(uintptr_t)address;
  size_t slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 51) % CALLER_CACHE_SLOTS;
  for (int probe = 0; probe < CALLER_CACHE_PROBES; probe++, slot = (slot + 1) % CALLER_CACHE_SLOTS) {
    uint64_t entry = atomic_load_explicit(&caller_cache[slot], memory_order_relaxed);
    if (entry == 0) {
      caller_kind kind = kind_of_module(address);
      uint64_t expected = 0;
      atomic_compare_exchange_strong_explicit(&caller_cache[slot], &expected, key << 2 | (uint64_t)(kind + 1),
                                              memory_order_relaxed, memory_order_relaxed);
      return kind;
    }
    if (entry >> 2 == key)
      return (caller_kind)((entry & 3) - 1);
  }
  return kind_of_module(address);
}

__attribute__((unused)) static void forget_callers(void) {
  for (size_t i = 0; i < CALLER_CACHE_SLOTS; i++)
    atomic_store_explicit(&caller_cache[i], 0, memory_order_relaxed);
}

static int note_driver(struct dl_phdr_info *info, size_t size, void *found) {
  if (info->dlpi_name && name_begins(info->dlpi_name, driver_libraries))
    *(bool *)found = true;
  return 0;
}

static int read_loads(struct dl_phdr_info *info, size_t size, void *loads) {
  *(unsigned long long *)loads = info->dlpi_adds;
  return 1; /* the first module carries the counter: stop */
}

/* Whether a driver library was ever loaded (only drivers compile code at run time either): until
 * one is, no stack can hold driver code and the walk is skipped, which keeps CPU-only tests fast.
 * Rescans the modules when the loader's count of loads changed. */
static bool driver_loaded(void) {
  static _Atomic unsigned long long scanned_loads = ~0ull;
  static atomic_bool found_driver;
  unsigned long long loads = 0;
  dl_iterate_phdr(read_loads, &loads);
  if (loads != atomic_load(&scanned_loads)) {
    bool found = false;
    dl_iterate_phdr(note_driver, &found);
    atomic_store(&found_driver, found || atomic_load(&found_driver));
    atomic_store(&scanned_loads, loads);
  }
  return atomic_load(&found_driver);
}

/* True when driver code is anywhere on this thread's stack: the driver's own threads, and the work
 * it does inside the program's calls into it (a library it uses, like libzstd for its shader
 * cache, allocates for it too). */
static bool driver_on_stack(void) {
  void *frames[24];
  int n = backtrace(frames, 24);
  for (int i = 0; i < n; i++)
    if (kind_of(frames[i]) == CALLER_DRIVER)
      return true;
  return false;
}

/* ---- counting (both builds) ---- */

typedef struct tally {
  _Atomic int64_t allocations, bytes, largest, frees, held;
  atomic_flag top_lock;      /* guards top: a spin of a few instructions, never an allocation */
  int64_t top[TF_PROBE_TOP]; /* the largest requests, largest first */
} tally;

/* Inserts `size` into t->top when it is among the TF_PROBE_TOP largest so far. */
static void note_top(tally *t, int64_t size) {
  while (atomic_flag_test_and_set_explicit(&t->top_lock, memory_order_acquire)) {
  }
  int32_t at = TF_PROBE_TOP;
  while (at > 0 && t->top[at - 1] < size)
    at--;
  if (at < TF_PROBE_TOP) {
    memmove(&t->top[at + 1], &t->top[at], sizeof(int64_t) * (size_t)(TF_PROBE_TOP - 1 - at));
    t->top[at] = size;
  }
  atomic_flag_clear_explicit(&t->top_lock, memory_order_release);
}

static tally driver_tally, program_tally;
static _Atomic(const char *) phase_name = "~start";
static atomic_bool tracing;           /* the current phase's allocations get backtraces */
static atomic_bool splitting = false; /* the current phase's allocations are split by stack walks */
static _Atomic int64_t traces_left = 100;
static int64_t trace_min_bytes;  /* TF_PROBE_BACKTRACE_MIN: trace only allocations this large */
static const char *trace_prefix; /* from TF_PROBE_BACKTRACE; NULL: no backtraces */
static bool log_phases;          /* TF_PROBE_LOG */
static int probe_mode = TF_PROBE_OFF;
/* Set while this thread is inside the probe's own work (finding a caller, a backtrace), whose
 * allocations are not the program's. initial-exec: the preloaded library's TLS lives in the static
 * block, so reading it never allocates. */
static __thread bool busy __attribute__((tls_model("initial-exec")));

/* Who an allocation or release is charged to. `caller` is the return address into the code that
 * called the allocator (interposed builds). The sanitizer hooks get no caller and cannot walk the
 * stack safely (the walk would start inside the sanitizer's allocator, and could not first rule
 * out the unwinder holding its lock), so in sanitizer builds everything is the program's:
 * TF_PROBE_HOOKED tells the test. */
static caller_kind caller_of(const void *caller) {
  if (!caller)
    return CALLER_PROGRAM;
  caller_kind kind = kind_of(caller);
  if (kind != CALLER_PROGRAM || !atomic_load_explicit(&splitting, memory_order_relaxed) || !driver_loaded())
    return kind;
  return driver_on_stack() ? CALLER_DRIVER : CALLER_PROGRAM;
}

static tally *side_of(caller_kind kind) { return kind == CALLER_PROGRAM ? &program_tally : &driver_tally; }

static void trace(size_t size) {
  if (atomic_fetch_sub_explicit(&traces_left, 1, memory_order_relaxed) <= 0)
    return;
  write_text("alloc_probe: allocation of ");
  write_number((int64_t)size);
  write_text(" bytes in phase '");
  write_text(atomic_load_explicit(&phase_name, memory_order_relaxed));
  write_text("':\n");
  void *frames[32];
  int n = backtrace(frames, 32);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

/* `usable`: the block's size as the allocator keeps it (what a release will give back). */
static void record_allocation(size_t size, size_t usable, const void *caller) {
  if (busy)
    return;
  busy = true;
  caller_kind kind = caller_of(caller);
  tally *t = side_of(kind);
  atomic_fetch_add_explicit(&t->allocations, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->bytes, (int64_t)size, memory_order_relaxed);
  atomic_fetch_add_explicit(&t->held, (int64_t)usable, memory_order_relaxed);
  note_top(t, (int64_t)size);
  int64_t largest = atomic_load_explicit(&t->largest, memory_order_relaxed);
  while ((int64_t)size > largest &&
         !atomic_compare_exchange_weak_explicit(&t->largest, &largest, (int64_t)size, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  if (atomic_load_explicit(&tracing, memory_order_relaxed) && (int64_t)size >= trace_min_bytes &&
      kind != CALLER_UNWINDER)
    trace(size);
  busy = false;
}

static void record_release(size_t usable, const void *caller) {
  if (busy)
    return;
  busy = true;
  tally *t = side_of(caller_of(caller));
  atomic_fetch_add_explicit(&t->frees, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&t->held, (int64_t)usable, memory_order_relaxed);
  busy = false;
}

static tf_probe_tally take(tally *t) {
  tf_probe_tally out = {atomic_exchange(&t->allocations, 0), atomic_exchange(&t->bytes, 0),
                        atomic_exchange(&t->largest, 0),     atomic_exchange(&t->frees, 0),
                        atomic_exchange(&t->held, 0),        {0}};
  while (atomic_flag_test_and_set_explicit(&t->top_lock, memory_order_acquire)) {
  }
  memcpy(out.top, t->top, sizeof(out.top));
  memset(t->top, 0, sizeof(t->top));
  atomic_flag_clear_explicit(&t->top_lock, memory_order_release);
  return out;
}

static void log_tally(const char *side, const tf_probe_tally *t) {
  write_text(side);
  write_text(" ");
  write_number(t->allocations);
  write_text(" allocations, ");
  write_number(t->bytes);
  write_text(" bytes, largest ");
  write_number(t->largest);
  write_text(", ");
  write_number(t->frees);
  write_text(" frees, held ");
  write_number(t->held);
}

/* alloc_probe: phase 'NAME': program A allocations, B bytes, largest L, F frees, held H; driver ... */
static void log_phase(const char *name, const tf_probe_counts *c) {
  write_text("alloc_probe: phase '");
  write_text(name);
  write_text("': ");
  log_tally("program", &c->program);
  write_text("; ");
  log_tally("driver", &c->driver);
  write_text("\n");
}

static bool has_prefix(const char *text, const char *prefix) {
  return prefix && strncmp(text, prefix, strlen(prefix)) == 0;
}

TF_PROBE_EXPORT int tf_probe_mark(const char *name, tf_probe_counts *ended) {
  tf_probe_counts counts = {take(&driver_tally), take(&program_tally)};
  const char *previous = atomic_exchange(&phase_name, name);
  if (log_phases)
    log_phase(previous, &counts);
  if (ended)
    *ended = counts;
  atomic_store(&tracing, has_prefix(name, trace_prefix));
  atomic_store(&splitting, name[0] != TF_PROBE_UNSPLIT);
  return probe_mode;
}

static void read_environment(void) {
  const char *log = getenv("TF_PROBE_LOG");
  log_phases = log && strcmp(log, "0") != 0;
  const char *prefix = getenv("TF_PROBE_BACKTRACE");
  if (prefix && *prefix && strcmp(prefix, "0") != 0)
    trace_prefix = strcmp(prefix, "1") == 0 ? "step" : prefix;
  const char *max = getenv("TF_PROBE_BACKTRACE_MAX");
  if (max)
    atomic_store(&traces_left, atoll(max));
  const char *min = getenv("TF_PROBE_BACKTRACE_MIN");
  if (min)
    trace_min_bytes = atoll(min);
  /* backtrace()'s first call dlopens libgcc_s, which allocates: do it now, not inside a hook. */
  void *frame;
  busy = true;
  backtrace(&frame, 1);
  busy = false;
}

static void finish(void) {
  if (log_phases) {
    tf_probe_counts counts = {take(&driver_tally), take(&program_tally)};
    log_phase(atomic_load(&phase_name), &counts);
  }
}

#ifdef TF_PROBE_SANITIZER_HOOKS

/* ---- sanitizer builds: the sanitizer allocator's hooks ---- */

/* Weak: a process without a sanitizer runtime (the shell of a test script) loads the probe too,
 * and must not fail to start; the probe then counts nothing and says so (TF_PROBE_OFF). */
extern int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                                     void (*free_hook)(const volatile void *)) __attribute__((weak));
extern size_t __sanitizer_get_allocated_size(const volatile void *pointer) __attribute__((weak));

static size_t allocated_size(const volatile void *pointer) {
  return __sanitizer_get_allocated_size ? __sanitizer_get_allocated_size(pointer) : 0;
}

static void malloc_hook(const volatile void *pointer, size_t size) {
  record_allocation(size, allocated_size(pointer), NULL);
}

static void free_hook(const volatile void *pointer) {
  if (pointer)
    record_release(allocated_size(pointer), NULL);
}

__attribute__((constructor)) static void probe_load(void) {
  read_environment();
  if (__sanitizer_install_malloc_and_free_hooks && __sanitizer_install_malloc_and_free_hooks(malloc_hook, free_hook))
    probe_mode = TF_PROBE_HOOKED;
  atexit(finish);
}

#else

/* ---- plain builds: malloc and its relatives, interposed ---- */

typedef struct real_allocator {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  void *(*aligned_alloc)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*memalign)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  size_t (*malloc_usable_size)(void *);
} real_allocator;

static real_allocator real;
static atomic_int resolve_state; /* 0: not yet, 1: resolving, 2: done */

/* dlsym() itself may call calloc before `real` is known; those few early blocks come from here,
 * each after a header holding its size, and are never freed. */
static alignas(64) unsigned char bootstrap[1 << 16];
static atomic_size_t bootstrap_used;
#define BOOTSTRAP_HEADER 64

static bool from_bootstrap(const void *pointer) {
  return (const unsigned char *)pointer >= bootstrap && (const unsigned char *)pointer < bootstrap + sizeof(bootstrap);
}

static void *bootstrap_alloc(size_t size) {
  size_t rounded = (size + BOOTSTRAP_HEADER + 63) / 64 * 64;
  size_t offset = atomic_fetch_add(&bootstrap_used, rounded);
  if (offset + rounded > sizeof(bootstrap))
    return NULL;
  memcpy(bootstrap + offset, &size, sizeof(size));
  return memset(bootstrap + offset + BOOTSTRAP_HEADER, 0, size);
}

static size_t bootstrap_size(const void *pointer) {
  size_t size;
  memcpy(&size, (const unsigned char *)pointer - BOOTSTRAP_HEADER, sizeof(size));
  return size;
}

/* True when `real` is usable; false while the first call's dlsym() is still running. */
static bool resolve(void) {
  if (atomic_load_explicit(&resolve_state, memory_order_acquire) == 2)
    return true;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&resolve_state, &expected, 1))
    return false;
  real_allocator found;
  found.malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  found.calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  found.realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  found.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  found.aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  found.posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  found.memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  found.valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  found.pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  found.malloc_usable_size = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  if (!found.malloc || !found.calloc || !found.realloc || !found.free || !found.malloc_usable_size) {
    write_text("alloc_probe: dlsym(RTLD_NEXT) found no malloc to forward to\n");
    abort();
  }
  real = found;
  atomic_store_explicit(&resolve_state, 2, memory_order_release);
  return true;
}

static void *counted(void *pointer, size_t size, const void *caller) {
  if (pointer)
    record_allocation(size, real.malloc_usable_size(pointer), caller);
  return pointer;
}

/* __builtin_return_address(0) in each entry point: the code that called the allocator. */
#define CALLER __builtin_return_address(0)

TF_PROBE_EXPORT void *malloc(size_t size) {
  if (!resolve())
    return bootstrap_alloc(size);
  return counted(real.malloc(size), size, CALLER);
}

TF_PROBE_EXPORT void *calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes))
    return NULL;
  if (!resolve())
    return bootstrap_alloc(bytes);
  return counted(real.calloc(count, size), bytes, CALLER);
}

TF_PROBE_EXPORT void free(void *pointer) {
  if (!pointer || from_bootstrap(pointer) || !resolve())
    return;
  record_release(real.malloc_usable_size(pointer), CALLER);
  real.free(pointer);
}

TF_PROBE_EXPORT void *realloc(void *pointer, size_t size) {
  if (pointer && from_bootstrap(pointer)) {
    void *moved = malloc(size);
    size_t old = bootstrap_size(pointer);
    if (moved)
      memcpy(moved, pointer, old < size ? old : size);
    return moved;
  }
  if (!resolve())
    return pointer ? NULL : bootstrap_alloc(size);
  const void *caller = CALLER;
  size_t old = pointer ? real.malloc_usable_size(pointer) : 0;
  void *moved = real.realloc(pointer, size);
  if (pointer && (moved || size == 0))
    record_release(old, caller);
  return size ? counted(moved, size, caller) : moved;
}

TF_PROBE_EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  if (!resolve())
    return NULL;
  return counted(real.aligned_alloc(alignment, size), size, CALLER);
}

TF_PROBE_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!resolve())
    return 12; /* ENOMEM */
  int result = real.posix_memalign(out, alignment, size);
  if (result == 0)
    counted(*out, size, CALLER);
  return result;
}

TF_PROBE_EXPORT void *memalign(size_t alignment, size_t size) {
  if (!resolve())
    return NULL;
  return counted(real.memalign(alignment, size), size, CALLER);
}

TF_PROBE_EXPORT void *valloc(size_t size) {
  if (!resolve())
    return NULL;
  return counted(real.valloc(size), size, CALLER);
}

TF_PROBE_EXPORT void *pvalloc(size_t size) {
  if (!resolve())
    return NULL;
  return counted(real.pvalloc(size), size, CALLER);
}

/* A closed module's call sites may be reused by the next module loaded there (kind_of). */
TF_PROBE_EXPORT int dlclose(void *handle) {
  static int (*real_dlclose)(void *);
  if (!real_dlclose)
    real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
  int result = real_dlclose ? real_dlclose(handle) : -1;
  forget_callers();
  return result;
}

TF_PROBE_EXPORT size_t malloc_usable_size(void *pointer) {
  if (!pointer)
    return 0;
  if (from_bootstrap(pointer))
    return bootstrap_size(pointer);
  return resolve() ? real.malloc_usable_size(pointer) : 0;
}

__attribute__((constructor)) static void probe_load(void) {
  resolve();
  read_environment();
  probe_mode = TF_PROBE_INTERPOSED;
  atexit(finish);
}

#endif
