/* The memory timeline picture: per-step stacking (tools/report_svg.h) and the SVG writer. Plain
 * SVG 1.1 with an embedded style sheet: no scripts, no external fonts or files, so the picture opens
 * the same in a browser, an editor or inlined in the HTML report. */
#include "tools/report_svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

/* ---- stacking ---- */

static const tf_region band_regions[TF_TIMELINE_PERSISTENT_BANDS] = {TF_REGION_PARAMETERS, TF_REGION_GRADIENTS,
                                                                     TF_REGION_OPTIMIZER_STATE, TF_REGION_IO};

tf_status tf_timeline_create(const tf_plan *plan, tf_timeline *out) {
  memset(out, 0, sizeof(*out));
  out->n_steps = plan->n_steps;
  for (int band = 0; band < TF_TIMELINE_PERSISTENT_BANDS; band++) {
    out->persistent[band] = plan->region_bytes[band_regions[band]];
    out->persistent_total += out->persistent[band];
  }
  /* One entry past the last step: the running sums below end every interval at last_step + 1. */
  size_t entries = (size_t)(plan->n_steps > 0 ? plan->n_steps : 0) + 1;
  out->activation_bytes = calloc(entries, sizeof(int64_t));
  out->workspace_bytes = calloc(entries, sizeof(int64_t));
  if (!out->activation_bytes || !out->workspace_bytes) {
    tf_timeline_destroy(out);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "timeline: cannot allocate for %" PRId32 " steps", plan->n_steps);
  }
  int64_t alignment = plan->alignment > 0 ? plan->alignment : 1;
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region == TF_REGION_ARENA &&
        (b->first_step < 0 || b->first_step > b->last_step || b->last_step >= plan->n_steps)) {
      tf_timeline_destroy(out);
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "timeline: arena buffer %" PRId32 " '%s' is live at steps [%" PRId32 ", %" PRId32
                           "], outside the plan's %" PRId32 " steps",
                           id, b->name ? b->name : "", b->first_step, b->last_step, plan->n_steps);
    }
  }
  size_t n_buffers = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  int32_t *from = malloc(sizeof(int32_t) * n_buffers), *to = malloc(sizeof(int32_t) * n_buffers);
  tf_status status = from && to ? tf_plan_counted_steps(plan, from, to)
                                : tf_status_new(TF_ERR_OUT_OF_MEMORY, "timeline: out of host memory");
  for (int32_t id = 0; id < plan->n_buffers && !status; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (b->region != TF_REGION_ARENA || from[id] > to[id])
      continue;
    /* The same slot the planner and the verifier count: the size rounded up to the alignment. */
    int64_t slot = (b->bytes + alignment - 1) / alignment * alignment;
    int64_t *delta = b->role == TF_ROLE_WORKSPACE ? out->workspace_bytes : out->activation_bytes;
    delta[from[id]] += slot;
    delta[to[id] + 1] -= slot;
  }
  free(from);
  free(to);
  if (status) {
    tf_timeline_destroy(out);
    return status;
  }
  for (int32_t s = 1; s < plan->n_steps; s++) {
    out->activation_bytes[s] += out->activation_bytes[s - 1];
    out->workspace_bytes[s] += out->workspace_bytes[s - 1];
  }
  return NULL;
}

void tf_timeline_destroy(tf_timeline *timeline) {
  free(timeline->activation_bytes);
  free(timeline->workspace_bytes);
  timeline->activation_bytes = timeline->workspace_bytes = NULL;
}

static int64_t arena_live(const tf_timeline *t, int32_t step) {
  return t->activation_bytes[step] + t->workspace_bytes[step];
}

int32_t tf_timeline_bins(const tf_timeline *t, int32_t max_bins, int32_t *steps, int32_t *width) {
  if (max_bins < 1)
    max_bins = 1;
  int64_t n = t->n_steps > 0 ? t->n_steps : 0;
  int64_t bin_width = n > 0 ? (n + max_bins - 1) / max_bins : 1;
  int32_t count = 0;
  for (int64_t first = 0; first < n; first += bin_width) {
    int64_t end = first + bin_width < n ? first + bin_width : n;
    int32_t best = (int32_t)first;
    for (int64_t s = first + 1; s < end; s++)
      if (arena_live(t, (int32_t)s) > arena_live(t, best))
        best = (int32_t)s;
    steps[count++] = best;
  }
  *width = (int32_t)bin_width;
  return count;
}

