/* Offloaded optimizer state and gradients in the plan (compiler/offload.c, plan_verify.c): the
 * hand-built small plan (plan_fixture.c) offloaded for the vulkan target moves its sgd step to the
 * host steps (the gradient's zeroing after it stays on the device) and its momentum to the host region; with the
 * gradients also its accumulate step (run before device step 6, with each of the 2 micro-batches) and the gradient.
 * Each verifies, round-trips through the file format with its host steps and their places, and states the bytes moved
 * per step; corruptions of the host side are refused by name, and the cpu target is refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compiler/stages.h"
#include "plan/plan_fixture.h"
#include "tightfit/compiler.h"
#include "tightfit/plan.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

static tf_plan *offloaded_with(bool gradients) {
  tf_plan *plan = plan_fixture_small();
  const tf_target vulkan = tf_target_default(TF_TARGET_VULKAN);
  CHECK_OK(&counts, tf_offload_pass(plan, &vulkan, true, gradients));
  return plan;
}

static tf_plan *offloaded(void) { return offloaded_with(false); }

static void test_offloaded(void) {
  tf_plan *plan = plan_fixture_small();
  const int64_t state = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  tf_plan_destroy(plan);
  plan = offloaded();
  CHECK_OK(&counts, tf_plan_verify(plan));
  /* the sgd on the host, before the gradient's zeroing, which stays on the device */
  CHECK(&counts,
        plan->n_steps == STEP_SGD + 1 && plan->n_host_steps == 1 && plan->host_steps[0].op == TF_OP_SGD &&
            plan->host_at[0] == STEP_SGD && plan->steps[STEP_SGD].op == TF_OP_ZERO,
        "device steps %d (expected %d, the last a zero), host steps %d (expected 1, an sgd)", plan->n_steps,
        STEP_SGD + 1, plan->n_host_steps);
  CHECK(&counts,
        plan->region_bytes[TF_REGION_OPTIMIZER_STATE] == 0 && plan->host_bytes == state &&
            plan->buffers[SMALL_MW].region == TF_REGION_HOST,
        "optimizer state region %lld, host %lld (expected %lld)",
        (long long)plan->region_bytes[TF_REGION_OPTIMIZER_STATE], (long long)plan->host_bytes, (long long)state);
  /* sgd: w down and up, gw down (mw stays on the host), 60 bytes each; the zero moves nothing */
  CHECK(&counts, tf_plan_host_moved_bytes(plan) == 3 * 60, "moved %lld bytes per step, expected 180",
        (long long)tf_plan_host_moved_bytes(plan));
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  tf_plan *back = NULL;
  CHECK_OK(&counts, tf_plan_parse(data, size, "offloaded", &back));
  CHECK(&counts,
        back && back->n_host_steps == 1 && back->host_bytes == state && back->host_steps[0].op == TF_OP_SGD &&
            back->host_steps[0].n_inputs == plan->host_steps[0].n_inputs &&
            back->buffers[SMALL_MW].region == TF_REGION_HOST && back->host_at[0] == plan->host_at[0] &&
            strcmp(back->host_steps[0].name, plan->host_steps[0].name) == 0,
        "the host steps and region survive the file format");
  printf("offloaded small plan: %d device steps, %d host steps, %lld host bytes, %lld bytes moved per step; "
         "round trip ok\n",
         plan->n_steps, plan->n_host_steps, (long long)plan->host_bytes, (long long)tf_plan_host_moved_bytes(plan));
  tf_plan_destroy(back);
  free(data);
  tf_plan_destroy(plan);
}

/* --offload gradients: accumulate, sgd and zero on the host; dw (read by accumulate) and the loss
 * (read after the block) live to device step 5, the last; gw after the state in the host region. */
