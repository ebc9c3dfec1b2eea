/* tools/dist.h: the gradient sums of a data-parallel job, host-staged over MPI or on the device with
 * the backend's all-reduce (NCCL), and how a job starts and ends (what its ranks agree on:
 * tools/dist_agree.c). */
#define _POSIX_C_SOURCE 200809L
#include "tools/dist.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/worker.h"
#include "runtime/session_backend.h"
#include "tools/cli.h"

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
  int provided; /* a second thread may call MPI while the first does not: the reducer (dist_buckets.c) */
  if (!initialised && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return tf_status_new(TF_ERR_BACKEND, "MPI_Init_thread failed");
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
    if (plan->zero == 2) /* reduced as buckets, staged in their own buffer (tools/dist_buckets.c) */
      continue;
    d->gradients[d->n_gradients++] = i;
    d->staging_bytes = b->bytes > d->staging_bytes ? b->bytes : d->staging_bytes;
  }
  for (int32_t s = plan->micro_steps; plan->zero > 0 && s < plan->n_steps + plan->n_host_steps; s++) {
    const tf_plan_step *step = s < plan->n_steps ? &plan->steps[s] : &plan->host_steps[s - plan->n_steps];
    const int64_t bytes = step->held_by > 0 ? plan->buffers[step->inputs[0]].bytes : 0; /* on the host: --offload */
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

/* TIGHTFIT_DIST_NCCL into d->nccl; an error for a value other than unset, empty, 0 or 1. */
static tf_status read_nccl_variable(tf_dist *d) {
  const char *value = getenv("TIGHTFIT_DIST_NCCL");
  d->nccl = !value || !*value ? TF_DIST_NCCL_AUTO : strcmp(value, "0") == 0 ? TF_DIST_NCCL_OFF : TF_DIST_NCCL_REQUIRED;
  if (value && *value && strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "TIGHTFIT_DIST_NCCL='%s': takes 0 (sum the ranks' gradients over MPI on the host) or 1 (on "
                         "the device with NCCL, or fail); unset, the device's where the job can",
                         value);
  return NULL;
}

tf_status tf_dist_start(const tf_plan *plan, const tf_dist_job *job, tf_dist *d) {
  d->plan = plan;
  d->failed_alone = true; /* the variable may differ between the ranks */
  TF_RETURN_IF_ERROR(read_nccl_variable(d));
  d->failed_alone = false;
  if (!d->active && plan->ranks <= 1 && d->nccl == TF_DIST_NCCL_REQUIRED)
    return gradients_of(plan, d); /* one process summing with itself on the device: a check of the path */
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

/* ---- choosing how to sum: on the device (the backend's all-reduce) or host-staged over MPI ---- */

#define WHY_BYTES 512

/* Why this rank cannot sum on the device (written into `why`), or "" when it can: the backend, the
 * variable, the plan's stage, where its gradients are. */
static void local_obstacle(const tf_dist *d, const tf_backend_vtable *backend, char *why) {
  const tf_plan *plan = d->plan;
  why[0] = '\0';
  if (d->nccl == TF_DIST_NCCL_OFF)
    snprintf(why, WHY_BYTES, "TIGHTFIT_DIST_NCCL=0");
  else if (!backend->allreduce_sum || !backend->collective_init || !backend->collective_id ||
           !backend->collective_device)
    snprintf(why, WHY_BYTES, "the %s backend has no device collectives", backend->name);
  else if (plan->zero == 2)
    snprintf(why, WHY_BYTES, "ZeRO stage 2 reduces its gradient buckets to their owners with MPI_Reduce");
  for (int32_t g = 0; g < d->n_gradients && !why[0]; g++)
    if (plan->buffers[d->gradients[g]].region == TF_REGION_HOST)
      snprintf(why, WHY_BYTES, "gradient '%s' is in host memory (--offload gradients)",
               plan->buffers[d->gradients[g]].name);
}

#if TIGHTFIT_MPI
/* The job's first obstacle, every rank's alike: the lowest rank with one sends its reason to all
 * (into `why`, "" when no rank has one). */
static void agree_obstacle(const tf_dist *d, char *why) {
  const int mine = why[0] ? d->rank : d->size;
  int first = d->size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == d->size)
    return;
  char theirs[WHY_BYTES];
  memcpy(theirs, why, WHY_BYTES);
  MPI_Bcast(theirs, WHY_BYTES, MPI_CHAR, first, MPI_COMM_WORLD);
  if (first == d->rank || d->size == 1)
    return;
  snprintf(why, WHY_BYTES, "on rank %d, %.*s", first, WHY_BYTES - 40, theirs);
}

/* "" in `why`, or, every rank's alike, the first rank that cannot join a device communicator (its
 * NCCL does not load: collective_device says so) or the first two ranks that run on one device of
 * one host (NCCL refuses them). A rank that cannot join must say so here: were it to fail alone in
 * collective_init, the others would wait there for it for ever. */
static tf_status shared_device(const tf_dist *d, const tf_backend_vtable *backend, void *state, char *why) {
  enum { KEY = 256 };
  char mine[KEY] = "";
  gethostname(mine, 128);
  mine[127] = '\0';
  const size_t host = strlen(mine);
  mine[host] = '|';
  tf_status local = backend->collective_device(state, mine + host + 1, KEY - host - 1);
  if (local) { /* its key made unique, so that it pairs with no other rank's */
    snprintf(why, WHY_BYTES, "%s", tf_status_message(local));
    snprintf(mine + host + 1, KEY - host - 1, "rank %d without a device key", d->rank);
    tf_status_free(local);
  }
  char *all = calloc((size_t)d->size, KEY);
  if (!all)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %d ranks' devices", d->size);
  MPI_Allgather(mine, KEY, MPI_CHAR, all, KEY, MPI_CHAR, MPI_COMM_WORLD);
  for (int a = 0; a < d->size && !why[0]; a++)
    for (int b = a + 1; b < d->size && !why[0]; b++)
      if (strncmp(all + (size_t)a * KEY, all + (size_t)b * KEY, KEY) == 0) {
        const char *key = all + (size_t)a * KEY, *bar = strchr(key, '|');
        snprintf(why, WHY_BYTES, "ranks %d and %d share the GPU %s on host %.*s, and NCCL refuses two ranks on one GPU",
                 a, b, bar + 1, (int)(bar - key), key);
      }
  free(all);
  agree_obstacle(d, why);
  return NULL;
}
#endif

/* What rank 0 sends every rank: its communicator id, or why it has none. */
typedef struct id_message {
  int32_t ok;
  uint32_t bytes;
  char id[TF_COLLECTIVE_ID_BYTES];
  char why[WHY_BYTES];
} id_message;

/* Makes the backend's communicator of the job's ranks: rank 0's id to all (MPI_Bcast), then each
 * rank joins. The reason in `why`, every rank's alike, when rank 0 has no id (NCCL does not load) or a
 * rank's join failed (NCCL's own duplicate-GPU check), so that no rank uses it: the caller falls back
 * to MPI on the host, or refuses under TIGHTFIT_DIST_NCCL=1. */
static tf_status make_communicator(const tf_dist *d, const tf_backend_vtable *backend, void *state, char *why) {
  id_message message;
  memset(&message, 0, sizeof(message));
  tf_status status = NULL;
  if (d->rank == 0) {
    size_t bytes = 0;
    status = backend->collective_id(state, message.id, &bytes);
    message.ok = !status;
    message.bytes = (uint32_t)bytes;
    if (status)
      snprintf(message.why, WHY_BYTES, "%s", tf_status_message(status));
  }
#if TIGHTFIT_MPI
  if (d->active)
    MPI_Bcast(&message, (int)sizeof(message), MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
  tf_status_free(status);
  if (!message.ok) {
    snprintf(why, WHY_BYTES, "rank 0 made no NCCL communicator id: %.*s", WHY_BYTES - 48, message.why);
    return NULL;
  }
  status = backend->collective_init(state, d->active ? d->rank : 0, d->active ? d->size : 1, message.id, message.bytes);
  why[0] = '\0';
  if (status)
    snprintf(why, WHY_BYTES, "%s", tf_status_message(status));
#if TIGHTFIT_MPI
  if (d->active)
    agree_obstacle(d, why);
#endif
  tf_status_free(status); /* said in `why`: the caller refuses or falls back */
  return NULL;
}

/* Chooses d->sum for the session (collectively), makes the communicator for the device's sum, and
 * says which on rank 0. TIGHTFIT_DIST_NCCL=1 turns a fallback into an error. */
static tf_status choose_sum(tf_dist *d, tf_session *session) {
  d->sum = TF_DIST_SUM_NONE;
  if ((!d->active && d->nccl != TF_DIST_NCCL_REQUIRED) || (d->active && d->size == 1)) /* PMIx: one process */
    return NULL;
  void *state;
  void *const *regions;
  const tf_backend_vtable *backend = tf_session_backend(session, &state, &regions);
  char why[WHY_BYTES];
  local_obstacle(d, backend, why);
#if TIGHTFIT_MPI
  if (d->active) {
    agree_obstacle(d, why);
    if (!why[0])
      TF_RETURN_IF_ERROR(shared_device(d, backend, state, why));
  }
#endif
  if (!why[0])
    TF_RETURN_IF_ERROR(make_communicator(d, backend, state, why));
  const int ranks = d->active ? d->size : 1;
  if (why[0] && d->nccl == TF_DIST_NCCL_REQUIRED)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "TIGHTFIT_DIST_NCCL=1 asks for the gradients to be summed on the device (NCCL), but %s "
                         "(unset it, or set it to 0, to sum over MPI on the host)",
                         why);
  d->sum = why[0] ? TF_DIST_SUM_HOST : TF_DIST_SUM_DEVICE;
  if (d->rank == 0 && why[0])
    fprintf(tf_cli_err(), "tightfit train: %d ranks sum their gradients over MPI, host-staged (%s)\n", ranks, why);
  else if (d->rank == 0 && ranks == 1)
    fprintf(tf_cli_err(), "tightfit train: 1 rank sums its gradients on the device (%s all-reduce, NCCL)\n",
            backend->name);
  else if (d->rank == 0)
    fprintf(tf_cli_err(), "tightfit train: %d ranks sum their gradients on the device (%s all-reduce, NCCL)\n", ranks,
            backend->name);
  return NULL;
}

/* Every gradient buffer summed in place by the backend's all-reduce. */
static tf_status sum_on_device(const tf_dist *d, tf_session *session) {
  void *state;
  void *const *regions;
  const tf_backend_vtable *backend = tf_session_backend(session, &state, &regions);
  const tf_plan *plan = tf_session_plan(session);
  for (int32_t g = 0; g < d->n_gradients; g++) {
    const tf_plan_buffer *b = &plan->buffers[d->gradients[g]];
    tf_status status =
        backend->allreduce_sum(state, regions[b->region], b->offset, b->bytes / tf_dtype_size(b->dtype), b->dtype);
    if (status)
      return tf_status_prefix(status, "summing gradient '%s' across the ranks on the device", b->name);
  }
  return NULL;
}

tf_status tf_dist_sum_gradients(tf_dist *d, tf_session *session) {
  TF_RETURN_IF_ERROR(tf_dist_reduce_wait(d)); /* stage 2: the last bucket's reduction */
  if (d->sum == TF_DIST_SUM_UNCHOSEN)
    TF_RETURN_IF_ERROR(choose_sum(d, session));
  if (d->sum == TF_DIST_SUM_DEVICE)
    return sum_on_device(d, session);
  if (d->sum == TF_DIST_SUM_NONE || d->summed_at_pauses)
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
  tf_worker_destroy(d->reducer); /* waits for a reduction in flight: before MPI ends */
#if TIGHTFIT_MPI
  if (d->active)
    MPI_Finalize();
#endif
  free(d->staging);
  free(d->gradients);
  free(d->buckets);
  free(d->received);
  free(d->sent);
  memset(d, 0, sizeof(*d));
}
