/* Preparing and running a plan on CUDA.
 *
 * prepare() checks that every step has a kernel that supports its operands and the workspace its
 * CUDA kernel needs (core/workspace_cuda.h: a plan compiled for another target has other
 * workspaces), builds each step's launch arguments once per io half, then warms up: every step runs
 * once, eagerly and step by step, each waited for and checked (cuda_warmup.c, which restores the
 * regions afterwards). Only then does it capture CUDA graphs: the micro-batch block
 * [0, micro_steps) and the forward prefix [0, forward_end) for each io half, and the optimizer block
 * [micro_steps, n_steps). Warming up first means that nothing happens for the first time inside a
 * capture or after prepare() returns: lazily loaded kernel modules, cuBLAS's first-call setup and
 * kernel selection, and any first-launch device allocation are done, and measured, in prepare();
 * and a kernel that fails on this device fails here, named, not inside an anonymous graph replay.
 *
 * run() replays the graph of its range; any other range is launched step by step (no graph, no
 * allocation). Two switches in the environment, read by prepare():
 *   - TIGHTFIT_CUDA_GRAPHS=0: no stream capture at all; every range is launched step by step (to
 *     tell a graph problem from a kernel problem). The warm-up already loaded every module.
 *   - TIGHTFIT_CUDA_SYNC=1 (any value but empty or 0): no graphs either, and run() waits for each
 *     step, so a failure is reported at the step that caused it, with its name, op and operands.
 *
 * Per-run values: each graph reads its own slot of mapped pinned host memory (tf_cuda_run_values),
 * which run() writes before the replay, after waiting for the previous replay that read the slot.
 * The kernels read the slot when they run, so a captured graph needs no parameter updates. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "core/workspace_cuda.h"

static tf_cuda_tensor tensor_of(const tf_plan *plan, void *const *regions, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return tf_tensor_ref_make((char *)regions[b->region] + b->offset, b->dtype, b->rank, b->shape);
}

/* `status` (NULL stays NULL) prefixed with step `s`: what prepare() refuses. */
static tf_status step_error(const tf_plan *plan, int32_t s, tf_status status) {
  const tf_plan_step *step = &plan->steps[s];
  return tf_status_prefix(status, "cuda backend: step %d '%s' (%s)", s, step->name, tf_op_name(step->op));
}

/* The launch arguments of step `s` for both io halves, and the checks that need them. */
static tf_status prepare_step(cuda_state *cs, int32_t s) {
  const tf_plan *plan = cs->plan;
  const tf_plan_step *step = &plan->steps[s];
  cuda_step *prepared = &cs->steps[s];
  for (int32_t k = 0; k < step->n_outputs; k++)
    prepared->outputs[k] = tensor_of(plan, cs->regions, step->outputs[k]);
  for (int32_t half = 0; half < 2; half++) {
    prepared->inputs[half] = calloc((size_t)(step->n_inputs ? step->n_inputs : 1), sizeof(tf_cuda_tensor));
    if (!prepared->inputs[half])
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot prepare step %d", s);
    for (int32_t k = 0; k < step->n_inputs; k++) {
      int32_t id = step->inputs[k];
      if (half == 1 && plan->buffers[id].io_twin >= 0)
        id = plan->buffers[id].io_twin;
      prepared->inputs[half][k] = tensor_of(plan, cs->regions, id);
    }
    tf_cuda_args *args = &prepared->args[half];
    args->op = step->op;
    args->attrs = &step->attrs;
    args->n_inputs = step->n_inputs;
    args->inputs = prepared->inputs[half];
    args->n_outputs = step->n_outputs;
    args->outputs = prepared->outputs;
    args->stream = cs->compute;
    args->cublas = cs->cublas;
    args->math = plan->matmul_math;
    args->run = &cs->slots_device[s < plan->micro_steps ? half : CUDA_SLOT_OTHER];
    if (step->workspace >= 0) {
      const tf_plan_buffer *w = &plan->buffers[step->workspace];
      args->workspace = (char *)cs->regions[TF_REGION_ARENA] + w->offset;
      args->workspace_bytes = w->bytes;
    }
  }
  const tf_cuda_args *args = &prepared->args[0];
  TF_RETURN_IF_ERROR(step_error(plan, s, tf_cuda_kernel_check(args)));
  const int64_t needed =
      tf_cuda_workspace_bytes(step->op, &step->attrs, step->n_inputs, args->inputs, step->n_outputs, args->outputs);
  if (args->workspace_bytes < needed)
    return step_error(plan, s,
                      tf_status_new(TF_ERR_UNSUPPORTED,
                                    "its CUDA kernel needs %lld workspace bytes and the plan gives it %lld: this plan "
                                    "was compiled for the '%s' target; compile it for 'cuda'",
                                    (long long)needed, (long long)args->workspace_bytes,
                                    plan->target ? plan->target : "?"));
  if (needed > 0 && ((uintptr_t)args->workspace % TF_CUDA_WORKSPACE_ALIGN) != 0)
    return step_error(
        plan, s,
        tf_status_new(TF_ERR_UNSUPPORTED,
                      "its workspace at arena offset %lld is not %d-byte aligned (compile the plan for the 'cuda' "
                      "target)",
                      (long long)plan->buffers[step->workspace].offset, TF_CUDA_WORKSPACE_ALIGN));
  return NULL;
}

