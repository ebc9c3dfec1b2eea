#define _POSIX_C_SOURCE 200809L
#include "runtime/feed.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/rng.h"
#include "common/worker.h"
#include "core/half_bits.h"
#include "runtime/data_check.h"
#include "runtime/npy.h"
#include "runtime/sample_layout.h"

typedef struct feed_source {
  const tf_plan_buffer *buffer;
  tf_npy *file;
  int64_t per_sample; /* elements per sample in the buffer */
  int64_t limit;      /* ids/labels must be < limit (and >= 0); 0: no check */
  int64_t ignore;     /* a label value exempt from the check (cross-entropy ignore_index) */
  bool has_ignore;
  bool to_bf16;         /* a bf16 buffer fed from float32 data, rounded to nearest even */
  int64_t shift;        /* token stream: 0 for tokens, 1 for labels */
  char limit_what[192]; /* what `limit` counts, for messages */
  void *staging;
  bool staging_from_session; /* from tf_session_alloc_host (tf_feed_stage_in), else malloc */
} feed_source;

struct tf_feed {
  const tf_plan *plan;
  feed_source *sources;
  int32_t n_sources;
  bool stream; /* token-stream layout */
  int64_t samples, batch, window;
  uint64_t seed;
  int64_t position; /* micro-batches produced */
  int64_t *order;   /* the current epoch's permutation (per-sample layout) */
  int64_t order_epoch;
  int64_t *rows; /* the next micro-batch's sample rows (or window starts) */
  /* Prepares the micro-batch after the one taken while the step runs (common/worker.h); NULL:
   * each is read when taken. While it is busy, it alone touches rows, order and the staging. */
  tf_worker *worker;
  int32_t ranks;          /* a data-parallel job's ranks: each takes every ranks-th block (set_ranks) */
  int64_t prefetched;     /* micro-batches next took ready from the worker */
  tf_feed_guard guard;    /* runs the reads of the mappings (set_guard); NULL: called directly */
  double upload_seconds;  /* next's time in tf_session_write: handing the batches to the device */
  tf_session *host_owner; /* the session whose host memory holds staging (tf_feed_stage_in), or NULL */
};

static int64_t sample_count(const tf_npy *file) { return tf_npy_rank(file) ? tf_npy_shape(file)[0] : 0; }

/* The range the source's ids or labels must lie in (tf_data_rule_limits). */
static void find_limits(const tf_plan *plan, int32_t id, feed_source *source) {
  tf_data_rule rule;
  tf_data_rule_limits(plan, id, &rule, source->limit_what, sizeof(source->limit_what));
  source->limit = rule.limit;
  source->has_ignore = rule.has_ignore;
  source->ignore = rule.ignore;
}

/* NumPy's name of a graph dtype, for the advice in messages (bf16 has none). */
static const char *numpy_name(tf_dtype dtype) {
  switch (dtype) {
  case TF_F32: return "float32";
  case TF_F16: return "float16";
  case TF_I32: return "int32";
  case TF_I64: return "int64";
  case TF_U8: return "uint8";
  default: return "float32 (NumPy has no bfloat16)";
  }
}

/* An unbatched buffer (tf_plan_buffer.unbatched) takes its file whole: exactly its element count,
 * whatever the file's rank ([60] or [3,4,5] feeds [3,4,5]); the same tensor every micro-batch. */
static tf_status check_whole(const char *path, const tf_plan_buffer *b, const tf_npy *file) {
  const int64_t elements = b->bytes / tf_dtype_size(b->dtype);
  if (tf_npy_count(file) == elements)
    return NULL;
  char shape[256];
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: holds %" PRId64 " elements, but '%s' %s takes %" PRId64
                       " as one whole tensor (its graph has no batch axis N there, so the file is not cut "
                       "into samples)",
                       path, tf_npy_count(file), b->name, tf_format_shape(b->shape, b->rank, shape, sizeof(shape)),
                       elements);
}

