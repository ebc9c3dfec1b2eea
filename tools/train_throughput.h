/* What `tightfit train` says about where a run's time went (issue 41): the data feed's share of
 * the training time (the device waits while the host reads and uploads a batch: the feed is not
 * overlapped with the steps), and the plan's model FLOPs a step with the rate they ran at. */
#ifndef TIGHTFIT_TOOLS_TRAIN_THROUGHPUT_H
#define TIGHTFIT_TOOLS_TRAIN_THROUGHPUT_H

#include <stdint.h>
#include <stdio.h>

#include "tightfit/plan.h"

/* The plan's estimated floating-point operations of one optimizer step: the micro-batch block's
 * steps `accumulate` times, the optimizer block's once. */
double tf_tool_plan_step_flops(const tf_plan *plan);

/* One line: "throughput: data feed X ms of Y ms a step (P%: ...); model F TFLOP a step at R TFLOP/s"
 * for `steps` optimizer steps in `seconds`, `feed_seconds` of them in the feed, `upload_seconds` of
 * those handing batches to the device (tf_feed_upload_seconds). */
void tf_tool_train_print_throughput(FILE *out, const tf_plan *plan, int64_t steps, double seconds, double feed_seconds,
                                    double upload_seconds);

/* The same as JSON members (", \"feed_seconds\": ..."), appended to the summary object's text. */
void tf_tool_train_throughput_json(char *text, size_t size, const tf_plan *plan, int64_t steps, double seconds,
                                   double feed_seconds, double upload_seconds);

#endif
