/* Plans end to end: every zoo family (shrunk) trains on the CPU backend with allocated bytes equal
 * to planned bytes and no allocation after session create, measured from outside the library by
 * the allocation probe (tests/alloc_probe); report totals equal hand-computed ones; and plans of
 * randomly generated graphs keep the memory invariants, checked here independently of
 * tf_plan_verify (pairwise, the slow obvious way). */
#define _GNU_SOURCE /* the probe client's dlsym(RTLD_DEFAULT) */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_probe/probe_client.h"
#include "check.h"
#include "core/ops.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;
static tf_probe probe;
static uint64_t state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next_random() % (uint64_t)(hi - lo + 1)); }

/* Host copies of the inputs and labels, allocated before the session so that the steps' own
 * heap activity is training alone. */
typedef struct inputs {
  void *data[64];
  int32_t ids[64];
  int32_t n;
} inputs;

static void inputs_make(inputs *in, const tf_plan *plan) {
  memset(in, 0, sizeof(*in));
  for (int32_t i = 0; i < plan->n_buffers && in->n < 64; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    in->data[in->n] = malloc((size_t)b->bytes);
    in->ids[in->n++] = i;
  }
}

static void inputs_free(inputs *in) {
  for (int32_t k = 0; k < in->n; k++)
    free(in->data[k]);
}

/* Random micro-batch data: floats in [-1, 1), integers 0 or 1 (valid ids and classes everywhere). */
static void fill_inputs(tf_session *session, const tf_plan *plan, const inputs *in) {
  for (int32_t k = 0; k < in->n; k++) {
    const tf_plan_buffer *b = &plan->buffers[in->ids[k]];
    void *data = in->data[k];
    int64_t n = b->bytes / tf_dtype_size(b->dtype);
    for (int64_t e = 0; data && e < n; e++) {
      if (b->dtype == TF_F32)
        ((float *)data)[e] = (float)(next_random() % 2000) / 1000.0f - 1.0f;
      else if (b->dtype == TF_I32)
        ((int32_t *)data)[e] = (int32_t)(next_random() % 2);
    }
    tf_status_free(tf_session_write(session, b->name, data, b->bytes));
  }
}

/* The allocation probe's view of the steps after create: no region-sized allocation in any of them,
 * and none at all in the last, after two steps of warm-up (probe_client.h). */
static void check_measured(const char *what, const tf_plan *plan, const tf_probe_tally *warm_up,
                           const tf_probe_tally *last) {
  if (!probe.mark)
    return;
  int64_t limit = tf_probe_region_limit(plan);
  int64_t largest = warm_up->largest > last->largest ? warm_up->largest : last->largest;
  CHECK(&counts, largest < limit, "%s: region-sized allocation after create: %" PRId64 " bytes (limit %" PRId64 ")",
        what, largest, limit);
  CHECK(&counts, last->allocations == 0, "%s: %" PRId64 " heap allocations in the third step", what, last->allocations);
}

/* Trains 3 optimizer steps; checks the memory promise and a finite loss. The session's figures
 * come from the backend's own allocation calls; the probe backs them from outside. */
