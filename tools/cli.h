/* Shared pieces of the `tightfit` command line: exit codes, option parsing, byte formatting, a
 * small JSON writer. Each command lives in its own tools/cmd_*.c file. */
#ifndef TIGHTFIT_TOOLS_CLI_H
#define TIGHTFIT_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tightfit/plan.h"
#include "tightfit/status.h"

enum { TF_EXIT_OK = 0, TF_EXIT_FAILED = 1, TF_EXIT_USAGE = 2 };

typedef int (*tf_command_fn)(int argc, char **argv);

int tf_cmd_zoo(int argc, char **argv);
int tf_cmd_inspect(int argc, char **argv);
int tf_cmd_dump(int argc, char **argv);
int tf_cmd_compile(int argc, char **argv);
int tf_cmd_check(int argc, char **argv);
int tf_cmd_report(int argc, char **argv);
int tf_cmd_train(int argc, char **argv);
int tf_cmd_run(int argc, char **argv);
int tf_cmd_devices(int argc, char **argv);
int tf_cmd_import(int argc, char **argv);
int tf_cmd_merge_lora(int argc, char **argv);

/* The JSON documents `tightfit report P --json` (with --budget when budget > 0) and `tightfit
 * devices --json` print, into `out` (tightfit/cli.h's library calls print into memory). */
void tf_report_json(FILE *out, const char *path, const tf_plan *plan, int64_t budget);
void tf_devices_json(FILE *out);

/* Where the commands print: stdout and stderr, or on a thread inside tf_cli_run_captured() the
 * streams it captures into (the commands never print to stdout or stderr by name). */
FILE *tf_cli_out(void);
FILE *tf_cli_err(void);
/* Sets this thread's tf_cli_out() and tf_cli_err(). */
void tf_cli_set_streams(FILE *out, FILE *err);

/* True when argv[*i] is `name` ("--set") given as "--set V" or "--set=V"; *value gets V and *i
 * advances past it. A missing value is reported and sets *error. */
bool tf_cli_option(int argc, char **argv, int *i, const char *name, const char **value, bool *error);
/* tf_cli_option for "-o" and "--output": true when argv[*i] is either; *output gets the value
 * (unchanged when it is missing, which sets *error). */
bool tf_cli_output_option(int argc, char **argv, int *i, const char **output, bool *error);
/* True when argv[*i] is the repeatable option `name` ("--set"); its value is appended to
 * values[*count], which holds at most `limit`. A missing value or one too many is reported as
 * `command`'s usage error and sets *error. */
bool tf_cli_list_option(const char *command, int argc, char **argv, int *i, const char *name, const char **values,
                        int limit, int *count, bool *error);
/* Takes `arg`, which matched none of `command`'s options, as its one positional argument `what`
 * ("graph file") into *slot. When *slot is already taken, prints the usage error and returns false. */
bool tf_cli_positional(const char *command, const char *arg, const char *what, const char **slot);
/* True when argv[i] is "-h" or "--help". */
bool tf_cli_is_help(const char *arg);

/* A walk over one command's arguments, doing what every command does the same way: -h/--help
 * prints the command's help and ends the walk (exit code TF_EXIT_OK), --json sets *json (for the
 * commands that take it), and an option that sets `error` (a missing or bad value, already
 * reported) ends it with TF_EXIT_USAGE. Usage:
 *   tf_cli_args a = tf_cli_args_start("run", argc, argv, help, &json);
 *   while (tf_cli_args_next(&a))
 *     if (tf_cli_args_option(&a, "--data", &data)) {} ... else tf_cli_args_positional(&a, "plan", &plan);
 *   if (!tf_cli_args_done(&a, plan != NULL, "missing the plan file")) return a.exit_code; */
