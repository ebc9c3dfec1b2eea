/* `tightfit report P.tfplan`: where a plan's memory goes. The regions and the roles inside them
 * (human units and exact bytes), the arena against its lower bound and against no reuse at all, the
 * peak step and the largest buffers live there, the batch split, FLOPs per phase and the
 * compiler's notes. The plan is loaded with every invariant checked, so the numbers are the plan's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "tightfit/plan.h"
#include "tools/cli.h"
#include "tools/report.h"
#include "tools/report_html.h"
#include "tools/report_svg.h"

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit report P.tfplan [--json] [--svg F] [--html F] [--budget SIZE]\n\n"
          "Loads a plan (FlatBuffers Verifier and every plan invariant) and shows where its memory goes:\n"
          "each region and the buffer roles inside it, in human units and exact bytes; the arena against\n"
          "its lower bound (the most bytes live at one step) and against no reuse; the peak step and the\n"
          "largest buffers live there; micro-batch, accumulation and global batch; estimated FLOPs per\n"
          "phase; and the compiler's notes.\n\n"
          "options:\n"
          "  --json          machine-readable output\n"
          "  --svg F         also write the memory timeline picture to F (SVG): bytes in use at every plan\n"
          "                  step, stacked by category (parameters + constants, gradients, optimizer state\n"
          "                  and io as constant bands; the arena's live activations and workspaces on top),\n"
          "                  with the peak step marked, the phases shaded and the plan's total as a line.\n"
          "                  Plans of more than 2000 steps are drawn in bins that keep each bin's maximum.\n"
          "  --html F        also write a self-contained HTML page to F: the same picture inlined and the\n"
          "                  report's tables (no scripts, no network, no other files)\n"
          "  --budget SIZE   draw a budget line (e.g. 16GiB, 512MiB, 8GB) and say whether the plan's total\n"
          "                  fits it; the title of the picture says when it does not\n\n"
          "The outputs combine: the text or JSON report is printed as usual, with a line (or a JSON field)\n"
          "naming each file written. Files are written atomically (a temporary file, then renamed).\n\n"
          "exit codes: 0 ok, 2 bad usage, a malformed plan or a file that cannot be written (the message\n"
          "names the file and problem).\n");
}

static void print_row(const char *indent, const char *label, int64_t bytes, int32_t count) {
  char human[32], exact[32], title[96];
  if (count >= 0)
    snprintf(title, sizeof(title), "%s%s (%d)", indent, label, count);
  else
    snprintf(title, sizeof(title), "%s%s", indent, label);
  fprintf(tf_cli_out(), "  %-40s %12s %18s\n", title, tf_cli_bytes(bytes, human, sizeof(human)),
          tf_cli_count(bytes, exact, sizeof(exact)));
}

/* The memory table: each region, then the roles it holds, then the total. */
static void print_memory(const tf_plan *plan) {
  tf_report_row rows[TF_REPORT_MAX_ROWS];
  int n = tf_report_memory_rows(plan, rows);
  fprintf(tf_cli_out(), "\n  %-40s %12s %18s\n", "memory (each region allocated once)", "size", "exact bytes");
  for (int i = 0; i < n; i++)
    print_row(rows[i].depth ? "  " : "", rows[i].label, rows[i].bytes, rows[i].count);
  if (!plan->training)
    return;
  const tf_report_parameters split = tf_report_parameter_split(plan);
  fprintf(tf_cli_out(), "\n  %-40s %12s %18s\n", "parameters, trained or frozen", "size", "exact bytes");
  print_row("", "trainable parameters", split.trainable_bytes, split.trainable);
  print_row("", "frozen parameters", split.frozen_bytes, split.frozen);
}

/* Each overhead part with its full source: where the figure comes from and how it is measured. */
static void print_overhead(const tf_plan *plan) {
  if (plan->overhead.n_parts == 0) {
    fprintf(tf_cli_out(), "\ndevice overhead: none (the %s target's regions are all it holds)\n",
            plan->target ? plan->target : "?");
    return;
  }
  char bytes[32];
  fprintf(tf_cli_out(), "\ndevice overhead on %s (device total = regions + these parts):\n",
          plan->target ? plan->target : "?");
  for (int32_t i = 0; i < plan->overhead.n_parts; i++) {
    const tf_overhead_part *part = &plan->overhead.parts[i];
    fprintf(tf_cli_out(), "  %-12s %12s  %s\n", part->name, tf_cli_bytes(part->bytes, bytes, sizeof(bytes)),
            part->source);
  }
}

