/* The memory promise measured from outside the library: after tf_session_create() returns, training
 * makes no device allocation and, after two warm-up steps, no heap allocation at all. The
 * allocation probe (alloc_probe.c, preloaded) counts every heap allocation of the process, whoever
 * makes it; on the CPU backend and on lavapipe device memory is such heap memory too.
 *
 *   test_alloc_probe cpu|vulkan [--only FAMILY]
 *
 * For each zoo family (shrunk as in tests/compiler/test_plans.c): compile with AdamW and two
 * micro-batches per step (two families again with one, and their updates in the backward pass), open the data feed on
 * .npy files written here, create the session, then train 2 warm-up steps, 3 steps through the feed (runtime/feed.h)
 * and 3 steps writing each micro-batch with tf_session_write(). Fails on
 *   - any single allocation after create at least as large as the plan's smallest region, clamped
 *     to [4 KiB, 64 KiB] (probe_client.h says why), and
 *   - any heap allocation in the 6 steps after the warm-up;
 * and checks that the probe sees what it should: a calibration malloc, and the regions themselves
 * inside tf_session_create(). On Vulkan those rules hold for the program's side; lavapipe's own
 * allocations get the bound judge_driver() states. Exits 77 (skip) without the probe, or for vulkan
 * without a device. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_probe/probe_client.h"
#include "backends/backend.h"
#include "check.h"
#include "runtime/feed.h"
#include "runtime/npy.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

#define WARM_UP_STEPS 2
#define MEASURED_STEPS 3
#define SAMPLES_PER_BATCH 3 /* the data holds 3 micro-batches: the feed crosses epochs (reshuffles) */

static tf_test_counts counts;

typedef struct family {
  const char *preset;
  const char *overrides[7];
  const char *bindings;
  bool vulkan;      /* also run on Vulkan (lavapipe compiles shaders slowly: a few) */
  bool in_backward; /* one micro-batch, no clipping, each update in the backward pass (--update-in-backward) */
} family;

static const family families[] = {
    {"mlp", {NULL}, "N=16", true, false},
    {"cnn", {NULL}, "N=8", true, false},
    {"gpt", {"layers=2", "d_model=32", "heads=2", NULL}, "N=2,T=16", true, false},
    {"gpt2-small",
     {"layers=1", "d_model=64", "heads=2", "vocab=300", "ctx=64", "seq=16", NULL},
     "N=2,T=16",
     false,
     false},
    {"vit-b16", {"image=32", "patch=8", "d_model=64", "layers=1", "heads=2", "classes=10", NULL}, "N=2", false, false},
    {"asr-128-6-3", {"enc_layers=1", "dec_layers=1", "vocab=50", NULL}, "N=2,T=8,U=6", false, false},
    {"xtts-gpt",
     {"layers=1", "d_model=64", "heads=2", "text_vocab=40", "audio_vocab=30", NULL},
     "N=2,Ta=12",
     false,
     false},
    {"dcgan", {"mels=32", "frames=16", "g_channels=8", "d_channels=8", "z_dim=10", NULL}, "N=2", false, false},
    /* Updates in the backward pass: gradients in the arena, parameters updated inside the micro-step. */
    {"gpt", {"layers=2", "d_model=32", "heads=2", NULL}, "N=2,T=16", true, true},
    {"gpt2-small",
     {"layers=1", "d_model=64", "heads=2", "vocab=300", "ctx=64", "seq=16", NULL},
     "N=2,T=16",
     false,
     true},
    /* A 4 MiB weight: creating the session must not stage it whole (a second copy in host memory). */
    {"mlp", {"hidden=1024", NULL}, "N=4", false, false},
};

/* What one training run measured, phase by phase. */
typedef struct measured {
  tf_probe_counts create, warm_up, feed_steps, write_steps;
  tf_session_memory memory;
  double loss;
} measured;

