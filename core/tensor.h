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

/* The tensor of `dtype` and shape[0..rank) at `data` (may be NULL), its element count computed. */
static inline tf_tensor_ref tf_tensor_ref_make(void *data, tf_dtype dtype, int32_t rank, const int64_t *shape) {
  tf_tensor_ref t = {data, dtype, rank, {0}, 1};
  for (int32_t d = 0; d < rank && d < TF_MAX_RANK; d++) {
    t.shape[d] = shape[d];
    t.count *= shape[d];
  }
  return t;
}

#ifdef __cplusplus
}
#endif
#endif
