/* tools/dist.h: ZeRO stages 1 and 2 over MPI (compiler/zero.c plans them). Each rank updates the parameters,
 * and the ranges of split parameters, whose optimizer state it holds (a half parameter's f32 master, then
 * the parameter by cast_into); after the optimizer block their owners send them to every rank (MPI_Bcast per updated
 * parameter or range, host-staged through the job's staging buffer, sized at start for the largest), so the weights
 * stay equal everywhere. A checkpoint holds the whole state: rank 0 receives each other rank's shard buffer by buffer
 * (a split state piece by piece) while it writes (its session's remote read), and the others send theirs in the same
 * order. Stage 2's reductions of the gradient buckets: tools/dist_buckets.c. */
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
    if (step->held_by == 0 || step->n_inputs == 0 || plan->buffers[step->inputs[0]].role != TF_ROLE_PARAMETER)
      continue; /* a half parameter's master: its owner's cast_into writes the parameter, sent from there */
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
