/* The data feed's micro-batches (runtime/feed.c), read back from the session that received them:
 *   - per-sample files: every row arrives whole with its own label, each epoch is a permutation of
 *     the samples, and the background reading (prefetch) changes nothing: the same samples in the
 *     same order with it on and off, through sequential steps, seeks that the feed did and did not
 *     foresee, a data-parallel rank's blocks (tf_feed_set_ranks) and in-order evaluation batches
 *     taken while a prefetch is pending;
 *   - how many micro-batches were ready when taken (tf_feed_prefetched): all but the first of a
 *     sequential run and of a rank's blocks; a rank without set_ranks misses at every block;
 *   - a file truncated while the feed reads it, in the background or not: under the CLI's guard
 *     (tools/bus_guard.h), an error naming the file and its new size returned by next, not a death
 *     by SIGBUS;
 *   - token streams: windows of consecutive tokens with their labels one ahead, the same on and off. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_test.h"
#include "runtime/feed.h"
#include "runtime/npy.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"
#include "tools/bus_guard.h"

#define SAMPLES 10
#define FEATURES 64
#define BATCH 4
#define MAX_TAKES 16

static tf_test_counts counts;
static char root[256];

static tf_plan *compile_zoo(const char *preset, const char *const *overrides, int32_t n, const char *bindings,
                            int32_t accumulate) {
  return io_compile_zoo(&counts, preset, overrides, n, bindings, accumulate);
}

static void write_npy(const char *dir, const char *file, tf_dtype dtype, int32_t rank, const int64_t *shape,
                      const void *data) {
  io_write_npy(&counts, dir, file, dtype, rank, shape, data);
}

/* mlp data of `samples` rows in root/NAME: sample s is x[s, e] = 100 s + e with label s % 10, so a
 * fed row names its sample. */
static const char *digits(const char *name, int32_t samples) {
  static char dir[512];
  snprintf(dir, sizeof(dir), "%s/%s", root, name);
  mkdir(dir, 0755);
  float *x = malloc(sizeof(float) * (size_t)samples * FEATURES);
  int32_t *labels = malloc(sizeof(int32_t) * (size_t)samples);
  for (int32_t s = 0; s < samples; s++) {
    labels[s] = s % 10;
    for (int e = 0; e < FEATURES; e++)
      x[s * FEATURES + e] = (float)(100 * s + e);
  }
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){samples, FEATURES}, x);
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){samples}, labels);
  free(x);
  free(labels);
  return dir;
}

/* The samples of the micro-batch in the session into samples[BATCH]; -1 for a row that is not
 * one sample's whole row with that sample's label. */
static void fed_samples(tf_session *session, int32_t *samples) {
  float x[BATCH * FEATURES];
  int32_t labels[BATCH];
  tf_status status = tf_session_read(session, "x", x, sizeof(x));
  if (!status)
    status = tf_session_read(session, "labels", labels, sizeof(labels));
  CHECK(&counts, status == NULL, "read the batch: %s", tf_status_message(status));
  tf_status_free(status);
  for (int r = 0; r < BATCH; r++) {
    const int32_t s = (int32_t)(x[r * FEATURES] / 100);
    bool whole = s >= 0 && s < SAMPLES && labels[r] == s;
    for (int e = 0; e < FEATURES && whole; e++)
      whole = x[r * FEATURES + e] == (float)(100 * s + e);
    samples[r] = whole ? s : -1;
  }
}

/* A cpu session of `plan` and a feed on `dir` (seed `seed`) reading in the background or not. */
static tf_status open_feed(tf_plan *plan, const char *dir, uint64_t seed, bool prefetch, tf_session **session,
                           tf_feed **feed) {
  *session = NULL;
  *feed = NULL;
  tf_session_options options = tf_session_options_default();
  TF_RETURN_IF_ERROR(tf_session_create(plan, &options, session));
  TF_RETURN_IF_ERROR(tf_feed_open(plan, dir, seed, feed));
  return tf_feed_set_prefetch(*feed, prefetch);
}