static void test_offloaded_gradients(void) {
  tf_plan *plan = offloaded_with(true);
  CHECK_OK(&counts, tf_plan_verify(plan));
  CHECK(&counts,
        plan->n_steps == STEP_ACCUMULATE && plan->micro_steps == STEP_ACCUMULATE && plan->n_host_steps == 3 &&
            plan->host_steps[0].op == TF_OP_ACCUMULATE && plan->host_steps[1].op == TF_OP_SGD &&
            plan->host_steps[2].op == TF_OP_ZERO,
        "device steps %d, micro-batch block %d (expected %d), host steps %d", plan->n_steps, plan->micro_steps,
        STEP_ACCUMULATE, plan->n_host_steps);
  CHECK(&counts, plan->host_at[0] == 6 && plan->host_at[1] == 6 && plan->host_at[2] == 6,
        "host steps run before device steps %d, %d, %d (expected 6 each: the end of each block)", plan->host_at[0],
        plan->host_at[1], plan->host_at[2]);
  CHECK(&counts,
        plan->region_bytes[TF_REGION_GRADIENTS] == 0 && plan->buffers[SMALL_GW].region == TF_REGION_HOST &&
            plan->buffers[SMALL_GW].offset == 64 && plan->host_bytes == 124,
        "gradients region %lld, gw at host offset %lld, host bytes %lld (expected 0, 64, 124)",
        (long long)plan->region_bytes[TF_REGION_GRADIENTS], (long long)plan->buffers[SMALL_GW].offset,
        (long long)plan->host_bytes);
  CHECK(&counts, plan->buffers[SMALL_DW].last_step == 5 && plan->buffers[SMALL_LOSS].last_step == 5,
        "dw live to %d, loss to %d (expected 5, 5)", plan->buffers[SMALL_DW].last_step,
        plan->buffers[SMALL_LOSS].last_step);
  /* accumulate: dw down, 60 bytes, with each of 2 micro-batches; sgd: w down and up */
  CHECK(&counts, tf_plan_host_moved_bytes(plan) == 2 * 60 + 2 * 60, "moved %lld bytes per step, expected 240",
        (long long)tf_plan_host_moved_bytes(plan));
  CHECK(&counts, tf_plan_offloads_gradients(plan), "the plan says it offloads its gradients");
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  tf_plan *back = NULL;
  CHECK_OK(&counts, tf_plan_parse(data, size, "offloaded gradients", &back));
  CHECK(&counts,
        back && back->n_host_steps == 3 && back->host_at && back->host_at[0] == 6 &&
            back->host_steps[0].phase == TF_PHASE_ACCUMULATE && back->buffers[SMALL_GW].region == TF_REGION_HOST,
        "the host steps' places survive the file format");
  printf("offloaded gradients: %d device steps, %d host steps, %lld host bytes, %lld bytes moved per step\n",
         plan->n_steps, plan->n_host_steps, (long long)plan->host_bytes, (long long)tf_plan_host_moved_bytes(plan));
  tf_plan_destroy(back);
  free(data);
  tf_plan_destroy(plan);
}

/* gpt (1 layer) for the vulkan target, 2 x 16, with `offload_activations`. */
static tf_plan *gpt_plan(bool offload_activations) {
  const char *overrides[] = {"layers=1"};
  tf_graph *g = NULL;
  CHECK_OK(&counts, tf_zoo_build("gpt", overrides, 1, &g));
  tf_compile_options options = tf_compile_options_default(TF_TARGET_VULKAN);
  options.bindings = "N=2,T=16";
  options.offload_activations = offload_activations;
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &options, &plan));
  tf_graph_destroy(g);
  return plan;
}

/* The first host step that copies an activation back into the arena (a recompute-phase reshape) with
 * no other host step at its place or next to it (so it can move a step either way and keep the
 * list's order). */
static int32_t copy_back(const tf_plan *plan) {
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    const int32_t at = plan->host_at[h];
    if (step->phase == TF_PHASE_RECOMPUTE && step->op == TF_OP_RESHAPE && (h == 0 || plan->host_at[h - 1] < at - 1) &&
        (h + 1 == plan->n_host_steps || plan->host_at[h + 1] > at + 1))
      return h;
  }
  return -1;
}

/* --offload activations: every copy a host step of the micro-batch block (down in the forward pass
 * into host memory, back in the arena just before a backward reader, written from that device step
 * on), the copies verified, the arena smaller than the plan's without them; a copy back placed one
 * step later than its reader, or its buffer live from another step, is refused. */
static void test_offloaded_activations(void) {
  tf_plan *kept = gpt_plan(false), *plan = gpt_plan(true);
  if (!kept || !plan) {
    tf_plan_destroy(kept);
    tf_plan_destroy(plan);
    return;
  }
  int32_t down = 0, back = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    down += step->phase == TF_PHASE_FORWARD && plan->buffers[step->outputs[0]].region == TF_REGION_HOST;
    back += step->phase == TF_PHASE_RECOMPUTE && plan->buffers[step->outputs[0]].region == TF_REGION_ARENA;
  }
  CHECK(&counts, down > 0 && back >= down && down + back == plan->n_host_steps,
        "%d copies down, %d back, of %d host steps", down, back, plan->n_host_steps);
  CHECK(&counts, plan->region_bytes[TF_REGION_ARENA] < kept->region_bytes[TF_REGION_ARENA] && plan->host_bytes > 0,
        "arena %lld bytes with the activations in host memory (%lld there), %lld without",
        (long long)plan->region_bytes[TF_REGION_ARENA], (long long)plan->host_bytes,
        (long long)kept->region_bytes[TF_REGION_ARENA]);
  printf("offloaded activations of gpt (1 layer, 2 x 16): %d copies down, %d back; arena %lld -> %lld bytes, %lld in "
         "host memory\n",
         down, back, (long long)kept->region_bytes[TF_REGION_ARENA], (long long)plan->region_bytes[TF_REGION_ARENA],
         (long long)plan->host_bytes);
  const int32_t h = copy_back(plan);
  CHECK(&counts, h >= 0, "a copy back alone at its place");
  if (h >= 0) {
    plan->host_at[h]--; /* a step earlier than its copy's live steps start */
    tf_status status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), "output first_step mismatch"),
          "a copy back placed before its copy's first step: %s", status ? tf_status_message(status) : "(accepted)");
    printf("a copy back placed a step early: %s\n", status ? tf_status_message(status) : "(accepted)");
    tf_status_free(status);
    plan->host_at[h] += 2; /* after the device step that reads it: that step would read it unwritten */
    status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), "before it is written"),
          "a copy back after its reader: %s", status ? tf_status_message(status) : "(accepted)");
    printf("a copy back after its reader: %s\n", status ? tf_status_message(status) : "(accepted)");
    tf_status_free(status);
  }
  tf_plan_destroy(kept);
  tf_plan_destroy(plan);
}

