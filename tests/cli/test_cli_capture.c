/* tf_cli_run_captured() leaves the process's stdio alone: a library a command loads while its output
 * is captured (here the probe, loaded as the CUDA module by `tightfit devices`) keeps the real
 * stdout and stderr, not the capture's streams, which are freed when the call returns (cuBLAS kept
 * them and flushed them at exit: a use after free that crashed the Python package's test). The
 * capture itself still holds what the commands print. Usage: test_cli_capture PROBE.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tightfit/cli.h"

static int failures;

static void expect(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

static int run(const char *command, const char *arg, char **out, char **err) {
  char program[] = "tightfit";
  char *argv[] = {program, (char *)command, (char *)arg, NULL};
  return tf_cli_run_captured(arg ? 3 : 2, argv, out, err);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_cli_capture PROBE.so\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IONBF, 0); /* every line shown, should a check crash */
  setenv("TIGHTFIT_CUDA_MODULE", argv[1], 1);
  char *out = NULL, *err = NULL;
  int code = run("devices", NULL, &out, &err);
  expect(code == 0 && out && strstr(out, "cpu:0") && strstr(out, "not tightfit's CUDA module"),
         "devices, captured: the cpu listed, the probe refused as a CUDA module");
  free(out);
  free(err);

  void *probe = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  expect(probe != NULL, "the probe was loaded during the captured command");
  void (*streams)(FILE **, FILE **) = NULL;
  if (probe)
    *(void **)&streams = dlsym(probe, "stdio_probe_streams");
  FILE *kept_out = NULL, *kept_err = NULL;
  if (streams)
    streams(&kept_out, &kept_err);
  expect(kept_out == stdout && kept_err == stderr,
         "the probe, loaded inside the capture, kept the process's stdout and stderr");
  if (kept_out == stdout && kept_err == stderr)
    expect(fprintf(kept_err, "(the probe writes to the stderr it kept)\n") > 0 && fflush(kept_err) == 0,
           "the probe writes to what it kept");

  code = run("nosuch", NULL, &out, &err);
  expect(code == 2 && out && err && strstr(err, "unknown command 'nosuch'") && !strstr(out, "nosuch"),
         "a bad command: exit 2, its error captured from stderr, not stdout");
  free(out);
  free(err);
  code = run("zoo", "--help", &out, &err);
  expect(code == 0 && out && strstr(out, "usage: tightfit zoo") && err && !*err,
         "zoo --help: the usage captured from stdout, nothing on stderr");
  free(out);
  free(err);
  if (probe)
    dlclose(probe);
  printf("cli capture: %d failed\n", failures);
  return failures ? 1 : 0;
}
