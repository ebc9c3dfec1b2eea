/* tools/dist.h: what the ranks of a job must agree on at start (the plan, the data, the arguments),
 * described as lines and compared across the ranks. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/xxh64.h"
#include "tools/dist.h"

#if TIGHTFIT_MPI
#include <mpi.h>
#endif

/* A growing text of lines (tf_dist_identity()); `failed` once an append found no memory. */
typedef struct text {
  char *bytes;
  size_t length, capacity;
  bool failed;
} text;

static void append(text *t, const char *key, const char *shown_after_key) {
  const size_t more = 2 * strlen(key) + strlen(shown_after_key) + 3;
  if (!t->failed && t->length + more > t->capacity) {
    char *grown = realloc(t->bytes, t->capacity + more + 4096);
    t->failed = !grown;
    t->bytes = grown ? grown : t->bytes;
    t->capacity += grown ? more + 4096 : 0;
  }
  if (!t->failed)
    t->length +=
        (size_t)snprintf(t->bytes + t->length, t->capacity - t->length, "%s\t%s%s\n", key, key, shown_after_key);
}

/* "plan XXH64 H\tplan XXH64 H (PATH)": the plan file's bytes hashed (the same plan under two names
 * is the same plan). */
static tf_status plan_line(text *t, const char *path) {
  void *bytes;
  size_t size;
  TF_RETURN_IF_ERROR(tf_file_read(path, &bytes, &size));
  char key[64], after[4200];
  snprintf(key, sizeof(key), "plan XXH64 %016" PRIx64, tf_xxh64(bytes, size, 0));
  free(bytes);
  snprintf(after, sizeof(after), " (%s)", path);
  append(t, key, after);
  return NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "--data DIR: NAME.npy BYTES, ...": the folder's .npy files by name and size (another data set
 * under the same path, on another machine, differs there); an unreadable folder adds nothing (the
 * feed says why). */
static void data_line(text *t, const char *dir) {
  char *names[64];
  int n = 0;
  DIR *folder = opendir(dir);
  for (struct dirent *e = folder ? readdir(folder) : NULL; e && n < 64; e = readdir(folder)) {
    const size_t length = strlen(e->d_name);
    if (length > 4 && strcmp(e->d_name + length - 4, ".npy") == 0 && (names[n] = malloc(length + 1)))
      memcpy(names[n++], e->d_name, length + 1);
  }
  if (folder)
    closedir(folder);
  qsort(names, (size_t)n, sizeof(names[0]), by_name);
  char key[4096 * 2];
  int used = snprintf(key, sizeof(key), "--data %s:", dir);
  for (int i = 0; i < n; i++) {
    char path[4096 + 256];
    struct stat s;
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    const long long bytes = stat(path, &s) == 0 ? (long long)s.st_size : -1;
    if (used > 0 && (size_t)used < sizeof(key))
      used += snprintf(key + used, sizeof(key) - (size_t)used, "%s %s %lld bytes", i ? "," : "", names[i], bytes);
    free(names[i]);
  }
  append(t, key, "");
}

/* The lines of `job` that every rank must share (tf_dist_agree's form); the caller frees *out. */
tf_status tf_dist_identity(const tf_dist_job *job, char **out) {
  text t = {NULL, 0, 0, false};
  tf_status status = plan_line(&t, job->plan_path);
  if (!status)
    data_line(&t, job->data);
  char line[4200];
  const char *given[][2] = {{"--checkpoint", job->checkpoint},
                            {"--init-from", job->init_from},
                            {"--init-map", job->init_map},
                            {"--weights-dir", job->weights_dir}};
  for (size_t i = 0; i < sizeof(given) / sizeof(given[0]) && !status; i++) {
    snprintf(line, sizeof(line), "%s %s", given[i][0], given[i][1] ? given[i][1] : "(none)");
    append(&t, line, "");
  }
  snprintf(line, sizeof(line), "--steps %" PRId64, job->steps);
  append(&t, line, "");
  snprintf(line, sizeof(line), "--seed %" PRIu64, job->seed);
  append(&t, line, "");
  append(&t, job->resume ? "--resume" : "no --resume", "");
  snprintf(line, sizeof(line), "--loss-scale-window %" PRId64, job->loss_scale_window);
  append(&t, line, "");
  if (!status && t.failed)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to describe the job to the other ranks");
  if (!status && !t.bytes)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "no lines to describe the job to the other ranks");
  if (status)
    free(t.bytes);
  *out = status ? NULL : t.bytes;
  return status;
}

