/* The device overhead model (issue 12): the parts a target adds to a plan, recomputed here from
 * first principles (not through the code under test); the plan file round-trips them; the verifier
 * refuses bad parts; budgets compare the device total; named GPUs resolve. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/plan/plan_fixture.h"
#include "tightfit/compiler.h"
#include "tightfit/target.h"

static const tf_overhead_part *part_named(const tf_device_overhead *o, const char *name) {
  for (int32_t i = 0; i < o->n_parts; i++)
    if (strcmp(o->parts[i].name, name) == 0)
      return &o->parts[i];
  return NULL;
}

/* Rounding and graph bytes by hand for a CUDA target: 2 MiB pages per region, 8 MiB + 4 KiB a step. */
static void test_cuda_model(tf_test_counts *c) {
  tf_target cuda = tf_target_default(TF_TARGET_CUDA);
  int64_t regions[TF_REGION_COUNT] = {1, (2 << 20), (2 << 20) + 1, 0, 100};
  tf_device_overhead o;
  tf_target_plan_overhead(&cuda, regions, 1000, &o);
  const tf_overhead_part *rounding = part_named(&o, "rounding"), *graphs = part_named(&o, "graphs");
  int64_t page = 2 << 20;
  int64_t expected_rounding = (page - 1) + 0 + (page - 1) + 0 + (page - 100);
  CHECK(c, rounding && rounding->bytes == expected_rounding, "rounding %" PRId64 ", expected %" PRId64,
        rounding ? rounding->bytes : -1, expected_rounding);
  CHECK(c, graphs && graphs->bytes == (8 << 20) + 1000 * 4096, "graphs %" PRId64, graphs ? graphs->bytes : -1);
  const char *fixed[] = {"context", "libraries", "module_code"};
  for (int i = 0; i < 3; i++) {
    const tf_overhead_part *p = part_named(&o, fixed[i]);
    CHECK(c, p && p->bytes > 0 && strncmp(p->source, "default:", 8) == 0, "CUDA part '%s' has a default and source",
          fixed[i]);
  }
  const tf_overhead_part *context = part_named(&o, "context");
  CHECK(c, context && context->bytes >= ((int64_t)512 << 20), "the CUDA context default is at least 512 MiB");
  printf("cuda overhead of 5 small regions and 1000 graph steps: %d parts, rounding %" PRId64 ", graphs %" PRId64 "\n",
         o.n_parts, rounding ? rounding->bytes : -1, graphs ? graphs->bytes : -1);
}

static void test_cpu_and_vulkan(tf_test_counts *c) {
  tf_target cpu = tf_target_default(TF_TARGET_CPU), vulkan = tf_target_default(TF_TARGET_VULKAN);
  int64_t regions[TF_REGION_COUNT] = {64, 128, 0, 4096, 64};
  tf_device_overhead o;
  tf_target_plan_overhead(&cpu, regions, 10, &o);
  CHECK(c, o.n_parts == 0, "the CPU target has no overhead (%d parts)", o.n_parts);
  tf_target_plan_overhead(&vulkan, regions, 10, &o);
  const tf_overhead_part *staging = part_named(&o, "staging");
  CHECK(c, staging && staging->bytes == (8 << 20) + 256 && strncmp(staging->source, "exact:", 6) == 0,
        "Vulkan staging is exactly 8 MiB + 256 B");
  CHECK(c, part_named(&o, "graphs") == NULL, "Vulkan captures no CUDA graphs");
  CHECK(c, part_named(&o, "driver") != NULL, "Vulkan counts the driver's share");
}

static void test_measured_part(tf_test_counts *c) {
  tf_target cuda = tf_target_default(TF_TARGET_CUDA);
  CHECK(c, tf_target_set_part(&cuda, "context", 123, "measured on X"), "a measured context replaces the default");
  int64_t regions[TF_REGION_COUNT] = {0};
  tf_device_overhead o;
  tf_target_plan_overhead(&cuda, regions, 0, &o);
  const tf_overhead_part *context = part_named(&o, "context");
  CHECK(c, context && context->bytes == 123 && strcmp(context->source, "measured on X") == 0, "measured context");
}