typedef struct tf_cli_args {
  const char *command; /* "run", in messages */
  int argc;
  char **argv;
  void (*help)(void); /* prints the command's help */
  bool *json;         /* set by --json; NULL for a command that takes no --json */
  bool dash_operand;  /* a lone "-" is a positional argument, not an unknown option */
  int i;              /* argv[i] is the argument at hand */
  bool error;         /* set by an option's parser: the walk ends with TF_EXIT_USAGE */
  int exit_code;      /* the command's exit code when the walk ended early; -1 otherwise */
} tf_cli_args;

/* A walk over argv[1 .. argc) of `command`; json may be NULL. */
tf_cli_args tf_cli_args_start(const char *command, int argc, char **argv, void (*help)(void), bool *json);
/* Moves to the next argument that is the command's own; false at the end of the arguments and when
 * the walk ended early (then a->exit_code >= 0). */
bool tf_cli_args_next(tf_cli_args *a);
/* tf_cli_option, tf_cli_output_option and tf_cli_list_option on the argument at hand. */
bool tf_cli_args_option(tf_cli_args *a, const char *name, const char **value);
bool tf_cli_args_output(tf_cli_args *a, const char **output);
bool tf_cli_args_list(tf_cli_args *a, const char *name, const char **values, int limit, int *count);
/* What the argument at hand is when none of the command's options took it: an unknown option (a
 * usage error) when it starts with '-', else the command's one positional argument `what` ("graph
 * file") into *slot (tf_cli_positional). Ends the walk on an error. */
void tf_cli_args_positional(tf_cli_args *a, const char *what, const char **slot);
/* After the walk: true when it went through every argument and what the command requires (its
 * positional arguments, a required option) is `given`; otherwise false, with a->exit_code set (a
 * usage error saying `missing` when it is not given). Called once per requirement, in order. */
bool tf_cli_args_done(tf_cli_args *a, bool given, const char *missing);
/* After the walk: loads the plan at `path` into *plan (the caller destroys it); false when it cannot,
 * with the failure printed and a->exit_code set (tf_cli_fail). */
bool tf_cli_args_load_plan(tf_cli_args *a, const char *path, tf_plan **plan);
/* Prints "tightfit CMD: message" to stderr and returns TF_EXIT_USAGE. */
int tf_cli_usage_error(const char *command, const char *fmt, ...) TF_PRINTF(2, 3);
/* Prints a failed status as "tightfit CMD: message", frees it, and returns the exit code for it. */
int tf_cli_fail(const char *command, tf_status status);
/* The folder of `path` into buf ("." when it has none); returns buf. Sessions look up a plan's
 * external weights (from `tightfit import`) there. */
const char *tf_cli_folder_of(const char *path, char *buf, size_t size);
/* Formats bytes as "1.50 GiB" / "512 B" into buf. */
const char *tf_cli_bytes(int64_t bytes, char *buf, size_t size);
/* Parses a size: bytes, or a number with KB/MB/GB/TB (powers of 10) or KiB/MiB/GiB/TiB (powers of 2),
 * e.g. "14.7GiB"; false when malformed, negative or over int64. */
bool tf_cli_parse_bytes(const char *text, int64_t *bytes);
/* Formats an integer with thousands separators ("124,439,808"). */
const char *tf_cli_count(int64_t count, char *buf, size_t size);

/* A streaming JSON writer: commas and nesting are tracked for the caller. */
typedef struct tf_json {
  FILE *out;
  int depth;
  bool need_comma[32];
} tf_json;

void tf_json_begin_object(tf_json *j, const char *key); /* key NULL inside arrays / at top */
void tf_json_end_object(tf_json *j);
void tf_json_begin_array(tf_json *j, const char *key);
void tf_json_end_array(tf_json *j);
void tf_json_string(tf_json *j, const char *key, const char *value);
void tf_json_int(tf_json *j, const char *key, int64_t value);
void tf_json_double(tf_json *j, const char *key, double value);
void tf_json_bool(tf_json *j, const char *key, bool value);

#endif