/* One feed's run: for each take, a seek to seeks[t] (when >= 0) or none, then next; the samples fed
 * into samples[t][BATCH]. ranks > 0: tf_feed_set_ranks. Returns tf_feed_prefetched (-1: failed). */
static int64_t run_feed(tf_plan *plan, const char *dir, bool prefetch, int32_t ranks, const int64_t *seeks, int takes,
                        int32_t (*samples)[BATCH]) {
  tf_session *session;
  tf_feed *feed;
  tf_status status = open_feed(plan, dir, 7, prefetch, &session, &feed);
  if (!status && ranks > 0)
    tf_feed_set_ranks(feed, ranks);
  for (int t = 0; t < takes && !status; t++) {
    if (seeks[t] >= 0)
      tf_feed_seek(feed, seeks[t]);
    status = tf_feed_next(feed, session);
    if (!status)
      fed_samples(session, samples[t]);
  }
  CHECK(&counts, status == NULL && tf_feed_prefetching(feed) == prefetch, "feed (prefetch %s): %s",
        prefetch ? "on" : "off", tf_status_message(status));
  const int64_t prefetched = status ? -1 : tf_feed_prefetched(feed);
  tf_status_free(status);
  tf_feed_close(feed);
  tf_session_destroy(session);
  return prefetched;
}

static bool same_samples(int32_t (*a)[BATCH], int32_t (*b)[BATCH], int takes) {
  return memcmp(a, b, sizeof(int32_t) * BATCH * (size_t)takes) == 0;
}

static void print_samples(const char *what, int32_t (*samples)[BATCH], int takes) {
  printf("     %s:", what);
  for (int t = 0; t < takes; t++)
    printf(" [%d %d %d %d]", samples[t][0], samples[t][1], samples[t][2], samples[t][3]);
  printf("\n");
}

/* Runs `seeks` with prefetch on and off: the same samples, every row whole; the prefetched counts. */
static void compare(const char *what, tf_plan *plan, const char *dir, int32_t ranks, const int64_t *seeks, int takes,
                    int64_t expected_prefetched) {
  int32_t on[MAX_TAKES][BATCH], off[MAX_TAKES][BATCH];
  const int64_t hits_on = run_feed(plan, dir, true, ranks, seeks, takes, on);
  const int64_t hits_off = run_feed(plan, dir, false, ranks, seeks, takes, off);
  bool whole = true;
  for (int t = 0; t < takes; t++)
    for (int r = 0; r < BATCH; r++)
      whole = whole && on[t][r] >= 0;
  CHECK(&counts, whole && same_samples(on, off, takes), "%s: prefetch on and off feed the same whole samples", what);
  CHECK(&counts, hits_on == expected_prefetched && hits_off == 0,
        "%s: %" PRId64 " of %d micro-batches ready when taken (expected %" PRId64 "), %" PRId64 " without prefetch",
        what, hits_on, takes, expected_prefetched, hits_off);
  printf("%-4s %s: %d micro-batches, the same with prefetch on and off; %" PRId64 " ready when taken\n",
         whole && same_samples(on, off, takes) && hits_on == expected_prefetched ? "ok" : "FAIL", what, takes, hits_on);
  print_samples("samples", on, takes);
}

/* Sequential steps over 2.8 epochs: each epoch a permutation of the samples. */
static void epochs(tf_plan *plan, const char *dir) {
  int64_t seeks[7];
  for (int t = 0; t < 7; t++)
    seeks[t] = -1;
  compare("sequential", plan, dir, 0, seeks, 7, 6);
  int32_t fed[7][BATCH];
  run_feed(plan, dir, true, 0, seeks, 7, fed);
  const int32_t *flat = &fed[0][0];
  for (int epoch = 0; epoch < 2; epoch++) {
    int seen[SAMPLES] = {0}, distinct = 0;
    for (int i = 0; i < SAMPLES; i++) {
      const int32_t s = flat[epoch * SAMPLES + i];
      distinct += s >= 0 && !seen[s]++;
    }
    CHECK(&counts, distinct == SAMPLES, "epoch %d: %d distinct samples of %d", epoch, distinct, SAMPLES);
    printf("%-4s epoch %d: a permutation of the %d samples\n", distinct == SAMPLES ? "ok" : "FAIL", epoch, SAMPLES);
  }
}

