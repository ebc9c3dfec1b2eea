/* Helpers shared by the CPU kernel files: thread counts, element sizes, and the strides of numpy
 * broadcasting. Header-only (static inline) because every kernel file is compiled twice; include it
 * after kernels/cpu/real.h, since element sizes depend on the compute type. */
#ifndef TIGHTFIT_KERNELS_CPU_INDEXING_H
#define TIGHTFIT_KERNELS_CPU_INDEXING_H

#include <stdint.h>

#include "kernels/cpu/real.h"

/* Elements one OpenMP chunk handles: large enough to amortise the fork, small enough to balance. */
#define TF_CPU_CHUNK 16384

/* The threads a kernel may use (at least 1). */
static inline int tf_cpu_threads(const tf_cpu_args *args) {
  int threads = args->context ? args->context->threads : 1;
  return threads < 1 ? 1 : threads;
}

/* Index i of an i32 or i64 ids tensor (embedding's ids). */
static inline int64_t tf_cpu_id_at(const tf_cpu_tensor *ids, int64_t i) {
  if (ids->dtype == TF_I64)
    return ((const int64_t *)ids->data)[i];
  return ((const int32_t *)ids->data)[i];
}

static inline bool tf_cpu_is_integer(tf_dtype dtype) { return dtype == TF_I32 || dtype == TF_I64 || dtype == TF_U8; }

/* Bytes per stored element: integer dtypes and 16-bit floats as declared; an f32 tensor holds the
 * compute type (a double in the f64 build, see kernels.h). */
static inline int64_t tf_cpu_element_size(const tf_cpu_tensor *t) {
  if (t->dtype == TF_F32)
    return (int64_t)sizeof(real);
  return tf_dtype_size(t->dtype);
}

/* Strides (in elements) of `t` viewed as an operand broadcast to `shape` of `rank`, numpy-style
 * (right-aligned): 0 along axes where t has size 1 or lacks the axis. */
static inline void tf_cpu_broadcast_strides(const tf_cpu_tensor *t, int32_t rank, const int64_t *shape,
                                            int64_t *strides) {
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    int32_t axis = i - (rank - t->rank);
    int64_t dim = axis >= 0 ? t->shape[axis] : 1;
    // The analyzer cannot see that rank <= TF_MAX_RANK (the plan verifier checks it).
    strides[i] = dim == 1 && shape[i] != 1 ? 0 : stride; // NOLINT(clang-analyzer-core.UndefinedBinaryOperatorResult)
    stride *= dim;
  }
}

/* Merges adjacent axes that every operand walks contiguously (stride[i] == stride[i+1] x
 * shape[i+1]) and drops axes of size 1, in place; *rank becomes at least 1. `strides` holds
 * n_operands rows of TF_MAX_RANK. Fewer, longer axes make the inner loops long and simple. */
static inline void tf_cpu_collapse(int32_t *rank, int64_t *shape, int n_operands, int64_t (*strides)[TF_MAX_RANK]) {
  int32_t kept = 0;
  for (int32_t i = 0; i < *rank; i++) {
    if (shape[i] == 1)
      continue;
    bool merge = kept > 0;
    for (int k = 0; merge && k < n_operands; k++)
      merge = strides[k][kept - 1] == strides[k][i] * shape[i];
    if (merge) {
      shape[kept - 1] *= shape[i];
      for (int k = 0; k < n_operands; k++)
        strides[k][kept - 1] = strides[k][i];
      continue;
    }
    shape[kept] = shape[i];
    for (int k = 0; k < n_operands; k++)
      strides[k][kept] = strides[k][i];
    kept++;
  }
  if (kept == 0) {
    shape[0] = 1;
    for (int k = 0; k < n_operands; k++)
      strides[k][0] = 0;
    kept = 1;
  }
  *rank = kept;
}

/* The element offsets of each operand at row `row` of a collapsed iteration space (every axis but
 * the last), from the strides of tf_cpu_collapse(). */
static inline void tf_cpu_row_offsets(int64_t row, int32_t rank, const int64_t *shape, int n_operands,
                                      int64_t (*strides)[TF_MAX_RANK], int64_t *offsets) {
  for (int k = 0; k < n_operands; k++)
    offsets[k] = 0;
  for (int32_t i = rank - 2; i >= 0; i--) {
    int64_t index = row % shape[i];
    row /= shape[i];
    for (int k = 0; k < n_operands; k++)
      offsets[k] += index * strides[k][i];
  }
}

#endif