static tf_status open_source(tf_feed *feed, const char *dir, const tf_plan_buffer *b, int32_t id, feed_source *source) {
  char path[4096];
  source->buffer = b;
  source->per_sample = 1;
  for (int32_t d = b->unbatched ? 0 : 1; d < b->rank; d++)
    source->per_sample *= b->shape[d];
  find_limits(feed->plan, id, source);
  snprintf(path, sizeof(path), "%s/%s.npy", dir, b->name);
  tf_status status = tf_npy_open(path, &source->file);
  if (status && feed->stream && b->role == TF_ROLE_LABEL) {
    tf_status_free(status);
    snprintf(path, sizeof(path), "%s/tokens.npy", dir);
    source->shift = 1;
    status = tf_npy_open(path, &source->file);
  }
  if (status)
    return tf_status_prefix(status, "data for %s '%s'", tf_role_name(b->role), b->name);
  tf_dtype dtype = tf_npy_dtype(source->file);
  source->to_bf16 = b->dtype == TF_BF16 && dtype == TF_F32; /* NumPy has no bfloat16 */
  if (dtype != b->dtype && !source->to_bf16)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: holds %s, but '%s' is %s (save it as numpy.%s)", path,
                         tf_npy_dtype_description(source->file), b->name, tf_dtype_name(b->dtype),
                         numpy_name(b->dtype));
  source->staging = malloc((size_t)(b->bytes ? b->bytes : 1));
  if (!source->staging)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a staging buffer", path);
  if (feed->stream && b->unbatched)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s/tokens.npy makes a token stream, which feeds [N, T] buffers; '%s' has no batch axis N",
                         dir, b->name);
  if (feed->stream)
    return NULL;
  if (b->unbatched)
    return check_whole(path, b, source->file);
  int64_t per_sample_file = 1;
  for (int32_t d = 1; d < tf_npy_rank(source->file); d++)
    per_sample_file *= tf_npy_shape(source->file)[d];
  if (tf_npy_rank(source->file) < 1 || per_sample_file != source->per_sample)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: each sample has %" PRId64 " elements, but '%s' takes %" PRId64 " per sample", path,
                         per_sample_file, b->name, source->per_sample);
  return tf_sample_layout_check(path, b->name, b->shape + 1, b->rank - 1, tf_npy_shape(source->file) + 1,
                                tf_npy_rank(source->file) - 1);
}

/* A token stream: a rank-1 tokens file feeding rank-2 [N, T] integer buffers. */
static bool is_stream(const tf_plan *plan, const char *dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/tokens.npy", dir);
  tf_npy *file = NULL;
  tf_status status = tf_npy_open(path, &file);
  bool stream = !status && tf_npy_rank(file) == 1;
  tf_status_free(status);
  tf_npy_close(file);
  (void)plan;
  return stream;
}

/* A token stream: every [N, T] buffer reads a window of T tokens at a random start; a label source
 * reading the inputs' file is shifted by one token. A source whose file holds `count` tokens has
 * count - T - shift + 1 windows. Per-sample layout: every file holds one row per sample, and all
 * must agree (a labels file of 10 rows beside 1,437 inputs is an error, not 10 samples). */
static tf_status count_samples(tf_feed *feed, feed_source *source, const feed_source *first) {
  int64_t samples;
  if (feed->stream) {
    const tf_plan_buffer *b = source->buffer;
    if (b->rank != 2)
      return tf_status_new(TF_ERR_INVALID_INPUT, "a token stream feeds [N, T] buffers; '%s' has rank %d", b->name,
                           b->rank);
    feed->window = b->shape[1];
    if (tf_npy_count(source->file) != tf_npy_count(first->file))
      return tf_status_new(
          TF_ERR_INVALID_INPUT,
          "%s holds %" PRId64 " tokens but %s holds %" PRId64 ": the token files of one stream must be equally long",
          tf_npy_path(source->file), tf_npy_count(source->file), tf_npy_path(first->file), tf_npy_count(first->file));
    samples = tf_npy_count(source->file) - feed->window - source->shift + 1;
  } else if (source->buffer->unbatched) {
    return NULL; /* the same whole tensor for every sample */
  } else if (!first) {
    samples = sample_count(source->file);
  } else {
    samples = sample_count(source->file);
    if (samples != sample_count(first->file))
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s holds %" PRId64 " samples but %s holds %" PRId64
                           ": every input and label file must hold one row per sample",
                           tf_npy_path(source->file), samples, tf_npy_path(first->file), sample_count(first->file));
  }
  if (!first || source == first || samples < feed->samples)
    feed->samples = samples;
  return NULL;
}

/* The first source cut into samples, or NULL when every one is fed whole (a static graph: its
 * data is one sample). */
static const feed_source *first_batched(const tf_feed *feed) {
  for (int32_t k = 0; k < feed->n_sources; k++)
    if (feed->stream || !feed->sources[k].buffer->unbatched)
      return &feed->sources[k];
  return NULL;
}

