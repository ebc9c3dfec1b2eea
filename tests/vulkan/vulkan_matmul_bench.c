/* Matmul throughput on each backend: vulkan_matmul_bench [M K N] [repeats] (default 512 512 512, 20).
 * Runs an inference plan of one [M,K] x [K,N] product through sessions (the CPU backend's OpenBLAS
 * sgemm with its default 2 threads, and Vulkan) and prints GFLOP/s over the repeats after a warm-up,
 * and Vulkan's largest difference from the CPU's result as a fraction of the CPU's largest |C|
 * (exit 1 past 1e-4: a wrong shader variant is not timed as a fast one). The Vulkan variant is the
 * environment's (TIGHTFIT_VULKAN_SUBGROUPS, TIGHTFIT_VULKAN_BIG_MATMUL). Not a test: numbers depend on
 * the machine (on lavapipe, the Vulkan device is the CPU too). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(tf_status status) {
  fprintf(stderr, "vulkan_matmul_bench: %s\n", tf_status_message(status));
  tf_status_free(status);
  return 1;
}

/* max |got - want| / max |want| over `count` elements (NaN anywhere: NaN). */
static double relative_error(const float *got, const float *want, int64_t count) {
  double worst = 0, largest = 0;
  for (int64_t i = 0; i < count; i++) {
    const double d = fabs((double)got[i] - (double)want[i]);
    if (isnan(d))
      return NAN;
    worst = d > worst ? d : worst;
    largest = fabs((double)want[i]) > largest ? fabs((double)want[i]) : largest;
  }
  return largest > 0 ? worst / largest : worst;
}

int main(int argc, char **argv) {
  int64_t m = argc > 3 ? atoll(argv[1]) : 512, k = argc > 3 ? atoll(argv[2]) : 512, n = argc > 3 ? atoll(argv[3]) : 512;
  int repeats = argc > 4 ? atoi(argv[4]) : argc == 2 ? atoi(argv[1]) : 20;
  tf_graph *g = NULL;
  tf_status status = tf_graph_create("matmul", &g);
  if (status)
    return fail(status);
  tf_init init = tf_init_make(TF_INIT_NORMAL, 0.0, 1.0);
  tf_tensor_id a = tf_graph_parameter(g, "a", TF_F32, TF_SHAPE(tf_fixed(m), tf_fixed(k)), init);
  tf_tensor_id b = tf_graph_parameter(g, "b", TF_F32, TF_SHAPE(tf_fixed(k), tf_fixed(n)), init);
  tf_tensor_id y = tf_matmul(g, a, b, false, false);
  tf_graph_rename(g, y, "y");
  tf_graph_add_output(g, y);
  static const char *const backends[2] = {"cpu", "vulkan"};
  float *result = malloc(sizeof(float) * (size_t)(m * n)), *reference = malloc(sizeof(float) * (size_t)(m * n));
  double error = 0;
  if (!result || !reference)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot hold two %lld x %lld results", (long long)m, (long long)n);
  for (int i = 0; i < 2 && !status && result && reference; i++) {
    tf_compile_options options = tf_compile_options_default(i ? TF_TARGET_VULKAN : TF_TARGET_CPU);
    options.training = false;
    tf_plan *plan = NULL;
    tf_session *session = NULL;
    status = tf_compile(g, &options, &plan);
    tf_session_options session_options = tf_session_options_default();
    session_options.backend = backends[i];
    if (!status)
      status = tf_session_create(plan, &session_options, &session);
    double loss, start = 0;
    for (int r = -2; r < repeats && !status; r++) {
      if (r == 0) // after two warm-up runs (pipeline compilation, caches)
        start = now();
      status = tf_session_forward(session, &loss);
    }
    // Reading one element of the output waits for the last submission; the whole output is read
    // after the clock stops (its copy to the host took as long as a product of 8192 x 768 x 3072).
    int32_t output = -1;
    for (int32_t j = 0; plan && j < plan->n_buffers && output < 0; j++)
      output = strcmp(plan->buffers[j].name, "y") == 0 ? j : -1;
    float first;
    if (!status)
      status = output >= 0 ? tf_session_read_range(session, output, 0, &first, sizeof(first))
                           : tf_status_new(TF_ERR_INTERNAL, "the plan has no buffer 'y'");
    double seconds = (now() - start) / repeats;
    if (!status)
      status = tf_session_read(session, "y", i ? result : reference, (int64_t)sizeof(float) * m * n);
    if (!status && i)
      error = relative_error(result, reference, m * n);
    if (!status)
      printf("%-6s matmul [%" PRId64 ",%" PRId64 "]x[%" PRId64 ",%" PRId64 "]: %.3f ms, %.1f GFLOP/s%s", backends[i], m,
             k, k, n, seconds * 1e3, 2.0 * (double)m * (double)n * (double)k / seconds * 1e-9, i ? "" : "\n");
    if (!status && i)
      printf(", max |vulkan - cpu| / max |cpu| %.2e\n", error);
    tf_session_destroy(session);
    tf_plan_destroy(plan);
  }
  free(result);
  free(reference);
  tf_graph_destroy(g);
  if (!status && !(error <= 1e-4)) {
    fprintf(stderr, "vulkan_matmul_bench: Vulkan's product differs from the CPU's by %.2e of its largest |C|\n", error);
    return 1;
  }
  return status ? fail(status) : 0;
}