/* An offloaded plan's host side: what lies in host memory, the steps there, the bytes moved. */
static void print_host(const tf_plan *plan) {
  if (plan->n_host_steps == 0)
    return;
  int32_t per_micro_batch = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    per_micro_batch += plan->host_steps[h].phase != TF_PHASE_OPTIMIZER;
  char host[32], moved[32];
  fprintf(tf_cli_out(),
          "\nhost memory (offloaded %s, not on the device): %s; %d steps run on the host's cores (%d with each "
          "micro-batch, the rest after each optimizer step's device steps), moving %s between device and host per "
          "step\n",
          tf_plan_host_contents(plan), tf_cli_bytes(plan->host_bytes, host, sizeof(host)), plan->n_host_steps,
          per_micro_batch, tf_cli_bytes(tf_plan_host_moved_bytes(plan), moved, sizeof(moved)));
}

static void print_arena(const tf_plan *plan, const tf_report_summary *s) {
  const tf_plan_report *r = &plan->report;
  char a[64], b[64];
  fprintf(tf_cli_out(), "\narena: %s; lower bound %s (the most bytes live at one step)",
          tf_cli_bytes(plan->region_bytes[TF_REGION_ARENA], a, sizeof(a)),
          tf_cli_bytes(r->arena_lower_bound, b, sizeof(b)));
  if (s->ratio > 0)
    fprintf(tf_cli_out(), ", arena / lower bound = %.3f\n", s->ratio);
  else
    fprintf(tf_cli_out(), "\n");
  fprintf(tf_cli_out(), "without reuse: arena %s, total %s; ", tf_cli_bytes(r->arena_naive, a, sizeof(a)),
          tf_cli_bytes(s->naive_total, b, sizeof(b)));
  if (s->saving >= 0)
    fprintf(tf_cli_out(), "reuse saves %s (%s bytes, %.1f%% of that total)\n", tf_cli_bytes(s->saving, a, sizeof(a)),
            tf_cli_count(s->saving, b, sizeof(b)),
            s->naive_total > 0 ? 100.0 * (double)s->saving / (double)s->naive_total : 0.0);
  else
    fprintf(tf_cli_out(), "the arena is %s (%s bytes) larger: alignment padding outweighs reuse\n",
            tf_cli_bytes(-s->saving, a, sizeof(a)), tf_cli_count(-s->saving, b, sizeof(b)));
}

static void print_peak(const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  if (r->peak_step < 0 || r->peak_step >= plan->n_steps)
    return;
  const tf_plan_step *peak = &plan->steps[r->peak_step];
  char bytes[64], shape[256];
  fprintf(tf_cli_out(), "\npeak: step %d '%s' (%s, %s): %s live in the arena\n", r->peak_step, peak->name,
          tf_op_name(peak->op), tf_phase_name(peak->phase),
          tf_cli_bytes(r->live_bytes[r->peak_step], bytes, sizeof(bytes)));
  int32_t ids[TF_REPORT_PEAK_BUFFERS], n;
  tf_status status = tf_report_largest_live(plan, r->peak_step, ids, TF_REPORT_PEAK_BUFFERS, &n);
  if (status)
    fprintf(tf_cli_out(), "  (the largest buffers: %s)\n", tf_status_message(status));
  tf_status_free(status);
  for (int32_t i = 0; i < n; i++) {
    const tf_plan_buffer *buffer = &plan->buffers[ids[i]];
    fprintf(tf_cli_out(), "  %-32s %-10s %-22s %12s  steps [%d, %d]\n", buffer->name, tf_role_name(buffer->role),
            tf_report_shape_text(buffer, shape, sizeof(shape)), tf_cli_bytes(buffer->bytes, bytes, sizeof(bytes)),
            buffer->first_step, buffer->last_step);
  }
}

