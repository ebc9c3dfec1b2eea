/* Register-tiled small products (kernels/cpu/tile.h).
 *
 * The f32 build keeps a 4 x 16 block of C in eight 8-float vectors (GCC's vector extension: AVX
 * registers in the AVX2 and AVX-512 clones, pairs of SSE registers in the baseline one) and adds one
 * rank-1 update per p: two vector loads of B, a broadcast of a(i, p) per row, eight multiplies and
 * eight adds, never an FMA (-ffp-contract=off), so every lane sums in p order and gives the scalar
 * loop's bits. On a Zen 2 core that is 65 GFLOP/s at 32 x 64 x 32, where OpenBLAS's sgemm reaches
 * 45. The NT form first copies 16 rows of B, transposed and padded with zeros, to the stack.
 *
 * The f64 build (the reference) hands both forms to BLAS and ignores the band: a skipped term is a
 * product with 0. */
#include "kernels/cpu/tile.h"

#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

#ifdef TF_REAL_F64

void TF_REAL_NAME(tf_cpu_tile_nn)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t a_row,
                                  int64_t a_col, const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c,
                                  int64_t ldc) {
  (void)band;
  const bool transposed = a_col != 1;
  int64_t lda = transposed ? a_col : a_row;
  if (!transposed && lda < k) // one row: its stride is never used
    lda = k;
  tf_cpu_gemm(transposed, false, m, n, k, alpha, a, lda, b, ldb, accumulate ? 1 : 0, c, ldc);
}

void TF_REAL_NAME(tf_cpu_tile_nt)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda,
                                  const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c, int64_t ldc) {
  (void)band;
  tf_cpu_gemm(false, true, m, n, k, alpha, a, lda, b, ldb, accumulate ? 1 : 0, c, ldc);
}

#else

#define TILE_ROWS 4
#define TILE_COLUMNS 16
#define NT_DEPTH 256 /* the NT form's largest k: its transposed B is NT_DEPTH x 16 floats (16 KiB) */

typedef float v8 __attribute__((vector_size(32)));

/* The summed range [*first, *end) of the rows [row, row + rows) of C under `band`, within [0, k). */
static inline void band_range(tf_cpu_band band, int64_t row, int64_t rows, int64_t k, int64_t *first, int64_t *end) {
  *first = 0;
  *end = k;
  if (band.kind == TF_CPU_BAND_UPTO && row + rows + band.offset < k)
    *end = row + rows + band.offset > 0 ? row + rows + band.offset : 0;
  if (band.kind == TF_CPU_BAND_FROM && row - band.offset > 0)
    *first = row - band.offset < k ? row - band.offset : k;
}

/* Whether columns [column, column + columns) hold a term of rows [row, row + rows) under `band`. */
static inline bool band_touches(tf_cpu_band band, int64_t row, int64_t rows, int64_t column, int64_t columns) {
  if (band.kind == TF_CPU_BAND_UPTO)
    return column <= row + rows - 1 + band.offset;
  if (band.kind == TF_CPU_BAND_FROM)
    return column + columns - 1 >= row - band.offset;
  return true;
}

/* c[0, columns) = alpha sum (plus c), through a vector when the row is whole. */
static inline __attribute__((always_inline)) void store_row(float *c, const v8 *sums, int vectors, int64_t columns,
                                                            float alpha, bool accumulate) {
  float lanes[TILE_COLUMNS];
  for (int v = 0; v < vectors; v++) {
    v8 result = alpha * sums[v];
    if (columns == 8 * vectors) {
      if (accumulate) {
        v8 old;
        memcpy(&old, c + 8 * v, sizeof old);
        result = old + result;
      }
      memcpy(c + 8 * v, &result, sizeof result);
    } else {
      memcpy(lanes + 8 * v, &result, sizeof result);
    }
  }
  if (columns == 8 * vectors)
    return;
  for (int64_t j = 0; j < columns; j++)
    c[j] = accumulate ? c[j] + lanes[j] : lanes[j];
}

/* Rows [0, rows) of a block of C, `vectors` x 8 columns wide (the first `columns` stored): the sum
 * over p in [first, end) of a(r, p) b[p][j]. a_rows[r] points at row r's a(r, 0); rows past
 * `rows` repeat the last one and are not stored. */
static inline __attribute__((always_inline)) void block(int vectors, int rows, int64_t columns, int64_t first,
                                                        int64_t end, const float *const a_rows[TILE_ROWS],
                                                        int64_t a_col, const float *b, int64_t ldb, float alpha,
                                                        bool accumulate, float *c, int64_t ldc) {
  v8 sums[TILE_ROWS][2];
  for (int r = 0; r < TILE_ROWS; r++)
    for (int v = 0; v < 2; v++)
      sums[r][v] = (v8){0};
  for (int64_t p = first; p < end; p++) {
    v8 b_row[2];
    for (int v = 0; v < vectors; v++)
      memcpy(&b_row[v], b + p * ldb + 8 * v, sizeof b_row[v]);
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++) {
      const float a_rp = a_rows[r][p * a_col];
      for (int v = 0; v < vectors; v++)
        sums[r][v] += a_rp * b_row[v];
    }
  }
  for (int r = 0; r < rows; r++)
    store_row(c + r * ldc, sums[r], vectors, columns, alpha, accumulate);
}

