/* TIGHTFIT_CUDA_PROFILE=FILE: where the step time of a CUDA session goes. Every run() enqueues its
 * steps one by one (no graphs) with a CUDA event before each and one after the last, waits for them,
 * and adds each step's elapsed time to its total; when the plan is released the totals go to FILE
 * ("-" for stderr) as tables: per op (total ms, launches, share), the 25 slowest steps and the
 * products by shape with their rates.
 * A diagnostic for finding slow kernels, not a timing to report: the per-step events and the wait
 * at the end of each run() add their own cost, and graphs are off. */
#include <stdio.h>
#include <stdlib.h>

#include "backends/cuda/cuda_internal.h"
#include "plan/step_profile.h"

bool tf_cuda_profile_wanted(void) {
  const char *path = getenv("TIGHTFIT_CUDA_PROFILE");
  return path && path[0] != '\0';
}

tf_status tf_cuda_profile_start(cuda_state *s) {
  TF_RETURN_IF_ERROR(tf_step_profile_check("TIGHTFIT_CUDA_PROFILE", getenv("TIGHTFIT_CUDA_PROFILE")));
  s->profile_ms = calloc((size_t)(s->n_steps ? s->n_steps : 1), sizeof(double));
  s->profile_calls = calloc((size_t)(s->n_steps ? s->n_steps : 1), sizeof(int64_t));
  s->profile_events = calloc((size_t)s->n_steps + 1, sizeof(cudaEvent_t));
  if (!s->profile_ms || !s->profile_calls || !s->profile_events)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot keep the profile of %d steps", s->n_steps);
  for (int32_t i = 0; i <= s->n_steps; i++)
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventCreate(&s->profile_events[i]), "creating a profile event"));
  return NULL;
}

tf_status tf_cuda_profile_run(cuda_state *s, int32_t begin, int32_t end, int32_t half,
                              tf_status (*launch)(cuda_state *, int32_t, int32_t)) {
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
    s->profile_calls[i]++;
  }
  s->profile_runs++;
  return NULL;
}

/* The fused groups (cuda_fused.c): a group's time is its launch step's, its other steps show 0. */
static void write_fused(const cuda_state *s, FILE *out) {
  int32_t active = 0;
  for (int32_t g = 0; g < s->n_fused; g++)
    active += s->fused[g].active;
  fprintf(out, "\nfused groups: %d of %d active (a group's time is its launch step's; its other steps show 0)\n",
          active, s->n_fused);
  for (int32_t g = 0; g < s->n_fused; g++) {
    char text[160];
    tf_cuda_fusion_describe(&s->fused[g].group, text, sizeof(text));
    fprintf(out, "  %s%s%s\n", text, s->fused[g].active ? "" : ": off, ", s->fused[g].active ? "" : s->fused[g].why);
  }
}

void tf_cuda_profile_finish(cuda_state *s) {
  if (s->profile_ms && s->profile_runs > 0) {
    FILE *out = tf_step_profile_open(getenv("TIGHTFIT_CUDA_PROFILE"));
    if (out) {
      tf_step_profile_write(s->plan, s->profile_ms, s->profile_calls, s->profile_runs, "CUDA", out);
      write_fused(s, out);
    }
    tf_step_profile_close(out);
  }
  if (s->profile_events)
    for (int32_t i = 0; i <= s->n_steps; i++)
      if (s->profile_events[i])
        cudaEventDestroy(s->profile_events[i]);
  free(s->profile_events);
  free(s->profile_ms);
  free(s->profile_calls);
  s->profile_events = NULL;
  s->profile_ms = NULL;
  s->profile_calls = NULL;
  s->profile_runs = 0;
}
