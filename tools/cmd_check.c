/* `tightfit check F.tfg --budget 16GiB`: does the compiled plan fit? For CI: exit 0 when it fits,
 * 1 when it does not (with the shortfall and where the bytes go), 2 on bad input. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/baseline.h"
#include "tools/compile_args.h"

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit check F.tfg (--gpu NAME | --budget SIZE --target T | --device D) [options] [--json]\n\n"
          "Compiles the graph and compares the plan's device total (its regions plus the target's device\n"
          "overhead: context, libraries, CUDA graphs, allocation rounding, staging) with the budget. SIZE\n"
          "is bytes or a number with a unit: 512MiB, 14.7GiB, 16GB (GB = 10^9, GiB = 2^30). --gpu NAME\n"
          "takes a named card's memory and target; --device cuda:0 measures this machine's device. With\n"
          "--global-batch G, searches micro-batch, accumulation and recompute for the fastest plan that fits.\n\n"
          "In CI:  tightfit check model.tfg --gpu t4 --global-batch 32 --set T=1024 || exit 1\n\n"
          "options:\n"
          "  --json                 machine-readable result (with a \"categories\" object: parameters,\n"
          "                         gradients, optimizer_state, activations, workspace, inputs,\n"
          "                         device_overhead, total; what --baseline compares)\n"
          "  --baseline FILE        an earlier `check --json` result of the same graph and target: print\n"
          "                         the change per category, and exit 1 when any category, or the device\n"
          "                         total, grew by more than --max-growth (each failing one is named)\n"
          "  --max-growth P%%       the growth --baseline allows in each category and in the total\n"
          "                         (default 0%%; e.g. 5%%, 0.5%%)\n"
          "  --max-growth-of CATS   the categories --max-growth applies to, a comma list (default: all of\n"
          "                         them and the total; e.g. total, or parameters,activations)\n");
  tf_compile_args_help();
  fprintf(tf_cli_out(), "\nexit codes: 0 fits (and grew no more than allowed), 1 does not fit or a checked category\n"
                        "grew more than --max-growth over --baseline, 2 bad usage, a bad graph or a bad baseline.\n");
}

/* "5%", "0.5%" -> 0.05, 0.005; the sign is required so that "0.05" cannot silently mean 0.05%. */
static bool parse_percent(const char *text, double *share) {
  char *end;
  double value = strtod(text, &end);
  if (end == text || strcmp(end, "%") != 0 || !isfinite(value) || value < 0 || value > 1e6)
    return false;
  *share = value / 100.0;
  return true;
}

