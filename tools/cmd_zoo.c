/* `tightfit zoo`: list the presets with their parameter counts, or build one (with knob overrides)
 * and write it as a .tfg graph. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tightfit/zoo.h"
#include "tools/cli.h"

static void help(void) {
  fprintf(tf_cli_out(), "usage: tightfit zoo [--json]\n"
                        "       tightfit zoo NAME [--param KNOB=V ...] [-o F.tfg] [--json]\n\n"
                        "Without NAME: every preset with its parameter count.\n"
                        "With NAME: builds the preset (knobs overridden by --param), prints its knobs and parameter\n"
                        "count, and with -o writes the graph file.\n\n"
                        "options:\n"
                        "  --param KNOB=V   override an architecture knob, e.g. --param layers=6 (repeatable)\n"
                        "  -o, --output F   write the graph to F (.tfg)\n"
                        "  --json           machine-readable output\n");
}

static int list_presets(bool json) {
  tf_json j = {tf_cli_out(), 0, {false}};
  if (json)
    tf_json_begin_array(&j, NULL);
  else
    fprintf(tf_cli_out(), "%-14s %-6s %16s  %s\n", "preset", "family", "parameters", "description");
  for (int32_t i = 0; i < tf_zoo_preset_count(); i++) {
    const tf_zoo_preset *preset = tf_zoo_preset_at(i);
    tf_graph *g;
    tf_status status = tf_zoo_build(preset->name, NULL, 0, &g);
    if (status) {
      if (json)
        tf_json_end_array(&j);
      return tf_cli_fail("zoo", tf_status_prefix(status, "preset %s", preset->name));
    }
    int64_t parameters = tf_graph_parameter_count(g);
    tf_graph_destroy(g);
    if (json) {
      tf_json_begin_object(&j, NULL);
      tf_json_string(&j, "name", preset->name);
      tf_json_string(&j, "family", preset->family);
      tf_json_int(&j, "parameters", parameters);
      tf_json_string(&j, "description", preset->description);
      tf_json_end_object(&j);
    } else {
      char count[32];
      fprintf(tf_cli_out(), "%-14s %-6s %16s  %s\n", preset->name, preset->family,
              tf_cli_count(parameters, count, sizeof(count)), preset->description);
    }
  }
  if (json)
    tf_json_end_array(&j);
  return TF_EXIT_OK;
}

static int build_preset(const char *name, const char *const *overrides, int n_overrides, const char *output,
                        bool json) {
  tf_graph *g;
  tf_status status = tf_zoo_build(name, overrides, n_overrides, &g);
  if (status)
    return tf_cli_fail("zoo", status);
  if (output) {
    status = tf_graph_save(g, output);
    if (status) {
      tf_graph_destroy(g);
      return tf_cli_fail("zoo", status);
    }
  }
  tf_zoo_param params[64];
  int32_t n_params = 0;
  status = tf_zoo_params(name, overrides, n_overrides, params, 64, &n_params);
  if (status) {
    tf_graph_destroy(g);
    return tf_cli_fail("zoo", status);
  }
  if (n_params > 64)
    n_params = 64;
  int64_t parameters = tf_graph_parameter_count(g);
  if (json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_json_string(&j, "name", name);
    tf_json_int(&j, "parameters", parameters);
    tf_json_begin_object(&j, "knobs");
    for (int32_t i = 0; i < n_params; i++)
      tf_json_int(&j, params[i].name, params[i].value);
    tf_json_end_object(&j);
    tf_json_begin_array(&j, "overrides");
    for (int i = 0; i < n_overrides; i++)
      tf_json_string(&j, NULL, overrides[i]);
    tf_json_end_array(&j);
    if (output)
      tf_json_string(&j, "output", output);
    tf_json_end_object(&j);
  } else {
    char count[32];
    fprintf(tf_cli_out(), "%s: %s parameters, %d nodes%s%s\n", name, tf_cli_count(parameters, count, sizeof(count)),
            tf_graph_node_count(g), output ? ", written to " : "", output ? output : "");
    fprintf(tf_cli_out(), "knobs (as built; override with --param KNOB=V):\n");
    for (int32_t i = 0; i < n_params; i++)
      fprintf(tf_cli_out(), "  %-16s %10" PRId64 "  %s\n", params[i].name, params[i].value, params[i].help);
  }
  tf_graph_destroy(g);
  return TF_EXIT_OK;
}

int tf_cmd_zoo(int argc, char **argv) {
  const char *name = NULL, *output = NULL;
  const char *overrides[64];
  int n_overrides = 0;
  bool json = false;
  tf_cli_args walk = tf_cli_args_start("zoo", argc, argv, help, &json);
  while (tf_cli_args_next(&walk))
    if (!tf_cli_args_list(&walk, "--param", overrides, 64, &n_overrides) && !tf_cli_args_output(&walk, &output))
      tf_cli_args_positional(&walk, "preset", &name);
  if (walk.exit_code >= 0)
    return walk.exit_code;
  if (!name) {
    if (output || n_overrides)
      return tf_cli_usage_error("zoo", "--param and -o need a preset NAME");
    return list_presets(json);
  }
  return build_preset(name, overrides, n_overrides, output, json);
}
