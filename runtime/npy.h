/* NumPy .npy files (format versions 1.0, 2.0 and 3.0), read memory-mapped and written atomically.
 *
 * Supported element types: '<f4' f32, '<f8' f64 (TF_FILE_F64), '<f2' f16, '<i4' i32, '<i8' i64,
 * '|u1' u8. Any other type is refused naming it as NumPy does: "x.npy: holds uint16: unsupported dtype
 * '<u2'; tightfit reads float32 '<f4', ...". Only C (row-major) order, rank <= TF_MAX_RANK. The reader checks the
 * header strictly (exactly the keys descr, fortran_order, shape) and that the file holds exactly the data the header
 * promises; errors name the file and the problem. The data pointer is aligned to the element size
 * (the mapping itself when the file is aligned, as every NumPy-written file is; else a copy). */
#ifndef TIGHTFIT_RUNTIME_NPY_H
#define TIGHTFIT_RUNTIME_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/file_dtype.h"
#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_npy tf_npy;

/* Opens and validates `path`, maps it read-only and returns a handle in *out, which the caller
 * releases with tf_npy_close(). The file must not be truncated while it is open: reading past its new
 * end raises SIGBUS (the data stays mapped, for data sets larger than memory); `tightfit train`
 * turns that signal into an error naming the file (tools/bus_guard.h). */
tf_status tf_npy_open(const char *path, tf_npy **out) TF_MUST_USE;

/* Unmaps and frees `npy`; every pointer obtained from it dies with it. NULL is allowed. */
void tf_npy_close(tf_npy *npy);

/* The element type: a graph dtype or TF_FILE_F64. */
tf_dtype tf_npy_dtype(const tf_npy *npy);

/* The element type as NumPy and the file name it, for messages: "float64 ('<f8')", "int32 ('<i4')"
 * (borrowed; valid until tf_npy_close). Use it rather than tf_dtype_name(), which has no name for
 * TF_FILE_F64 ("?"): "x.npy: holds float64 ('<f8'), but 'x' is f32". */
const char *tf_npy_dtype_description(const tf_npy *npy);

/* The rank (0 for a scalar) and the shape (rank entries, borrowed). */
int32_t tf_npy_rank(const tf_npy *npy);
const int64_t *tf_npy_shape(const tf_npy *npy);

/* The number of elements (the product of the shape; 1 for a scalar) and of data bytes. */
int64_t tf_npy_count(const tf_npy *npy);
size_t tf_npy_bytes(const tf_npy *npy);

/* The elements, row-major, little-endian, read-only (borrowed; valid until tf_npy_close). */
const void *tf_npy_data(const tf_npy *npy);

/* The file's path as opened (borrowed), for the caller's error messages. */
const char *tf_npy_path(const tf_npy *npy);

/* Writes `data` (count(shape) elements of `dtype`, row-major) to `path` as a version 1.0 .npy file
 * byte-identical to NumPy 1.24's np.save, atomically (temporary file, fsync, rename). `dtype` may be
 * TF_FILE_F64; bf16, which NumPy lacks, is refused. */
tf_status tf_npy_write(const char *path, tf_dtype dtype, int32_t rank, const int64_t *shape,
                       const void *data) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
