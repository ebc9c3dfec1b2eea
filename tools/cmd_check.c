/* `tightfit check F.tfg --budget 16GiB`: does the compiled plan fit? For CI: exit 0 when it fits,
 * 1 when it does not (with the shortfall and where the bytes go), 2 on bad input. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/check_run.h"

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

void tf_check_args_init(tf_check_args *check) {
  memset(check, 0, sizeof(*check));
  check->checked = TF_CATEGORIES_ALL;
}

bool tf_check_args_is_option(const char *name) {
  return strcmp(name, "--baseline") == 0 || strcmp(name, "--max-growth") == 0 || strcmp(name, "--max-growth-of") == 0;
}

tf_status tf_check_args_set(tf_check_args *check, const char *name, const char *value) {
  if (!tf_check_args_is_option(name))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown check option '%s'", name);
  if (!value)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s needs a value", name);
  if (strcmp(name, "--baseline") == 0) {
    check->baseline_path = value;
  } else if (strcmp(name, "--max-growth") == 0) {
    check->max_growth_text = value;
    if (!parse_percent(value, &check->max_growth))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "--max-growth takes a percentage with its sign, such as 5%% or 0.5%%, got '%s'", value);
  } else {
    check->max_growth_of = value;
    return tf_categories_parse(value, &check->checked);
  }
  return NULL;
}

static tf_status check_compile(tf_compile_args *args, const tf_check_args *check, tf_check_outcome *out) {
  if (args->budget < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "missing --budget SIZE, --gpu NAME or --device D");
  TF_RETURN_IF_ERROR(tf_compile_args_run(args, &out->plan, &out->search));
  out->fits = tf_plan_device_total(out->plan) <= args->budget;
  tf_categories_of_plan(out->plan, &out->current);
  if (!check->baseline_path)
    return NULL;
  TF_RETURN_IF_ERROR(tf_categories_check_same_model(check->baseline_path, &out->baseline, &out->current));
  out->grew = tf_categories_failed(&out->baseline, &out->current, check->max_growth, check->checked) != 0;
  return NULL;
}

tf_status tf_check_run(tf_compile_args *args, const tf_check_args *check, tf_check_outcome *out) {
  memset(out, 0, sizeof(*out));
  if ((check->max_growth_text || check->max_growth_of) && !check->baseline_path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s %s needs --baseline FILE (the result it is compared with)",
                         check->max_growth_text ? "--max-growth" : "--max-growth-of",
                         check->max_growth_text ? check->max_growth_text : check->max_growth_of);
  /* The baseline is read first: a bad file fails in milliseconds, before any compile. */
  if (check->baseline_path)
    TF_RETURN_IF_ERROR(tf_categories_read(check->baseline_path, &out->baseline));
  TF_RETURN_IF_ERROR(tf_compile_args_resolve(args));
  tf_status status = check_compile(args, check, out);
  if (status) {
    tf_plan_destroy(out->plan);
    out->plan = NULL;
  }
  return status;
}

static const char *remat_name(const tf_compile_args *args, const tf_check_outcome *o) {
  static const char *const names[] = {"none", "checkpoints", "auto"};
  return args->global_batch > 0 ? names[o->search.remat] : names[args->options.remat];
}

static const char *precision_name(const tf_plan *plan) {
  static const char *const names[] = {"f32", "bf16", "f16"};
  const tf_precision stored = plan->training_config.precision;
  return (int)stored >= 0 && stored <= TF_PRECISION_F16 ? names[stored] : "?";
}

/* The optimizer a training plan updates with: "sgd", "adamw", "adamw8bit" (the search may choose the last). */
static const char *optimizer_name(const tf_plan *plan) {
  static const char *const names[] = {"none", "sgd", "adamw", "adamw8bit"}; /* tf_optimizer's order */
  const tf_optimizer optimizer = plan->training_config.optimizer;
  return (int)optimizer >= 0 && optimizer <= TF_OPTIMIZER_ADAMW8BIT ? names[optimizer] : "?";
}

/* What the search added to make the plan fit, for the verdict's line. */
static const char *fallbacks_of(const tf_check_outcome *o, char *text, size_t size) {
  const bool eight = o->search.optimizer == TF_OPTIMIZER_ADAMW8BIT, lora = o->search.lora_rank > 0;
  const bool host = o->plan->n_host_steps > 0;
  if (!eight && !lora && !host)
    return "";
  snprintf(text, size, ", with %s%s%s%s%s%s%s", eight ? "8-bit AdamW state (--allow-optimizer)" : "",
           eight && (host || lora) ? " and " : "", host ? "the " : "", host ? tf_plan_host_contents(o->plan) : "",
           host ? " in host memory (--offload)" : "", host && lora ? " and " : "",
           lora ? "LoRA adapters (--allow-lora)" : "");
  return text;
}

