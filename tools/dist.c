/* tools/dist.h: the gradient sums of a data-parallel job over MPI, and how a job starts and ends (what
 * its ranks agree on: tools/dist_agree.c). */
#define _POSIX_C_SOURCE 200809L
#include "tools/dist.h"

#include <stdlib.h>
#include <string.h>

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

/* The gradient buffers to sum (into d->gradients) and the staging's bytes: the largest of them, and
 * under ZeRO of the parameters one rank updates and sends (tf_dist_share_updates); a gradient's
 * dtype other than f32 is refused (the sum runs in f32). */
static tf_status gradients_of(const tf_plan *plan, tf_dist *d) {
  d->gradients = malloc(sizeof(int32_t) * (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1));
  if (!d->gradients)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to list %d buffers", plan->n_buffers);
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->role != TF_ROLE_GRADIENT || b->bytes == 0 || b->view_of != 0) /* a view's bytes are summed whole */
      continue;
    if (b->dtype != TF_F32)
      return tf_status_new(TF_ERR_UNSUPPORTED, "--ranks: gradient '%s' is %s; the ranks sum f32 gradients", b->name,
                           tf_dtype_name(b->dtype));
    if (plan->zero < 2) /* stage 2: reduced as buckets (tf_dist_reduce_buckets) */
      d->gradients[d->n_gradients++] = i;
    d->staging_bytes = b->bytes > d->staging_bytes ? b->bytes : d->staging_bytes;
  }
  for (int32_t s = plan->micro_steps; plan->zero > 0 && s < plan->n_steps; s++) {
    const int64_t bytes = plan->steps[s].held_by > 0 ? plan->buffers[plan->steps[s].inputs[0]].bytes : 0;
    d->staging_bytes = bytes > d->staging_bytes ? bytes : d->staging_bytes;
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

tf_status tf_dist_start(const tf_plan *plan, const tf_dist_job *job, tf_dist *d) {
  d->plan = plan;
  if (!d->active)
    return plan->ranks > 1 ? refuse_alone(plan) : NULL;
  /* The same plan and arguments everywhere first: every rank must reach one verdict. A rank that
   * cannot even describe itself says so alone (tf_dist_abort ends the others). */
  char *lines;
  d->failed_alone = true;
  TF_RETURN_IF_ERROR(tf_dist_identity(job, &lines));
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
  free(d->buckets);
  free(d->received);
  memset(d, 0, sizeof(*d));
}
