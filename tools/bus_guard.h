/* A data file truncated while `train` reads it (issue 49): the .npy data is memory-mapped
 * (runtime/mapped_file.h), and reading a page past the file's new end raises SIGBUS, which killed
 * the run without a word. The guard catches that signal on the thread that armed it and jumps back
 * to the command's sigsetjmp; the command then reports the file, found from the faulting address in
 * /proc/self/maps, and exits 2. The guard's state is the CLI's (a signal handler's), never the
 * library's; each thread has its own guards (the data feed reads on a thread of its own, guarded by
 * tf_tool_bus_guarded through tf_feed_set_guard). Usage:
 *   sigjmp_buf jump;
 *   if (sigsetjmp(jump, 1)) { status = tf_tool_bus_error(); tf_tool_bus_guard_disarm(); ... }
 *   else { tf_tool_bus_guard_arm(&jump); ...; tf_tool_bus_guard_disarm(); } */
#ifndef TIGHTFIT_TOOLS_BUS_GUARD_H
#define TIGHTFIT_TOOLS_BUS_GUARD_H

#include <setjmp.h>

#include "tightfit/status.h"

/* Installs the SIGBUS handler: a bus error at a nonexistent file page (BUS_ADRERR) on the calling
 * thread jumps to `jump` with value 1; any other bus error keeps the default action (a core dump).
 * The previous handler comes back when no thread's guard is armed. */
void tf_tool_bus_guard_arm(sigjmp_buf *jump);

/* Ends the calling thread's guard that arm set. Safe to call when not armed. */
void tf_tool_bus_guard_disarm(void);

/* Runs read(context) on the calling thread under a guard of its own (nested in the thread's armed
 * one, which is back in force after): its status, or after a bus error tf_tool_bus_error's. The
 * data feed's guard (tf_feed_set_guard). */
tf_status tf_tool_bus_guarded(tf_status (*read)(void *context), void *context);

/* The error for the calling thread's bus error that jumped (call after the jump, while the
 * mappings still exist):
 * "PATH: the file shrank to N bytes while tightfit was reading it (byte B of it could not be read;
 * it held more when opened); ...". The caller owns the status. */
tf_status tf_tool_bus_error(void);

#endif
