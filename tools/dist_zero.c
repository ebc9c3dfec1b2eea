/* tools/dist.h: ZeRO stages 1 and 2 over MPI (compiler/zero.c plans them). Each rank updates the parameters,
 * and the ranges of split parameters, whose optimizer state it holds; after the optimizer block their
 * owners send them to every rank (MPI_Bcast per updated parameter or range, host-staged through the
 * job's staging buffer, sized at start for the largest), so the weights stay equal everywhere. A
 * checkpoint holds the whole state: rank 0 receives each other rank's shard buffer by buffer (a split
 * state piece by piece) while it writes (its session's remote read), and the others send theirs in
 * the same order. At stage 2 every rank's backward pass writes each gradient into a bucket; the
 * session pauses after the bucket's last step and the ranks reduce it (MPI_Reduce per range, to the
 * rank holding that range of the gradient's shard), the owner writing the sum on the step's first
 * micro-batch and adding it after. */
#include <stdlib.h>
#include <string.h>

#include "tools/dist.h"

#if TIGHTFIT_MPI
#include <mpi.h>

#define CHUNK_BYTES (1 << 30) /* MPI counts are ints: large buffers move in pieces */
#define SHARD_TAG 4501

/* The rank that runs update step `step` and owns the parameter (or range: a view) it updates, its
 * first input. */
static int owner_of(const tf_plan_step *step) { return step->held_by - 1; }