/* Seeks the feed foresaw (the next position) and ones it did not. */
static void seeks(tf_plan *plan, const char *dir) {
  const int64_t positions[] = {-1, -1, 9, -1, 2, 3, -1, 0};
  /* ready: the 2nd, 4th, 6th (seek 3 after 2 is the next one) and 7th takes */
  compare("seeks", plan, dir, 0, positions, 8, 4);
}

/* A rank of a data-parallel job (cmd_train's order): 3 ranks, 2 micro-batches a step, rank 1 takes
 * positions 6 s + 2 + m; with set_ranks the feed foresees its next block. */
static void ranks(const char *dir) {
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4", 2);
  if (!plan)
    return;
  int64_t positions[6];
  for (int step = 0, t = 0; step < 3; step++)
    for (int m = 0; m < 2; m++)
      positions[t++] = step * 3 * 2 + 1 * 2 + m;
  compare("rank 1 of 3, set_ranks", plan, dir, 3, positions, 6, 5);
  compare("rank 1 of 3, no set_ranks", plan, dir, 0, positions, 6, 3);
  tf_plan_destroy(plan);
}

/* An in-order batch taken while the next micro-batch is being read: its own rows, and the
 * training order after it unchanged. */
static void in_order(tf_plan *plan, const char *dir) {
  tf_session *session;
  tf_feed *feed;
  tf_status status = open_feed(plan, dir, 7, true, &session, &feed);
  int32_t first[BATCH], evaluated[BATCH], second[BATCH];
  if (!status)
    status = tf_feed_next(feed, session);
  if (!status)
    fed_samples(session, first);
  if (!status) /* the feed is reading position 1 now */
    status = tf_feed_batch_in_order(feed, session, 3);
  if (!status)
    fed_samples(session, evaluated);
  if (!status)
    status = tf_feed_next(feed, session);
  if (!status)
    fed_samples(session, second);
  CHECK(&counts, status == NULL, "in order: %s", tf_status_message(status));
  tf_status_free(status);
  tf_feed_close(feed);
  tf_session_destroy(session);
  int32_t sequential[2][BATCH];
  const int64_t none[2] = {-1, -1};
  run_feed(plan, dir, false, 0, none, 2, sequential);
  const bool rows_ok = evaluated[0] == 2 && evaluated[1] == 3 && evaluated[2] == 4 && evaluated[3] == 5;
  const bool order_ok =
      memcmp(first, sequential[0], sizeof(first)) == 0 && memcmp(second, sequential[1], sizeof(second)) == 0;
  CHECK(&counts, rows_ok, "in-order batch 3 fed [%d %d %d %d], expected [2 3 4 5]", evaluated[0], evaluated[1],
        evaluated[2], evaluated[3]);
  CHECK(&counts, order_ok, "the training order around an in-order batch changed");
  printf("%-4s an in-order batch between two steps: samples 2..5, then the training order goes on unchanged\n",
         rows_ok && order_ok ? "ok" : "FAIL");
}

/* x.npy (1,000 samples, 250 KiB) truncated after the first step: the background read (or, with
 * prefetch off, the read on the caller's thread) meets SIGBUS, which the CLI's guard (given with
 * tf_feed_set_guard) turns into an error on that thread; next returns it, naming the file. */
