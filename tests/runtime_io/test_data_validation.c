/* Nothing trains on garbage (issue 18): the data feed checks every file once at open
 * (runtime/data_check.c) and the session finds non-finite weights and gradients
 * (tf_session_find_nonfinite). Each case names the exact message, position and value it expects:
 *   - per-sample files: row counts that disagree, NaN and -inf features at (sample, element), a
 *     label past the classes at its sample (of the logits, or of a fused loss head's weight), the
 *     ignored label accepted, f64 data named as such;
 *   - token streams: a token past the vocabulary and a negative one at their exact index, exactly
 *     T + 1 tokens give one window and T none (with the numbers);
 *   - the cache of files that passed: written, used, invalidated by a change, off when asked;
 *   - tf_session_find_nonfinite: nothing in a fresh session, a planted NaN parameter and an
 *     infinite gradient found at their element by role, read_range bounds refused. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/linear_loss.h"
#include "io_test.h"
#include "runtime/feed.h"
#include "runtime/npy.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;
static char root[256];

static tf_plan *compile_zoo(const char *preset, const char *const *overrides, int32_t n, const char *bindings) {
  return io_compile_zoo(&counts, preset, overrides, n, bindings, 0);
}

/* A fresh folder under the test's root. */
static const char *folder(const char *name) {
  static char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, name);
  mkdir(path, 0755);
  return path;
}

static void write_npy(const char *dir, const char *file, tf_dtype dtype, int32_t rank, const int64_t *shape,
                      const void *data) {
  io_write_npy(&counts, dir, file, dtype, rank, shape, data);
}

/* mlp data: `rows` samples of 64 features (x) and `label_rows` labels of 10 classes. */
static void write_digits(const char *dir, int64_t rows, int64_t label_rows, float *x, int32_t *labels) {
  for (int64_t i = 0; i < rows * 64; i++)
    x[i] = (float)(i % 17) / 17.0f;
  for (int64_t i = 0; i < label_rows; i++)
    labels[i] = (int32_t)(i % 10);
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){rows, 64}, x);
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){label_rows}, labels);
}

/* Opens a feed on `dir`; expects success when `phrase` is NULL, else an error containing every
 * '|'-separated part of `phrase`. Returns the samples of a feed that opened (-1 otherwise). */
static int64_t expect_open(const char *what, const tf_plan *plan, const char *dir, const char *phrase) {
  tf_feed *feed = NULL;
  tf_status status = tf_feed_open(plan, dir, 0, &feed);
  const char *message = tf_status_message(status);
  int64_t samples = feed ? tf_feed_samples(feed) : -1;
  if (!phrase) {
    printf("%-4s %-44s opens: %" PRId64 " samples\n", status ? "FAIL" : "ok", what, samples);
    CHECK(&counts, status == NULL, "%s: %s", what, message);
  } else {
    bool all = status != NULL;
    char parts[512];
    snprintf(parts, sizeof(parts), "%s", phrase);
    for (char *part = strtok(parts, "|"); part && all; part = strtok(NULL, "|"))
      all = strstr(message, part) != NULL;
    printf("%-4s %-44s %s\n", all ? "ok" : "FAIL", what, status ? message : "(opened)");
    CHECK(&counts, all, "%s: expected an error with '%s', got '%s'", what, phrase, status ? message : "success");
  }
  tf_status_free(status);
  tf_feed_close(feed);
  return samples;
}

static void per_sample_files(void) {
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4");
  if (!plan)
    return;
  float *x = calloc(200 * 64, sizeof(float));
  int32_t *labels = calloc(200, sizeof(int32_t));
  const char *dir = folder("good");
  write_digits(dir, 200, 200, x, labels);
  CHECK(&counts, expect_open("200 clean samples", plan, dir, NULL) == 200, "200 samples");

  dir = folder("rows");
  write_digits(dir, 200, 10, x, labels);
  expect_open("10 labels beside 200 samples", plan, dir,
              "rows/labels.npy holds 10 samples but |rows/x.npy holds 200|one row per sample");

  dir = folder("nan");
  write_digits(dir, 200, 200, x, labels);
  x[77 * 64 + 5] = NAN;
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){200, 64}, x);
  expect_open("NaN at sample 77, element 5", plan, dir, "nan/x.npy: sample 77, element 5 is nan|'x' takes finite");

  dir = folder("inf");
  write_digits(dir, 200, 200, x, labels);
  x[3 * 64] = -INFINITY;
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){200, 64}, x);
  expect_open("-inf at sample 3, element 0", plan, dir, "inf/x.npy: sample 3, element 0 is -inf");

  dir = folder("label");
  write_digits(dir, 200, 200, x, labels);
  labels[50] = 10;
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){200}, labels);
  expect_open("label 10 of 10 classes at sample 50", plan, dir,
              "label/labels.npy: sample 50 is 10, outside [0, 10) for 'labels' (the classes of the logits");

  dir = folder("f64");
  double wide[4 * 64] = {0};
  write_npy(dir, "x.npy", TF_FILE_F64, 2, (const int64_t[]){4, 64}, wide);
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){4}, labels);
  expect_open("float64 features", plan, dir, "holds float64 ('<f8'), but 'x' is f32 (save it as numpy.float32)");
  free(x);
  free(labels);
  tf_plan_destroy(plan);
}

