/* The table a backend's step profile prints (TIGHTFIT_CUDA_PROFILE, TIGHTFIT_VULKAN_PROFILE,
 * TIGHTFIT_CPU_PROFILE): the time of every step of a plan, added over the runs that executed it, per
 * op and slowest first; the CPU's also per phase. */
#ifndef TIGHTFIT_PLAN_STEP_PROFILE_H
#define TIGHTFIT_PLAN_STEP_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "tightfit/plan.h"

/* Writes to `out`: a header naming `backend`, the steps and `runs`; the total per op, slowest first,
 * with its share; the 25 slowest steps with their names; and the products (matmul steps) grouped by
 * shape with their rate (the plan's FLOPs of each step times step_calls over the time). step_ms and
 * step_calls (how many times each step was timed) have plan->n_steps entries. */
void tf_step_profile_write(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, int64_t runs,
                           const char *backend, FILE *out);

/* Writes to `out` a "# phases" table: per phase of the plan (forward, recompute, backward, accumulate,
 * optimizer) its total, its steps, how many times they ran in all (step_calls, per step) and its share. */
void tf_step_profile_write_phases(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, FILE *out);

/* Opens the file an environment variable names for a profile: "-" is stderr; NULL when it cannot be
 * opened. tf_step_profile_close closes what this opened (never stderr). */
FILE *tf_step_profile_open(const char *path);
void tf_step_profile_close(FILE *out);

/* NULL when `path` (the value of `variable`) can be written, else a TF_ERR_IO status naming both and
 * the reason: asked when the profile starts, so that a bad path fails the session's creation rather
 * than losing the profile at its end. */
tf_status tf_step_profile_check(const char *variable, const char *path);

#endif
