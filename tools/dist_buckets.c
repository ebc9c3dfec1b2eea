/* tools/dist.h: gradients reduced in the backward pass. ZeRO stage 2: every rank's backward pass
 * writes each gradient into a bucket (compiler/zero2.c); the session pauses after the last step
 * writing a bucket, the ranks reduce it (MPI_Reduce per range, to the rank holding that range of the
 * gradient's shard) and the owner writes the sum into its shard on the step's first micro-batch, or
 * adds it after. Stage 0 on the cpu backend, where the overlap below runs: each gradient is its own
 * bucket, summed (MPI_Allreduce) after its last writer in the step's last micro-batch and written
 * back on every rank; tf_dist_sum_gradients then has nothing left to sum.
 *
 * Overlapped with the backward pass: at a pause the buckets are copied into the send buffer and a
 * thread of their own reduces them (common/worker.h) while the session runs on to its next pause;
 * there the main thread waits for that reduction, writes the sums into the shards, then stages the
 * next buckets. The last pause's reduction is waited for before the optimizer step
 * (tf_dist_sum_gradients). Only one reduction is in flight, so one send and one receive buffer
 * serve, each as large as the most bytes one pause reduces. The ranks make the same MPI calls in the
 * same order as without the thread, and the main thread makes none while the thread is in one (MPI's
 * SERIALIZED level), so the sums are the same bit for bit. Where the machine has no core to spare for
 * that thread (want_reducer), TIGHTFIT_DIST_OVERLAP=0, or an MPI without that thread level, each pause
 * reduces its buckets itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/worker.h"
#include "runtime/session_backend.h"
#include "tools/cli.h"
#include "tools/dist.h"

#if TIGHTFIT_MPI
#include <mpi.h>

#define CHUNK_BYTES (1 << 30) /* MPI counts are ints: large buffers move in pieces */

/* Bytes [at, at + bytes) of the send buffer summed across the ranks into root's receive buffer at
 * the same place (in pieces of at most CHUNK_BYTES). */
static tf_status reduce_range(tf_dist *d, int64_t at, int64_t bytes, int root, const char *name) {
  for (int64_t done = 0; done < bytes; done += CHUNK_BYTES) {
    const int count = (int)((bytes - done < CHUNK_BYTES ? bytes - done : CHUNK_BYTES) / 4);
    if (MPI_Reduce((char *)d->sent + at + done, (char *)d->received + at + done, count, MPI_FLOAT, MPI_SUM, root,
                   MPI_COMM_WORLD) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "reducing gradient bucket '%s' to rank %d: MPI_Reduce failed", name, root);
  }
  return NULL;
}

/* The ranges of bucket k's shard: the shard whole (id, at 0), or each of its pieces (by id: the same
 * order on every rank). Calls each(d, k, shard or piece id, its byte offset in the bucket); stops at
 * an error. */
typedef tf_status (*range_fn)(tf_dist *d, const tf_dist_bucket *k, int32_t id, int64_t at);
static tf_status each_range(tf_dist *d, const tf_dist_bucket *k, range_fn each) {
  const tf_plan *plan = d->plan;
  if (plan->zero == 0 || plan->buffers[k->shard].held_by > 0)
    return each(d, k, k->shard, 0);
  for (int32_t id = 0; id < plan->n_buffers; id++)
    if (plan->buffers[id].view_of == k->shard + 1)
      TF_RETURN_IF_ERROR(each(d, k, id, plan->buffers[id].view_at));
  return NULL;
}

