/* `tightfit devices --calibrate D`: measures device D's overhead into a device profile
 * (tools/device_profile.h). What the backend measures before any session (the card's memory, the
 * context, the libraries, the allocation granularity: tf_device_capacity), then what only sessions
 * show, from five sessions of small training plans in this process:
 *
 *   1. gpt, 1 layer     its overhead = libraries + the module code of the kernels it uses + its graphs
 *   2. cnn              + the module code of the convolution and pooling kernels
 *   3. gpt, 1 layer     modules loaded already: libraries + graphs of S1 captured steps
 *   4. gpt, 4 layers    libraries + graphs of S4 captured steps
 *   5. cnn              libraries + its graphs
 *
 * module code = (1 - 3) + (2 - 5); graphs per captured step = (4 - 3) / (S4 - S1); graphs per plan
 * = 3 - libraries - S1 x per step (each at least 0). A kernel no calibration plan launches is not
 * counted; the profile's module_code source says which plans ran. CUDA's lazy loading is what makes
 * the first sessions larger; a backend without module code or graphs (Vulkan) measures about 0. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"
#include "tools/device_profile.h"

typedef struct calibration_plan {
  const char *preset, *override, *bindings;
} calibration_plan;

static const calibration_plan GPT_1 = {"gpt", "layers=1", "N=2,T=16"};
static const calibration_plan GPT_4 = {"gpt", "layers=4", "N=2,T=16"};
static const calibration_plan CNN = {"cnn", NULL, "N=2"};

/* Compiles `which` for `target` and opens a session of it on the device: its measured overhead
 * bytes and the plan's captured steps. */
static tf_status session_overhead(const calibration_plan *which, const tf_target *target, const char *backend,
                                  int32_t index, int64_t *overhead, int64_t *graph_steps) {
  tf_graph *graph = NULL;
  const char *overrides[1] = {which->override};
  TF_RETURN_IF_ERROR(tf_zoo_build(which->preset, overrides, which->override ? 1 : 0, &graph));
  tf_compile_options options = tf_compile_options_default(target->kind);
  options.target = *target;
  options.bindings = which->bindings;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(graph, &options, &plan);
  tf_graph_destroy(graph);
  TF_RETURN_IF_ERROR(status);
  tf_session_options session_options = tf_session_options_default();
  session_options.backend = backend;
  session_options.device = index;
  tf_session *session = NULL;
  status = tf_session_create(plan, &session_options, &session);
  tf_device_memory memory;
  if (!status)
    status = tf_session_device_memory(session, &memory);
  if (!status && memory.overhead_bytes < 0)
    status = tf_status_new(TF_ERR_UNSUPPORTED, "the %s backend does not measure its overhead", backend);
  if (!status) {
    *overhead = memory.overhead_bytes;
    *graph_steps = tf_plan_graph_steps(plan);
  }
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status
             ? tf_status_prefix(status, "calibration plan %s %s", which->preset, which->override ? which->override : "")
             : NULL;
}

static void add_part(tf_device_profile *p, const char *name, int64_t bytes, const char *source) {
  if (p->n_parts >= TF_PROFILE_MAX_PARTS)
    return;
  tf_overhead_part *part = &p->parts[p->n_parts++];
  snprintf(part->name, sizeof(part->name), "%s", name);
  part->bytes = bytes;
  snprintf(part->source, sizeof(part->source), "%s", source);
}

static int64_t at_least_zero(int64_t bytes) { return bytes > 0 ? bytes : 0; }

