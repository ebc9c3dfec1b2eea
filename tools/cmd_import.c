/* `tightfit import M.onnx -o M.tfg`: an ONNX model (e.g. from torch.onnx.export) as a tightfit
 * graph, its initializers in a safetensors file beside it. Both files are written under temporary
 * names and renamed only when the import succeeded, so a failed import leaves nothing behind. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tightfit/onnx.h"
#include "tools/cli.h"

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit import M.onnx -o M.tfg [--weights NAME] [--loss L [--ignore-index I]\n"
          "                       [--label-length S]] [--label NAME] [--set SYM=V,...] [--name NAME]\n"
          "                       [--narrow-float64] [--json]\n\n"
          "Imports an ONNX model as a graph. Its initializers become parameters whose values are written\n"
          "to a safetensors file beside the graph, which the graph references, so `compile` and `train`\n"
          "start from them. Dynamic axes become symbols named after their dim_param (N, T, ...).\n"
          "Unsupported operators are listed (name, count, first node) and nothing is written. A warning\n"
          "says what an eval-mode export changed (parameters merged through Identity, a BatchNorm folded\n"
          "into a convolution, a Linear's weight copied by constant folding).\n"
          "Operators and export tips: docs/import.md.\n\n"
          "options:\n"
          "  -o, --output F     the graph file to write (.tfg)\n"
          "  --weights NAME     the weights file's name, in the graph's folder (default: F's name with\n"
          "                     .safetensors for .tfg)\n"
          "  --loss L           add a label input and loss L on the first output, for training:\n"
          "                     cross_entropy (integer labels, the output's shape without its last axis),\n"
          "                     mse, bce_with_logits or l1 (float labels of the output's shape; l1:\n"
          "                     the mean absolute error, PyTorch's L1Loss); ctc (an output [N, T, C] of\n"
          "                     per-frame logits or log-probabilities, integer labels [N, S], each target\n"
          "                     ended by a negative label, blank 0: PyTorch's ctc_loss with reduction\n"
          "                     'mean'); or output: the first output already is the scalar loss (no\n"
          "                     label input)\n"
          "  --ignore-index I   cross_entropy: labels equal to I do not count (default -100)\n"
          "  --label-length S   ctc: the labels per sample (default T, the output's frames)\n"
          "  --label NAME       the label input's name (default labels)\n"
          "  --set SYM=V,...    the symbols' default values (default 1 each), e.g. --set N=8,T=64\n"
          "  --name NAME        the graph's name (default: the ONNX graph's)\n"
          "  --narrow-float64   compute a cast of data to DOUBLE, and a DOUBLE input or output, in f32\n"
          "                     (float64 constants always are; torch.onnx's TorchScript exporter writes\n"
          "                     them for torch.where(m, 0.0, -inf) of Python numbers and torch.nan_to_num,\n"
          "                     which PyTorch computes in f32); without it they are refused\n"
          "  --json             machine-readable result\n");
}

/* dirname(path) + "/" + name into out. */
static void beside(const char *path, const char *name, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  if (slash)
    snprintf(out, size, "%.*s/%s", (int)(slash - path), path, name);
  else
    snprintf(out, size, "%s", name);
}