static tf_status no_sample(const tf_feed *feed, const char *dir) {
  if (!feed->stream)
    return tf_status_new(TF_ERR_INVALID_INPUT, "the data in %s has no sample (its files hold 0 rows)", dir);
  const feed_source *source = &feed->sources[0];
  for (int32_t k = 1; k < feed->n_sources; k++)
    source = feed->sources[k].shift > source->shift ? &feed->sources[k] : source;
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "the data in %s has no complete sample: %s holds %" PRId64 " tokens, and a window of %" PRId64
                       " tokens%s needs at least %" PRId64,
                       dir, tf_npy_path(source->file), tf_npy_count(source->file), feed->window,
                       source->shift ? " with its labels one token ahead" : "", feed->window + source->shift);
}

/* Every value of the source's file, once (data_check.h): finite features, ids and labels in range. */
static tf_status check_source(const tf_feed *feed, const feed_source *source) {
  /* An inference plan updates no weight: a NaN or Inf input gives NaN or Inf outputs, as in any
   * framework (ONNX's cast tests feed them). Ids and labels are still checked: they index memory. */
  if (!feed->plan->training && source->limit <= 0)
    return NULL;
  tf_data_rule rule = {source->buffer->name, feed->stream,       source->per_sample, source->limit,
                       source->limit_what,   source->has_ignore, source->ignore};
  return tf_data_check_file(source->file, &rule);
}

tf_status tf_feed_open(const tf_plan *plan, const char *dir, uint64_t seed, tf_feed **out) {
  *out = NULL;
  tf_feed *feed = calloc(1, sizeof(tf_feed));
  if (!feed)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed: out of memory");
  feed->plan = plan;
  feed->seed = seed;
  feed->batch = plan->micro_batch;
  feed->order_epoch = -1;
  feed->stream = is_stream(plan, dir);
  feed->sources = calloc((size_t)(plan->n_buffers ? plan->n_buffers : 1), sizeof(feed_source));
  tf_status status = feed->sources ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed: out of memory");
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    bool primary = b->io_twin < 0 || b->io_twin > i;
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || !primary)
      continue;
    status = open_source(feed, dir, b, i, &feed->sources[feed->n_sources]);
    feed->n_sources++;
  }
  const feed_source *first = status ? NULL : first_batched(feed);
  if (!status && !first)
    feed->samples = 1;
  for (int32_t k = 0; k < feed->n_sources && !status; k++)
    status = count_samples(feed, &feed->sources[k], first);
  if (!status && feed->samples < 1)
    status = no_sample(feed, dir);
  for (int32_t k = 0; k < feed->n_sources && !status; k++)
    status = check_source(feed, &feed->sources[k]);
  if (!status && !feed->stream) {
    feed->order = malloc(sizeof(int64_t) * (size_t)feed->samples);
    if (!feed->order)
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed: cannot order %" PRId64 " samples", feed->samples);
  }
  /* Allocated here, once: a training step must not touch the heap (tests/alloc_probe checks). */
  if (!status) {
    feed->rows = malloc(sizeof(int64_t) * (size_t)(feed->batch > 0 ? feed->batch : 1));
    if (!feed->rows)
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "feed: cannot hold a micro-batch of %" PRId64 " rows", feed->batch);
  }
  if (status) {
    tf_feed_close(feed);
    return status;
  }
  /* Without a thread (a process out of them), each micro-batch is read when taken: slower, same data. */
  tf_status_free(tf_feed_set_prefetch(feed, true));
  *out = feed;
  return NULL;
}

void tf_feed_close(tf_feed *feed) {
  if (!feed)
    return;
  tf_worker_destroy(feed->worker); /* first: it may be reading into the buffers freed below */
  for (int32_t k = 0; feed->sources && k < feed->n_sources; k++) {
    tf_npy_close(feed->sources[k].file);
    if (feed->sources[k].staging_from_session)
      tf_session_free_host(feed->host_owner, feed->sources[k].staging);
    else
      free(feed->sources[k].staging);
  }
  free(feed->sources);
  free(feed->order);
  free(feed->rows);
  free(feed);
}

int64_t tf_feed_samples(const tf_feed *feed) { return feed->samples; }
int64_t tf_feed_position(const tf_feed *feed) { return feed->position; }
void tf_feed_seek(tf_feed *feed, int64_t position) { feed->position = position; }

/* Fisher-Yates with counter-based randomness: epoch e's order depends on (seed, e) only. */
static void shuffle(tf_feed *feed, int64_t epoch) {
  for (int64_t i = 0; i < feed->samples; i++)
    feed->order[i] = i;
  for (int64_t i = feed->samples - 1; i > 0; i--) {
    int64_t j = (int64_t)(tf_rng_uniform(feed->seed, (uint64_t)epoch, 0xFEED, (uint64_t)i) * (float)(i + 1));
    if (j > i)
      j = i;
    int64_t t = feed->order[i];
    feed->order[i] = feed->order[j];
    feed->order[j] = t;
  }
  feed->order_epoch = epoch;
}

