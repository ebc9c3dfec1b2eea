/* A whole file mapped read-only into memory: the shared first step of the .npy and safetensors
 * readers. */
#ifndef TIGHTFIT_RUNTIME_MAPPED_FILE_H
#define TIGHTFIT_RUNTIME_MAPPED_FILE_H

#include <stddef.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_mapped_file {
  const unsigned char *data; /* NULL for an empty file */
  size_t size;
} tf_mapped_file;

/* Maps the regular file `path` read-only into *out; release it with tf_mapped_file_close(). Errors
 * (missing file, a folder, mmap failure) name the path. */
tf_status tf_mapped_file_open(const char *path, tf_mapped_file *out) TF_MUST_USE;

/* Unmaps `file` and clears it; a cleared or empty mapping is allowed. */
void tf_mapped_file_close(tf_mapped_file *file);

#ifdef __cplusplus
}
#endif
#endif