/* ---- drawing ---- */

enum {
  WIDTH = 1340,
  HEIGHT = 640,
  PLOT_LEFT = 96,
  PLOT_RIGHT = 950,
  PLOT_TOP = 78,
  PLOT_BOTTOM = 548,
  LEGEND_LEFT = 980,
  PEAK_NAME_CHARS = 40,
};

static const char *const band_colors[TF_BAND_COUNT] = {"#4e79a7", "#f28e2b", "#76b7b2",
                                                       "#9c9c9c", "#e15759", "#edc948"};
static const char *const band_labels[TF_BAND_COUNT] = {"parameters + constants",    "gradients",
                                                       "optimizer state",           "io (micro-batches)",
                                                       "activations (arena, live)", "workspace (arena, live)"};
/* The phase strip: forward, recompute, backward, accumulate, optimizer. */
static const char *const phase_colors[TF_PHASE_COUNT] = {"#6f9fd8", "#e8a33d", "#a58bd0", "#59b36b", "#e07b39"};
#define BUDGET_COLOR "#c62828"
#define PEAK_COLOR "#8b0000"

typedef struct picture {
  const tf_plan *plan;
  const tf_timeline *timeline;
  const tf_svg_options *options;
  tf_text *text;
  int32_t x_steps;    /* the x axis spans steps [0, x_steps) */
  double y_max;       /* bytes at the top of the plot */
  int64_t total;      /* the plan's device total: the regions and the target's device overhead */
  int64_t peak_total; /* persistent + arena live at the peak step; 0 without steps */
  int32_t peak_step;  /* -1 without steps */
} picture;

static double x_at(const picture *p, double step) { return PLOT_LEFT + (PLOT_RIGHT - PLOT_LEFT) * step / p->x_steps; }

static double y_at(const picture *p, double bytes) { return PLOT_BOTTOM - (PLOT_BOTTOM - PLOT_TOP) * bytes / p->y_max; }

static const char *human(int64_t bytes, char *buf, size_t size) { return tf_cli_bytes(bytes, buf, size); }

/* The smallest of {1, 2, 2.5, 5} x 10^e (or {1, 2, 5} when `integers`) that is >= raw. */
static double nice_step(double raw, bool integers) {
  if (!(raw > 0))
    return 1;
  double power = pow(10, floor(log10(raw)));
  static const double any[] = {1, 2, 2.5, 5, 10}, whole[] = {1, 2, 5, 10};
  const double *steps = integers ? whole : any;
  int n = integers ? 4 : 5;
  for (int i = 0; i < n; i++)
    if (steps[i] * power >= raw * (1 - 1e-9))
      return integers && steps[i] * power < 1 ? 1 : steps[i] * power;
  return 10 * power;
}

void tf_report_peak_label(tf_text *text, const tf_plan *plan, const tf_timeline *timeline) {
  int32_t step = plan->report.peak_step;
  if (step < 0 || step >= plan->n_steps) {
    tf_text_printf(text, "no peak: the plan has no steps");
    return;
  }
  char bytes[32];
  tf_text_printf(text, "peak %s at step %" PRId32 " (",
                 human(timeline->persistent_total + arena_live(timeline, step), bytes, sizeof(bytes)), step);
  tf_text_escaped(text, plan->steps[step].name, PEAK_NAME_CHARS);
  tf_text_printf(text, ")");
}

static void title(const picture *p, tf_text *heading) {
  char total[32];
  tf_text_printf(heading, "Memory timeline of '");
  tf_text_escaped(heading, p->plan->graph_name ? p->plan->graph_name : "?", 60);
  tf_text_printf(heading, "' (%s, %s): device total %s", p->plan->target ? p->plan->target : "?",
                 p->plan->training ? "training" : "inference", human(p->total, total, sizeof(total)));
  if (p->options->budget <= 0)
    return;
  char budget[32];
  human(p->options->budget, budget, sizeof(budget));
  if (p->total > p->options->budget) {
    char over[32];
    tf_text_printf(heading, " \xE2\x80\x94 exceeds the %s budget by %s", budget,
                   human(p->total - p->options->budget, over, sizeof(over)));
  } else {
    tf_text_printf(heading, " \xE2\x80\x94 fits the %s budget", budget);
  }
}

