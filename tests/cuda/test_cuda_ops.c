/* The conformance suite (tests/conformance) on the CUDA backend: every case of the op table, every
 * step of its plans (forward, backward, accumulate, global norm, update, zero) run alone on the
 * backend and compared with the f64 CPU reference kernels and the f32 ones, each plan run end to end
 * against the CPU, and every op the CUDA kernels claim (tf_cuda_kernel_exists) run at least once.
 * The table's large rows take the kernels' other paths: split column sums, multi-block partials, the
 * embedding sort across blocks, several im2col chunks, every attention head-width variant. Then
 * what only CUDA has: cast over every dtype pair on special values, against the CPU's rules, and a
 * reshape onto its own input. Exits 77 without a CUDA device (cuda_test_device()). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"
#include "cuda_test.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels.h"

static tf_test_counts counts;
static conf_coverage coverage;

static bool cuda_claims(tf_op op) { return tf_cuda_kernel_exists(op); }

/* ---- cast over every dtype pair, on values that test the rules ---- */

static const float SPECIALS[] = {0.0f,   -0.0f,  1.5f,        -2.5f,    0.1f,      65504.0f, 65520.0f, 1e-8f,  6e-8f,
                                 -3e-5f, NAN,    -NAN,        INFINITY, -INFINITY, 3e9f,     -3e9f,    300.7f, -1.0f,
                                 255.5f, 256.0f, 16777217.0f, 1e20f,    -1e20f,    2.5f,     3.5f};
#define N_SPECIALS ((int64_t)(sizeof(SPECIALS) / sizeof(SPECIALS[0])))

static tf_cpu_tensor host_tensor(void *data, tf_dtype dtype) {
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data, t.dtype = dtype, t.rank = 1, t.shape[0] = N_SPECIALS, t.count = N_SPECIALS;
  return t;
}

static void cpu_cast(const tf_cpu_tensor *x, const tf_cpu_tensor *y) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_CAST;
  attrs.u.cast.to = y->dtype;
  tf_cpu_context context = {.threads = 1, .optimizer_step = 1, .micro_step = 0, .seed = 0};
  tf_cpu_args args = {
      .op = TF_OP_CAST, .attrs = &attrs, .n_inputs = 1, .inputs = x, .n_outputs = 1, .outputs = y, .context = &context};
  tf_cpu_kernel_get(TF_OP_CAST, false)(&args);
}

/* Uploads `bytes` of `host` to `device`, launches `args`, then downloads `result_bytes` of `result` into
 * `back`: NULL, or the first failure (the caller frees it). */
static tf_status round_trip(const tf_cuda_args *args, void *device, const void *host, size_t bytes, void *back,
                            const void *result, size_t result_bytes) {
  cudaError_t error = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);
  if (error != cudaSuccess)
    return tf_status_new(TF_ERR_BACKEND, "upload: %s", cudaGetErrorString(error));
  TF_RETURN_IF_ERROR(tf_cuda_kernel_launch(args));
  error = cudaMemcpy(back, result, result_bytes, cudaMemcpyDeviceToHost);
  if (error != cudaSuccess)
    return tf_status_new(TF_ERR_BACKEND, "download: %s", cudaGetErrorString(error));
  return NULL;
}