/* The mlp with its loss head fused (linear_cross_entropy: the labels read by the fused step, its
 * classes the weight's): a label past them is refused as the unfused plan's is (the kernels would
 * skip it as ignored, without a word), and the ignored label is accepted. */
static void fused_head_labels(void) {
  tf_graph *graph = NULL;
  tf_plan *plan = NULL;
  tf_status status = tf_zoo_build("mlp", NULL, 0, &graph);
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = "N=4";
  options.fuse_loss = TF_FUSE_LOSS_ON;
  if (!status)
    status = tf_compile(graph, &options, &plan);
  tf_graph_destroy(graph);
  CHECK(&counts, status == NULL, "compile the mlp with its head fused: %s", tf_status_message(status));
  tf_status_free(status);
  if (!plan)
    return;
  int64_t ignore = 0;
  bool fused = false;
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (tf_linear_loss_op(plan->steps[s].op)) {
      fused = true;
      ignore = plan->steps[s].attrs.u.cross_entropy.ignore_index;
    }
  CHECK(&counts, fused, "the mlp's plan with --fuse-loss on has a fused loss head");
  float *x = calloc(200 * 64, sizeof(float));
  int32_t *labels = calloc(200, sizeof(int32_t));
  const char *dir = folder("fused_label");
  write_digits(dir, 200, 200, x, labels);
  labels[50] = 10;
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){200}, labels);
  expect_open("fused head: label 10 of 10 classes at sample 50", plan, dir,
              "fused_label/labels.npy: sample 50 is 10, outside [0, 10) for 'labels' (the classes of the fused loss "
              "head's weight 'head.weight')");
  dir = folder("fused_ignored");
  write_digits(dir, 200, 200, x, labels);
  labels[50] = (int32_t)ignore;
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){200}, labels);
  CHECK(&counts, expect_open("fused head: the ignored label at sample 50", plan, dir, NULL) == 200, "200 samples");
  free(x);
  free(labels);
  tf_plan_destroy(plan);
}

static void token_streams(void) {
  tf_plan *plan = compile_zoo("gpt", (const char *const[]){"layers=1", "d_model=16", "heads=2"}, 3, "N=2,T=16");
  if (!plan)
    return;
  int32_t tokens[400];
  for (int i = 0; i < 400; i++)
    tokens[i] = (int32_t)(i % 97);
  const char *dir = folder("tokens");
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){400}, tokens);
  CHECK(&counts, expect_open("400 tokens, windows of 16", plan, dir, NULL) == 400 - 16,
        "400 tokens: 384 windows (input and label)");
  dir = folder("t17");
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){17}, tokens);
  CHECK(&counts, expect_open("exactly T + 1 = 17 tokens", plan, dir, NULL) == 1, "T + 1 tokens: one window");
  dir = folder("t16");
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){16}, tokens);
  expect_open("T = 16 tokens", plan, dir,
              "has no complete sample|holds 16 tokens, and a window of 16 tokens with its labels one token ahead "
              "needs at least 17");
  dir = folder("tok50");
  tokens[50] = 999;
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){400}, tokens);
  expect_open("token 999 at index 50", plan, dir,
              "tok50/tokens.npy: token 50 is 999, outside [0, 128) for 'tokens' (the rows of the embedding table");
  dir = folder("negative");
  tokens[50] = 5;
  tokens[7] = -1;
  write_npy(dir, "tokens.npy", TF_I32, 1, (const int64_t[]){400}, tokens);
  expect_open("token -1 at index 7", plan, dir, "negative/tokens.npy: token 7 is -1, outside [0, 128)");
  tf_plan_destroy(plan);
}

static int count_cache_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
    n += strncmp(e->d_name, "data-", 5) == 0;
  if (d)
    closedir(d);
  return n;
}

/* The sum of the cache entries' inode numbers: an entry rewritten (temporary file, rename) changes it. */
static unsigned long long cache_inodes(const char *dir) {
  DIR *d = opendir(dir);
  unsigned long long sum = 0;
  for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
    sum += strncmp(e->d_name, "data-", 5) == 0 ? (unsigned long long)e->d_ino : 0;
  if (d)
    closedir(d);
  return sum;
}