static void train_three_steps(const char *what, const tf_plan *plan) {
  inputs in;
  inputs_make(&in, plan);
  tf_session *session = NULL;
  tf_probe_phase(&probe, "~create");
  tf_status status = tf_session_create(plan, NULL, &session);
  tf_probe_counts created = tf_probe_phase(&probe, "~created");
  CHECK(&counts, status == NULL, "%s: session: %s", what, tf_status_message(status));
  if (probe.mark && session) {
    char why[300];
    tf_probe_tally create = tf_probe_total(&created);
    CHECK(&counts, tf_probe_regions_allocated(plan, &create, TF_PROBE_CPU_REGION_ALIGN, why, sizeof(why)), "%s: %s",
          what, why);
  }
  tf_status_free(status);
  if (!session) {
    inputs_free(&in);
    return;
  }
  tf_probe_phase(&probe, "steps 1-2");
  tf_probe_counts warm_up = {{0}, {0}};
  double loss = NAN;
  for (int step = 0; step < 3; step++) {
    if (step == 2)
      warm_up = tf_probe_phase(&probe, "step 3");
    for (int32_t m = 0; m < plan->accumulate; m++) {
      fill_inputs(session, plan, &in);
      CHECK_OK(&counts, tf_session_micro_step(session, &loss));
    }
    CHECK_OK(&counts, tf_session_optimizer_step(session));
  }
  tf_probe_counts last = tf_probe_phase(&probe, "~after steps");
  tf_probe_tally warm_up_total = tf_probe_total(&warm_up), last_total = tf_probe_total(&last);
  check_measured(what, plan, &warm_up_total, &last_total);
  tf_session_memory memory = tf_session_memory_use(session);
  CHECK(&counts, memory.allocated_bytes == memory.planned_bytes, "%s: allocated %" PRId64 " != planned %" PRId64, what,
        memory.allocated_bytes, memory.planned_bytes);
  CHECK(&counts, memory.allocations_after_create == 0, "%s: %" PRId64 " allocations after create", what,
        memory.allocations_after_create);
  CHECK(&counts, isfinite(loss), "%s: loss %g", what, loss);
  // The CPU backend reports its regions as its aligned_alloc calls made them: each rounded up to
  // 64 bytes at most.
  int64_t regions = 0;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    regions += plan->region_bytes[r] > 0;
  tf_device_memory device;
  status = tf_session_device_memory(session, &device);
  CHECK(&counts,
        status == NULL && device.region_bytes == memory.planned_bytes &&
            device.region_device_bytes >= device.region_bytes &&
            device.region_device_bytes < device.region_bytes + 64 * regions,
        "%s: the cpu backend's device memory: regions %" PRId64 ", as allocated %" PRId64 ", for a plan of %" PRId64
        ": %s",
        what, device.region_bytes, device.region_device_bytes, memory.planned_bytes, tf_status_message(status));
  tf_status_free(status);
  if (probe.mark)
    printf("trained %-34s 3 steps: loss %.4f, planned = allocated = %" PRId64 " bytes in %" PRId64
           " allocations; measured after create: largest heap allocation %" PRId64 " bytes, %" PRId64 " in step 3\n",
           what, loss, memory.allocated_bytes, memory.allocations,
           warm_up_total.largest > last_total.largest ? warm_up_total.largest : last_total.largest,
           last_total.allocations);
  tf_session_destroy(session);
  inputs_free(&in);
}

