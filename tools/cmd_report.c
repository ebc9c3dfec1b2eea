/* `tightfit report P.tfplan`: where a plan's memory goes. The regions and the roles inside them
 * (human units and exact bytes), the arena against its lower bound and against no reuse at all, the
 * peak step and the largest buffers live there, the batch split, FLOPs per phase and the
 * compiler's notes. The plan is loaded with every invariant checked, so the numbers are the plan's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/ops.h"
#include "tightfit/plan.h"
#include "tools/cli.h"

#define PEAK_BUFFERS 8 /* the largest buffers shown at the peak step */

static void help(void) {
  printf("usage: tightfit report P.tfplan [--json]\n\n"
         "Loads a plan (FlatBuffers Verifier and every plan invariant) and shows where its memory goes:\n"
         "each region and the buffer roles inside it, in human units and exact bytes; the arena against\n"
         "its lower bound (the most bytes live at one step) and against no reuse; the peak step and the\n"
         "largest buffers live there; micro-batch, accumulation and global batch; estimated FLOPs per\n"
         "phase; and the compiler's notes.\n\n"
         "options:\n"
         "  --json   machine-readable output\n\n"
         "exit codes: 0 ok, 2 bad usage or a malformed plan (the message names the file and problem).\n");
}

static int32_t count_role(const tf_plan *plan, tf_buffer_role role) {
  int32_t n = 0;
  for (int32_t i = 0; i < plan->n_buffers; i++)
    n += plan->buffers[i].role == role;
  return n;
}

static const char *flops_text(double flops, char *buf, size_t size) {
  static const char *const units[] = {"", "K", "M", "G", "T", "P", "E"};
  int unit = 0;
  while (flops >= 1000 && unit < 6) {
    flops /= 1000;
    unit++;
  }
  snprintf(buf, size, unit ? "%.2f %sFLOP" : "%.0f %sFLOP", flops, units[unit]);
  return buf;
}

static const char *shape_text(const tf_plan_buffer *b, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s [", tf_dtype_name(b->dtype));
  for (int32_t d = 0; d < b->rank && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", b->shape[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

/* Arena buffers live at `step`, largest first (ties by id); returns how many, at most `limit`. */
static int32_t largest_live(const tf_plan *plan, int32_t step, int32_t *ids, int32_t limit) {
  int32_t n = 0;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_ARENA || b->first_step > step || b->last_step < step)
      continue;
    int32_t at = n < limit ? n++ : limit;
    while (at > 0 && plan->buffers[ids[at - 1]].bytes < b->bytes)
      at--;
    if (at >= limit)
      continue;
    memmove(&ids[at + 1], &ids[at], sizeof(int32_t) * (size_t)(n - 1 - at));
    ids[at] = id;
  }
  return n;
}

typedef struct summary {
  int64_t total, naive_total, saving;
  double ratio; /* arena / lower bound; 0 without a lower bound */
} summary;

static summary summarise(const tf_plan *plan) {
  summary s;
  s.total = tf_plan_total_bytes(plan);
  /* The same regions with an arena that reuses nothing: what the plan would need without liveness. */
  s.naive_total = s.total - plan->region_bytes[TF_REGION_ARENA] + plan->report.arena_naive;
  s.saving = s.naive_total - s.total;
  s.ratio = plan->report.arena_lower_bound > 0
                ? (double)plan->region_bytes[TF_REGION_ARENA] / (double)plan->report.arena_lower_bound
                : 0.0;
  return s;
}

static void print_row(const char *indent, const char *label, int64_t bytes, int32_t count) {
  char human[32], exact[32], title[96];
  if (count >= 0)
    snprintf(title, sizeof(title), "%s%s (%d)", indent, label, count);
  else
    snprintf(title, sizeof(title), "%s%s", indent, label);
  printf("  %-40s %12s %18s\n", title, tf_cli_bytes(bytes, human, sizeof(human)),
         tf_cli_count(bytes, exact, sizeof(exact)));
}

/* The memory table: each region, then the roles it holds. */
static void print_memory(const tf_plan *plan, const summary *s) {
  static const struct {
    tf_region region;
    const char *label;
    tf_buffer_role roles[2];
    const char *role_labels[2];
    int n_roles;
  } regions[] = {
      {TF_REGION_PARAMETERS,
       "parameters region",
       {TF_ROLE_PARAMETER, TF_ROLE_CONSTANT},
       {"parameters", "constants"},
       2},
      {TF_REGION_GRADIENTS, "gradients region", {TF_ROLE_GRADIENT}, {"gradients"}, 1},
      {TF_REGION_OPTIMIZER_STATE, "optimizer state region", {TF_ROLE_OPTIMIZER_STATE}, {"optimizer state"}, 1},
      {TF_REGION_ARENA,
       "activations arena",
       {TF_ROLE_ACTIVATION, TF_ROLE_WORKSPACE},
       {"activations, without reuse", "workspaces, without reuse"},
       2},
      {TF_REGION_IO, "io (double-buffered micro-batches)", {TF_ROLE_INPUT, TF_ROLE_LABEL}, {"inputs", "labels"}, 2},
  };
  printf("\n  %-40s %12s %18s\n", "memory (each region allocated once)", "size", "exact bytes");
  for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
    print_row("", regions[i].label, plan->region_bytes[regions[i].region], -1);
    for (int k = 0; k < regions[i].n_roles; k++)
      print_row("  ", regions[i].role_labels[k], plan->report.role_bytes[regions[i].roles[k]],
                count_role(plan, regions[i].roles[k]));
  }
  print_row("", "total", s->total, -1);
}