static void cache(void) {
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4");
  if (!plan)
    return;
  char cache_dir[300];
  snprintf(cache_dir, sizeof(cache_dir), "%s/cache/nested", root);
  setenv("TIGHTFIT_CACHE_DIR", cache_dir, 1);
  float *x = calloc(50 * 64, sizeof(float));
  int32_t labels[50];
  const char *dir = folder("cached");
  write_digits(dir, 50, 50, x, labels);
  expect_open("first open (scans, then caches)", plan, dir, NULL);
  int files = count_cache_files(cache_dir);
  printf("%-4s cache: %d entries after the first open (x and labels)\n", files == 2 ? "ok" : "FAIL", files);
  CHECK(&counts, files == 2, "%d cache entries, expected 2", files);
  const unsigned long long inodes = cache_inodes(cache_dir);
  expect_open("second open (from the cache)", plan, dir, NULL);
  CHECK(&counts, count_cache_files(cache_dir) == 2, "the second open added entries");
  /* Proof that the cache is read: a hit leaves the entries as they were; a scan rewrites them. */
  printf("%-4s cache: the second open left the entries as they were\n",
         cache_inodes(cache_dir) == inodes ? "ok" : "FAIL");
  CHECK(&counts, cache_inodes(cache_dir) == inodes, "the second open rewrote the cache entries");
  /* The same size and modification time (touch -r) with a NaN inside: the change time, which no
   * user can set, differs, so the file is scanned again (issue 49; the cache trusted it before). */
  char x_path[600];
  snprintf(x_path, sizeof(x_path), "%s/x.npy", dir);
  struct stat before;
  stat(x_path, &before);
  x[2] = NAN;
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){50, 64}, x);
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  utimensat(AT_FDCWD, x_path, times, 0);
  expect_open("same size and mtime, NaN inside: scanned again", plan, dir, "sample 0, element 2 is nan");
  x[2] = 0;
  /* A changed file (new size and time) is scanned again, so its NaN is found. */
  sleep(1);
  x[1] = NAN;
  write_npy(dir, "x.npy", TF_F32, 2, (const int64_t[]){49, 64}, x);
  write_npy(dir, "labels.npy", TF_I32, 1, (const int64_t[]){49}, labels);
  expect_open("changed after caching: its NaN found", plan, dir, "sample 0, element 1 is nan");
  setenv("TIGHTFIT_CACHE_DIR", "off", 1);
  dir = folder("uncached");
  write_digits(dir, 50, 50, x, labels);
  expect_open("TIGHTFIT_CACHE_DIR=off", plan, dir, NULL);
  CHECK(&counts, count_cache_files(cache_dir) == 2, "the cache was written while off");
  free(x);
  tf_plan_destroy(plan);
}

static void find_nonfinite(void) {
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4");
  tf_session *session = NULL;
  tf_session_options options = tf_session_options_default();
  tf_status status = plan ? tf_session_create(plan, &options, &session) : NULL;
  CHECK(&counts, status == NULL && session, "session: %s", tf_status_message(status));
  tf_status_free(status);
  if (!session) {
    tf_plan_destroy(plan);
    return;
  }
  const uint32_t weights = (1u << TF_ROLE_PARAMETER) | (1u << TF_ROLE_OPTIMIZER_STATE);
  const uint32_t gradients = 1u << TF_ROLE_GRADIENT;
  tf_nonfinite found;
  CHECK_OK(&counts, tf_session_find_nonfinite(session, weights | gradients, &found));
  CHECK(&counts, found.buffer == -1, "a fresh session has a non-finite value in buffer %d", found.buffer);
  /* The last parameter and the first gradient, planted with a NaN and an infinity. */
  int32_t parameter = -1, gradient = -1;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    parameter = plan->buffers[i].role == TF_ROLE_PARAMETER ? i : parameter;
    gradient = gradient < 0 && plan->buffers[i].role == TF_ROLE_GRADIENT ? i : gradient;
  }
  const tf_plan_buffer *p = &plan->buffers[parameter], *g = &plan->buffers[gradient];
  float *values = calloc((size_t)(p->bytes > g->bytes ? p->bytes : g->bytes), 1);
  values[p->bytes / 4 - 1] = NAN;
  CHECK_OK(&counts, tf_session_write(session, p->name, values, p->bytes));
  values[p->bytes / 4 - 1] = 0;
  values[g->bytes / 4 > 7 ? 7 : 0] = INFINITY;
  CHECK_OK(&counts, tf_session_write(session, g->name, values, g->bytes));
  CHECK_OK(&counts, tf_session_find_nonfinite(session, weights, &found));
  bool ok = found.buffer == parameter && found.index == p->bytes / 4 - 1 && isnan(found.value);
  printf("%-4s weights: found buffer '%s' element %" PRId64 " = %g\n", ok ? "ok" : "FAIL",
         found.buffer >= 0 ? plan->buffers[found.buffer].name : "-", found.index, found.value);
  CHECK(&counts, ok, "the planted NaN in '%s' element %" PRId64 " not found", p->name, p->bytes / 4 - 1);
  CHECK_OK(&counts, tf_session_find_nonfinite(session, gradients, &found));
  ok = found.buffer == gradient && found.index == (g->bytes / 4 > 7 ? 7 : 0) && found.value == INFINITY;
  printf("%-4s gradients: found buffer '%s' element %" PRId64 " = %g\n", ok ? "ok" : "FAIL",
         found.buffer >= 0 ? plan->buffers[found.buffer].name : "-", found.index, found.value);
  CHECK(&counts, ok, "the planted inf in '%s' not found", g->name);
  float one;
  status = tf_session_read_range(session, parameter, p->bytes - 2, &one, 4);
  CHECK(&counts, status && strstr(tf_status_message(status), "are not inside buffer"), "read_range past the end: %s",
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  free(values);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
}