static tf_plan *compile_zoo(const char *preset, const char *const *overrides, int32_t n, const char *bindings,
                            tf_optimizer optimizer, int32_t accumulate) {
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n, &g);
  CHECK(&counts, status == NULL, "%s: build: %s", preset, tf_status_message(status));
  tf_status_free(status);
  if (!g)
    return NULL;
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = bindings;
  options.optimizer = optimizer;
  options.accumulate = accumulate;
  options.clip_norm = 1.0;
  tf_plan *plan = NULL;
  status = tf_compile(g, &options, &plan);
  CHECK(&counts, status == NULL, "%s: compile: %s", preset, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

static void zoo_families_train(void) {
  static const struct {
    const char *preset;
    const char *overrides[6];
    const char *bindings;
  } cases[] = {
      {"mlp", {NULL}, "N=16"},
      {"cnn", {NULL}, "N=8"},
      {"gpt", {"layers=2", "d_model=32", "heads=2", NULL}, "N=2,T=16"},
      {"gpt2-small", {"layers=1", "d_model=64", "heads=2", "vocab=300", "ctx=64", "seq=16"}, "N=2,T=16"},
      {"vit-b16", {"image=32", "patch=8", "d_model=64", "layers=1", "heads=2", "classes=10"}, "N=2"},
      {"asr-128-6-3", {"enc_layers=1", "dec_layers=1", "vocab=50", NULL}, "N=2,T=8,U=6"},
      {"xtts-gpt", {"layers=1", "d_model=64", "heads=2", "text_vocab=40", "audio_vocab=30", NULL}, "N=2,Ta=12"},
      {"dcgan", {"mels=32", "frames=16", "g_channels=8", "d_channels=8", "z_dim=10", NULL}, "N=2"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int32_t n = 0;
    while (n < 6 && cases[i].overrides[n])
      n++;
    tf_plan *plan = compile_zoo(cases[i].preset, cases[i].overrides, n, cases[i].bindings, TF_OPTIMIZER_ADAMW, 2);
    if (!plan)
      continue;
    train_three_steps(cases[i].preset, plan);
    tf_plan_destroy(plan);
  }
}

/* gpt2-small with AdamW in fp32: parameters + gradients + optimizer state = 16 bytes/parameter. */
static void report_totals(void) {
  const int64_t parameters = 124439808;
  for (int adam = 0; adam < 2; adam++) {
    tf_plan *plan = compile_zoo("gpt2-small", NULL, 0, "N=1,T=8", adam ? TF_OPTIMIZER_ADAMW : TF_OPTIMIZER_SGD, 1);
    if (!plan)
      continue;
    const int64_t *roles = plan->report.role_bytes;
    int64_t state_bytes = roles[TF_ROLE_PARAMETER] + roles[TF_ROLE_GRADIENT] + roles[TF_ROLE_OPTIMIZER_STATE];
    int64_t expected = (adam ? 16 : 12) * parameters;
    CHECK(&counts, state_bytes == expected, "gpt2-small %s: %" PRId64 " bytes, expected %" PRId64,
          adam ? "adamw" : "sgd", state_bytes, expected);
    CHECK(&counts, roles[TF_ROLE_PARAMETER] == 4 * parameters, "parameter bytes %" PRId64, roles[TF_ROLE_PARAMETER]);
    /* Regions hold their roles plus alignment padding only: at most 63 bytes per buffer. */
    int64_t padding = plan->region_bytes[TF_REGION_PARAMETERS] - roles[TF_ROLE_PARAMETER] - roles[TF_ROLE_CONSTANT];
    CHECK(&counts, padding >= 0 && padding < 64 * plan->n_buffers, "padding %" PRId64, padding);
    int64_t total = 0;
    for (int r = 0; r < TF_REGION_COUNT; r++)
      total += plan->region_bytes[r];
    CHECK(&counts, total == tf_plan_total_bytes(plan), "total %" PRId64, total);
    printf("gpt2-small %-5s: parameters + gradients + optimizer state = %" PRId64 " bytes = %d x %" PRId64 "\n",
           adam ? "adamw" : "sgd", state_bytes, adam ? 16 : 12, parameters);
    tf_plan_destroy(plan);
  }
}

/* ---- random graphs ---- */

/* A random DAG of shape-compatible ops over [rows, cols] tensors, ending in an mse loss. */
static tf_graph *random_graph(int seed) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("random", &g));
  int64_t rows = pick(1, 6), cols = pick(1, 7);
  tf_tensor_id pool[64];
  int32_t n = 0;
  char name[32];
  int32_t batch = tf_graph_symbol(g, "N", rows);
  pool[n++] = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(cols)));
  snprintf(name, sizeof(name), "w%d", seed);
  pool[n++] = tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(cols)), tf_init_make(TF_INIT_NORMAL, 0, 1));
  int32_t ops = (int32_t)pick(3, 30);
  for (int32_t k = 0; k < ops && n < 60; k++) {
    tf_tensor_id a = pool[pick(0, n - 1)], b = pool[pick(0, n - 1)], y = TF_NO_TENSOR;
    tf_tensor_info ia, ib;
    tf_graph_tensor(g, a, &ia);
    tf_graph_tensor(g, b, &ib);
    bool a_full = ia.rank == 2, b_full = ib.rank == 2;
    switch (pick(0, 7)) {
    case 0: y = tf_add(g, a, b); break; /* [N,C] + [C] broadcasts either way */
    case 1: y = tf_mul(g, a, b); break;
    case 2: y = tf_unary(g, TF_OP_TANH, a); break;
    case 3: y = tf_unary(g, TF_OP_RELU, a); break;
    case 4:
      if (a_full) {
        snprintf(name, sizeof(name), "m%d_%d", seed, k);
        tf_tensor_id w = tf_graph_parameter(g, name, TF_F32, TF_SHAPE(tf_fixed(cols), tf_fixed(cols)),
                                            tf_init_make(TF_INIT_NORMAL, 0, 0.3));
        y = tf_matmul(g, a, w, false, pick(0, 1));
      }
      break;
    case 5:
      if (a_full)
        y = tf_softmax(g, a, -1);
      break;
    case 6:
      if (a_full && b_full) {
        tf_tensor_id both[2] = {a, b};
        tf_tensor_id wide = tf_concat(g, both, 2, 1);
        y = tf_slice(g, wide, 1, pick(0, cols), pick(0, cols) + cols, 1);
        tf_tensor_info iy;
        tf_graph_tensor(g, y, &iy);
        if (iy.shape[1] != cols)
          y = TF_NO_TENSOR;
      }
      break;
    default:
      if (a_full) {
        int32_t axis = 0;
        y = tf_reduce(g, TF_OP_MEAN, a, &axis, 1, false);
      }
      break;
    }
    if (y != TF_NO_TENSOR && !tf_graph_status(g))
      pool[n++] = y;
  }
  /* Adding the first parameter makes the loss depend on at least one. */
  tf_tensor_id last = tf_add(g, pool[n - 1], pool[1]);
  tf_tensor_info info;
  tf_graph_tensor(g, last, &info);
  if (info.rank != 2)
    last = tf_add(g, pool[0], last);
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, TF_SHAPE(tf_sym(batch), tf_fixed(cols)));
  tf_graph_set_loss(g, tf_mse(g, last, target));
  return g;
}

