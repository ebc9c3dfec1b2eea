/* The conformance harness (conformance.h): one graph on one backend, through the backend's own
 * table (backends/backend.h) as a session drives it, against the CPU kernels on the host. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "conformance.h"
#include "core/half_bits.h"
#include "core/ops.h"
#include "core/workspace_cpu.h"
#include "half_values.h"
#include "kernels/cpu/kernels.h"
#include "report.h"
#include "runtime/init.h"
#include "runtime/poison.h"
#include "tightfit/compiler.h"

#define THREADS 2 /* the backend's and the reference kernels' */
#define SEED 11   /* the session seed: initial parameters and dropout masks */
#define MAX_OPERANDS (TF_OP_VARIADIC_INTERNAL + TF_MAX_OUTPUTS)

/* ---- data ---- */

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float normal(uint64_t *state) {
  double u1 = (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0) + 1e-12;
  double u2 = (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* What kernels/cpu/cast.c must get right bit for bit, as f32 bits (f16: 1 sign, 5 exponent and 10
 * mantissa bits, largest finite 65504, subnormals k x 2^-24; bf16: the high half of an f32). */
const uint32_t conf_special_f32[] = {
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000,             /* +-0, +-1 */
    0x7F800000, 0xFF800000,                                     /* +-inf */
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFA00000, 0x7FFFFFFF, /* NaNs: quiet, signalling, payloads */
    0x3DCCCCCD, 0x40490FDB, 0xC0490FDB,                         /* 0.1, +-pi */
    /* f16 */
    0x477FE000, 0x477FEFFF, 0x477FF000, 0xC77FF000, 0x477FF001, /* 65504; below, at and past 65520 (the tie to inf) */
    0x47800000, 0x49742400, 0xC9742400,                         /* 2^16, +-1e6: overflow */
    0x3F801000, 0x3F803000, 0xBF801000,                         /* 1 + 2^-11, 1 + 3 x 2^-11, -(1 + 2^-11): ties */
    0x3F801001, 0x3F800FFF,                                     /* either side of a tie */
    0x33800000, 0xB3800000, 0x33000000, 0x33000001, 0xB2FFFFFF, /* 2^-24 (smallest subnormal), 2^-25 (a tie to 0) */
    0x33C00000, 0x34200000, 0x387FC000,                         /* 1.5, 2.5 and 1023 x 2^-24 */
    0x387FE000, 0x38800000, 0x38000000, 0x32000000,             /* 2^-14 - 2^-25 (a tie to 2^-14), 2^-14, 2^-15 */
    /* bf16, and f32 subnormals */
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,             /* ties 1 + 2^-8, 1 + 3 x 2^-8, either side */
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7E8000, /* FLT_MAX (to inf), below, odd and even ties */
    0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,             /* f32 subnormals, FLT_MIN */
    0x00008000, 0x00018000, 0x00010000, 0x80008001,             /* bf16 ties and non-ties among f32 subnormals */
};
const int32_t conf_special_f32_count = (int32_t)(sizeof(conf_special_f32) / sizeof(conf_special_f32[0]));

static void fill(void *host, const tf_plan_buffer *b, const conf_data *data, uint64_t *state) {
  const int64_t n = b->bytes / tf_dtype_size(b->dtype);
  const uint64_t high = (uint64_t)(data->int_high > 0 ? data->int_high : 1);
  for (int64_t k = 0; k < n; k++) {
    const uint64_t bits = next_random(state);
    int64_t value = (int64_t)(bits % high);
    if (data->special && k % 7 == 3)
      value = data->int_special;
    switch (b->dtype) {
    case TF_I32: ((int32_t *)host)[k] = (int32_t)value; break;
    case TF_I64: ((int64_t *)host)[k] = value; break;
    case TF_U8: ((uint8_t *)host)[k] = (uint8_t)value; break;
    case TF_F16:
    case TF_BF16: ((uint16_t *)host)[k] = (uint16_t)(data->patterns ? (uint64_t)k : bits); break;
    default:
      if (data->patterns) {
        const uint32_t word = k < conf_special_f32_count ? conf_special_f32[k] : (uint32_t)(bits >> 32);
        memcpy((float *)host + k, &word, sizeof(word));
      } else {
        ((float *)host)[k] = normal(state);
      }
      break;
    }
  }
}

/* Buffer id's generated initial value, as the runtime draws it: f32 from the name tf_plan_init_name
 * gives (a half parameter's master draws its parameter's), rounded to nearest even for f16/bf16. */
static tf_status fill_floats(const tf_plan *plan, int32_t id, void *value) {
  const tf_plan_buffer *b = &plan->buffers[id];
  const int64_t count = b->bytes / tf_dtype_size(b->dtype);
  float *wide = b->dtype == TF_F32 ? value : malloc(sizeof(float) * (size_t)(count ? count : 1));
  if (!wide)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "initialising '%s': out of memory", b->name);
  tf_status status = tf_init_fill_f32(&b->init, tf_plan_init_name(plan, id), b->rank, b->shape, SEED, wide);
  if (b->dtype != TF_F32) {
    tf_half_from_f32_array(wide, value, count, b->dtype == TF_BF16);
    free(wide);
  }
  return status;
}

/* The bytes every buffer outside the arena starts with, as the device stores them: parameters and
 * constants from their initialisers, inputs and labels from `data` (the second io half from other
 * values), gradients and optimizer state zero. Arena buffers get NULL (never uploaded). */
static void **initial_values(tf_test_counts *counts, const char *label, const tf_plan *plan, const conf_data *data) {
  void **values = calloc((size_t)plan->n_buffers, sizeof(void *));
  uint64_t halves[2] = {data->seed ? data->seed : 1, (data->seed ? data->seed : 1) + 7919};
  for (int32_t i = 0; values && i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->region == TF_REGION_ARENA)
      continue;
    values[i] = calloc(1, (size_t)b->bytes + 8);
    if (!values[i])
      continue;
    tf_status status = NULL;
    if (b->role == TF_ROLE_INPUT || b->role == TF_ROLE_LABEL)
      fill(values[i], b, data, &halves[b->io_twin >= 0 && b->io_twin < i]);
    else if (b->init.kind != TF_INIT_NONE && (b->dtype == TF_F32 || b->dtype == TF_F16 || b->dtype == TF_BF16))
      status = fill_floats(plan, i, values[i]);
    else if (b->init.kind != TF_INIT_NONE && b->dtype == TF_I32)
      status = tf_init_fill_i32(&b->init, b->name, b->rank, b->shape, SEED, values[i]);
    else if (b->init.kind != TF_INIT_NONE && b->dtype == TF_I64)
      status = tf_init_fill_i64(&b->init, b->name, b->rank, b->shape, SEED, values[i]);
    CHECK(counts, status == NULL, "%s: initialising '%s': %s", label, b->name, tf_status_message(status));
    tf_status_free(status);
  }
  return values;
}

