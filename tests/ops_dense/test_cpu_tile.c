/* kernels/cpu/tile.c, the attention's register-tiled products, against two references written here:
 *   - a scalar float loop in the documented order (each product rounded, summed over p in
 *     increasing order, then alpha times the sum, plus C when accumulating): equal byte for byte,
 *     which is what makes the clone the loader picks (SSE2, AVX2, AVX-512F) not matter;
 *   - a float64 loop: within 1e-5 relative, so that garbage equal to both cannot pass.
 * Shapes with every kind of tail (rows past a 4-row tile, columns past 16 and 8), both strides of A,
 * k = 0, the NT form's BLAS path past 256 (float64 only), and the causal bands: a banded NN product
 * of an A that is 0 outside the band equals the full product bit for bit, and a banded NT product's
 * elements inside the band do. The f64 build's forms (BLAS) against the float64 loop too. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu/tile.h"

void tf_cpu_tile_nn_f64(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t a_row, int64_t a_col,
                        const double *b, int64_t ldb, tf_cpu_band band, bool accumulate, double *c, int64_t ldc);
void tf_cpu_tile_nt_f64(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t lda, const double *b,
                        int64_t ldb, tf_cpu_band band, bool accumulate, double *c, int64_t ldc);

static tf_test_counts counts;

static float uniform(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) / 16777216.0) * 2 - 1;
}

static float *random_floats(int64_t n, uint32_t seed) {
  float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++)
    x[i] = uniform(&seed);
  return x;
}

/* Whether term p of row i is inside `band` (tile.h). */
static bool inside(tf_cpu_band band, int64_t i, int64_t p) {
  if (band.kind == TF_CPU_BAND_UPTO)
    return p <= i + band.offset;
  if (band.kind == TF_CPU_BAND_FROM)
    return p >= i - band.offset;
  return true;
}

typedef struct product {
  int64_t m, n, k;
  bool nt, transposed_a, accumulate;
  float alpha;
  tf_cpu_band band;
} product;

/* A(i, p) of the case's A array: [m, k] row-major, or [k, m] when transposed_a. */
static int64_t a_index(const product *pr, int64_t i, int64_t p) {
  return pr->transposed_a ? p * pr->m + i : i * pr->k + p;
}

/* B's (p, j) term: B [k, n] row-major for NN, [n, k] for NT. */
static int64_t b_index(const product *pr, int64_t p, int64_t j) { return pr->nt ? j * pr->k + p : p * pr->n + j; }