static void device_reads_host(tf_plan *p) { p->steps[STEP_ACCUMULATE].inputs[1] = SMALL_MW; }
static void host_step_workspace(tf_plan *p) { p->host_steps[0].workspace = SMALL_WS; }
static void host_region_too_small(tf_plan *p) { p->host_bytes = 4; }
static void host_bytes_without_steps(tf_plan *p) {
  for (int32_t s = 0; s < p->n_host_steps; s++) {
    free(p->host_steps[s].name);
    free(p->host_steps[s].inputs);
  }
  p->n_host_steps = 0;
}
static void host_step_in_backward(tf_plan *p) { p->host_steps[0].phase = TF_PHASE_BACKWARD; }
static void momentum_on_host_in_plain_plan(tf_plan *p) {
  host_bytes_without_steps(p);
  p->host_bytes = 0;
}
static void accumulate_in_optimizer_block(tf_plan *p) { p->host_at[0] = p->n_steps + 1; }
static void host_steps_out_of_order(tf_plan *p) {
  tf_plan_step first = p->host_steps[0];
  p->host_steps[0] = p->host_steps[1];
  p->host_steps[1] = first;
}
static void host_reads_dead_arena(tf_plan *p) { p->host_steps[0].inputs[1] = SMALL_DY; /* live [3, 4] */ }
static void host_at_missing(tf_plan *p) {
  free(p->host_at);
  p->host_at = NULL;
}
static void device_writes_host(tf_plan *p) { p->steps[STEP_MATMUL_GRAD].outputs[0] = SMALL_GW; }

static void test_refused(void) {
  static const struct {
    const char *what;
    void (*mutate)(tf_plan *);
    const char *needle;
  } cases[] = {
      {"a device step reads a host buffer", device_reads_host, "lies in host memory"},
      {"a host step with a workspace", host_step_workspace, "a host step has none (-1)"},
      {"a host region smaller than its buffers", host_region_too_small, "ends past its region host"},
      {"host bytes without host steps", host_bytes_without_steps, "none without host steps"},
      {"a host step outside the optimizer phase", host_step_in_backward,
       "host steps are the optimizer block's, a gradient's accumulation or an activation's copy"},
      {"optimizer state on the host without host steps", momentum_on_host_in_plain_plan, "in region host"},
  };
  static const struct {
    const char *what;
    void (*mutate)(tf_plan *);
    const char *needle;
  } gradient_cases[] = {
      {"an accumulation placed in the optimizer block", accumulate_in_optimizer_block,
       "of the micro-batch block runs within it"},
      {"host steps listed out of order", host_steps_out_of_order, "listed in the order they run"},
      {"a host step reads an arena buffer after its last step", host_reads_dead_arena,
       "is written before it and lives to it"},
      {"host steps without their places", host_at_missing, "but no host_at"},
      {"a device step writes a gradient in host memory", device_writes_host, "only host steps touch the host region"},
  };
  const size_t n_cases = sizeof(cases) / sizeof(cases[0]);
  for (size_t i = 0; i < n_cases + sizeof(gradient_cases) / sizeof(gradient_cases[0]); i++) {
    const bool gradients = i >= n_cases;
    tf_plan *plan = offloaded_with(gradients);
    if (gradients)
      gradient_cases[i - n_cases].mutate(plan);
    else
      cases[i].mutate(plan);
    const char *what = gradients ? gradient_cases[i - n_cases].what : cases[i].what;
    const char *needle = gradients ? gradient_cases[i - n_cases].needle : cases[i].needle;
    tf_status status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), needle), "%s: expected '%s', got %s", what, needle,
          status ? tf_status_message(status) : "(accepted)");
    printf("%s: %s\n", what, status ? tf_status_message(status) : "(accepted)");
    tf_status_free(status);
    tf_plan_destroy(plan);
  }
  tf_plan *plan = plan_fixture_small();
  const tf_target cpu = tf_target_default(TF_TARGET_CPU);
  tf_status status = tf_offload_pass(plan, &cpu, true, false);
  CHECK(&counts, status && strstr(tf_status_message(status), "host memory already"), "cpu target: %s",
        status ? tf_status_message(status) : "(accepted)");
  tf_status_free(status);
  tf_plan_destroy(plan);
}

int main(void) {
  test_offloaded();
  test_offloaded_gradients();
  test_offloaded_activations();
  test_refused();
  return tf_test_finish("offload plan", &counts);
}