static void free_values(void **values, int32_t n) {
  for (int32_t i = 0; values && i < n; i++)
    free(values[i]);
  free(values);
}

/* ---- host copies of a plan's buffers, and the CPU kernels over them ---- */

static int64_t elements(const tf_plan_buffer *b) { return b->bytes / tf_dtype_size(b->dtype); }

/* f32 data as float (f64 false) or double (f64 true), every other dtype as stored. */
typedef struct host {
  const tf_plan *plan;
  bool f64;
  void **mem;
} host;

static size_t host_bytes(const tf_plan_buffer *b, bool f64) {
  return (size_t)(b->dtype == TF_F32 && f64 ? elements(b) * 8 : b->bytes);
}

/* Every buffer zero, then the initial values where there are some. */
static bool host_open(host *h, const tf_plan *plan, bool f64, void *const *initial) {
  h->plan = plan;
  h->f64 = f64;
  h->mem = calloc((size_t)plan->n_buffers, sizeof(void *));
  for (int32_t i = 0; h->mem && i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    h->mem[i] = calloc(1, host_bytes(b, f64) + 8);
    if (!h->mem[i])
      return false;
    if (!initial[i])
      continue;
    if (b->dtype == TF_F32 && f64)
      for (int64_t k = 0; k < elements(b); k++)
        ((double *)h->mem[i])[k] = ((const float *)initial[i])[k];
    else
      memcpy(h->mem[i], initial[i], (size_t)b->bytes);
  }
  return h->mem != NULL;
}