/* Writes zeros (valid ids and labels) into every input and label, or into those but `skip`. */
static void write_inputs(tf_session *session, const tf_plan *plan, const char *skip) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i) ||
        (skip && strcmp(b->name, skip) == 0))
      continue;
    void *zeros = calloc(1, (size_t)b->bytes);
    tf_status status = zeros ? tf_session_write(session, b->name, zeros, b->bytes) : NULL;
    CHECK(&counts, zeros && !status, "writing '%s': %s", b->name, zeros ? tf_status_message(status) : "no memory");
    tf_status_free(status);
    free(zeros);
  }
}

/* A micro-step or forward pass whose inputs were not written since the last micro-step read their half
 * of the io region is refused, naming the input (it would run on zeros, or on the batch of two
 * micro-steps before); a forward pass does not take the half, so it may repeat. */
static void unwritten_inputs(void) {
  tf_plan *plan = compile_zoo("mlp", NULL, 0, "N=4");
  tf_session *session = NULL;
  if (plan)
    CHECK_OK(&counts, tf_session_create(plan, NULL, &session));
  if (!session) {
    tf_plan_destroy(plan);
    return;
  }
  const char *label = NULL;
  for (int32_t i = 0; i < plan->n_buffers && !label; i++)
    label = plan->buffers[i].role == TF_ROLE_LABEL ? plan->buffers[i].name : NULL;
  double loss;
  tf_status status = tf_session_micro_step(session, &loss);
  CHECK(&counts, status && strstr(tf_status_message(status), "micro-step 1: input"),
        "a first micro-step without inputs: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  status = tf_session_forward(session, &loss);
  CHECK(&counts, status && strstr(tf_status_message(status), "forward pass: input"),
        "a forward pass without inputs: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  write_inputs(session, plan, NULL);
  CHECK_OK(&counts, tf_session_forward(session, &loss)); /* reads the half without taking it */
  CHECK_OK(&counts, tf_session_forward(session, &loss));
  CHECK_OK(&counts, tf_session_micro_step(session, &loss));
  status = tf_session_micro_step(session, &loss); /* the other half, never written */
  CHECK(&counts, status && strstr(tf_status_message(status), "was not written"),
        "a second micro-step without writes: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  status = tf_session_forward(session, &loss);
  CHECK(&counts, status && strstr(tf_status_message(status), "forward pass: input"),
        "a forward pass on a half never written: %s", status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  write_inputs(session, plan, NULL);
  CHECK_OK(&counts, tf_session_micro_step(session, &loss));
  write_inputs(session, plan, label); /* the next half's inputs, not its labels */
  char wanted[160];
  snprintf(wanted, sizeof(wanted), "micro-step 3: label '%s' was not written", label ? label : "?");
  status = tf_session_micro_step(session, &loss);
  CHECK(&counts, label && status && strstr(tf_status_message(status), wanted), "labels missing: %s (wanted '%s')",
        status ? tf_status_message(status) : "accepted", wanted);
  tf_status_free(status);
  write_inputs(session, plan, NULL);
  CHECK_OK(&counts, tf_session_micro_step(session, &loss));
  CHECK_OK(&counts, tf_session_optimizer_step(session));
  printf("ok   micro-steps and forward passes on unwritten inputs or labels refused, naming them\n");
  tf_session_destroy(session);
  tf_plan_destroy(plan);
}

int main(void) {
  unwritten_inputs();
  snprintf(root, sizeof(root), "/tmp/tf_data_validation_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("TIGHTFIT_CACHE_DIR", "off", 1);
  per_sample_files();
  fused_head_labels();
  token_streams();
  cache();
  find_nonfinite();
  char command[300];
  snprintf(command, sizeof(command), "rm -rf '%s'", root);
  if (system(command) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  return tf_test_finish("data validation", &counts);
}