static void draw_header(const picture *p) {
  tf_text *t = p->text;
  tf_text heading = {0};
  title(p, &heading);
  bool over = p->options->budget > 0 && p->total > p->options->budget;
  tf_text_printf(t, "<title>%s</title>\n", heading.data ? heading.data : "");
  tf_text_printf(t, "<text class=\"title\" x=\"%d\" y=\"28\"%s>%s</text>\n", PLOT_LEFT - 60,
                 over ? " fill=\"" BUDGET_COLOR "\"" : "", heading.data ? heading.data : "");
  if (heading.failed)
    t->failed = true;
  free(heading.data);

  const tf_plan *plan = p->plan;
  char arena[32], bound[32];
  tf_text_printf(t, "<text class=\"subtitle\" x=\"%d\" y=\"50\">", PLOT_LEFT - 60);
  if (p->options->source) {
    tf_text_escaped(t, p->options->source, 80);
    tf_text_printf(t, ": ");
  }
  tf_text_printf(t,
                 "%" PRId32 " steps, micro-batch %" PRId64 " \xC3\x97 %" PRId32 " = global batch %" PRId64
                 "; arena %s, lower bound %s",
                 plan->n_steps, plan->micro_batch, plan->accumulate, plan->global_batch,
                 human(plan->region_bytes[TF_REGION_ARENA], arena, sizeof(arena)),
                 human(plan->report.arena_lower_bound, bound, sizeof(bound)));
  tf_report_summary s = tf_report_summarise(plan);
  if (s.ratio > 0)
    tf_text_printf(t, " (\xC3\x97%.3f)", s.ratio);
  tf_text_printf(t, "</text>\n");
}

/* The three sections a reader looks for: forward, backward (with the recompute and accumulate steps
 * interleaved in it) and optimizer. */
typedef enum section { SECTION_FORWARD, SECTION_BACKWARD, SECTION_OPTIMIZER } section;

static section section_of(tf_phase phase) {
  if (phase == TF_PHASE_FORWARD)
    return SECTION_FORWARD;
  return phase == TF_PHASE_OPTIMIZER ? SECTION_OPTIMIZER : SECTION_BACKWARD;
}

/* The end (exclusive) of the run of bins from `b` whose first steps share a section (or, with
 * `exact`, a phase), and that run's step range. Bins take the phase of their first step, so a
 * plan of any length draws at most one shape per bin. */
static int32_t run_end(const picture *p, int32_t b, int32_t n_bins, int32_t width, bool exact, int32_t *first,
                       int32_t *last) {
  const tf_plan_step *steps = p->plan->steps;
  tf_phase phase = steps[(int64_t)b * width].phase;
  int32_t end = b + 1;
  while (end < n_bins && (exact ? steps[(int64_t)end * width].phase == phase
                                : section_of(steps[(int64_t)end * width].phase) == section_of(phase)))
    end++;
  *first = (int32_t)((int64_t)b * width);
  *last = (int32_t)((int64_t)end * width < p->plan->n_steps ? (int64_t)end * width : p->plan->n_steps);
  return end;
}

/* Shaded sections with their names and boundaries, and above the plot a thin strip with every
 * step's own phase, where the interleaving of backward, recompute and accumulate steps shows. */
static void draw_phases(const picture *p, int32_t n_bins, int32_t width) {
  static const char *const section_names[] = {"forward", "backward", "optimizer"};
  static const char *const section_colors[] = {"#eaf2fb", "#f3eff9", "#fdf0e4"};
  tf_text *t = p->text;
  int32_t first, last;
  for (int32_t b = 0, end; b < n_bins; b = end) {
    end = run_end(p, b, n_bins, width, false, &first, &last);
    section which = section_of(p->plan->steps[first].phase);
    double x0 = x_at(p, first), x1 = x_at(p, last);
    tf_text_printf(t,
                   "<rect class=\"section\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">"
                   "<title>%s: steps [%" PRId32 ", %" PRId32 ")</title></rect>\n",
                   x0, PLOT_TOP, x1 - x0, PLOT_BOTTOM - PLOT_TOP, section_colors[which], section_names[which], first,
                   last);
    if (first > 0)
      tf_text_printf(t, "<line class=\"boundary\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x0, PLOT_TOP - 10,
                     x0, PLOT_BOTTOM);
    if (x1 - x0 >= 64)
      tf_text_printf(t, "<text class=\"phase-label\" x=\"%.1f\" y=\"%d\">%s</text>\n", (x0 + x1) / 2, PLOT_TOP + 15,
                     section_names[which]);
  }
  for (int32_t b = 0, end; b < n_bins; b = end) {
    end = run_end(p, b, n_bins, width, true, &first, &last);
    tf_phase phase = p->plan->steps[first].phase;
    double x0 = x_at(p, first), x1 = x_at(p, last);
    tf_text_printf(t,
                   "<rect x=\"%.1f\" y=\"%d\" width=\"%.2f\" height=\"8\" fill=\"%s\"><title>%s: steps [%" PRId32
                   ", %" PRId32 ")</title></rect>\n",
                   x0, PLOT_TOP - 10, x1 - x0, (unsigned)phase < TF_PHASE_COUNT ? phase_colors[phase] : "#999",
                   tf_phase_name(phase), first, last);
  }
}

