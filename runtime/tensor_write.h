/* A safetensors file's tensor written into a session's buffer, converted to the buffer's dtype: the
 * pretrained weights of init_from (runtime/init_from.c) and checkpoints loaded across parameter
 * dtypes (runtime/checkpoint.c: a bf16 parameter from an f32 checkpoint, or from its f32 master). */
#ifndef TIGHTFIT_RUNTIME_TENSOR_WRITE_H
#define TIGHTFIT_RUNTIME_TENSOR_WRITE_H

#include <stdbool.h>

#include "runtime/safetensors.h"
#include "tightfit/runtime.h"

/* Whether a file tensor of `file_dtype` converts to a buffer of `dtype`: both floating (f32, f16,
 * bf16; the file's f64 too), or the same dtype. */
bool tf_tensor_write_convertible(tf_dtype dtype, tf_dtype file_dtype);

/* Writes buffer id whole from `view`'s elements [first, first + the buffer's count), converted to the
 * buffer's dtype (widened exactly, or rounded to nearest even); with `transpose` (rank 2), the
 * buffer's element (r, c) is the file's (c, r). A megabyte at a time. */
tf_status tf_tensor_write(tf_session *session, int32_t id, const tf_safetensors_tensor *view, int64_t first,
                          bool transpose);

#endif
