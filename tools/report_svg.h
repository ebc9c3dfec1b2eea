/* The memory timeline of a plan (`tightfit report --svg`): bytes in use at every plan step, stacked
 * by category. The persistent regions (parameters + constants, gradients, optimizer state, io) are
 * constant bands at the bottom; the arena's live bytes ride on top, split into activations and
 * workspaces, each buffer counted at its size rounded up to the plan's alignment, so the arena part
 * of every step equals report.live_bytes[step]. */
#ifndef TIGHTFIT_TOOLS_REPORT_SVG_H
#define TIGHTFIT_TOOLS_REPORT_SVG_H

#include <stdint.h>

#include "tightfit/plan.h"
#include "tools/report.h"

typedef enum tf_timeline_band {
  TF_BAND_PARAMETERS = 0, /* the parameters region: parameters and constants */
  TF_BAND_GRADIENTS,
  TF_BAND_OPTIMIZER_STATE,
  TF_BAND_IO,
  TF_BAND_ACTIVATIONS, /* arena, live at the step */
  TF_BAND_WORKSPACE,   /* arena, live at the step */
  TF_BAND_COUNT
} tf_timeline_band;

#define TF_TIMELINE_PERSISTENT_BANDS 4 /* the bands before TF_BAND_ACTIVATIONS */
#define TF_TIMELINE_MAX_POINTS 2000    /* x points an SVG holds at most by default */

typedef struct tf_timeline {
  int32_t n_steps;
  int64_t persistent[TF_TIMELINE_PERSISTENT_BANDS]; /* region bytes, the same at every step */
  int64_t persistent_total;
  int64_t *activation_bytes; /* n_steps: arena activations live at each step (aligned sizes) */
  int64_t *workspace_bytes;  /* n_steps: arena workspaces live at each step (aligned sizes) */
} tf_timeline;

/* Stacks `plan` (a verified plan) step by step into *out; release it with tf_timeline_destroy(). */
tf_status tf_timeline_create(const tf_plan *plan, tf_timeline *out) TF_MUST_USE;
/* Frees what tf_timeline_create() allocated; a zeroed timeline is allowed. */
void tf_timeline_destroy(tf_timeline *timeline);

/* Groups the steps into consecutive bins `ceil(n_steps / max_bins)` steps wide and writes, for each
 * bin, the step with the most arena bytes live (the first such step on ties) to steps[]; steps must
 * hold max_bins entries. Returns the number of bins (<= max_bins; 0 without steps). *width gets the
 * bin width in steps. Drawing these steps keeps every peak, however many steps a plan has. */
int32_t tf_timeline_bins(const tf_timeline *timeline, int32_t max_bins, int32_t *steps, int32_t *width);

typedef struct tf_svg_options {
  const char *source; /* the plan's file name, for the title; NULL for none */
  int64_t budget;     /* > 0: draw a budget line at this many bytes and compare the total with it */
  int32_t max_points; /* x points at most; <= 0: TF_TIMELINE_MAX_POINTS */
} tf_svg_options;

/* Appends the timeline picture as one <svg> element (no XML declaration, so it can be inlined in
 * HTML as it is). Check text->failed afterwards. */
tf_status tf_report_svg_element(tf_text *text, const tf_plan *plan, const tf_svg_options *options) TF_MUST_USE;

/* Writes the picture as a standalone SVG document to `path`, atomically; errors name `path`. */
tf_status tf_report_svg_save(const char *path, const tf_plan *plan, const tf_svg_options *options) TF_MUST_USE;

/* "peak 2.81 GiB at step 517 (grad/h.3...)": the label of the peak marker, escaped for XML, into
 * text. The total counts the persistent regions plus the arena bytes live at the peak step. */
void tf_report_peak_label(tf_text *text, const tf_plan *plan, const tf_timeline *timeline);

#endif
