/* `tightfit run P.tfplan --data DIR`: inference. Runs the forward steps over every sample of DIR in
 * order, with weights from a checkpoint; prints the loss and accuracy when the data has labels and
 * writes the graph's outputs as .npy files. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "common/checked.h"
#include "tightfit/runtime.h"
#include "tools/cli.h"
#include "tools/evaluate.h"
#include "tools/finite_check.h"

/* The result line: the loss and the accuracy where the plan has them ("none" otherwise; JSON null).
 * A non-finite loss shows as "nan" / "inf" (JSON has no NaN: null, with "error" saying which). */
static void print_result(bool json, const char *plan_path, const char *data, const char *output, bool has_loss,
                         double loss, double accuracy) {
  char loss_text[32] = "none (the plan has no loss)", accuracy_text[48] = "none (no cross-entropy)";
  const char *nonfinite = !has_loss || isfinite(loss) ? NULL : isnan(loss) ? "nan" : loss < 0 ? "-inf" : "inf";
  if (nonfinite)
    snprintf(loss_text, sizeof(loss_text), "%s", json ? "null" : nonfinite);
  else if (has_loss)
    snprintf(loss_text, sizeof(loss_text), json ? "%.6f" : "%.4f", loss);
  else if (json)
    snprintf(loss_text, sizeof(loss_text), "null");
  if (!isnan(accuracy))
    snprintf(accuracy_text, sizeof(accuracy_text), json ? "%.6f" : "%.2f%%", json ? accuracy : 100 * accuracy);
  else if (json)
    snprintf(accuracy_text, sizeof(accuracy_text), "null");
  if (json)
    fprintf(tf_cli_out(), "{\"loss\": %s, \"accuracy\": %s%s%s%s}\n", loss_text, accuracy_text,
            nonfinite ? ", \"error\": \"the loss is " : "", nonfinite ? nonfinite : "", nonfinite ? "\"" : "");
  else
    fprintf(tf_cli_out(), "%s on %s: loss %s, accuracy %s%s%s\n", plan_path, data, loss_text, accuracy_text,
            output ? "; outputs in " : "", output ? output : "");
}

/* The error after a non-finite loss (exit 2): the first non-finite weight when there is one, else
 * what is left (an input or an activation beyond the float range). */
static tf_status nonfinite_loss(tf_session *session, const char *data, double loss) {
  const char *value = isnan(loss) ? "nan" : loss < 0 ? "-inf" : "inf";
  tf_status weights = tf_tool_check_finite(session, TF_TOOL_WEIGHTS, "the weights", "the loss is not finite");
  if (weights)
    return tf_status_prefix(weights, "%s: the loss is %s", data, value);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: the loss is %s (not finite); the weights are finite, so an input or an activation went "
                       "beyond the float range",
                       data, value);
}

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit run P.tfplan --data DIR [--weights CKPT.safetensors] [--output DIR] [--json]\n\n"
          "Runs the plan's forward steps on every sample of DIR (as `train` reads it), in order.\n"
          "Compile an inference plan with `tightfit compile --inference`; a training plan works too.\n\n"
          "options:\n"
          "  --data DIR       the inputs (and labels, for loss and accuracy)\n"
          "  --weights F      parameters from a checkpoint written by `train` (default: initialisers)\n"
          "  --weights-dir D  where the graph's safetensors files (`import`'s weights) are (default: the\n"
          "                   plan's folder, then the graph's folder when the plan was compiled)\n"
          "  --output DIR     write each graph output to DIR/<name>.npy (inference plans; DIR is created;\n"
          "                   bf16 outputs as float32)\n"
          "  --threads N      CPU threads (default 2)\n"
          "  --device D       cpu (default), vulkan:N or cuda:N (see `tightfit devices`)\n"
          "  --log-every M    when stderr is not a terminal, a progress line there every M batches\n"
          "                   (default 100; on a terminal, one every 2 seconds)\n"
          "  --json           machine-readable result (progress stays on stderr)\n");
}

int tf_cmd_run(int argc, char **argv) {
  const char *plan_path = NULL, *data = NULL, *weights = NULL, *output = NULL, *weights_dir = NULL;
  int64_t log_every = TF_TOOL_PROGRESS_EVERY;
  bool json = false;
  int32_t threads = 2, device = 0;
  char backend[32] = "cpu";
  tf_cli_args walk = tf_cli_args_start("run", argc, argv, help, &json);
  while (tf_cli_args_next(&walk)) {
    const char *v;
    if (tf_cli_args_option(&walk, "--data", &v)) {
      data = v;
    } else if (tf_cli_args_option(&walk, "--device", &v)) {
      if (!walk.error && !tf_backend_parse_device(v, backend, sizeof(backend), &device))
        return tf_cli_usage_error("run", "--device takes cpu, vulkan:N or cuda:N, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--weights", &v)) {
      weights = v;
    } else if (tf_cli_args_option(&walk, "--weights-dir", &v)) {
      weights_dir = v;
    } else if (tf_cli_args_option(&walk, "--log-every", &v)) {
      if (!walk.error && tf_parse_i64(v, 1, TF_CHECKED_EXACT_DOUBLE_MAX, &log_every) != TF_PARSE_OK)
        return tf_cli_usage_error("run", "--log-every takes a count of batches >= 1, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--output", &v)) {
      output = v;
    } else if (tf_cli_args_option(&walk, "--threads", &v)) {
      int64_t parsed = 0;
      if (!walk.error && tf_parse_i64(v, 1, 1024, &parsed) != TF_PARSE_OK)
        return tf_cli_usage_error("run", "--threads takes 1..1024, got '%s'", v);
      threads = (int32_t)parsed;
    } else {
      tf_cli_args_positional(&walk, "plan", &plan_path);
    }
  }
  tf_plan *plan = NULL;
  if (!tf_cli_args_done(&walk, plan_path != NULL, "missing the plan file") ||
      !tf_cli_args_done(&walk, data != NULL, "missing --data DIR") || !tf_cli_args_load_plan(&walk, plan_path, &plan))
    return walk.exit_code;
  tf_session_options options = tf_session_options_default();
  options.threads = threads;
  options.backend = backend;
  options.device = device;
  char folder[4096];
  options.weights_dir = weights_dir ? weights_dir : tf_cli_folder_of(plan_path, folder, sizeof(folder));
  tf_session *session = NULL;
  tf_status status = tf_session_create(plan, &options, &session);
  if (!status && weights)
    status = tf_session_load(session, weights);
  if (!status && weights)
    status = tf_tool_check_finite(session, TF_TOOL_WEIGHTS, weights, "refusing to run with non-finite weights");
  if (!status && !weights)
    status = tf_tool_check_initial_weights(session, options.weights_dir, "refusing to run with non-finite weights");
  if (!status && output && mkdir(output, 0755) != 0 && errno != EEXIST)
    status = tf_status_new(TF_ERR_IO, "%s: cannot create the output folder: %s", output, strerror(errno));
  double loss = 0, accuracy = 0;
  if (!status)
    status = tf_tool_evaluate(session, data, 0, output, "run", log_every, &loss, &accuracy);
  const bool has_loss = plan->loss >= 0;
  if (!status)
    print_result(json, plan_path, data, output, has_loss, loss, accuracy);
  if (!status && has_loss && !isfinite(loss))
    status = nonfinite_loss(session, data, loss);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status ? tf_cli_fail("run", status) : TF_EXIT_OK;
}