static void host_close(host *h) {
  free_values(h->mem, h->plan->n_buffers);
  h->mem = NULL;
}

/* The buffer operand k of step s reads or writes (inputs, then outputs) on io half `half`. */
static int32_t operand(const tf_plan *plan, const tf_plan_step *step, int32_t k, int32_t half) {
  if (k >= step->n_inputs)
    return step->outputs[k - step->n_inputs];
  const int32_t id = step->inputs[k];
  return half == 1 && plan->buffers[id].io_twin >= 0 ? plan->buffers[id].io_twin : id;
}

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* Whether `step` computes on f16/bf16 operands itself (a half kernel of the target the plan was
 * compiled for, tf_target_half_kernel): not a cast, not a move of elements as they are, and an
 * operand is half. */
static bool computes_on_half(const tf_plan *plan, const tf_plan_step *step) {
  if (step->op == TF_OP_CAST || tf_op_moves_elements(step->op))
    return false;
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++)
    if (is_half(plan->buffers[operand(plan, step, k, 0)].dtype))
      return true;
  return false;
}

/* n half elements of `dtype` widened to f32 or f64 (exact). */
static void widen(tf_dtype dtype, const uint16_t *half, int64_t n, bool f64, void *wide) {
  for (int64_t i = 0; i < n; i++) {
    const float value = tf_test_half_value(dtype, half[i]);
    if (f64)
      ((double *)wide)[i] = value;
    else
      ((float *)wide)[i] = value;
  }
}

/* n f32 or f64 values rounded to `dtype` (nearest even; f64 through f32). */
static void narrow(tf_dtype dtype, const void *wide, int64_t n, bool f64, uint16_t *half) {
  for (int64_t i = 0; i < n; i++)
    half[i] = tf_test_half_bits(dtype, f64 ? ((const double *)wide)[i] : ((const float *)wide)[i]);
}

/* Runs the f32 or f64 CPU kernel of step s with operand k at data[k]. A step on half data runs as
 * its half kernel does: on f32 (f64) copies of its half operands, each half result rounded once
 * into data[k]; with `wide`, wide[k] keeps that unrounded result of a half operand the step writes
 * (the caller frees it; NULL elsewhere). */