static tf_status broadcast(void *data, int64_t bytes, int root, const char *name) {
  for (int64_t at = 0; at < bytes; at += CHUNK_BYTES) {
    const int count = (int)(bytes - at < CHUNK_BYTES ? bytes - at : CHUNK_BYTES);
    if (MPI_Bcast((char *)data + at, count, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "sending parameter '%s' from rank %d: MPI_Bcast failed", name, root);
  }
  return NULL;
}
#endif

tf_status tf_dist_share_updates(tf_dist *d, tf_session *session) {
  const tf_plan *plan = tf_session_plan(session);
  if (!d->active || plan->zero == 0)
    return NULL;
#if TIGHTFIT_MPI
  tf_status status = NULL; /* d->staging holds the largest parameter or range sent (tf_dist_start) */
  /* the optimizer block's updates: on the device, then (--offload optimizer) on the host, every rank
   * in the same order */
  for (int32_t s = plan->micro_steps; s < plan->n_steps + plan->n_host_steps && !status; s++) {
    const tf_plan_step *step = s < plan->n_steps ? &plan->steps[s] : &plan->host_steps[s - plan->n_steps];
    if (step->held_by == 0)
      continue;
    const int32_t id = step->inputs[0];
    const tf_plan_buffer *b = &plan->buffers[id];
    const int root = owner_of(step);
    if (root == d->rank)
      status = tf_session_read_range(session, id, 0, d->staging, b->bytes);
    if (!status)
      status = broadcast(d->staging, b->bytes, root, b->name);
    if (!status && root != d->rank)
      status = tf_session_write_range(session, id, 0, d->staging, b->bytes);
  }
  return status;
#else
  return NULL;
#endif
}

#if TIGHTFIT_MPI
/* Bytes [at, at + bytes) of the bucket staged in d->staging, summed across the ranks into root's
 * d->received (in pieces of at most CHUNK_BYTES). */
static tf_status reduce_range(tf_dist *d, int64_t at, int64_t bytes, int root, const char *name) {
  for (int64_t done = 0; done < bytes; done += CHUNK_BYTES) {
    const int count = (int)((bytes - done < CHUNK_BYTES ? bytes - done : CHUNK_BYTES) / 4);
    if (MPI_Reduce((char *)d->staging + at + done, (char *)d->received + done, count, MPI_FLOAT, MPI_SUM, root,
                   MPI_COMM_WORLD) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "reducing gradient bucket '%s' to rank %d: MPI_Reduce failed", name, root);
  }
  return NULL;
}

/* The owner's side: the sum in d->received written to `shard` (a gradient held whole, or a piece)
 * on the step's first micro-batch, else added to what it holds (staged at d->staging + at, which
 * the reduction has used). */
static tf_status into_shard(tf_dist *d, int32_t shard, int64_t at, bool first) {
  const tf_plan_buffer *b = &d->plan->buffers[shard];
  if (!first) {
    float *held = (float *)((char *)d->staging + at);
    TF_RETURN_IF_ERROR(tf_session_read_range(d->session, shard, 0, held, b->bytes));
    for (int64_t i = 0; i < b->bytes / 4; i++)
      d->received[i] = held[i] + d->received[i];
  }
  return tf_session_write_range(d->session, shard, 0, d->received, b->bytes);
}

/* Bucket k reduced to the owners of its shard: whole to the rank holding it, or each piece's bytes
 * to the rank holding that piece. */
static tf_status reduce_bucket(tf_dist *d, const tf_dist_bucket *k, bool first) {
  const tf_plan *plan = d->plan;
  const tf_plan_buffer *bucket = &plan->buffers[k->bucket], *shard = &plan->buffers[k->shard];
  TF_RETURN_IF_ERROR(tf_session_read_range(d->session, k->bucket, 0, d->staging, bucket->bytes));
  if (shard->held_by > 0) {
    TF_RETURN_IF_ERROR(reduce_range(d, 0, bucket->bytes, shard->held_by - 1, bucket->name));
    return shard->held_by - 1 == d->rank ? into_shard(d, k->shard, 0, first) : NULL;
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) { /* its pieces, by id: the same order on every rank */
    const tf_plan_buffer *piece = &plan->buffers[id];
    if (piece->view_of != k->shard + 1)
      continue;
    TF_RETURN_IF_ERROR(reduce_range(d, piece->view_at, piece->bytes, piece->held_by - 1, bucket->name));
    if (piece->held_by - 1 == d->rank)
      TF_RETURN_IF_ERROR(into_shard(d, id, piece->view_at, first));
  }
  return NULL;
}

/* The session's pause after `step`: the buckets whose last step it is, reduced. */
static tf_status reduce_at(void *context, int32_t step) {
  tf_dist *d = context;
  const bool first = tf_session_micro_steps(d->session) % d->plan->accumulate == 0; /* its counter: the step's */
  for (int32_t i = 0; i < d->n_buckets; i++)
    if (d->buckets[i].last == step)
      TF_RETURN_IF_ERROR(reduce_bucket(d, &d->buckets[i], first));
  return NULL;
}

/* The shard of bucket id: the gradient of its owner held by a rank or in pieces; -1 if none. */
static int32_t shard_of(const tf_plan *plan, int32_t id) {
  for (int32_t other = 0; other < plan->n_buffers; other++) {
    const tf_plan_buffer *o = &plan->buffers[other];
    if (o->role == TF_ROLE_GRADIENT && o->region == TF_REGION_GRADIENTS && o->held_by != 0 && o->view_of == 0 &&
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

/* d->buckets: each bucket of the plan (a gradient of the gradients region every rank holds), its
 * shard and the last step of the micro-batch block that touches it. */
static tf_status list_buckets(tf_dist *d) {
  const tf_plan *plan = d->plan;
  d->buckets = malloc(sizeof(tf_dist_bucket) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  int32_t *at = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!d->buckets || !at) {
    free(at);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to list the gradient buckets");
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    at[id] = -1;
    if (b->role == TF_ROLE_GRADIENT && b->region == TF_REGION_GRADIENTS && b->held_by == 0 && b->view_of == 0 &&
        b->bytes > 0) {
      at[id] = d->n_buckets;
      d->buckets[d->n_buckets++] = (tf_dist_bucket){id, shard_of(plan, id), -1};
    }
  }
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      const int32_t id = tf_plan_step_operand(step, k, &written);
      if (at[id] >= 0)
        d->buckets[at[id]].last = s;
    }
  }
  free(at);
  qsort(d->buckets, (size_t)d->n_buckets, sizeof(tf_dist_bucket), by_last);
  return NULL;
}
#endif

tf_status tf_dist_reduce_buckets(tf_dist *d, tf_session *session) {
  const tf_plan *plan = tf_session_plan(session);
  if (!d->active || plan->zero != 2)
    return NULL;
#if TIGHTFIT_MPI
  d->session = session;
  TF_RETURN_IF_ERROR(list_buckets(d));
  int32_t *after = malloc(sizeof(int32_t) * (size_t)(d->n_buckets > 0 ? d->n_buckets : 1));
  d->received = malloc((size_t)(d->staging_bytes > 0 ? d->staging_bytes : 4));
  if (!after || !d->received) {
    free(after);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to reduce %d gradient buckets", d->n_buckets);
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
  return status;
#else
  return NULL;
#endif
}

tf_status tf_dist_receive_shard(void *context, int32_t buffer, void *data, int64_t bytes) {
  const tf_dist *d = context;
#if TIGHTFIT_MPI
  const tf_plan_buffer *b = &d->plan->buffers[buffer];
  const int from = b->held_by - 1;
  for (int64_t at = 0; at < bytes; at += CHUNK_BYTES) {
    const int count = (int)(bytes - at < CHUNK_BYTES ? bytes - at : CHUNK_BYTES);
    if (MPI_Recv((char *)data + at, count, MPI_BYTE, from, SHARD_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return tf_status_new(TF_ERR_BACKEND, "receiving '%s' of rank %d's shard: MPI_Recv failed", b->name, from);
  }
  return NULL;
#else
  (void)d;
  (void)buffer;
  (void)data;
  (void)bytes;
  return tf_status_new(TF_ERR_UNSUPPORTED, "a ZeRO shard cannot be received without MPI");
#endif
}

#if TIGHTFIT_MPI
/* Buffer id of this rank's shard to rank 0. */
static tf_status send_buffer(tf_session *session, int32_t id) {
  const tf_plan_buffer *b = &tf_session_plan(session)->buffers[id];
  void *data = malloc((size_t)(b->bytes > 0 ? b->bytes : 1));
  tf_status status = data ? tf_session_read_range(session, id, 0, data, b->bytes)
                          : tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to send '%s'", b->name);
  for (int64_t at = 0; !status && at < b->bytes; at += CHUNK_BYTES) {
    const int count = (int)(b->bytes - at < CHUNK_BYTES ? b->bytes - at : CHUNK_BYTES);
    if (MPI_Send((char *)data + at, count, MPI_BYTE, 0, SHARD_TAG, MPI_COMM_WORLD) != MPI_SUCCESS)
      status = tf_status_new(TF_ERR_BACKEND, "sending '%s' to rank 0: MPI_Send failed", b->name);
  }
  free(data);
  return status;
}
#endif

tf_status tf_dist_send_shard(tf_dist *d, tf_session *session) {
  const tf_plan *plan = tf_session_plan(session);
  if (!d->active || plan->zero == 0 || d->rank == 0)
    return NULL;
#if TIGHTFIT_MPI
  /* In the order rank 0 reads them (tf_session_save): the state buffers by id, a buffer held in pieces
   * as its pieces by id. */
  tf_status status = NULL;
  for (int32_t id = 0; id < plan->n_buffers && !status; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->role != TF_ROLE_OPTIMIZER_STATE || b->view_of != 0)
      continue;
    if (b->held_by == d->rank + 1)
      status = send_buffer(session, id);
    for (int32_t piece = 0; b->held_by < 0 && piece < plan->n_buffers && !status; piece++)
      if (plan->buffers[piece].view_of == id + 1 && plan->buffers[piece].held_by == d->rank + 1)
        status = send_buffer(session, piece);
  }
  return status;
#else
  (void)session;
  return NULL;
#endif
}