static void draw_grid(const picture *p) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  tf_text *t = p->text;
  int unit = 0;
  double scale = 1;
  while (unit < 5 && p->y_max / 1.15 >= scale * 1024) {
    scale *= 1024;
    unit++;
  }
  double step = nice_step(p->y_max / scale / 7, unit == 0);
  for (int k = 0; k * step * scale <= p->y_max * (1 + 1e-9) && k < 64; k++) {
    double y = y_at(p, k * step * scale);
    tf_text_printf(t, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PLOT_LEFT, y, PLOT_RIGHT,
                   y);
    tf_text_printf(t, "<line class=\"tick\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PLOT_LEFT - 5, y,
                   PLOT_LEFT, y);
    if (k == 0)
      tf_text_printf(t, "<text class=\"tick-y\" x=\"%d\" y=\"%.1f\">0</text>\n", PLOT_LEFT - 8, y + 4);
    else
      tf_text_printf(t, "<text class=\"tick-y\" x=\"%d\" y=\"%.1f\">%.4g %s</text>\n", PLOT_LEFT - 8, y + 4, k * step,
                     units[unit]);
  }
  double x_step = nice_step(p->x_steps / 10.0, true);
  for (int k = 0; k * x_step <= p->x_steps && k < 64; k++) {
    double x = x_at(p, k * x_step);
    tf_text_printf(t, "<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, PLOT_BOTTOM, x,
                   PLOT_BOTTOM + 5);
    tf_text_printf(t, "<text class=\"tick-x\" x=\"%.1f\" y=\"%d\">%.0f</text>\n", x, PLOT_BOTTOM + 19, k * x_step);
  }
}

/* The area under `top(step)` down to the persistent bands, as one step-function path. */
static void draw_area(const picture *p, const int32_t *bins, int32_t n_bins, int32_t width, bool with_workspace,
                      const char *color, const char *label) {
  tf_text *t = p->text;
  const tf_timeline *tl = p->timeline;
  double base = y_at(p, (double)tl->persistent_total);
  tf_text_printf(t, "<path class=\"band\" fill=\"%s\" d=\"M%.1f %.1f", color, x_at(p, 0), base);
  int64_t current = -1;
  for (int32_t b = 0; b < n_bins; b++) {
    int32_t s = bins[b];
    int64_t height = tl->activation_bytes[s] + (with_workspace ? tl->workspace_bytes[s] : 0);
    if (height != current) {
      tf_text_printf(t, "H%.1fV%.1f", x_at(p, (double)b * width), y_at(p, (double)(tl->persistent_total + height)));
      current = height;
    }
  }
  tf_text_printf(t, "H%.1fV%.1fZ\"><title>%s</title></path>\n", x_at(p, p->x_steps), base, label);
}

static void draw_bands(const picture *p, const int32_t *bins, int32_t n_bins, int32_t width) {
  tf_text *t = p->text;
  const tf_timeline *tl = p->timeline;
  int64_t below = 0;
  char bytes[32];
  for (int band = 0; band < TF_TIMELINE_PERSISTENT_BANDS; band++) {
    if (tl->persistent[band] <= 0)
      continue;
    double y0 = y_at(p, (double)(below + tl->persistent[band])), y1 = y_at(p, (double)below);
    tf_text_printf(t,
                   "<rect class=\"band\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\">"
                   "<title>%s: %s</title></rect>\n",
                   PLOT_LEFT, y0, PLOT_RIGHT - PLOT_LEFT, y1 - y0, band_colors[band], band_labels[band],
                   human(tl->persistent[band], bytes, sizeof(bytes)));
    below += tl->persistent[band];
  }
  if (n_bins == 0)
    return;
  /* Painter's order: the whole arena stack in the workspace colour, then activations over it. */
  draw_area(p, bins, n_bins, width, true, band_colors[TF_BAND_WORKSPACE], band_labels[TF_BAND_WORKSPACE]);
  draw_area(p, bins, n_bins, width, false, band_colors[TF_BAND_ACTIVATIONS], band_labels[TF_BAND_ACTIVATIONS]);
}