/* The buffer whose memory `id` lies on (alias_of followed). */
static int32_t memory_root(const tf_plan *plan, int32_t id) {
  while (plan->buffers[id].alias_of >= 0)
    id = plan->buffers[id].alias_of;
  return id;
}

/* Pairwise: no two arena buffers live at a common step overlap; persistent buffers never do. Buffers
 * on one memory (an alias chain) may: a reshape's output is a view, live beside its input; any
 * other output written over an input needs every earlier buffer on that memory dead by then. */
static int64_t independent_overlaps(const tf_plan *plan) {
  int64_t overlaps = 0;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    for (int32_t j = i + 1; j < plan->n_buffers; j++) {
      const tf_plan_buffer *a = &plan->buffers[i], *b = &plan->buffers[j];
      if (a->region != b->region || a->bytes == 0 || b->bytes == 0)
        continue;
      bool same_time = a->region != TF_REGION_ARENA || (a->first_step <= b->last_step && b->first_step <= a->last_step);
      if (a->region == TF_REGION_ARENA && memory_root(plan, i) == memory_root(plan, j)) {
        const tf_plan_buffer *earlier = a->first_step < b->first_step ? a : b, *later = earlier == a ? b : a;
        bool view = plan->steps[later->first_step].op == TF_OP_RESHAPE;
        same_time = !view && earlier->last_step > later->first_step;
      }
      bool same_space = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
      overlaps += same_time && same_space;
    }
  }
  return overlaps;
}

static void random_graphs(void) {
  int compiled = 0;
  double worst_ratio = 0;
  for (int seed = 0; seed < 300; seed++) {
    tf_graph *g = random_graph(seed);
    if (tf_graph_status(g)) {
      tf_graph_destroy(g);
      continue;
    }
    for (int training = 0; training < 2; training++) {
      tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
      options.training = training;
      options.accumulate = (int32_t)pick(1, 3);
      tf_plan *plan = NULL;
      tf_status status = tf_compile(g, &options, &plan);
      CHECK(&counts, status == NULL, "random graph %d: %s", seed, tf_status_message(status));
      tf_status_free(status);
      if (!plan)
        continue;
      compiled++;
      int64_t overlaps = independent_overlaps(plan);
      CHECK(&counts, overlaps == 0, "random graph %d: %" PRId64 " overlapping buffer pairs", seed, overlaps);
      int64_t arena = plan->region_bytes[TF_REGION_ARENA];
      CHECK(&counts, arena >= plan->report.arena_lower_bound && arena <= plan->report.arena_naive,
            "random graph %d: arena %" PRId64 " outside [%" PRId64 ", %" PRId64 "]", seed, arena,
            plan->report.arena_lower_bound, plan->report.arena_naive);
      if (plan->report.arena_lower_bound > 0) {
        double ratio = (double)arena / (double)plan->report.arena_lower_bound;
        worst_ratio = ratio > worst_ratio ? ratio : worst_ratio;
      }
      if (training && seed % 10 == 0) {
        char what[32];
        snprintf(what, sizeof(what), "random graph %d", seed);
        train_three_steps(what, plan);
      }
      tf_plan_destroy(plan);
    }
    tf_graph_destroy(g);
  }
  CHECK(&counts, compiled > 500, "only %d random plans compiled", compiled);
  CHECK(&counts, worst_ratio <= 1.5, "random graphs: arena / lower bound up to %.3f", worst_ratio);
  printf("random graphs: %d plans, no overlaps, worst arena / lower bound %.3f\n", compiled, worst_ratio);
}

