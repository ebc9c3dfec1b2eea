/* The CPU backend: regions are 64-byte aligned host allocations, steps call the f32 kernels of
 * kernels/cpu with pointers prepared once (one set per io half); a step on f16/bf16 data calls its
 * f32 kernel over half slices (cpu_half.h). It records each region as its
 * aligned_alloc call made it and reports them through memory(): the session's figures are these,
 * not a sum over the plan. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_half.h"
#include "backends/cpu/cpu_profile.h"
#include "core/ops.h"
#include "core/workspace_cpu.h"
#include "kernels/cpu/kernels.h"

typedef struct cpu_step {
  tf_cpu_kernel kernel;
  tf_cpu_args args;
  tf_cpu_tensor *inputs[2]; /* per io half */
  tf_cpu_tensor outputs[TF_MAX_OUTPUTS];
  bool on_half;              /* runs on f16/bf16 data through half slices (cpu_half.h) */
  tf_cpu_half_slices slices; /* ... these */
} cpu_step;

/* A live region as its aligned_alloc call made it. */
typedef struct cpu_region {
  char *data;
  int64_t bytes;      /* asked of alloc_region */
  int64_t host_bytes; /* given to aligned_alloc: rounded up to the 64-byte alignment */
} cpu_region;

typedef struct cpu_state {
  int32_t threads;
  const tf_plan *plan;
  cpu_step *steps;
  int32_t n_steps;
  cpu_region regions[TF_REGION_COUNT]; /* a session holds one per plan region at most */
  tf_cpu_profile *profile;             /* TIGHTFIT_CPU_PROFILE (cpu_profile.h); NULL when off */
} cpu_state;

#define CPU_REGION_ALIGN 64

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
  tf_cpu_profile_finish(cpu->profile);
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
  cpu_state *cpu = state;
  cpu_region *slot = NULL;
  for (int r = 0; r < TF_REGION_COUNT && !slot; r++)
    slot = cpu->regions[r].data ? NULL : &cpu->regions[r];
  if (!slot)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "cpu backend: more than %d live regions", TF_REGION_COUNT);
  int64_t rounded = (bytes + CPU_REGION_ALIGN - 1) / CPU_REGION_ALIGN * CPU_REGION_ALIGN;
  int64_t host_bytes = rounded > 0 ? rounded : CPU_REGION_ALIGN;
  slot->data = aligned_alloc(CPU_REGION_ALIGN, (size_t)host_bytes);
  if (!slot->data)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cpu backend: cannot allocate a region of %lld bytes", (long long)bytes);
  memset(slot->data, 0, (size_t)host_bytes);
  slot->bytes = bytes;
  slot->host_bytes = host_bytes;
  *region = slot->data;
  return NULL;
}

static void cpu_free_region(void *state, void *region) {
  cpu_state *cpu = state;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (region && cpu->regions[r].data == region)
      cpu->regions[r] = (cpu_region){NULL, 0, 0};
  free(region);
}

/* Device memory is host memory here: the regions as counted at their aligned_alloc calls. What
 * OpenBLAS and libgomp hold is not known to the backend, hence no overhead figure. */
static tf_status cpu_memory(void *state, tf_device_memory *out) {
  const cpu_state *cpu = state;
  *out = (tf_device_memory){.region_bytes = 0, .region_device_bytes = 0, .overhead_bytes = -1, .context_bytes = -1};
  for (int r = 0; r < TF_REGION_COUNT; r++) {
    out->region_bytes += cpu->regions[r].bytes;
    out->region_device_bytes += cpu->regions[r].host_bytes;
  }
  return NULL;
}

static tf_status cpu_upload(void *state, void *region, int64_t offset, const void *host, int64_t bytes) {
  memcpy((char *)region + offset, host, (size_t)bytes);
  return NULL;
}

static tf_status cpu_download(void *state, void *region, int64_t offset, void *host, int64_t bytes) {
  memcpy(host, (const char *)region + offset, (size_t)bytes);
  return NULL;
}

static tf_cpu_tensor tensor_of(const tf_plan *plan, void *const *regions, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return tf_tensor_ref_make((char *)regions[b->region] + b->offset, b->dtype, b->rank, b->shape);
}

/* A step on f16/bf16 data runs its f32 kernel over half slices, which write results and never
 * read back what an output or an input updated in place held: an update of half data in place
 * (an accumulation) is refused. The fused loss head, embedding and its gradient on half data run
 * kernels of their own (tf_cpu_half_kernel_get). */
