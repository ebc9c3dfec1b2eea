/* The HTML report: the text report's numbers as tables, around the inlined timeline picture.
 * Everything comes from tools/report.h, the same functions the text and JSON outputs use. */
#include "tools/report_html.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "tools/cli.h"

static const char *const style_sheet =
    "<style>\n"
    "body{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:14px;color:#222;margin:24px;max-width:1360px}\n"
    "h1{font-size:22px;margin:0 0 4px}\n"
    "h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}\n"
    ".meta{color:#555;margin:0 0 8px}\n"
    ".fits{color:#1b5e20;font-weight:bold}\n"
    ".over{color:#c62828;font-weight:bold}\n"
    "figure{margin:12px 0}\n"
    "figure svg{max-width:100%;height:auto}\n"
    "table{border-collapse:collapse}\n"
    "th,td{padding:3px 12px;text-align:left;border-bottom:1px solid #eee}\n"
    "th{background:#f5f5f5}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "tr.role td:first-child{padding-left:32px;color:#444}\n"
    "tr.total td{font-weight:bold;border-top:2px solid #999}\n"
    "code{font-family:'DejaVu Sans Mono',monospace;font-size:13px}\n"
    "</style>\n";

static void cell_text(tf_text *t, const char *tag, const char *css_class, const char *value) {
  tf_text_printf(t, "<%s%s%s%s>", tag, css_class ? " class=\"" : "", css_class ? css_class : "", css_class ? "\"" : "");
  tf_text_escaped(t, value, 0);
  tf_text_printf(t, "</%s>", tag);
}

static void cell_bytes(tf_text *t, int64_t bytes) {
  char human[32], exact[32];
  tf_text_printf(t, "<td class=\"num\">%s</td><td class=\"num\">%s</td>", tf_cli_bytes(bytes, human, sizeof(human)),
                 tf_cli_count(bytes, exact, sizeof(exact)));
}

static void write_heading(tf_text *t, const tf_plan *plan, const tf_svg_options *options) {
  const char *source = options->source ? options->source : "plan";
  tf_text_printf(t, "<title>tightfit report: ");
  tf_text_escaped(t, source, 0);
  tf_text_printf(t, "</title>\n%s</head>\n<body>\n<h1>tightfit report: ", style_sheet);
  tf_text_escaped(t, source, 0);
  tf_text_printf(t, "</h1>\n<p class=\"meta\">plan of '");
  tf_text_escaped(t, plan->graph_name ? plan->graph_name : "?", 0);
  tf_text_printf(t, "' for ");
  tf_text_escaped(t, plan->target ? plan->target : "?", 0);
  tf_text_printf(t, " (plan version %u), %s, %" PRId32 " steps, %" PRId32 " buffers</p>\n", plan->version,
                 plan->training ? "training" : "inference", plan->n_steps, plan->n_buffers);
  if (options->budget > 0) {
    char budget[32], total[32], difference[32];
    int64_t plan_total = tf_plan_device_total(plan);
    bool over = plan_total > options->budget;
    tf_text_printf(t, "<p id=\"budget\" class=\"%s\">budget %s: the plan's device total %s %s by %s</p>\n",
                   over ? "over" : "fits", tf_cli_bytes(options->budget, budget, sizeof(budget)),
                   tf_cli_bytes(plan_total, total, sizeof(total)), over ? "exceeds it" : "fits, with room to spare",
                   tf_cli_bytes(over ? plan_total - options->budget : options->budget - plan_total, difference,
                                sizeof(difference)));
  }
}

static void write_memory(tf_text *t, const tf_plan *plan) {
  tf_report_row rows[TF_REPORT_MAX_ROWS];
  int n = tf_report_memory_rows(plan, rows);
  tf_text_printf(t, "<h2>Memory (each region allocated once)</h2>\n<table id=\"memory\">\n"
                    "<tr><th>region / role</th><th>buffers</th><th>size</th><th>exact bytes</th></tr>\n");
  for (int i = 0; i < n; i++) {
    const char *row_class = i == n - 1 ? "total" : rows[i].depth ? "role" : "region";
    tf_text_printf(t, "<tr class=\"%s\">", row_class);
    cell_text(t, "td", NULL, rows[i].label);
    if (rows[i].count >= 0)
      tf_text_printf(t, "<td class=\"num\">%" PRId32 "</td>", rows[i].count);
    else
      tf_text_printf(t, "<td></td>");
    cell_bytes(t, rows[i].bytes);
    tf_text_printf(t, "</tr>\n");
  }
  tf_text_printf(t, "</table>\n");
}

static void write_arena(tf_text *t, const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  tf_report_summary s = tf_report_summarise(plan);
  char a[32], b[32];
  tf_text_printf(t, "<h2>Arena</h2>\n<table id=\"arena\">\n");
  tf_text_printf(t, "<tr><td>arena (allocated)</td>");
  cell_bytes(t, plan->region_bytes[TF_REGION_ARENA]);
  tf_text_printf(t, "</tr>\n<tr><td>lower bound (the most bytes live at one step)</td>");
  cell_bytes(t, r->arena_lower_bound);
  tf_text_printf(t, "</tr>\n<tr><td>arena / lower bound</td><td class=\"num\">");
  if (s.ratio > 0)
    tf_text_printf(t, "%.3f", s.ratio);
  else
    tf_text_printf(t, "&#8212;");
  tf_text_printf(t, "</td><td></td></tr>\n<tr><td>arena without reuse</td>");
  cell_bytes(t, r->arena_naive);
  tf_text_printf(t, "</tr>\n<tr><td>total without reuse</td>");
  cell_bytes(t, s.naive_total);
  tf_text_printf(t, "</tr>\n</table>\n<p>");
  if (s.saving >= 0)
    tf_text_printf(t, "reuse saves %s (%s bytes, %.1f%% of that total)", tf_cli_bytes(s.saving, a, sizeof(a)),
                   tf_cli_count(s.saving, b, sizeof(b)),
                   s.naive_total > 0 ? 100.0 * (double)s.saving / (double)s.naive_total : 0.0);
  else
    tf_text_printf(t, "the arena is %s (%s bytes) larger: alignment padding outweighs reuse",
                   tf_cli_bytes(-s.saving, a, sizeof(a)), tf_cli_count(-s.saving, b, sizeof(b)));
  tf_text_printf(t, "</p>\n");
}

static void write_peak(tf_text *t, const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  tf_text_printf(t, "<h2>Peak</h2>\n");
  if (r->peak_step < 0 || r->peak_step >= plan->n_steps) {
    tf_text_printf(t, "<p>The plan has no steps.</p>\n");
    return;
  }
  const tf_plan_step *peak = &plan->steps[r->peak_step];
  char live[32], in_use[32], bytes[32], shape[256];
  int64_t persistent = tf_plan_total_bytes(plan) - plan->region_bytes[TF_REGION_ARENA];
  tf_text_printf(t, "<p id=\"peak\">step %" PRId32 " <code>", r->peak_step);
  tf_text_escaped(t, peak->name, 0);
  tf_text_printf(t, "</code> (%s, %s): %s live in the arena; %s in use with the persistent regions</p>\n",
                 tf_op_name(peak->op), tf_phase_name(peak->phase),
                 tf_cli_bytes(r->live_bytes[r->peak_step], live, sizeof(live)),
                 tf_cli_bytes(persistent + r->live_bytes[r->peak_step], in_use, sizeof(in_use)));
  int32_t ids[TF_REPORT_PEAK_BUFFERS], n;
  tf_status status = tf_report_largest_live(plan, r->peak_step, ids, TF_REPORT_PEAK_BUFFERS, &n);
  if (status)
    tf_text_printf(t, "<p>The largest buffers: %s</p>\n", tf_status_message(status));
  tf_status_free(status);
  tf_text_printf(t, "<table id=\"peak-buffers\">\n<tr><th>largest buffers live there</th><th>role</th><th>shape</th>"
                    "<th>size</th><th>steps</th></tr>\n");
  for (int32_t i = 0; i < n; i++) {
    const tf_plan_buffer *buffer = &plan->buffers[ids[i]];
    tf_text_printf(t, "<tr><td><code>");
    tf_text_escaped(t, buffer->name, 0);
    tf_text_printf(t, "</code></td><td>%s</td>", tf_role_name(buffer->role));
    cell_text(t, "td", NULL, tf_report_shape_text(buffer, shape, sizeof(shape)));
    tf_text_printf(t, "<td class=\"num\">%s</td><td class=\"num\">[%" PRId32 ", %" PRId32 "]</td></tr>\n",
                   tf_cli_bytes(buffer->bytes, bytes, sizeof(bytes)), buffer->first_step, buffer->last_step);
  }
  tf_text_printf(t, "</table>\n");
}

static void write_program(tf_text *t, const tf_plan *plan) {
  const tf_plan_report *r = &plan->report;
  char flops[64];
  tf_text_printf(t, "<h2>Batch and program</h2>\n");
  tf_text_printf(t,
                 "<p id=\"batch\">micro-batch %" PRId64 " &#215; %" PRId32
                 " accumulation step%s = global batch %" PRId64 "</p>\n",
                 plan->micro_batch, plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->global_batch);
  tf_text_printf(
      t,
      "<p>steps [0, %" PRId32 ") run %" PRId32 " time%s per training step, steps [%" PRId32 ", %" PRId32 ") once</p>\n",
      plan->micro_steps, plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->micro_steps, plan->n_steps);
  tf_text_printf(t, "<table id=\"flops\">\n<tr><th>phase</th><th>estimated FLOPs</th></tr>\n");
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++)
    tf_text_printf(t, "<tr><td>%s</td><td class=\"num\">%s</td></tr>\n", tf_phase_name((tf_phase)phase),
                   tf_report_flops_text(r->flops[phase], flops, sizeof(flops)));
  tf_text_printf(t, "</table>\n");
  if (!r->notes || !r->notes[0])
    return;
  tf_text_printf(t, "<h2>Notes</h2>\n<ul id=\"notes\">\n");
  for (const char *line = r->notes; *line;) {
    const char *end = strchr(line, '\n');
    size_t length = end ? (size_t)(end - line) : strlen(line);
    tf_text_printf(t, "<li>");
    tf_text_escaped_span(t, line, length, 0);
    tf_text_printf(t, "</li>\n");
    line += length + (end ? 1 : 0);
  }
  tf_text_printf(t, "</ul>\n");
}

tf_status tf_report_html_page(tf_text *text, const tf_plan *plan, const tf_svg_options *options) {
  tf_svg_options defaults = {0};
  if (!options)
    options = &defaults;
  tf_text_printf(text, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<meta name=\"generator\" content=\"tightfit report\">\n");
  write_heading(text, plan, options);
  tf_text_printf(text, "<figure id=\"timeline\">\n");
  TF_RETURN_IF_ERROR(tf_report_svg_element(text, plan, options));
  tf_text_printf(text, "<figcaption>Bytes in use at every plan step: the persistent regions as constant bands, the "
                       "arena's live activations and workspaces on top (each buffer at its aligned size, so the arena "
                       "part equals the plan's live bytes per step).</figcaption>\n</figure>\n");
  write_memory(text, plan);
  write_arena(text, plan);
  write_peak(text, plan);
  write_program(text, plan);
  tf_text_printf(text, "</body>\n</html>\n");
  return NULL;
}

tf_status tf_report_html_save(const char *path, const tf_plan *plan, const tf_svg_options *options) {
  tf_text text = {0};
  return tf_text_save(&text, tf_report_html_page(&text, plan, options), path, "HTML text");
}