#if TIGHTFIT_MPI
/* The length of the line at `at` (to its '\n' or end), and of its key (to a '\t' within it). */
static size_t line_length(const char *at) { return strcspn(at, "\n"); }
static size_t key_length(const char *line) {
  const size_t key = strcspn(line, "\t\n");
  return line[key] == '\t' ? key : line_length(line);
}

/* The line's shown part: after its '\t', or the whole line. */
static const char *shown(const char *line, int *length) {
  const size_t key = key_length(line), whole = line_length(line);
  *length = (int)(key < whole ? whole - key - 1 : whole);
  return key < whole ? line + key + 1 : line;
}

/* The first line of `mine` whose key differs from `base`'s line at the same place (NULL: none);
 * *theirs is base's line there (an empty one past its end). */
static const char *first_difference(const char *mine, const char *base, const char **theirs) {
  while (*mine || *base) {
    const size_t key = key_length(mine);
    if (!*mine || !*base || key != key_length(base) || memcmp(mine, base, key) != 0) {
      *theirs = base;
      return mine;
    }
    mine += line_length(mine) + (mine[line_length(mine)] ? 1 : 0);
    base += line_length(base) + (base[line_length(base)] ? 1 : 0);
  }
  return NULL;
}

/* Every rank's text against rank 0's: the error naming the first rank and line that differ. */
static tf_status compare_ranks(const char *all, const int *offsets, int size, const char *rule) {
  for (int r = 1; r < size; r++) {
    const char *theirs;
    const char *mine = first_difference(all + offsets[r], all, &theirs);
    if (!mine)
      continue;
    int mine_length, theirs_length;
    const char *mine_shown = shown(mine, &mine_length), *theirs_shown = shown(theirs, &theirs_length);
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "rank %d of %d has %.*s, rank 0 %.*s: %s", r, size, mine_length,
                         mine_shown, theirs_length, theirs_shown, rule);
  }
  return NULL;
}
#endif

tf_status tf_dist_agree(const tf_dist *d, const char *lines, const char *rule) {
  if (!d->active)
    return NULL;
#if TIGHTFIT_MPI
  const int length = (int)strlen(lines) + 1;
  int *lengths = malloc(sizeof(int) * 2 * (size_t)d->size);
  if (!lengths)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to compare %d ranks", d->size);
  int *offsets = lengths + d->size;
  MPI_Allgather(&length, 1, MPI_INT, lengths, 1, MPI_INT, MPI_COMM_WORLD);
  int64_t total = 0;
  for (int r = 0; r < d->size; r++) {
    offsets[r] = (int)total;
    total += lengths[r];
  }
  char *all = total < INT32_MAX ? malloc((size_t)total) : NULL;
  tf_status status = NULL;
  if (!all)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %lld bytes of %d ranks' arguments", (long long)total,
                           d->size);
  else if (MPI_Allgatherv(lines, length, MPI_CHAR, all, lengths, offsets, MPI_CHAR, MPI_COMM_WORLD) != MPI_SUCCESS)
    status = tf_status_new(TF_ERR_BACKEND, "comparing %d ranks: MPI_Allgatherv failed", d->size);
  else
    status = compare_ranks(all, offsets, d->size, rule);
  free(all);
  free(lengths);
  return status;
#else
  (void)lines;
  (void)rule;
  return NULL;
#endif
}
