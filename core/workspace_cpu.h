/* Workspace layouts of the CPU kernels that need scratch memory: the convolutions (im2col column
 * blocks, per-thread weight-gradient partials) and fused attention (per-thread score blocks).
 *
 * tf_cpu_workspace_bytes() (core/workspace_cpu.c) and the kernels (kernels/cpu/conv.c, attention.c) both size their
 * scratch with the functions below, so the bytes the compiler plans and the bytes a kernel touches
 * come from one formula. Sizes are in elements of the compute type; every per-thread slice is a
 * multiple of TF_CPU_WORKSPACE_ALIGN_ELEMENTS elements, so slices stay 64-byte aligned for f32 and f64.
 *
 * Threads: these kernels parallelise with OpenMP and call BLAS from inside their parallel loops, so
 * they expect a single-threaded BLAS (openblas_set_num_threads(1), or OPENBLAS_NUM_THREADS=1). A
 * multi-threaded BLAS gives the same results, only slower (its threads and ours compete). */
#ifndef TIGHTFIT_CORE_WORKSPACE_CPU_H
#define TIGHTFIT_CORE_WORKSPACE_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "core/conv_geometry.h"
#include "core/tensor.h"

#define TF_CPU_WORKSPACE_ALIGN_ELEMENTS 16
/* One thread's im2col block holds at most about this many elements, unless one filter's length
 * times TF_CPU_CONV_MIN_CHUNK is larger: big images are lowered a block of output positions at a time. */
#define TF_CPU_CONV_COLUMN_LIMIT ((int64_t)1 << 19)
#define TF_CPU_CONV_MIN_CHUNK 256
/* The tiles of C one matmul task computes with one BLAS call: rows and columns from multiples of
 * these, whatever the thread count (kernels/cpu/matmul.c). OpenBLAS computes a row of C with a
 * kernel chosen by its place among the call's rows (its M-unroll remainder kernels sum in another
 * order), so fixed tiles make a product's bits independent of the threads, and a cut of its rows at
 * a multiple of the row tile (the half slices, core/half_slices.c) gives the bits of the whole. */
#define TF_CPU_MATMUL_ROW_TILE 256
#define TF_CPU_MATMUL_COLUMN_TILE 512
/* A product whose A is transposed (a weight's gradient, x^T dy, summing over the rows of x and dy)
 * sums its depth in tiles of this many, in order, each call adding into C: a cut of those rows at
 * a multiple of it, accumulated slice after slice, gives the bits of the whole. */
#define TF_CPU_MATMUL_DEPTH_TILE 256
/* A product whose C would have fewer than TF_CPU_MATMUL_FEW_TILES tiles per batch entry (a small
 * weight's gradient, or a product of a few hundred rows: one or two tasks, often of unequal size)
 * cuts its columns into as many tiles as it takes, of equal width (a multiple of
 * TF_CPU_MATMUL_COLUMN_ALIGN, at least TF_CPU_MATMUL_NARROW_COLUMN_TILE: narrower calls lose speed).
 * It is decided by the whole product's shape alone, never by the thread count: a half slice of its
 * rows is told the rows of the whole (tf_cpu_args.whole_rows), a depth slice its depth, so its bits
 * stay the same on any thread count and in any slice. */
#define TF_CPU_MATMUL_FEW_TILES 4
#define TF_CPU_MATMUL_NARROW_COLUMN_TILE 64
#define TF_CPU_MATMUL_COLUMN_ALIGN 16
/* A product of fewer multiply-adds than this keeps its tiles: a finer cut would cost more in waking
 * threads than it saves. */
#define TF_CPU_MATMUL_NARROW_MIN_WORK ((int64_t)1 << 22)
/* A product of at least TF_CPU_MATMUL_TALL_ROW_TILES row tiles (tasks enough for any thread count)
 * and at most TF_CPU_MATMUL_WIDE_COLUMN_TILE columns takes them in one tile: a head's weight
 * gradient, [50257, 768] from 256 rows, took 268-312 ms on a Zen 2 core in tiles of 512 + 256
 * columns and 238-250 ms in tiles of 768 (OpenBLAS packs B again for each call, and the 256-column
 * calls run slower); products of fewer rows keep their tiles for balance between threads. */
#define TF_CPU_MATMUL_TALL_ROW_TILES 16
#define TF_CPU_MATMUL_WIDE_COLUMN_TILE 1024

/* Columns of C per tile for a product of `m` rows (per batch entry), `n` columns and depth `k`: the
 * column tile; all n for a tall product of at most the wide tile; or, where C would have fewer than
 * TF_CPU_MATMUL_FEW_TILES tiles, n cut into as many as it takes of equal width (a multiple of
 * TF_CPU_MATMUL_COLUMN_ALIGN, at least the narrow tile). A product below
 * TF_CPU_MATMUL_NARROW_MIN_WORK multiply-adds keeps the column tile. The matmul kernel and the fused
 * loss head (kernels/cpu/linear_loss.c) cut their products with it alike, so the smallest plan's
 * fused head gives the plain plan's bits (OpenBLAS's Haswell and Zen kernels sum a column in another
 * order by its place in the call). */
