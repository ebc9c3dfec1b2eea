/* batch_norm_running on Vulkan (shaders/batch_norm_running.comp): a batch_norm tracking running
 * statistics, x [4,3,5,7], [5,6], [3,5,300] and [2,70001] (a second grid-stride round of channels)
 * in f32, bf16 and f16, the running statistics f32. Each graph is compiled for the vulkan target,
 * whose plan must update the statistics in a batch_norm_running step reading x in its own dtype
 * (on half x: the shader's half variant, no cast), and for the cpu target without half kernels
 * (half x widened by a cast, exactly, then the f32 kernel); both sessions run two micro-batches on
 * the same x. The running mean and variance are then compared with a float64 reference computed
 * here from x and the initial values (mean, biased variance x M / (M - 1), the update rounded to
 * f32 after each micro-batch, as the buffers keep it) and with the CPU kernel's, with the subgroup
 * variants and without. Tolerance, against both: |got - ref| <= 1e-5 |ref| + 1e-5 max(1, max |ref|),
 * the conformance suite's for sums. Under the validation layer; exits 77 without a Vulkan device. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "half_values.h"
#include "op_graphs.h"
#include "parity.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define MICRO_BATCHES 2
#define MOMENTUM 0.1f

static tf_test_counts counts;

typedef struct shape_case {
  int32_t rank;
  int64_t dims[4];
} shape_case;

/* The worst errors of one setting: against the reference and against the CPU kernel. */
typedef struct errors {
  double vs_reference, vs_cpu;   /* largest |error| */
  double ratio_reference, ratio; /* ... as a fraction of the tolerance */
} errors;

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Normal values around 0.5 (a mean the update must carry), Box-Muller from splitmix64. */
static double sample(uint64_t *state) {
  const double u1 = (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0) + 1e-12;
  const double u2 = (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0);
  return 0.5 + 1.5 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static tf_shape shape_of(const shape_case *s) {
  tf_shape shape;
  memset(&shape, 0, sizeof(shape));
  shape.rank = s->rank;
  for (int32_t i = 0; i < s->rank; i++)
    shape.dims[i] = d(s->dims[i]);
  return shape;
}

/* x (an input of `dtype`) -> batch_norm tracking running_mean and running_var (f32 constants) ->
 * y x w, w the parameter that makes it a training plan; loss sum(y w probe). */
static tf_graph *build(const shape_case *s, tf_dtype dtype) {
  tf_graph *g = tf_test_graph_begin(&counts, "batch_norm_running");
  if (!g)
    return NULL;
  const tf_shape channels = {.rank = 1, .dims = {d(s->dims[1])}};
  tf_tensor_id x = tf_graph_input(g, "x", dtype, shape_of(s));
  tf_tensor_id gamma = tf_graph_constant(g, "gamma", TF_F32, channels, tf_init_make(TF_INIT_UNIFORM, 0.5, 2.0));
  tf_tensor_id beta = tf_graph_constant(g, "beta", TF_F32, channels, tf_init_make(TF_INIT_UNIFORM, -1.0, 1.0));
  if (dtype != TF_F32) {
    gamma = tf_cast(g, gamma, dtype);
    beta = tf_cast(g, beta, dtype);
  }
  tf_tensor_id mean = tf_graph_constant(g, "running_mean", TF_F32, channels, tf_init_make(TF_INIT_UNIFORM, -1.0, 1.0));
  tf_tensor_id var = tf_graph_constant(g, "running_var", TF_F32, channels, tf_init_make(TF_INIT_UNIFORM, 0.5, 2.0));
  tf_tensor_id y = tf_batch_norm_tracked(g, x, gamma, beta, mean, var, 1e-5f, MOMENTUM);
  if (dtype != TF_F32)
    y = tf_cast(g, y, TF_F32);
  tf_test_finish_probe(g, tf_mul(g, y, tf_test_param(g, "w", shape_of(s))));
  return g;
}

/* The plan's batch_norm_running steps, and whether each reads x in `dtype`. */
static int32_t running_steps(const tf_plan *plan, tf_dtype dtype, bool *x_in_dtype) {
  int32_t n = 0;
  *x_in_dtype = true;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op != TF_OP_BATCH_NORM_RUNNING)
      continue;
    n++;
    *x_in_dtype = *x_in_dtype && plan->buffers[step->inputs[0]].dtype == dtype;
  }
  return n;
}

/* Compiles `graph` for the cpu target without half kernels (sessions[0]) and for the vulkan target
 * (sessions[1]); the caller closes them (parity_close). */
static tf_status open_sessions(const tf_graph *graph, tf_plan *plans[2], tf_session *sessions[2]) {
  tf_compile_options each[2] = {tf_compile_options_default(TF_TARGET_CPU),
                                tf_compile_options_default(TF_TARGET_VULKAN)};
  for (int b = 0; b < 2; b++) {
    each[b].training = true;
    each[b].accumulate = MICRO_BATCHES;
  }
  memset(each[0].target.half_kernels, 0, sizeof(each[0].target.half_kernels));
  return parity_open_each(graph, each, plans, sessions);
}

