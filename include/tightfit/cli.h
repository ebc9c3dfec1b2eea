/* The `tightfit` command line as library calls: the whole command line (tf_cli_main,
 * tf_cli_run_captured), and for bindings (the Python package) its compile, check, report and devices
 * as functions: a request holds compile and check options under their command-line names, each call
 * returns the JSON document the command's --json prints, errors come back as a tf_status with the
 * command's message, and nothing is read from or written to any stream. A request may be used by
 * several threads at once; calls on different requests run in parallel. */
#ifndef TIGHTFIT_CLI_H
#define TIGHTFIT_CLI_H

#include <stdbool.h>

#include "tightfit/plan.h"
#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs `tightfit argv[1] ...` (argv[0] is ignored) and returns its exit code: 0 success, 1 a failed
 * check, 2 bad usage or input. Prints to this process's stdout and stderr. */
int tf_cli_main(int argc, char **argv);
/* Like tf_cli_main(), with what the command prints to stdout and stderr captured into *out and *err
 * (NUL-terminated; the caller frees both with free()); -1 (and NULL strings) when the capture
 * streams cannot be made. The process's own stdout and stderr stay as they are (a library the command
 * loads, such as cuBLAS, may keep them); what a library prints there itself is not captured. */
int tf_cli_run_captured(int argc, char **argv, char **out, char **err);

/* Compile and check options, as `tightfit compile` and `tightfit check` take them. */
typedef struct tf_request tf_request;

tf_status tf_request_create(tf_request **out) TF_MUST_USE;
void tf_request_destroy(tf_request *request);
/* Sets option `name` as the command line spells it, dashes included ("--budget", "16GiB"); `value`
 * is NULL for a switch ("--inference") and copied; a repeatable option ("--set", "--freeze") adds
 * one. An unknown name or a bad value is an error naming it, the request unchanged but for it. */
tf_status tf_request_set(tf_request *request, const char *name, const char *value) TF_MUST_USE;
/* `tightfit compile GRAPH [-o PLAN] --json`: *json (the caller frees it) is the summary; the plan is
 * written to plan_path when not NULL and returned in *plan when that is not NULL (the caller
 * destroys it). A plan over the request's budget is TF_ERR_DOES_NOT_FIT, saying by how much. */
tf_status tf_request_compile(const tf_request *request, const char *graph_path, const char *plan_path, tf_plan **plan,
                             char **json) TF_MUST_USE;
/* `tightfit check GRAPH --json`: *json is the result (a plan that does not fit is a result, not an
 * error); *passed is what the exit code says: it fits and grew no more than allowed. */
tf_status tf_request_check(const tf_request *request, const char *graph_path, char **json, bool *passed) TF_MUST_USE;
/* `tightfit report PLAN --json [--budget SIZE]` (budget NULL: none). */
tf_status tf_request_report(const char *plan_path, const char *budget, char **json) TF_MUST_USE;
/* `tightfit devices --json`. */
tf_status tf_request_devices(char **json) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
