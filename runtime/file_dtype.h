/* Element types of tensor files (.npy, safetensors): every tf_dtype, plus f64, which files may hold
 * but graphs may not (tf_dtype has no f64). Readers report TF_FILE_F64 so a caller can convert or
 * refuse; it never appears in a graph or a plan. */
#ifndef TIGHTFIT_RUNTIME_FILE_DTYPE_H
#define TIGHTFIT_RUNTIME_FILE_DTYPE_H

#include <stdint.h>

#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* float64: the first value past the graph dtypes. */
#define TF_FILE_F64 ((tf_dtype)TF_DTYPE_COUNT)

/* Bytes per element of a graph dtype or TF_FILE_F64; 0 for anything else. */
static inline int64_t tf_file_dtype_size(tf_dtype dtype) { return dtype == TF_FILE_F64 ? 8 : tf_dtype_size(dtype); }

/* "f32", ..., "f64"; "?" for anything else. */
static inline const char *tf_file_dtype_name(tf_dtype dtype) {
  return dtype == TF_FILE_F64 ? "f64" : tf_dtype_name(dtype);
}

#ifdef __cplusplus
}
#endif
#endif