static void print_arena(const tf_plan *plan, const summary *s) {
  const tf_plan_report *r = &plan->report;
  char a[64], b[64];
  printf("\narena: %s; lower bound %s (the most bytes live at one step)",
         tf_cli_bytes(plan->region_bytes[TF_REGION_ARENA], a, sizeof(a)),
         tf_cli_bytes(r->arena_lower_bound, b, sizeof(b)));
  if (s->ratio > 0)
    printf(", arena / lower bound = %.3f\n", s->ratio);
  else
    printf("\n");
  printf("without reuse: arena %s, total %s; ", tf_cli_bytes(r->arena_naive, a, sizeof(a)),
         tf_cli_bytes(s->naive_total, b, sizeof(b)));
  if (s->saving >= 0)
    printf("reuse saves %s (%s bytes, %.1f%% of that total)\n", tf_cli_bytes(s->saving, a, sizeof(a)),
           tf_cli_count(s->saving, b, sizeof(b)),
           s->naive_total > 0 ? 100.0 * (double)s->saving / (double)s->naive_total : 0.0);
  else
    printf("the arena is %s (%s bytes) larger: alignment padding outweighs reuse\n",
           tf_cli_bytes(-s->saving, a, sizeof(a)), tf_cli_count(-s->saving, b, sizeof(b)));
}

static void print_peak(const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  if (r->peak_step < 0 || r->peak_step >= plan->n_steps)
    return;
  const tf_plan_step *peak = &plan->steps[r->peak_step];
  char bytes[64], shape[256];
  printf("\npeak: step %d '%s' (%s, %s): %s live in the arena\n", r->peak_step, peak->name, tf_op_name(peak->op),
         tf_phase_name(peak->phase), tf_cli_bytes(r->live_bytes[r->peak_step], bytes, sizeof(bytes)));
  int32_t ids[PEAK_BUFFERS];
  int32_t n = largest_live(plan, r->peak_step, ids, PEAK_BUFFERS);
  for (int32_t i = 0; i < n; i++) {
    const tf_plan_buffer *buffer = &plan->buffers[ids[i]];
    printf("  %-32s %-10s %-22s %12s  steps [%d, %d]\n", buffer->name, tf_role_name(buffer->role),
           shape_text(buffer, shape, sizeof(shape)), tf_cli_bytes(buffer->bytes, bytes, sizeof(bytes)),
           buffer->first_step, buffer->last_step);
  }
}

static void print_program(const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  char flops[64];
  printf("\nbatch: micro-batch %" PRId64 " x %d accumulation step%s = global batch %" PRId64 "\n", plan->micro_batch,
         plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->global_batch);
  printf("program: steps [0, %d) run %d time%s per training step, steps [%d, %d) once\n", plan->micro_steps,
         plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->micro_steps, plan->n_steps);
  printf("flops:");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    printf("%s %s %s", phase ? "," : "", tf_phase_name((tf_phase)phase),
           flops_text(r->flops[phase], flops, sizeof(flops)));
  printf("\n");
  if (!r->notes || !r->notes[0])
    return;
  printf("\nnotes:\n");
  for (const char *line = r->notes; *line;) {
    const char *end = strchr(line, '\n');
    int length = end ? (int)(end - line) : (int)strlen(line);
    printf("  %.*s\n", length, line);
    line += length + (end ? 1 : 0);
  }
}

static void print_text(const char *path, const tf_plan *plan) {
  summary s = summarise(plan);
  printf("%s: plan of '%s' for %s (plan version %u), %s, %d steps, %d buffers\n", path,
         plan->graph_name ? plan->graph_name : "?", plan->target ? plan->target : "?", plan->version,
         plan->training ? "training" : "inference", plan->n_steps, plan->n_buffers);
  print_memory(plan, &s);
  print_arena(plan, &s);
  print_peak(plan);
  print_program(plan);
}

