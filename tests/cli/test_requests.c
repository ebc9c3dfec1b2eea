/* tightfit/cli.h's requests, the calls the Python package makes: each returns what the command's
 * --json prints (compared with tf_cli_run_captured's output of the same command), bad options and
 * bad input come back as statuses with the command's message, nothing is written to the process's
 * stdout or stderr (both redirected to a file during the calls, which must stay empty), and calls on
 * several threads at once give what each gives alone. `test_requests devices` checks the device
 * list alone (see test_devices). */
#define _GNU_SOURCE /* mkdtemp */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tightfit/cli.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;
static char folder[256], graph_path[300], plan_path[300];

/* The process's stdout and stderr sent to a file while the requests run. */
typedef struct redirect {
  int saved_out, saved_err;
  char path[320];
} redirect;

static void redirect_begin(redirect *r) {
  snprintf(r->path, sizeof(r->path), "%s/streams.txt", folder);
  fflush(NULL);
  int file = open(r->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  r->saved_out = dup(1);
  r->saved_err = dup(2);
  dup2(file, 1);
  dup2(file, 2);
  close(file);
}

/* Restores the streams; returns the bytes written to them meanwhile. */
static long redirect_end(redirect *r) {
  fflush(NULL);
  dup2(r->saved_out, 1);
  dup2(r->saved_err, 2);
  close(r->saved_out);
  close(r->saved_err);
  struct stat info;
  return stat(r->path, &info) == 0 ? (long)info.st_size : -1;
}

static tf_request *request_of(const char *const *pairs, int n) {
  tf_request *request = NULL;
  CHECK_OK(&counts, tf_request_create(&request));
  for (int i = 0; request && i < n; i += 2)
    CHECK_OK(&counts, tf_request_set(request, pairs[i], pairs[i + 1]));
  return request;
}

/* The status's message contains `needle` and its code is `code`; frees it. */
static void expect_error(tf_status status, tf_code code, const char *needle, const char *what) {
  CHECK(&counts, status && tf_status_code(status) == code && strstr(tf_status_message(status), needle),
        "%s: expected code %d with '%s', got %d: %s", what, (int)code, needle, (int)tf_status_code(status),
        status ? tf_status_message(status) : "(ok)");
  tf_status_free(status);
}

/* `tightfit ARGS` through tf_cli_run_captured: its stdout (the caller frees it). */
static char *command_output(int argc, char **argv, int expected_code) {
  char *out = NULL, *err = NULL;
  int code = tf_cli_run_captured(argc, argv, &out, &err);
  CHECK(&counts, code == expected_code, "tightfit %s exited %d, expected %d: %s", argv[1], code, expected_code,
        err ? err : "");
  free(err);
  return out;
}

/* A request's JSON is the command's with its "warnings" member added last: cut it, compare. */
static void expect_same_json(const char *request_json, const char *command_json, const char *what) {
  const char *warnings = request_json ? strstr(request_json, ",\n  \"warnings\": [") : NULL;
  CHECK(&counts, warnings != NULL, "%s: no warnings member in %s", what, request_json ? request_json : "(null)");
  if (!warnings || !command_json)
    return;
  size_t head = (size_t)(warnings - request_json);
  const char *close = strrchr(request_json, '}');
  bool same = strncmp(request_json, command_json, head) == 0 && strcmp(command_json + head, close - 1) == 0;
  CHECK(&counts, same, "%s: the request's JSON differs from the command's:\n%s\n---\n%s", what, request_json,
        command_json);
}

static void test_compile(void) {
  const char *options[] = {"--set", "N=32", "--optimizer", "adamw", "--target", "cpu"};
  tf_request *request = request_of(options, 6);
  tf_plan *plan = NULL;
  char *json = NULL;
  redirect r;
  redirect_begin(&r);
  tf_status status = tf_request_compile(request, graph_path, plan_path, &plan, &json);
  long written = redirect_end(&r);
  CHECK_OK(&counts, status);
  CHECK(&counts, written == 0, "compile wrote %ld bytes to stdout/stderr", written);
  CHECK(&counts, plan && json && strstr(json, "\"micro_batch\": 32"), "compile: plan %p, JSON %s", (void *)plan,
        json ? json : "(null)");
  tf_plan *saved = NULL;
  CHECK_OK(&counts, tf_plan_load(plan_path, &saved));
  CHECK(&counts, plan && saved && tf_plan_total_bytes(plan) == tf_plan_total_bytes(saved),
        "the returned plan and the written one differ");
  char *argv[] = {"tightfit", "compile",  graph_path, "--set",  "N=32", "--optimizer",
                  "adamw",    "--target", "cpu",      "--json", "-o",   plan_path};
  char *command = command_output(12, argv, 0);
  expect_same_json(json, command, "compile");
  printf("compile: %s", json ? json : "(null)\n");
  free(command);
  free(json);
  tf_plan_destroy(plan);
  tf_plan_destroy(saved);
  /* over the budget: an error saying by how much, no plan */
  CHECK_OK(&counts, tf_request_set(request, "--budget", "1KiB"));
  plan = (tf_plan *)1;
  expect_error(tf_request_compile(request, graph_path, NULL, &plan, &json), TF_ERR_DOES_NOT_FIT,
               "does not fit: device total", "compile over the budget");
  CHECK(&counts, plan == NULL && json == NULL, "a refused compile returns no plan and no JSON");
  tf_request_destroy(request);
}

static void test_check(void) {
  const char *small[] = {"--set", "N=32", "--budget", "1KiB"};
  tf_request *request = request_of(small, 4);
  char *json = NULL;
  bool passed = true;
  redirect r;
  redirect_begin(&r);
  tf_status status = tf_request_check(request, graph_path, &json, &passed);
  long written = redirect_end(&r);
  CHECK_OK(&counts, status);
  CHECK(&counts, written == 0, "check wrote %ld bytes to stdout/stderr", written);
  CHECK(&counts, !passed && json && strstr(json, "\"fits\": false") && strstr(json, "no --target, --gpu or --device"),
        "check 1KiB: passed %d, JSON %s", passed, json ? json : "(null)");
  char *argv[] = {"tightfit", "check", graph_path, "--set", "N=32", "--budget", "1KiB", "--json"};
  char *command = command_output(8, argv, 1);
  expect_same_json(json, command, "check");
  free(command);
  free(json);
  tf_request_destroy(request);
  const char *roomy[] = {"--set", "N=32", "--budget", "1MiB", "--target", "cpu"};
  request = request_of(roomy, 6);
  CHECK_OK(&counts, tf_request_check(request, graph_path, &json, &passed));
  CHECK(&counts, passed && json && strstr(json, "\"fits\": true") && strstr(json, "\"warnings\": []"),
        "check 1MiB on the cpu target: passed %d, JSON %s", passed, json ? json : "(null)");
  free(json);
  tf_request_destroy(request);
}

static void test_bad_options(void) {
  tf_request *request = request_of(NULL, 0);
  expect_error(tf_request_set(request, "--budget", "12XB"), TF_ERR_INVALID_ARGUMENT, "'12XB' is not a positive size",
               "a bad size");
  expect_error(tf_request_set(request, "--warp", "9"), TF_ERR_INVALID_ARGUMENT, "unknown option '--warp'",
               "an unknown option");
  expect_error(tf_request_set(request, "--inference", "yes"), TF_ERR_INVALID_ARGUMENT, "takes no value",
               "a switch with a value");
  expect_error(tf_request_set(request, "--lr", NULL), TF_ERR_INVALID_ARGUMENT, "needs a value", "no value");
  expect_error(tf_request_set(request, "--max-growth", "5"), TF_ERR_INVALID_ARGUMENT, "with its sign",
               "a growth without %");
  char *json = NULL;
  bool passed = true;
  expect_error(tf_request_check(request, graph_path, &json, &passed), TF_ERR_INVALID_ARGUMENT, "missing --budget",
               "check without a budget");
  /* a refused value leaves the request as it was: the plan is the default optimizer's */
  CHECK_OK(&counts, tf_request_set(request, "--set", "N=4"));
  expect_error(tf_request_set(request, "--optimizer", "adam"), TF_ERR_INVALID_ARGUMENT, "unknown optimizer 'adam'",
               "an unknown optimizer");
  expect_error(tf_request_set(request, "--budget", "-5"), TF_ERR_INVALID_ARGUMENT, "not a positive size",
               "a negative budget");
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_request_compile(request, graph_path, NULL, &plan, &json));
  CHECK(&counts, plan && plan->training_config.optimizer != TF_OPTIMIZER_ADAMW && json && !strstr(json, "budget"),
        "after refused values the request compiles as before them: %s", json ? json : "(null)");
  free(json);
  tf_plan_destroy(plan);
  char missing[320];
  snprintf(missing, sizeof(missing), "%s/nope.tfg", folder);
  expect_error(tf_request_compile(request, missing, NULL, NULL, &json), TF_ERR_IO, "nope.tfg", "a missing graph");
  tf_request_destroy(request);
}