int tf_cmd_check(int argc, char **argv) {
  tf_compile_args args;
  tf_compile_args_init(&args);
  const char *baseline_path = NULL, *max_growth_text = NULL, *max_growth_of = NULL;
  double max_growth = 0.0;
  unsigned checked = TF_CATEGORIES_ALL;
  tf_cli_args walk = tf_cli_args_start("check", argc, argv, help, NULL);
  while (tf_cli_args_next(&walk)) {
    const char *v;
    if (tf_cli_args_option(&walk, "--baseline", &v)) {
      baseline_path = v;
    } else if (tf_cli_args_option(&walk, "--max-growth", &v)) {
      max_growth_text = v;
      if (!walk.error && !parse_percent(v, &max_growth))
        return tf_cli_usage_error("check",
                                  "--max-growth takes a percentage with its sign, such as 5%% or 0.5%%, got '%s'", v);
    } else if (tf_cli_args_option(&walk, "--max-growth-of", &v)) {
      max_growth_of = v;
      tf_status parsed = walk.error ? NULL : tf_categories_parse(v, &checked);
      if (parsed) {
        tf_cli_usage_error("check", "%s", tf_status_message(parsed));
        tf_status_free(parsed);
        return TF_EXIT_USAGE;
      }
    } else if (!tf_compile_args_take(&args, &walk)) {
      tf_cli_args_positional(&walk, "graph file", &args.graph_path);
    }
  }
  if (!tf_cli_args_done(&walk, args.graph_path != NULL, "missing the graph file"))
    return walk.exit_code;
  if ((max_growth_text || max_growth_of) && !baseline_path)
    return tf_cli_usage_error("check", "%s %s needs --baseline FILE (the result it is compared with)",
                              max_growth_text ? "--max-growth" : "--max-growth-of",
                              max_growth_text ? max_growth_text : max_growth_of);
  /* The baseline is read first: a bad file fails in milliseconds, before any compile. */
  tf_categories baseline, current;
  if (baseline_path) {
    tf_status read = tf_categories_read(baseline_path, &baseline);
    if (read)
      return tf_cli_fail("check", read);
  }
  tf_status status = tf_compile_args_resolve(&args);
  if (status)
    return tf_cli_fail("check", status);
  int64_t budget = args.budget;
  if (budget < 0)
    return tf_cli_usage_error("check", "missing --budget SIZE, --gpu NAME or --device D");
  tf_compile_args_warn_target(&args, "check");
  tf_plan *plan;
  tf_budget_result search;
  status = tf_compile_args_run(&args, &plan, &search);
  if (status)
    return tf_cli_fail("check", status);
  int64_t total = tf_plan_device_total(plan);
  bool fits = total <= budget;
  tf_categories_of_plan(plan, &current);
  bool grew = false;
  if (baseline_path) {
    status = tf_categories_check_same_model(baseline_path, &baseline, &current);
    if (status) {
      tf_plan_destroy(plan);
      return tf_cli_fail("check", status);
    }
    grew = tf_categories_failed(&baseline, &current, max_growth, checked) != 0;
  }
  static const char *const remat_names[] = {"none", "checkpoints", "auto"};
  const char *remat = args.global_batch > 0 ? remat_names[search.remat] : remat_names[args.options.remat];
  static const char *const precision_names[] = {"f32", "bf16", "f16"};
  const tf_precision stored = plan->training_config.precision;
  const char *precision = (int)stored >= 0 && stored <= TF_PRECISION_F16 ? precision_names[stored] : "?";
  char a[32], b[32];
  if (args.json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_json_string(&j, "graph", args.graph_path);
    tf_json_string(&j, "assumed", args.target_note);
    tf_json_bool(&j, "target_given", args.target_given);
    tf_json_bool(&j, "fits", fits);
    tf_json_int(&j, "budget_bytes", budget);
    tf_json_int(&j, "shortfall_bytes", fits ? 0 : total - budget);
    tf_json_int(&j, "micro_batch", plan->micro_batch);
    tf_json_int(&j, "accumulate", plan->accumulate);
    tf_json_int(&j, "global_batch", plan->global_batch);
    tf_json_string(&j, "remat", remat);
    tf_json_string(&j, "precision", precision);
    if (args.global_batch > 0) {
      tf_json_int(&j, "configurations_tried", search.tried);
      tf_json_double(&j, "estimated_seconds_per_step", search.seconds_per_step);
      tf_json_int(&j, "loss_chunk_rows", search.loss_chunk_rows);
      tf_json_int(&j, "lora_rank", search.lora_rank);
    }
    tf_compile_args_print_memory(plan, &j);
    tf_categories_json(&current, &j);
    if (baseline_path)
      tf_categories_print_diff(baseline_path, &baseline, &current, max_growth, checked, NULL, &j);
    tf_json_end_object(&j);
  } else if (fits) {
    fprintf(tf_cli_out(), "%s: %s\n", args.graph_path, args.target_note);
    fprintf(tf_cli_out(),
            "%s: fits: %s (device total) of %s (%.1f%%), micro-batch %" PRId64
            " x %d accumulation = global batch %" PRId64 ", recompute %s, %s activations%s\n",
            args.graph_path, tf_cli_bytes(total, a, sizeof(a)), tf_cli_bytes(budget, b, sizeof(b)),
            100.0 * (double)total / (double)budget, plan->micro_batch, plan->accumulate, plan->global_batch, remat,
            precision, search.lora_rank > 0 ? ", with LoRA adapters (--allow-lora)" : "");
    tf_compile_args_print_memory(plan, NULL);
    if (args.global_batch > 0)
      fprintf(tf_cli_out(), "search (%d plans compiled, estimated %.3f s/step for the choice):\n%s", search.tried,
              search.seconds_per_step, search.summary);
  } else {
    fprintf(tf_cli_out(), "%s: %s\n", args.graph_path, args.target_note);
    tf_compile_args_print_shortfall(&args, plan, NULL);
    fprintf(tf_cli_out(), "smallest: micro-batch %" PRId64 " x %d, recompute %s, %s activations; where the bytes go:\n",
            plan->micro_batch, plan->accumulate, remat, precision);
    tf_compile_args_print_memory(plan, NULL);
    if (args.global_batch > 0)
      fprintf(tf_cli_out(), "search (%d plans compiled):\n%s", search.tried, search.summary);
  }
  /* With --json the diff also goes to stderr, so a CI log shows it while stdout is the result file. */
  if (baseline_path)
    tf_categories_print_diff(baseline_path, &baseline, &current, max_growth, checked,
                             args.json ? tf_cli_err() : tf_cli_out(), NULL);
  tf_plan_destroy(plan);
  return fits && !grew ? TF_EXIT_OK : TF_EXIT_FAILED;
}
