/* A data file's sample layout against its buffer's (sample_layout.h). */
#include "runtime/sample_layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tightfit/types.h"

/* `dims` without its axes of size 1; returns how many are left. */
static int32_t squeeze(const int64_t *dims, int32_t rank, int64_t *out) {
  int32_t n = 0;
  for (int32_t d = 0; d < rank; d++)
    if (dims[d] != 1)
      out[n++] = dims[d];
  return n;
}

static bool same_dims(const int64_t *a, int32_t a_rank, const int64_t *b, int32_t b_rank) {
  return a_rank == b_rank && !memcmp(a, b, sizeof(int64_t) * (size_t)a_rank);
}

/* The numpy axes order that makes the file's samples (all axes, 1s included) the buffer's, written as
 * "(0, 3, 1, 2)", when the file's axes longer than 1 are a permutation of the buffer's and the file
 * has no other axes; equal lengths are matched in order. Returns false when there is none. */
static bool transpose_axes(const int64_t *buffer, int32_t buffer_rank, const int64_t *file, int32_t file_rank,
                           char *text, size_t size) {
  if (buffer_rank != file_rank || file_rank >= TF_MAX_RANK)
    return false;
  bool used[TF_MAX_RANK] = {false};
  int n = snprintf(text, size, "(0");
  for (int32_t d = 0; d < buffer_rank; d++) {
    int32_t from = -1;
    for (int32_t f = 0; f < file_rank && from < 0; f++)
      if (!used[f] && file[f] == buffer[d])
        from = f;
    if (from < 0)
      return false;
    used[from] = true;
    n += snprintf(text + n, size > (size_t)n ? size - (size_t)n : 0, ", %d", from + 1);
  }
  snprintf(text + n, size > (size_t)n ? size - (size_t)n : 0, ")");
  return (size_t)n + 1 < size;
}

tf_status tf_sample_layout_check(const char *path, const char *buffer, const int64_t *buffer_dims, int32_t buffer_rank,
                                 const int64_t *file_dims, int32_t file_rank) {
  int64_t want[TF_MAX_RANK], have[TF_MAX_RANK];
  if (buffer_rank > TF_MAX_RANK || file_rank > TF_MAX_RANK)
    return NULL; /* the npy reader and the plan bound ranks; nothing to compare otherwise */
  const int32_t want_rank = squeeze(buffer_dims, buffer_rank, want), have_rank = squeeze(file_dims, file_rank, have);
  if (want_rank <= 1 || have_rank <= 1 || same_dims(want, want_rank, have, have_rank))
    return NULL;
  char wanted[256], had[256], axes[128];
  tf_format_shape(buffer_dims, buffer_rank, wanted, sizeof(wanted));
  tf_format_shape(file_dims, file_rank, had, sizeof(had));
  if (transpose_axes(buffer_dims, buffer_rank, file_dims, file_rank, axes, sizeof(axes)))
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: its samples are %s, but '%s' takes %s per sample: the same elements in another "
                         "layout, which would train on scrambled data (if the axes are only in another order, "
                         "save numpy.transpose(a, %s); if the file's order is right, save a.reshape(len(a), -1))",
                         path, had, buffer, wanted, axes);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: its samples are %s, but '%s' takes %s per sample: the same number of elements in "
                       "another shape, which would train on scrambled data (if the file's order is right, save "
                       "a.reshape(len(a), -1))",
                       path, had, buffer, wanted);
}
