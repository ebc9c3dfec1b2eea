/* Files written all or nothing: data goes to a temporary file beside the target, which is fsync'd
 * and renamed over the target only once complete, so a crash or an error never leaves a partial file
 * under the final name (the old file, if any, stays until the rename). Used by the .npy and
 * safetensors writers, checkpoints, plans and reports.
 *
 * What an output path may name:
 *   - a new file (its folder must exist), or an existing regular file, which is replaced (keeping its
 *     permission bits);
 *   - a symbolic link, followed (chains too, and a dangling link creates the file it names): the
 *     regular file at the end is what is replaced, the link stays a link. The temporary is created
 *     next to that file, so the rename never crosses file systems;
 *   - nothing else: a character or block device (/dev/null, /dev/full), a FIFO, a socket or a
 *     folder is refused (TF_ERR_IO, "not a regular file") and never replaced, not even by root. The
 *     target is checked when the file is opened and again just before the rename.
 *
 * Leftovers: the temporary is "<target>.tmp<pid>" ("<target>.tmp<pid>.<n>" when that name is
 * taken). A save killed before its rename (SIGKILL, power loss) leaves one behind. Each open removes,
 * beside the same target, every regular file of the same user named "<target>.tmp<pid>[.<n>]" whose
 * process no longer runs (kill(pid, 0) says ESRCH), so repeated killed saves leave at most one leftover per
 * target, and the next save removes it. Temporaries of running processes, this one included, are
 * kept: they may be saves in progress. (A process in another PID namespace sharing the folder looks
 * dead; its save then fails at the rename with an error, and its target is not damaged.) */
#ifndef TIGHTFIT_COMMON_ATOMIC_FILE_H
#define TIGHTFIT_COMMON_ATOMIC_FILE_H

#include <stddef.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_atomic_file tf_atomic_file;

/* Resolves `path` (see above), removes stale temporaries of the target, creates the temporary file
 * (exclusively) and returns a handle in *out; the caller ends it with tf_atomic_file_commit() or
 * tf_atomic_file_discard(). Refuses a target that is not a regular file. */
tf_status tf_atomic_file_open(const char *path, tf_atomic_file **out) TF_MUST_USE;

/* Appends `size` bytes. After a failure the file is still open: the caller discards it. */
tf_status tf_atomic_file_write(tf_atomic_file *file, const void *data, size_t size) TF_MUST_USE;

/* Flushes the data to disk, renames the temporary file to the target, syncs the folder (where the
 * file system allows) and frees `file`, which is consumed even on failure (the temporary is then
 * removed and the target left as it was). */
tf_status tf_atomic_file_commit(tf_atomic_file *file) TF_MUST_USE;

/* Closes and removes the temporary file and frees `file`; the target is untouched. NULL is allowed. */
void tf_atomic_file_discard(tf_atomic_file *file);

/* Writes `size` bytes at `data` to `path` atomically, in one call. */
tf_status tf_atomic_file_write_all(const char *path, const void *data, size_t size) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
