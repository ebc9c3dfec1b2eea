/* Trains a zoo configuration with tightfit for the PyTorch comparison (compare.py):
 *   train_driver DIR STEPS ACCUMULATE BINDINGS PRESET [KNOB=V ...]
 * reads micro-batch i's inputs from DIR/data/<buffer>_<i>.npy, and writes DIR/initial.safetensors
 * (the weights after initialisation), DIR/losses.npy (per optimizer step, the mean micro-batch
 * loss) and DIR/final.safetensors. AdamW lr 1e-3, eps 1e-6, weight decay 0.01, clip 1.0.
 * The allocation probe (tests/alloc_probe) measures the training calls from outside the library:
 * no region-sized heap allocation after create, none at all after 2 warm-up steps; exit status 3
 * when either fails. */
#define _GNU_SOURCE /* the probe client's dlsym(RTLD_DEFAULT) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_probe/probe_client.h"
#include "runtime/npy.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"
#include "zoo_plans.h"

static int fail(tf_status status) {
  fprintf(stderr, "train_driver: %s\n", tf_status_message(status));
  tf_status_free(status);
  return 1;
}

/* Writes every input and label of micro-batch `index` from DIR/data. */
static tf_status feed(tf_session *session, const tf_plan *plan, const char *dir, int64_t index) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/%s_%" PRId64 ".npy", dir, b->name, index);
    tf_npy *file;
    TF_RETURN_IF_ERROR(tf_npy_open(path, &file));
    tf_status status = tf_npy_count(file) * tf_dtype_size(tf_npy_dtype(file)) == b->bytes
                           ? tf_session_write(session, b->name, tf_npy_data(file), b->bytes)
                           : tf_status_new(TF_ERR_INVALID_INPUT, "%s: wrong size for '%s'", path, b->name);
    tf_npy_close(file);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

/* Adds what the probe counted since the last mark to *into, and begins `next`. */
static void measure(const tf_probe *probe, tf_probe_tally *into, const char *next) {
  tf_probe_counts phase = tf_probe_phase(probe, next);
  tf_probe_tally total = tf_probe_total(&phase);
  tf_probe_tally_add(into, &total);
}

int main(int argc, char **argv) {
  tf_probe probe = tf_probe_attach(argv);
  if (argc < 6) {
    fprintf(stderr, "usage: train_driver DIR STEPS ACCUMULATE BINDINGS PRESET [KNOB=V ...]\n");
    return 2;
  }
  const char *dir = argv[1];
  int64_t steps = atoll(argv[2]);
  int32_t accumulate = atoi(argv[3]);
  tf_graph *g;
  tf_status status = tf_zoo_build(argv[5], (const char *const *)argv + 6, argc - 6, &g);
  if (status)
    return fail(status);
  tf_compile_options options = tf_test_adamw_options(TF_TARGET_CPU, argv[4]);
  options.epsilon = 1e-6; /* see compare.py */
  options.accumulate = accumulate;
  tf_plan *plan;
  status = tf_compile(g, &options, &plan);
  tf_graph_destroy(g);
  if (status)
    return fail(status);
  tf_session_options session_options = tf_session_options_default();
  session_options.seed = 7;
  tf_session *session;
  tf_probe_phase(&probe, "~create");
  status = tf_session_create(plan, &session_options, &session);
  tf_probe_counts create_counts = tf_probe_phase(&probe, "~test data");
  tf_probe_tally created = tf_probe_total(&create_counts);
  if (status)
    return fail(status);
  char regions_why[300] = "";
  const bool regions_seen = !probe.mark || tf_probe_regions_allocated(plan, &created, TF_PROBE_CPU_REGION_ALIGN,
                                                                      regions_why, sizeof(regions_why));
  char path[4096];
  snprintf(path, sizeof(path), "%s/initial.safetensors", dir);
  status = tf_session_save(session, path, NULL, 0);
  double *losses = calloc((size_t)steps, sizeof(double));
  // The probe counts the training calls only: reading the .npy files allocates.
  tf_probe_tally warm_up = {0}, measured = {0};
  for (int64_t s = 0; s < steps && !status; s++) {
    tf_probe_tally *into = s < 2 ? &warm_up : &measured;
    for (int32_t m = 0; m < accumulate && !status; m++) {
      double loss = 0;
      status = feed(session, plan, dir, s * accumulate + m);
      tf_probe_phase(&probe, "micro-step");
      if (!status)
        status = tf_session_micro_step(session, &loss);
      measure(&probe, into, "~test data");
      losses[s] += loss / accumulate;
    }
    tf_probe_phase(&probe, "optimizer step");
    if (!status)
      status = tf_session_optimizer_step(session);
    measure(&probe, into, "~test data");
  }
  if (!status) {
    snprintf(path, sizeof(path), "%s/final.safetensors", dir);
    status = tf_session_save(session, path, NULL, 0);
  }
  if (!status) {
    snprintf(path, sizeof(path), "%s/losses.npy", dir);
    int64_t shape[1] = {steps};
    status = tf_npy_write(path, TF_FILE_F64, 1, shape, losses);
  }
  tf_session_memory m = tf_session_memory_use(session);
  printf("memory: planned %" PRId64 " bytes, allocated %" PRId64 ", allocations after create %" PRId64 "\n",
         m.planned_bytes, m.allocated_bytes, m.allocations_after_create);
  const int64_t limit = tf_probe_region_limit(plan);
  const int64_t largest = warm_up.largest > measured.largest ? warm_up.largest : measured.largest;
  const bool flat = !probe.mark || (largest < limit && measured.allocations == 0);
  if (probe.mark)
    printf("measured (%s): largest heap allocation after create %" PRId64 " bytes (limit %" PRId64 "), %" PRId64
           " heap allocations in the %" PRId64 " steps after 2 warm-up steps%s\n",
           tf_probe_mode_name(probe.mode), largest, limit, measured.allocations, steps > 2 ? steps - 2 : 0,
           flat ? "" : ": FAIL");
  else
    printf("allocation probe: SKIP, the memory promise is not measured: %s\n", probe.absent);
  if (probe.mark)
    printf("measured: %s\n", regions_why);
  free(losses);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  if (status)
    return fail(status);
  return m.planned_bytes == m.allocated_bytes && m.allocations_after_create == 0 && flat && regions_seen ? 0 : 3;
}