static tf_status reduce_one(tf_dist *d, const tf_dist_bucket *k, int32_t id, int64_t at) {
  const tf_plan_buffer *range = &d->plan->buffers[id];
  if (d->plan->zero == 0) { /* a gradient summed whole, for every rank */
    if (MPI_Allreduce(d->sent + k->at / 4, d->received + k->at / 4, (int)(range->bytes / 4), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "summing gradient '%s' across %d ranks: MPI_Allreduce failed", range->name,
                           d->size);
    return NULL;
  }
  return reduce_range(d, k->at + at, range->bytes, range->held_by - 1, d->plan->buffers[k->bucket].name);
}

/* The owner's side of one range: the sum written to its shard (or piece) on the step's first
 * micro-batch, else added to what it holds (read into the send buffer's bytes of the range, which
 * the reduction has used). */
static tf_status write_one(tf_dist *d, const tf_dist_bucket *k, int32_t id, int64_t at) {
  const tf_plan_buffer *range = &d->plan->buffers[id];
  if (d->plan->zero == 0) /* stage 0: the sum replaces the rank's gradient, on every rank */
    return tf_session_write_range(d->session, id, 0, (char *)d->received + k->at, range->bytes);
  if (range->held_by - 1 != d->rank)
    return NULL;
  float *sum = (float *)((char *)d->received + k->at + at);
  if (!d->pending_first) {
    float *held = (float *)((char *)d->sent + k->at + at);
    TF_RETURN_IF_ERROR(tf_session_read_range(d->session, id, 0, held, range->bytes));
    for (int64_t i = 0; i < range->bytes / 4; i++)
      sum[i] = held[i] + sum[i];
  }
  if (d->pending_last && d->plan->overflow_check >= 0) /* the range's final values: its part of the norm */
    for (int64_t i = 0; i < range->bytes / 4; i++)
      d->norm_partial += (double)sum[i] * (double)sum[i];
  return tf_session_write_range(d->session, id, 0, sum, range->bytes);
}

/* The reduction of the buckets staged at pause `step` (the worker's job, or the pause's own). */
static tf_status reduce_pause(void *context, int64_t step) {
  tf_dist *d = context;
  for (int32_t i = 0; i < d->n_buckets; i++)
    if (d->buckets[i].last == step)
      TF_RETURN_IF_ERROR(each_range(d, &d->buckets[i], reduce_one));
  return NULL;
}

/* The staged reduction done (waited for, or run now) and its sums in the owners' shards. */
static tf_status finish_pending(tf_dist *d) {
  if (d->pending < 0)
    return NULL;
  int64_t ticket = d->pending;
  tf_status status = d->reducer ? tf_worker_wait(d->reducer, &ticket) : reduce_pause(d, d->pending);
  for (int32_t i = 0; i < d->n_buckets && !status; i++)
    if (d->buckets[i].last == ticket)
      status = each_range(d, &d->buckets[i], write_one);
  d->pending = -1;
  return status;
}

/* The session's pause after `step`: the last pause's reduction finished, this one's buckets staged
 * and their reduction started (on the reducer's thread, or here). */
static tf_status reduce_at(void *context, int32_t step) {
  tf_dist *d = context;
  const int64_t micro = tf_session_micro_steps(d->session) % d->plan->accumulate; /* its counter: the step's */
  if (d->plan->zero == 0 && micro != d->plan->accumulate - 1)
    return NULL; /* stage 0 sums the step's gradients once, after its last micro-batch wrote them */
  TF_RETURN_IF_ERROR(finish_pending(d));
  for (int32_t i = 0; i < d->n_buckets; i++) {
    const tf_dist_bucket *k = &d->buckets[i];
    if (k->last == step)
      TF_RETURN_IF_ERROR(
          tf_session_read_range(d->session, k->bucket, 0, (char *)d->sent + k->at, d->plan->buffers[k->bucket].bytes));
  }
  d->pending = step;
  d->pending_first = micro == 0;
  d->pending_last = micro == d->plan->accumulate - 1;
  if (d->reducer) {
    tf_worker_post(d->reducer, step);
    return NULL;
  }
  return finish_pending(d);
}

/* The shard of bucket id: the gradient of its owner held by a rank or in pieces, on the device or
 * (--offload gradients) in host memory; -1 if none. */
static int32_t shard_of(const tf_plan *plan, int32_t id) {
  for (int32_t other = 0; other < plan->n_buffers; other++) {
    const tf_plan_buffer *o = &plan->buffers[other];
    const bool gradients = o->region == TF_REGION_GRADIENTS || o->region == TF_REGION_HOST;
    if (o->role == TF_ROLE_GRADIENT && gradients && o->held_by != 0 && o->view_of == 0 &&
        o->owner == plan->buffers[id].owner)
      return other;
  }
  return -1;
}

static int by_last(const void *a, const void *b) {
  const tf_dist_bucket *x = a, *y = b;
  if (x->last != y->last)
    return x->last < y->last ? -1 : 1;
  return (x->bucket > y->bucket) - (x->bucket < y->bucket);
}

/* Whether buffer id is reduced as a bucket: at stage 2 a gradient of the gradients region every rank
 * holds; at stage 0 each gradient tf_dist_sum_gradients would sum. */
static bool is_bucket(const tf_dist *d, int32_t id) {
  const tf_plan_buffer *b = &d->plan->buffers[id];
  if (d->plan->zero == 2)
    return b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by == 0 && b->view_of == 0 &&
           b->bytes > 0;
  for (int32_t g = 0; g < d->n_gradients; g++)
    if (d->gradients[g] == id)
      return true;
  return false;
}

/* d->buckets: each bucket of the plan (is_bucket), its shard (at stage 0 itself), the last step of
 * the micro-batch block that touches it, and its place in the send buffer among its pause's buckets;
 * d->pause_bytes the most one pause stages. */
static tf_status list_buckets(tf_dist *d) {
  const tf_plan *plan = d->plan;
  d->buckets = malloc(sizeof(tf_dist_bucket) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  int32_t *at = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!d->buckets || !at) {
    free(at);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to list the gradient buckets");
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    at[id] = -1;
    if (is_bucket(d, id)) {
      at[id] = d->n_buckets;
      d->buckets[d->n_buckets++] = (tf_dist_bucket){id, plan->zero == 2 ? shard_of(plan, id) : id, -1, 0};
    }
  }
  for (int32_t s = 0; s < plan->micro_steps + plan->n_host_steps; s++) {
    /* a host step of the block counts at the device step before its host_at: it runs before that
     * step's pause (tf_session_set_pauses) */
    const bool host = s >= plan->micro_steps;
    const tf_plan_step *step = host ? &plan->host_steps[s - plan->micro_steps] : &plan->steps[s];
    const int32_t before = host ? plan->host_at[s - plan->micro_steps] - 1 : s, position = before > 0 ? before : 0;
    if (host && step->phase == TF_PHASE_OPTIMIZER)
      continue;
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      if (at[id] >= 0 && position > d->buckets[at[id]].last)
        d->buckets[at[id]].last = position;
    }
  }
  free(at);
  qsort(d->buckets, (size_t)d->n_buckets, sizeof(tf_dist_bucket), by_last);
  int64_t staged = 0;
  for (int32_t i = 0; i < d->n_buckets; i++) {
    staged = i > 0 && d->buckets[i].last == d->buckets[i - 1].last ? staged : 0;
    d->buckets[i].at = staged;
    staged += (plan->buffers[d->buckets[i].bucket].bytes + 63) / 64 * 64;
    d->pause_bytes = staged > d->pause_bytes ? staged : d->pause_bytes;
  }
  return NULL;
}

