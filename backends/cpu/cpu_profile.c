/* TIGHTFIT_CPU_PROFILE (cpu_profile.h). A kernel returns when its work is done (its OpenMP team
 * joins inside the call), so the wall time around the call is the step's time, threads included.
 * The path is copied at the start: the file written at the end is the one checked then. */
#define _POSIX_C_SOURCE 200809L
#include "backends/cpu/cpu_profile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/blas_info.h"
#include "plan/step_profile.h"

#define CPU_PROFILE_VARIABLE "TIGHTFIT_CPU_PROFILE"

struct tf_cpu_profile {
  const tf_plan *plan;
  char *path;
  int32_t threads;
  double *step_ms;     /* per plan step, added over the runs */
  int64_t *step_calls; /* per plan step: how many times it ran */
  int64_t runs;
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

tf_status tf_cpu_profile_start(const tf_plan *plan, int32_t threads, tf_cpu_profile **out) {
  *out = NULL;
  const char *path = getenv(CPU_PROFILE_VARIABLE);
  if (!path || !path[0])
    return NULL;
  TF_RETURN_IF_ERROR(tf_step_profile_check(CPU_PROFILE_VARIABLE, path));
  tf_cpu_profile *profile = calloc(1, sizeof(tf_cpu_profile));
  const size_t slots = (size_t)(plan->n_steps ? plan->n_steps : 1);
  if (profile) {
    profile->path = strdup(path);
    profile->step_ms = calloc(slots, sizeof(double));
    profile->step_calls = calloc(slots, sizeof(int64_t));
  }
  if (!profile || !profile->path || !profile->step_ms || !profile->step_calls) {
    tf_cpu_profile_finish(profile);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot keep the profile of %d steps", plan->n_steps);
  }
  profile->plan = plan;
  profile->threads = threads;
  *out = profile;
  return NULL;
}

void tf_cpu_profile_run(tf_cpu_profile *profile, int32_t begin, int32_t end, void (*step)(void *closure, int32_t s),
                        void *closure) {
  for (int32_t s = begin; s < end; s++) {
    const double start = now_ms();
    step(closure, s);
    profile->step_ms[s] += now_ms() - start;
    profile->step_calls[s]++;
  }
  profile->runs++;
}

void tf_cpu_profile_finish(tf_cpu_profile *profile) {
  if (!profile)
    return;
  if (profile->runs > 0 && profile->plan) {
    FILE *out = tf_step_profile_open(profile->path);
    if (out) {
      tf_step_profile_write(profile->plan, profile->step_ms, profile->step_calls, profile->runs, "CPU", out);
      tf_step_profile_write_phases(profile->plan, profile->step_ms, profile->step_calls, out);
      char blas[256];
      tf_cpu_blas_describe(blas, sizeof(blas));
      fprintf(out, "# threads: %d; %s\n", profile->threads, blas);
    }
    tf_step_profile_close(out);
  }
  free(profile->path);
  free(profile->step_ms);
  free(profile->step_calls);
  free(profile);
}
