/* Opening and reading input files safely.
 *
 * Every reader in tightfit takes a path from the user, so the path may name anything: a FIFO with no
 * writer (an open or a read would block forever), a character device such as /dev/zero (a read never
 * ends) or /dev/tty, a folder, or a sparse file of terabytes. The functions here accept only regular
 * files, never block while finding out (stat first, then open with O_NONBLOCK and check the opened
 * descriptor again with fstat, so that a file swapped in between is caught too), and refuse a file
 * larger than the bound for its kind before reading a byte of it.
 *
 * The bounds, per kind of file:
 *   graph (.tfg) and plan (.tfplan) files: TF_FILE_FLATBUFFER_MAX_BYTES, 2 GiB - 1. FlatBuffers
 *     address their contents with 32-bit signed offsets, so no valid graph or plan is larger;
 *     external weights live in safetensors files, not in the graph.
 *   tensor files (.npy, safetensors), mapped rather than read: TF_FILE_TENSOR_MAX_BYTES (in
 *     runtime/mapped_file.h). */
#ifndef TIGHTFIT_COMMON_FILE_H
#define TIGHTFIT_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest graph or plan file: the FlatBuffers limit (2^31 - 1 bytes). */
#define TF_FILE_FLATBUFFER_MAX_BYTES ((uint64_t)INT32_MAX)

/* Opens the regular file `path` read-only without ever blocking and returns its descriptor in *fd
 * (the caller closes it) and its size in *size. Refuses (TF_ERR_IO, "not a regular file", naming
 * the path and what it is: a FIFO, a character device, a folder, ...) anything else, and a file of
 * more than `max_bytes` (naming its size and the bound, with `kind` such as "graph and plan files"
 * saying which bound). *fd is -1 on failure. */
tf_status tf_file_open_regular(const char *path, uint64_t max_bytes, const char *kind, int *fd,
                               uint64_t *size) TF_MUST_USE;

/* Reads all of the regular file `path`, at most `max_bytes`, into a new buffer (*data, *size); the
 * caller frees *data. Errors (as tf_file_open_regular, or a file that grows past the bound while
 * read) name the path. */
tf_status tf_file_read_bounded(const char *path, uint64_t max_bytes, const char *kind, void **data,
                               size_t *size) TF_MUST_USE;

/* tf_file_read_bounded for graph and plan files: at most TF_FILE_FLATBUFFER_MAX_BYTES. */
tf_status tf_file_read(const char *path, void **data, size_t *size) TF_MUST_USE;

/* What the file type bits of `mode` (st_mode) name, for messages: "a FIFO", "a character device",
 * "a block device", "a socket", "a folder", "a symbolic link", "a regular file". */
const char *tf_file_kind_name(unsigned mode);

#ifdef __cplusplus
}
#endif
#endif
