/* One `train` per checkpoint folder (issue 49): two runs on one folder each overwrote the other's
 * latest.safetensors, and both exited 0. A run with --checkpoint DIR holds an exclusive flock(2) on
 * DIR/train.lock from before it loads anything until it exits; the file holds the holder's pid, for
 * the message that refuses a second run. The kernel drops the lock when its holder exits, however it
 * dies, so a lock file left by a dead run blocks nothing. */
#ifndef TIGHTFIT_TOOLS_CHECKPOINT_LOCK_H
#define TIGHTFIT_TOOLS_CHECKPOINT_LOCK_H

#include "tightfit/status.h"

/* Creates the folder `dir` if needed (one level, as saving does), takes the lock without waiting
 * and writes this process's pid into DIR/train.lock; *fd gets the lock's descriptor (-1 on error).
 * Errors: "DIR: checkpoint folder in use by another tightfit train (pid N) ..." when another process
 * holds it; "DIR: cannot use as the checkpoint folder: REASON" when it cannot be created or opened. */
tf_status tf_tool_checkpoint_lock(const char *dir, int *fd) TF_MUST_USE;

/* Releases the lock (closes `fd`; the lock file stays); -1 is allowed. */
void tf_tool_checkpoint_unlock(int fd);

#endif