/* The ranks of the job on this rank's machine (collective). */
static int ranks_here(void) {
  MPI_Comm node;
  int here = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &here);
    MPI_Comm_free(&node);
  }
  return here;
}

/* Whether bucket reductions get a thread of their own (TIGHTFIT_DIST_OVERLAP: 1 yes, 0 no, unset: when
 * this machine has a core for it beside every rank's `threads`; the thread waits for the other ranks
 * busily, as MPI does, and on a machine without a spare core it slows the backward pass it would
 * overlap: 2 ranks x 1 thread on 2 cores, 2026-12-03, 127 against 124 ms a step). Why, into why[]. */
static tf_status want_reducer(const tf_dist *d, bool *want, char *why, size_t size) {
  const int here = ranks_here(); /* collective: first, so that every rank calls it, error or not */
  const char *overlap = getenv("TIGHTFIT_DIST_OVERLAP");
  if (overlap && *overlap && strcmp(overlap, "0") != 0 && strcmp(overlap, "1") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "TIGHTFIT_DIST_OVERLAP='%s': takes 0 (reduce each gradient bucket at its pause), 1 (on a "
                         "thread of its own while the backward pass goes on) or nothing (that thread where the "
                         "machine has a core for it)",
                         overlap);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  *want = false;
  if (level < MPI_THREAD_SERIALIZED)
    snprintf(why, size, "this MPI takes no calls from a second thread (MPI_THREAD_SERIALIZED)");
  else if (overlap && *overlap)
    *want = strcmp(overlap, "1") == 0, snprintf(why, size, "TIGHTFIT_DIST_OVERLAP=%s", overlap);
  else if (!(*want = cores >= (long)here * (d->threads + 1)))
    snprintf(why, size,
             "%ld cores here for %d ranks of %d thread%s: none to spare for it (TIGHTFIT_DIST_OVERLAP=1 gives it one)",
             cores, here, d->threads, d->threads == 1 ? "" : "s");
  else
    snprintf(why, size, "%ld cores here for %d ranks of %d thread%s", cores, here, d->threads,
             d->threads == 1 ? "" : "s");
  return NULL;
}
#endif

#if TIGHTFIT_MPI
/* Stage 0: whether this rank's gradients can be summed at the pauses, every rank agreeing (the MPI
 * calls differ from the sum after the backward pass): the reducer wanted, the cpu backend (its
 * memory is the host's: a pause costs no device synchronisation, which on a GPU would stall every
 * micro-batch; nor has a cpu plan host steps), and a writer in the micro-batch block for every
 * gradient. */
