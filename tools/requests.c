/* tightfit/cli.h's requests: compile, check, report and devices as library calls. The options go
 * through the commands' own parsers (tf_compile_args_set, tf_check_args_set) and the results through
 * their own JSON writers, into a stream in memory each call owns. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tightfit/cli.h"
#include "tools/check_run.h"
#include "tools/compile_args.h"

struct tf_request {
  tf_compile_args args; /* graph_path is set per call, on a copy */
  tf_check_args check;
  char **values; /* the option values, copied: args and check point into them */
  int32_t n_values, capacity;
};

/* Text printed into memory: open, print into `stream`, then close into *text. */
typedef struct memory_text {
  FILE *stream;
  char *text;
  size_t size;
} memory_text;

static tf_status memory_open(memory_text *t, const char *what) {
  memset(t, 0, sizeof(*t));
  t->stream = open_memstream(&t->text, &t->size);
  return t->stream ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %s", what);
}

/* Closes the stream and hands the text to *out (NULL, and an error, when memory ran out while
 * printing). */
static tf_status memory_close(memory_text *t, const char *what, char **out) {
  const bool failed = ferror(t->stream) != 0;
  fclose(t->stream);
  if (failed || !t->text) {
    free(t->text);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for %s", what);
  }
  *out = t->text;
  return NULL;
}

/* "warnings": what the command would have printed as warnings to stderr. */
static void json_warnings(tf_json *json, const tf_compile_args *args) {
  tf_json_begin_array(json, "warnings");
  const char *warning = tf_compile_args_target_warning(args);
  if (warning && args->budget >= 0)
    tf_json_string(json, NULL, warning);
  tf_json_end_array(json);
}

/* The members `members` writes, as one JSON object in *out. */
typedef void (*json_members)(tf_json *json, const void *context);

static tf_status json_object(json_members members, const void *context, char **out) {
  memory_text t;
  TF_RETURN_IF_ERROR(memory_open(&t, "the JSON result"));
  tf_json json = {t.stream, 0, {false}};
  tf_json_begin_object(&json, NULL);
  members(&json, context);
  tf_json_end_object(&json);
  return memory_close(&t, "the JSON result", out);
}

tf_status tf_request_create(tf_request **out) {
  *out = calloc(1, sizeof(**out));
  if (!*out)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a request");
  tf_compile_args_init(&(*out)->args);
  tf_check_args_init(&(*out)->check);
  return NULL;
}

void tf_request_destroy(tf_request *request) {
  if (!request)
    return;
  for (int32_t i = 0; i < request->n_values; i++)
    free(request->values[i]);
  free(request->values);
  free(request);
}

/* A copy of `value` the request keeps until it is destroyed. */
static tf_status keep_value(tf_request *request, const char *value, const char **kept) {
  if (request->n_values == request->capacity) {
    int32_t capacity = request->capacity ? 2 * request->capacity : 16;
    char **values = realloc(request->values, (size_t)capacity * sizeof(*values));
    if (!values)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a request's option");
    request->values = values;
    request->capacity = capacity;
  }
  char *copy = strdup(value);
  if (!copy)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory for a request's option");
  request->values[request->n_values++] = copy;
  *kept = copy;
  return NULL;
}

tf_status tf_request_set(tf_request *request, const char *name, const char *value) {
  if (!request || !name)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_request_set: NULL request or option name");
  const char *kept = NULL;
  if (value)
    TF_RETURN_IF_ERROR(keep_value(request, value, &kept));
  if (tf_check_args_is_option(name)) {
    tf_check_args before = request->check;
    tf_status status = tf_check_args_set(&request->check, name, kept);
    if (status)
      request->check = before;
    return status;
  }
  if (tf_compile_args_arity(name) < 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "unknown option '%s' (the options of tightfit compile and tightfit check, dashes included)",
                         name);
  /* The parser writes as it goes: on a bad value, the request keeps what it had. */
  tf_compile_args before = request->args;
  tf_status status = tf_compile_args_set(&request->args, name, kept);
  if (status)
    request->args = before;
  return status;
}

/* The request's compile options for one call on `graph_path` (a copy: the call resolves --gpu and
 * --device on it, so one request serves several threads). */