static void cpu_step(const tf_plan *plan, int32_t s, bool f64, void *const *data, const tf_run_state *run,
                     void **wide) {
  const tf_plan_step *step = &plan->steps[s];
  const tf_op_info *info = tf_op_info_get(step->op);
  const bool on_half = computes_on_half(plan, step);
  tf_cpu_tensor tensors[MAX_OPERANDS];
  void *copies[MAX_OPERANDS] = {NULL};
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    const tf_plan_buffer *b = &plan->buffers[operand(plan, step, k, 0)];
    tf_cpu_tensor *t = &tensors[k];
    memset(t, 0, sizeof(*t));
    t->data = data[k];
    t->dtype = b->dtype;
    t->rank = b->rank;
    t->count = elements(b);
    memcpy(t->shape, b->shape, sizeof(b->shape));
    if (on_half && is_half(b->dtype) && (copies[k] = calloc((size_t)t->count + 1, f64 ? 8 : 4))) {
      widen(b->dtype, data[k], t->count, f64, copies[k]);
      t->data = copies[k];
      t->dtype = TF_F32;
    }
  }
  const tf_cpu_tensor *in = tensors, *out = tensors + step->n_inputs;
  const int64_t bytes =
      tf_cpu_workspace_bytes(step->op, &step->attrs, step->n_inputs, in, step->n_outputs, out, THREADS, f64 ? 8 : 4);
  void *workspace = bytes > 0 ? aligned_alloc(64, (size_t)(bytes + 63) / 64 * 64) : NULL;
  tf_cpu_context context = {.threads = THREADS,
                            .optimizer_step = run->optimizer_step,
                            .micro_step = run->micro_step,
                            .seed = run->seed,
                            .loss_scale_log2 = run->loss_scale_log2};
  tf_cpu_args args = {.op = step->op,
                      .attrs = &step->attrs,
                      .n_inputs = step->n_inputs,
                      .inputs = in,
                      .n_outputs = step->n_outputs,
                      .outputs = out,
                      .workspace = workspace,
                      .workspace_bytes = bytes,
                      .context = &context};
  tf_cpu_kernel_get(step->op, f64)(&args);
  free(workspace);
  for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
    const bool written = k >= step->n_inputs || (k < 8 && ((info->in_place >> k) & 1u));
    if (copies[k] && written)
      narrow(plan->buffers[operand(plan, step, k, 0)].dtype, copies[k], tensors[k].count, f64, data[k]);
    if (wide && copies[k] && written)
      wide[k] = copies[k];
    else
      free(copies[k]);
  }
}

/* Steps [begin, end) on the host's own buffers. */
static void host_run(host *h, int32_t begin, int32_t end, int32_t half, const tf_run_state *run) {
  for (int32_t s = begin; s < end; s++) {
    const tf_plan_step *step = &h->plan->steps[s];
    void *data[MAX_OPERANDS];
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++)
      data[k] = h->mem[operand(h->plan, step, k, half)];
    cpu_step(h->plan, s, h->f64, data, run, NULL);
  }
}

/* ---- the backend, driven through its table as tf_session drives it ---- */

typedef struct device {
  const tf_backend_vtable *backend;
  void *state;
  void *regions[TF_REGION_COUNT];
} device;

static tf_status device_open(device *d, const conf_backend *backend, const tf_plan *plan) {
  memset(d, 0, sizeof(*d));
  d->backend = tf_backend_find(backend->name);
  if (!d->backend)
    return tf_status_new(TF_ERR_UNSUPPORTED, "this build has no '%s' backend", backend->name);
  tf_backend_options options = {.device = 0, .threads = THREADS, .shared = backend->shared};
  TF_RETURN_IF_ERROR(d->backend->create(&options, &d->state));
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (plan->region_bytes[r] > 0)
      TF_RETURN_IF_ERROR(d->backend->alloc_region(d->state, plan->region_bytes[r], &d->regions[r]));
  // TIGHTFIT_POISON_ARENA=1 as a session does it: a step reading arena or input bytes no upload or
  // earlier step wrote computes NaN (runtime/poison.h).
  TF_RETURN_IF_ERROR(tf_poison_if_asked(d->backend, d->state, plan, d->regions));
  return d->backend->prepare(d->state, plan, d->regions);
}

static void device_close(device *d) {
  for (int r = 0; r < TF_REGION_COUNT; r++)
    if (d->regions[r])
      d->backend->free_region(d->state, d->regions[r]);
  if (d->state)
    d->backend->destroy(d->state);
  memset(d, 0, sizeof(*d));
}

static tf_status device_upload(device *d, const tf_plan_buffer *b, const void *data) {
  return b->bytes ? d->backend->upload(d->state, d->regions[b->region], b->offset, data, b->bytes) : NULL;
}

