/* The one BLAS entry of the CPU kernels: C = alpha op(A) op(B) + beta C, row-major, for the kernel
 * file's `real` (real.h). Every matmul and convolution product goes through it; of the attention's,
 * the f64 build's, the f32 unmasked blocks of 64K multiply-adds or more (kernels/cpu/attention.c,
 * blas_pays) and the f32 score products of heads wider than 256 (the rest: kernels/cpu/tile.h).
 *
 * Beyond cblas it (1) accepts empty operands (cblas rejects leading dimensions of 0) and (2) makes
 * no heap allocation. The second matters for the memory promise (issue 12: no allocation after
 * session create, measured by tests/alloc_probe): OpenBLAS 0.3.21 (Debian 12) on AVX-512 cores
 * (SKYLAKEX, COOPERLAKE, SAPPHIRERAPIDS) sends products with M·N·K <= 100³ to its "small matrix"
 * kernels (kernel/x86_64/sgemm_small_kernel_permit_skylakex.c), and the column-major NN one
 * (sgemm_small_kernel_nn_skylakex.c) mallocs and frees a [rows, K] copy of A whenever the rows
 * left after its 16-row blocks number 1 to 8 and K >= 32. Our row-major NN call is that kernel with
 * its rows = our columns n. Then the last n % 16 columns are computed here instead, by a plain loop
 * (at most 8 columns of a product under 100³ multiply-adds), and BLAS gets the first n - n % 16,
 * which leave no rows for the copy. The other small kernels (NT, TN) allocate nothing. (3) It asks
 * BLAS for beta = 0 as a memset and beta = 1 (tf_cpu_gemm_zero). */
#ifndef TIGHTFIT_KERNELS_CPU_GEMM_H
#define TIGHTFIT_KERNELS_CPU_GEMM_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/real.h"

#define TF_CPU_GEMM_SMALL_WORK 1000000.0 /* OpenBLAS's small-kernel limit on M·N·K */
#define TF_CPU_GEMM_COPY_MIN_K 32        /* below it the NN small kernel copies nothing */
#define TF_CPU_GEMM_COPY_MAX_TAIL 8      /* leftover rows it copies: 1 to 8 of a 16-row block */

/* Columns [first, n) of C = alpha A B + beta C (A [m, k], B [k, n], neither transposed), by loops:
 * at most TF_CPU_GEMM_COPY_MAX_TAIL columns, summed in k order. */
static inline void tf_cpu_gemm_tail_columns(int64_t m, int64_t n, int64_t first, int64_t k, real alpha, const real *a,
                                            int64_t lda, const real *b, int64_t ldb, real beta, real *c, int64_t ldc) {
  const int64_t width = n - first;
  for (int64_t i = 0; i < m; i++) {
    real sums[TF_CPU_GEMM_COPY_MAX_TAIL] = {0};
    for (int64_t p = 0; p < k; p++) {
      const real a_ip = a[i * lda + p];
      const real *b_row = b + p * ldb + first;
      for (int64_t j = 0; j < width; j++)
        sums[j] += a_ip * b_row[j];
    }
    real *c_row = c + i * ldc + first;
    for (int64_t j = 0; j < width; j++)
      c_row[j] = beta == 0 ? alpha * sums[j] : alpha * sums[j] + beta * c_row[j];
  }
}

/* Whether OpenBLAS's NN small kernel would allocate for this row-major product (see the top). */
static inline bool tf_cpu_gemm_would_copy(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k) {
  const int64_t tail = n % 16;
  return !transpose_a && !transpose_b && (double)m * (double)n * (double)k <= TF_CPU_GEMM_SMALL_WORK &&
         k >= TF_CPU_GEMM_COPY_MIN_K && tail >= 1 && tail <= TF_CPU_GEMM_COPY_MAX_TAIL;
}

/* C[m, n] = 0 over rows of ldc elements: what beta = 0 asks of BLAS, done before a beta = 1 call.
 * OpenBLAS 0.3.21 zeroes C for beta = 0 in its own pass (sgemm_beta: scalar stores, 5% of the asr
 * bench step in perf), and the kernel then adds into C all the same: memset and beta = 1 run the
 * same kernel on the same zeros, so the same bits, and took 1-15% less time a product on a Zen 2
 * core (256 x 512 x 128: 0.426 -> 0.397 ms; 512 x 512 x 64: 0.477 -> 0.411; 64³ 0.009 -> 0.007;
 * large depths ~1%). */
static inline void tf_cpu_gemm_zero(int64_t m, int64_t n, real *c, int64_t ldc) {
  if (ldc == n) {
    memset(c, 0, sizeof(real) * (size_t)(m * n));
    return;
  }
  for (int64_t i = 0; i < m; i++)
    memset(c + i * ldc, 0, sizeof(real) * (size_t)n);
}

/* C = alpha op(A) op(B) + beta C, row-major; op transposes when asked. Empty operands are allowed
 * (k == 0 scales C by beta). beta = 0 zeroes C first and adds (tf_cpu_gemm_zero). Makes no heap
 * allocation (see the top of this file). */
static inline void tf_cpu_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, real alpha,
                               const real *a, int64_t lda, const real *b, int64_t ldb, real beta, real *c,
                               int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++)
        c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
    return;
  }
  if (beta == 0) {
    tf_cpu_gemm_zero(m, n, c, ldc);
    beta = 1;
  }
  int64_t blas_columns = n;
  if (tf_cpu_gemm_would_copy(transpose_a, transpose_b, m, n, k)) {
    blas_columns = n - n % 16;
    tf_cpu_gemm_tail_columns(m, n, blas_columns, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (blas_columns == 0)
      return;
  }
  TF_REAL_GEMM(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, (int)m,
               (int)blas_columns, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

#endif
