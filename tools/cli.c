#include "tools/cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* This thread's streams from tf_cli_set_streams(), NULL for stdout and stderr. Per thread, and
 * never the process's `stdout` and `stderr` themselves: a library a command loads (cuBLAS, Mesa)
 * may keep those pointers, and would keep a captured stream after it is closed. */
static _Thread_local FILE *thread_out, *thread_err;

FILE *tf_cli_out(void) { return thread_out ? thread_out : stdout; }

FILE *tf_cli_err(void) { return thread_err ? thread_err : stderr; }

void tf_cli_set_streams(FILE *out, FILE *err) {
  thread_out = out;
  thread_err = err;
}

bool tf_cli_option(int argc, char **argv, int *i, const char *name, const char **value, bool *error) {
  const char *arg = argv[*i];
  size_t length = strlen(name);
  if (strncmp(arg, name, length) != 0)
    return false;
  if (arg[length] == '=') {
    *value = arg + length + 1;
    return true;
  }
  if (arg[length] != '\0')
    return false;
  if (*i + 1 >= argc) {
    fprintf(tf_cli_err(), "tightfit: option %s needs a value\n", name);
    *error = true;
    return true;
  }
  *value = argv[++*i];
  return true;
}

bool tf_cli_output_option(int argc, char **argv, int *i, const char **output, bool *error) {
  const char *value;
  if (!tf_cli_option(argc, argv, i, "-o", &value, error) && !tf_cli_option(argc, argv, i, "--output", &value, error))
    return false;
  if (!*error)
    *output = value;
  return true;
}

bool tf_cli_list_option(const char *command, int argc, char **argv, int *i, const char *name, const char **values,
                        int limit, int *count, bool *error) {
  const char *value;
  if (!tf_cli_option(argc, argv, i, name, &value, error))
    return false;
  if (*error)
    return true;
  if (*count == limit) {
    tf_cli_usage_error(command, "too many %s options (at most %d)", name, limit);
    *error = true;
    return true;
  }
  values[(*count)++] = value;
  return true;
}

bool tf_cli_positional(const char *command, const char *arg, const char *what, const char **slot) {
  if (*slot) {
    tf_cli_usage_error(command, "one %s at a time (got '%s' and '%s')", what, *slot, arg);
    return false;
  }
  *slot = arg;
  return true;
}

bool tf_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

tf_cli_args tf_cli_args_start(const char *command, int argc, char **argv, void (*help)(void), bool *json) {
  return (tf_cli_args){.command = command, .argc = argc, .argv = argv, .help = help, .json = json, .exit_code = -1};
}

bool tf_cli_args_next(tf_cli_args *a) {
  if (a->error && a->exit_code < 0)
    a->exit_code = TF_EXIT_USAGE;
  if (a->exit_code >= 0)
    return false;
  while (++a->i < a->argc) {
    const char *arg = a->argv[a->i];
    if (tf_cli_is_help(arg)) {
      a->help();
      a->exit_code = TF_EXIT_OK;
      return false;
    }
    if (!a->json || strcmp(arg, "--json") != 0)
      return true;
    *a->json = true;
  }
  return false;
}

bool tf_cli_args_option(tf_cli_args *a, const char *name, const char **value) {
  return tf_cli_option(a->argc, a->argv, &a->i, name, value, &a->error);
}

bool tf_cli_args_output(tf_cli_args *a, const char **output) {
  return tf_cli_output_option(a->argc, a->argv, &a->i, output, &a->error);
}

bool tf_cli_args_list(tf_cli_args *a, const char *name, const char **values, int limit, int *count) {
  return tf_cli_list_option(a->command, a->argc, a->argv, &a->i, name, values, limit, count, &a->error);
}

bool tf_cli_args_done(tf_cli_args *a, bool given, const char *missing) {
  if (a->exit_code < 0 && !given)
    a->exit_code = tf_cli_usage_error(a->command, "%s", missing);
  return a->exit_code < 0;
}

bool tf_cli_args_load_plan(tf_cli_args *a, const char *path, tf_plan **plan) {
  tf_status status = tf_plan_load(path, plan);
  if (status)
    a->exit_code = tf_cli_fail(a->command, status);
  return !status;
}

void tf_cli_args_positional(tf_cli_args *a, const char *what, const char **slot) {
  const char *arg = a->argv[a->i];
  if (arg[0] == '-' && !(a->dash_operand && arg[1] == '\0'))
    a->exit_code = tf_cli_usage_error(a->command, "unknown option '%s'", arg);
  else if (!tf_cli_positional(a->command, arg, what, slot))
    a->exit_code = TF_EXIT_USAGE;
}