/* The io buffers and their halves (the primary buffer is half 0, its io_twin half 1). */
static tf_status prepare_io(cuda_state *s) {
  const tf_plan *plan = s->plan;
  const int64_t io_bytes = plan->region_bytes[TF_REGION_IO];
  if (io_bytes <= 0)
    return NULL;
  s->io_buffers = calloc((size_t)plan->n_buffers, sizeof(cuda_io_buffer));
  if (!s->io_buffers)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot list the io buffers");
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->region != TF_REGION_IO)
      continue;
    cuda_io_buffer *io = &s->io_buffers[s->n_io_buffers++];
    io->offset = b->offset;
    io->bytes = b->bytes;
    io->half = b->io_twin >= 0 && b->io_twin < i ? 1 : 0;
  }
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaHostAlloc((void **)&s->io_mirror, (size_t)io_bytes, cudaHostAllocDefault),
                                    "allocating the io mirror (pinned host memory)"));
  s->memory.pinned_host_bytes += io_bytes;
  return NULL;
}

/* Appends printf-formatted text to text[*used..size), truncating at `size`. */
TF_PRINTF(4, 5) static void append(char *text, size_t size, size_t *used, const char *fmt, ...) {
  if (*used >= size)
    return;
  va_list args;
  va_start(args, fmt);
  const int written = vsnprintf(text + *used, size - *used, fmt, args);
  va_end(args);
  *used = written < 0 ? size : *used + (size_t)written;
}

/* Appends " 'name' (region +offset, N bytes)" for buffer `id`, after ", " unless it is the first. */
static void append_buffer(const tf_plan *plan, int32_t id, bool first, char *text, size_t size, size_t *used) {
  const tf_plan_buffer *b = &plan->buffers[id];
  append(text, size, used, "%s '%s' (%s +%lld, %lld bytes)", first ? "" : ",", b->name, tf_region_name(b->region),
         (long long)b->offset, (long long)b->bytes);
}

/* The operands of step `s` on io half `half` (inputs and labels from that half), as
 * "inputs: ...; outputs: ...; workspace: ...", truncated to `size`. */
static void describe_operands(const tf_plan *plan, int32_t s, int32_t half, char *text, size_t size) {
  const tf_plan_step *step = &plan->steps[s];
  size_t used = 0;
  text[0] = '\0';
  append(text, size, &used, "inputs:");
  for (int32_t k = 0; k < step->n_inputs; k++) {
    int32_t id = step->inputs[k];
    if (half == 1 && plan->buffers[id].io_twin >= 0)
      id = plan->buffers[id].io_twin;
    append_buffer(plan, id, k == 0, text, size, &used);
  }
  append(text, size, &used, "; outputs:%s", step->n_outputs == 0 ? " none (it updates inputs in place)" : "");
  for (int32_t k = 0; k < step->n_outputs; k++)
    append_buffer(plan, step->outputs[k], k == 0, text, size, &used);
  if (step->workspace >= 0) {
    append(text, size, &used, "; workspace:");
    append_buffer(plan, step->workspace, true, text, size, &used);
  }
}