static void test_cast_matrix(void) {
  const tf_dtype dtypes[] = {TF_F32, TF_F16, TF_BF16, TF_I32, TF_I64, TF_U8};
  char *device = NULL;
  if (cudaMalloc((void **)&device, 2 * 8 * N_SPECIALS) != cudaSuccess) {
    CHECK(&counts, false, "cast: cudaMalloc");
    return;
  }
  int pairs = 0, failed_before = counts.failed;
  for (int from = 0; from < 6; from++)
    for (int to = 0; to < 6; to++) {
      uint64_t source[N_SPECIALS], expected[N_SPECIALS], actual[N_SPECIALS];
      memset(expected, 0, sizeof(expected));
      memset(actual, 0, sizeof(actual));
      tf_cpu_tensor specials = host_tensor((void *)SPECIALS, TF_F32), x = host_tensor(source, dtypes[from]);
      tf_cpu_tensor y = host_tensor(expected, dtypes[to]);
      cpu_cast(&specials, &x); /* the specials as `from` values, by the CPU's rules */
      cpu_cast(&x, &y);
      tf_cuda_tensor cx = {
          .data = device, .dtype = dtypes[from], .rank = 1, .shape = {N_SPECIALS}, .count = N_SPECIALS};
      tf_cuda_tensor cy = {
          .data = device + 8 * N_SPECIALS, .dtype = dtypes[to], .rank = 1, .shape = {N_SPECIALS}, .count = N_SPECIALS};
      tf_attrs attrs;
      memset(&attrs, 0, sizeof(attrs));
      attrs.kind = TF_ATTR_CAST;
      attrs.u.cast.to = dtypes[to];
      tf_cuda_args args = {
          .op = TF_OP_CAST, .attrs = &attrs, .n_inputs = 1, .inputs = &cx, .n_outputs = 1, .outputs = &cy};
      const int64_t from_bytes = N_SPECIALS * tf_dtype_size(dtypes[from]),
                    to_bytes = N_SPECIALS * tf_dtype_size(dtypes[to]);
      tf_status error = round_trip(&args, device, source, (size_t)from_bytes, actual, cy.data, (size_t)to_bytes);
      CHECK(&counts, error == NULL, "cast %s -> %s: %s", tf_dtype_name(dtypes[from]), tf_dtype_name(dtypes[to]),
            tf_status_message(error));
      tf_status_free(error);
      CHECK(&counts, memcmp(expected, actual, (size_t)to_bytes) == 0, "cast %s -> %s differs from the CPU's",
            tf_dtype_name(dtypes[from]), tf_dtype_name(dtypes[to]));
      pairs++;
    }
  printf("%-4s %-48s %4d pairs\n", counts.failed == failed_before ? "ok" : "FAIL", "cast, every dtype pair, specials",
         pairs);
  cudaFree(device);
}

/* A reshape placed on its input (alias_of) must not move anything. */
static void test_reshape_alias(void) {
  float *device = NULL, host[12], back[12];
  for (int i = 0; i < 12; i++)
    host[i] = (float)i;
  if (cudaMalloc((void **)&device, sizeof(host)) != cudaSuccess) {
    CHECK(&counts, false, "reshape alias: cudaMalloc");
    return;
  }
  tf_cuda_tensor x = {.data = device, .dtype = TF_F32, .rank = 2, .shape = {3, 4}, .count = 12};
  tf_cuda_tensor y = {.data = device, .dtype = TF_F32, .rank = 2, .shape = {2, 6}, .count = 12};
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_SHAPE;
  tf_cuda_args args = {
      .op = TF_OP_RESHAPE, .attrs = &attrs, .n_inputs = 1, .inputs = &x, .n_outputs = 1, .outputs = &y};
  tf_status error = round_trip(&args, device, host, sizeof(host), back, device, sizeof(back));
  CHECK(&counts, error == NULL && memcmp(host, back, sizeof(host)) == 0, "reshape onto its input: %s",
        error ? tf_status_message(error) : "changed the data");
  tf_status_free(error);
  printf("ok   reshape onto its own input is a no-op\n");
  cudaFree(device);
}

int main(void) {
  int available = cuda_test_device();
  if (available != 0)
    return available;
  const conf_backend cuda = {.name = "cuda",
                             .target = TF_TARGET_CUDA,
                             .claims = cuda_claims,
                             .refuses = 0,
                             .rounded_terms = conf_cuda_rounded_terms};
  conf_run_table(&counts, &cuda, &coverage);
  conf_run_table_half(&counts, &cuda, &coverage, TF_BF16);
  conf_run_table_half(&counts, &cuda, &coverage, TF_F16);
  test_cast_matrix();
  test_reshape_alias();
  conf_check_coverage(&counts, &cuda, &coverage);
  conf_check_half_coverage(&counts, &cuda, &coverage);
  return tf_test_finish("cuda ops", &counts);
}
