/* A tensor as a kernel and a workspace formula see it: memory, dtype and a concrete shape. Every
 * backend's kernels take arrays of these (tf_cpu_tensor, tf_cuda_tensor are this type), so the
 * workspace formulas in core/ read the same operands the kernels do. */
#ifndef TIGHTFIT_CORE_TENSOR_H
#define TIGHTFIT_CORE_TENSOR_H

#include <stdint.h>

#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_tensor_ref {
  void *data;     /* host or device memory; NULL where only the shape matters (planning) */
  tf_dtype dtype; /* CPU floating tensors: the compute type's (f32 or, in f64 mode, ignored) */
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count; /* elements */
} tf_tensor_ref;

#ifdef __cplusplus
}
#endif
#endif