static void check_product(const product *pr, uint32_t seed) {
  const int64_t m = pr->m, n = pr->n, k = pr->k, ldc = n + 3;
  float *a = random_floats(m * k, seed), *b = random_floats(k * n, seed + 1), *c0 = random_floats(m * ldc, seed + 2);
  if (!pr->nt) // the NN form skips only terms whose A is 0
    for (int64_t i = 0; i < m; i++)
      for (int64_t p = 0; p < k; p++)
        if (!inside(pr->band, i, p))
          a[a_index(pr, i, p)] = 0;
  float *c = malloc(sizeof(float) * (size_t)(m * ldc + 1));
  memcpy(c, c0, sizeof(float) * (size_t)(m * ldc));
  if (pr->nt)
    tf_cpu_tile_nt_f32(m, n, k, pr->alpha, a, k, b, k, pr->band, pr->accumulate, c, ldc);
  else
    tf_cpu_tile_nn_f32(m, n, k, pr->alpha, a, pr->transposed_a ? 1 : k, pr->transposed_a ? m : 1, b, n, pr->band,
                       pr->accumulate, c, ldc);
  double *a64 = malloc(sizeof(double) * (size_t)(m * k + 1)), *b64 = malloc(sizeof(double) * (size_t)(k * n + 1));
  double *c64 = malloc(sizeof(double) * (size_t)(m * ldc + 1));
  for (int64_t i = 0; i < m * k; i++)
    a64[i] = a[i];
  for (int64_t i = 0; i < k * n; i++)
    b64[i] = b[i];
  for (int64_t i = 0; i < m * ldc; i++)
    c64[i] = c0[i];
  if (pr->nt)
    tf_cpu_tile_nt_f64(m, n, k, pr->alpha, a64, k, b64, k, pr->band, pr->accumulate, c64, ldc);
  else
    tf_cpu_tile_nn_f64(m, n, k, pr->alpha, a64, pr->transposed_a ? 1 : k, pr->transposed_a ? m : 1, b64, n, pr->band,
                       pr->accumulate, c64, ldc);
  int64_t bit_differences = 0, far = 0, f64_far = 0, padding_written = 0;
  double worst = 0;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      if (j >= n) {
        padding_written += memcmp(&c[i * ldc + j], &c0[i * ldc + j], sizeof(float)) != 0;
        continue;
      }
      if (pr->nt && !inside(pr->band, i, j))
        continue;
      float sum = 0;
      double exact = 0;
      for (int64_t p = 0; p < k; p++) {
        sum += a[a_index(pr, i, p)] * b[b_index(pr, p, j)];
        exact += (double)a[a_index(pr, i, p)] * b[b_index(pr, p, j)];
      }
      const float ordered = pr->accumulate ? c0[i * ldc + j] + pr->alpha * sum : pr->alpha * sum;
      exact = pr->accumulate ? c0[i * ldc + j] + pr->alpha * exact : pr->alpha * exact;
      const double error = fabs(c[i * ldc + j] - exact) / (1 + fabs(exact));
      worst = error > worst ? error : worst;
      bit_differences += memcmp(&c[i * ldc + j], &ordered, sizeof(float)) != 0;
      far += error > 1e-5;
      f64_far += fabs(c64[i * ldc + j] - exact) / (1 + fabs(exact)) > 1e-12;
    }
  }
  const bool blas_path = pr->nt && k > 256; // BLAS's own order: not the scalar loop's bits
  CHECK(&counts, (blas_path || bit_differences == 0) && far == 0 && f64_far == 0 && padding_written == 0,
        "%s %lldx%lldx%lld%s%s band %d/%lld: %lld elements differ from the ordered loop, %lld far from float64 "
        "(worst %.2e), %lld of the f64 build's, %lld past n written",
        pr->nt ? "NT" : "NN", (long long)m, (long long)n, (long long)k, pr->transposed_a ? " A transposed" : "",
        pr->accumulate ? " accumulating" : "", (int)pr->band.kind, (long long)pr->band.offset,
        (long long)bit_differences, (long long)far, worst, (long long)f64_far, (long long)padding_written);
  free(a);
  free(b);
  free(c0);
  free(c);
  free(a64);
  free(b64);
  free(c64);
}

int main(void) {
  const int64_t rows[] = {1, 3, 4, 5, 9, 32, 33};
  const int64_t columns[] = {1, 7, 8, 9, 15, 16, 17, 24, 33, 64};
  const int64_t depths[] = {0, 1, 5, 32, 64, 100};
  const tf_cpu_band bands[] = {{TF_CPU_BAND_ALL, 0},   {TF_CPU_BAND_UPTO, 0}, {TF_CPU_BAND_UPTO, 5},
                               {TF_CPU_BAND_UPTO, -3}, {TF_CPU_BAND_FROM, 0}, {TF_CPU_BAND_FROM, 7}};
  uint32_t seed = 1;
  int products = 0;
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
    for (size_t c = 0; c < sizeof columns / sizeof *columns; c++)
      for (size_t d = 0; d < sizeof depths / sizeof *depths; d++)
        for (int form = 0; form < 3; form++) {
          const tf_cpu_band band = bands[(r + c + d + (size_t)form) % (sizeof bands / sizeof *bands)];
          product pr = {rows[r], columns[c], depths[d], form == 2, form == 1, (r + c) % 2 == 0, d % 2 ? 0.125f : 1.0f,
                        band};
          if (pr.nt && band.kind == TF_CPU_BAND_FROM) // attention's NT products take UPTO bands only
            pr.band.kind = TF_CPU_BAND_UPTO;
          check_product(&pr, seed++);
          products++;
        }
  // The NT form past its stack copy (BLAS), and a long NN sum.
  check_product(&(product){9, 20, 300, true, false, false, 0.5f, {TF_CPU_BAND_UPTO, 2}}, seed++);
  check_product(&(product){7, 40, 1000, false, true, true, 1.0f, {TF_CPU_BAND_FROM, 3}}, seed++);
  printf("%d products of 1-33 rows, 1-64 columns, depth 0-100, and two long ones: the ordered float loop's bits, "
         "float64 within 1e-5\n",
         products);
  return tf_test_finish("test_cpu_tile", &counts);
}
