/* Files written all or nothing: data goes to a temporary file beside the target, which is fsync'd
 * and renamed over the target only once complete, so a crash or an error never leaves a partial file
 * under the final name (the old file, if any, stays until the rename). Used by the .npy and
 * safetensors writers and by checkpoints. */
#ifndef TIGHTFIT_RUNTIME_ATOMIC_FILE_H
#define TIGHTFIT_RUNTIME_ATOMIC_FILE_H

#include <stddef.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_atomic_file tf_atomic_file;

/* Creates the temporary file "<path>.tmp<pid>[.n]" (exclusively) and returns a handle in *out; the
 * caller ends it with tf_atomic_file_commit() or tf_atomic_file_discard(). */
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