/* Columns [column, n) of rows [0, rows) of C (n - column < 8), one element at a time. */
static void tail_columns(int rows, int64_t column, int64_t n, int64_t first, int64_t end,
                         const float *const a_rows[TILE_ROWS], int64_t a_col, const float *b, int64_t ldb, float alpha,
                         bool accumulate, float *c, int64_t ldc) {
  for (int r = 0; r < rows; r++)
    for (int64_t j = column; j < n; j++) {
      float sum = 0;
      for (int64_t p = first; p < end; p++)
        sum += a_rows[r][p * a_col] * b[p * ldb + j];
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + alpha * sum : alpha * sum;
    }
}

TF_CPU_VECTOR_CLONES static void nn(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t a_row,
                                    int64_t a_col, const float *b, int64_t ldb, tf_cpu_band band, bool accumulate,
                                    float *c, int64_t ldc) {
  for (int64_t row = 0; row < m; row += TILE_ROWS) {
    const int rows = m - row < TILE_ROWS ? (int)(m - row) : TILE_ROWS;
    const float *a_rows[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; r++)
      a_rows[r] = a + (row + (r < rows ? r : rows - 1)) * a_row;
    int64_t first, end;
    band_range(band, row, rows, k, &first, &end);
    float *c_rows = c + row * ldc;
    int64_t column = 0;
    for (; column + TILE_COLUMNS <= n; column += TILE_COLUMNS)
      block(2, rows, TILE_COLUMNS, first, end, a_rows, a_col, b + column, ldb, alpha, accumulate, c_rows + column, ldc);
    if (column + 8 <= n) {
      block(1, rows, 8, first, end, a_rows, a_col, b + column, ldb, alpha, accumulate, c_rows + column, ldc);
      column += 8;
    }
    if (column < n)
      tail_columns(rows, column, n, first, end, a_rows, a_col, b, ldb, alpha, accumulate, c_rows, ldc);
  }
}

/* b's rows [column, column + columns) transposed into t [k, 16], the columns past `columns` 0. */
static void transpose_rows(const float *b, int64_t ldb, int64_t column, int64_t columns, int64_t k, float *t) {
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < TILE_COLUMNS; j++)
      t[p * TILE_COLUMNS + j] = j < columns ? b[(column + j) * ldb + p] : 0;
}

TF_CPU_VECTOR_CLONES static void nt(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                                    const float *b, int64_t ldb, tf_cpu_band band, bool accumulate, float *c,
                                    int64_t ldc) {
  float transposed[NT_DEPTH * TILE_COLUMNS] __attribute__((aligned(32)));
  for (int64_t column = 0; column < n; column += TILE_COLUMNS) {
    const int64_t columns = n - column < TILE_COLUMNS ? n - column : TILE_COLUMNS;
    bool copied = false;
    for (int64_t row = 0; row < m; row += TILE_ROWS) {
      const int rows = m - row < TILE_ROWS ? (int)(m - row) : TILE_ROWS;
      if (!band_touches(band, row, rows, column, columns))
        continue;
      if (!copied)
        transpose_rows(b, ldb, column, columns, k, transposed);
      copied = true;
      const float *a_rows[TILE_ROWS];
      for (int r = 0; r < TILE_ROWS; r++)
        a_rows[r] = a + (row + (r < rows ? r : rows - 1)) * lda;
      block(2, rows, columns, 0, k, a_rows, 1, transposed, TILE_COLUMNS, alpha, accumulate, c + row * ldc + column,
            ldc);
    }
  }
}

void TF_REAL_NAME(tf_cpu_tile_nn)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t a_row,
                                  int64_t a_col, const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c,
                                  int64_t ldc) {
  if (k > 0) {
    nn(m, n, k, alpha, a, a_row, a_col, b, ldb, band, accumulate, c, ldc);
    return;
  }
  for (int64_t i = 0; i < m && !accumulate; i++) // nothing summed: 0, and A (perhaps empty) is never read
    memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
}

void TF_REAL_NAME(tf_cpu_tile_nt)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda,
                                  const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c, int64_t ldc) {
  if (k > NT_DEPTH) // a head wider than the stack copy: BLAS, every element written
    tf_cpu_gemm(false, true, m, n, k, alpha, a, lda, b, ldb, accumulate ? 1 : 0, c, ldc);
  else
    nt(m, n, k, alpha, a, lda, b, ldb, band, accumulate, c, ldc);
}

#endif
