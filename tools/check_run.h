/* `tightfit check`'s work, shared by the command (cmd_check.c) and tf_request_check(): its own
 * options (the baseline and the growth it allows), the compile and comparison, the JSON result. */
#ifndef TIGHTFIT_TOOLS_CHECK_RUN_H
#define TIGHTFIT_TOOLS_CHECK_RUN_H

#include "tools/baseline.h"
#include "tools/compile_args.h"

typedef struct tf_check_args {
  const char *baseline_path;   /* --baseline FILE, or NULL */
  const char *max_growth_text; /* --max-growth as given, or NULL */
  const char *max_growth_of;   /* --max-growth-of as given, or NULL */
  double max_growth;           /* the share --max-growth allows (0.05 for 5%) */
  unsigned checked;            /* the categories compared (TF_CATEGORIES_ALL unless --max-growth-of) */
} tf_check_args;

/* What a check found: the plan (the caller destroys it), the search, and the verdicts. */
typedef struct tf_check_outcome {
  tf_plan *plan;
  tf_budget_result search;
  tf_categories baseline, current;
  bool fits; /* the device total is within the budget */
  bool grew; /* with a baseline: a checked category grew past --max-growth */
} tf_check_outcome;

void tf_check_args_init(tf_check_args *check);
/* True when `name` is one of check's own options (each takes a value). */
bool tf_check_args_is_option(const char *name);
/* Sets check option `name` ("--baseline") to `value` (kept by pointer); a bad value is an error. */
tf_status tf_check_args_set(tf_check_args *check, const char *name, const char *value) TF_MUST_USE;
/* Reads the baseline, resolves and compiles `args` (graph_path set) and compares; errors for bad
 * input only: a plan that does not fit is an outcome. */
tf_status tf_check_run(tf_compile_args *args, const tf_check_args *check, tf_check_outcome *out) TF_MUST_USE;
/* The result `tightfit check --json` prints, as members of the object `json` is in. */
void tf_check_json(const tf_compile_args *args, const tf_check_args *check, const tf_check_outcome *outcome,
                   tf_json *json);

#endif
