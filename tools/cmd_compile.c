/* `tightfit compile F.tfg -o P.tfplan`: a model graph -> a plan with exact memory. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tools/compile_args.h"

static void help(void) {
  fprintf(tf_cli_out(), "usage: tightfit compile F.tfg [options] [-o P.tfplan] [--json]\n\n"
                        "Derives the training graph (autodiff, optimizer, gradient accumulation), schedules it,\n"
                        "plans every buffer's memory and writes the plan. Prints the memory by region.\n\n"
                        "options:\n"
                        "  -o, --output P         write the plan to P (.tfplan)\n"
                        "  --json                 machine-readable summary\n");
  tf_compile_args_help();
  fprintf(tf_cli_out(),
          "\nWith a budget (--budget, --gpu or --device) the plan's device total must fit it: a plan that\n"
          "does not is not written, and the shortfall is printed (exit 1), as `tightfit check` does.\n"
          "\nexit codes: 0 compiled (and fits the budget, when one was given), 1 does not fit the budget,\n"
          "2 bad usage or a bad graph.\n");
}

/* The plan's note on the rewrites the default took (compile.c: "smallest plan: ..."), or NULL;
 * *length is its length (a line of the notes). */
static const char *smallest_note(const tf_plan *plan, int *length) {
  const char *notes = plan->report.notes ? plan->report.notes : "";
  const char *note = strstr(notes, "smallest plan:");
  if (!note)
    return NULL;
  const char *end = strchr(note, '\n');
  *length = end ? (int)(end - note) : (int)strlen(note);
  return note;
}

void tf_compile_summary_json(const tf_compile_args *args, const tf_plan *plan, const char *output, tf_json *j) {
  tf_json_string(j, "graph", args->graph_path);
  if (output)
    tf_json_string(j, "plan", output);
  tf_json_int(j, "steps", plan->n_steps);
  tf_json_int(j, "buffers", plan->n_buffers);
  tf_json_int(j, "micro_batch", plan->micro_batch);
  tf_json_int(j, "accumulate", plan->accumulate);
  tf_json_string(j, "matmul_math", tf_dtype_name(plan->matmul_math));
  int length = 0;
  const char *note = smallest_note(plan, &length);
  char rewrites[512];
  snprintf(rewrites, sizeof(rewrites), "%.*s", note ? length : 0, note ? note : "");
  tf_json_string(j, "rewrites", rewrites);
  if (args->budget >= 0) {
    tf_json_bool(j, "fits", true);
    tf_json_int(j, "budget_bytes", args->budget);
  }
  tf_compile_args_print_memory(plan, j);
}

/* A plan over its budget: the verdict, where the bytes go, and nothing written (exit 1). */
static int refuse_over_budget(const tf_compile_args *args, tf_plan *plan, const tf_budget_result *search) {
  if (args->json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_json_string(&j, "graph", args->graph_path);
    tf_json_string(&j, "assumed", args->target_note);
    tf_compile_args_print_shortfall(args, plan, &j);
    tf_json_bool(&j, "written", false);
    tf_compile_args_print_memory(plan, &j);
    tf_json_end_object(&j);
  } else {
    fprintf(tf_cli_out(), "%s: %s\n", args->graph_path, args->target_note);
    tf_compile_args_print_shortfall(args, plan, NULL);
    tf_compile_args_print_memory(plan, NULL);
    if (args->global_batch > 0)
      fprintf(tf_cli_out(), "search (%d plans compiled):\n%s", search->tried, search->summary);
    fprintf(tf_cli_out(),
            "no plan written: try --remat auto, a smaller micro-batch (--global-batch G searches both), or a "
            "larger budget\n");
  }
  tf_plan_destroy(plan);
  return TF_EXIT_FAILED;
}

int tf_cmd_compile(int argc, char **argv) {
  tf_compile_args args;
  tf_compile_args_init(&args);
  const char *output = NULL;
  tf_cli_args walk = tf_cli_args_start("compile", argc, argv, help, NULL);
  while (tf_cli_args_next(&walk))
    if (!tf_cli_args_output(&walk, &output) && !tf_compile_args_take(&args, &walk))
      tf_cli_args_positional(&walk, "graph file", &args.graph_path);
  if (!tf_cli_args_done(&walk, args.graph_path != NULL, "missing the graph file"))
    return walk.exit_code;
  tf_status status = tf_compile_args_resolve(&args);
  if (status)
    return tf_cli_fail("compile", status);
  if (args.budget >= 0)
    tf_compile_args_warn_target(&args, "compile");
  tf_plan *plan;
  tf_budget_result search;
  status = tf_compile_args_run(&args, &plan, &search);
  if (status)
    return tf_cli_fail("compile", status);
  if (args.budget >= 0 && tf_plan_device_total(plan) > args.budget)
    return refuse_over_budget(&args, plan, &search);
  if (output) {
    status = tf_plan_save(plan, output);
    if (status) {
      tf_plan_destroy(plan);
      return tf_cli_fail("compile", status);
    }
  }
  if (args.json) {
    tf_json j = {tf_cli_out(), 0, {false}};
    tf_json_begin_object(&j, NULL);
    tf_compile_summary_json(&args, plan, output, &j);
    tf_json_end_object(&j);
  } else {
    fprintf(tf_cli_out(), "%s: %s plan for '%s': %d steps, %d buffers, micro-batch %" PRId64 " x %d%s%s\n",
            args.graph_path, plan->training ? "training" : "inference", plan->graph_name, plan->n_steps,
            plan->n_buffers, plan->micro_batch, plan->accumulate, output ? ", written to " : "", output ? output : "");
    tf_compile_args_print_memory(plan, NULL);
    int length = 0;
    const char *note = smallest_note(plan, &length);
    if (note)
      fprintf(tf_cli_out(), "%.*s (--no-smallest: the plain plan)\n", length, note);
    if (plan->matmul_math != TF_F32)
      fprintf(tf_cli_out(),
              "matmul math: %s operands, f32 accumulation, on CUDA's tensor cores (cpu and vulkan compute in f32)\n",
              tf_dtype_name(plan->matmul_math));
    if (args.budget >= 0) {
      char a[32], b[32];
      fprintf(tf_cli_out(), "fits the budget: %s (device total) of %s; %s\n",
              tf_cli_bytes(tf_plan_device_total(plan), a, sizeof(a)), tf_cli_bytes(args.budget, b, sizeof(b)),
              args.target_note);
    }
    if (args.global_batch > 0)
      fprintf(tf_cli_out(), "search (%d plans compiled):\n%s", search.tried, search.summary);
  }
  tf_plan_destroy(plan);
  return TF_EXIT_OK;
}
