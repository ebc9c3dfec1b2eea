/* The SIGBUS guard of `train` (bus_guard.h). The handler does only async-signal-safe work: it
 * records the faulting address and jumps; reading /proc/self/maps and stat-ing the file happen after
 * the jump, in tf_tool_bus_error. */
#define _GNU_SOURCE /* BUS_ADRERR, siginfo_t */
#include "tools/bus_guard.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The CLI's signal state. Each thread's innermost guard is its own (thread-local: `train`'s main
 * thread and the data feed's reading thread can be guarded at once); the handler is installed while
 * any guard is armed (`holders`, under `install_lock`). */
static _Thread_local sigjmp_buf *volatile armed_jump;
static _Thread_local bool arm_holds; /* tf_tool_bus_guard_arm's hold, released by disarm */
static _Thread_local void *volatile fault_address;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static int holders;
static struct sigaction previous;

static void on_bus_error(int signal_number, siginfo_t *info, void *context) {
  (void)context;
  sigjmp_buf *jump = armed_jump;
  if (jump && info->si_code == BUS_ADRERR) {
    fault_address = info->si_addr;
    armed_jump = NULL;
    siglongjmp(*jump, 1);
  }
  /* Not a read past a mapped file's end on a guarded thread: returning runs the faulting
   * instruction again, which now meets the default action (a core dump), as without the guard. */
  struct sigaction fallback;
  memset(&fallback, 0, sizeof(fallback));
  fallback.sa_handler = SIG_DFL;
  sigaction(signal_number, &fallback, NULL);
}

static void hold_handler(void) {
  pthread_mutex_lock(&install_lock);
  if (holders++ == 0) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous);
  }
  pthread_mutex_unlock(&install_lock);
}

static void release_handler(void) {
  pthread_mutex_lock(&install_lock);
  if (--holders == 0)
    sigaction(SIGBUS, &previous, NULL);
  pthread_mutex_unlock(&install_lock);
}

void tf_tool_bus_guard_arm(sigjmp_buf *jump) {
  fault_address = NULL;
  if (!arm_holds)
    hold_handler();
  arm_holds = true;
  armed_jump = jump;
}

void tf_tool_bus_guard_disarm(void) {
  armed_jump = NULL;
  if (arm_holds)
    release_handler();
  arm_holds = false;
}

tf_status tf_tool_bus_guarded(tf_status (*read)(void *context), void *context) {
  sigjmp_buf jump;
  sigjmp_buf *const outer = armed_jump; /* the thread's enclosing guard, back in force after */
  hold_handler();
  if (sigsetjmp(jump, 1)) {
    tf_status status = tf_tool_bus_error();
    armed_jump = outer;
    release_handler();
    return status;
  }
  fault_address = NULL;
  armed_jump = &jump;
  tf_status status = read(context);
  armed_jump = outer;
  release_handler();
  return status;
}

/* The mapped file holding `address` (from /proc/self/maps) into path[size], and the byte of the
 * file at that address; false when no file mapping holds it. */
static bool mapped_file_at(uintptr_t address, char *path, size_t size, uint64_t *byte) {
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps)
    return false;
  char line[4096 + 256];
  bool found = false;
  while (!found && fgets(line, sizeof(line), maps)) {
    uintptr_t start, end;
    unsigned long long offset;
    int name_at = 0;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %llx %*s %*u %n", &start, &end, &offset, &name_at) < 3 ||
        name_at == 0 || address < start || address >= end || line[name_at] != '/')
      continue;
    line[strcspn(line, "\n")] = '\0';
    snprintf(path, size, "%s", line + name_at);
    *byte = offset + (address - start);
    found = true;
  }
  fclose(maps);
  return found;
}

tf_status tf_tool_bus_error(void) {
  char path[4096];
  uint64_t byte = 0;
  if (!mapped_file_at((uintptr_t)fault_address, path, sizeof(path), &byte))
    return tf_status_new(TF_ERR_IO,
                         "a bus error at address %p, in no mapped file: a memory-mapped file shrank while tightfit "
                         "was reading it",
                         fault_address);
  struct stat now;
  if (stat(path, &now) != 0)
    return tf_status_new(TF_ERR_IO,
                         "%s: the file went away while tightfit was reading it (byte %" PRIu64
                         " could not be read: %s); a data file must stay as it is while train runs",
                         path, byte, strerror(errno));
  return tf_status_new(TF_ERR_IO,
                       "%s: the file shrank to %lld bytes while tightfit was reading it (byte %" PRIu64
                       " could not be read); a data file must stay as it is while train runs: restore it and "
                       "run again (with --resume from the last checkpoint, if any)",
                       path, (long long)now.st_size, byte);
}