/* The verifier's alias rule: a compiled plan with aliases verifies; removing an alias leaves a real
 * overlap; claiming one for a step whose op may not write over its input is refused. The logits'
 * gradient lies on the logits, which die at cross_entropy_grad. */
static void alias_rule(void) {
  tf_plan *plan = compile_zoo("gpt", (const char *const[]){"layers=2", "d_model=32", "heads=2"}, 3, "N=2,T=16",
                              TF_OPTIMIZER_ADAMW, 1);
  if (!plan)
    return;
  int32_t aliased = -1, other = -1;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    if (plan->buffers[i].alias_of >= 0 && aliased < 0)
      aliased = i;
    if (plan->buffers[i].region == TF_REGION_ARENA && plan->buffers[i].alias_of < 0 &&
        plan->buffers[i].first_step > 0 && plan->steps[plan->buffers[i].first_step].op != TF_OP_RESHAPE && other < 0)
      other = i;
  }
  CHECK(&counts, aliased >= 0 && other >= 0, "gpt plan without a reshape alias (%d) or a plain buffer (%d)", aliased,
        other);
  int32_t dlogits_aliased = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (step->op != TF_OP_CROSS_ENTROPY_GRAD)
      continue;
    const tf_plan_buffer *dx = &plan->buffers[step->outputs[0]], *logits = &plan->buffers[step->inputs[0]];
    dlogits_aliased += dx->alias_of == step->inputs[0] && dx->offset == logits->offset && logits->last_step == s;
  }
  CHECK(&counts, dlogits_aliased == 1, "the logits' gradient does not lie on the logits (%d)", dlogits_aliased);
  /* Elementwise steps whose output lies on an input that dies there (a bias add on its matmul, an
   * activation gradient on the upstream gradient). */
  int32_t elementwise_aliased = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    const tf_plan_buffer *y = &plan->buffers[step->outputs[0]];
    if (step->op == TF_OP_RESHAPE || step->op == TF_OP_CROSS_ENTROPY_GRAD || step->n_outputs < 1 || y->alias_of < 0)
      continue;
    for (int32_t i = 0; i < step->n_inputs; i++)
      elementwise_aliased += y->alias_of == step->inputs[i] && plan->buffers[step->inputs[i]].last_step == s;
  }
  printf("alias rule: %d elementwise steps write over an input that dies there\n", elementwise_aliased);
  CHECK(&counts, elementwise_aliased >= 4, "only %d elementwise steps write in place", elementwise_aliased);
  if (aliased >= 0 && other >= 0) {
    int32_t saved = plan->buffers[aliased].alias_of;
    plan->buffers[aliased].alias_of = -1;
    tf_status status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), "overlap"), "alias removed: %s",
          tf_status_message(status));
    tf_status_free(status);
    plan->buffers[aliased].alias_of = saved;
    plan->buffers[other].alias_of = saved;
    status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), "alias"), "alias on a non-reshape: %s",
          tf_status_message(status));
    tf_status_free(status);
    plan->buffers[other].alias_of = -1;
    CHECK_OK(&counts, tf_plan_verify(plan));
    printf("alias rule: a plan with aliases (reshapes, dlogits on the logits) verifies; without its alias it "
           "overlaps; a false alias is refused\n");
  }
  tf_plan_destroy(plan);
}

/* h = x w; v = reshape(h) [rows x cols]; a = v + b, the view's last read; the loss also reads h
 * after a, so a may not be written over v. */