/* Run alone (`test_requests devices`): listing the devices loads the Vulkan driver, and lavapipe,
 * unloaded at exit, leaves a block no LeakSanitizer suppression can name, so this part runs in a
 * process of its own with the leak check off in the sanitizer build (tests/cli/CMakeLists.txt). */
static void test_devices(void) {
  char *list = NULL;
  redirect r;
  redirect_begin(&r);
  tf_status status = tf_request_devices(&list);
  long written = redirect_end(&r);
  CHECK_OK(&counts, status);
  CHECK(&counts, written == 0, "devices wrote %ld bytes to stdout/stderr", written);
  CHECK(&counts, list && strstr(list, "\"device\": \"cpu:0\""), "devices: %s", list ? list : "(null)");
  free(list);
}

static void test_report(void) {
  char *json = NULL;
  redirect r;
  redirect_begin(&r);
  tf_status report = tf_request_report(plan_path, "1MiB", &json);
  long written = redirect_end(&r);
  CHECK_OK(&counts, report);
  CHECK(&counts, written == 0, "report wrote %ld bytes to stdout/stderr", written);
  char *argv[] = {"tightfit", "report", plan_path, "--budget", "1MiB", "--json"};
  char *command = command_output(6, argv, 0);
  CHECK(&counts, json && command && strcmp(json, command) == 0, "report: the request's JSON differs:\n%s\n---\n%s",
        json ? json : "(null)", command ? command : "(null)");
  free(command);
  free(json);
  expect_error(tf_request_report(plan_path, "lots", &json), TF_ERR_INVALID_ARGUMENT, "'lots' is not a size",
               "report with a bad budget");
  expect_error(tf_request_report(graph_path, NULL, &json), TF_ERR_INVALID_INPUT, "mlp.tfg", "report of a graph");
}

