/* CUDA test helpers (cuda_test.h): the device check and test data. */
#define _POSIX_C_SOURCE 200809L
#include "cuda_test.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "zoo_plans.h"

/* "CUDA x.y" from a version number such as 13000. */
static void version_text(int version, char *text, size_t size) {
  snprintf(text, size, "CUDA %d.%d", version / 1000, version % 1000 / 10);
}

static int skip(const char *why) {
  printf("SKIP: %s\n", why);
  return 77;
}

/* Skips only when there is nothing to test on: no driver (libcuda.so.1 missing, or only the
 * toolkit's stub), a driver too old for this runtime, or no device. Everything else a GPU machine
 * can answer (a failed initialisation, a device that is busy or lost, an unusable device) fails, so
 * that a broken GPU setup is never reported as Skipped. Creates no context (test_cuda_first_run
 * measures the first one). */
int cuda_test_device(void) {
  int driver = 0, runtime = 0, count = 0;
  const cudaError_t driver_error = cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  const cudaError_t error = cudaGetDeviceCount(&count);
  char why[512], driver_text[32], runtime_text[32];
  version_text(driver, driver_text, sizeof(driver_text));
  version_text(runtime, runtime_text, sizeof(runtime_text));
  if (driver_error == cudaErrorStubLibrary || error == cudaErrorStubLibrary)
    return skip("no NVIDIA driver: only the CUDA toolkit's stub libcuda.so was found (cudaErrorStubLibrary)");
  if (driver_error != cudaSuccess) {
    printf("FAIL: cudaDriverGetVersion: %s: %s\n", cudaGetErrorName(driver_error), cudaGetErrorString(driver_error));
    return 1;
  }
  if (driver == 0) { /* what cudaDriverGetVersion reports when no driver is installed */
    snprintf(why, sizeof(why),
             "no NVIDIA driver: libcuda.so.1 is missing or did not load (cudaDriverGetVersion reports 0; "
             "cudaGetDeviceCount: %s)",
             cudaGetErrorName(error));
    return skip(why);
  }
  if (error == cudaErrorInsufficientDriver) {
    snprintf(why, sizeof(why),
             "the NVIDIA driver supports %s, this build's runtime needs %s (cudaErrorInsufficientDriver)", driver_text,
             runtime_text);
    return skip(why);
  }
  if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(why, sizeof(why), "no CUDA device: the NVIDIA driver (%s) reports none (%s; CUDA_VISIBLE_DEVICES %s%s%s)",
             driver_text, error == cudaSuccess ? "cudaGetDeviceCount returned 0" : "cudaErrorNoDevice",
             visible ? "is '" : "unset", visible ? visible : "", visible ? "'" : "");
    return skip(why);
  }
  if (error != cudaSuccess) {
    printf("FAIL: an NVIDIA driver (%s) is present but cudaGetDeviceCount failed: %s: %s\n", driver_text,
           cudaGetErrorName(error), cudaGetErrorString(error));
    return 1;
  }
  struct cudaDeviceProp props;
  const cudaError_t props_error = cudaGetDeviceProperties(&props, 0);
  if (props_error != cudaSuccess) {
    printf("FAIL: cudaGetDeviceProperties(device 0): %s: %s\n", cudaGetErrorName(props_error),
           cudaGetErrorString(props_error));
    return 1;
  }
  if (props.major * 10 + props.minor < 75) {
    printf("FAIL: device 0 (%s) has compute capability %d.%d; the CUDA kernels need 7.5 or newer (choose another "
           "device with CUDA_VISIBLE_DEVICES)\n",
           props.name, props.major, props.minor);
    return 1;
  }
  const tf_backend_vtable *cuda = NULL;
  tf_status missing = tf_backend_load("cuda", &cuda);
  if (missing) {
    printf("FAIL: the CUDA tests were built, but the backend is not there: %s\n", tf_status_message(missing));
    tf_status_free(missing);
    return 1;
  }
  printf("CUDA device 0: %s, compute capability %d.%d, %.1f GiB; driver %s, runtime %s\n", props.name, props.major,
         props.minor, (double)props.totalGlobalMem / (1 << 30), driver_text, runtime_text);
  return 0;
}

uint64_t cuda_test_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float cuda_test_normal(uint64_t *state) {
  double u1 = (double)(cuda_test_random(state) >> 11) * (1.0 / 9007199254740992.0) + 1e-12;
  double u2 = (double)(cuda_test_random(state) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Fills `bytes` of `dtype` values for an input or label. */
static void fill(void *host, tf_dtype dtype, int64_t bytes, const cuda_test_data *data, uint64_t *state) {
  const int64_t n = bytes / tf_dtype_size(dtype);
  const uint64_t high = (uint64_t)(data->int_high > 0 ? data->int_high : 1);
  for (int64_t k = 0; k < n; k++) {
    int64_t value = (int64_t)(cuda_test_random(state) % high);
    if (data->int_special != INT32_MIN && k % 7 == 3)
      value = data->int_special;
    switch (dtype) {
    case TF_I32: ((int32_t *)host)[k] = (int32_t)value; break;
    case TF_I64: ((int64_t *)host)[k] = value; break;
    case TF_U8: ((uint8_t *)host)[k] = (uint8_t)value; break;
    default: ((float *)host)[k] = cuda_test_normal(state); break;
    }
  }
}

tf_status cuda_test_feed(tf_session *session, const tf_plan *plan, const cuda_test_data *data) {
  uint64_t state = data->seed;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    void *host = malloc((size_t)(b->bytes ? b->bytes : 1));
    if (!host)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot stage '%s'", b->name);
    fill(host, b->dtype, b->bytes, data, &state);
    tf_status status = tf_session_write(session, b->name, host, b->bytes);
    free(host);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

tf_status cuda_test_train_step(tf_session *session, const tf_plan *plan, int32_t int_high, int64_t first_batch,
                               double *loss) {
  *loss = 0;
  for (int32_t k = 0; k < plan->accumulate; k++) {
    cuda_test_data data = {.seed = 1000 + (uint64_t)(first_batch + k), .int_high = int_high, .int_special = INT32_MIN};
    double micro = 0;
    TF_RETURN_IF_ERROR(cuda_test_feed(session, plan, &data));
    TF_RETURN_IF_ERROR(tf_session_micro_step(session, &micro));
    *loss += micro / plan->accumulate;
  }
  return tf_session_optimizer_step(session);
}

tf_compile_options cuda_test_training_options(tf_target_kind target, const char *bindings) {
  tf_compile_options o = tf_test_adamw_options(target, bindings);
  o.epsilon = 1e-6;
  o.accumulate = 2;
  return o;
}

tf_status cuda_test_compare_buffer(tf_session *a, tf_session *b, const tf_plan_buffer *buffer, bool *same) {
  *same = false;
  void *x = malloc((size_t)buffer->bytes + 1), *y = malloc((size_t)buffer->bytes + 1);
  tf_status status = x && y ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "'%s': out of memory", buffer->name);
  if (!status)
    status = tf_session_read(a, buffer->name, x, buffer->bytes);
  if (!status)
    status = tf_session_read(b, buffer->name, y, buffer->bytes);
  *same = !status && memcmp(x, y, (size_t)buffer->bytes) == 0;
  free(x);
  free(y);
  return status;
}
