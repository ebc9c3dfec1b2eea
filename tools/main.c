/* The `tightfit` program: the command line of tightfit/cli.h.
 *
 * OpenBLAS (Debian's pthreads build) starts one server thread per core in its library constructor,
 * before main. tightfit never uses them (the CPU backend calls openblas_set_num_threads(1) and splits
 * products across its own threads), but under an address-space limit (`ulimit -v`) they cost the
 * program its life (issue 49): when their stacks do not fit, OpenBLAS calls exit() with its server
 * lock held and its atexit shutdown waits on that lock forever, deaf to SIGTERM; when they fit, their
 * stacks and malloc arenas leave too little room for the 128 MiB buffer of the first matrix product,
 * which OpenBLAS then retries forever (the 400 KiB mlp under `ulimit -v 250000`). OpenBLAS reads its
 * thread count from OPENBLAS_NUM_THREADS in that constructor, and an environment set before it is
 * lost (libc's own initialiser, which runs first, resets `environ` to the process's), so under a
 * limit the program re-executes itself once, before any library initialiser runs, with
 * OPENBLAS_NUM_THREADS=1 added (unless the user set OpenBLAS's count). Without a limit nothing
 * changes. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tightfit/cli.h"

static bool has_variable(char **envp, const char *prefix) {
  for (char **e = envp; e && *e; e++)
    if (strncmp(*e, prefix, strlen(prefix)) == 0)
      return true;
  return false;
}

/* Runs from .preinit_array: before libc's and OpenBLAS's initialisers, so only system calls and
 * plain memory here (no malloc, no stdio, no getenv). */
static void exec_with_one_blas_thread(int argc, char **argv, char **envp) {
  (void)argc;
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return;
  if (has_variable(envp, "OPENBLAS_NUM_THREADS=") || has_variable(envp, "GOTO_NUM_THREADS="))
    return;
  size_t count = 0;
  while (envp && envp[count])
    count++;
  static char *with_blas[4096]; /* static: no VLA, and the stack of a preinit function is the loader's */
  if (count + 2 > sizeof(with_blas) / sizeof(with_blas[0]))
    return;
  static char one_thread[] = "OPENBLAS_NUM_THREADS=1";
  for (size_t i = 0; i < count; i++)
    with_blas[i] = envp[i];
  with_blas[count] = one_thread;
  with_blas[count + 1] = NULL;
  execve("/proc/self/exe", argv, with_blas); /* returns only on failure: then run as we are */
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **,
                                                                              char **) = exec_with_one_blas_thread;

int main(int argc, char **argv) { return tf_cli_main(argc, argv); }
