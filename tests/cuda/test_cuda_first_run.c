/* What the CUDA backend does before and around its first step (docs/cuda.md, "First run on a GPU"):
 *   (a) capacity (tf_backend_cuda.capacity) measured in a process without a CUDA context: the
 *       device's name and memory, NVML's free bytes and the context's bytes (when NVML loads), the
 *       library bytes, a power-of-two granularity; measured again with the context there: the context
 *       is reported as not measured (-1), and the call gives back every byte it took; a device index
 *       past the last is refused;
 *   (b) the warm-up leaves no trace: right after tf_session_create(), every parameter, constant,
 *       gradient and optimizer-state buffer of a CUDA session equals, byte for byte, a CPU session's
 *       from the same seed (the warm-up ran every step, AdamW included, on those regions);
 *   (c) the three launch modes (CUDA graphs; TIGHTFIT_CUDA_GRAPHS=0; TIGHTFIT_CUDA_SYNC=1) give
 *       identical losses over 3 optimizer steps (same kernels, same order, deterministic kernels).
 * (a) runs first: it needs a process whose context does not exist yet. Exits 77 without a device. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cuda/cuda.h"
#include "cuda_test.h"
#include "zoo_plans.h"

static tf_test_counts counts;

static int64_t device_free(void) {
  size_t free_bytes = 0, total = 0;
  return cudaMemGetInfo(&free_bytes, &total) == cudaSuccess ? (int64_t)free_bytes : -1;
}

static bool nvml_present(void) {
  void *library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library)
    dlclose(library);
  return library != NULL;
}

/* ---- (a) capacity ---- */

static void print_capacity(const char *label, const tf_device_capacity *c) {
  printf("     %s: '%s', total %" PRId64 ", free %" PRId64 ", context %" PRId64 ", library %" PRId64
         ", granularity %" PRId64 "\n",
         label, c->name, c->total_bytes, c->free_bytes, c->context_bytes, c->library_bytes, c->granularity);
}

