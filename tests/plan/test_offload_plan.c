/* Offloaded optimizer state in the plan (compiler/offload.c, plan_verify.c): the hand-built small
 * plan (plan_fixture.c) offloaded for the vulkan target moves its sgd and zero steps to the host
 * steps and its momentum to the host region, verifies, round-trips through the file format with its
 * host steps, and states the bytes moved per step; corruptions of the host side are refused by name,
 * and the cpu target is refused. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compiler/stages.h"
#include "plan/plan_fixture.h"
#include "tightfit/plan.h"

static tf_test_counts counts;

static tf_plan *offloaded(void) {
  tf_plan *plan = plan_fixture_small();
  const tf_target vulkan = tf_target_default(TF_TARGET_VULKAN);
  CHECK_OK(&counts, tf_offload_pass(plan, &vulkan));
  return plan;
}

static void test_offloaded(void) {
  tf_plan *plan = plan_fixture_small();
  const int64_t state = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
  tf_plan_destroy(plan);
  plan = offloaded();
  CHECK_OK(&counts, tf_plan_verify(plan));
  CHECK(&counts,
        plan->n_steps == STEP_SGD && plan->n_host_steps == 2 && plan->host_steps[0].op == TF_OP_SGD &&
            plan->host_steps[1].op == TF_OP_ZERO,
        "device steps %d (expected %d), host steps %d", plan->n_steps, STEP_SGD, plan->n_host_steps);
  CHECK(&counts,
        plan->region_bytes[TF_REGION_OPTIMIZER_STATE] == 0 && plan->host_bytes == state &&
            plan->buffers[SMALL_MW].region == TF_REGION_HOST,
        "optimizer state region %lld, host %lld (expected %lld)",
        (long long)plan->region_bytes[TF_REGION_OPTIMIZER_STATE], (long long)plan->host_bytes, (long long)state);
  /* sgd: w down and up, gw down (mw stays on the host); zero: gw up only; 60 bytes each */
  CHECK(&counts, tf_plan_host_moved_bytes(plan) == 4 * 60, "moved %lld bytes per step, expected 240",
        (long long)tf_plan_host_moved_bytes(plan));
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(&counts, tf_plan_serialize(plan, &data, &size));
  tf_plan *back = NULL;
  CHECK_OK(&counts, tf_plan_parse(data, size, "offloaded", &back));
  CHECK(&counts,
        back && back->n_host_steps == 2 && back->host_bytes == state && back->host_steps[0].op == TF_OP_SGD &&
            back->host_steps[0].n_inputs == plan->host_steps[0].n_inputs &&
            back->buffers[SMALL_MW].region == TF_REGION_HOST &&
            strcmp(back->host_steps[1].name, plan->host_steps[1].name) == 0,
        "the host steps and region survive the file format");
  printf("offloaded small plan: %d device steps, %d host steps, %lld host bytes, %lld bytes moved per step; "
         "round trip ok\n",
         plan->n_steps, plan->n_host_steps, (long long)plan->host_bytes, (long long)tf_plan_host_moved_bytes(plan));
  tf_plan_destroy(back);
  free(data);
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
static void host_step_in_backward(tf_plan *p) { p->host_steps[1].phase = TF_PHASE_BACKWARD; }
static void momentum_on_host_in_plain_plan(tf_plan *p) {
  host_bytes_without_steps(p);
  p->host_bytes = 0;
}

static void test_refused(void) {
  static const struct {
    const char *what;
    void (*mutate)(tf_plan *);
    const char *needle;
  } cases[] = {
      {"a device step reads a host buffer", device_reads_host, "lies in host memory"},
      {"a host step with a workspace", host_step_workspace, "a host step only updates its inputs in place"},
      {"a host region smaller than its buffers", host_region_too_small, "ends past its region host"},
      {"host bytes without host steps", host_bytes_without_steps, "none without host steps"},
      {"a host step outside the optimizer phase", host_step_in_backward, "host steps are optimizer updates"},
      {"optimizer state on the host without host steps", momentum_on_host_in_plain_plan, "in region host"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_plan *plan = offloaded();
    cases[i].mutate(plan);
    tf_status status = tf_plan_verify(plan);
    CHECK(&counts, status && strstr(tf_status_message(status), cases[i].needle), "%s: expected '%s', got %s",
          cases[i].what, cases[i].needle, status ? tf_status_message(status) : "(accepted)");
    printf("%s: %s\n", cases[i].what, status ? tf_status_message(status) : "(accepted)");
    tf_status_free(status);
    tf_plan_destroy(plan);
  }
  tf_plan *plan = plan_fixture_small();
  const tf_target cpu = tf_target_default(TF_TARGET_CPU);
  tf_status status = tf_offload_pass(plan, &cpu);
  CHECK(&counts, status && strstr(tf_status_message(status), "host memory already"), "cpu target: %s",
        status ? tf_status_message(status) : "(accepted)");
  tf_status_free(status);
  tf_plan_destroy(plan);
}

int main(void) {
  test_offloaded();
  test_refused();
  return tf_test_finish("offload plan", &counts);
}