static tf_status prepare_half(const tf_plan *plan, int32_t s, int32_t threads, cpu_step *prepared) {
  const tf_plan_step *step = &plan->steps[s];
  prepared->on_half =
      tf_cpu_half_step(step->op, step->n_inputs, prepared->inputs[0], step->n_outputs, prepared->outputs);
  if (!prepared->on_half)
    return NULL;
  if (tf_cpu_half_own_kernel(step->op, step->n_inputs, prepared->inputs[0])) { /* a kernel of its own, no slices */
    prepared->on_half = false;
    prepared->kernel = tf_cpu_half_kernel_get(step->op);
    return NULL;
  }
  if (tf_op_info_get(step->op)->in_place != 0 ||
      !tf_cpu_half_slices_get(step->op, &step->attrs, step->n_inputs, prepared->inputs[0], step->n_outputs,
                              prepared->outputs, threads, &prepared->slices))
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cpu backend: step %d '%s' (%s) updates f16/bf16 data in place, which the CPU's half kernels "
                         "do not; compile with --no-half-kernels (the op then runs on f32 copies between casts)",
                         s, step->name, tf_op_name(step->op));
  return NULL;
}

/* A kernel given less workspace than it needs on one thread would skip its work (attention) or
 * take another path: a plan compiled for a target that plans none (vulkan) is refused instead. */
static tf_status check_workspace(const tf_plan *plan, int32_t s, const cpu_step *prepared) {
  const tf_plan_step *step = &plan->steps[s];
  const int64_t needed = tf_cpu_workspace_bytes(step->op, &step->attrs, step->n_inputs, prepared->inputs[0],
                                                step->n_outputs, prepared->outputs, 1, (int32_t)sizeof(float));
  if (prepared->args.workspace_bytes >= needed)
    return NULL;
  const bool for_cpu = plan->target && strcmp(plan->target, "cpu") == 0;
  return tf_status_new(
      TF_ERR_UNSUPPORTED,
      "cpu backend: step %d '%s' (%s): its CPU kernel needs %lld workspace bytes on one thread and "
      "the plan gives it %lld: %s%s%s",
      s, step->name, tf_op_name(step->op), (long long)needed, (long long)prepared->args.workspace_bytes,
      for_cpu ? "the plan file does not match what the compiler plans for this step; compile it again"
              : "this plan was compiled for the '",
      for_cpu ? "" : (plan->target ? plan->target : "?"), for_cpu ? "" : "' target; compile it for 'cpu'");
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
    TF_RETURN_IF_ERROR(prepare_half(plan, s, cpu->threads, prepared));
    TF_RETURN_IF_ERROR(check_workspace(plan, s, prepared));
  }
  return tf_cpu_profile_start(plan, cpu->threads, &cpu->profile);
}

/* What run_step needs besides the step's index. */
typedef struct cpu_run_args {
  cpu_state *cpu;
  int32_t io_slot;
  const tf_cpu_context *context;
} cpu_run_args;

static void run_step(void *closure, int32_t s) {
  const cpu_run_args *run = closure;
  cpu_step *step = &run->cpu->steps[s];
  step->args.inputs = step->inputs[run->io_slot & 1];
  step->args.context = run->context;
  if (step->on_half)
    tf_cpu_half_run(step->kernel, &step->args, &step->slices);
  else
    step->kernel(&step->args);
}

static tf_status cpu_run(void *state, int32_t begin, int32_t end, int32_t io_slot, const tf_run_state *run) {
  cpu_state *cpu = state;
  tf_cpu_context context = {.threads = cpu->threads,
                            .optimizer_step = run->optimizer_step,
                            .micro_step = run->micro_step,
                            .seed = run->seed,
                            .loss_scale_log2 = run->loss_scale_log2};
  cpu_run_args args = {cpu, io_slot, &context};
  if (cpu->profile)
    tf_cpu_profile_run(cpu->profile, begin, end, run_step, &args);
  else
    for (int32_t s = begin; s < end; s++)
      run_step(&args, s);
  return NULL;
}

static tf_status cpu_synchronize(void *state) { return NULL; }

const tf_backend_vtable tf_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .target = cpu_target,
    .alloc_region = cpu_alloc_region,
    .free_region = cpu_free_region,
    .upload = cpu_upload,
    .download = cpu_download,
    .prepare = cpu_prepare,
    .run = cpu_run,
    .synchronize = cpu_synchronize,
    .memory = cpu_memory,
};
