/* The numbers behind `tightfit report`, shared by its text, JSON, SVG and HTML outputs so that every
 * output shows the same figures: the memory table, the arena summary, the largest buffers at a step,
 * plus a small growable text buffer the SVG and HTML writers print into. */
#ifndef TIGHTFIT_TOOLS_REPORT_H
#define TIGHTFIT_TOOLS_REPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tightfit/plan.h"

#define TF_REPORT_PEAK_BUFFERS 8 /* the largest buffers shown at the peak step */

typedef struct tf_report_summary {
  int64_t total;       /* every region: what a session allocates */
  int64_t naive_total; /* the same regions with an arena that reuses nothing */
  int64_t saving;      /* naive_total - total (negative when padding outweighs reuse) */
  double ratio;        /* arena / lower bound; 0 without a lower bound */
  /* cast steps one training step runs (the micro-batch block's times plan->accumulate, then the
   * optimizer block's), per phase: where the plan converts between f32 and half */
  int64_t casts[TF_PHASE_COUNT], casts_total;
} tf_report_summary;

tf_report_summary tf_report_summarise(const tf_plan *plan);

/* The parameters of a training plan split by whether it trains them: trainable ones are those an
 * update step (sgd, adamw) writes; the plan leaves frozen ones as they are. */
typedef struct tf_report_parameters {
  int64_t trainable_bytes, frozen_bytes;
  int32_t trainable, frozen; /* buffers */
} tf_report_parameters;

tf_report_parameters tf_report_parameter_split(const tf_plan *plan);

/* Number of buffers with `role`. */
int32_t tf_report_count_role(const tf_plan *plan, tf_buffer_role role);

/* Arena buffers counted live at `step` (tf_plan_counted_steps: one buffer per memory), largest first
 * (ties by id), into ids[0..limit); *count says how many. */
tf_status tf_report_largest_live(const tf_plan *plan, int32_t step, int32_t *ids, int32_t limit,
                                 int32_t *count) TF_MUST_USE;

/* One row of the memory table: a region (depth 0) or a role inside it (depth 1, with its buffer
 * count); the last row is the total. */
typedef struct tf_report_row {
  const char *label;
  int depth;
  int64_t bytes;
  int32_t count; /* buffers, or -1 for region and total rows */
} tf_report_row;

#define TF_REPORT_MAX_ROWS (16 + TF_MAX_OVERHEAD_PARTS + 3)
/* Fills rows[0..TF_REPORT_MAX_ROWS) with the memory table; returns the number of rows. */
int tf_report_memory_rows(const tf_plan *plan, tf_report_row *rows);

/* "1.23 GFLOP" into buf. */
const char *tf_report_flops_text(double flops, char *buf, size_t size);
/* "f32 [4,16,512]" into buf. */
const char *tf_report_shape_text(const tf_plan_buffer *buffer, char *buf, size_t size);

/* A growable NUL-terminated string. An allocation failure sets `failed` and later appends do
 * nothing, so writers check once at the end. The owner frees `data`. */
typedef struct tf_text {
  char *data;
  size_t size, capacity;
  bool failed;
} tf_text;

void tf_text_append(tf_text *text, const char *data, size_t size);
void tf_text_printf(tf_text *text, const char *fmt, ...) TF_PRINTF(2, 3);
void tf_text_vprintf(tf_text *text, const char *fmt, va_list args) TF_PRINTF(2, 0);
/* Writes `text` to `path` atomically unless `status` (of building it, taken) failed or its allocation
 * did ("cannot allocate the `what`", e.g. "SVG text"); frees text->data. Returns the first failure. */
tf_status tf_text_save(tf_text *text, tf_status status, const char *path, const char *what);
/* Appends `value` escaped for XML/HTML text and attribute values; bytes that are not valid UTF-8
 * and control characters become '?', so names from any plan keep the document well-formed.
 * At most `max_chars` characters are kept (an ellipsis marks a cut); 0 means no limit. */
void tf_text_escaped(tf_text *text, const char *value, size_t max_chars);
/* Like tf_text_escaped() on the `length` bytes at `value` (which need no NUL). */
void tf_text_escaped_span(tf_text *text, const char *value, size_t length, size_t max_chars);

#endif
