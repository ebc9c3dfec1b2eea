/* CUDA test helpers (cuda_test.h): the device check, data, and the step-by-step parity harness. */
#define _POSIX_C_SOURCE 200809L
#include "cuda_test.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/ops.h"
#include "core/workspace_cpu.h"
#include "core/workspace_cuda.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels.h"
#include "runtime/init.h"

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
  if (!tf_backend_find("cuda")) {
    printf("FAIL: this build has no CUDA backend, but the CUDA tests were built\n");
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
    cuda_test_data data = {1000 + (uint64_t)(first_batch + k), int_high, INT32_MIN};
    double micro = 0;
    TF_RETURN_IF_ERROR(cuda_test_feed(session, plan, &data));
    TF_RETURN_IF_ERROR(tf_session_micro_step(session, &micro));
    *loss += micro / plan->accumulate;
  }
  return tf_session_optimizer_step(session);
}

/* ---- tolerances ---- */

cuda_tolerance cuda_test_tolerance(tf_op op) {
  static const cuda_tolerance exact = {0, 0}, math = {2e-6, 2e-5}, sums = {1e-5, 1e-4}, update = {1e-7, 1e-6};
  switch (op) {
  case TF_OP_NEG:
  case TF_OP_RELU:
  case TF_OP_RELU_GRAD:
  case TF_OP_RESHAPE:
  case TF_OP_TRANSPOSE:
  case TF_OP_CONCAT:
  case TF_OP_SLICE:
  case TF_OP_SLICE_GRAD:
  case TF_OP_EXPAND:
  case TF_OP_DROPOUT:
  case TF_OP_CAST:
  case TF_OP_EMBEDDING:
  case TF_OP_EMBEDDING_GRAD:
  case TF_OP_MAX:
  case TF_OP_MAX_GRAD:
  case TF_OP_MAX_POOL2D:
  case TF_OP_MAX_POOL2D_GRAD:
  case TF_OP_AVG_POOL2D:
  case TF_OP_AVG_POOL2D_GRAD:
  case TF_OP_ACCUMULATE:
  case TF_OP_ZERO:
  case TF_OP_ADD:
  case TF_OP_SUB:
  case TF_OP_MUL: return exact;
  case TF_OP_SGD:
  case TF_OP_ADAMW: return update; /* same operations; pow() may differ in the last bit */
  case TF_OP_DIV:
  case TF_OP_EXP:
  case TF_OP_LOG:
  case TF_OP_SQRT:
  case TF_OP_RSQRT:
  case TF_OP_GELU:
  case TF_OP_SILU:
  case TF_OP_SIGMOID:
  case TF_OP_TANH:
  case TF_OP_SOFTPLUS:
  case TF_OP_GELU_GRAD:
  case TF_OP_SILU_GRAD:
  case TF_OP_SIGMOID_GRAD:
  case TF_OP_TANH_GRAD:
  case TF_OP_MSE_GRAD:
  case TF_OP_BCE_WITH_LOGITS_GRAD: return math;
  default: return sums;
  }
}

/* ---- the step-by-step harness ---- */

typedef struct harness {
  const tf_plan *plan;
  void **host;  /* per buffer (io twins share their primary's) */
  char *device; /* one allocation; buffer i at offsets[i] */
  int64_t *offsets;
  void *cpu_workspace, *cuda_workspace;
  cudaStream_t stream;
  cublasHandle_t cublas;
  tf_cuda_run_values *run; /* device memory */
} harness;

static int32_t storage_of(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return b->region == TF_REGION_IO && b->io_twin >= 0 && b->io_twin < id ? b->io_twin : id;
}

static bool cuda_ok(tf_test_counts *counts, cudaError_t error, const char *label, const char *what) {
  CHECK(counts, error == cudaSuccess, "%s: %s: %s", label, what, cudaGetErrorString(error));
  return error == cudaSuccess;
}