static inline int64_t tf_cpu_matmul_column_tile(int64_t m, int64_t n, int64_t k) {
  const int64_t row_tiles = (m + TF_CPU_MATMUL_ROW_TILE - 1) / TF_CPU_MATMUL_ROW_TILE;
  if (row_tiles >= TF_CPU_MATMUL_TALL_ROW_TILES && n > TF_CPU_MATMUL_COLUMN_TILE && n <= TF_CPU_MATMUL_WIDE_COLUMN_TILE)
    return n;
  const int64_t column_tiles = (n + TF_CPU_MATMUL_COLUMN_TILE - 1) / TF_CPU_MATMUL_COLUMN_TILE;
  if (row_tiles * column_tiles >= TF_CPU_MATMUL_FEW_TILES ||
      (double)m * (double)n * (double)k < (double)TF_CPU_MATMUL_NARROW_MIN_WORK)
    return TF_CPU_MATMUL_COLUMN_TILE;
  const int64_t wanted = (TF_CPU_MATMUL_FEW_TILES + row_tiles - 1) / row_tiles; /* column tiles */
  const int64_t width = (n + wanted - 1) / wanted;
  const int64_t tile =
      (width + TF_CPU_MATMUL_COLUMN_ALIGN - 1) / TF_CPU_MATMUL_COLUMN_ALIGN * TF_CPU_MATMUL_COLUMN_ALIGN;
  return tile < TF_CPU_MATMUL_NARROW_COLUMN_TILE ? TF_CPU_MATMUL_NARROW_COLUMN_TILE : tile;
}
/* Query rows per attention block: the score block of one thread is this many rows of Tk, as many
 * as keep a block's probabilities and their gradient within TF_CPU_ATTENTION_BLOCK_ELEMENTS (Zen 2's
 * 512 KiB L2 holds both with room for the operands), in steps of TF_CPU_ATTENTION_BLOCK_ROWS up to
 * TF_CPU_ATTENTION_MAX_BLOCK_ROWS. Blocks of 128 rows rather than 32 made the asr encoder's attention
 * (Tk 100) 11% faster both ways on a Zen 2 core: each head's keys and values are transposed for the
 * products once per block, and the key and value gradients summed per block. */
#define TF_CPU_ATTENTION_BLOCK_ROWS 32
#define TF_CPU_ATTENTION_MAX_BLOCK_ROWS 128
#define TF_CPU_ATTENTION_BLOCK_ELEMENTS ((int64_t)32768)

/* The convolution geometry (core/conv_geometry.h); the CPU blocks it by response positions (chunk,
 * chunks). */
typedef tf_conv_geometry tf_cpu_conv_geometry;

/* Fills *g for conv op `op` (conv1d, conv2d, conv_transpose2d and the conv grad ops) from its
 * operands, which the plan verifier has checked; returns false for any other op. */
bool tf_cpu_conv_geometry_get(tf_op op, const tf_attrs *attrs, const tf_tensor_ref *inputs,
                              const tf_tensor_ref *outputs, tf_cpu_conv_geometry *g);

/* Rounds an element count up to a multiple of TF_CPU_WORKSPACE_ALIGN_ELEMENTS. */
int64_t tf_cpu_workspace_round(int64_t elements);

/* One thread's im2col block, rounded; 0 for direct convolutions. */
int64_t tf_cpu_conv_column_elements(const tf_cpu_conv_geometry *g);

/* How many threads conv op `op` uses (and has a column block for): min(threads, its tasks), at
 * least 1. Tasks are (image, block of positions) pairs for the forward convolutions and the weight
 * gradient, whole images for grad_input and conv_transpose2d (they scatter-add into the image).
 * The weight gradient sums one partial per worker, in worker order. */
int64_t tf_cpu_conv_workers(tf_op op, const tf_cpu_conv_geometry *g, int32_t threads);

/* Workspace elements of conv op `op` with `threads` threads (w = tf_cpu_conv_workers()):
 *   forward, grad_input, conv_transpose2d: w x column block;
 *   grad_weight: w x column block + (w - 1) x rounded weight elements (the first worker
 *   accumulates in the output itself). */
int64_t tf_cpu_conv_workspace_elements(tf_op op, const tf_cpu_conv_geometry *g, int32_t threads);

/* Query rows per attention block for query length Tq and key length Tk: the largest multiple of
 * TF_CPU_ATTENTION_BLOCK_ROWS up to TF_CPU_ATTENTION_MAX_BLOCK_ROWS whose probabilities and their
 * gradient (2 x rows x Tk) fit TF_CPU_ATTENTION_BLOCK_ELEMENTS (TF_CPU_ATTENTION_BLOCK_ROWS when none
 * does), and at most Tq. */
int64_t tf_cpu_attention_block_rows(int64_t query_length, int64_t key_length);

/* One thread's attention scratch, rounded: block rows x Tk for attention, twice that for
 * attention_grad (probabilities and their gradient). */
int64_t tf_cpu_attention_thread_elements(tf_op op, int64_t query_length, int64_t key_length);

/* How many threads attention op `op` uses: min(threads, tasks), at least 1. Tasks are (batch, head,
 * block of query rows) for attention and (batch, head) for attention_grad, whose key and value
 * gradients accumulate over every query row of their head. */
int64_t tf_cpu_attention_workers(tf_op op, int64_t batch, int64_t heads, int64_t query_length, int64_t key_length,
                                 int32_t threads);

/* Workspace bytes the CPU kernel of `op` needs for these operand shapes and `threads` threads, in
 * the given compute type (element size 4 or 8); a step on f16/bf16 data, its half slices'
 * (core/half_slices.h). The compiler plans exactly this much; kernels never
 * allocate. */
int64_t tf_cpu_workspace_bytes(tf_op op, const tf_attrs *attrs, int32_t n_inputs, const tf_tensor_ref *inputs,
                               int32_t n_outputs, const tf_tensor_ref *outputs, int32_t threads, int32_t element_size);

#endif
