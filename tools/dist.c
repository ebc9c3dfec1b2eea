/* tools/dist.h: the gradient sums of a data-parallel job over MPI. */
#include "tools/dist.h"

#include <stdlib.h>
#include <string.h>

#if TIGHTFIT_MPI
#include <mpi.h>
#endif

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

tf_status tf_dist_start(const tf_plan *plan, tf_dist *d) {
  memset(d, 0, sizeof(*d));
  d->size = 1;
  if (plan->ranks <= 1)
    return NULL;
  if (tf_plan_updates_in_backward(plan))
    return tf_status_new(TF_ERR_INVALID_INPUT, "a plan of %d ranks cannot update in the backward pass", plan->ranks);
#if TIGHTFIT_MPI
  if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "the plan is one of %d ranks (compiled with --ranks %d): run it as 'mpirun -np %d tightfit "
                         "train ...'",
                         plan->ranks, plan->ranks, plan->ranks);
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised && MPI_Init(NULL, NULL) != MPI_SUCCESS)
    return tf_status_new(TF_ERR_BACKEND, "MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d->size);
  d->active = true;
  if (d->size != plan->ranks)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "the plan is one of %d ranks (--ranks %d), but mpirun started %d processes", plan->ranks,
                         plan->ranks, d->size);
  TF_RETURN_IF_ERROR(gradients_of(plan, d));
  d->staging = malloc((size_t)(d->staging_bytes > 0 ? d->staging_bytes : 4));
  if (!d->staging)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to stage %lld bytes of gradients",
                         (long long)d->staging_bytes);
  return NULL;
#else
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "the plan is one of %d ranks (--ranks %d), but this build has no MPI (install "
                       "libopenmpi-dev, scripts/setup does, and rebuild)",
                       plan->ranks, plan->ranks);
#endif
}

tf_status tf_dist_sum_gradients(tf_dist *d, tf_session *session) {
  if (!d->active)
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

double tf_dist_mean(const tf_dist *d, double value) {
#if TIGHTFIT_MPI
  if (d->active) {
    double sum = 0;
    MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / d->size;
  }
#else
  (void)d;
#endif
  return value;
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
