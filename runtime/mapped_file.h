/* A whole file mapped read-only into memory: the shared first step of the .npy and safetensors
 * readers. Only regular files are mapped: the path is checked without blocking (common/file.h), so a
 * FIFO, a device such as /dev/zero or a folder is refused at once instead of hanging or reading
 * forever. */
#ifndef TIGHTFIT_RUNTIME_MAPPED_FILE_H
#define TIGHTFIT_RUNTIME_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest tensor file (.npy, safetensors) tightfit maps: 1 TiB. Far above any real data set or
 * weight file (weights ship in shards of a few GiB; the largest open models are a few hundred GiB
 * in all), and far below the 128 TiB of user address space, so a file within the bound never fails
 * to map for its size alone; a larger one (typically a sparse or corrupt file) is refused with its
 * size instead of an mmap error. */
#define TF_FILE_TENSOR_MAX_BYTES ((uint64_t)1 << 40)

typedef struct tf_mapped_file {
  const unsigned char *data; /* NULL for an empty file */
  size_t size;
} tf_mapped_file;

/* Maps the regular file `path` read-only into *out; release it with tf_mapped_file_close(). Errors
 * name the path: a missing file, anything but a regular file ("not a regular file (it is a FIFO
 * ...)"), a file above TF_FILE_TENSOR_MAX_BYTES (its size and the bound), mmap failure. */
tf_status tf_mapped_file_open(const char *path, tf_mapped_file *out) TF_MUST_USE;

/* Unmaps `file` and clears it; a cleared or empty mapping is allowed. */
void tf_mapped_file_close(tf_mapped_file *file);

#ifdef __cplusplus
}
#endif
#endif