/* One thread's work: a check and a compile at micro-batch n, their JSON joined. */
typedef struct job {
  int n;
  char *result;
} job;

static void *run_job(void *argument) {
  job *j = argument;
  char batch[32];
  snprintf(batch, sizeof(batch), "N=%d", j->n);
  const char *options[] = {"--set", batch, "--optimizer", "adamw", "--target", "cpu", "--budget", "1MiB"};
  tf_request *request = NULL;
  tf_status status = tf_request_create(&request);
  for (int i = 0; !status && i < 8; i += 2)
    status = tf_request_set(request, options[i], options[i + 1]);
  char *checked = NULL, *compiled = NULL;
  bool passed = false;
  if (!status)
    status = tf_request_check(request, graph_path, &checked, &passed);
  tf_status_free(tf_request_compile(request, graph_path, NULL, NULL, &compiled)); /* over budget: NULL */
  if (!status && checked && asprintf(&j->result, "%d %s %s", passed, checked, compiled ? compiled : "-") < 0)
    j->result = NULL;
  tf_status_free(status);
  free(checked);
  free(compiled);
  tf_request_destroy(request);
  return NULL;
}

static void test_threads(void) {
  enum { JOBS = 6 };
  const int batches[JOBS] = {1, 8, 32, 128, 512, 2048};
  job alone[JOBS], together[JOBS];
  for (int i = 0; i < JOBS; i++) {
    alone[i] = (job){batches[i], NULL};
    together[i] = (job){batches[i], NULL};
    run_job(&alone[i]);
  }
  pthread_t threads[JOBS];
  for (int i = 0; i < JOBS; i++)
    pthread_create(&threads[i], NULL, run_job, &together[i]);
  for (int i = 0; i < JOBS; i++)
    pthread_join(threads[i], NULL);
  int fitting = 0;
  for (int i = 0; i < JOBS; i++) {
    CHECK(&counts, alone[i].result && together[i].result && strcmp(alone[i].result, together[i].result) == 0,
          "N=%d: the result on a thread among %d differs from the same call alone", batches[i], JOBS);
    fitting += alone[i].result && alone[i].result[0] == '1';
    free(alone[i].result);
    free(together[i].result);
  }
  CHECK(&counts, fitting > 0 && fitting < JOBS, "the jobs should differ: %d of %d fit 1MiB", fitting, JOBS);
}

int main(int argc, char **argv) {
  snprintf(folder, sizeof(folder), "/tmp/tightfit-requests-XXXXXX");
  if (!mkdtemp(folder))
    return 2;
  snprintf(graph_path, sizeof(graph_path), "%s/mlp.tfg", folder);
  snprintf(plan_path, sizeof(plan_path), "%s/mlp.tfplan", folder);
  tf_graph *graph = NULL;
  CHECK_OK(&counts, tf_zoo_build("mlp", NULL, 0, &graph));
  CHECK_OK(&counts, tf_graph_save(graph, graph_path));
  tf_graph_destroy(graph);
  if (argc > 1 && strcmp(argv[1], "devices") == 0) {
    test_devices();
  } else {
    test_compile();
    test_check();
    test_bad_options();
    test_report();
    test_threads();
  }
  char command[400];
  snprintf(command, sizeof(command), "rm -rf '%s'", folder);
  if (system(command) != 0)
    printf("(could not remove %s)\n", folder);
  return tf_test_finish("requests", &counts);
}
