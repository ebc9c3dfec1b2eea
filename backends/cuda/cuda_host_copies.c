/* An offloaded activation's copies run by the CUDA backend among its steps (cuda_copies.h has the
 * schedule and why it is safe). step_launch() (cuda_graphs.c) issues the copies placed before a
 * step, so every way of running steps issues them at their places: the warm-up, graph capture
 * (they become memcpy nodes: the host region is pinned), step by step, the profile. The copies down
 * run on the side stream only while a range is enqueued or captured (copies_side); elsewhere every
 * copy runs on the compute stream, in order. */
#include <stdlib.h>

#include "backends/cuda/cuda_internal.h"

tf_status tf_cuda_take_host_copies(void *state, const tf_plan *plan, void *host, const bool *copies) {
  cuda_state *s = state;
  (void)plan; /* scheduled by prepare, beside the fused groups (tf_cuda_host_copies_prepare) */
  s->host_region = host;
  s->host_copies = copies;
  if (!tf_cuda_env_flag("TIGHTFIT_CUDA_COPY_OVERLAP", true) || s->offload)
    return NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  TF_RETURN_IF_ERROR(
      tf_cuda_status(cudaStreamCreateWithFlags(&s->offload, cudaStreamNonBlocking), "creating the copies' stream"));
  TF_RETURN_IF_ERROR(
      tf_cuda_status(cudaEventCreateWithFlags(&s->offload_fork, cudaEventDisableTiming), "creating an event"));
  return tf_cuda_status(cudaEventCreateWithFlags(&s->offload_done, cudaEventDisableTiming), "creating an event");
}

tf_status tf_cuda_host_copies_prepare(cuda_state *s) {
  tf_cuda_copy_schedule_free(&s->copies);
  if (!s->host_copies)
    return NULL;
  tf_cuda_fusion *groups = calloc((size_t)(s->n_fused > 0 ? s->n_fused : 1), sizeof(tf_cuda_fusion));
  bool *kept = calloc((size_t)(s->n_fused > 0 ? s->n_fused : 1), sizeof(bool));
  int32_t *index = calloc((size_t)(s->n_fused > 0 ? s->n_fused : 1), sizeof(int32_t));
  int32_t n = 0;
  tf_status status = groups && kept && index
                         ? NULL
                         : tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot list %d groups", s->n_fused);
  for (int32_t g = 0; !status && g < s->n_fused; g++)
    if (s->fused[g].active) {
      index[n] = g;
      groups[n++] = s->fused[g].group;
    }
  if (!status)
    status = tf_cuda_copy_schedule_make(s->plan, s->host_copies, groups, n, kept, &s->copies);
  for (int32_t i = 0; !status && i < n; i++)
    if (!kept[i])
      tf_cuda_fused_disable(s, index[i], "an offloaded activation's copy runs inside its span");
  free(groups);
  free(kept);
  free(index);
  return status;
}

void tf_cuda_host_copies_release(cuda_state *s) {
  tf_cuda_copy_schedule_free(&s->copies);
  if (s->offload_fork)
    cudaEventDestroy(s->offload_fork);
  if (s->offload_done)
    cudaEventDestroy(s->offload_done);
  if (s->offload)
    cudaStreamDestroy(s->offload);
  s->offload_fork = s->offload_done = NULL;
  s->offload = NULL;
}

/* Where buffer `id` lies on io half `half`: the pinned host region, or a device region. */
static void *address_of(const cuda_state *s, int32_t id, int32_t half) {
  const tf_plan *plan = s->plan;
  if (half == 1 && plan->buffers[id].io_twin >= 0)
    id = plan->buffers[id].io_twin;
  const tf_plan_buffer *b = &plan->buffers[id];
  return (b->region == TF_REGION_HOST ? s->host_region : (char *)s->regions[b->region]) + b->offset;
}

tf_status tf_cuda_host_copies_join(cuda_state *s) {
  if (!s->copies_pending)
    return NULL;
  s->copies_pending = false;
  return tf_cuda_status(cudaStreamWaitEvent(s->compute, s->offload_done, 0), "waiting for the copies to the host");
}

/* Copy c on the side stream, forked from the compute stream at this point. */
static cudaError_t copy_beside(cuda_state *s, void *to, const void *from, size_t bytes) {
  cudaError_t error = cudaEventRecord(s->offload_fork, s->compute);
  if (error == cudaSuccess)
    error = cudaStreamWaitEvent(s->offload, s->offload_fork, 0);
  if (error == cudaSuccess)
    error = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s->offload);
  if (error == cudaSuccess)
    error = cudaEventRecord(s->offload_done, s->offload);
  s->copies_pending = s->copies_pending || error == cudaSuccess;
  return error;
}

tf_status tf_cuda_host_copies_at(cuda_state *s, int32_t at, int32_t half) {
  const tf_cuda_copy_schedule *k = &s->copies;
  if (!k->first)
    return NULL;
  if (at < s->plan->micro_steps && k->join_before[at])
    TF_RETURN_IF_ERROR(tf_cuda_host_copies_join(s));
  for (int32_t c = k->first[at]; c < k->first[at + 1]; c++) {
    const tf_plan_step *step = &s->plan->host_steps[k->copies[c].host_step];
    void *to = address_of(s, step->outputs[0], half);
    const void *from = address_of(s, step->inputs[0], half);
    const size_t bytes = (size_t)s->plan->buffers[step->inputs[0]].bytes;
    const bool beside = k->copies[c].beside && s->copies_side && s->offload;
    if (!beside) /* in order: after the copies down in flight (a copy back may read what they write) */
      TF_RETURN_IF_ERROR(tf_cuda_host_copies_join(s));
    const cudaError_t error =
        beside ? copy_beside(s, to, from, bytes) : cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s->compute);
    if (error != cudaSuccess)
      return tf_status_new(
          TF_ERR_BACKEND, "cuda backend: host step %d '%s' (%zu bytes %s the host, before step %d): %s",
          k->copies[c].host_step, step->name, bytes, k->copies[c].down ? "to" : "from", at, cudaGetErrorString(error));
  }
  return NULL;
}