static void print_program(const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  char flops[64];
  fprintf(tf_cli_out(), "\nbatch: micro-batch %" PRId64 " x %d accumulation step%s = global batch %" PRId64 "\n",
          plan->micro_batch, plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->global_batch);
  if (plan->matmul_math != TF_F32)
    fprintf(tf_cli_out(),
            "matmul math: %s operands, f32 accumulation (CUDA tensor cores; cpu and vulkan compute in f32)\n",
            tf_dtype_name(plan->matmul_math));
  const tf_report_summary summary = tf_report_summarise(plan);
  if (summary.casts_total > 0) {
    fprintf(tf_cli_out(), "casts: %" PRId64 " per training step (", summary.casts_total);
    for (int phase = 0, shown = 0; phase < TF_PHASE_COUNT; phase++)
      if (summary.casts[phase] > 0)
        fprintf(tf_cli_out(), "%s%s %" PRId64, shown++ ? ", " : "", tf_phase_name((tf_phase)phase),
                summary.casts[phase]);
    fprintf(tf_cli_out(), ")\n");
  }
  fprintf(tf_cli_out(), "program: steps [0, %d) run %d time%s per training step, steps [%d, %d) once\n",
          plan->micro_steps, plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->micro_steps, plan->n_steps);
  fprintf(tf_cli_out(), "flops:");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    fprintf(tf_cli_out(), "%s %s %s", phase ? "," : "", tf_phase_name((tf_phase)phase),
            tf_report_flops_text(r->flops[phase], flops, sizeof(flops)));
  fprintf(tf_cli_out(), "\n");
  if (!r->notes || !r->notes[0])
    return;
  fprintf(tf_cli_out(), "\nnotes:\n");
  for (const char *line = r->notes; *line;) {
    const char *end = strchr(line, '\n');
    int length = end ? (int)(end - line) : (int)strlen(line);
    fprintf(tf_cli_out(), "  %.*s\n", length, line);
    line += length + (end ? 1 : 0);
  }
}

/* What the picture options asked for, echoed in the text and JSON outputs. */
typedef struct picture_outputs {
  const char *svg, *html; /* files written, or NULL */
  int64_t budget;         /* > 0 when --budget was given */
} picture_outputs;

static void print_outputs(const tf_plan *plan, const picture_outputs *outputs) {
  if (outputs->budget > 0) {
    int64_t total = tf_plan_device_total(plan);
    char budget[32], bytes[32], difference[32];
    bool over = total > outputs->budget;
    fprintf(tf_cli_out(), "\nbudget: %s; the plan's device total %s %s %s%s\n",
            tf_cli_bytes(outputs->budget, budget, sizeof(budget)), tf_cli_bytes(total, bytes, sizeof(bytes)),
            over ? "exceeds it by" : "fits, with",
            tf_cli_bytes(over ? total - outputs->budget : outputs->budget - total, difference, sizeof(difference)),
            over ? "" : " to spare");
  }
  if (outputs->svg || outputs->html)
    fprintf(tf_cli_out(), "\n");
  if (outputs->svg)
    fprintf(tf_cli_out(), "wrote the memory timeline (SVG) to %s\n", outputs->svg);
  if (outputs->html)
    fprintf(tf_cli_out(), "wrote the HTML report to %s\n", outputs->html);
}

static void print_text(const char *path, const tf_plan *plan, const picture_outputs *outputs) {
  tf_report_summary s = tf_report_summarise(plan);
  fprintf(tf_cli_out(), "%s: plan of '%s' for %s (plan version %u), %s, %d steps, %d buffers\n", path,
          plan->graph_name ? plan->graph_name : "?", plan->target ? plan->target : "?", plan->version,
          plan->training ? "training" : "inference", plan->n_steps, plan->n_buffers);
  print_memory(plan);
  print_overhead(plan);
  print_host(plan);
  print_arena(plan, &s);
  print_peak(plan);
  print_program(plan);
  print_outputs(plan, outputs);
}

