/* Backend parity helpers (parity.h). */
#define _POSIX_C_SOURCE 200809L
#include "parity.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/vulkan/vulkan.h"

/* One backend stays open (reachable from here, so not a leak) until the process ends: the loader
 * unloads the driver when its last instance goes, and LeakSanitizer could then not attribute the
 * driver's own leaks to its library, which is how lsan_driver.supp recognises them. */
static void *pinned_backend;

/* Says which shader variants run, and fails when that is not what was asked for: none with
 * TIGHTFIT_VULKAN_SUBGROUPS=0, and the subgroup ones on lavapipe (which has them), so CI exercises
 * both; the subgroup probe's refusal (vk_subgroup_probe.c) exactly when TIGHTFIT_TEST_SUBGROUP_REFUSED=1. */
static int check_subgroups(void *state) {
  const char *requested = getenv("TIGHTFIT_VULKAN_SUBGROUPS"),
             *refusal_wanted = getenv("TIGHTFIT_TEST_SUBGROUP_REFUSED");
  bool off = requested && strcmp(requested, "0") == 0;
  bool want_refusal = refusal_wanted && strcmp(refusal_wanted, "1") == 0;
  uint32_t size = tf_vulkan_subgroup_size(state);
  const char *name = tf_vulkan_device_name(state), *refusal = tf_vulkan_subgroup_refusal(state);
  printf("device %s: subgroup shader variants %s (%u lanes)%s%s\n", name, size ? "on" : "off", size,
         refusal ? "; the subgroup probe turned them off: " : "", refusal ? refusal : "");
  if (off && size != 0) {
    printf("FAIL: TIGHTFIT_VULKAN_SUBGROUPS=0 but the subgroup variants are on\n");
    return 1;
  }
  if (want_refusal != (refusal != NULL)) {
    printf("FAIL: the subgroup probe %s (TIGHTFIT_TEST_SUBGROUP_REFUSED=%s)\n",
           refusal ? "refused the variants" : "let the variants run", refusal_wanted ? refusal_wanted : "unset");
    return 1;
  }
  if (!off && !want_refusal && strstr(name, "llvmpipe") && size == 0) {
    printf("FAIL: lavapipe has subgroup shuffles and arithmetic, yet the subgroup variants are off\n");
    return 1;
  }
  return 0;
}

int parity_vulkan_available(void) {
  // Every Vulkan test runs under the validation layer; any message it reports fails the test
  // (parity.h says how).
  setenv("TIGHTFIT_VULKAN_VALIDATION", "1", 1);
  const tf_backend_vtable *vulkan = tf_backend_find("vulkan");
  if (!vulkan) {
    printf("SKIP: this build has no Vulkan backend\n");
    return 77;
  }
  tf_backend_options options = {.device = 0, .threads = 1};
  void *state = NULL;
  tf_status status = vulkan->create(&options, &state);
  if (status && strstr(tf_status_message(status), "VK_LAYER_KHRONOS_validation")) {
    printf("note: %s; running without the validation layer\n", tf_status_message(status));
    tf_status_free(status);
    unsetenv("TIGHTFIT_VULKAN_VALIDATION");
    status = vulkan->create(&options, &state);
  }
  if (status) {
    int code = tf_status_code(status) == TF_ERR_UNSUPPORTED ? 77 : 1;
    printf("%s: %s\n", code == 77 ? "SKIP" : "FAIL", tf_status_message(status));
    tf_status_free(status);
    return code;
  }
  pinned_backend = state;
  return check_subgroups(state);
}

void parity_check_validation(tf_test_counts *counts) {
  char first[512];
  const int32_t unreported = tf_vulkan_validation_unreported(first, sizeof(first));
  CHECK(counts, unreported == 0,
        "the validation layer reported %d message(s) that no status carried (while a backend was destroyed); the "
        "first: %s",
        unreported, first);
  printf("%-4s validation messages no status carried: %d\n", unreported == 0 ? "ok" : "FAIL", unreported);
}

