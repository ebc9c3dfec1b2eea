/* TIGHTFIT_CPU_PROFILE=FILE ("-": stderr): where a CPU session's step time goes. Every run() times
 * each step's kernel call with the monotonic clock and adds it to that step's total; when the
 * session ends the totals go to FILE in the GPU profiles' format (plan/step_profile.h: per op, the
 * 25 slowest steps), then per phase with how many times its steps ran. Unset, the backend pays one
 * branch per run() and nothing per step. */
#ifndef TIGHTFIT_BACKENDS_CPU_PROFILE_H
#define TIGHTFIT_BACKENDS_CPU_PROFILE_H

#include "tightfit/plan.h"

typedef struct tf_cpu_profile tf_cpu_profile;

/* *out is NULL when TIGHTFIT_CPU_PROFILE is unset or empty; else a profile of `plan`'s steps, once
 * the file it names is known to be writable (a TF_ERR_IO status naming the variable and the path
 * otherwise). `threads` is written in the file's last line. tf_cpu_profile_finish frees it. */
tf_status tf_cpu_profile_start(const tf_plan *plan, int32_t threads, tf_cpu_profile **out);

/* Runs step(closure, s) for s in [begin, end), timing each call; counts one run. */
void tf_cpu_profile_run(tf_cpu_profile *profile, int32_t begin, int32_t end, void (*step)(void *closure, int32_t s),
                        void *closure);

/* Writes the tables (when anything ran) and frees the profile; NULL is allowed. */
void tf_cpu_profile_finish(tf_cpu_profile *profile);

#endif