/* A failure (`code`, `what`: `error`) of step `i` on `half`, naming the step, its op and its operands. */
static tf_status step_failure(const cuda_state *cs, int32_t i, int32_t half, tf_code code, const char *what,
                              const char *error) {
  const tf_plan_step *step = &cs->plan->steps[i];
  char where[32] = "";
  if (i < cs->plan->micro_steps) /* only the micro-batch block reads an io half */
    snprintf(where, sizeof(where), ", io half %d", half);
  char operands[4096];
  describe_operands(cs->plan, i, half, operands, sizeof(operands));
  return tf_status_new(code, "cuda backend: step %d '%s' (%s, %s phase%s): %s: %s; %s", i, step->name,
                       tf_op_name(step->op), tf_phase_name(step->phase), where, what, error, operands);
}

static tf_status step_cuda_failure(const cuda_state *cs, int32_t i, int32_t half, const char *what, cudaError_t error) {
  char text[256];
  snprintf(text, sizeof(text), "%s (%s)", cudaGetErrorString(error), cudaGetErrorName(error));
  return step_failure(cs, i, half, TF_ERR_BACKEND, what, text);
}

/* Launches step `i` on `half`; a failure of the launcher (tf_cuda_kernel_launch's status, freed here)
 * comes back naming the step and its operands too. */
static tf_status step_launch(cuda_state *cs, int32_t i, int32_t half) {
  const int32_t micro_steps = cs->plan->micro_steps;
  if (i < micro_steps) /* an offloaded activation's copies placed before it (cuda_host_copies.c) */
    TF_RETURN_IF_ERROR(tf_cuda_host_copies_at(cs, i, half));
  bool fused = false;
  tf_status launched = cs->unfused ? NULL : tf_cuda_fused_launch(cs, i, half, &fused);
  if (!fused && !launched)
    launched = tf_cuda_kernel_launch(&cs->steps[i].args[half]);
  if (!launched)
    return i == micro_steps - 1 ? tf_cuda_host_copies_at(cs, micro_steps, half) : NULL;
  tf_status status =
      step_failure(cs, i, half, tf_status_code(launched), "launching it failed", tf_status_message(launched));
  tf_status_free(launched);
  return status;
}

tf_status tf_cuda_step_run_checked(cuda_state *s, int32_t i, int32_t half) {
  // An error left by earlier asynchronous work (an upload, or steps launched without waiting) would
  // otherwise be picked up by this step's launch check and blamed on it.
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    return step_cuda_failure(s, i, half, "before it was launched, CUDA already reported an error from earlier work",
                             error);
  TF_RETURN_IF_ERROR(step_launch(s, i, half));
  error = cudaStreamSynchronize(s->compute);
  if (error == cudaSuccess)
    error = cudaGetLastError();
  return error == cudaSuccess ? NULL : step_cuda_failure(s, i, half, "it failed on the device", error);
}

/* Enqueues steps [begin, end) for io half `half` on the compute stream, without waiting; the copies
 * to the host among them on the side stream, joined back by the range's end. */
static tf_status enqueue(cuda_state *s, int32_t begin, int32_t end, int32_t half) {
  s->copies_side = true;
  tf_status status = NULL;
  for (int32_t i = begin; i < end && !status; i++)
    status = step_launch(s, i, half);
  s->copies_side = false;
  tf_status joined = tf_cuda_host_copies_join(s);
  if (!status)
    return joined;
  tf_status_free(joined);
  return status;
}

/* Runs steps [begin, end) one at a time, each waited for and checked (TIGHTFIT_CUDA_SYNC=1). */
static tf_status run_synchronously(cuda_state *s, int32_t begin, int32_t end, int32_t half) {
  for (int32_t i = begin; i < end; i++)
    TF_RETURN_IF_ERROR(tf_cuda_step_run_checked(s, i, half));
  return NULL;
}

/* Captures steps [begin, end) on `half` into *out (NULL for an empty range) and uploads it. The
 * warm-up has run every step before, so capturing only records launches: nothing is loaded here,
 * and the upload is the only allocation (the graph's own device memory, counted in graph_bytes). */
