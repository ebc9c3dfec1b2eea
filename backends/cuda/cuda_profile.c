/* TIGHTFIT_CUDA_PROFILE=FILE: where the step time of a CUDA session goes. Every run() enqueues its
 * steps one by one (no graphs) with a CUDA event before each and one after the last, waits for them,
 * and adds each step's elapsed time to its total; when the plan is released the totals go to FILE
 * ("-" for stderr) as two tables: per op (total ms, launches, share) and the 25 slowest steps.
 * A diagnostic for finding slow kernels, not a timing to report: the per-step events and the wait
 * at the end of each run() add their own cost, and graphs are off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

typedef struct {
  int32_t step;
  double ms;
} step_time;

bool tf_cuda_profile_wanted(void) {
  const char *path = getenv("TIGHTFIT_CUDA_PROFILE");
  return path && path[0] != '\0';
}

tf_status tf_cuda_profile_start(cuda_state *s) {
  s->profile_ms = calloc((size_t)(s->n_steps ? s->n_steps : 1), sizeof(double));
  s->profile_events = calloc((size_t)s->n_steps + 1, sizeof(cudaEvent_t));
  if (!s->profile_ms || !s->profile_events)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot keep the profile of %d steps", s->n_steps);
  for (int32_t i = 0; i <= s->n_steps; i++)
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventCreate(&s->profile_events[i]), "creating a profile event"));
  return NULL;
}

tf_status tf_cuda_profile_run(cuda_state *s, int32_t begin, int32_t end, int32_t half,
                              tf_status (*launch)(const cuda_state *, int32_t, int32_t)) {
  for (int32_t i = begin; i < end; i++) {
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventRecord(s->profile_events[i], s->compute), "profile event"));
    TF_RETURN_IF_ERROR(launch(s, i, half));
  }
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventRecord(s->profile_events[end], s->compute), "profile event"));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventSynchronize(s->profile_events[end]), "profile wait"));
  for (int32_t i = begin; i < end; i++) {
    float ms = 0;
    TF_RETURN_IF_ERROR(
        tf_cuda_status(cudaEventElapsedTime(&ms, s->profile_events[i], s->profile_events[i + 1]), "profile time"));
    s->profile_ms[i] += ms;
  }
  s->profile_runs++;
  return NULL;
}

static int slower_first(const void *a, const void *b) {
  const double x = ((const step_time *)a)->ms, y = ((const step_time *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void write_tables(const cuda_state *s, FILE *out) {
  const tf_plan *plan = s->plan;
  double total = 0, by_op[TF_OP_COUNT] = {0};
  int32_t count[TF_OP_COUNT] = {0};
  step_time *steps = malloc(sizeof(step_time) * (size_t)(s->n_steps ? s->n_steps : 1));
  for (int32_t i = 0; i < s->n_steps; i++) {
    const tf_op op = plan->steps[i].op;
    total += s->profile_ms[i];
    if (op >= 0 && op < TF_OP_COUNT) {
      by_op[op] += s->profile_ms[i];
      count[op]++;
    }
    if (steps)
      steps[i] = (step_time){i, s->profile_ms[i]};
  }
  fprintf(out, "# tightfit CUDA profile: %d steps, %lld runs, %.3f ms in steps\n", s->n_steps,
          (long long)s->profile_runs, total);
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
  if (steps) {
    qsort(steps, (size_t)s->n_steps, sizeof(step_time), slower_first);
    fprintf(out, "# slowest steps\n");
    for (int32_t k = 0; k < s->n_steps && k < 25; k++) {
      const tf_plan_step *step = &plan->steps[steps[k].step];
      fprintf(out, "%5d %-28s %-40s %10.3f ms\n", steps[k].step, tf_op_name(step->op), step->name ? step->name : "?",
              steps[k].ms);
    }
  }
  free(steps);
}

void tf_cuda_profile_finish(cuda_state *s) {
  if (s->profile_ms && s->profile_runs > 0) {
    const char *path = getenv("TIGHTFIT_CUDA_PROFILE");
    FILE *out = strcmp(path, "-") == 0 ? stderr : fopen(path, "w");
    if (out) {
      write_tables(s, out);
      if (out != stderr)
        fclose(out);
    }
  }
  if (s->profile_events)
    for (int32_t i = 0; i <= s->n_steps; i++)
      if (s->profile_events[i])
        cudaEventDestroy(s->profile_events[i]);
  free(s->profile_events);
  free(s->profile_ms);
  s->profile_events = NULL;
  s->profile_ms = NULL;
  s->profile_runs = 0;
}