static void truncated(tf_plan *plan, bool prefetch) {
  const char *dir = digits(prefetch ? "truncated_on" : "truncated_off", 1000);
  char x_path[600];
  snprintf(x_path, sizeof(x_path), "%s/x.npy", dir);
  tf_session *session;
  tf_feed *feed;
  tf_status status = open_feed(plan, dir, 7, prefetch, &session, &feed);
  if (!status)
    tf_feed_set_guard(feed, tf_tool_bus_guarded);
  if (!status)
    status = tf_feed_next(feed, session);
  CHECK(&counts, status == NULL, "before the truncation: %s", tf_status_message(status));
  tf_status_free(status);
  status = NULL;
  CHECK(&counts, truncate(x_path, 128) == 0, "truncate %s", x_path);
  /* The batch read before the truncation may still arrive; the one after it cannot. */
  for (int t = 0; t < 2 && !status && feed; t++)
    status = tf_feed_next(feed, session);
  char expected[700];
  snprintf(expected, sizeof(expected), "%s: the file shrank to 128 bytes while tightfit was reading it", x_path);
  const char *message = tf_status_message(status);
  const bool ok = status && strstr(message, expected);
  CHECK(&counts, ok, "truncated (prefetch %s): got '%s', expected '%s'", prefetch ? "on" : "off", message, expected);
  printf("%-4s x.npy truncated between steps, prefetch %s: %s\n", ok ? "ok" : "FAIL", prefetch ? "on" : "off", message);
  tf_status_free(status);
  tf_feed_close(feed);
  tf_session_destroy(session);
}

/* A token stream: each row a window of consecutive tokens (token i is i % 128), its labels one ahead. */
static void token_stream(void) {
  tf_plan *plan = compile_zoo("gpt", (const char *const[]){"layers=1", "d_model=16", "heads=2"}, 3, "N=2,T=16", 0);
  if (!plan)
    return;
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/tokens", root);
  mkdir(dir, 0755);
  int32_t tokens[300];
  for (int i = 0; i < 300; i++)
    tokens[i] = i % 128;
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){300}, tokens);
  int32_t fed[2][6][2 * 2 * 16];
  for (int pass = 0; pass < 2; pass++) {
    tf_session *session;
    tf_feed *feed;
    tf_status status = open_feed(plan, dir, 3, pass == 0, &session, &feed);
    for (int t = 0; t < 6 && !status; t++) {
      status = tf_feed_next(feed, session);
      if (!status)
        status = tf_session_read(session, "tokens", fed[pass][t], 2 * 16 * 4);
      if (!status)
        status = tf_session_read(session, "labels", fed[pass][t] + 32, 2 * 16 * 4);
    }
    CHECK(&counts, status == NULL, "token stream: %s", tf_status_message(status));
    tf_status_free(status);
    tf_feed_close(feed);
    tf_session_destroy(session);
  }
  bool windows = true;
  for (int t = 0; t < 6; t++)
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < 16; i++) {
        const int32_t token = fed[0][t][r * 16 + i], label = fed[0][t][32 + r * 16 + i];
        windows = windows && label == (token + 1) % 128 && (i == 0 || token == (fed[0][t][r * 16 + i - 1] + 1) % 128);
      }
  const bool same = memcmp(fed[0], fed[1], sizeof(fed[0])) == 0;
  CHECK(&counts, windows, "token windows are not consecutive tokens with their labels one ahead");
  CHECK(&counts, same, "token stream: prefetch on and off fed different windows");
  printf("%-4s token stream: 6 micro-batches of consecutive windows, labels one ahead, the same on and off\n",
         windows && same ? "ok" : "FAIL");
  tf_plan_destroy(plan);
}

/* tf_feed_stage_in: the staging moved into a Vulkan session's host memory (lavapipe's, where it
 * exists; the cpu backend has none, so there it changes nothing) feeds the same whole samples as the
 * feed's own staging, with the background reads on; closed before the session, as it must be. The
 * vulkan half runs as its own test (`test_feed staged-vulkan`): lavapipe, unloaded at exit, leaves
 * blocks LeakSanitizer cannot name, so that test runs without its leak check and this one keeps it. */
