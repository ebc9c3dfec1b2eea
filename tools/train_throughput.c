/* `tightfit train`'s throughput line (tools/train_throughput.h). */
#include "tools/train_throughput.h"

#include <inttypes.h>

double tf_tool_plan_step_flops(const tf_plan *plan) {
  double micro = 0, rest = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    *(s < plan->micro_steps ? &micro : &rest) += plan->steps[s].flops;
  return micro * (plan->accumulate > 0 ? plan->accumulate : 1) + rest;
}

void tf_tool_train_print_throughput(FILE *out, const tf_plan *plan, int64_t steps, double seconds, double feed_seconds,
                                    double upload_seconds) {
  if (steps <= 0 || seconds <= 0)
    return;
  const double step = seconds / (double)steps, flops = tf_tool_plan_step_flops(plan);
  const bool tera = flops >= 1e12;
  const double unit = tera ? 1e12 : 1e9;
  fprintf(
      out,
      "throughput: data feed %.2f ms of %.2f ms a step (%.1f%%: the device waits for each batch: %.2f ms handing it "
      "to the device, the rest its read where the background read has not finished); model %.4g %s a step at "
      "%.4g %s/s (the plan's estimate)\n",
      1e3 * feed_seconds / (double)steps, 1e3 * step, 100.0 * feed_seconds / seconds,
      1e3 * upload_seconds / (double)steps, flops / unit, tera ? "TFLOP" : "GFLOP", flops / step / unit,
      tera ? "TFLOP" : "GFLOP");
}

void tf_tool_train_throughput_json(char *text, size_t size, const tf_plan *plan, int64_t steps, double seconds,
                                   double feed_seconds, double upload_seconds) {
  if (steps <= 0 || seconds <= 0) {
    if (size > 0)
      text[0] = '\0';
    return;
  }
  snprintf(text, size,
           ", \"seconds\": %.6f, \"feed_seconds\": %.6f, \"feed_upload_seconds\": %.6f, \"feed_share\": %.6f, "
           "\"flops_per_step\": %.6g",
           seconds, feed_seconds, upload_seconds, feed_seconds / seconds, tf_tool_plan_step_flops(plan));
}
