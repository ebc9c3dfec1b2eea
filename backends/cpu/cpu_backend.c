/* The CPU backend: regions are 64-byte aligned host allocations, steps call the f32 kernels of
 * kernels/cpu with pointers prepared once (one set per io half). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "compiler/ops.h"
#include "kernels/cpu/kernels.h"

typedef struct cpu_step {
  tf_cpu_kernel kernel;
  tf_cpu_args args;
  tf_cpu_tensor *inputs[2];  /* per io half */
  tf_cpu_tensor outputs[TF_MAX_OUTPUTS];
} cpu_step;

typedef struct cpu_state {
  int32_t threads;
  const tf_plan *plan;
  cpu_step *steps;
  int32_t n_steps;
} cpu_state;

/* OpenBLAS (the pthreads build Debian ships) would start its own threads inside each of our
 * OpenMP tasks and spin-wait between calls, fighting the kernels' threads for the cores (measured:
 * 2 threads 3.6x slower than 1 on a 2-layer GPT). The kernels split GEMMs across threads
 * themselves, so BLAS runs single-threaded in each. */
void openblas_set_num_threads(int threads);

static tf_status cpu_create(const tf_backend_options *options, void **state) {
  openblas_set_num_threads(1);
  cpu_state *cpu = calloc(1, sizeof(cpu_state));
  if (!cpu)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate its state");
  cpu->threads = options && options->threads > 0 ? options->threads : 2;
  *state = cpu;
  return NULL;
}

static void cpu_destroy(void *state) {
  cpu_state *cpu = state;
  if (!cpu)
    return;
  for (int32_t s = 0; s < cpu->n_steps; s++) {
    free(cpu->steps[s].inputs[0]);
    free(cpu->steps[s].inputs[1]);
  }
  free(cpu->steps);
  free(cpu);
}

static tf_target cpu_target(void *state) {
  tf_target target = tf_target_default(TF_TARGET_CPU);
  target.threads = ((cpu_state *)state)->threads;
  return target;
}

static tf_status cpu_alloc_region(void *state, int64_t bytes, void **region) {
  size_t size = (size_t)((bytes + 63) / 64 * 64);
  *region = aligned_alloc(64, size ? size : 64);
  if (!*region)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate a region of %lld bytes", (long long)bytes);
  memset(*region, 0, size);
  return NULL;
}

static void cpu_free_region(void *state, void *region) { free(region); }

static tf_status cpu_upload(void *state, void *region, int64_t offset, const void *host, int64_t bytes) {
  memcpy((char *)region + offset, host, (size_t)bytes);
  return NULL;
}

static tf_status cpu_download(void *state, void *region, int64_t offset, void *host, int64_t bytes) {
  memcpy(host, (const char *)region + offset, (size_t)bytes);
  return NULL;
}

static bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

static tf_cpu_tensor tensor_of(const tf_plan *plan, void *const *regions, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = (char *)regions[b->region] + b->offset;
  t.dtype = b->dtype;
  t.rank = b->rank;
  t.count = 1;
  for (int32_t d = 0; d < b->rank; d++) {
    t.shape[d] = b->shape[d];
    t.count *= b->shape[d];
  }
  return t;
}

static tf_status check_dtypes(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  if (step->op == TF_OP_CAST)
    return NULL;
  for (int32_t k = 0; k < step->n_inputs; k++) {
    tf_dtype dtype = plan->buffers[step->inputs[k]].dtype;
    if (is_floating(dtype) && dtype != TF_F32)
      return tf_status_new(TF_ERR_UNSUPPORTED, "cpu backend: step %d '%s' (%s) reads %s data; the CPU kernels compute in f32",
                           s, step->name, tf_op_name(step->op), tf_dtype_name(dtype));
  }
  return NULL;
}

static tf_status cpu_prepare(void *state, const tf_plan *plan, void *const regions[TF_REGION_COUNT]) {
  cpu_state *cpu = state;
  cpu->plan = plan;
  cpu->steps = calloc((size_t)(plan->n_steps ? plan->n_steps : 1), sizeof(cpu_step));
  if (!cpu->steps)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot prepare %d steps", plan->n_steps);
  cpu->n_steps = plan->n_steps;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    cpu_step *prepared = &cpu->steps[s];
    prepared->kernel = tf_cpu_kernel_get(step->op, false);
    if (!prepared->kernel)
      return tf_status_new(TF_ERR_UNSUPPORTED, "cpu backend: no kernel for step %d '%s' (%s)", s, step->name,
                           tf_op_name(step->op));
    TF_RETURN_IF_ERROR(check_dtypes(plan, s));
    for (int32_t half = 0; half < 2; half++) {
      prepared->inputs[half] = calloc((size_t)(step->n_inputs ? step->n_inputs : 1), sizeof(tf_cpu_tensor));
      if (!prepared->inputs[half])
        return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot prepare step %d", s);
      for (int32_t k = 0; k < step->n_inputs; k++) {
        int32_t id = step->inputs[k];
        if (half == 1 && plan->buffers[id].io_twin >= 0)
          id = plan->buffers[id].io_twin;
        prepared->inputs[half][k] = tensor_of(plan, regions, id);
      }
    }
    for (int32_t k = 0; k < step->n_outputs; k++)
      prepared->outputs[k] = tensor_of(plan, regions, step->outputs[k]);
    tf_cpu_args *args = &prepared->args;
    args->op = step->op;
    args->attrs = &step->attrs;
    args->n_inputs = step->n_inputs;
    args->n_outputs = step->n_outputs;
    args->outputs = prepared->outputs;
    if (step->workspace >= 0) {
      const tf_plan_buffer *w = &plan->buffers[step->workspace];
      args->workspace = (char *)regions[TF_REGION_ARENA] + w->offset;
      args->workspace_bytes = w->bytes;
    }
  }
  return NULL;
}

static tf_status cpu_run(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  cpu_state *cpu = state;
  tf_cpu_context context = {cpu->threads, run->optimizer_step, run->micro_step, run->seed};
  for (int32_t s = begin; s < end; s++) {
    cpu_step *step = &cpu->steps[s];
    step->args.inputs = step->inputs[io_slot & 1];
    step->args.context = &context;
    step->kernel(&step->args);
  }
  return NULL;
}

static tf_status cpu_synchronize(void *state) { return NULL; }

const tf_backend_vtable tf_backend_cpu = {
    "cpu",      cpu_create, cpu_destroy,  cpu_target, cpu_alloc_region, cpu_free_region, cpu_upload,
    cpu_download, cpu_prepare, cpu_run, cpu_synchronize, NULL,
};
