/* The step profile's tables (plan/step_profile.h). */
#include "plan/step_profile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int32_t step;
  double ms;
} step_time;

static int slower_first(const void *a, const void *b) {
  const double x = ((const step_time *)a)->ms, y = ((const step_time *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void write_ops(const tf_plan *plan, const double *step_ms, double total, FILE *out) {
  double by_op[TF_OP_COUNT] = {0};
  int32_t count[TF_OP_COUNT] = {0};
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_op op = plan->steps[i].op;
    if (op >= 0 && op < TF_OP_COUNT) {
      by_op[op] += step_ms[i];
      count[op]++;
    }
  }
  fprintf(out, "%-34s %12s %8s %7s\n", "op", "total ms", "steps", "share");
  for (;;) { /* ops by total, slowest first */
    int best = -1;
    for (int op = 0; op < TF_OP_COUNT; op++)
      if (count[op] && (best < 0 || by_op[op] > by_op[best]))
        best = op;
    if (best < 0)
      break;
    fprintf(out, "%-34s %12.3f %8d %6.1f%%\n", tf_op_name((tf_op)best), by_op[best], count[best],
            total > 0 ? 100.0 * by_op[best] / total : 0.0);
    count[best] = 0;
  }
}

void tf_step_profile_write(const tf_plan *plan, const double *step_ms, int64_t runs, const char *backend, FILE *out) {
  double total = 0;
  for (int32_t i = 0; i < plan->n_steps; i++)
    total += step_ms[i];
  fprintf(out, "# tightfit %s profile: %d steps, %lld runs, %.3f ms in steps\n", backend, plan->n_steps,
          (long long)runs, total);
  write_ops(plan, step_ms, total, out);
  step_time *steps = malloc(sizeof(step_time) * (size_t)(plan->n_steps ? plan->n_steps : 1));
  if (!steps)
    return;
  for (int32_t i = 0; i < plan->n_steps; i++)
    steps[i] = (step_time){i, step_ms[i]};
  qsort(steps, (size_t)plan->n_steps, sizeof(step_time), slower_first);
  fprintf(out, "# slowest steps\n");
  for (int32_t k = 0; k < plan->n_steps && k < 25; k++) {
    const tf_plan_step *step = &plan->steps[steps[k].step];
    fprintf(out, "%5d %-28s %-40s %10.3f ms\n", steps[k].step, tf_op_name(step->op), step->name ? step->name : "?",
            steps[k].ms);
  }
  free(steps);
}

void tf_step_profile_write_phases(const tf_plan *plan, const double *step_ms, const int64_t *step_calls, FILE *out) {
  double by_phase[TF_PHASE_COUNT] = {0}, total = 0;
  int32_t steps[TF_PHASE_COUNT] = {0};
  int64_t calls[TF_PHASE_COUNT] = {0};
  for (int32_t i = 0; i < plan->n_steps; i++) {
    const tf_phase phase = plan->steps[i].phase;
    total += step_ms[i];
    if (phase >= 0 && phase < TF_PHASE_COUNT) {
      by_phase[phase] += step_ms[i];
      steps[phase]++;
      calls[phase] += step_calls[i];
    }
  }
  fprintf(out, "# phases\n%-34s %12s %8s %8s %7s\n", "phase", "total ms", "steps", "calls", "share");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++) /* in the order a step runs them */
    if (steps[phase])
      fprintf(out, "%-34s %12.3f %8d %8lld %6.1f%%\n", tf_phase_name((tf_phase)phase), by_phase[phase], steps[phase],
              (long long)calls[phase], total > 0 ? 100.0 * by_phase[phase] / total : 0.0);
}

FILE *tf_step_profile_open(const char *path) {
  if (!path || !path[0])
    return NULL;
  return strcmp(path, "-") == 0 ? stderr : fopen(path, "w");
}

void tf_step_profile_close(FILE *out) {
  if (out && out != stderr)
    fclose(out);
}

tf_status tf_step_profile_check(const char *variable, const char *path) {
  FILE *out = tf_step_profile_open(path);
  if (!out)
    return tf_status_new(TF_ERR_IO, "%s: cannot write the profile to '%s': %s", variable, path ? path : "",
                         strerror(errno));
  tf_step_profile_close(out);
  return NULL;
}