static void test_capacity(void) {
  const tf_backend_vtable *cuda = tf_backend_find("cuda");
  CHECK(&counts, cuda && cuda->capacity, "the cuda backend has no capacity slot");
  if (!cuda || !cuda->capacity)
    return;
  const int failed_before = counts.failed;
  const bool nvml = nvml_present();
  tf_backend_options options = {.device = 0, .threads = 1};
  tf_device_capacity first, second;
  CHECK_OK(&counts, cuda->capacity(&options, &first));
  print_capacity("first (no context before)", &first);
  CHECK(&counts, first.name[0] != '\0' && first.total_bytes > 0, "name '%s', total %" PRId64, first.name,
        first.total_bytes);
  CHECK(&counts, first.granularity > 0 && (first.granularity & (first.granularity - 1)) == 0,
        "granularity %" PRId64 " is not a power of two", first.granularity);
  CHECK(&counts, first.library_bytes >= 0, "library bytes %" PRId64, first.library_bytes);
  if (nvml)
    CHECK(&counts, first.free_bytes > 0 && first.free_bytes <= first.total_bytes && first.context_bytes > 0,
          "with NVML: free %" PRId64 " of %" PRId64 ", context %" PRId64, first.free_bytes, first.total_bytes,
          first.context_bytes);
  else
    CHECK(&counts, first.free_bytes == -1 && first.context_bytes == -1,
          "without NVML free and context must be -1: %" PRId64 ", %" PRId64, first.free_bytes, first.context_bytes);

  // The context stays (capacity never resets the device); everything else it creates is destroyed.
  CHECK(&counts, cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
  const int64_t free_before = device_free();
  CHECK_OK(&counts, cuda->capacity(&options, &second));
  const int64_t free_after = device_free();
  print_capacity("second (context there)", &second);
  CHECK(&counts, second.context_bytes == -1, "a context that existed was reported as %" PRId64 " bytes",
        second.context_bytes);
  CHECK(&counts, strcmp(first.name, second.name) == 0 && first.total_bytes == second.total_bytes,
        "the device changed: '%s' / '%s'", first.name, second.name);
  CHECK(&counts, free_after == free_before,
        "capacity kept device memory: free %" PRId64 " before the second call, %" PRId64 " after", free_before,
        free_after);

  int count = 0;
  cudaGetDeviceCount(&count);
  options.device = count;
  tf_device_capacity missing;
  tf_status status = cuda->capacity(&options, &missing);
  CHECK(&counts, tf_status_code(status) == TF_ERR_INVALID_ARGUMENT, "capacity of device %d of %d: %s", count, count,
        status ? tf_status_message(status) : "accepted");
  tf_status_free(status);
  printf("%-4s capacity of cuda:0 (NVML %s); free device memory %" PRId64 " around the second call, %" PRId64
         " after\n",
         counts.failed == failed_before ? "ok" : "FAIL", nvml ? "present" : "absent", free_before, free_after);
}

/* ---- sessions on the zoo's mlp ---- */

static tf_plan *compile_mlp(tf_target_kind target) {
  const tf_compile_options o = cuda_test_training_options(target, "N=8");
  char label[64];
  snprintf(label, sizeof(label), "mlp (%s)", tf_target_name(target));
  return tf_test_zoo_plan(&counts, label, "mlp", NULL, 0, &o);
}

static tf_session *open_session(const tf_plan *plan, const char *backend) {
  return tf_test_session(&counts, plan, backend, 7);
}

/* ---- (b) the warm-up leaves no trace ---- */

static bool same_buffer(tf_session *a, tf_session *b, const tf_plan_buffer *buffer) {
  bool same = false;
  tf_status status = cuda_test_compare_buffer(a, b, buffer, &same);
  CHECK(&counts, same, "'%s' (%s) differs after create: %s", buffer->name, tf_role_name(buffer->role),
        tf_status_message(status));
  tf_status_free(status);
  return same;
}

static void test_warm_up_leaves_no_trace(void) {
  tf_plan *plans[2] = {compile_mlp(TF_TARGET_CUDA), compile_mlp(TF_TARGET_CPU)};
  tf_session *cuda = plans[0] ? open_session(plans[0], "cuda") : NULL;
  tf_session *cpu = plans[1] ? open_session(plans[1], "cpu") : NULL;
  int32_t compared = 0, equal = 0;
  for (int32_t i = 0; cuda && cpu && i < plans[0]->n_buffers; i++) {
    const tf_plan_buffer *b = &plans[0]->buffers[i];
    if (b->role != TF_ROLE_PARAMETER && b->role != TF_ROLE_CONSTANT && b->role != TF_ROLE_GRADIENT &&
        b->role != TF_ROLE_OPTIMIZER_STATE)
      continue;
    compared++;
    equal += same_buffer(cuda, cpu, b);
  }
  CHECK(&counts, compared > 0 && equal == compared, "%d of %d buffers equal", equal, compared);
  printf("%-4s warm-up: right after create, %d of %d parameter, gradient and optimizer-state buffers equal the CPU "
         "session's\n",
         compared > 0 && equal == compared ? "ok" : "FAIL", equal, compared);
  tf_session_destroy(cuda);
  tf_session_destroy(cpu);
  tf_plan_destroy(plans[0]);
  tf_plan_destroy(plans[1]);
}

/* ---- (c) launch modes ---- */

enum { MODE_STEPS = 3 };

/* Losses of MODE_STEPS optimizer steps in a session created with `variable`=`value` (none: NULL). */
static bool train_in_mode(const tf_plan *plan, const char *variable, const char *value, double losses[MODE_STEPS]) {
  unsetenv("TIGHTFIT_CUDA_GRAPHS");
  unsetenv("TIGHTFIT_CUDA_SYNC");
  if (variable)
    setenv(variable, value, 1);
  tf_session *session = open_session(plan, "cuda"); /* prepare() reads the environment */
  bool ok = session != NULL;
  for (int64_t step = 0; ok && step < MODE_STEPS; step++) {
    tf_status status = cuda_test_train_step(session, plan, 10, step * plan->accumulate, &losses[step]);
    CHECK(&counts, status == NULL, "%s=%s, step %lld: %s", variable ? variable : "graphs", value ? value : "",
          (long long)step, tf_status_message(status));
    ok = status == NULL;
    tf_status_free(status);
  }
  tf_session_destroy(session);
  unsetenv("TIGHTFIT_CUDA_GRAPHS");
  unsetenv("TIGHTFIT_CUDA_SYNC");
  return ok;
}

static void test_launch_modes(void) {
  tf_plan *plan = compile_mlp(TF_TARGET_CUDA);
  if (!plan)
    return;
  static const char *const modes[3][2] = {{NULL, NULL}, {"TIGHTFIT_CUDA_GRAPHS", "0"}, {"TIGHTFIT_CUDA_SYNC", "1"}};
  double losses[3][MODE_STEPS];
  memset(losses, 0, sizeof(losses));
  bool ok = true;
  for (int m = 0; m < 3; m++)
    ok = train_in_mode(plan, modes[m][0], modes[m][1], losses[m]) && ok;
  for (int m = 1; m < 3 && ok; m++)
    for (int step = 0; step < MODE_STEPS; step++)
      CHECK(&counts, losses[m][step] == losses[0][step], "%s=%s step %d: loss %.9g, with graphs %.9g", modes[m][0],
            modes[m][1], step, losses[m][step], losses[0][step]);
  printf("%-4s launch modes: step %d loss %.9g (graphs), %.9g (TIGHTFIT_CUDA_GRAPHS=0), %.9g (TIGHTFIT_CUDA_SYNC=1)\n",
         ok && losses[1][MODE_STEPS - 1] == losses[0][MODE_STEPS - 1] &&
                 losses[2][MODE_STEPS - 1] == losses[0][MODE_STEPS - 1]
             ? "ok"
             : "FAIL",
         MODE_STEPS, losses[0][MODE_STEPS - 1], losses[1][MODE_STEPS - 1], losses[2][MODE_STEPS - 1]);
  tf_plan_destroy(plan);
}

int main(void) {
  int available = cuda_test_device();
  if (available != 0)
    return available;
  test_capacity();
  test_warm_up_leaves_no_trace();
  test_launch_modes();
  return tf_test_finish("cuda first run", &counts);
}