static bool sum_at_pauses(tf_dist *d, tf_session *session, bool want) {
  void *state;
  void *const *regions;
  const tf_backend_vtable *backend = tf_session_backend(session, &state, &regions);
  int able = want && strcmp(backend->name, "cpu") == 0 && d->n_buckets == d->n_gradients;
  for (int32_t i = 0; i < d->n_buckets; i++)
    able = able && d->buckets[i].last >= 0;
  int every = 0;
  MPI_Allreduce(&able, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return every;
}

/* Rank 0's line on where the reductions run. */
static void say_where(const tf_dist *d, const char *why) {
  if (d->rank != 0)
    return;
  if (d->plan->zero == 0)
    fprintf(tf_cli_err(),
            "tightfit train: the ranks sum each of the %d gradients as the backward pass finishes it, on a thread of "
            "their own (%s)\n",
            d->n_buckets, why);
  else
    fprintf(tf_cli_err(), "tightfit train: ZeRO stage 2 reduces its %d gradient buckets %s (%s)\n", d->n_buckets,
            d->reducer ? "on a thread of their own while the backward pass goes on"
                       : "at each pause of the backward pass",
            why);
}
#endif

tf_status tf_dist_reduce_buckets(tf_dist *d, tf_session *session) {
  const tf_plan *plan = tf_session_plan(session);
  d->pending = -1;
  if (!d->active || plan->zero == 1)
    return NULL;
#if TIGHTFIT_MPI
  d->session = session;
  bool want = false;
  char why[192] = "";
  TF_RETURN_IF_ERROR(want_reducer(d, &want, why, sizeof(why))); /* collective */
  TF_RETURN_IF_ERROR(list_buckets(d));
  if (plan->zero == 0 && !sum_at_pauses(d, session, want)) { /* collective too */
    free(d->buckets);
    d->buckets = NULL;
    d->n_buckets = 0;
    return NULL; /* summed after the backward pass (tf_dist_sum_gradients) */
  }
  int32_t *after = malloc(sizeof(int32_t) * (size_t)(d->n_buckets > 0 ? d->n_buckets : 1));
  d->sent = malloc((size_t)(d->pause_bytes > 0 ? d->pause_bytes : 4));
  d->received = malloc((size_t)(d->pause_bytes > 0 ? d->pause_bytes : 4));
  if (!after || !d->sent || !d->received) {
    free(after);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to reduce %d gradient buckets (%lld bytes at a pause)",
                         d->n_buckets, (long long)d->pause_bytes);
  }
  int32_t n = 0;
  for (int32_t i = 0; i < d->n_buckets; i++) {
    if (d->buckets[i].shard < 0 || d->buckets[i].last < 0) {
      free(after);
      return tf_status_new(TF_ERR_INVALID_INPUT, "gradient bucket '%s' has no shard or no step writes it",
                           plan->buffers[d->buckets[i].bucket].name);
    }
    if (n == 0 || after[n - 1] != d->buckets[i].last)
      after[n++] = d->buckets[i].last;
  }
  tf_status status = tf_session_set_pauses(session, after, n, reduce_at, d);
  free(after);
  if (!status && want)
    status = tf_worker_create(reduce_pause, d, &d->reducer);
  if (!status)
    say_where(d, why);
  d->summed_at_pauses = !status && plan->zero == 0;
  if (d->summed_at_pauses) { /* every gradient goes through the send buffer: the staging is not needed */
    free(d->staging);
    d->staging = NULL;
    d->staging_bytes = 0;
  }
  return status;
#else
  return NULL;
#endif
}

#if TIGHTFIT_MPI
/* Stage 2 with a norm to clip by: the ranks' partial sums of squares summed (every rank, the same
 * double), written as the plan's norm, a constant no step writes (compiler/optimizer.c). */
static tf_status write_norm(tf_dist *d) {
  double total = 0;
  if (MPI_Allreduce(&d->norm_partial, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
    return tf_status_new(TF_ERR_BACKEND, "summing the gradients' norm across %d ranks: MPI_Allreduce failed", d->size);
  d->norm_partial = 0;
  const float norm_sq = (float)total;
  return tf_session_write_range(d->session, d->plan->overflow_check, 0, &norm_sq, sizeof(norm_sq));
}
#endif

tf_status tf_dist_reduce_wait(tf_dist *d) {
#if TIGHTFIT_MPI
  if (d->active && d->sent && d->pending >= 0)
    TF_RETURN_IF_ERROR(finish_pending(d));
  if (d->active && d->sent && d->plan->zero == 2 && d->plan->overflow_check >= 0)
    return write_norm(d);
  return NULL;
#else
  (void)d;
#endif
  return NULL;
}