static tf_status device_download(device *d, const tf_plan_buffer *b, void *data) {
  TF_RETURN_IF_ERROR(d->backend->synchronize(d->state));
  return b->bytes ? d->backend->download(d->state, d->regions[b->region], b->offset, data, b->bytes) : NULL;
}

static tf_status device_run(device *d, int32_t begin, int32_t end, int32_t half, const tf_run_state *run) {
  TF_RETURN_IF_ERROR(d->backend->run(d->state, begin, end, half, run));
  return d->backend->synchronize(d->state);
}

/* ---- one plan ---- */

typedef struct plan_check {
  tf_test_counts *counts;
  const conf_backend *backend;
  conf_coverage *coverage;
  const char *label;
  const tf_plan *plan;
  device device;
  conf_result *result;
} plan_check;

/* The bytes the device gets for a buffer of a f64 host: f32 data rounded to float. */
static void *device_bytes(const host *h, int32_t id) {
  const tf_plan_buffer *b = &h->plan->buffers[id];
  void *bytes = malloc((size_t)b->bytes + 8);
  if (bytes && b->dtype == TF_F32)
    for (int64_t k = 0; k < elements(b); k++)
      ((float *)bytes)[k] = (float)((const double *)h->mem[id])[k];
  else if (bytes)
    memcpy(bytes, h->mem[id], (size_t)b->bytes);
  return bytes;
}

/* Records a failed backend call (at step s, or -1 for a block of steps) and frees the status. */
static bool device_ok(plan_check *c, tf_status status, int32_t s, const char *what) {
  if (status && s >= 0) {
    const tf_plan_step *step = &c->plan->steps[s];
    CHECK(c->counts, false, "%s on %s: step %d '%s' (%s): %s: %s", c->label, c->backend->name, s, step->name,
          tf_op_name(step->op), what, tf_status_message(status));
  } else {
    CHECK(c->counts, status == NULL, "%s on %s: %s: %s", c->label, c->backend->name, what, tf_status_message(status));
  }
  tf_status_free(status);
  return status == NULL;
}

/* Step s alone on the backend, from the f64 state rounded to float; its outputs and in-place
 * updates against the f64 kernel (whose results the state then carries, rounded) and the f32 one. */