/* splitmix64: the test data, reproducible on any machine. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *state) { return (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0); }

static float normal(uint64_t *state) {
  double u1 = uniform(state) + 1e-12, u2 = uniform(state);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

tf_status parity_feed(tf_session *session, const tf_plan *plan, const parity_data *data) {
  uint64_t state = data->seed;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    int64_t n = b->bytes / tf_dtype_size(b->dtype);
    void *host = malloc((size_t)(b->bytes ? b->bytes : 1));
    if (!host)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "parity: cannot stage '%s'", b->name);
    for (int64_t k = 0; k < n; k++) {
      if (b->dtype == TF_I32) {
        int32_t value = (int32_t)(next_random(&state) % (uint64_t)(data->int_high > 0 ? data->int_high : 1));
        ((int32_t *)host)[k] = data->int_special != INT32_MIN && k % 7 == 3 ? data->int_special : value;
      } else {
        ((float *)host)[k] = normal(&state);
      }
    }
    tf_status status = tf_session_write(session, b->name, host, b->bytes);
    free(host);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

tf_status parity_open_each(const tf_graph *graph, const tf_compile_options options[2], tf_plan *plans[2],
                           tf_session *sessions[2]) {
  static const char *const backends[2] = {"cpu", "vulkan"};
  plans[0] = plans[1] = NULL;
  sessions[0] = sessions[1] = NULL;
  for (int b = 0; b < 2; b++) {
    TF_RETURN_IF_ERROR(tf_compile(graph, &options[b], &plans[b]));
    tf_session_options s = tf_session_options_default();
    s.backend = backends[b];
    s.seed = 11;
    TF_RETURN_IF_ERROR(tf_status_prefix(tf_session_create(plans[b], &s, &sessions[b]), "%s", backends[b]));
  }
  return NULL;
}

tf_status parity_open(const tf_graph *graph, const tf_compile_options *options, tf_plan *plans[2],
                      tf_session *sessions[2]) {
  tf_compile_options each[2] = {*options, *options};
  each[0].target = tf_target_default(TF_TARGET_CPU);
  each[1].target = tf_target_default(TF_TARGET_VULKAN);
  return parity_open_each(graph, each, plans, sessions);
}

void parity_close(tf_plan *plans[2], tf_session *sessions[2]) {
  for (int b = 0; b < 2; b++) {
    tf_session_destroy(sessions[b]);
    tf_plan_destroy(plans[b]);
  }
}

bool parity_compare_buffer(tf_test_counts *counts, tf_session *sessions[2], const tf_plan_buffer *buffer,
                           parity_tolerance tolerance, parity_result *result) {
  int64_t n = buffer->bytes / 4;
  float *values[2] = {malloc((size_t)buffer->bytes + 4), malloc((size_t)buffer->bytes + 4)};
  bool ok = values[0] && values[1];
  for (int b = 0; b < 2 && ok; b++) {
    tf_status status = tf_session_read(sessions[b], buffer->name, values[b], buffer->bytes);
    CHECK(counts, status == NULL, "reading '%s': %s", buffer->name, tf_status_message(status));
    ok = status == NULL;
    tf_status_free(status);
  }
  int64_t worst_at = -1;
  double worst = 0;
  for (int64_t i = 0; i < n && ok; i++) {
    double cpu = values[0][i], vulkan = values[1][i], error = fabs(cpu - vulkan);
    double ratio = error == 0 ? 0 : error / (tolerance.atol + tolerance.rtol * fabs(cpu));
    if (!(ratio <= worst)) { // NaN counts as the worst
      worst = isnan(ratio) ? INFINITY : ratio;
      worst_at = i;
    }
  }
  if (ok && worst_at >= 0) {
    double error = fabs((double)values[0][worst_at] - (double)values[1][worst_at]);
    if (worst > result->worst_ratio) {
      result->worst_ratio = worst;
      snprintf(result->worst_buffer, sizeof(result->worst_buffer), "%s", buffer->name);
    }
    if (error > result->worst_abs)
      result->worst_abs = error;
    CHECK(counts, worst <= 1.0, "'%s'[%lld]: cpu %.9g, vulkan %.9g (%.3g x the tolerance)", buffer->name,
          (long long)worst_at, values[0][worst_at], values[1][worst_at], worst);
    ok = worst <= 1.0;
  }
  free(values[0]);
  free(values[1]);
  return ok;
}