static tf_status capture(cuda_state *s, int32_t begin, int32_t end, int32_t half, cudaGraphExec_t *out) {
  *out = NULL;
  if (begin >= end)
    return NULL;
  cudaGraph_t graph = NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamBeginCapture(s->compute, cudaStreamCaptureModeThreadLocal),
                                    "beginning a graph capture"));
  tf_status status = enqueue(s, begin, end, half);
  cudaError_t ended = cudaStreamEndCapture(s->compute, &graph);
  if (!status)
    status = tf_cuda_status(ended, "capturing a CUDA graph");
  if (!status)
    status = tf_cuda_status(cudaGraphInstantiate(out, graph, 0), "instantiating a CUDA graph");
  /* uploaded now, not at its first launch: the device memory an executable graph takes on the device
   * is then taken inside prepare, where graph_bytes (and the calibration's sessions, which never
   * launch one) measure it; left to the first launch it was not counted (the fifth lend's autocast
   * runs peaked 4-6 MiB above their --device plans, the f32 run's smaller graphs within the margin) */
  if (!status)
    status = tf_cuda_status(cudaGraphUpload(*out, s->compute), "uploading a CUDA graph");
  if (graph)
    cudaGraphDestroy(graph);
  if (!status)
    s->memory.graphs++;
  return status ? tf_status_prefix(status, "steps [%d, %d) on io half %d", begin, end, half) : NULL;
}

/* Captures the graphs of every range run() replays. */
static tf_status capture_graphs(cuda_state *s) {
  const tf_plan *plan = s->plan;
  for (int32_t half = 0; half < 2; half++) {
    TF_RETURN_IF_ERROR(capture(s, 0, plan->micro_steps, half, &s->graphs[CUDA_GRAPH_MICRO][half]));
    if (s->forward_end != plan->micro_steps)
      TF_RETURN_IF_ERROR(capture(s, 0, s->forward_end, half, &s->graphs[CUDA_GRAPH_FORWARD][half]));
  }
  return capture(s, plan->micro_steps, plan->n_steps, 0, &s->graphs[CUDA_GRAPH_OPTIMIZER][0]);
}

void tf_cuda_release_plan(cuda_state *s) {
  tf_cuda_profile_finish(s);
  tf_cuda_fused_release(s);
  for (int kind = 0; kind < CUDA_GRAPH_KINDS; kind++)
    for (int half = 0; half < 2; half++)
      if (s->graphs[kind][half]) {
        cudaGraphExecDestroy(s->graphs[kind][half]);
        s->graphs[kind][half] = NULL;
      }
  for (int32_t i = 0; i < s->n_steps && s->steps; i++) {
    free(s->steps[i].inputs[0]);
    free(s->steps[i].inputs[1]);
  }
  free(s->steps);
  s->steps = NULL;
  s->n_steps = 0;
  free(s->io_buffers);
  s->io_buffers = NULL;
  s->n_io_buffers = 0;
  if (s->io_mirror)
    cudaFreeHost(s->io_mirror);
  s->io_mirror = NULL;
  s->prepared = false;
}

bool tf_cuda_env_flag(const char *name, bool unset) {
  const char *value = getenv(name);
  if (!value || value[0] == '\0')
    return unset;
  return strcmp(value, "0") != 0;
}

tf_status tf_cuda_prepare(void *state, const tf_plan *plan, void *const regions[TF_REGION_COUNT]) {
  cuda_state *s = state;
  tf_cuda_release_plan(s);
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  const int64_t free_before = tf_cuda_memory_free_now(s);
  s->plan = plan;
  memcpy(s->regions, regions, sizeof(s->regions));
  s->steps = calloc((size_t)(plan->n_steps ? plan->n_steps : 1), sizeof(cuda_step));
  if (!s->steps)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot prepare %d steps", plan->n_steps);
  s->n_steps = plan->n_steps;
  for (int32_t i = 0; i < plan->n_steps; i++)
    TF_RETURN_IF_ERROR(prepare_step(s, i));
  TF_RETURN_IF_ERROR(prepare_io(s));
  TF_RETURN_IF_ERROR(tf_cuda_fused_prepare(s));
  TF_RETURN_IF_ERROR(tf_cuda_host_copies_prepare(s));
  s->forward_end = 0;
  while (s->forward_end < plan->n_steps && plan->steps[s->forward_end].phase == TF_PHASE_FORWARD)
    s->forward_end++;
  s->sync_steps = tf_cuda_env_flag("TIGHTFIT_CUDA_SYNC", false);
  const bool profile = tf_cuda_profile_wanted();
  s->use_graphs = tf_cuda_env_flag("TIGHTFIT_CUDA_GRAPHS", true) && !s->sync_steps && !profile;
  if (profile && !s->sync_steps)
    TF_RETURN_IF_ERROR(tf_cuda_profile_start(s));
  TF_RETURN_IF_ERROR(tf_cuda_warm_up(s));
  if (s->use_graphs)
    TF_RETURN_IF_ERROR(capture_graphs(s));
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamSynchronize(s->compute), "preparing"));
  const int64_t free_after = tf_cuda_memory_free_now(s);
  s->memory.graph_bytes = free_before >= 0 && free_after >= 0 ? free_before - free_after : -1;
  s->memory.free_after_prepare = free_after;
  s->prepared = true;
  return NULL;
}

