/* A shared library that behaves as cuBLAS does: it keeps the `stdout` and `stderr` it sees when it
 * is loaded, and writes there later (cuBLAS flushes them at exit). test_cli_capture has it loaded
 * in the middle of a captured command and checks that what it kept are the process's streams. */
#include <stdio.h>

static FILE *kept_out, *kept_err;

__attribute__((constructor)) static void keep_streams(void) {
  kept_out = stdout;
  kept_err = stderr;
}

/* The streams seen at load. */
void stdio_probe_streams(FILE **out, FILE **err) {
  *out = kept_out;
  *err = kept_err;
}