static tf_status read_floats(tf_session *session, const char *name, float *values, int64_t n) {
  return tf_session_read(session, name, values, n * (int64_t)sizeof(float));
}

/* Writes x (as `dtype`) and a probe of ones into both sessions. */
static tf_status feed(tf_session *sessions[2], const tf_plan *plan, tf_dtype dtype, const float *x, int64_t count) {
  const size_t element = (size_t)tf_dtype_size(dtype);
  void *bytes = malloc((size_t)count * element + 8);
  if (!bytes)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "test: x");
  for (int64_t i = 0; i < count; i++)
    if (dtype == TF_F32)
      ((float *)bytes)[i] = x[i];
    else
      ((uint16_t *)bytes)[i] = tf_test_half_bits(dtype, x[i]);
  tf_status status = NULL;
  for (int b = 0; b < 2 && !status; b++)
    status = tf_session_write(sessions[b], "x", bytes, count * (int64_t)element);
  free(bytes);
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *buffer = &plan->buffers[i];
    if (buffer->role != TF_ROLE_INPUT || strcmp(buffer->name, "x") == 0 ||
        (buffer->io_twin >= 0 && buffer->io_twin < i))
      continue;
    float *ones = malloc((size_t)buffer->bytes + 4);
    if (!ones)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "test: '%s'", buffer->name);
    for (int64_t k = 0; k < buffer->bytes / 4; k++)
      ones[k] = 1.0f;
    for (int b = 0; b < 2 && !status; b++)
      status = tf_session_write(sessions[b], buffer->name, ones, buffer->bytes);
    free(ones);
  }
  return status;
}

/* One micro-batch of the reference on x as stored (`x` holds the values already rounded). */
static void reference_update(const shape_case *s, const float *x, float *mean, float *var) {
  int64_t spatial = 1;
  for (int32_t i = 2; i < s->rank; i++)
    spatial *= s->dims[i];
  const int64_t batch = s->dims[0], channels = s->dims[1], m = batch * spatial;
  for (int64_t c = 0; c < channels; c++) {
    double sum = 0, squares = 0;
    for (int64_t n = 0; n < batch; n++)
      for (int64_t k = 0; k < spatial; k++)
        sum += x[(n * channels + c) * spatial + k];
    const double mu = sum / (double)m;
    for (int64_t n = 0; n < batch; n++)
      for (int64_t k = 0; k < spatial; k++) {
        const double centred = x[(n * channels + c) * spatial + k] - mu;
        squares += centred * centred;
      }
    const double biased = squares / (double)m, unbiased = m > 1 ? biased * (double)m / (double)(m - 1) : biased;
    const double momentum = (double)MOMENTUM;
    mean[c] = (float)((1 - momentum) * mean[c] + momentum * mu);
    var[c] = (float)((1 - momentum) * var[c] + momentum * unbiased);
  }
}

/* got against ref over n values: folds the largest |error| into *worst and the largest fraction of
 * the tolerance into *ratio (a NaN counts as infinite); returns where this statistic's is. */
static int64_t compare(const float *got, const float *ref, int64_t n, double *worst, double *ratio) {
  double scale = 1;
  for (int64_t i = 0; i < n; i++)
    scale = fmax(scale, fabs((double)ref[i]));
  int64_t at = 0;
  double here = -1;
  for (int64_t i = 0; i < n; i++) {
    double error = fabs((double)got[i] - (double)ref[i]);
    error = isnan(error) ? INFINITY : error;
    const double r = error / (1e-5 * fabs((double)ref[i]) + 1e-5 * scale);
    if (r > here) {
      here = r;
      at = i;
    }
    *worst = fmax(*worst, error);
  }
  *ratio = fmax(*ratio, here);
  return at;
}