static bool check_step(plan_check *c, host *reference, int32_t s) {
  /* AdamW's third step, micro-batch 5, the loss scaled by 2^3: every backend's updates take it out */
  static const tf_run_state run = {.optimizer_step = 3, .micro_step = 5, .seed = SEED, .loss_scale_log2 = 3};
  const tf_plan *plan = c->plan;
  const tf_plan_step *step = &plan->steps[s];
  const tf_op_info *info = tf_op_info_get(step->op);
  const int32_t n = step->n_inputs + step->n_outputs;
  void *cpu[MAX_OPERANDS], *ref[MAX_OPERANDS];
  bool ok = true;
  for (int32_t k = 0; k < n; k++) {
    const int32_t id = operand(plan, step, k, 0);
    const tf_plan_buffer *b = &plan->buffers[id];
    ref[k] = reference->mem[id];
    cpu[k] = k < step->n_inputs ? device_bytes(reference, id) : calloc(1, (size_t)b->bytes + 8);
    if (!cpu[k]) {
      CHECK(c->counts, false, "%s: out of host memory", c->label);
      for (int32_t j = 0; j < k; j++)
        free(cpu[j]);
      return false;
    }
    // Shape-only inputs are not live at the step (their bytes may lie under its outputs).
    const bool shape_only = k < step->n_inputs && tf_op_input_shape_only(step->op, k);
    if (ok && k < step->n_inputs && !shape_only)
      ok = device_ok(c, device_upload(&c->device, b, cpu[k]), s, "uploading an input");
  }
  ok = ok && device_ok(c, device_run(&c->device, s, s + 1, 0, &run), s, "running it");
  void *wide_cpu[MAX_OPERANDS] = {NULL}, *wide_ref[MAX_OPERANDS] = {NULL};
  cpu_step(plan, s, false, cpu, &run, wide_cpu);
  cpu_step(plan, s, true, ref, &run, wide_ref);
  conf_step_errors errors = {0, 0, 0, 0};
  for (int32_t k = 0; ok && k < n; k++) {
    const bool written = k >= step->n_inputs || (k < 8 && ((info->in_place >> k) & 1u));
    if (!written)
      continue;
    const int32_t id = operand(plan, step, k, 0);
    const tf_plan_buffer *b = &plan->buffers[id];
    void *got = malloc((size_t)b->bytes + 8);
    ok = got && device_ok(c, device_download(&c->device, b, got), s, "downloading an output");
    if (ok && wide_ref[k] && wide_cpu[k])
      conf_compare_half_step(c->counts, c->backend->name, c->label, plan, s, id, got, wide_ref[k], wide_cpu[k],
                             c->backend->rounded_terms ? c->backend->rounded_terms(step->op) : 0.0, &errors);
    else if (ok)
      conf_compare_step(c->counts, c->backend->name, c->label, plan, s, id, got, ref[k], cpu[k], &errors);
    free(got);
    if (b->dtype == TF_F32) /* carry the reference on as float, as the device will get it */
      for (int64_t e = 0; e < elements(b); e++)
        ((double *)ref[k])[e] = (float)((double *)ref[k])[e];
  }
  for (int32_t k = 0; k < n; k++) {
    free(cpu[k]);
    free(wide_cpu[k]);
    free(wide_ref[k]);
  }
  if (ok)
    conf_record_step(c->coverage, c->result, plan, s, &errors);
  if (ok && computes_on_half(plan, step))
    c->coverage->half_steps[step->op]++;
  return ok;
}

/* What a stage of an end-to-end run compares: the graph's outputs, the loss, and the buffers outside
 * the arena whose role is in `roles` (a mask of 1u << role). */
enum { STAGE_OUTPUTS = 1u << TF_ROLE_COUNT, STAGE_LOSS = 2u << TF_ROLE_COUNT };

static void compare_stage(plan_check *c, const host *cpu, uint32_t what, const char *stage, conf_tolerance tolerance) {
  const tf_plan *plan = c->plan;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    bool wanted =
        (((what >> b->role) & 1u) && b->region != TF_REGION_ARENA) || (i == plan->loss && (what & STAGE_LOSS));
    for (int32_t k = 0; k < plan->n_outputs && (what & STAGE_OUTPUTS); k++)
      wanted = wanted || plan->outputs[k] == i;
    if (!wanted || b->bytes == 0)
      continue;
    void *got = malloc((size_t)b->bytes + 8);
    if (got && device_ok(c, device_download(&c->device, b, got), -1, "downloading a result"))
      conf_compare_end(c->counts, c->backend->name, c->label, stage, b, got, cpu->mem[i], tolerance, c->result);
    free(got);
  }
}

/* The plan as a session runs it from the initial values (the forward pass alone, then a training
 * step: `accumulate` micro-steps on alternating io halves and the optimizer step), against the f32
 * kernels on the host: the outputs and loss after the forward pass, the loss and gradients after
 * each micro-step, the parameters, optimizer state and gradients after the update. */
