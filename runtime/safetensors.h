/* safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header
 * length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 * ..., "__metadata__": {"key": "value", ...}}, then the tensors' bytes (offsets relative to the end
 * of the header). Weights, checkpoints and optimizer state travel in this format.
 *
 * The reader maps the file and validates it as strictly as the reference implementation: a header of
 * at most 100 MB in a strict JSON subset, every tensor's size equal to dtype x shape, and the tensors
 * tiling the data exactly (no overlap, no gap, nothing past the end). Tensor data pointers are aligned
 * to the element size (mapped in place when the file is aligned, as the reference writer makes it;
 * copied otherwise). The writer produces the bytes the reference writer produces and writes them
 * atomically. */
#ifndef TIGHTFIT_RUNTIME_SAFETENSORS_H
#define TIGHTFIT_RUNTIME_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/file_dtype.h"
#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dtype of a tensor whose safetensors type (BOOL, I8, I16, U16, U32, U64, F8_*) tightfit does
 * not compute with: the file still opens; its name is in `file_dtype`. */
#define TF_SAFETENSORS_OTHER ((tf_dtype)(TF_DTYPE_COUNT + 1))

/* Header lengths above this are refused, as the reference implementation does. */
#define TF_SAFETENSORS_MAX_HEADER 100000000

/* A borrowed view of one tensor, valid until the file is closed. */
typedef struct tf_safetensors_tensor {
  const char *name;
  tf_dtype dtype;         /* a graph dtype, TF_FILE_F64 or TF_SAFETENSORS_OTHER */
  const char *file_dtype; /* the type as the file spells it: "F32", "BF16", "I16", ... */
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count; /* elements: the product of the shape (1 for a scalar) */
  size_t bytes;
  const void *data; /* little-endian elements, row-major; NULL when bytes == 0 */
} tf_safetensors_tensor;

typedef struct tf_safetensors tf_safetensors;

/* ---- reading ---- */

/* Maps and validates `path`; returns a handle in *out that the caller releases with
 * tf_safetensors_close(). Errors name the file, the tensor and the numbers involved. */
tf_status tf_safetensors_open(const char *path, tf_safetensors **out) TF_MUST_USE;

/* Unmaps and frees `file` and every view taken from it. NULL is allowed. */
void tf_safetensors_close(tf_safetensors *file);

/* The number of tensors, and tensor `index` in name order (strcmp) into *view; false when out of range. */
int32_t tf_safetensors_count(const tf_safetensors *file);
bool tf_safetensors_at(const tf_safetensors *file, int32_t index, tf_safetensors_tensor *view);

/* Looks `name` up (binary search) into *view; TF_ERR_INVALID_INPUT naming the file when absent. */
tf_status tf_safetensors_find(const tf_safetensors *file, const char *name, tf_safetensors_tensor *view) TF_MUST_USE;

/* Like tf_safetensors_find, and also checks that the tensor has `dtype` and exactly `shape`
 * (rank entries); a mismatch is TF_ERR_SHAPE naming both. */
tf_status tf_safetensors_expect(const tf_safetensors *file, const char *name, tf_dtype dtype, int32_t rank,
                                const int64_t *shape, tf_safetensors_tensor *view) TF_MUST_USE;

/* The value of metadata `key` (borrowed), or NULL when the file has none. */
const char *tf_safetensors_metadata(const tf_safetensors *file, const char *key);

/* The number of metadata entries, and entry `index` in key order; false when out of range. */
int32_t tf_safetensors_metadata_count(const tf_safetensors *file);
bool tf_safetensors_metadata_at(const tf_safetensors *file, int32_t index, const char **key, const char **value);

/* The path as opened (borrowed), for the caller's messages. */
const char *tf_safetensors_path(const tf_safetensors *file);

/* ---- writing ---- */

typedef struct tf_safetensors_writer tf_safetensors_writer;

/* Creates an empty writer; the caller destroys it with tf_safetensors_writer_destroy(). */
tf_status tf_safetensors_writer_create(tf_safetensors_writer **out) TF_MUST_USE;

/* Frees `writer` (not the data it points to). NULL is allowed. */
void tf_safetensors_writer_destroy(tf_safetensors_writer *writer);

/* Adds tensor `name` (UTF-8, copied) of `dtype` (a graph dtype or TF_FILE_F64) and `shape`; `data`
 * (count x element bytes, row-major) is borrowed and must stay valid until the write. Duplicate
 * names are refused when writing. */
tf_status tf_safetensors_writer_add(tf_safetensors_writer *writer, const char *name, tf_dtype dtype, int32_t rank,
                                    const int64_t *shape, const void *data) TF_MUST_USE;

/* Sets metadata `key` to `value` (UTF-8, both copied), replacing an earlier value for that key. */
tf_status tf_safetensors_writer_set_metadata(tf_safetensors_writer *writer, const char *key,
                                             const char *value) TF_MUST_USE;

/* The metadata key prefix of tensor checksums: "tightfit.xxh64.NAME" holds the XXH64 (seed 0) of
 * tensor NAME's bytes as 16 lowercase hex digits. The reader checks a tensor's checksum when it is
 * looked up (tf_safetensors_find / _expect): a mismatch is TF_ERR_INVALID_INPUT naming the file and
 * tensor. Files without checksums (other writers') load as before. */
#define TF_SAFETENSORS_CHECKSUM_PREFIX "tightfit.xxh64."

/* Makes tf_safetensors_writer_add record a checksum of each tensor added from now on in the metadata
 * (checkpoints do; call it before adding tensors). */
void tf_safetensors_writer_add_checksums(tf_safetensors_writer *writer);

/* Writes every tensor and the metadata to `path` atomically (temporary file, fsync, rename): the data
 * in the reference order (element type from widest, then name), the header compact JSON with
 * "__metadata__" first (keys sorted), padded with spaces to a multiple of 8 bytes. The same entries
 * always give the same bytes, whatever order they were added in. */
tf_status tf_safetensors_writer_write(const tf_safetensors_writer *writer, const char *path) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
