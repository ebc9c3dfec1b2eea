/* Embedding lookup and its gradient. ids are i32 or i64 (the ids tensor's dtype says which); an id
 * outside [0, V) reads as a zero row and receives no gradient: the runtime validates data, and a
 * kernel never reads or writes outside its operands whatever the data.
 *
 * The gradient scatter-adds dy rows into dtable. Threads split the columns D, and each walks all
 * ids in order, so every element is summed in the same order for any thread count: race-free and
 * bitwise reproducible without atomics. */
#include <string.h>

#include "kernels/cpu/indexing.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"

/* Columns per gradient task: a multiple of 16 elements (64 bytes in f32), so threads never share a
 * cache line of dtable. */
#define COLUMN_QUANTUM 16

/* embedding(ids [...], table [V, D]) -> y [..., D] */
void TF_REAL_NAME(tf_cpu_embedding)(const tf_cpu_args *args) {
  const tf_cpu_tensor *ids = &args->inputs[0], *table = &args->inputs[1];
  int64_t rows = table->shape[0], depth = table->shape[1];
  const real *weights = table->data;
  real *y = args->outputs[0].data;
  if (depth == 0)
    return;
  TF_CPU_PARALLEL_FOR(
      tf_cpu_threads(args), for (int64_t i = 0; i < ids->count; i++) {
        int64_t id = tf_cpu_id_at(ids, i);
        if (id >= 0 && id < rows)
          memcpy(y + i * depth, weights + id * depth, sizeof(real) * (size_t)depth);
        else
          memset(y + i * depth, 0, sizeof(real) * (size_t)depth);
      });
}

/* dtable [V, D] (+)= the dy rows scatter-added by id: zeroed first unless `accumulate`. */
static void scatter_rows(const tf_cpu_args *args, const tf_cpu_tensor *table, bool accumulate) {
  const tf_cpu_tensor *ids = &args->inputs[0];
  const real *dy = args->inputs[1].data;
  int64_t rows = table->shape[0], depth = table->shape[1];
  real *dtable = table->data;
  if (table->count == 0)
    return;
  int threads = tf_cpu_threads(args);
  int64_t width = (depth + threads - 1) / threads;
  width = (width + COLUMN_QUANTUM - 1) / COLUMN_QUANTUM * COLUMN_QUANTUM;
  int64_t tasks = (depth + width - 1) / width;
  TF_CPU_PARALLEL_FOR(
      threads, for (int64_t task = 0; task < tasks; task++) {
        int64_t first = task * width, count = first + width < depth ? width : depth - first;
        for (int64_t r = 0; r < rows && !accumulate; r++)
          memset(dtable + r * depth + first, 0, sizeof(real) * (size_t)count);
        for (int64_t i = 0; i < ids->count; i++) {
          int64_t id = tf_cpu_id_at(ids, i);
          if (id < 0 || id >= rows)
            continue;
          real *target = dtable + id * depth + first;
          const real *source = dy + i * depth + first;
          for (int64_t c = 0; c < count; c++)
            target[c] += source[c];
        }
      });
}

/* embedding_grad(ids, dy [..., D], table (shape) [V, D]) -> dtable [V, D] */
void TF_REAL_NAME(tf_cpu_embedding_grad)(const tf_cpu_args *args) { scatter_rows(args, &args->outputs[0], false); }

/* embedding_grad_accumulate(ids, dy [..., D], sum [V, D]): sum += the dy rows scattered by id. */
void TF_REAL_NAME(tf_cpu_embedding_grad_accumulate)(const tf_cpu_args *args) {
  scatter_rows(args, &args->inputs[2], true);
}