static void print_json(FILE *out, const char *path, const tf_plan *plan, const picture_outputs *outputs) {
  const tf_plan_report *r = &plan->report;
  tf_report_summary s = tf_report_summarise(plan);
  tf_json j = {out, 0, {false}};
  tf_json_begin_object(&j, NULL);
  tf_json_string(&j, "file", path);
  tf_json_string(&j, "graph", plan->graph_name ? plan->graph_name : "");
  tf_json_string(&j, "target", plan->target ? plan->target : "");
  tf_json_int(&j, "plan_version", plan->version);
  tf_json_bool(&j, "training", plan->training);
  tf_json_string(&j, "matmul_math", tf_dtype_name(plan->matmul_math));
  tf_json_int(&j, "steps", plan->n_steps);
  tf_json_int(&j, "casts_per_step", s.casts_total);
  tf_json_int(&j, "buffers", plan->n_buffers);
  tf_json_int(&j, "total_bytes", s.total);
  tf_json_int(&j, "overhead_bytes", tf_plan_overhead_bytes(plan));
  tf_json_int(&j, "device_total_bytes", tf_plan_device_total(plan));
  tf_json_int(&j, "host_bytes", plan->host_bytes);
  tf_json_int(&j, "host_steps", plan->n_host_steps);
  tf_json_int(&j, "host_moved_bytes_per_step", tf_plan_host_moved_bytes(plan));
  tf_json_begin_array(&j, "overhead");
  for (int32_t i = 0; i < plan->overhead.n_parts; i++) {
    tf_json_begin_object(&j, NULL);
    tf_json_string(&j, "name", plan->overhead.parts[i].name);
    tf_json_int(&j, "bytes", plan->overhead.parts[i].bytes);
    tf_json_string(&j, "source", plan->overhead.parts[i].source);
    tf_json_end_object(&j);
  }
  tf_json_end_array(&j);
  tf_json_begin_object(&j, "regions");
  for (int region = 0; region < TF_REGION_COUNT; region++)
    tf_json_int(&j, tf_region_name((tf_region)region), plan->region_bytes[region]);
  tf_json_end_object(&j);
  tf_json_begin_object(&j, "roles");
  for (int role = 0; role < TF_ROLE_COUNT; role++) {
    tf_json_begin_object(&j, tf_role_name((tf_buffer_role)role));
    tf_json_int(&j, "bytes", r->role_bytes[role]);
    tf_json_int(&j, "buffers", tf_report_count_role(plan, (tf_buffer_role)role));
    tf_json_end_object(&j);
  }
  tf_json_end_object(&j);
  if (plan->training) {
    const tf_report_parameters split = tf_report_parameter_split(plan);
    tf_json_begin_object(&j, "parameters");
    tf_json_int(&j, "trainable_bytes", split.trainable_bytes);
    tf_json_int(&j, "trainable_buffers", split.trainable);
    tf_json_int(&j, "frozen_bytes", split.frozen_bytes);
    tf_json_int(&j, "frozen_buffers", split.frozen);
    tf_json_end_object(&j);
  }
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
    int32_t ids[TF_REPORT_PEAK_BUFFERS], n;
    tf_status status = tf_report_largest_live(plan, r->peak_step, ids, TF_REPORT_PEAK_BUFFERS, &n);
    if (status)
      tf_json_string(&j, "largest_buffers_error", tf_status_message(status));
    tf_status_free(status);
    tf_json_begin_array(&j, "largest_buffers");
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
  if (outputs->budget > 0) {
    tf_json_int(&j, "budget_bytes", outputs->budget);
    tf_json_bool(&j, "fits_budget", s.total <= outputs->budget);
  }
  if (outputs->svg)
    tf_json_string(&j, "svg_file", outputs->svg);
  if (outputs->html)
    tf_json_string(&j, "html_file", outputs->html);
  tf_json_end_object(&j);
  fprintf(out, "\n");
}

void tf_report_json(FILE *out, const char *path, const tf_plan *plan, int64_t budget) {
  picture_outputs outputs = {NULL, NULL, budget};
  print_json(out, path, plan, &outputs);
}

int tf_cmd_report(int argc, char **argv) {
  const char *path = NULL, *budget_text = NULL;
  bool json = false;
  picture_outputs outputs = {NULL, NULL, 0};
  tf_cli_args walk = tf_cli_args_start("report", argc, argv, help, &json);
  walk.dash_operand = true;
  while (tf_cli_args_next(&walk))
    if (!tf_cli_args_option(&walk, "--svg", &outputs.svg) && !tf_cli_args_option(&walk, "--html", &outputs.html) &&
        !tf_cli_args_option(&walk, "--budget", &budget_text))
      tf_cli_args_positional(&walk, "plan file", &path);
  if (!tf_cli_args_done(&walk, path != NULL, "missing the plan file"))
    return walk.exit_code;
  if (budget_text && (!tf_cli_parse_bytes(budget_text, &outputs.budget) || outputs.budget <= 0))
    return tf_cli_usage_error("report", "--budget '%s' is not a size above 0 (e.g. 16GiB, 512MiB, 8GB)", budget_text);
  if ((outputs.svg && !outputs.svg[0]) || (outputs.html && !outputs.html[0]))
    return tf_cli_usage_error("report", "--svg and --html need a file name");
  tf_plan *plan;
  if (!tf_cli_args_load_plan(&walk, path, &plan))
    return walk.exit_code;
  /* Files first: a file that cannot be written fails the command before anything is printed. */
  tf_svg_options options = {path, outputs.budget, 0};
  tf_status status = NULL;
  if (outputs.svg)
    status = tf_report_svg_save(outputs.svg, plan, &options);
  if (!status && outputs.html)
    status = tf_report_html_save(outputs.html, plan, &options);
  if (status) {
    tf_plan_destroy(plan);
    return tf_cli_fail("report", status);
  }
  if (json)
    print_json(tf_cli_out(), path, plan, &outputs);
  else
    print_text(path, plan, &outputs);
  tf_plan_destroy(plan);
  return TF_EXIT_OK;
}