static void run_case(const shape_case *s, tf_dtype dtype, const char *setting, errors *worst) {
  char label[128];
  int len = snprintf(label, sizeof(label), "[");
  for (int32_t i = 0; i < s->rank; i++)
    len += snprintf(label + len, sizeof(label) - (size_t)len, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  snprintf(label + len, sizeof(label) - (size_t)len, "] %s, %s", tf_dtype_name(dtype), setting);
  tf_graph *g = build(s, dtype);
  if (!g)
    return;
  tf_plan *plans[2];
  tf_session *sessions[2];
  tf_status status = open_sessions(g, plans, sessions);
  tf_graph_destroy(g);
  CHECK(&counts, status == NULL, "%s: %s", label, tf_status_message(status));
  if (status) {
    tf_status_free(status);
    parity_close(plans, sessions);
    return;
  }
  bool x_in_dtype = false;
  const int32_t steps = running_steps(plans[1], dtype, &x_in_dtype);
  CHECK(&counts, steps == 1 && x_in_dtype, "%s: %d batch_norm_running steps in the vulkan plan, x %s", label, steps,
        x_in_dtype ? "as stored" : "cast");

  const int64_t channels = s->dims[1];
  int64_t count = 1;
  for (int32_t i = 0; i < s->rank; i++)
    count *= s->dims[i];
  float *x = malloc((size_t)count * sizeof(float));
  /* mean and var of the reference, the cpu and vulkan */
  float *stats = malloc((size_t)channels * 6 * sizeof(float));
  float *ref_mean = stats, *ref_var = stats + channels;
  if (!x || !stats) {
    CHECK(&counts, false, "%s: out of host memory", label);
    free(x);
    free(stats);
    parity_close(plans, sessions);
    return;
  }
  // The initial values, from the cpu session; the vulkan one must start from the same bits.
  status = read_floats(sessions[0], "running_mean", ref_mean, channels);
  if (!status)
    status = read_floats(sessions[0], "running_var", ref_var, channels);
  if (!status)
    status = read_floats(sessions[1], "running_mean", stats + 4 * channels, channels);
  if (!status)
    status = read_floats(sessions[1], "running_var", stats + 5 * channels, channels);
  CHECK(&counts, status || memcmp(stats, stats + 4 * channels, 2 * (size_t)channels * sizeof(float)) == 0,
        "%s: the sessions' initial running statistics differ", label);
  uint64_t seed = 0x5eed + (uint64_t)count;
  for (int32_t m = 0; m < MICRO_BATCHES && !status; m++) {
    for (int64_t i = 0; i < count; i++)
      x[i] = dtype == TF_F32 ? (float)sample(&seed) : tf_test_half_round(dtype, sample(&seed));
    status = feed(sessions, plans[0], dtype, x, count);
    double loss = 0;
    for (int b = 0; b < 2 && !status; b++)
      status = tf_status_prefix(tf_session_micro_step(sessions[b], &loss), "%s", b ? "vulkan" : "cpu");
    reference_update(s, x, ref_mean, ref_var);
  }
  for (int b = 0; b < 2 && !status; b++) {
    status = read_floats(sessions[b], "running_mean", stats + (2 + 2 * b) * channels, channels);
    if (!status)
      status = read_floats(sessions[b], "running_var", stats + (3 + 2 * b) * channels, channels);
  }
  CHECK(&counts, status == NULL, "%s: %s", label, tf_status_message(status));
  if (!status) {
    double abs_ref = 0, ratio_ref = 0, abs_cpu = 0, ratio_cpu = 0, abs_cpu_ref = 0, ratio_cpu_ref = 0;
    for (int32_t k = 0; k < 2; k++) { /* mean, var */
      const float *ref = stats + k * channels, *cpu = stats + (2 + k) * channels, *vulkan = stats + (4 + k) * channels;
      const int64_t at = compare(vulkan, ref, channels, &abs_ref, &ratio_ref);
      CHECK(&counts, ratio_ref <= 1, "%s: running %s[%lld]: vulkan %.9g, reference %.9g", label, k ? "var" : "mean",
            (long long)at, vulkan[at], ref[at]);
      compare(vulkan, cpu, channels, &abs_cpu, &ratio_cpu);
      compare(cpu, ref, channels, &abs_cpu_ref, &ratio_cpu_ref);
    }
    CHECK(&counts, ratio_cpu <= 1, "%s: vulkan against the cpu kernel: %.3g x the tolerance", label, ratio_cpu);
    printf("%-4s %-28s vs f64 %.2e (%.3f of tol.), vs cpu %.2e (%.3f); cpu vs f64 %.2e\n",
           ratio_ref <= 1 && ratio_cpu <= 1 ? "ok" : "FAIL", label, abs_ref, ratio_ref, abs_cpu, ratio_cpu,
           abs_cpu_ref);
    worst->vs_reference = fmax(worst->vs_reference, abs_ref);
    worst->ratio_reference = fmax(worst->ratio_reference, ratio_ref);
    worst->vs_cpu = fmax(worst->vs_cpu, abs_cpu);
    worst->ratio = fmax(worst->ratio, ratio_cpu);
  }
  tf_status_free(status);
  free(x);
  free(stats);
  parity_close(plans, sessions);
}

int main(void) {
  const int available = parity_vulkan_available();
  if (available != 0)
    return available;
  static const shape_case shapes[] = {{4, {4, 3, 5, 7}}, {2, {5, 6}}, {3, {3, 5, 300}}, {2, {2, 70001}}};
  static const tf_dtype dtypes[] = {TF_F32, TF_BF16, TF_F16};
  for (int setting = 0; setting < 2; setting++) {
    const char *name = setting ? "no subgroups" : "subgroups";
    if (setting)
      setenv("TIGHTFIT_VULKAN_SUBGROUPS", "0", 1);
    for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
      errors worst = {0, 0, 0, 0};
      for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        run_case(&shapes[i], dtypes[t], name, &worst);
      printf("     %s, %s: max |error| vs f64 %.2e, vs the cpu kernel %.2e\n", tf_dtype_name(dtypes[t]), name,
             worst.vs_reference, worst.vs_cpu);
    }
  }
  unsetenv("TIGHTFIT_VULKAN_SUBGROUPS");
  parity_check_validation(&counts);
  return tf_test_finish("batch_norm_running on vulkan", &counts);
}
