/* Data-parallel training for `tightfit train` (issue 45, ZeRO stage 0): a plan compiled with --ranks R
 * runs as R processes under mpirun, each on its own micro-batches; before each optimizer step the
 * gradients are summed across the ranks with MPI (Open MPI, host-staged: downloaded, summed,
 * uploaded), so every rank applies the same update and the weights stay equal. Rank 0 prints and
 * writes checkpoints; every rank can load one (--resume), since each holds the whole state.
 *
 * Failures end the whole job: what every rank meets alike (another plan or other arguments on one
 * rank, the wrong process count) is agreed on collectively and refused by every rank at start; what
 * one rank meets alone (its data unreadable, a NaN, a lost lock) ends the job with MPI_Abort, naming
 * the rank, so no rank is left waiting in a sum. Without MPI in the build, or outside mpirun, a plan
 * of R > 1 is refused. */
#ifndef TIGHTFIT_TOOLS_DIST_H
#define TIGHTFIT_TOOLS_DIST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tightfit/plan.h"
#include "tightfit/runtime.h"

/* How a job sums its gradients (tf_dist_sum_gradients chooses at its first call, every rank alike). */
typedef enum tf_dist_sum {
  TF_DIST_SUM_UNCHOSEN = 0,
  TF_DIST_SUM_NONE,   /* one process: nothing to sum */
  TF_DIST_SUM_HOST,   /* over MPI, host-staged: downloaded, MPI_Allreduce, uploaded */
  TF_DIST_SUM_DEVICE, /* the backend's all-reduce on the device (CUDA: NCCL), on its compute stream */
} tf_dist_sum;

/* TIGHTFIT_DIST_NCCL: unset (or empty) the device's all-reduce where the backend has one and the job
 * can use it (more than one rank, each on its own GPU), else host-staged MPI with a note; 0 always
 * host-staged; 1 the device's or an error, even for one process (a communicator of one rank). */
typedef enum tf_dist_nccl { TF_DIST_NCCL_AUTO = 0, TF_DIST_NCCL_OFF, TF_DIST_NCCL_REQUIRED } tf_dist_nccl;

typedef struct tf_dist {
  bool active; /* MPI is initialised: a job of more than one process */
  int rank, size;
  float *staging; /* the largest gradient buffer, for the sum; NULL once summed at pauses (stage 0) */
  int64_t staging_bytes;
  int32_t *gradients; /* the plan's gradient buffers to sum, found once at start */
  int32_t n_gradients;
  bool failed_alone;   /* tf_dist_start's error is this rank's alone (no memory, its plan unreadable) */
  const tf_plan *plan; /* the job's plan (tf_dist_start) */
  /* ZeRO stage 2 (tools/dist_buckets.c): each gradient bucket, its shard, the step after which it is
   * reduced (by that step) and its place in the send buffer; the session paused there; the send and
   * receive buffers (the most bytes one pause reduces); the reduction in flight (the pause's step,
   * -1 none; whether it is the step's first or last micro-batch) on the reducer's thread (NULL: at the
   * pause); with a norm to clip by, the sum of squares of what this rank owns. */
  struct tf_dist_bucket *buckets;
  int32_t n_buckets;
  tf_session *session;
  float *sent, *received;
  int64_t pause_bytes;
  int32_t pending;
  bool pending_first, pending_last;
  double norm_partial; /* --clip: the sum of squares of this rank's summed ranges in the step's last micro-batch */
  struct tf_worker *reducer;
  int32_t threads;       /* each rank's compute threads (train --threads): whether a reducer has a core */
  bool summed_at_pauses; /* stage 0: the gradients summed in the backward pass (tools/dist_buckets.c) */
  tf_dist_nccl nccl;     /* TIGHTFIT_DIST_NCCL, read by tf_dist_start */
  tf_dist_sum sum;       /* how the gradients are summed, chosen at the first tf_dist_sum_gradients */
} tf_dist;

/* A gradient bucket of a ZeRO stage-2 plan: reduced after step `last` into `shard` (its owner's, or
 * its pieces' ranks), staged at byte `at` of the send buffer. */
typedef struct tf_dist_bucket {
  int32_t bucket, shard, last;
  int64_t at;
} tf_dist_bucket;

/* What the ranks of a job must agree on (threads, device, logging and saving need not). */
typedef struct tf_dist_job {
  const char *plan_path, *data, *checkpoint, *init_from, *init_map, *weights_dir; /* NULL: not given */
  int64_t steps, loss_scale_window;
  uint64_t seed;
  bool resume;
} tf_dist_job;

/* Joins the job when a launcher (mpirun) started more than one process: MPI_Init, this rank and the
 * world's size; nothing for one process. Call it first, so that tf_dist_abort covers every failure. */
