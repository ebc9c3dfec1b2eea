/* `tightfit devices --calibrate D`: measures device D's overhead into a device profile
 * (tools/device_profile.h). What the backend measures before any session (the card's memory, the
 * context, the libraries, the allocation granularity: tf_device_capacity), then what only sessions
 * show, from seven sessions of small training plans in this process:
 *
 *   1. gpt, 1 layer, f32        its overhead = libraries + the module code of its kernels + its graphs
 *   2. cnn                      + the module code of the convolution and pooling kernels
 *   3. gpt, 1 layer, autocast   + the module code of the half-precision kernels (bf16 products,
 *                                 tensor-core attention with heads of 64, casts)
 *   4. gpt, 1 layer, f32        modules loaded already: libraries + graphs of S4 captured steps
 *   5. gpt, 24 layers, f32      libraries + graphs of S5 captured steps
 *   6. cnn                      libraries + its graphs
 *   7. gpt, 1 layer, autocast   libraries + its graphs
 *
 * module code = (1 - 4) + (2 - 6) + (3 - 7); graphs per captured step = (5 - 4) / (S5 - S4); graphs
 * per plan = 4 - libraries - S4 x per step (each at least 0). The device counts memory in pages of
 * the allocation granularity, so each difference may be a page short: module code and graphs per
 * plan get one page of margin each, module code three more for kernels the plans here do not launch
 * (the fifth lend's gpt2-small under autocast loaded 4-6 MiB more than a calibration with heads of
 * 32 and one page had counted; on the sixth, with heads of 64 and two pages, its device counter still
 * peaked 2.3 MiB above the plan, 3.5 MiB with bf16 weights: cuBLASLt's kernels for its large
 * products are not the small plans'). 24 layers capture about 3,000 more steps than 1, enough for the
 * graphs' few KiB per step to show above a page (the H200's first calibration, with 4 layers, read
 * 0 there while a gpt2-small step's graphs took 6-12 MiB). Beyond that page, a kernel no calibration
 * plan launches is not counted; the profile's module_code source says which plans ran. CUDA's lazy loading is what
 * makes the first sessions larger; a backend without module code or graphs (Vulkan) measures about
 * 0. */
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
  const char *preset, *override, *override2, *bindings;
  tf_dtype autocast; /* TF_F32: off */
} calibration_plan;

static const calibration_plan GPT_1 = {"gpt", "layers=1", NULL, "N=2,T=16", TF_F32};
/* heads of 64 (GPT-2's, BERT's, ViT's), whose attention kernels are other instances than 32's */
static const calibration_plan GPT_HALF = {"gpt", "layers=1", "heads=2", "N=2,T=16", TF_BF16};
static const calibration_plan GPT_DEEP = {"gpt", "layers=24", NULL, "N=2,T=16", TF_F32};
static const calibration_plan CNN = {"cnn", NULL, NULL, "N=2", TF_F32};

enum { SESSIONS = 7 };

/* Compiles `which` for `target` and opens a session of it on the device: its measured overhead
 * bytes and the plan's captured steps. */
static tf_status session_overhead(const calibration_plan *which, const tf_target *target, const char *backend,
                                  int32_t index, int64_t *overhead, int64_t *graph_steps) {
  tf_graph *graph = NULL;
  const char *overrides[2] = {which->override, which->override2};
  TF_RETURN_IF_ERROR(tf_zoo_build(which->preset, overrides, which->override2 ? 2 : which->override ? 1 : 0, &graph));
  tf_compile_options options = tf_compile_options_default(target->kind);
  options.target = *target;
  options.bindings = which->bindings;
  options.autocast = which->autocast;
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
  return status ? tf_status_prefix(status, "calibration plan %s %s%s", which->preset,
                                   which->override ? which->override : "",
                                   which->autocast == TF_BF16 ? " autocast bf16" : "")
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

/* The seven sessions (see the top of the file) and what follows from them. */
static tf_status measure_sessions(tf_device_profile *p, const tf_target *target, const char *backend, int32_t index,
                                  int64_t library_bytes, FILE *progress) {
  const calibration_plan *order[SESSIONS] = {&GPT_1, &CNN, &GPT_HALF, &GPT_1, &GPT_DEEP, &CNN, &GPT_HALF};
  int64_t overhead[SESSIONS], steps[SESSIONS];
  for (int i = 0; i < SESSIONS; i++) {
    TF_RETURN_IF_ERROR(session_overhead(order[i], target, backend, index, &overhead[i], &steps[i]));
    if (progress)
      fprintf(progress,
              "calibrate: session %d/%d (%s %s%s%s%s, %" PRId64 " captured steps): overhead %" PRId64 " bytes\n", i + 1,
              SESSIONS, order[i]->preset, order[i]->override ? order[i]->override : "", order[i]->override2 ? "," : "",
              order[i]->override2 ? order[i]->override2 : "", order[i]->autocast == TF_BF16 ? " autocast bf16" : "",
              steps[i], overhead[i]);
  }
  const int64_t page = p->granularity > 0 ? p->granularity : 0;
  const int64_t module = at_least_zero(overhead[0] - overhead[3]) + at_least_zero(overhead[1] - overhead[5]) +
                         at_least_zero(overhead[2] - overhead[6]) + 4 * page;
  const int64_t per_step = steps[4] > steps[3] ? at_least_zero((overhead[4] - overhead[3]) / (steps[4] - steps[3])) : 0;
  const int64_t base =
      at_least_zero(overhead[3] - (library_bytes > 0 ? library_bytes : 0) - per_step * steps[3]) + page;
  char source[TF_OVERHEAD_SOURCE_BYTES];
  if (p->kind != TF_TARGET_CUDA)
    return NULL; /* no module code or graphs to model: the sessions only checked that plans run */
  snprintf(source, sizeof(source),
           "measured on %.48s: first sessions of gpt (f32, autocast bf16) and cnn plans less their second, plus "
           "four pages (the differences' rounding; kernels no calibration plan launches)",
           p->name);
  add_part(p, "module_code", module, source);
  p->graph_base_bytes = base;
  p->graph_step_bytes = per_step;
  snprintf(p->graph_source, sizeof(p->graph_source),
           "measured on %.64s: graphs of gpt plans of %" PRId64 " and %" PRId64
           " captured steps (per plan plus a page, per step)",
           p->name, steps[3], steps[4]);
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
             p->kind == TF_TARGET_CUDA ? "CUDA context" : "logical device (with its unreported part, vk_capacity.c)");
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
  tf_backend_options options = {.device = index, .threads = 1};
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