static void draw_lines(const picture *p) {
  tf_text *t = p->text;
  char bytes[32], arena[32];
  double y = y_at(p, (double)p->total);
  tf_text_printf(t, "<line class=\"total\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PLOT_LEFT, y, PLOT_RIGHT,
                 y);
  tf_text_printf(
      t, "<text class=\"line-label halo\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">device total %s (arena %s)</text>\n",
      PLOT_RIGHT - 4, y - 5, human(p->total, bytes, sizeof(bytes)),
      human(p->plan->region_bytes[TF_REGION_ARENA], arena, sizeof(arena)));
  if (p->options->budget > 0) {
    y = y_at(p, (double)p->options->budget);
    tf_text_printf(t, "<line class=\"budget\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PLOT_LEFT, y,
                   PLOT_RIGHT, y);
    tf_text_printf(t,
                   "<text id=\"budget-label\" class=\"line-label halo\" x=\"%d\" y=\"%.1f\" fill=\"" BUDGET_COLOR
                   "\">budget %s",
                   PLOT_LEFT + 4, y - 5, human(p->options->budget, bytes, sizeof(bytes)));
    if (p->total > p->options->budget) {
      char over[32];
      tf_text_printf(t, ": the device total exceeds it by %s",
                     human(p->total - p->options->budget, over, sizeof(over)));
    }
    tf_text_printf(t, "</text>\n");
  }
  if (p->peak_step < 0)
    return;
  double x = x_at(p, p->peak_step + 0.5), top = y_at(p, (double)p->peak_total);
  tf_text_printf(t, "<line class=\"peak\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", x, PLOT_TOP + 22, x,
                 PLOT_BOTTOM);
  tf_text_printf(t, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>\n", x, top);
  bool left_half = x < (PLOT_LEFT + PLOT_RIGHT) / 2.0;
  tf_text_printf(t, "<text id=\"peak-label\" class=\"peak-label halo\" x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">",
                 left_half ? x + 6 : x - 6, PLOT_TOP + 34, left_half ? "start" : "end");
  tf_report_peak_label(t, p->plan, p->timeline);
  tf_text_printf(t, "</text>\n");
}

static void draw_axes(const picture *p, int32_t width) {
  tf_text *t = p->text;
  tf_text_printf(t, "<path class=\"axis\" d=\"M%d %dV%dH%d\"/>\n", PLOT_LEFT, PLOT_TOP, PLOT_BOTTOM, PLOT_RIGHT);
  tf_text_printf(t, "<text class=\"axis-label\" x=\"%d\" y=\"%d\">plan step</text>\n", (PLOT_LEFT + PLOT_RIGHT) / 2,
                 PLOT_BOTTOM + 40);
  tf_text_printf(t, "<text class=\"axis-label\" transform=\"translate(%d %d) rotate(-90)\">bytes in use</text>\n",
                 PLOT_LEFT - 72, (PLOT_TOP + PLOT_BOTTOM) / 2);
  const tf_plan *plan = p->plan;
  tf_text_printf(t, "<text class=\"caption\" x=\"%d\" y=\"%d\">", PLOT_LEFT - 60, PLOT_BOTTOM + 64);
  if (plan->micro_steps < plan->n_steps)
    tf_text_printf(
        t, "steps [0, %" PRId32 ") run %" PRId32 " time%s per training step, steps [%" PRId32 ", %" PRId32 ") once",
        plan->micro_steps, plan->accumulate, plan->accumulate == 1 ? "" : "s", plan->micro_steps, plan->n_steps);
  else
    tf_text_printf(t, "steps [0, %" PRId32 ") run %" PRId32 " time%s per %s", plan->n_steps, plan->accumulate,
                   plan->accumulate == 1 ? "" : "s", plan->training ? "training step" : "batch");
  if (width > 1)
    tf_text_printf(t, "; each x point shows the most bytes of %" PRId32 " consecutive steps", width);
  tf_text_printf(t, "</text>\n");
}

static void legend_swatch(tf_text *t, int y, const char *color, const char *label, const char *value) {
  tf_text_printf(
      t, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/>\n",
      LEGEND_LEFT, y - 11, color);
  tf_text_printf(t, "<text x=\"%d\" y=\"%d\">%s</text>", LEGEND_LEFT + 22, y, label);
  if (value)
    tf_text_printf(t, "<text class=\"legend-value\" x=\"%d\" y=\"%d\">%s</text>", WIDTH - 12, y, value);
  tf_text_printf(t, "\n");
}

static void legend_line(tf_text *t, int y, const char *line_class, const char *label) {
  tf_text_printf(t, "<line class=\"%s\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", line_class, LEGEND_LEFT, y - 4,
                 LEGEND_LEFT + 14, y - 4);
  tf_text_printf(t, "<text x=\"%d\" y=\"%d\">", LEGEND_LEFT + 22, y);
  tf_text_append(t, label, strlen(label));
  tf_text_printf(t, "</text>\n");
}

static void draw_legend(const picture *p) {
  tf_text *t = p->text;
  const tf_timeline *tl = p->timeline;
  char value[64], label[160];
  int y = PLOT_TOP + 4;
  tf_text_printf(
      t, "<g class=\"legend\">\n<text class=\"legend-title\" x=\"%d\" y=\"%d\">bytes in use, top to bottom</text>\n",
      LEGEND_LEFT, y);
  y += 24;
  for (int band = TF_BAND_COUNT - 1; band >= 0; band--, y += 22) {
    if (band >= TF_TIMELINE_PERSISTENT_BANDS) {
      int64_t at_peak = 0;
      if (p->peak_step >= 0)
        at_peak = band == TF_BAND_WORKSPACE ? tl->workspace_bytes[p->peak_step] : tl->activation_bytes[p->peak_step];
      char bytes[32];
      snprintf(value, sizeof(value), "%s at peak", human(at_peak, bytes, sizeof(bytes)));
    } else {
      human(tl->persistent[band], value, sizeof(value));
    }
    legend_swatch(t, y, band_colors[band], band_labels[band], value);
  }
  y += 8;
  char bytes[32];
  snprintf(label, sizeof(label), "peak step (%s in use)", human(p->peak_total, bytes, sizeof(bytes)));
  legend_line(t, y, "peak", label);
  y += 22;
  snprintf(label, sizeof(label), "plan total, allocated (%s)", human(p->total, bytes, sizeof(bytes)));
  legend_line(t, y, "total", label);
  y += 22;
  if (p->options->budget > 0) {
    snprintf(label, sizeof(label), "budget (%s)", human(p->options->budget, bytes, sizeof(bytes)));
    legend_line(t, y, "budget", label);
    y += 22;
  }
  y += 8;
  tf_text_printf(t, "<text class=\"legend-title\" x=\"%d\" y=\"%d\">phases (strip above the plot)</text>\n",
                 LEGEND_LEFT, y);
  y += 22;
  bool present[TF_PHASE_COUNT] = {false};
  for (int32_t s = 0; s < p->plan->n_steps; s++)
    if ((unsigned)p->plan->steps[s].phase < TF_PHASE_COUNT)
      present[p->plan->steps[s].phase] = true;
  for (int phase = 0; phase < TF_PHASE_COUNT; phase++) {
    if (!present[phase])
      continue;
    int32_t steps = 0;
    for (int32_t s = 0; s < p->plan->n_steps; s++)
      steps += p->plan->steps[s].phase == (tf_phase)phase;
    snprintf(value, sizeof(value), "%" PRId32 " step%s", steps, steps == 1 ? "" : "s");
    legend_swatch(t, y, phase_colors[phase], tf_phase_name((tf_phase)phase), value);
    y += 22;
  }
  tf_text_printf(t, "</g>\n");
}

static const char *const style_sheet =
    "<style>\n"
    ".tf-timeline text{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:12px;fill:#222}\n"
    ".tf-timeline .title{font-size:16px;font-weight:bold}\n"
    ".tf-timeline .subtitle,.tf-timeline .caption{font-size:12px;fill:#555}\n"
    ".tf-timeline .tick-y{text-anchor:end;font-size:11px}\n"
    ".tf-timeline .tick-x{text-anchor:middle;font-size:11px}\n"
    ".tf-timeline .axis-label{text-anchor:middle;font-size:13px}\n"
    ".tf-timeline .phase-label{text-anchor:middle;font-size:11px;fill:#666;font-style:italic}\n"
    ".tf-timeline .peak-label{font-weight:bold;fill:" PEAK_COLOR "}\n"
    ".tf-timeline .legend-title{font-weight:bold}\n"
    ".tf-timeline .legend-value{text-anchor:end;fill:#555}\n"
    ".tf-timeline .halo{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}\n"
    ".tf-timeline .grid{stroke:#d8d8d8;stroke-width:1}\n"
    ".tf-timeline .tick,.tf-timeline .axis{stroke:#333;stroke-width:1;fill:none}\n"
    ".tf-timeline .boundary{stroke:#999;stroke-width:1;stroke-dasharray:2 3}\n"
    ".tf-timeline .band{stroke:none}\n"
    ".tf-timeline line.total{stroke:#333;stroke-width:1.5;stroke-dasharray:8 4}\n"
    ".tf-timeline line.budget{stroke:" BUDGET_COLOR ";stroke-width:2;stroke-dasharray:10 5}\n"
    ".tf-timeline line.peak{stroke:" PEAK_COLOR ";stroke-width:1.5}\n"
    ".tf-timeline circle.peak{fill:" PEAK_COLOR ";stroke:#fff;stroke-width:1}\n"
    "</style>\n";

tf_status tf_report_svg_element(tf_text *text, const tf_plan *plan, const tf_svg_options *options) {
  tf_svg_options defaults = {0};
  if (!options)
    options = &defaults;
  tf_timeline timeline;
  TF_RETURN_IF_ERROR(tf_timeline_create(plan, &timeline));
  int32_t max_points = options->max_points > 0 ? options->max_points : TF_TIMELINE_MAX_POINTS;
  int32_t *bins = malloc(sizeof(int32_t) * (size_t)max_points);
  if (!bins) {
    tf_timeline_destroy(&timeline);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "timeline: cannot allocate %" PRId32 " points", max_points);
  }
  int32_t width;
  int32_t n_bins = tf_timeline_bins(&timeline, max_points, bins, &width);

  picture p = {plan, &timeline, options, text, plan->n_steps > 0 ? plan->n_steps : 1, 0, tf_plan_device_total(plan),
               0,    -1};
  if (plan->report.peak_step >= 0 && plan->report.peak_step < plan->n_steps) {
    p.peak_step = plan->report.peak_step;
    p.peak_total = timeline.persistent_total + arena_live(&timeline, p.peak_step);
  }
  /* Room above the highest line for the phase and peak labels. */
  double highest = (double)(p.total > p.peak_total ? p.total : p.peak_total);
  if ((double)options->budget > highest)
    highest = (double)options->budget;
  p.y_max = highest > 0 ? highest * 1.15 : 1024;

  tf_text_printf(text,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"tf-timeline\" width=\"%d\" height=\"%d\" "
                 "viewBox=\"0 0 %d %d\" role=\"img\">\n",
                 WIDTH, HEIGHT, WIDTH, HEIGHT);
  tf_text_printf(text, "%s", style_sheet);
  tf_text_printf(text, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", WIDTH, HEIGHT);
  draw_header(&p);
  if (n_bins > 0)
    draw_phases(&p, n_bins, width);
  draw_grid(&p);
  draw_bands(&p, bins, n_bins, width);
  draw_lines(&p);
  draw_axes(&p, width);
  draw_legend(&p);
  if (n_bins == 0)
    tf_text_printf(text, "<text class=\"caption\" x=\"%d\" y=\"%d\">the plan has no steps</text>\n",
                   (PLOT_LEFT + PLOT_RIGHT) / 2, (PLOT_TOP + PLOT_BOTTOM) / 2);
  tf_text_printf(text, "</svg>\n");
  free(bins);
  tf_timeline_destroy(&timeline);
  return NULL;
}

tf_status tf_report_svg_save(const char *path, const tf_plan *plan, const tf_svg_options *options) {
  tf_text text = {0};
  tf_text_printf(&text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  return tf_text_save(&text, tf_report_svg_element(&text, plan, options), path, "SVG text");
}