static void check_end_to_end(plan_check *c, void *const *initial, conf_tolerance tolerance) {
  const tf_plan *plan = c->plan;
  host cpu;
  bool ok = host_open(&cpu, plan, false, initial);
  CHECK(c->counts, ok, "%s: out of host memory", c->label);
  for (int32_t i = 0; ok && i < plan->n_buffers; i++)
    if (initial[i])
      ok = device_ok(c, device_upload(&c->device, &plan->buffers[i], initial[i]), -1, "uploading an initial value");
  int32_t forward_end = 0;
  while (forward_end < plan->n_steps && plan->steps[forward_end].phase == TF_PHASE_FORWARD)
    forward_end++;
  tf_run_state run = {.optimizer_step = 1, .micro_step = 0, .seed = SEED};
  if (ok && (ok = device_ok(c, device_run(&c->device, 0, forward_end, 0, &run), -1, "running the forward pass"))) {
    host_run(&cpu, 0, forward_end, 0, &run);
    compare_stage(c, &cpu, STAGE_OUTPUTS | STAGE_LOSS, plan->training ? "forward pass" : "inference", tolerance);
  }
  for (int32_t k = 0; ok && plan->training && k < plan->accumulate; k++) {
    run.micro_step = k;
    ok = device_ok(c, device_run(&c->device, 0, plan->micro_steps, k & 1, &run), -1, "running a micro-step");
    host_run(&cpu, 0, plan->micro_steps, k & 1, &run);
    char stage[32];
    snprintf(stage, sizeof(stage), "micro-step %d", k + 1);
    if (ok)
      compare_stage(c, &cpu, STAGE_LOSS | 1u << TF_ROLE_GRADIENT, stage, tolerance);
  }
  if (ok && plan->training) {
    run.micro_step = plan->accumulate;
    ok = device_ok(c, device_run(&c->device, plan->micro_steps, plan->n_steps, 0, &run), -1,
                   "running the optimizer step");
    host_run(&cpu, plan->micro_steps, plan->n_steps, 0, &run);
  }
  if (ok && plan->training)
    compare_stage(c, &cpu, 1u << TF_ROLE_PARAMETER | 1u << TF_ROLE_OPTIMIZER_STATE | 1u << TF_ROLE_GRADIENT,
                  "optimizer step", tolerance);
  if (cpu.mem)
    host_close(&cpu);
}

/* What became of one plan on the backend. */
typedef enum plan_outcome { PLAN_CHECKED, PLAN_FAILED, PLAN_REFUSED, PLAN_SKIPPED } plan_outcome;

/* A backend checked without a device (conf_backend.check_step): each step through its acceptance
 * check only, an accepted one counted as covered. */
static plan_outcome check_steps_only(plan_check *c) {
  const tf_plan *plan = c->plan;
  bool ok = true;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    tf_status status = c->backend->check_step(plan, s);
    CHECK(c->counts, status == NULL, "%s on %s: step %d '%s' (%s) refused: %s", c->label, c->backend->name, s,
          step->name, tf_op_name(step->op), tf_status_message(status));
    ok = ok && status == NULL;
    if (!status) {
      c->coverage->steps[step->op]++;
      c->coverage->half_steps[step->op] += computes_on_half(plan, step);
    }
    tf_status_free(status);
  }
  snprintf(c->result->note, sizeof(c->result->note), "%d steps checked on the host (no device)", plan->n_steps);
  return ok ? PLAN_CHECKED : PLAN_FAILED;
}