/* Host state: parameters and constants from their initialisers, inputs from `data`, the rest 0. */
static bool harness_open(tf_test_counts *counts, const char *label, harness *h, const tf_plan *plan,
                         const cuda_test_data *data) {
  memset(h, 0, sizeof(*h));
  h->plan = plan;
  h->host = calloc((size_t)plan->n_buffers, sizeof(void *));
  h->offsets = calloc((size_t)plan->n_buffers, sizeof(int64_t));
  uint64_t state = data->seed;
  int64_t total = 0, cpu_ws = 64, cuda_ws = 256;
  for (int32_t i = 0; h->host && h->offsets && i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    h->offsets[i] = total;
    total += (b->bytes + 255) / 256 * 256;
    if (storage_of(plan, i) != i)
      continue;
    h->host[i] = calloc(1, (size_t)(b->bytes + 8));
    if (!h->host[i])
      return false;
    tf_status status = NULL;
    if (b->role == TF_ROLE_INPUT || b->role == TF_ROLE_LABEL)
      fill(h->host[i], b->dtype, b->bytes, data, &state);
    else if (b->init.kind != TF_INIT_NONE && b->dtype == TF_F32)
      status = tf_init_fill_f32(&b->init, b->name, b->rank, b->shape, 11, h->host[i]);
    else if (b->init.kind != TF_INIT_NONE && b->dtype == TF_I32)
      status = tf_init_fill_i32(&b->init, b->name, b->rank, b->shape, 11, h->host[i]);
    else if (b->init.kind != TF_INIT_NONE && b->dtype == TF_I64)
      status = tf_init_fill_i64(&b->init, b->name, b->rank, b->shape, 11, h->host[i]);
    CHECK(counts, status == NULL, "%s: initialising '%s': %s", label, b->name, tf_status_message(status));
    tf_status_free(status);
  }
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    tf_cpu_tensor in[TF_OP_VARIADIC_INTERNAL], out[TF_MAX_OUTPUTS];
    tf_cuda_tensor cin[TF_OP_VARIADIC_INTERNAL], cout[TF_MAX_OUTPUTS];
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      const tf_plan_buffer *b =
          &plan->buffers[k < step->n_inputs ? step->inputs[k] : step->outputs[k - step->n_inputs]];
      tf_cpu_tensor *t = k < step->n_inputs ? &in[k] : &out[k - step->n_inputs];
      tf_cuda_tensor *c = k < step->n_inputs ? &cin[k] : &cout[k - step->n_inputs];
      memset(t, 0, sizeof(*t));
      memset(c, 0, sizeof(*c));
      t->dtype = c->dtype = b->dtype;
      t->rank = c->rank = b->rank;
      t->count = c->count = 1;
      for (int32_t d = 0; d < b->rank; d++)
        t->shape[d] = c->shape[d] = b->shape[d], t->count *= b->shape[d], c->count *= b->shape[d];
    }
    int64_t need = tf_cpu_workspace_bytes(step->op, &step->attrs, step->n_inputs, in, step->n_outputs, out, 2, 4);
    cpu_ws = need > cpu_ws ? need : cpu_ws;
    need = tf_cuda_workspace_bytes(step->op, &step->attrs, step->n_inputs, cin, step->n_outputs, cout);
    cuda_ws = need > cuda_ws ? need : cuda_ws;
  }
  h->cpu_workspace = aligned_alloc(64, (size_t)(cpu_ws + 63) / 64 * 64);
  if (!h->cpu_workspace)
    return false;
  return cuda_ok(counts, cudaMalloc((void **)&h->device, (size_t)(total > 0 ? total : 256)), label, "cudaMalloc") &&
         cuda_ok(counts, cudaMalloc(&h->cuda_workspace, (size_t)cuda_ws), label, "cudaMalloc") &&
         cuda_ok(counts, cudaMalloc((void **)&h->run, sizeof(tf_cuda_run_values)), label, "cudaMalloc") &&
         cuda_ok(counts, cudaStreamCreate(&h->stream), label, "cudaStreamCreate") &&
         cublasCreate(&h->cublas) == CUBLAS_STATUS_SUCCESS && cublasSetStream(h->cublas, h->stream) == 0 &&
         cublasSetMathMode(h->cublas, CUBLAS_PEDANTIC_MATH) == 0;
}