static bool staged(const char *dir, bool vulkan) {
  const char *backends[2] = {"cpu", "vulkan"};
  int32_t plain[MAX_TAKES][BATCH], moved[MAX_TAKES][BATCH];
  const int takes = 6;
  for (int b = vulkan ? 1 : 0; b < (vulkan ? 2 : 1); b++) {
    tf_graph *graph = NULL;
    tf_plan *plan = NULL;
    tf_status status = tf_zoo_build("mlp", NULL, 0, &graph);
    tf_compile_options options = tf_compile_options_default(b ? TF_TARGET_VULKAN : TF_TARGET_CPU);
    options.bindings = "N=4";
    if (!status)
      status = tf_compile(graph, &options, &plan);
    tf_graph_destroy(graph);
    for (int stage = 0; stage < 2 && !status; stage++) {
      tf_session_options session_options = tf_session_options_default();
      session_options.backend = backends[b];
      tf_session *session = NULL;
      tf_feed *feed = NULL;
      status = tf_session_create(plan, &session_options, &session);
      if (status && b == 1 && tf_status_code(status) != TF_ERR_OUT_OF_MEMORY) {
        printf("SKIP staged feed on vulkan: %s\n", tf_status_message(status));
        tf_status_free(status);
        tf_session_destroy(session);
        tf_plan_destroy(plan);
        return false;
      }
      if (!status)
        status = tf_feed_open(plan, dir, 7, &feed);
      if (!status && stage) {
        status = tf_feed_stage_in(feed, session, 0);
        /* lavapipe gives host memory for both inputs (x and labels); the cpu backend has none */
        CHECK(&counts, status || tf_feed_staged_in(feed) == (b ? 2 : 0), "%s: %d inputs staged in", backends[b],
              tf_feed_staged_in(feed));
      }
      for (int t = 0; t < takes && !status; t++) {
        status = tf_feed_next(feed, session);
        if (!status)
          fed_samples(session, (stage ? moved : plain)[t]);
      }
      if (!status && stage) { /* a second call, or one after next, is refused */
        tf_status again = tf_feed_stage_in(feed, session, 0);
        CHECK(&counts, again && strstr(tf_status_message(again), "before the first micro-batch"),
              "%s: stage_in after next: %s", backends[b], again ? tf_status_message(again) : "accepted");
        tf_status_free(again);
      }
      tf_feed_close(feed);
      tf_session_destroy(session);
      if (stage && !status) {
        bool whole = true;
        for (int t = 0; t < takes; t++)
          for (int r = 0; r < BATCH; r++)
            whole = whole && moved[t][r] >= 0;
        const bool same = whole && same_samples(plain, moved, takes);
        CHECK(&counts, same, "%s: the staged feed's samples differ from the feed's own", backends[b]);
        printf("%-4s staged feed on %s: %d micro-batches, the same whole samples as the feed's own staging\n",
               same ? "ok" : "FAIL", backends[b], takes);
      }
    }
    CHECK(&counts, status == NULL, "staged feed on %s: %s", backends[b], tf_status_message(status));
    tf_status_free(status);
    tf_plan_destroy(plan);
  }
  return true;
}

/* Everything without an argument but the staged feed on vulkan; "staged-vulkan": that alone. */
int main(int argc, char **argv) {
  const bool vulkan_only = argc > 1 && strcmp(argv[1], "staged-vulkan") == 0;
  if (argc > 1 && !vulkan_only) {
    fprintf(stderr, "usage: test_feed [staged-vulkan] (got '%s')\n", argv[1]);
    return 2;
  }
  snprintf(root, sizeof(root), "/tmp/tf_feed_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("TIGHTFIT_CACHE_DIR", "off", 1);
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4", 0);
  bool skipped = false;
  if (plan) {
    const char *dir = digits("digits", SAMPLES);
    char kept[512];
    snprintf(kept, sizeof(kept), "%s", dir);
    if (!vulkan_only) {
      epochs(plan, kept);
      seeks(plan, kept);
      ranks(kept);
      in_order(plan, kept);
    }
    skipped = !staged(kept, vulkan_only) && vulkan_only; /* no Vulkan device: nothing ran */
    if (!vulkan_only) {
      truncated(plan, true);
      truncated(plan, false);
    }
  }
  if (!vulkan_only)
    token_stream();
  tf_plan_destroy(plan);
  char command[300];
  snprintf(command, sizeof(command), "rm -rf '%s'", root);
  if (system(command) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  return skipped ? 77 : tf_test_finish(vulkan_only ? "feed (staged on vulkan)" : "feed", &counts);
}