/* A data-parallel cuda plan counts NCCL's communicator; one process, or another target, does not. */
static void test_collectives(tf_test_counts *c) {
  const struct {
    tf_target_kind kind;
    int32_t ranks;
    bool counted;
  } cases[] = {{TF_TARGET_CUDA, 2, true},
               {TF_TARGET_CUDA, 8, true},
               {TF_TARGET_CUDA, 1, false},
               {TF_TARGET_VULKAN, 2, false},
               {TF_TARGET_CPU, 4, false}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tf_target target = tf_target_default(cases[i].kind);
    int64_t regions[TF_REGION_COUNT] = {0};
    tf_device_overhead o;
    tf_target_plan_overhead(&target, regions, 0, &o);
    tf_target_plan_collectives(&target, cases[i].ranks, &o);
    const tf_overhead_part *part = part_named(&o, "collectives");
    CHECK(c, cases[i].counted ? part && part->bytes == TF_TARGET_COLLECTIVES_BYTES : part == NULL,
          "target %d, %d ranks: collectives %s", (int)cases[i].kind, cases[i].ranks, part ? "counted" : "absent");
  }
  tf_graph *g = NULL;
  CHECK_OK(c, tf_graph_load(TF_TEST_DATA "/good/cnn.tfg", &g));
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CUDA);
  options.bindings = "N=16";
  options.ranks = 2;
  tf_plan *plan = NULL;
  if (g)
    CHECK_OK(c, tf_compile(g, &options, &plan));
  CHECK(c, plan && part_named(&plan->overhead, "collectives"), "a --ranks 2 cuda plan counts NCCL's communicator");
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

