/* Data-parallel training for `tightfit train` (issue 45, first part): a plan compiled with
 * --ranks R runs as R processes under mpirun, each on its own micro-batches; before each optimizer
 * step the gradients are summed across the ranks with MPI (Open MPI, host-staged: downloaded, summed,
 * uploaded), so every rank applies the same update and the weights stay equal. Rank 0 prints and
 * writes checkpoints. Without MPI in the build, or outside mpirun, a plan of R > 1 is refused. */
#ifndef TIGHTFIT_TOOLS_DIST_H
#define TIGHTFIT_TOOLS_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "tightfit/plan.h"
#include "tightfit/runtime.h"

typedef struct tf_dist {
  bool active; /* a plan of more than one rank, under MPI */
  int rank, size;
  float *staging; /* the largest gradient buffer, for the sum */
  int64_t staging_bytes;
  int32_t *gradients; /* the plan's gradient buffers to sum, found once at start */
  int32_t n_gradients;
} tf_dist;

/* Starts the job's communication for `plan` (nothing for a plan of one rank): MPI's, the world's
 * size checked against plan->ranks. Errors say what is missing (MPI in the build, mpirun). */
tf_status tf_dist_start(const tf_plan *plan, tf_dist *d) TF_MUST_USE;
/* Sums every gradient buffer of the session across the ranks (all end with the same sums). */
tf_status tf_dist_sum_gradients(tf_dist *d, tf_session *session) TF_MUST_USE;
/* The mean of `value` over the ranks (a loss to print); `value` itself without a job. */
double tf_dist_mean(const tf_dist *d, double value);
/* Ends the job's communication (MPI_Finalize) and frees the staging. */
void tf_dist_finish(tf_dist *d);

#endif