static void harness_close(harness *h) {
  for (int32_t i = 0; h->host && i < h->plan->n_buffers; i++)
    free(h->host[i]);
  free(h->host);
  free(h->offsets);
  free(h->cpu_workspace);
  cudaFree(h->device);
  cudaFree(h->cuda_workspace);
  cudaFree(h->run);
  if (h->cublas)
    cublasDestroy(h->cublas);
  if (h->stream)
    cudaStreamDestroy(h->stream);
}

/* Compares buffer `id` (CPU values on the host, CUDA values in `values`); returns the worst ratio. */
static double compare(tf_test_counts *counts, const char *label, const tf_plan *plan, int32_t s, int32_t id,
                      const void *cpu, const void *values) {
  const tf_plan_buffer *b = &plan->buffers[id];
  const tf_plan_step *step = &plan->steps[s];
  if (b->dtype != TF_F32) {
    bool same = memcmp(cpu, values, (size_t)b->bytes) == 0;
    CHECK(counts, same, "%s: step %d '%s' (%s): %s output '%s' differs", label, s, step->name, tf_op_name(step->op),
          tf_dtype_name(b->dtype), b->name);
    return same ? 0 : INFINITY;
  }
  const float *x = cpu, *y = values;
  const int64_t n = b->bytes / 4;
  double scale = 1;
  for (int64_t i = 0; i < n; i++)
    scale = fabs(x[i]) > scale ? fabs(x[i]) : scale;
  const cuda_tolerance t = cuda_test_tolerance(step->op);
  double worst = 0;
  int64_t worst_at = -1;
  for (int64_t i = 0; i < n; i++) {
    const double error = fabs((double)x[i] - (double)y[i]), bound = t.atol * scale + t.rtol * fabs(x[i]);
    const double ratio = error == 0 || (isnan(x[i]) && isnan(y[i])) ? 0 : bound > 0 ? error / bound : INFINITY;
    if (!(ratio <= worst)) {
      worst = isnan(ratio) ? INFINITY : ratio;
      worst_at = i;
    }
  }
  CHECK(counts, worst <= 1.0, "%s: step %d '%s' (%s): '%s'[%lld] cpu %.9g, cuda %.9g (%.3g x the tolerance)", label, s,
        step->name, tf_op_name(step->op), b->name, (long long)worst_at, worst_at >= 0 ? x[worst_at] : 0.0,
        worst_at >= 0 ? y[worst_at] : 0.0, worst);
  return worst;
}