int tf_cli_usage_error(const char *command, const char *fmt, ...) {
  fprintf(tf_cli_err(), "tightfit %s: ", command);
  va_list args;
  va_start(args, fmt);
  vfprintf(tf_cli_err(), fmt, args);
  va_end(args);
  fprintf(tf_cli_err(), "\n(run 'tightfit %s --help' for usage)\n", command);
  return TF_EXIT_USAGE;
}

int tf_cli_fail(const char *command, tf_status status) {
  tf_code code = tf_status_code(status);
  fprintf(tf_cli_err(), "tightfit %s: %s\n", command, tf_status_message(status));
  tf_status_free(status);
  if (code == TF_ERR_DOES_NOT_FIT)
    return TF_EXIT_FAILED;
  return TF_EXIT_USAGE;
}

const char *tf_cli_folder_of(const char *path, char *buf, size_t size) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(buf, size, ".");
  else if (slash == path)
    snprintf(buf, size, "/");
  else
    snprintf(buf, size, "%.*s", (int)(slash - path), path);
  return buf;
}

const char *tf_cli_bytes(int64_t bytes, char *buf, size_t size) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, size, "%" PRId64 " B", bytes);
    return buf;
  }
  double value = (double)bytes;
  int unit = -1;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    unit++;
  }
  snprintf(buf, size, "%.2f %s", value, units[unit]);
  return buf;
}

bool tf_cli_parse_bytes(const char *text, int64_t *bytes) {
  static const struct {
    const char *suffix;
    double scale;
  } units[] = {{"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
               {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  char *end;
  double value = strtod(text, &end);
  if (end == text || !(value >= 0))
    return false;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcmp(end, units[i].suffix) == 0) {
      double total = value * units[i].scale;
      if (!(total < 9.2e18))
        return false;
      *bytes = (int64_t)(total + 0.5);
      return true;
    }
  }
  return false;
}

const char *tf_cli_count(int64_t count, char *buf, size_t size) {
  char digits[32];
  snprintf(digits, sizeof(digits), "%" PRId64, count < 0 ? -count : count);
  size_t n = strlen(digits), used = 0;
  if (count < 0 && used + 1 < size)
    buf[used++] = '-';
  for (size_t i = 0; i < n && used + 2 < size; i++) {
    if (i && (n - i) % 3 == 0)
      buf[used++] = ',';
    buf[used++] = digits[i];
  }
  buf[used] = '\0';
  return buf;
}

/* ---- JSON ---- */

static void write_escaped(tf_json *j, const char *text) {
  fputc('"', j->out);
  for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(j->out, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(j->out, "\\u%04x", *p);
    else
      fputc(*p, j->out);
  }
  fputc('"', j->out);
}

static void json_key(tf_json *j, const char *key) {
  if (j->depth > 0 && j->need_comma[j->depth])
    fputc(',', j->out);
  if (j->depth > 0) {
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++)
      fputs("  ", j->out);
    j->need_comma[j->depth] = true;
  }
  if (key) {
    write_escaped(j, key);
    fputs(": ", j->out);
  }
}

static void json_open(tf_json *j, const char *key, char bracket) {
  json_key(j, key);
  fputc(bracket, j->out);
  if (j->depth < 31)
    j->depth++;
  j->need_comma[j->depth] = false;
}

static void json_close(tf_json *j, char bracket) {
  bool had_items = j->need_comma[j->depth];
  if (j->depth > 0)
    j->depth--;
  if (had_items) {
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++)
      fputs("  ", j->out);
  }
  fputc(bracket, j->out);
  if (j->depth == 0)
    fputc('\n', j->out);
}

void tf_json_begin_object(tf_json *j, const char *key) { json_open(j, key, '{'); }
void tf_json_end_object(tf_json *j) { json_close(j, '}'); }
void tf_json_begin_array(tf_json *j, const char *key) { json_open(j, key, '['); }
void tf_json_end_array(tf_json *j) { json_close(j, ']'); }

void tf_json_string(tf_json *j, const char *key, const char *value) {
  json_key(j, key);
  write_escaped(j, value);
}

void tf_json_int(tf_json *j, const char *key, int64_t value) {
  json_key(j, key);
  fprintf(j->out, "%" PRId64, value);
}

void tf_json_double(tf_json *j, const char *key, double value) {
  json_key(j, key);
  if (isfinite(value))
    fprintf(j->out, "%.17g", value);
  else
    fputs("null", j->out);
}

void tf_json_bool(tf_json *j, const char *key, bool value) {
  json_key(j, key);
  fputs(value ? "true" : "false", j->out);
}
