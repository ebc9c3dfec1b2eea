/* Embedding and its gradient on f16/bf16 data: the CPU target's half kernels of the two ops, run
 * whole (not through half slices, whose f32 copies of the table would hold more than the casts).
 *
 * Forward: a row of the half table copied as it is stored. Widening is exact and rounding an exact
 * half value gives it back, so this is bit for bit what cast up -> embedding -> cast down computes,
 * with no f32 copy of the table; an id outside [0, V) gives a row of +0.
 *
 * Gradient: each referenced table row is summed in f32 over its ids' dy rows and rounded once.
 * The f32 kernel (embedding.c) zeroes dtable and adds the dy rows in id order, so every element is
 * 0 + dy[i0] + dy[i1] + ... over the positions i0 < i1 < ... holding its row's id. Here the
 * workspace (tf_cpu_embedding_grad_half_layout) links those positions: first[v] is the first
 * position of id v (-1: none) and next[i] the next position after i with the same id (-1: none),
 * both built in one backward walk over the ids; each row then sums its chain into f32
 * accumulators in that order and rounds. So the bits are those of the f32 kernel followed by the
 * cast, without an f32 [V, D] gradient. Rows are independent tasks: any thread count gives the same
 * bits. Built for f32 only (the f64 reference runs the f64 kernels on widened copies). */
#ifndef TF_REAL_F64

#include <string.h>

#include "core/half_slices.h"
#include "kernels/cpu/half_value.h"
#include "kernels/cpu/indexing.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/parallel.h"

/* Columns summed at a time by one task (its f32 accumulators live on the stack). */
#define COLUMN_BLOCK 256

/* embedding(ids [...], table [V, D] half) -> y [..., D] half */
void tf_cpu_embedding_half(const tf_cpu_args *args) {
  const tf_cpu_tensor *ids = &args->inputs[0], *table = &args->inputs[1];
  const int64_t rows = table->shape[0], depth = table->shape[1];
  const uint16_t *weights = table->data;
  uint16_t *y = args->outputs[0].data;
  if (depth == 0)
    return;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_threads(args), for (int64_t i = 0; i < ids->count; i++) {
        const int64_t id = tf_cpu_id_at(ids, i);
        if (id >= 0 && id < rows)
          memcpy(y + i * depth, weights + id * depth, sizeof(uint16_t) * (size_t)depth);
        else
          memset(y + i * depth, 0, sizeof(uint16_t) * (size_t)depth);
      });
}

/* first[v] and next[i] of the header comment, from one walk over the ids from the last. */
static void link_positions(const tf_cpu_tensor *ids, int64_t rows, int32_t *first, int32_t *next) {
  for (int64_t v = 0; v < rows; v++)
    first[v] = -1;
  for (int64_t i = ids->count - 1; i >= 0; i--) {
    const int64_t id = tf_cpu_id_at(ids, i);
    next[i] = -1;
    if (id < 0 || id >= rows)
      continue;
    next[i] = first[id];
    first[id] = (int32_t)i;
  }
}

/* dtable row `v`: its chain of dy rows from position `head` summed in f32, rounded once. */
static void sum_row(tf_dtype half, const uint16_t *dy, const int32_t *next, int32_t head, int64_t depth,
                    uint16_t *row) {
  float sums[COLUMN_BLOCK];
  for (int64_t c0 = 0; c0 < depth; c0 += COLUMN_BLOCK) {
    const int64_t width = depth - c0 < COLUMN_BLOCK ? depth - c0 : COLUMN_BLOCK;
    for (int64_t c = 0; c < width; c++)
      sums[c] = 0.0f;
    for (int32_t i = head; i >= 0; i = next[i]) {
      const uint16_t *source = dy + (int64_t)i * depth + c0;
      for (int64_t c = 0; c < width; c++)
        sums[c] += tf_cpu_half_widen(half, source[c]);
    }
    for (int64_t c = 0; c < width; c++)
      row[c0 + c] = tf_cpu_half_narrow(half, sums[c]);
  }
}

/* embedding_grad(ids, dy [..., D] half, table (shape) [V, D]) -> dtable [V, D] half */
void tf_cpu_embedding_grad_half(const tf_cpu_args *args) {
  const tf_cpu_tensor *ids = &args->inputs[0], *out = &args->outputs[0];
  const int64_t rows = out->shape[0], depth = out->shape[1];
  const tf_cpu_embedding_grad_half_layout at = tf_cpu_embedding_grad_half_layout_of(ids->count, rows);
  if (out->count == 0)
    return;
  int32_t *first = (int32_t *)((char *)args->workspace + at.first_offset);
  int32_t *next = (int32_t *)((char *)args->workspace + at.next_offset);
  link_positions(ids, rows, first, next);
  const tf_dtype half = out->dtype;
  const uint16_t *dy = args->inputs[1].data;
  uint16_t *dtable = out->data;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_threads(args), for (int64_t v = 0; v < rows; v++) {
        if (first[v] < 0)
          memset(dtable + v * depth, 0, sizeof(uint16_t) * (size_t)depth);
        else
          sum_row(half, dy, next, first[v], depth, dtable + v * depth);
      });
}

#endif