/* Re-checks a micro-batch's ids and labels before upload: the files were checked whole at open, but
 * a file changed under its mapping must not send a kernel past its table. */
static tf_status check_values(const tf_feed *feed, const feed_source *source, const int64_t *rows) {
  if (source->limit <= 0)
    return NULL;
  const tf_plan_buffer *b = source->buffer;
  int64_t n = b->bytes / tf_dtype_size(b->dtype);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = b->dtype == TF_I32 ? ((const int32_t *)source->staging)[i] : ((const int64_t *)source->staging)[i];
    if ((v < 0 || v >= source->limit) && !(source->has_ignore && v == source->ignore)) {
      const int64_t row = b->unbatched ? 0 : rows[i / source->per_sample], element = i % source->per_sample;
      const int64_t index = feed->stream ? row + source->shift + element : row * source->per_sample + element;
      tf_data_rule rule = {b->name,       feed->stream,       source->per_sample,
                           source->limit, source->limit_what, source->has_ignore,
                           source->ignore};
      char where[96];
      tf_data_position(&rule, index, where, sizeof(where));
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s is %" PRId64 ", outside [0, %" PRId64 ") for '%s' (%s)",
                           tf_npy_path(source->file), where, v, source->limit, b->name, source->limit_what);
    }
  }
  return NULL;
}

/* count elements from `from` (the file's) to `to` (the buffer's): a copy, or float32 rounded to bf16. */
static void stage(const feed_source *source, void *to, const char *from, int64_t count) {
  if (!source->to_bf16) {
    memcpy(to, from, (size_t)count * (size_t)tf_dtype_size(source->buffer->dtype));
    return;
  }
  tf_half_from_f32_array(from, to, count, 1);
}

/* Fills every source's staging buffer with sample rows[0..batch) (or windows) of feed->rows from
 * the files' mappings and checks its ids and labels. Runs inside the guard (set_guard), on the
 * worker's thread or the caller's. */
static tf_status gather(void *context) {
  const tf_feed *feed = context;
  const int64_t *rows = feed->rows;
  for (int32_t k = 0; k < feed->n_sources; k++) {
    const feed_source *source = &feed->sources[k];
    const tf_plan_buffer *b = source->buffer;
    size_t element = (size_t)tf_dtype_size(b->dtype), file_element = source->to_bf16 ? 4 : element;
    size_t row_bytes = (size_t)source->per_sample * element;
    const char *data = tf_npy_data(source->file);
    if (b->unbatched)
      stage(source, source->staging, data, source->per_sample);
    for (int64_t r = 0; r < feed->batch && !b->unbatched; r++) {
      int64_t first = feed->stream ? rows[r] + source->shift : rows[r];
      size_t offset = (size_t)first * (feed->stream ? file_element : (size_t)source->per_sample * file_element);
      stage(source, (char *)source->staging + (size_t)r * row_bytes, data + offset, source->per_sample);
    }
    TF_RETURN_IF_ERROR(check_values(feed, source, rows));
  }
  return NULL;
}

static tf_status guarded_gather(tf_feed *feed) { return feed->guard ? feed->guard(gather, feed) : gather(feed); }

static tf_status upload(const tf_feed *feed, tf_session *session) {
  for (int32_t k = 0; k < feed->n_sources; k++) {
    const tf_plan_buffer *b = feed->sources[k].buffer;
    TF_RETURN_IF_ERROR(tf_session_write(session, b->name, feed->sources[k].staging, b->bytes));
  }
  return NULL;
}

/* Micro-batch `position`'s rows: random windows of a token stream, or the epoch's permutation. */
static void rows_at(tf_feed *feed, int64_t position) {
  int64_t *rows = feed->rows;
  for (int64_t r = 0; r < feed->batch; r++) {
    int64_t index = position * feed->batch + r;
    if (feed->stream) {
      rows[r] = (int64_t)(tf_rng_uniform(feed->seed, (uint64_t)index, 0x70CE, 0) * (float)feed->samples);
      if (rows[r] >= feed->samples)
        rows[r] = feed->samples - 1;
    } else {
      int64_t epoch = index / feed->samples;
      if (epoch != feed->order_epoch)
        shuffle(feed, epoch);
      rows[r] = feed->order[index % feed->samples];
    }
  }
}