static tf_graph *view_graph(void) {
  tf_graph *g = NULL;
  tf_status_free(tf_graph_create("views", &g));
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(tf_fixed(4), tf_fixed(6)));
  tf_tensor_id w =
      tf_graph_parameter(g, "w", TF_F32, TF_SHAPE(tf_fixed(6), tf_fixed(6)), tf_init_make(TF_INIT_NORMAL, 0, 0.3));
  tf_tensor_id b = tf_graph_parameter(g, "b", TF_F32, TF_SHAPE(tf_fixed(3)), tf_init_make(TF_INIT_NORMAL, 0, 1));
  tf_tensor_id h = tf_matmul(g, x, w, false, false);
  tf_tensor_id v = tf_reshape(g, h, TF_SHAPE(tf_fixed(8), tf_fixed(3)));
  tf_tensor_id a = tf_reshape(g, tf_add(g, v, b), TF_SHAPE(tf_fixed(4), tf_fixed(6)));
  tf_tensor_id target = tf_graph_label(g, "target", TF_F32, TF_SHAPE(tf_fixed(4), tf_fixed(6)));
  tf_graph_set_loss(g, tf_mse(g, tf_mul(g, a, h), target));
  return g;
}

/* Reshapes as views: a reshape's output lies on its input even when that input is read later (the
 * pair one memory, both live), and the plan verifies and trains. Breaking on purpose: the add,
 * whose op may write over an input and which reads the view last, made to write over it while the
 * reshape's input h is still read later, is refused; no two buffers' counted steps overlap there,
 * only the chain rule sees it. */
static void reshape_views(void) {
  tf_graph *g = view_graph();
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.training = 1;
  tf_plan *plan = NULL;
  tf_status status = tf_compile(g, &options, &plan);
  CHECK(&counts, status == NULL, "views graph: %s", tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  if (!plan)
    return;
  int32_t views = 0, view = -1, sum = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    const tf_plan_buffer *y = &plan->buffers[step->outputs[0]];
    if (step->op == TF_OP_RESHAPE && y->alias_of == step->inputs[0] && plan->buffers[y->alias_of].last_step > s) {
      views++;
      if (view < 0)
        view = step->outputs[0];
    }
    if (step->op == TF_OP_ADD && step->phase == TF_PHASE_FORWARD && step->inputs[0] == view)
      sum = step->outputs[0];
  }
  printf("reshape views: %d reshape outputs lie on an input read after them\n", views);
  CHECK(&counts, views >= 1 && sum >= 0, "views graph: %d views, add %d", views, sum);
  CHECK(&counts, independent_overlaps(plan) == 0, "views graph: overlapping buffers");
  train_three_steps("views graph", plan);
  if (sum >= 0) {
    tf_plan_buffer *y = &plan->buffers[sum];
    CHECK(&counts, y->alias_of < 0 && plan->buffers[view].last_step == y->first_step,
          "views graph: the add is the view's last reader and has memory of its own");
    int64_t saved = y->offset;
    y->alias_of = view;
    for (int32_t id = 0; id < plan->n_buffers; id++) /* y and what lies on it (the reshape back) move */
      if (plan->buffers[id].region == TF_REGION_ARENA && memory_root(plan, id) == memory_root(plan, view))
        plan->buffers[id].offset = plan->buffers[view].offset;
    status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), "is written over"),
          "a write over a view whose input lives on: %s", tf_status_message(status));
    printf("reshape views: written over on purpose: %s\n", tf_status_message(status));
    tf_status_free(status);
    CHECK(&counts, independent_overlaps(plan) > 0, "the independent count misses the write over a live view");
    y->alias_of = -1;
    for (int32_t id = 0; id < plan->n_buffers; id++)
      if (plan->buffers[id].region == TF_REGION_ARENA && memory_root(plan, id) == sum)
        plan->buffers[id].offset = saved;
    CHECK_OK(&counts, tf_plan_verify(plan));
  }
  tf_plan_destroy(plan);
}

int main(void) {
  probe = tf_probe_attach(NULL);
  if (probe.mark)
    printf("allocation probe: %s\n", tf_probe_mode_name(probe.mode));
  else
    printf("allocation probe: SKIP, the memory promise is not measured here: %s\n", probe.absent);
  alias_rule();
  zoo_families_train();
  report_totals();
  random_graphs();
  reshape_views();
  return tf_test_finish("plans", &counts);
}