/* The graph that runs exactly [begin, end) on `half`, or NULL. */
static cudaGraphExec_t graph_for(const cuda_state *s, int32_t begin, int32_t end, int32_t half) {
  const tf_plan *plan = s->plan;
  if (begin == 0 && end == plan->micro_steps)
    return s->graphs[CUDA_GRAPH_MICRO][half];
  if (begin == 0 && end == s->forward_end)
    return s->graphs[CUDA_GRAPH_FORWARD][half];
  if (begin == plan->micro_steps && end == plan->n_steps)
    return s->graphs[CUDA_GRAPH_OPTIMIZER][0];
  return NULL;
}

/* Whether [begin, end) holds part of an active group's span but not all of it (a range other than
 * the three run() replays): such a run launches every step as compiled. */
static bool cuts_a_group(const cuda_state *s, int32_t begin, int32_t end) {
  for (int32_t g = 0; g < s->n_fused; g++) {
    const tf_cuda_fusion *f = &s->fused[g].group;
    if (!s->fused[g].active)
      continue;
    const bool first_in = f->first >= begin && f->first < end, last_in = f->last >= begin && f->last < end;
    if (first_in != last_in || (f->first < begin && f->last >= end))
      return true;
  }
  return false;
}

tf_status tf_cuda_run(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  cuda_state *s = state;
  if (!s->prepared)
    return tf_status_new(TF_ERR_INTERNAL, "cuda backend: run before prepare");
  if (begin < 0 || end > s->n_steps || begin > end)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "cuda backend: steps [%d, %d) outside the plan's %d", begin, end,
                         s->n_steps);
  if (begin == end)
    return NULL;
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaSetDevice(s->device), "cudaSetDevice"));
  const int32_t half = io_slot & 1;
  const bool reads_io = begin < s->plan->micro_steps;
  const int slot = reads_io ? half : CUDA_SLOT_OTHER;
  if (end > s->plan->micro_steps && reads_io) /* a range across both blocks: one slot for both */
    for (int32_t i = s->plan->micro_steps; i < end; i++)
      s->steps[i].args[half].run = &s->slots_device[slot];
  // The last replay that read this slot must be done before the host overwrites it.
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventSynchronize(s->slot_read[slot]), "waiting for a run"));
  tf_cuda_run_values *values = &s->slots_host[slot];
  values->optimizer_step = run->optimizer_step;
  values->micro_step = run->micro_step;
  values->seed = run->seed;
  values->loss_scale_log2 = run->loss_scale_log2;
  atomic_thread_fence(memory_order_seq_cst);
  if (reads_io)
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaStreamWaitEvent(s->compute, s->uploaded[half], 0), "waiting for inputs"));
  s->unfused = cuts_a_group(s, begin, end);
  cudaGraphExec_t graph = s->use_graphs && !s->unfused ? graph_for(s, begin, end, half) : NULL;
  tf_status status = graph           ? tf_cuda_status(cudaGraphLaunch(graph, s->compute), "launching a CUDA graph")
                     : s->sync_steps ? run_synchronously(s, begin, end, half)
                     : s->profile_ms ? tf_cuda_profile_run(s, begin, end, half, step_launch)
                                     : enqueue(s, begin, end, half);
  s->unfused = false;
  if (end > s->plan->micro_steps && reads_io)
    for (int32_t i = s->plan->micro_steps; i < end; i++)
      s->steps[i].args[half].run = &s->slots_device[CUDA_SLOT_OTHER];
  TF_RETURN_IF_ERROR(status);
  TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventRecord(s->slot_read[slot], s->compute), "recording a run"));
  if (reads_io)
    TF_RETURN_IF_ERROR(tf_cuda_status(cudaEventRecord(s->consumed[half], s->compute), "recording a run"));
  return NULL;
}
