/* Small products for the fused attention, register-tiled (kernels/cpu/tile.c).
 *
 * Attention multiplies blocks of 32 to 128 query rows by one head's keys: products of 32 x 64 x 32
 * and the like, where OpenBLAS spends as long on the call, the packing and zeroing C as on the arithmetic
 * (19-25 GFLOP/s on a Zen 2 core at the char gpt's shapes, against 74 for the model's big products).
 * These compute 4 x 16 tiles of C in registers, straight from the operands, and skip the tiles a
 * causal mask zeroes. The attention kernel takes them under a causal mask and for the smallest
 * products; unmasked products of 64K multiply-adds or more (NN: 32 columns or more) go to BLAS, which
 * is faster there now that C is zeroed by a memset (kernels/cpu/attention.c, blas_pays). Every
 * element of C is the sum over p in increasing order of a(i,p) b(p,j), each product rounded, then
 * alpha times it (plus C): the same bits on every vector width.
 *
 * A band says which terms of row i of C may be skipped because the operand is 0 there (a causal
 * mask): none, only p <= i + offset (TF_CPU_BAND_UPTO), or only p >= i - offset
 * (TF_CPU_BAND_FROM), p being the summed index for tf_cpu_tile_nn and the column for the NT form. */
#ifndef TIGHTFIT_KERNELS_CPU_TILE_H
#define TIGHTFIT_KERNELS_CPU_TILE_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/real.h"

typedef enum tf_cpu_band_kind { TF_CPU_BAND_ALL, TF_CPU_BAND_UPTO, TF_CPU_BAND_FROM } tf_cpu_band_kind;

typedef struct tf_cpu_band {
  tf_cpu_band_kind kind;
  int64_t offset;
} tf_cpu_band;

/* C[m, n] = alpha sum_p A(i, p) B[p, j] over p in [0, k), or C plus that when `accumulate`: A(i, p)
 * at a[i a_row + p a_col] (one of the strides is 1), B and C row-major. Terms outside `band` are
 * skipped; elements of C the band leaves empty are still written. */
void TF_REAL_NAME(tf_cpu_tile_nn)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t a_row,
                                  int64_t a_col, const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c,
                                  int64_t ldc);

/* C[m, n] = alpha sum_p A[i, p] B[j, p] over p in [0, k) (plus C when `accumulate`), A [m, k] and
 * B [n, k] row-major. Under a band, C(i, j) outside it may be left unwritten (whole 4 x 16 tiles
 * outside it are). */
void TF_REAL_NAME(tf_cpu_tile_nt)(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda,
                                  const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c, int64_t ldc);

#endif