/* The parts survive a save and a load; a negative or nameless part and an overflowing sum are refused. */
static void test_plan_file(tf_test_counts *c) {
  tf_plan *plan = plan_fixture_small();
  tf_target cuda = tf_target_default(TF_TARGET_CUDA);
  tf_target_plan_overhead(&cuda, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
  int64_t overhead = 0;
  for (int32_t i = 0; i < plan->overhead.n_parts; i++)
    overhead += plan->overhead.parts[i].bytes;
  CHECK(c, tf_plan_device_total(plan) == SMALL_TOTAL_BYTES + overhead, "device total = %d regions + %" PRId64,
        SMALL_TOTAL_BYTES, overhead);
  void *data = NULL;
  size_t size = 0;
  CHECK_OK(c, tf_plan_serialize(plan, &data, &size));
  tf_plan *loaded = NULL;
  CHECK_OK(c, tf_plan_parse(data, size, "memory", &loaded));
  CHECK(c,
        loaded && loaded->overhead.n_parts == plan->overhead.n_parts &&
            memcmp(&loaded->overhead, &plan->overhead, sizeof(plan->overhead)) == 0,
        "the overhead parts round-trip byte for byte");
  tf_plan_destroy(loaded);
  free(data);

  tf_device_overhead saved = plan->overhead;
  plan->overhead.parts[0].bytes = -1;
  tf_status status = tf_plan_verify(plan);
  CHECK(c, status && strstr(tf_status_message(status), "a size is >= 0"), "negative part: %s",
        tf_status_message(status));
  tf_status_free(status);
  plan->overhead = saved;
  plan->overhead.parts[1].name[0] = '\0';
  status = tf_plan_verify(plan);
  CHECK(c, status && strstr(tf_status_message(status), "no name"), "nameless part: %s", tf_status_message(status));
  tf_status_free(status);
  plan->overhead = saved;
  plan->overhead.parts[0].bytes = INT64_MAX - 10;
  status = tf_plan_verify(plan);
  CHECK(c, status && strstr(tf_status_message(status), "past int64"), "overflowing sum: %s", tf_status_message(status));
  tf_status_free(status);
  plan->overhead = saved;
  plan->overhead.n_parts = TF_MAX_OVERHEAD_PARTS + 1;
  status = tf_plan_verify(plan);
  CHECK(c, status != NULL, "too many parts are refused");
  tf_status_free(status);
  tf_plan_destroy(plan);
}

/* tf_compile_budget compares the device total: a budget between the regions and the device total
 * does not fit on CUDA, and fits on the CPU. */
static void test_budget_counts_overhead(tf_test_counts *c) {
  tf_graph *g = NULL;
  CHECK_OK(c, tf_graph_load(TF_TEST_DATA "/good/cnn.tfg", &g));
  if (!g)
    return;
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CUDA);
  options.bindings = "N=16";
  tf_plan *plan = NULL;
  CHECK_OK(c, tf_compile(g, &options, &plan));
  if (plan) {
    int64_t regions = tf_plan_total_bytes(plan), device = tf_plan_device_total(plan);
    CHECK(c, device > regions + ((int64_t)700 << 20), "cuda device total %" PRId64 " > regions %" PRId64 " + 700 MiB",
          device, regions);
    tf_budget_options budget = {
        .base = options, .budget = regions + (device - regions) / 2, .global_batch = 16, .allow_remat = true};
    budget.base.bindings = NULL;
    tf_plan *chosen = NULL;
    tf_budget_result result;
    CHECK_OK(c, tf_compile_budget(g, &budget, &chosen, &result));
    CHECK(c, chosen && !result.fits && result.total_bytes > budget.budget,
          "a budget below the overhead does not fit (smallest device total %" PRId64 ", budget %" PRId64 ")",
          result.total_bytes, budget.budget);
    tf_plan_destroy(chosen);
    budget.base.target = tf_target_default(TF_TARGET_CPU);
    chosen = NULL;
    CHECK_OK(c, tf_compile_budget(g, &budget, &chosen, &result));
    CHECK(c, chosen && result.fits, "the same budget fits on the CPU target (no overhead)");
    printf("cnn N=16 on cuda: regions %" PRId64 ", device total %" PRId64 "; budget %" PRId64 " fits cpu only\n",
           regions, device, budget.budget);
    tf_plan_destroy(chosen);
  }
  tf_plan_destroy(plan);
  tf_graph_destroy(g);
}

static void test_gpus(tf_test_counts *c) {
  const tf_gpu *t4 = tf_gpu_find("T4");
  CHECK(c, t4 && t4->target == TF_TARGET_CUDA && t4->bytes == 15633680957, "t4: 14.56 GiB on cuda");
  CHECK(c, tf_gpu_find("nonsense") == NULL && tf_gpu_find(NULL) == NULL, "unknown names are NULL");
  int32_t count = 0;
  const tf_gpu *list = tf_gpu_list(&count);
  CHECK(c, count >= 15, "%d named GPUs", count);
  for (int32_t i = 0; i < count; i++) {
    CHECK(c, list[i].bytes > ((int64_t)8 << 30) && list[i].bytes < ((int64_t)200 << 30), "%s: %" PRId64 " bytes",
          list[i].name, list[i].bytes);
    CHECK(c, list[i].source && list[i].source[0], "%s has a source", list[i].name);
    CHECK(c, tf_gpu_find(list[i].name) == &list[i], "%s found by name", list[i].name);
  }
}

int main(void) {
  tf_test_counts counts = {0, 0};
  test_cuda_model(&counts);
  test_cpu_and_vulkan(&counts);
  test_measured_part(&counts);
  test_collectives(&counts);
  test_plan_file(&counts);
  test_budget_counts_overhead(&counts);
  test_gpus(&counts);
  return tf_test_finish("test_overhead", &counts);
}
