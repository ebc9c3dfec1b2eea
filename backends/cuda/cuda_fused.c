/* The fused groups of a prepared plan (cuda_fuse.h finds them; cuda_lt.c runs the GEMM groups;
 * kernels/cuda/optimizer.cu's tf_cuda_optimizer_launch_multi runs the optimizer groups).
 *
 * Per step, the group it belongs to: step_launch() (cuda_graphs.c) asks tf_cuda_fused_launch()
 * first, so every way of running steps (the warm-up, graph capture, step by step, the profile)
 * launches a group once at its launch step and nothing at its other steps. A group that cuBLASLt
 * refuses at prepare, or whose launch fails in the warm-up (cuda_warmup.c disables it there), is
 * inactive: its steps launch as compiled. The reasons are kept in cuda_fused.why; with
 * TIGHTFIT_CUDA_PROFILE set they are written to the profile's file with the groups. */
#define _POSIX_C_SOURCE 200809L
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

void tf_cuda_fused_disable(cuda_state *s, int32_t g, const char *why) {
  cuda_fused *f = &s->fused[g];
  f->active = false;
  snprintf(f->why, sizeof(f->why), "%s", why);
  tf_cuda_lt_free(f->lt);
  f->lt = NULL;
}

/* A bias+gelu group as a bias group (matmul, add; the gelu launches as compiled) when nothing runs
 * between its matmul and its add, so that writing z at the matmul moves no write past another step. */
static bool downgrade_gelu(const tf_plan *plan, tf_cuda_fusion *f) {
  if ((f->kind != TF_CUDA_FUSION_BIAS_GELU && f->kind != TF_CUDA_FUSION_BIAS_GELU_AUX) || f->n_members != 3 ||
      f->members[1] != f->members[0] + 1)
    return false;
  f->kind = TF_CUDA_FUSION_BIAS;
  f->n_members = 2;
  f->last = f->members[1];
  f->output = plan->steps[f->members[1]].outputs[0]; /* z, the add's output */
  f->aux = -1;
  return true;
}

tf_status tf_cuda_fused_prepare(cuda_state *s) {
  const tf_plan *plan = s->plan;
  tf_cuda_fusion *groups = NULL;
  int32_t count = 0;
  tf_cuda_fusion_options options;
  TF_RETURN_IF_ERROR(tf_cuda_fusion_options_from_env(&options));
  TF_RETURN_IF_ERROR(tf_cuda_fusion_find(plan, options, &groups, &count));
  s->fused_of_step = malloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1) * sizeof(int32_t));
  s->fused = calloc((size_t)(count > 0 ? count : 1), sizeof(cuda_fused));
  if (!s->fused_of_step || !s->fused) {
    free(groups);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot keep %d fused groups", count);
  }
  for (int32_t i = 0; i < plan->n_steps; i++)
    s->fused_of_step[i] = -1;
  s->n_fused = count;
  for (int32_t g = 0; g < count; g++) {
    cuda_fused *f = &s->fused[g];
    f->group = groups[g];
    f->active = true;
    if (f->group.kind != TF_CUDA_FUSION_OPTIMIZER) {
      tf_status refused = tf_cuda_lt_prepare(s, &f->group, &f->lt);
      if (refused && tf_status_code(refused) != TF_ERR_OUT_OF_MEMORY && downgrade_gelu(plan, &f->group)) {
        tf_status_free(refused); /* cuBLASLt has no GELU epilogue for this GEMM: the bias alone */
        refused = tf_cuda_lt_prepare(s, &f->group, &f->lt);
      }
      if (refused) {
        const bool memory = tf_status_code(refused) == TF_ERR_OUT_OF_MEMORY;
        tf_cuda_fused_disable(s, g, tf_status_message(refused));
        if (memory) {
          free(groups);
          return refused;
        }
        tf_status_free(refused);
      }
    }
    for (int32_t i = f->group.first; i <= f->group.last; i++) {
      bool member = f->group.kind == TF_CUDA_FUSION_OPTIMIZER;
      for (int32_t k = 0; k < f->group.n_members && !member; k++)
        member = f->group.members[k] == i;
      if (member)
        s->fused_of_step[i] = g;
    }
  }
  free(groups);
  return NULL;
}

bool tf_cuda_fused_leads(const cuda_state *s, int32_t i, int32_t *group) {
  if (!s->fused_of_step || i < 0 || i >= s->n_steps)
    return false;
  const int32_t g = s->fused_of_step[i];
  if (g < 0 || !s->fused[g].active || s->fused[g].group.launch_step != i)
    return false;
  *group = g;
  return true;
}

/* The optimizer group's updates (every other step with zero_grads), as launch arguments for `half`. */
static tf_status launch_optimizer(const cuda_state *s, const tf_cuda_fusion *g, int32_t half) {
  enum { BATCH = 1024 };
  const tf_cuda_args *list[BATCH];
  const int32_t stride = g->zero_grads ? 2 : 1, count = (g->last - g->first + 1) / stride;
  if (count > BATCH) /* tf_cuda_optimizer_launch_multi computes the coefficients for the whole list once */
    return tf_status_new(TF_ERR_INTERNAL, "multi-tensor update of %d tensors, above %d", count, BATCH);
  for (int32_t i = 0; i < count; i++)
    list[i] = &s->steps[g->first + i * stride].args[half];
  return tf_cuda_optimizer_launch_multi(list, count, g->zero_grads);
}

tf_status tf_cuda_fused_launch(const cuda_state *s, int32_t i, int32_t half, bool *handled) {
  *handled = false;
  if (!s->fused_of_step)
    return NULL;
  const int32_t g = s->fused_of_step[i];
  if (g < 0 || !s->fused[g].active)
    return NULL;
  *handled = true;
  const cuda_fused *f = &s->fused[g];
  if (f->group.launch_step != i)
    return NULL; /* the launch step does this step's work */
  if (f->group.kind == TF_CUDA_FUSION_OPTIMIZER)
    return launch_optimizer(s, &f->group, half);
  return tf_cuda_lt_launch(s, &f->group, f->lt, half);
}

void tf_cuda_fused_release(cuda_state *s) {
  for (int32_t g = 0; g < s->n_fused; g++)
    tf_cuda_lt_free(s->fused[g].lt);
  free(s->fused);
  free(s->fused_of_step);
  s->fused = NULL;
  s->fused_of_step = NULL;
  s->n_fused = 0;
  if (s->cublaslt)
    cublasLtDestroy((cublasLtHandle_t)s->cublaslt);
  s->cublaslt = NULL;
}