static tf_plan *compile_family(const family *f, tf_target_kind target) {
  int32_t n = 0;
  while (f->overrides[n])
    n++;
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(f->preset, f->overrides, n, &g);
  CHECK(&counts, status == NULL, "%s: build: %s", f->preset, tf_status_message(status));
  tf_status_free(status);
  if (!g)
    return NULL;
  tf_compile_options options = tf_compile_options_default(target);
  options.bindings = f->bindings;
  options.optimizer = TF_OPTIMIZER_ADAMW;
  options.accumulate = f->in_backward ? 1 : 2;
  options.clip_norm = f->in_backward ? 0 : 1.0;
  options.update_in_backward = f->in_backward;
  tf_plan *plan = NULL;
  status = tf_compile(g, &options, &plan);
  CHECK(&counts, status == NULL, "%s: compile: %s", f->preset, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

static bool is_fed(const tf_plan *plan, int32_t i) {
  const tf_plan_buffer *b = &plan->buffers[i];
  return (b->role == TF_ROLE_INPUT || b->role == TF_ROLE_LABEL) && (b->io_twin < 0 || b->io_twin > i);
}

/* Values valid for any input: floats in [-1, 1), integers 0 or 1 (ids and classes everywhere). */
static void fill_random(void *data, const tf_plan_buffer *b, int64_t elements, uint64_t *state) {
  for (int64_t k = 0; k < elements; k++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(*state >> 33);
    if (b->dtype == TF_F32)
      ((float *)data)[k] = (float)(bits % 2000) / 1000.0f - 1.0f;
    else if (b->dtype == TF_I32)
      ((int32_t *)data)[k] = (int32_t)(bits % 2);
    else if (b->dtype == TF_I64)
      ((int64_t *)data)[k] = (int64_t)(bits % 2);
  }
}

/* DIR/<name>.npy for every input and label: SAMPLES_PER_BATCH micro-batches of samples. */
static tf_status write_data(const tf_plan *plan, const char *dir) {
  uint64_t state = 0x5EED;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (!is_fed(plan, i))
      continue;
    int64_t shape[TF_MAX_RANK];
    memcpy(shape, b->shape, sizeof(shape));
    shape[0] = b->shape[0] * SAMPLES_PER_BATCH;
    int64_t elements = b->bytes / tf_dtype_size(b->dtype) * SAMPLES_PER_BATCH;
    void *data = malloc((size_t)(b->bytes * SAMPLES_PER_BATCH));
    if (!data)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "test data for '%s'", b->name);
    fill_random(data, b, elements, &state);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.npy", dir, b->name);
    tf_status status = tf_npy_write(path, b->dtype, b->rank, shape, data);
    free(data);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

/* Host copies of one micro-batch per input, made before the session exists, for the steps that
 * write with tf_session_write() the way the feed does. */
typedef struct host_batch {
  void *data[64];
  int32_t ids[64];
  int32_t n;
} host_batch;

static tf_status host_batch_make(const tf_plan *plan, host_batch *h) {
  memset(h, 0, sizeof(*h));
  uint64_t state = 0xBA7C;
  for (int32_t i = 0; i < plan->n_buffers && h->n < 64; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (!is_fed(plan, i))
      continue;
    h->data[h->n] = malloc((size_t)b->bytes);
    if (!h->data[h->n])
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "host batch for '%s'", b->name);
    fill_random(h->data[h->n], b, b->bytes / tf_dtype_size(b->dtype), &state);
    h->ids[h->n++] = i;
  }
  return NULL;
}

static void host_batch_free(host_batch *h) {
  for (int32_t k = 0; k < h->n; k++)
    free(h->data[k]);
}

static tf_status write_batch(tf_session *session, const tf_plan *plan, const host_batch *h) {
  for (int32_t k = 0; k < h->n; k++) {
    const tf_plan_buffer *b = &plan->buffers[h->ids[k]];
    TF_RETURN_IF_ERROR(tf_session_write(session, b->name, h->data[k], b->bytes));
  }
  return NULL;
}

/* One optimizer step: `accumulate` micro-batches from the feed (or from `h`), then the update. */
static tf_status train_step(tf_session *session, const tf_plan *plan, tf_feed *feed, const host_batch *h,
                            double *loss) {
  for (int32_t m = 0; m < plan->accumulate; m++) {
    TF_RETURN_IF_ERROR(feed ? tf_feed_next(feed, session) : write_batch(session, plan, h));
    TF_RETURN_IF_ERROR(tf_session_micro_step(session, loss));
  }
  return tf_session_optimizer_step(session);
}

static tf_status train_steps(tf_session *session, const tf_plan *plan, tf_feed *feed, const host_batch *h, int steps,
                             double *loss) {
  for (int s = 0; s < steps; s++)
    TF_RETURN_IF_ERROR(train_step(session, plan, feed, h, loss));
  return NULL;
}

/* Creates the session and trains, marking the probe's phases around each part. The feed and the
 * host batches exist before the session, so every phase after create is training alone. Returns
 * TF_ERR_UNSUPPORTED untouched when the backend has no device. */
static tf_status run_measured(const tf_probe *probe, const tf_plan *plan, const char *backend, int32_t threads,
                              const char *dir, measured *out) {
  memset(out, 0, sizeof(*out));
  out->loss = NAN;
  tf_feed *feed = NULL;
  host_batch h;
  TF_RETURN_IF_ERROR(tf_feed_open(plan, dir, 1, &feed));
  tf_status status = host_batch_make(plan, &h);
  tf_session_options options = tf_session_options_default();
  options.backend = backend;
  options.threads = threads;
  tf_session *session = NULL;
  tf_probe_phase(probe, "~create");
  if (!status)
    status = tf_session_create(plan, &options, &session);
  out->create = tf_probe_phase(probe, "warm-up");
  if (!status)
    status = train_steps(session, plan, feed, &h, WARM_UP_STEPS, &out->loss);
  out->warm_up = tf_probe_phase(probe, "steps: feed");
  if (!status)
    status = train_steps(session, plan, feed, &h, MEASURED_STEPS, &out->loss);
  out->feed_steps = tf_probe_phase(probe, "steps: tf_session_write");
  if (!status)
    status = train_steps(session, plan, NULL, &h, MEASURED_STEPS, &out->loss);
  out->write_steps = tf_probe_phase(probe, "~teardown");
  if (session)
    out->memory = tf_session_memory_use(session);
  tf_session_destroy(session);
  tf_feed_close(feed);
  host_batch_free(&h);
  return status;
}

static void print_tally(const char *name, const char *side, const tf_probe_tally *t) {
  printf("    %-31s %-7s %6" PRId64 " allocations %10" PRId64 " bytes, largest %8" PRId64 ", %6" PRId64
         " frees, %9" PRId64 " bytes held\n",
         name, side, t->allocations, t->bytes, t->largest, t->frees, t->held);
}

static void print_phase(const char *name, const tf_probe_counts *c, bool driver) {
  print_tally(name, "program", &c->program);
  if (driver || c->driver.allocations || c->driver.frees)
    print_tally("", "driver", &c->driver);
}

/* The checks on one run; `what` names it in every message. On the CPU backend nothing may come from
 * a driver, so both sides are judged as one; on a GPU driver the program's side is judged the same
 * way and the driver's by judge_driver(). */
static void judge(const char *what, const tf_plan *plan, const measured *m, bool gpu) {
  const int64_t limit = tf_probe_region_limit(plan), smallest = tf_probe_smallest_region(plan);
  const int64_t largest_region = tf_probe_largest_region(plan);
  // The probe must see the regions being allocated (by the program on the CPU, by the driver on
  // lavapipe): otherwise it would be blind to the very allocations the promise is about.
  const tf_probe_tally create = tf_probe_total(&m->create);
  CHECK(&counts, create.largest >= largest_region,
        "%s: the probe saw no allocation of the largest region (%" PRId64 " bytes) in tf_session_create; largest "
        "seen %" PRId64,
        what, largest_region, create.largest);
  /* On the CPU, device memory is host memory: every region must be one request of its planned bytes
   * (rounded to the backend's 64-byte alignment), seen by the probe, not taken from the session. */
  if (!gpu) {
    char why[300];
    CHECK(&counts, tf_probe_regions_allocated(plan, &create, TF_PROBE_CPU_REGION_ALIGN, why, sizeof(why)), "%s: %s",
          what, why);
  }
  const struct {
    const char *phase;
    tf_probe_tally judged;
  } after_create[] = {
      {"warm-up", gpu ? m->warm_up.program : tf_probe_total(&m->warm_up)},
      {"steps: feed", gpu ? m->feed_steps.program : tf_probe_total(&m->feed_steps)},
      {"steps: tf_session_write", gpu ? m->write_steps.program : tf_probe_total(&m->write_steps)},
  };
  int64_t largest_after = 0;
  for (size_t p = 0; p < sizeof(after_create) / sizeof(after_create[0]); p++) {
    const tf_probe_tally *t = &after_create[p].judged;
    largest_after = t->largest > largest_after ? t->largest : largest_after;
    CHECK(&counts, t->largest < limit,
          "%s: region-sized allocation after create: %" PRId64 " bytes in phase '%s' (limit %" PRId64
          ": the smallest region, %" PRId64 " bytes, clamped to [4 KiB, 64 KiB])",
          what, t->largest, after_create[p].phase, limit, smallest);
  }
  const int64_t feed_allocations = after_create[1].judged.allocations;
  const int64_t write_allocations = after_create[2].judged.allocations;
  CHECK(&counts, feed_allocations + write_allocations == 0,
        "%s: heap allocations per step after warm-up: %" PRId64 " in %d steps through the feed, %" PRId64
        " in %d steps through tf_session_write (bound 0; TF_PROBE_BACKTRACE=steps shows where they come from)",
        what, feed_allocations, MEASURED_STEPS, write_allocations, MEASURED_STEPS);
  // The session's own figures, now backed by the measurements above (regions at their sizes, no
  // region-sized or per-step allocation after create).
  CHECK(&counts, m->memory.allocated_bytes == tf_plan_total_bytes(plan) && m->memory.allocations_after_create == 0,
        "%s: the session reports %" PRId64 " bytes allocated for a plan of %" PRId64 ", %" PRId64 " after create", what,
        m->memory.allocated_bytes, tf_plan_total_bytes(plan), m->memory.allocations_after_create);
  CHECK(&counts, isfinite(m->loss), "%s: loss %g", what, m->loss);
  printf("%s: %d warm-up + 2 x %d measured steps of %d micro-batches, loss %.4f\n", what, WARM_UP_STEPS, MEASURED_STEPS,
         plan->accumulate, m->loss);
  print_tally("tf_session_create", "all", &create); /* an unsplit phase: only the sum means anything */
  print_phase("warm-up", &m->warm_up, gpu);
  print_phase("steps through the feed", &m->feed_steps, gpu);
  print_phase("steps through tf_session_write", &m->write_steps, gpu);
  printf("    after warm-up: %.2f %sallocations per step; largest %sallocation after create %" PRId64
         " bytes, limit %" PRId64 " (regions %" PRId64 " to %" PRId64 " bytes)\n",
         (double)(feed_allocations + write_allocations) / (2.0 * MEASURED_STEPS), gpu ? "program " : "",
         gpu ? "program " : "", largest_after, limit, smallest, largest_region);
}

/* What lavapipe (Mesa 22.3) allocates while it runs our command buffers cannot be removed from our
 * side: llvmpipe runs compute workgroups that use barriers as LLVM coroutines and heap-allocates
 * their frames for every workgroup it runs (gallivm's coro_malloc, 4096-aligned; the 95 and 113 KiB
 * blocks of the matmul shaders), and Mesa's queue and llvmpipe's dispatch keep small records per
 * submission. Its bound: steady (the same count for the same work, step after step: both measured
 * phases do the same steps) and transient (freed within the steps: what the steps leave held is
 * less than the smallest region, so no region-sized block can be kept). */
static void judge_driver(const char *what, const tf_plan *plan, const measured *m) {
  const tf_probe_tally *feed = &m->feed_steps.driver, *write = &m->write_steps.driver;
  const int64_t smallest = tf_probe_smallest_region(plan);
  const int64_t difference = feed->allocations > write->allocations ? feed->allocations - write->allocations
                                                                    : write->allocations - feed->allocations;
  const int64_t tolerance = 4 + feed->allocations / 100;
  CHECK(&counts, difference <= tolerance,
        "%s: the driver's allocations are not steady: %" PRId64 " in %d steps, then %" PRId64 " in the same %d "
        "steps (tolerance %" PRId64 ")",
        what, feed->allocations, MEASURED_STEPS, write->allocations, MEASURED_STEPS, tolerance);
  const int64_t held = feed->held + write->held;
  CHECK(&counts, held < smallest,
        "%s: the driver kept %" PRId64 " bytes allocated during %d steps after warm-up (limit: the smallest region, "
        "%" PRId64 " bytes)",
        what, held, 2 * MEASURED_STEPS, smallest);
  printf("    driver (lavapipe): %.1f allocations per step (%.0f bytes, largest %" PRId64
         "), freed within the steps (%" PRId64 " bytes held after them): coroutine frames of workgroups with "
         "barriers and per-submission records, inside Mesa\n",
         (double)(feed->allocations + write->allocations) / (2.0 * MEASURED_STEPS),
         (double)(feed->bytes + write->bytes) / (2.0 * MEASURED_STEPS),
         feed->largest > write->largest ? feed->largest : write->largest, held);
}

/* Returns false when the backend has no device (the caller skips). */
static bool probe_family(const tf_probe *probe, const family *f, const char *backend, int32_t threads) {
  tf_plan *plan = compile_family(f, strcmp(backend, "vulkan") == 0 ? TF_TARGET_VULKAN : TF_TARGET_CPU);
  if (!plan)
    return true;
  char dir[] = "/tmp/tightfit_alloc_probe_XXXXXX";
  bool have_dir = mkdtemp(dir) != NULL;
  CHECK(&counts, have_dir, "mkdtemp");
  tf_status status = have_dir ? write_data(plan, dir) : NULL;
  CHECK(&counts, status == NULL, "%s: data: %s", f->preset, tf_status_message(status));
  tf_status_free(status);
  measured m;
  status = run_measured(probe, plan, backend, threads, dir, &m);
  bool device = tf_status_code(status) != TF_ERR_UNSUPPORTED;
  if (device) {
    CHECK(&counts, status == NULL, "%s on %s: %s", f->preset, backend, tf_status_message(status));
    if (!status) {
      char what[128];
      snprintf(what, sizeof(what), "%s %s (%s, %d thread%s%s)", backend, f->preset, f->bindings, threads,
               threads == 1 ? "" : "s", f->in_backward ? ", updates in backward" : "");
      bool gpu = strcmp(backend, "cpu") != 0;
      judge(what, plan, &m, gpu);
      if (gpu)
        judge_driver(what, plan, &m);
    }
  } else {
    printf("SKIP %s on %s: %s\n", f->preset, backend, tf_status_message(status));
  }
  tf_status_free(status);
  for (int32_t i = 0; have_dir && i < plan->n_buffers; i++) {
    if (!is_fed(plan, i))
      continue;
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s.npy", dir, plan->buffers[i].name);
    remove(path);
  }
  if (have_dir)
    remove(dir);
  tf_plan_destroy(plan);
  return device;
}

int main(int argc, char **argv) {
  const char *backend = argc > 1 ? argv[1] : "cpu";
  const char *only = argc > 3 && strcmp(argv[2], "--only") == 0 ? argv[3] : NULL;
  if (strcmp(backend, "cpu") != 0 && strcmp(backend, "vulkan") != 0) {
    fprintf(stderr, "usage: test_alloc_probe cpu|vulkan [--only FAMILY]\n");
    return 2;
  }
  tf_probe probe = tf_probe_attach(argv);
  if (!probe.mark) {
    printf("SKIP: the allocation checks need the probe: %s\n", probe.absent);
    return 77;
  }
  char why[256];
  bool calibrated = tf_probe_calibrate(&probe, why, sizeof(why));
  CHECK(&counts, calibrated, "the probe does not count: %s", why);
  printf("probe: %s; %s\n", tf_probe_mode_name(probe.mode), why);
  if (!calibrated)
    return tf_test_finish("alloc_probe", &counts);
  if (strcmp(backend, "vulkan") == 0) {
    if (!tf_backend_find("vulkan")) {
      printf("SKIP: this build has no Vulkan backend\n");
      return 77;
    }
    if (probe.mode != TF_PROBE_INTERPOSED) {
      printf("SKIP: on Vulkan the checks need the driver's allocations told from the program's, which the "
             "probe does only when it interposes malloc (in a sanitizer build it counts through the "
             "sanitizer's hooks, which give no caller)\n");
      return 77;
    }
    // The validation layer keeps its own records of every call on the heap: measure the driver
    // as it runs in production, without it (tests/vulkan runs the layer).
    unsetenv("TIGHTFIT_VULKAN_VALIDATION");
  }
  int ran = 0;
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    const family *f = &families[i];
    if ((only && strcmp(only, f->preset) != 0) || (strcmp(backend, "vulkan") == 0 && !f->vulkan))
      continue;
    if (!probe_family(&probe, f, backend, 2)) {
      printf("SKIP: no %s device\n", backend);
      return 77;
    }
    ran++;
    // One thread: every parallel loop takes the inline path (kernels/cpu/parallel.h).
    if (strcmp(backend, "cpu") == 0 && strcmp(f->preset, "mlp") == 0)
      probe_family(&probe, f, backend, 1);
  }
  CHECK(&counts, ran > 0, "no family matched '%s'", only ? only : "");
  return tf_test_finish("alloc_probe", &counts);
}
