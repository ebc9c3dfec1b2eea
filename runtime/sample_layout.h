/* Whether a data file's samples are laid out as the buffer they feed. The feed copies a sample's
 * elements in the file's order, so a file whose samples have the buffer's element count but another
 * shape ([32, 32, 3] images into a [3, 32, 32] input, [T, 80] features into [80, T]) would train on
 * scrambled data without a word. Accepted: the same shape once axes of size 1 are dropped, or either
 * side flat (at most one axis longer than 1: a row-major flattening, which is unambiguous). Anything
 * else is refused, with the numpy call that transposes the file where its axes are a permutation of
 * the buffer's. */
#ifndef TIGHTFIT_RUNTIME_SAMPLE_LAYOUT_H
#define TIGHTFIT_RUNTIME_SAMPLE_LAYOUT_H

#include <stdint.h>

#include "tightfit/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NULL when samples of shape `file_dims` (the file's axes after the first) may feed `buffer` samples
 * of shape `buffer_dims` (the buffer's axes after N), both of one element count; else an error naming
 * `path`, `buffer` and both shapes. */
tf_status tf_sample_layout_check(const char *path, const char *buffer, const int64_t *buffer_dims, int32_t buffer_rank,
                                 const int64_t *file_dims, int32_t file_rank);

#ifdef __cplusplus
}
#endif

#endif