tf_status tf_dist_join(tf_dist *d) TF_MUST_USE;
/* Checks `plan` against the job, collectively: each rank's `job` against rank 0's (the plan by its
 * file's XXH64, the data folder by its .npy files' names and sizes, the rest as given), then
 * plan->ranks against the world's size; finds the gradient buffers. A refusal is every rank's alike
 * (rank 0 reports it) unless d->failed_alone (then tf_dist_abort). A plan of one rank in one
 * process: nothing. */
tf_status tf_dist_start(const tf_plan *plan, const tf_dist_job *job, tf_dist *d) TF_MUST_USE;
/* The lines of `job` every rank must share, in tf_dist_agree's form (the plan by its file's XXH64,
 * the data folder by its .npy files' names and sizes, the rest as given); the caller frees *out. */
tf_status tf_dist_identity(const tf_dist_job *job, char **out) TF_MUST_USE;
/* Every rank's `lines` against rank 0's (collective): lines "KEY\tSHOWN\n", compared by KEY and
 * named by SHOWN, e.g. "--steps 6\t--steps 6\n". A difference is an error naming the first rank that
 * differs and its first differing line, with rank 0's, then `rule`; every rank returns it. */
tf_status tf_dist_agree(const tf_dist *d, const char *lines, const char *rule) TF_MUST_USE;
/* Sums every gradient buffer of the session across the ranks (all end with the same sums); nothing at
 * ZeRO stage 2 (tf_dist_reduce_buckets reduces them in the backward pass). Its first call chooses
 * how, collectively (tf_dist_nccl): on the device with the backend's all-reduce (CUDA: NCCL, its
 * communicator made there: rank 0's id sent with MPI_Bcast) or host-staged over MPI, where the
 * backend has no collectives, TIGHTFIT_DIST_NCCL is 0, the gradients are in host memory, two ranks
 * share a GPU or NCCL refuses the communicator; rank 0 says which on tf_cli_err(). */
tf_status tf_dist_sum_gradients(tf_dist *d, tf_session *session) TF_MUST_USE;
/* ZeRO stage 2 (tools/dist_buckets.c): pauses `session`'s micro-batch blocks after the last step of
 * each gradient bucket, where the ranks reduce it to the owners of its shard (MPI_Reduce to each
 * range's rank, host-staged; on a thread of its own while the backward pass goes on where the machine
 * has a core for it beside d->threads a rank, or TIGHTFIT_DIST_OVERLAP=1; 0 never), who write the sum
 * (the step's first micro-batch) or add it to their shard; rank 0 says which on tf_cli_err().
 * Nothing for other plans or without a job. */
tf_status tf_dist_reduce_buckets(tf_dist *d, tf_session *session) TF_MUST_USE;
/* Waits for the reduction still in flight after a micro-batch (stage 2, or stage 0 summed at its
 * pauses) and writes its sums; nothing otherwise. tf_dist_sum_gradients calls it first. */
tf_status tf_dist_reduce_wait(tf_dist *d) TF_MUST_USE;
/* ZeRO stage 1 (tools/dist_zero.c): after each optimizer step, every parameter, or range of a split
 * one, from the rank that updated it (it holds its state) to every other rank; nothing without ZeRO
 * or a job. */
tf_status tf_dist_share_updates(tf_dist *d, tf_session *session) TF_MUST_USE;
/* The remote read of rank 0's session (tf_session_set_remote_read, context: the tf_dist): a buffer of
 * another rank's shard, received from it while rank 0 writes a checkpoint. */
tf_status tf_dist_receive_shard(void *context, int32_t buffer, void *data, int64_t bytes);
/* The other side of a checkpoint: every rank but 0 sends its shard's buffers, in the order rank 0
 * reads them (by id, a state held in pieces as its pieces), when rank 0 writes one (each save of
 * rank 0 has its send on every other rank). */
tf_status tf_dist_send_shard(tf_dist *d, tf_session *session) TF_MUST_USE;
/* The end of a step: the mean of `loss` over the ranks, and in *stop_any whether any rank asked to
 * stop (`stop`: a signal), so that all stop after the same step; without a job, `loss` and `stop`. */
double tf_dist_step_end(const tf_dist *d, double loss, bool stop, bool *stop_any);
/* Ends every process of the job after this rank failed with exit `code`: says so on `err` with the
 * rank, then MPI_Abort (Open MPI kills the others). Returns only without a job. */
void tf_dist_abort(const tf_dist *d, int code, FILE *err);
/* Ends the job's communication (MPI_Finalize, which waits for every rank) and frees the staging. */
void tf_dist_finish(tf_dist *d);

#endif