static int finish(const char *onnx_path, const char *output, const char *weights_path, const tf_onnx_options *options,
                  bool json) {
  char graph_tmp[4400], weights_tmp[4400];
  snprintf(graph_tmp, sizeof(graph_tmp), "%s.import-%ld.tmp", output, (long)getpid());
  snprintf(weights_tmp, sizeof(weights_tmp), "%s.import-%ld.tmp", weights_path, (long)getpid());
  tf_onnx_options o = *options;
  o.weights_path = weights_tmp;
  tf_graph *g = NULL;
  tf_status status = tf_onnx_import(onnx_path, &o, &g);
  if (!status)
    status = tf_graph_save(g, graph_tmp);
  bool has_weights = access(weights_tmp, F_OK) == 0;
  if (!status && has_weights && rename(weights_tmp, weights_path) != 0)
    status = tf_status_new(TF_ERR_IO, "cannot rename %s to %s: %s", weights_tmp, weights_path, strerror(errno));
  if (!status && rename(graph_tmp, output) != 0)
    status = tf_status_new(TF_ERR_IO, "cannot rename %s to %s: %s", graph_tmp, output, strerror(errno));
  if (status) {
    remove(graph_tmp);
    remove(weights_tmp);
    tf_graph_destroy(g);
    return tf_cli_fail("import", status);
  }
  int64_t parameters = tf_graph_parameter_count(g);
  char *warnings = NULL;
  tf_status warned = tf_onnx_export_warnings(onnx_path, &warnings);
  if (warned) { /* the import read the same file a moment ago: only memory can fail here */
    fprintf(tf_cli_err(), "tightfit import: %s\n", tf_status_message(warned));
    tf_status_free(warned);
  }
  if (json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_json_string(&j, "onnx", onnx_path);
    tf_json_string(&j, "graph", output);
    tf_json_string(&j, "weights", has_weights ? weights_path : "");
    tf_json_string(&j, "name", tf_graph_name(g));
    tf_json_int(&j, "parameters", parameters);
    tf_json_int(&j, "nodes", tf_graph_node_count(g));
    tf_json_string(&j, "loss", tf_onnx_loss_name(options->loss));
    tf_json_int(&j, "frozen_batch_norms", tf_onnx_frozen_batch_norms(g));
    tf_json_int(&j, "batch_statistics_norms", tf_onnx_batch_statistics_norms(g));
    tf_json_begin_array(&j, "warnings");
    for (char *line = warnings, *end; line && *line; line = end + 1) {
      end = strchr(line, '\n');
      *end = '\0';
      tf_json_string(&j, NULL, line);
    }
    tf_json_end_array(&j);
    tf_json_begin_array(&j, "symbols");
    for (int32_t i = 0; i < tf_graph_symbol_count(g); i++) {
      const char *name;
      int64_t d, v;
      if (tf_graph_symbol_at(g, i, &name, &d, &v))
        tf_json_string(&j, NULL, name);
    }
    tf_json_end_array(&j);
    tf_json_end_object(&j);
    fprintf(tf_cli_out(), "\n");
  } else {
    char count[32], symbols[256] = "";
    size_t used = 0;
    for (int32_t i = 0; i < tf_graph_symbol_count(g) && used < sizeof(symbols); i++) {
      const char *name;
      int64_t d, v;
      if (tf_graph_symbol_at(g, i, &name, &d, &v))
        used += (size_t)snprintf(symbols + used, sizeof(symbols) - used, "%s%s=%" PRId64, i ? ", " : "", name, d);
    }
    fprintf(tf_cli_out(), "%s: imported '%s': %s parameters, %d nodes, symbols %s; loss %s\n", onnx_path,
            tf_graph_name(g), tf_cli_count(parameters, count, sizeof(count)), tf_graph_node_count(g),
            used ? symbols : "none", tf_onnx_loss_name(options->loss));
    const int32_t frozen = tf_onnx_frozen_batch_norms(g);
    if (frozen > 0)
      fprintf(tf_cli_out(),
              "%d BatchNormalization node%s frozen at %s running statistics (eval mode: scale and bias train, "
              "the statistics stay; docs/import.md)\n",
              frozen, frozen == 1 ? "" : "s", frozen == 1 ? "its" : "their");
    const int32_t batch = tf_onnx_batch_statistics_norms(g);
    if (batch > 0)
      fprintf(tf_cli_out(),
              "%d BatchNormalization node%s normalise%s with batch statistics (training mode: training updates the "
              "running statistics as PyTorch does, once per micro-batch; docs/import.md)\n",
              batch, batch == 1 ? "" : "s", batch == 1 ? "s" : "");
    for (char *line = warnings, *end; line && *line; line = end + 1) {
      end = strchr(line, '\n');
      fprintf(tf_cli_out(), "warning: %.*s\n", (int)(end - line), line);
    }
    fprintf(tf_cli_out(), "written to %s%s%s\n", output, has_weights ? ", weights to " : "",
            has_weights ? weights_path : "");
  }
  free(warnings);
  tf_graph_destroy(g);
  return TF_EXIT_OK;
}

int tf_cmd_import(int argc, char **argv) {
  const char *onnx_path = NULL, *output = NULL, *weights = NULL;
  tf_onnx_options options = tf_onnx_options_default();
  bool json = false;
  tf_cli_args walk = tf_cli_args_start("import", argc, argv, help, &json);
  while (tf_cli_args_next(&walk)) {
    const char *v;
    if (tf_cli_args_output(&walk, &output) || tf_cli_args_option(&walk, "--weights", &weights)) {
    } else if (tf_cli_args_option(&walk, "--loss", &v)) {
      if (!walk.error && !tf_onnx_loss_parse(v, &options.loss))
        return tf_cli_usage_error("import", "--loss '%s': use cross_entropy, mse, bce_with_logits, l1, ctc or output",
                                  v);
    } else if (tf_cli_args_option(&walk, "--label-length", &v)) {
      char *end;
      if (!walk.error) {
        errno = 0;
        options.label_length = strtoll(v, &end, 10);
        if (errno || end == v || *end || options.label_length < 1)
          return tf_cli_usage_error("import", "--label-length '%s' is not a positive integer", v);
      }
    } else if (tf_cli_args_option(&walk, "--ignore-index", &v)) {
      char *end;
      if (!walk.error) {
        errno = 0;
        options.ignore_index = strtoll(v, &end, 10);
        if (errno || end == v || *end)
          return tf_cli_usage_error("import", "--ignore-index '%s' is not an integer", v);
      }
    } else if (strcmp(argv[walk.i], "--narrow-float64") == 0) {
      options.narrow_float64 = true;
    } else if (tf_cli_args_option(&walk, "--label", &options.label_name) ||
               tf_cli_args_option(&walk, "--set", &options.symbol_defaults) ||
               tf_cli_args_option(&walk, "--name", &options.graph_name)) {
    } else {
      tf_cli_args_positional(&walk, "ONNX file", &onnx_path);
    }
  }
  if (!tf_cli_args_done(&walk, onnx_path != NULL, "which ONNX file? (tightfit import M.onnx -o M.tfg)") ||
      !tf_cli_args_done(&walk, output != NULL, "-o F.tfg is required"))
    return walk.exit_code;
  if (weights && strchr(weights, '/'))
    return tf_cli_usage_error("import", "--weights takes a file name, written in the graph's folder (got '%s')",
                              weights);
  char default_name[4096], weights_path[4200];
  if (!weights) {
    const char *slash = strrchr(output, '/');
    const char *base = slash ? slash + 1 : output;
    size_t length = strlen(base);
    bool tfg = length > 4 && strcmp(base + length - 4, ".tfg") == 0;
    snprintf(default_name, sizeof(default_name), "%.*s.safetensors", (int)(tfg ? length - 4 : length), base);
    weights = default_name;
  }
  beside(output, weights, weights_path, sizeof(weights_path));
  options.weights_ref = weights;
  return finish(onnx_path, output, weights_path, &options, json);
}