/* The five sessions (see the top of the file) and what follows from them. */
static tf_status measure_sessions(tf_device_profile *p, const tf_target *target, const char *backend, int32_t index,
                                  int64_t library_bytes, FILE *progress) {
  const calibration_plan *order[5] = {&GPT_1, &CNN, &GPT_1, &GPT_4, &CNN};
  int64_t overhead[5], steps[5];
  for (int i = 0; i < 5; i++) {
    TF_RETURN_IF_ERROR(session_overhead(order[i], target, backend, index, &overhead[i], &steps[i]));
    if (progress)
      fprintf(progress, "calibrate: session %d/5 (%s %s, %" PRId64 " captured steps): overhead %" PRId64 " bytes\n",
              i + 1, order[i]->preset, order[i]->override ? order[i]->override : "", steps[i], overhead[i]);
  }
  const int64_t module = at_least_zero(overhead[0] - overhead[2]) + at_least_zero(overhead[1] - overhead[4]);
  const int64_t per_step = steps[3] > steps[2] ? at_least_zero((overhead[3] - overhead[2]) / (steps[3] - steps[2])) : 0;
  const int64_t base = at_least_zero(overhead[2] - (library_bytes > 0 ? library_bytes : 0) - per_step * steps[2]);
  char source[TF_OVERHEAD_SOURCE_BYTES];
  if (p->kind != TF_TARGET_CUDA)
    return NULL; /* no module code or graphs to model: the sessions only checked that plans run */
  snprintf(source, sizeof(source),
           "measured on %.48s: first sessions of gpt and cnn plans less their second (kernel modules and cuBLAS "
           "state the warm-ups loaded; other ops' kernels not counted)",
           p->name);
  add_part(p, "module_code", module, source);
  p->graph_base_bytes = base;
  p->graph_step_bytes = per_step;
  snprintf(p->graph_source, sizeof(p->graph_source),
           "measured on %.64s: graphs of gpt plans of %" PRId64 " and %" PRId64 " captured steps (per plan, per step)",
           p->name, steps[2], steps[3]);
  return NULL;
}

/* The figures the backend measures before a session. */
static void from_capacity(tf_device_profile *p, const tf_device_capacity *c) {
  char source[TF_OVERHEAD_SOURCE_BYTES];
  snprintf(p->name, sizeof(p->name), "%.127s", c->name);
  p->memory_bytes = c->total_bytes;
  p->free_bytes = c->free_bytes;
  p->granularity = c->granularity;
  if (c->context_bytes >= 0) {
    snprintf(source, sizeof(source), "measured on %.64s: the driver's device memory once a %s exists", c->name,
             p->kind == TF_TARGET_CUDA ? "CUDA context" : "logical device");
    add_part(p, p->kind == TF_TARGET_CUDA ? "context" : "driver", c->context_bytes, source);
  }
  if (c->library_bytes >= 0) {
    snprintf(source, sizeof(source), "measured on %.64s: device memory taken by creating the cuBLAS handle", c->name);
    add_part(p, "libraries", c->library_bytes, source);
  }
}

tf_status tf_device_measure(const char *device, const char *option, tf_device_profile *out,
                            tf_device_capacity *capacity) {
  memset(out, 0, sizeof(*out));
  out->free_bytes = out->granularity = out->graph_base_bytes = out->graph_step_bytes = -1;
  char backend_name[16];
  int32_t index = 0;
  if (!tf_backend_parse_device(device, backend_name, sizeof(backend_name), &index) ||
      !tf_target_parse(backend_name, &out->kind) || out->kind == TF_TARGET_CPU)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: '%s' is not cuda:N or vulkan:N", option, device);
  snprintf(out->device, sizeof(out->device), "%s", device);
  const tf_backend_vtable *backend = NULL;
  TF_RETURN_IF_ERROR(tf_status_prefix(tf_backend_load(backend_name, &backend), "%s %s", option, device));
  if (!backend->capacity)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s %s: this build has no %s backend that can measure a device", option,
                         device, backend_name);
  tf_backend_options options = {index, 1};
  TF_RETURN_IF_ERROR(tf_status_prefix(backend->capacity(&options, capacity), "%s %s", option, device));
  from_capacity(out, capacity);
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(out->measured_at, sizeof(out->measured_at), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return NULL;
}

tf_status tf_device_calibrate(const char *device, tf_device_profile *out, FILE *progress) {
  tf_device_capacity capacity;
  TF_RETURN_IF_ERROR(tf_device_measure(device, "--calibrate", out, &capacity));
  if (capacity.total_bytes <= 0)
    return tf_status_new(TF_ERR_UNSUPPORTED, "--calibrate %s: the driver does not say the device's memory", device);
  if (progress)
    fprintf(progress,
            "calibrate: %s '%s': memory %" PRId64 " bytes, free %" PRId64 ", context %" PRId64 ", libraries %" PRId64
            ", granularity %" PRId64 "\n",
            device, capacity.name, capacity.total_bytes, capacity.free_bytes, capacity.context_bytes,
            capacity.library_bytes, capacity.granularity);
  char backend_name[16];
  int32_t index = 0;
  tf_backend_parse_device(device, backend_name, sizeof(backend_name), &index);
  const tf_target target = tf_device_profile_target(out);
  return tf_status_prefix(measure_sessions(out, &target, backend_name, index, capacity.library_bytes, progress),
                          "--calibrate %s", device);
}