/* The worker's job (and the synchronous path): micro-batch `position` into the staging buffers. */
static tf_status prepare(void *context, int64_t position) {
  tf_feed *feed = context;
  rows_at(feed, position);
  return guarded_gather(feed);
}

/* The micro-batch this feed takes after `position`: the next, or for a job's rank the first of its
 * next block of `accumulate` (cmd_train's order: rank r takes blocks r, r + R, r + 2R, ...). */
static int64_t upcoming(const tf_feed *feed, int64_t position) {
  const int64_t block = feed->plan->accumulate > 0 ? feed->plan->accumulate : 1;
  if (feed->ranks <= 1 || (position + 1) / block == position / block)
    return position + 1;
  return (position / block + feed->ranks) * block;
}

/* Waits for the batch the worker is preparing, if any (the staging buffers are then the caller's):
 * its status, and its position in *ticket (-1 when none was in flight). */
static tf_status settle(tf_feed *feed, int64_t *ticket) {
  *ticket = -1;
  if (!feed->worker || !tf_worker_busy(feed->worker))
    return NULL;
  return tf_worker_wait(feed->worker, ticket);
}

/* Makes the staging buffers hold micro-batch `position`: the worker's batch when it prepared that
 * one (its error is this batch's), else read now (a seek elsewhere discards what it prepared). */
static tf_status take(tf_feed *feed, int64_t position) {
  int64_t ticket;
  tf_status status = settle(feed, &ticket);
  if (ticket == position) {
    feed->prefetched += !status;
    return status;
  }
  tf_status_free(status);
  return prepare(feed, position);
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

tf_status tf_feed_next(tf_feed *feed, tf_session *session) {
  TF_RETURN_IF_ERROR(take(feed, feed->position));
  const double start = seconds_now();
  tf_status status = upload(feed, session);
  feed->upload_seconds += seconds_now() - start;
  TF_RETURN_IF_ERROR(status);
  if (feed->worker) /* the staging is free again: the next micro-batch is read while this one trains */
    tf_worker_post(feed->worker, upcoming(feed, feed->position));
  feed->position++;
  return NULL;
}

tf_status tf_feed_batch_in_order(tf_feed *feed, tf_session *session, int64_t index) {
  int64_t ticket; /* what the worker prepared is dropped: its rows and staging are needed here */
  tf_status_free(settle(feed, &ticket));
  int64_t *rows = feed->rows;
  for (int64_t r = 0; r < feed->batch; r++) {
    int64_t sample = (index * feed->batch + r) % feed->samples;
    rows[r] = feed->stream ? sample * (feed->window > 0 ? feed->window : 1) % feed->samples : sample;
  }
  TF_RETURN_IF_ERROR(guarded_gather(feed));
  return upload(feed, session);
}

tf_status tf_feed_set_prefetch(tf_feed *feed, bool on) {
  if (!on) {
    tf_worker_destroy(feed->worker);
    feed->worker = NULL;
    return NULL;
  }
  return feed->worker ? NULL : tf_worker_create(prepare, feed, &feed->worker);
}

void tf_feed_set_ranks(tf_feed *feed, int32_t ranks) { feed->ranks = ranks; }
void tf_feed_set_guard(tf_feed *feed, tf_feed_guard guard) { feed->guard = guard; }

bool tf_feed_prefetching(const tf_feed *feed) { return feed->worker != NULL; }
int64_t tf_feed_prefetched(const tf_feed *feed) { return feed->prefetched; }

tf_status tf_feed_stage_in(tf_feed *feed, tf_session *session, int64_t min_bytes) {
  if (feed->position != 0 || (feed->worker && tf_worker_busy(feed->worker)) || feed->host_owner)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_feed_stage_in: call it once, before the first micro-batch");
  for (int32_t k = 0; k < feed->n_sources; k++) {
    feed_source *source = &feed->sources[k];
    void *host = NULL;
    if (source->buffer->bytes < min_bytes || source->buffer->bytes == 0)
      continue;
    tf_status status = tf_session_alloc_host(session, source->buffer->bytes, &host);
    if (status || !host) { /* none, or none left: this source keeps its ordinary staging */
      tf_status_free(status);
      continue;
    }
    free(source->staging);
    source->staging = host;
    source->staging_from_session = true;
    feed->host_owner = session;
  }
  return NULL;
}

int32_t tf_feed_staged_in(const tf_feed *feed) {
  int32_t staged = 0;
  for (int32_t k = 0; k < feed->n_sources; k++)
    staged += feed->sources[k].staging_from_session ? 1 : 0;
  return staged;
}

double tf_feed_upload_seconds(const tf_feed *feed) { return feed ? feed->upload_seconds : 0; }