/* Runs step s on both kernels and compares; false after a CUDA failure (the plan stops there). */
static bool run_step(tf_test_counts *counts, const char *label, harness *h, int32_t s, cuda_op_coverage *coverage) {
  const tf_plan *plan = h->plan;
  const tf_plan_step *step = &plan->steps[s];
  const tf_op_info *info = tf_op_info_get(step->op);
  tf_cpu_tensor in[TF_OP_VARIADIC_INTERNAL], out[TF_MAX_OUTPUTS];
  tf_cuda_tensor cin[TF_OP_VARIADIC_INTERNAL], cout[TF_MAX_OUTPUTS];
  int32_t ids[TF_OP_VARIADIC_INTERNAL + TF_MAX_OUTPUTS];
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    const int32_t id = storage_of(plan, k < step->n_inputs ? step->inputs[k] : step->outputs[k - step->n_inputs]);
    const tf_plan_buffer *b = &plan->buffers[id];
    tf_cpu_tensor *t = k < step->n_inputs ? &in[k] : &out[k - step->n_inputs];
    tf_cuda_tensor *c = k < step->n_inputs ? &cin[k] : &cout[k - step->n_inputs];
    ids[k] = id;
    memset(t, 0, sizeof(*t));
    memset(c, 0, sizeof(*c));
    t->data = h->host[id];
    c->data = h->device + h->offsets[id];
    t->dtype = c->dtype = b->dtype;
    t->rank = c->rank = b->rank;
    t->count = c->count = 1;
    for (int32_t d = 0; d < b->rank; d++)
      t->shape[d] = c->shape[d] = b->shape[d], t->count *= b->shape[d], c->count *= b->shape[d];
    if (k < step->n_inputs && !cuda_ok(counts, cudaMemcpy(c->data, t->data, (size_t)b->bytes, cudaMemcpyHostToDevice),
                                       label, "uploading an input"))
      return false;
  }
  tf_cuda_run_values run = {3, 5, 11, 0};
  tf_cuda_args args = {step->op,
                       &step->attrs,
                       step->n_inputs,
                       cin,
                       step->n_outputs,
                       cout,
                       h->cuda_workspace,
                       tf_cuda_workspace_bytes(step->op, &step->attrs, step->n_inputs, cin, step->n_outputs, cout),
                       h->run,
                       h->stream,
                       h->cublas};
  const char *unsupported = tf_cuda_kernel_check(&args);
  CHECK(counts, unsupported == NULL, "%s: step %d (%s): %s", label, s, tf_op_name(step->op), unsupported);
  if (unsupported || !cuda_ok(counts, cudaMemcpy(h->run, &run, sizeof(run), cudaMemcpyHostToDevice), label, "run"))
    return false;
  const char *error = tf_cuda_kernel_launch(&args);
  CHECK(counts, error == NULL, "%s: step %d '%s' (%s): launch: %s", label, s, step->name, tf_op_name(step->op), error);
  if (error || !cuda_ok(counts, cudaStreamSynchronize(h->stream), label, tf_op_name(step->op)))
    return false;
  tf_cpu_context context = {2, 3, 5, 11};
  tf_cpu_args cpu = {
      step->op,         &step->attrs,
      step->n_inputs,   in,
      step->n_outputs,  out,
      h->cpu_workspace, tf_cpu_workspace_bytes(step->op, &step->attrs, step->n_inputs, in, step->n_outputs, out, 2, 4),
      &context};
  tf_cpu_kernel_get(step->op, false)(&cpu);
  double worst = 0;
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    const bool written = k >= step->n_inputs || (k < 8 && ((info->in_place >> k) & 1u));
    if (!written)
      continue;
    const tf_plan_buffer *b = &plan->buffers[ids[k]];
    void *values = malloc((size_t)(b->bytes + 8));
    if (!values ||
        !cuda_ok(counts, cudaMemcpy(values, h->device + h->offsets[ids[k]], (size_t)b->bytes, cudaMemcpyDeviceToHost),
                 label, "downloading")) {
      free(values);
      return false;
    }
    const double ratio = compare(counts, label, plan, s, ids[k], h->host[ids[k]], values);
    worst = ratio > worst ? ratio : worst;
    free(values);
  }
  coverage->steps[step->op]++;
  coverage->worst[step->op] = worst > coverage->worst[step->op] ? worst : coverage->worst[step->op];
  return true;
}

void cuda_test_step_parity(tf_test_counts *counts, const char *label, const tf_plan *plan, const cuda_test_data *data,
                           cuda_op_coverage *coverage) {
  harness h;
  const int failed_before = counts->failed;
  bool ok = harness_open(counts, label, &h, plan, data);
  CHECK(counts, ok, "%s: cannot set up the harness", label);
  for (int32_t s = 0; ok && s < plan->n_steps; s++)
    ok = run_step(counts, label, &h, s, coverage);
  harness_close(&h);
  printf("%-4s %-48s %4d steps\n", counts->failed == failed_before ? "ok" : "FAIL", label, plan->n_steps);
}
