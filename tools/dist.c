/* tools/dist.h: the gradient sums of a data-parallel job over MPI, and how a job starts and ends. */
#define _POSIX_C_SOURCE 200809L
#include "tools/dist.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/file.h"
#include "common/xxh64.h"

#if TIGHTFIT_MPI
#include <mpi.h>

/* The processes the launcher started: its environment's world size (Open MPI, MPICH's PMI), 0 when
 * a launcher that says no size (PMIx alone) started us, -1 without a launcher. */
static int launched_size(void) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size)
    size = getenv("PMI_SIZE");
  if (size)
    return atoi(size) > 0 ? atoi(size) : 0;
  return getenv("PMIX_RANK") ? 0 : -1;
}
#endif

tf_status tf_dist_join(tf_dist *d) {
  memset(d, 0, sizeof(*d));
  d->size = 1;
#if TIGHTFIT_MPI
  const int launched = launched_size();
  if (launched == -1 || launched == 1)
    return NULL;
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised && MPI_Init(NULL, NULL) != MPI_SUCCESS)
    return tf_status_new(TF_ERR_BACKEND, "MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d->size);
  d->active = true;
#endif
  return NULL;
}

/* The gradient buffers to sum (into d->gradients) and the largest one's bytes; a dtype other than
 * f32 is refused (the sum runs in f32). */
static tf_status gradients_of(const tf_plan *plan, tf_dist *d) {
  d->gradients = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!d->gradients)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to list %d buffers", plan->n_buffers);
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->role != TF_ROLE_GRADIENT || b->bytes == 0)
      continue;
    if (b->dtype != TF_F32)
      return tf_status_new(TF_ERR_UNSUPPORTED, "--ranks: gradient '%s' is %s; the ranks sum f32 gradients", b->name,
                           tf_dtype_name(b->dtype));
    d->gradients[d->n_gradients++] = i;
    d->staging_bytes = b->bytes > d->staging_bytes ? b->bytes : d->staging_bytes;
  }
  return NULL;
}

/* A plan of R > 1 in one process: refused with how to run it. */
static tf_status refuse_alone(const tf_plan *plan) {
#if TIGHTFIT_MPI
  if (launched_size() == -1)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "the plan is one of %d ranks (compiled with --ranks %d): run it as 'mpirun -np %d tightfit "
                         "train ...'",
                         plan->ranks, plan->ranks, plan->ranks);
  return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                       "the plan is one of %d ranks (--ranks %d), but mpirun started 1 process", plan->ranks,
                       plan->ranks);
#else
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "the plan is one of %d ranks (--ranks %d), but this build has no MPI (install "
                       "libopenmpi-dev, scripts/setup does, and rebuild)",
                       plan->ranks, plan->ranks);
#endif
}

/* A growing text of lines (identity()); `failed` once an append found no memory. */
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
static tf_status identity(const tf_dist_job *job, char **out) {
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

tf_status tf_dist_start(const tf_plan *plan, const tf_dist_job *job, tf_dist *d) {
  d->plan = plan;
  if (!d->active)
    return plan->ranks > 1 ? refuse_alone(plan) : NULL;
  /* The same plan and arguments everywhere first: every rank must reach one verdict. A rank that
   * cannot even describe itself says so alone (tf_dist_abort ends the others). */
  char *lines;
  d->failed_alone = true;
  TF_RETURN_IF_ERROR(identity(job, &lines));
  d->failed_alone = false;
  tf_status status =
      tf_dist_agree(d, lines,
                    "every rank of a job runs the same plan with the same --data (.npy files of the same names and "
                    "sizes), --steps, --seed, --resume, --checkpoint, --init-from, --init-map, --weights-dir and "
                    "--loss-scale-window");
  free(lines);
  d->failed_alone = status && tf_status_code(status) != TF_ERR_INVALID_ARGUMENT; /* no memory, MPI failed */
  TF_RETURN_IF_ERROR(status);
  if (d->size != plan->ranks && plan->ranks <= 1)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "the plan is one process's (compiled without --ranks), but mpirun started %d processes: "
                         "compile it with --ranks %d",
                         d->size, d->size);
  if (d->size != plan->ranks)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "the plan is one of %d ranks (--ranks %d), but mpirun started %d processes", plan->ranks,
                         plan->ranks, d->size);
  if (tf_plan_updates_in_backward(plan))
    return tf_status_new(TF_ERR_INVALID_INPUT, "a plan of %d ranks cannot update in the backward pass", plan->ranks);
  status = gradients_of(plan, d);
  d->failed_alone = tf_status_code(status) == TF_ERR_OUT_OF_MEMORY;
  TF_RETURN_IF_ERROR(status);
  d->staging = malloc((size_t)(d->staging_bytes > 0 ? d->staging_bytes : 4));
  d->failed_alone = !d->staging;
  if (!d->staging)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to stage %lld bytes of gradients",
                         (long long)d->staging_bytes);
  return NULL;
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

tf_status tf_dist_sum_gradients(tf_dist *d, tf_session *session) {
  if (!d->active || d->size == 1) /* a launcher of one process that says no size (PMIx) */
    return NULL;
#if TIGHTFIT_MPI
  const tf_plan *plan = tf_session_plan(session);
  for (int32_t g = 0; g < d->n_gradients; g++) {
    const int32_t i = d->gradients[g];
    const tf_plan_buffer *b = &plan->buffers[i];
    TF_RETURN_IF_ERROR(tf_session_read_range(session, i, 0, d->staging, b->bytes));
    if (MPI_Allreduce(MPI_IN_PLACE, d->staging, (int)(b->bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "summing gradient '%s' across %d ranks: MPI_Allreduce failed", b->name,
                           d->size);
    TF_RETURN_IF_ERROR(tf_session_write_range(session, i, 0, d->staging, b->bytes));
  }
#else
  (void)session;
#endif
  return NULL;
}

double tf_dist_step_end(const tf_dist *d, double loss, bool stop, bool *stop_any) {
  *stop_any = stop;
#if TIGHTFIT_MPI
  if (d->active) {
    double sums[2] = {loss, stop ? 1 : 0};
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    *stop_any = sums[1] > 0;
    return sums[0] / d->size;
  }
#else
  (void)d;
#endif
  return loss;
}

void tf_dist_abort(const tf_dist *d, int code, FILE *err) {
  if (!d->active)
    return;
  fprintf(err, "tightfit train: rank %d of %d failed (exit %d): ending the job (MPI_Abort)\n", d->rank, d->size, code);
  fflush(err);
#if TIGHTFIT_MPI
  MPI_Abort(MPI_COMM_WORLD, code);
#endif
}

void tf_dist_finish(tf_dist *d) {
#if TIGHTFIT_MPI
  if (d->active)
    MPI_Finalize();
#endif
  free(d->staging);
  free(d->gradients);
  memset(d, 0, sizeof(*d));
}
