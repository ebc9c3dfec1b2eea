/* Half-precision matrix products on CUDA (the plan's matmul_math, compile --matmul-math):
 *   (a) the matmul kernel with bf16 and f16 math against an f64 product of the same f32 operands:
 *       every element within its stated bound, (2 u + K 2^-24) sum_k |a_ik b_kj| with u the half
 *       type's unit roundoff (bf16 2^-8, f16 2^-11): the operands rounded once, f32 accumulation;
 *       and the f32 path within K 2^-24 sum_k |a_ik b_kj| (no TF32), with the half paths' largest error
 *       over 100 times the f32 path's (the tensor cores were really used);
 *   (b) the 2-layer character gpt trained 200 AdamW steps on models/data/text with bf16 math on
 *       CUDA tracks the f32-math run's loss within 2% at every 20th step (issue 14's criterion).
 * Exits 77 without a CUDA device. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test.h"
#include "kernels/cuda/kernels.h"
#include "session_compare.h"
#include "tightfit/feed.h"
#include "zoo_plans.h"

static tf_test_counts counts;

enum { M = 192, K = 1024, N = 160 };

typedef struct product_error {
  double worst_ratio; /* largest |error| / bound */
  double worst_abs;   /* largest |error| */
} product_error;

/* C = A B on the device with `math`; compares with the f64 product under `unit` (0: the f32 bound). */
static product_error check_product(const float *a, const float *b, const double *exact, const double *magnitude,
                                   tf_dtype math, double unit, float *device, cublasHandle_t handle, void *workspace,
                                   int64_t workspace_bytes) {
  product_error e = {0, 0};
  float *da = device, *db = device + M * K, *dc = db + K * N;
  float *c = malloc(sizeof(float) * M * N);
  if (!c || cudaMemcpy(da, a, sizeof(float) * M * K, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(db, b, sizeof(float) * K * N, cudaMemcpyHostToDevice) != cudaSuccess) {
    CHECK(&counts, false, "%s math: upload", tf_dtype_name(math));
    free(c);
    return e;
  }
  tf_cuda_tensor ta = {.data = da, .dtype = TF_F32, .rank = 2, .shape = {M, K}, .count = M * K};
  tf_cuda_tensor tb = {.data = db, .dtype = TF_F32, .rank = 2, .shape = {K, N}, .count = K * N};
  tf_cuda_tensor tc = {.data = dc, .dtype = TF_F32, .rank = 2, .shape = {M, N}, .count = M * N};
  tf_cuda_tensor inputs[2] = {ta, tb};
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_MATMUL;
  tf_cuda_args args = {.op = TF_OP_MATMUL,
                       .attrs = &attrs,
                       .n_inputs = 2,
                       .inputs = inputs,
                       .n_outputs = 1,
                       .outputs = &tc,
                       .workspace = workspace,
                       .workspace_bytes = workspace_bytes,
                       .cublas = handle,
                       .math = math};
  tf_status status = tf_cuda_kernel_launch(&args);
  CHECK(&counts, status == NULL, "%s math: launch: %s", tf_dtype_name(math), tf_status_message(status));
  tf_status_free(status);
  CHECK(&counts, cudaMemcpy(c, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost) == cudaSuccess, "%s math: download",
        tf_dtype_name(math));
  for (int64_t i = 0; i < (int64_t)M * N; i++) {
    const double bound = (2 * unit + K * ldexp(1, -24)) * magnitude[i], error = fabs((double)c[i] - exact[i]);
    if (error / bound > e.worst_ratio)
      e.worst_ratio = error / bound;
    if (error > e.worst_abs)
      e.worst_abs = error;
  }
  free(c);
  return e;
}

static void test_products(void) {
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
  double *exact = calloc((size_t)M * N, sizeof(double)), *magnitude = calloc((size_t)M * N, sizeof(double));
  float *device = NULL;
  void *workspace = NULL;
  const int64_t workspace_bytes = 4 << 20;
  cublasHandle_t handle = NULL;
  if (!a || !b || !exact || !magnitude || cudaMalloc((void **)&device, sizeof(float) * (M * K + K * N + M * N)) ||
      cudaMalloc(&workspace, (size_t)workspace_bytes) || cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
    CHECK(&counts, false, "products: set-up failed");
  } else {
    uint64_t state = 5;
    for (int64_t i = 0; i < (int64_t)M * K; i++)
      a[i] = cuda_test_normal(&state);
    for (int64_t i = 0; i < (int64_t)K * N; i++)
      b[i] = cuda_test_normal(&state);
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) {
          const double p = (double)a[i * K + k] * (double)b[k * N + j];
          exact[i * N + j] += p;
          magnitude[i * N + j] += fabs(p);
        }
    const product_error f32 =
        check_product(a, b, exact, magnitude, TF_F32, 0, device, handle, workspace, workspace_bytes);
    const product_error bf16 =
        check_product(a, b, exact, magnitude, TF_BF16, ldexp(1, -8), device, handle, workspace, workspace_bytes);
    const product_error f16 =
        check_product(a, b, exact, magnitude, TF_F16, ldexp(1, -11), device, handle, workspace, workspace_bytes);
    CHECK(&counts, f32.worst_ratio <= 1, "f32 math: %.3g x its bound (TF32 or worse?)", f32.worst_ratio);
    CHECK(&counts, bf16.worst_ratio <= 1, "bf16 math: %.3g x its bound", bf16.worst_ratio);
    CHECK(&counts, f16.worst_ratio <= 1, "f16 math: %.3g x its bound", f16.worst_ratio);
    CHECK(&counts, bf16.worst_abs > 100 * f32.worst_abs && f16.worst_abs > 100 * f32.worst_abs,
          "the half paths' errors (bf16 %.3g, f16 %.3g) are not over 100x the f32 path's (%.3g): no tensor cores?",
          bf16.worst_abs, f16.worst_abs, f32.worst_abs);
    printf("%-4s matmul [%d,%d]x[%d,%d]: worst error / bound: f32 %.3f, bf16 %.3f, f16 %.3f; worst |error|: f32 "
           "%.3g, bf16 %.3g, f16 %.3g\n",
           counts.failed ? "FAIL" : "ok", M, K, K, N, f32.worst_ratio, bf16.worst_ratio, f16.worst_ratio, f32.worst_abs,
           bf16.worst_abs, f16.worst_abs);
  }
  if (handle)
    cublasDestroy(handle);
  cudaFree(workspace);
  cudaFree(device);
  free(a), free(b), free(exact), free(magnitude);
}

