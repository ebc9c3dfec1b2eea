/* The `tightfit` command line as a library call, for programs and bindings that want exactly what
 * the CLI does (the same options, checks, messages and JSON): the Python package runs `check`,
 * `compile` and `report` through tf_cli_run_captured(). */
#ifndef TIGHTFIT_CLI_H
#define TIGHTFIT_CLI_H

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

#ifdef __cplusplus
}
#endif
#endif
