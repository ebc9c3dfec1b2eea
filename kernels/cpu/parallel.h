/* Parallel loops that cost no heap allocation.
 *
 * `#pragma omp parallel for num_threads(t) if (c)` is not free when it runs on one thread: libgomp
 * still builds a team for it, and since it keeps only teams of two or more for reuse, a team of one
 * is a malloc (1568 bytes with GCC 12's libgomp) and a free on every call. The small ops of a step
 * (bias adds, accumulation, optimizer updates of small tensors) made the mlp do 28 heap allocations
 * per training step that way (issue 12, measured by tests/alloc_probe). These macros run the loop
 * on the calling thread, outside OpenMP, when the team would have one thread, and open a team only
 * for two or more, which libgomp reuses from call to call.
 *
 *   TF_CPU_PARALLEL_FOR(team, for (...) body);          schedule(static) over `team` threads
 *   TF_CPU_PARALLEL_FOR_DYNAMIC(team, for (...) body);  schedule(dynamic, 1)
 *   TF_CPU_PARALLEL_SUM(team, total, for (...) body);   reduction(+ : total)
 *
 * `team` is evaluated once. The loop is compiled twice, once per path; on the inline path
 * omp_get_thread_num() is 0, so per-thread workspace slices stay valid, and every output element is
 * still computed by the same code, so results do not depend on the path. */
#ifndef TIGHTFIT_KERNELS_CPU_PARALLEL_H
#define TIGHTFIT_KERNELS_CPU_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

/* `threads` when the loop has enough work to split (`wide`), else 1: the team of an `if` clause. */
static inline int tf_cpu_team(int threads, bool wide) { return wide && threads > 1 ? threads : 1; }

/* Column sums over many rows ([rows, columns] summed over rows: a bias or a norm's weight
 * gradient) split by blocks of whole rows, each thread its blocks, every column's block partials
 * added in block order. Split by columns instead, each of two threads read every row, half of them
 * written by the other core (an element-wise producer's static split): slower than one thread.
 * TF_CPU_ROW_BLOCKS blocks at most, each of at least `chunk` elements, while blocks x columns x
 * `sums` partials fit `capacity` doubles; 1 when that leaves fewer than two. From the shape alone,
 * so results do not depend on the thread count. */
#define TF_CPU_ROW_BLOCKS 8
static inline int64_t tf_cpu_row_blocks(int64_t rows, int64_t columns, int64_t sums, int64_t chunk, int64_t capacity) {
  if (rows < 2 || columns < 1 || columns * sums * 2 > capacity)
    return 1;
  int64_t blocks = rows * columns / chunk;
  blocks = blocks < TF_CPU_ROW_BLOCKS ? blocks : TF_CPU_ROW_BLOCKS;
  blocks = blocks < capacity / (columns * sums) ? blocks : capacity / (columns * sums);
  blocks = blocks < rows ? blocks : rows;
  return blocks > 1 ? blocks : 1;
}

#define TF_CPU_PRAGMA(text) _Pragma(#text)

#define TF_CPU_PARALLEL_LOOP(team, clauses, ...)                                                                       \
  do {                                                                                                                 \
    const int tf_cpu_team_ = (team);                                                                                   \
    if (tf_cpu_team_ > 1) {                                                                                            \
      TF_CPU_PRAGMA(omp parallel for num_threads(tf_cpu_team_) clauses)                                                \
      __VA_ARGS__                                                                                                      \
    } else {                                                                                                           \
      __VA_ARGS__                                                                                                      \
    }                                                                                                                  \
  } while (0)

#define TF_CPU_PARALLEL_FOR(team, ...) TF_CPU_PARALLEL_LOOP(team, schedule(static), __VA_ARGS__)
#define TF_CPU_PARALLEL_FOR_DYNAMIC(team, ...) TF_CPU_PARALLEL_LOOP(team, schedule(dynamic, 1), __VA_ARGS__)
#define TF_CPU_PARALLEL_SUM(team, total, ...)                                                                          \
  TF_CPU_PARALLEL_LOOP(team, schedule(static) reduction(+ : total), __VA_ARGS__)

#endif