void tf_check_json(const tf_compile_args *args, const tf_check_args *check, const tf_check_outcome *o, tf_json *j) {
  const tf_plan *plan = o->plan;
  tf_json_string(j, "graph", args->graph_path);
  tf_json_string(j, "assumed", args->target_note);
  tf_json_bool(j, "target_given", args->target_given);
  tf_json_bool(j, "fits", o->fits);
  tf_json_int(j, "budget_bytes", args->budget);
  tf_json_int(j, "shortfall_bytes", o->fits ? 0 : tf_plan_device_total(plan) - args->budget);
  tf_json_int(j, "micro_batch", plan->micro_batch);
  tf_json_int(j, "accumulate", plan->accumulate);
  tf_json_int(j, "global_batch", plan->global_batch);
  tf_json_string(j, "remat", remat_name(args, o));
  tf_json_string(j, "precision", precision_name(plan));
  if (args->global_batch > 0) {
    tf_json_int(j, "configurations_tried", o->search.tried);
    tf_json_double(j, "estimated_seconds_per_step", o->search.seconds_per_step);
    tf_json_int(j, "loss_chunk_rows", o->search.loss_chunk_rows);
    tf_json_int(j, "lora_rank", o->search.lora_rank);
    tf_json_string(j, "optimizer", optimizer_name(o->plan));
  }
  tf_compile_args_print_memory(plan, j);
  tf_categories_json(&o->current, j);
  if (check->baseline_path)
    tf_categories_print_diff(check->baseline_path, &o->baseline, &o->current, check->max_growth, check->checked, NULL,
                             j);
}

static void print_text(const tf_compile_args *args, const tf_check_outcome *o) {
  const tf_plan *plan = o->plan;
  const int64_t total = tf_plan_device_total(plan), budget = args->budget;
  char a[32], b[32], fallbacks[256];
  fprintf(tf_cli_out(), "%s: %s\n", args->graph_path, args->target_note);
  if (o->fits) {
    fprintf(tf_cli_out(),
            "%s: fits: %s (device total) of %s (%.1f%%), micro-batch %" PRId64
            " x %d accumulation = global batch %" PRId64 ", recompute %s, %s activations%s\n",
            args->graph_path, tf_cli_bytes(total, a, sizeof(a)), tf_cli_bytes(budget, b, sizeof(b)),
            100.0 * (double)total / (double)budget, plan->micro_batch, plan->accumulate, plan->global_batch,
            remat_name(args, o), precision_name(plan), fallbacks_of(o, fallbacks, sizeof(fallbacks)));
    tf_compile_args_print_memory(plan, NULL);
    if (args->global_batch > 0)
      fprintf(tf_cli_out(), "search (%d plans compiled, estimated %.3f s/step for the choice):\n%s", o->search.tried,
              o->search.seconds_per_step, o->search.summary);
    return;
  }
  tf_compile_args_print_shortfall(args, plan, NULL);
  fprintf(tf_cli_out(), "smallest: micro-batch %" PRId64 " x %d, recompute %s, %s activations; where the bytes go:\n",
          plan->micro_batch, plan->accumulate, remat_name(args, o), precision_name(plan));
  tf_compile_args_print_memory(plan, NULL);
  if (args->global_batch > 0)
    fprintf(tf_cli_out(), "search (%d plans compiled):\n%s", o->search.tried, o->search.summary);
}

/* tf_compile_args_take for check's own options. */
static bool take_check_option(tf_check_args *check, tf_cli_args *walk) {
  static const char *const names[] = {"--baseline", "--max-growth", "--max-growth-of"};
  const char *value;
  for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
    if (!tf_cli_args_option(walk, names[k], &value))
      continue;
    tf_status bad = walk->error ? NULL : tf_check_args_set(check, names[k], value);
    if (bad) {
      tf_cli_usage_error("check", "%s", tf_status_message(bad));
      tf_status_free(bad);
      walk->error = true;
    }
    return true;
  }
  return false;
}

int tf_cmd_check(int argc, char **argv) {
  tf_compile_args args;
  tf_compile_args_init(&args);
  tf_check_args check;
  tf_check_args_init(&check);
  tf_cli_args walk = tf_cli_args_start("check", argc, argv, help, NULL);
  while (tf_cli_args_next(&walk))
    if (!take_check_option(&check, &walk) && !tf_compile_args_take(&args, &walk))
      tf_cli_args_positional(&walk, "graph file", &args.graph_path);
  if (!tf_cli_args_done(&walk, args.graph_path != NULL, "missing the graph file"))
    return walk.exit_code;
  if (args.budget >= 0) /* before the compile, which may take a while */
    tf_compile_args_warn_target(&args, "check");
  tf_check_outcome o;
  tf_status status = tf_check_run(&args, &check, &o);
  if (status)
    return tf_cli_fail("check", status);
  if (args.json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_check_json(&args, &check, &o, &j);
    tf_json_end_object(&j);
  } else {
    print_text(&args, &o);
  }
  /* With --json the diff also goes to stderr, so a CI log shows it while stdout is the result file. */
  if (check.baseline_path)
    tf_categories_print_diff(check.baseline_path, &o.baseline, &o.current, check.max_growth, check.checked,
                             args.json ? tf_cli_err() : tf_cli_out(), NULL);
  tf_plan_destroy(o.plan);
  return o.fits && !o.grew ? TF_EXIT_OK : TF_EXIT_FAILED;
}