static plan_outcome check_plan(plan_check *c, const conf_settings *settings, bool step_by_step) {
  const tf_plan *plan = c->plan;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_op op = plan->steps[s].op;
    if (c->backend->claims && !c->backend->claims(op)) {
      snprintf(c->result->note, sizeof(c->result->note), "skipped: %s has no %s kernel", c->backend->name,
               tf_op_name(op));
      c->coverage->skipped++;
      return PLAN_SKIPPED;
    }
  }
  if (c->backend->check_step)
    return check_steps_only(c);
  tf_status status = device_open(&c->device, c->backend, plan);
  if (settings->needs & c->backend->refuses) {
    CHECK(c->counts, tf_status_code(status) == TF_ERR_UNSUPPORTED,
          "%s on %s: needs what the backend refuses, yet session creation gave: %s", c->label, c->backend->name,
          status ? tf_status_message(status) : "success");
    snprintf(c->result->note, sizeof(c->result->note), "%s: %s",
             status ? "refused as expected" : "was not refused (needs what the backend refuses)",
             status ? tf_status_message(status) : "session created");
    tf_status_free(status);
    device_close(&c->device);
    c->coverage->refused++;
    return PLAN_REFUSED;
  }
  const bool opened = device_ok(c, status, -1, "creating a session");
  void **initial = opened ? initial_values(c->counts, c->label, plan, &settings->data) : NULL;
  host reference = {plan, true, NULL};
  bool ok = initial && host_open(&reference, plan, true, initial);
  for (int32_t s = 0; ok && step_by_step && s < plan->n_steps; s++)
    ok = check_step(c, &reference, s);
  /* half parameters round their gradients: a backend's f32 gradient a unit off another's may round
   * to the neighbouring half value, which the half storage rows' tolerance allows for */
  const tf_dtype half = settings->storage != TF_F32 ? settings->storage : settings->params;
  if (ok)
    check_end_to_end(c, initial, conf_tolerance_half(settings->family, half));
  if (reference.mem)
    host_close(&reference);
  free_values(initial, plan->n_buffers);
  device_close(&c->device);
  return ok ? PLAN_CHECKED : PLAN_FAILED;
}

static void set_training(tf_graph *graph, conf_optimizer optimizer) {
  tf_training_config config;
  memset(&config, 0, sizeof(config));
  const bool adamw = optimizer != CONF_SGD;
  config.optimizer = optimizer == CONF_ADAMW8BIT ? TF_OPTIMIZER_ADAMW8BIT
                     : adamw                     ? TF_OPTIMIZER_ADAMW
                                                 : TF_OPTIMIZER_SGD;
  config.learning_rate = adamw ? 1e-2 : 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0.01;
  config.clip_norm = adamw ? 0.0 : 0.5;
  config.accumulate_steps = adamw ? 1 : 2;
  tf_graph_set_training(graph, &config);
}

void conf_check_graph(tf_test_counts *counts, const conf_backend *backend, conf_coverage *coverage, const char *label,
                      tf_graph *graph, const conf_settings *settings) {
  if (!graph)
    return;
  const struct tf_status_s *error = tf_graph_status(graph);
  CHECK(counts, error == NULL, "%s: %s", label, tf_status_message(error));
  if (error) {
    tf_graph_destroy(graph);
    return;
  }
  if (!settings->forward_only)
    set_training(graph, settings->optimizer);
  const int failed_before = counts->failed;
  conf_result result;
  memset(&result, 0, sizeof(result));
  plan_outcome outcome = PLAN_CHECKED;
  // The training plan step by step and end to end, then the inference plan end to end (step by
  // step too when it is the only one).
  for (int training = settings->forward_only ? 0 : 1; training >= 0 && outcome == PLAN_CHECKED; training--) {
    tf_compile_options options = tf_compile_options_default(backend->target);
    options.training = training;
    options.param_dtype = settings->params;
    options.loss_scale = 1.0; /* f16 rows: an unscaled loss, so no update is skipped for overflow */
    if (settings->gelu_pair)
      options.gelu_pair = TF_GELU_PAIR_ON;
    tf_plan *plan = NULL;
    tf_status status = tf_compile(graph, &options, &plan);
    CHECK(counts, status == NULL, "%s: compiling the %s plan: %s", label, training ? "training" : "inference",
          tf_status_message(status));
    tf_status_free(status);
    if (!plan)
      break;
    for (int32_t s = 0; s < plan->n_steps; s++)
      coverage->in_table[plan->steps[s].op] = true;
    plan_check check = {counts, backend, coverage, label, plan, {NULL, NULL, {NULL}}, &result};
    outcome = check_plan(&check, settings, training || settings->forward_only);
    result.steps += training || settings->forward_only ? plan->n_steps : 0;
    tf_plan_destroy(plan);
  }
  tf_graph_destroy(graph);
  conf_print_result(counts->failed == failed_before, backend->name, label, &result);
}