/* ---- (b) the 2-layer gpt, bf16 math against f32 math ---- */

#define TRAIN_STEPS 200
#define LOG_EVERY 20

/* The 2-layer gpt compiled for CUDA with `math`; NULL (failure recorded) on error. */
static tf_plan *compile_gpt(tf_dtype math) {
  static const char *const overrides[] = {"layers=2"};
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = "N=16,T=64";
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.learning_rate = 1e-3;
  o.matmul_math = math;
  char label[64];
  snprintf(label, sizeof(label), "gpt, %s math", tf_dtype_name(math));
  return tf_test_zoo_plan(&counts, label, "gpt", overrides, 1, &o);
}

/* tf_feed_next as a tf_test_feed_fn: `state` is the feed. */
static tf_status next_batch(void *state, tf_session *session, int64_t step) {
  (void)step;
  return tf_feed_next(state, session);
}

/* Trains TRAIN_STEPS steps on models/data/text/train; losses[s] is step s's loss. */
static bool train_gpt(tf_dtype math, double *losses) {
  tf_plan *plan = compile_gpt(math);
  tf_session *session = NULL;
  tf_feed *feed = NULL;
  tf_status status = plan ? NULL : tf_status_new(TF_ERR_INTERNAL, "no plan");
  if (!status) {
    tf_session_options o = tf_session_options_default();
    o.backend = "cuda";
    o.seed = 3;
    status = tf_session_create(plan, &o, &session);
  }
  if (!status)
    status = tf_feed_open(plan, "models/data/text/train", 3, &feed);
  if (!status)
    status = tf_test_train(session, TRAIN_STEPS, next_batch, feed, losses);
  CHECK(&counts, status == NULL, "gpt, %s math: %s", tf_dtype_name(math), tf_status_message(status));
  const bool ok = status == NULL;
  tf_status_free(status);
  tf_feed_close(feed);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return ok;
}

static void test_gpt_tracks(void) {
  double f32[TRAIN_STEPS], bf16[TRAIN_STEPS];
  if (!train_gpt(TF_F32, f32) || !train_gpt(TF_BF16, bf16))
    return;
  double worst = 0;
  for (int s = LOG_EVERY - 1; s < TRAIN_STEPS; s += LOG_EVERY) {
    const double gap = fabs(bf16[s] - f32[s]) / f32[s];
    if (gap > worst)
      worst = gap;
    printf("     step %3d: loss f32 math %.4f, bf16 math %.4f (%+.2f%%)\n", s + 1, f32[s], bf16[s],
           100 * (bf16[s] - f32[s]) / f32[s]);
  }
  CHECK(&counts, worst <= 0.02, "bf16 math strays %.2f%% from f32 math (over 2%%)", 100 * worst);
  CHECK(&counts, f32[TRAIN_STEPS - 1] < 0.8 * f32[0], "the f32 run did not learn: %.4f -> %.4f", f32[0],
        f32[TRAIN_STEPS - 1]);
  printf("%-4s gpt 2 layers, %d AdamW steps on cuda: bf16 math within %.2f%% of f32 math at every %dth step\n",
         worst <= 0.02 ? "ok" : "FAIL", TRAIN_STEPS, 100 * worst, LOG_EVERY);
}

int main(void) {
  int available = cuda_test_device();
  if (available != 0)
    return available;
  test_products();
  test_gpt_tracks();
  return tf_test_finish("cuda half math", &counts);
}