static void print_json(const char *path, const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  summary s = summarise(plan);
  tf_json j = {stdout, 0, {false}};
  tf_json_begin_object(&j, NULL);
  tf_json_string(&j, "file", path);
  tf_json_string(&j, "graph", plan->graph_name ? plan->graph_name : "");
  tf_json_string(&j, "target", plan->target ? plan->target : "");
  tf_json_int(&j, "plan_version", plan->version);
  tf_json_bool(&j, "training", plan->training);
  tf_json_int(&j, "steps", plan->n_steps);
  tf_json_int(&j, "buffers", plan->n_buffers);
  tf_json_int(&j, "total_bytes", s.total);
  tf_json_begin_object(&j, "regions");
  for (int region = 0; region < TF_REGION_COUNT; region++)
    tf_json_int(&j, tf_region_name((tf_region)region), plan->region_bytes[region]);
  tf_json_end_object(&j);
  tf_json_begin_object(&j, "roles");
  for (int role = 0; role < TF_ROLE_COUNT; role++) {
    tf_json_begin_object(&j, tf_role_name((tf_buffer_role)role));
    tf_json_int(&j, "bytes", r->role_bytes[role]);
    tf_json_int(&j, "buffers", count_role(plan, (tf_buffer_role)role));
    tf_json_end_object(&j);
  }
  tf_json_end_object(&j);
  tf_json_int(&j, "arena_lower_bound", r->arena_lower_bound);
  tf_json_double(&j, "arena_over_lower_bound", s.ratio);
  tf_json_int(&j, "arena_naive", r->arena_naive);
  tf_json_int(&j, "naive_total_bytes", s.naive_total);
  tf_json_int(&j, "saving_bytes", s.saving);
  if (r->peak_step >= 0 && r->peak_step < plan->n_steps) {
    const tf_plan_step *peak = &plan->steps[r->peak_step];
    tf_json_begin_object(&j, "peak");
    tf_json_int(&j, "step", r->peak_step);
    tf_json_string(&j, "name", peak->name);
    tf_json_string(&j, "op", tf_op_name(peak->op));
    tf_json_string(&j, "phase", tf_phase_name(peak->phase));
    tf_json_int(&j, "live_bytes", r->live_bytes[r->peak_step]);
    tf_json_begin_array(&j, "largest_buffers");
    int32_t ids[PEAK_BUFFERS];
    int32_t n = largest_live(plan, r->peak_step, ids, PEAK_BUFFERS);
    for (int32_t i = 0; i < n; i++) {
      const tf_plan_buffer *b = &plan->buffers[ids[i]];
      tf_json_begin_object(&j, NULL);
      tf_json_string(&j, "name", b->name);
      tf_json_string(&j, "role", tf_role_name(b->role));
      tf_json_string(&j, "dtype", tf_dtype_name(b->dtype));
      tf_json_begin_array(&j, "shape");
      for (int32_t d = 0; d < b->rank; d++)
        tf_json_int(&j, NULL, b->shape[d]);
      tf_json_end_array(&j);
      tf_json_int(&j, "bytes", b->bytes);
      tf_json_int(&j, "first_step", b->first_step);
      tf_json_int(&j, "last_step", b->last_step);
      tf_json_end_object(&j);
    }
    tf_json_end_array(&j);
    tf_json_end_object(&j);
  }
  tf_json_int(&j, "micro_batch", plan->micro_batch);
  tf_json_int(&j, "accumulate", plan->accumulate);
  tf_json_int(&j, "global_batch", plan->global_batch);
  tf_json_int(&j, "micro_steps", plan->micro_steps);
  tf_json_begin_object(&j, "flops");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    tf_json_double(&j, tf_phase_name((tf_phase)phase), r->flops[phase]);
  tf_json_end_object(&j);
  tf_json_begin_array(&j, "live_bytes");
  for (int32_t step = 0; step < plan->n_steps; step++)
    tf_json_int(&j, NULL, r->live_bytes[step]);
  tf_json_end_array(&j);
  tf_json_string(&j, "notes", r->notes ? r->notes : "");
  tf_json_end_object(&j);
  printf("\n");
}

int tf_cmd_report(int argc, char **argv) {
  const char *path = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (tf_cli_is_help(argv[i])) {
      help();
      return TF_EXIT_OK;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      return tf_cli_usage_error("report", "unknown option '%s'", argv[i]);
    } else if (path) {
      return tf_cli_usage_error("report", "one plan file at a time (got '%s' and '%s')", path, argv[i]);
    } else {
      path = argv[i];
    }
  }
  if (!path)
    return tf_cli_usage_error("report", "missing the plan file");
  tf_plan *plan;
  tf_status status = tf_plan_load(path, &plan);
  if (status)
    return tf_cli_fail("report", status);
  if (json)
    print_json(path, plan);
  else
    print_text(path, plan);
  tf_plan_destroy(plan);
  return TF_EXIT_OK;
}