static tf_status call_args(const tf_request *request, const char *graph_path, tf_compile_args *args) {
  if (!request || !graph_path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "NULL request or graph path");
  *args = request->args;
  args->graph_path = graph_path;
  args->json = true;
  return NULL;
}

/* The error a plan over the budget is: what `tightfit compile` prints in words. */
static tf_status over_budget(const tf_compile_args *args, const tf_plan *plan) {
  const int64_t total = tf_plan_device_total(plan);
  return tf_status_new(TF_ERR_DOES_NOT_FIT,
                       "%s: the plan does not fit: device total %lld bytes, budget %lld, short by %lld (%s); try "
                       "--remat auto, a smaller micro-batch (--global-batch G searches both), or a larger budget",
                       args->graph_path, (long long)total, (long long)args->budget, (long long)(total - args->budget),
                       args->target_note);
}

typedef struct compile_result {
  const tf_compile_args *args;
  const tf_plan *plan;
  const char *plan_path;
} compile_result;

static void compile_members(tf_json *json, const void *context) {
  const compile_result *r = context;
  tf_compile_summary_json(r->args, r->plan, r->plan_path, json);
  json_warnings(json, r->args);
}

tf_status tf_request_compile(const tf_request *request, const char *graph_path, const char *plan_path, tf_plan **plan,
                             char **json) {
  if (plan)
    *plan = NULL;
  *json = NULL;
  tf_compile_args args;
  TF_RETURN_IF_ERROR(call_args(request, graph_path, &args));
  TF_RETURN_IF_ERROR(tf_compile_args_resolve(&args));
  tf_plan *compiled;
  tf_budget_result search;
  TF_RETURN_IF_ERROR(tf_compile_args_run(&args, &compiled, &search));
  tf_status status = NULL;
  if (args.budget >= 0 && tf_plan_device_total(compiled) > args.budget)
    status = over_budget(&args, compiled);
  if (!status && plan_path)
    status = tf_plan_save(compiled, plan_path);
  if (!status) {
    compile_result result = {&args, compiled, plan_path};
    status = json_object(compile_members, &result, json);
  }
  if (status || !plan)
    tf_plan_destroy(compiled);
  else
    *plan = compiled;
  return status;
}

typedef struct check_result {
  const tf_compile_args *args;
  const tf_check_args *check;
  const tf_check_outcome *outcome;
} check_result;

static void check_members(tf_json *json, const void *context) {
  const check_result *r = context;
  tf_check_json(r->args, r->check, r->outcome, json);
  json_warnings(json, r->args);
}

tf_status tf_request_check(const tf_request *request, const char *graph_path, char **json, bool *passed) {
  *json = NULL;
  *passed = false;
  tf_compile_args args;
  TF_RETURN_IF_ERROR(call_args(request, graph_path, &args));
  tf_check_outcome outcome;
  TF_RETURN_IF_ERROR(tf_check_run(&args, &request->check, &outcome));
  check_result result = {&args, &request->check, &outcome};
  tf_status status = json_object(check_members, &result, json);
  *passed = !status && outcome.fits && !outcome.grew;
  tf_plan_destroy(outcome.plan);
  return status;
}

tf_status tf_request_report(const char *plan_path, const char *budget, char **json) {
  *json = NULL;
  int64_t bytes = 0;
  if (!plan_path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_request_report: NULL plan path");
  if (budget && (!tf_cli_parse_bytes(budget, &bytes) || bytes <= 0))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "budget '%s' is not a size above 0 (e.g. 16GiB, 512MiB, 8GB)",
                         budget);
  tf_plan *plan;
  TF_RETURN_IF_ERROR(tf_plan_load(plan_path, &plan));
  memory_text t;
  tf_status status = memory_open(&t, "the report");
  if (!status) {
    tf_report_json(t.stream, plan_path, plan, bytes);
    status = memory_close(&t, "the report", json);
  }
  tf_plan_destroy(plan);
  return status;
}

tf_status tf_request_devices(char **json) {
  *json = NULL;
  memory_text t;
  TF_RETURN_IF_ERROR(memory_open(&t, "the device list"));
  tf_devices_json(t.stream);
  return memory_close(&t, "the device list", json);
}
