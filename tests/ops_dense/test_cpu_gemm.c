/* kernels/cpu/gemm.h, the CPU kernels' one BLAS entry: (1) every shape, with and without the
 * columns it computes itself, against a float64 triple loop, for alpha/beta and transposes; (2) the
 * reason it exists, measured from outside by the allocation probe (tests/alloc_probe): a plain
 * cblas_sgemm of such a shape allocates on CPUs where OpenBLAS takes its AVX-512 small kernel
 * (printed, not required: other CPUs do not), and tf_cpu_gemm never does. (3) The kernel that
 * goes through it with beta = 1, matmul_accumulate (sum += op(a) op(b), kernels/cpu/matmul.c), f32
 * and f64 on 1 and 2 threads against the same triple loop plus the sum it started from, and, under
 * the probe, with no heap allocation per call. (4) Its bits on any thread count and in a row cut at
 * a tile boundary, (5) a small weight's gradient in narrow tiles and over depth slices, (6) a product
 * of few rows in narrow tiles and as a half slice, (7) depth slices of a product narrowed by its
 * whole depth. test_cpu_gemm_haswell runs it on OpenBLAS's
 * Haswell kernels, whose bits depend on the column tiles. test_cpu_gemm_avx512 runs it again with OpenBLAS forced to
 * its SkylakeX kernels (TF_TEST_BLAS_AVX512=1, skipped on a CPU without AVX-512), where the plain products that
 * tf_cpu_gemm_would_copy names must allocate: the reason for the guard, shown on this machine even
 * where the environment forces 256-bit kernels (OPENBLAS_CORETYPE=Haswell). */
#define _GNU_SOURCE /* the probe client's dlsym(RTLD_DEFAULT) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_probe/probe_client.h"
#include "check.h"
#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernels.h"

static tf_test_counts counts;

static float *random_matrix(int64_t count, uint32_t *state) {
  float *m = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
  for (int64_t i = 0; i < count; i++) {
    *state = *state * 1664525u + 1013904223u;
    m[i] = (float)((*state >> 8) / 16777216.0 * 2.0 - 1.0);
  }
  return m;
}

/* C = alpha op(A) op(B) + beta C0 in float64, row-major. */
static double reference(bool ta, bool tb, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                        int64_t i, int64_t j) {
  double sum = 0;
  for (int64_t p = 0; p < k; p++)
    sum += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
  return sum;
}

static void check_shape(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  uint32_t state = (uint32_t)(m * 131 + n * 17 + k);
  int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n + 3; /* a C wider than n: its padding must stay */
  float *a = random_matrix(ta ? k * m : m * k, &state), *b = random_matrix(tb ? n * k : k * n, &state);
  float *c = random_matrix(m * ldc, &state), *c0 = malloc(sizeof(float) * (size_t)(m * ldc > 0 ? m * ldc : 1));
  for (int64_t i = 0; i < m * ldc; i++)
    c0[i] = c[i];
  tf_cpu_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  double worst = 0, scale = 1e-30;
  bool padding_kept = true;
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < n; j++) {
      double want =
          alpha * reference(ta, tb, k, a, lda, b, ldb, i, j) + (beta == 0 ? 0 : beta * (double)c0[i * ldc + j]);
      worst = fmax(worst, fabs((double)c[i * ldc + j] - want));
      scale = fmax(scale, fabs(want));
    }
    for (int64_t j = n; j < ldc; j++)
      padding_kept = padding_kept && c[i * ldc + j] == c0[i * ldc + j];
  }
  double error = worst / scale;
  bool own_columns = tf_cpu_gemm_would_copy(ta, tb, m, n, k);
  printf("%-4s %s%s m=%-4lld n=%-4lld k=%-4lld alpha %g beta %g%s: error %.2e\n",
         error < 1e-5 && padding_kept ? "ok" : "FAIL", ta ? "A^T" : "A", tb ? "B^T" : "B", (long long)m, (long long)n,
         (long long)k, alpha, beta, own_columns ? " (last n % 16 columns by loops)" : "", error);
  CHECK(&counts, error < 1e-5, "m=%lld n=%lld k=%lld: relative error %.3e", (long long)m, (long long)n, (long long)k,
        error);
  CHECK(&counts, padding_kept, "m=%lld n=%lld k=%lld: wrote past column n", (long long)m, (long long)n, (long long)k);
  free(a);
  free(b);
  free(c);
  free(c0);
}

static void check_values(void) {
  /* Shapes on both sides of every condition of tf_cpu_gemm_would_copy (gemm.h). */
  const int64_t shapes[][3] = {{5, 33, 40},     {7, 8, 32},  {3, 1, 64},  {64, 24, 32}, {9, 40, 100},
                               {1, 17, 31},     {6, 16, 64}, {6, 25, 48}, {12, 9, 33},  {100, 100, 100},
                               {101, 100, 100}, {0, 9, 40},  {4, 0, 40},  {4, 9, 0},    {3, 200, 50}};
  int64_t taken = 0;
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    for (int t = 0; t < 4; t++) {
      bool ta = t & 1, tb = t & 2;
      taken += tf_cpu_gemm_would_copy(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2]);
      check_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1, 0);
    }
    check_shape(false, false, shapes[s][0], shapes[s][1], shapes[s][2], 0.5f, 1);
    check_shape(false, false, shapes[s][0], shapes[s][1], shapes[s][2], -2, 0.25f);
  }
  CHECK(&counts, taken == 7, "%lld shapes took the own-columns path, not 7", (long long)taken);
}

/* A CPU tensor over `data` ([rows, cols], f32 or f64). */
static tf_cpu_tensor matrix(void *data, tf_dtype dtype, int64_t rows, int64_t cols) {
  tf_cpu_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.count = rows * cols;
  return t;
}

/* matmul_accumulate(sum [m, n], a, b) through the op's CPU kernel in f32 or f64 on `threads`, as a
 * half slice of a product of `whole_rows` rows runs it (0: the product is whole). */
static void accumulate_slice(bool f64, int32_t threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k, void *sum,
                             void *a, void *b, int64_t whole_rows) {
  const tf_dtype dtype = TF_F32; /* the f64 kernels take f32 tensors held as double (kernels/cpu/real.h) */
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_MATMUL;
  attrs.u.matmul.transpose_a = ta;
  attrs.u.matmul.transpose_b = tb;
  const tf_cpu_tensor inputs[3] = {matrix(sum, dtype, m, n), ta ? matrix(a, dtype, k, m) : matrix(a, dtype, m, k),
                                   tb ? matrix(b, dtype, n, k) : matrix(b, dtype, k, n)};
  const tf_cpu_context context = {.threads = threads};
  const tf_cpu_args args = {.op = TF_OP_MATMUL_ACCUMULATE,
                            .attrs = &attrs,
                            .n_inputs = 3,
                            .inputs = inputs,
                            .n_outputs = 0,
                            .outputs = NULL,
                            .context = &context,
                            .whole_rows = whole_rows};
  tf_cpu_kernel_get(TF_OP_MATMUL_ACCUMULATE, f64)(&args);
}

/* matmul_accumulate(sum [m, n], a, b) through the op's CPU kernel in f32 or f64 on `threads`. */
static void accumulate_kernel(bool f64, int32_t threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k, void *sum,
                              void *a, void *b) {
  accumulate_slice(f64, threads, ta, tb, m, n, k, sum, a, b, 0);
}

/* sum0 + op(a) op(b) from the kernel against float64 loops: f32 and f64, 1 and 2 threads. */
static void check_accumulate(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  uint32_t state = (uint32_t)(m * 7 + n * 3 + k + (ta ? 1000 : 0) + (tb ? 2000 : 0));
  float *a = random_matrix(m * k, &state), *b = random_matrix(k * n, &state), *sum0 = random_matrix(m * n, &state);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  double *want = malloc(sizeof(double) * (size_t)(m * n > 0 ? m * n : 1)), scale = 1e-30;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      want[i * n + j] = (double)sum0[i * n + j] + reference(ta, tb, k, a, lda, b, ldb, i, j);
      scale = fmax(scale, fabs(want[i * n + j]));
    }
  for (int variant = 0; variant < 4; variant++) {
    const bool f64 = variant & 1;
    const int32_t threads = variant & 2 ? 2 : 1;
    const size_t size = f64 ? sizeof(double) : sizeof(float);
    void *wa = malloc(size * (size_t)(m * k + 1)), *wb = malloc(size * (size_t)(k * n + 1));
    void *sum = malloc(size * (size_t)(m * n + 1));
    for (int64_t i = 0; i < m * k; i++)
      f64 ? (void)(((double *)wa)[i] = a[i]) : (void)(((float *)wa)[i] = a[i]);
    for (int64_t i = 0; i < k * n; i++)
      f64 ? (void)(((double *)wb)[i] = b[i]) : (void)(((float *)wb)[i] = b[i]);
    for (int64_t i = 0; i < m * n; i++)
      f64 ? (void)(((double *)sum)[i] = sum0[i]) : (void)(((float *)sum)[i] = sum0[i]);
    accumulate_kernel(f64, threads, ta, tb, m, n, k, sum, wa, wb);
    double worst = 0;
    for (int64_t i = 0; i < m * n; i++)
      worst = fmax(worst, fabs((f64 ? ((double *)sum)[i] : (double)((float *)sum)[i]) - want[i]));
    const double error = worst / scale, tolerance = f64 ? 1e-12 : 1e-5;
    printf("%-4s matmul_accumulate %s%s m=%-3lld n=%-3lld k=%-3lld %s %d thread%s: sum0 + product, error %.2e\n",
           error < tolerance ? "ok" : "FAIL", ta ? "A^T" : "A", tb ? "B^T" : "B", (long long)m, (long long)n,
           (long long)k, f64 ? "f64" : "f32", threads, threads > 1 ? "s" : "", error);
    CHECK(&counts, error < tolerance, "matmul_accumulate m=%lld n=%lld k=%lld %s: relative error %.3e", (long long)m,
          (long long)n, (long long)k, f64 ? "f64" : "f32", error);
    free(wa);
    free(wb);
    free(sum);
  }
  free(a);
  free(b);
  free(sum0);
  free(want);
}

static void check_accumulate_kernel(void) {
  /* the weight-gradient shapes (a [rows, out]^T x [rows, in]), the own-columns path, k = 0 */
  const int64_t shapes[][3] = {{29, 67, 13}, {7, 8, 32}, {131, 65, 257}, {5, 9, 0}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
    for (int t = 0; t < 4; t++)
      check_accumulate(t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* Allocations in one product, the program's side (the probe also counts the driver's). */
static int64_t allocations_in(const tf_probe *probe, bool plain_blas, int64_t m, int64_t n, int64_t k) {
  uint32_t state = 7;
  float *a = random_matrix(m * k, &state), *b = random_matrix(k * n, &state), *c = random_matrix(m * n, &state);
  tf_probe_phase(probe, "product");
  if (plain_blas)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1, a, (int)k, b, (int)n, 0, c,
                (int)n);
  else
    tf_cpu_gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n);
  tf_probe_tally seen = tf_probe_phase(probe, "~after product").program;
  free(a);
  free(b);
  free(c);
  return seen.allocations;
}

/* Whether this run is test_cpu_gemm_avx512's (OpenBLAS forced to its 512-bit kernels). */
static bool avx512_forced(void) {
  const char *wanted = getenv("TF_TEST_BLAS_AVX512");
  return wanted && strcmp(wanted, "1") == 0;
}

static void check_allocations(char **argv) {
  tf_probe probe = tf_probe_attach(argv);
  if (!probe.mark) {
    printf("SKIP allocation checks: %s\n", probe.absent);
    return;
  }
  char why[256];
  CHECK(&counts, tf_probe_calibrate(&probe, why, sizeof(why)), "%s", why);
  const int64_t shapes[][3] = {{2, 33, 64}, {8, 40, 100}, {64, 24, 32}, {3, 8, 512}};
  for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    allocations_in(&probe, false, m, n, k); /* first-touch work in OpenBLAS, if any */
    int64_t blas = allocations_in(&probe, true, m, n, k), ours = INT64_MAX, most = 0;
    /* The probe counts the whole process, so an allocation another thread makes inside the window is
     * counted too (seen once in CI under load: 2 for a shape that makes none). A product's own
     * allocations happen on every call, so the fewest over a few calls is the product's count. */
    for (int attempt = 0; attempt < 3; attempt++) {
      int64_t seen = allocations_in(&probe, false, m, n, k);
      ours = seen < ours ? seen : ours;
      most = seen > most ? seen : most;
    }
    printf("%-4s m=%lld n=%lld k=%lld: cblas_sgemm made %lld heap allocations, tf_cpu_gemm %lld (most in one of 3 "
           "calls: %lld)\n",
           ours == 0 ? "ok" : "FAIL", (long long)m, (long long)n, (long long)k, (long long)blas, (long long)ours,
           (long long)most);
    CHECK(&counts, ours == 0, "tf_cpu_gemm m=%lld n=%lld k=%lld allocated %lld times", (long long)m, (long long)n,
          (long long)k, (long long)ours);
    if (avx512_forced())
      CHECK(&counts, (blas > 0) == tf_cpu_gemm_would_copy(false, false, m, n, k),
            "SkylakeX's cblas_sgemm m=%lld n=%lld k=%lld made %lld allocations; gemm.h predicts %s", (long long)m,
            (long long)n, (long long)k, (long long)blas,
            tf_cpu_gemm_would_copy(false, false, m, n, k) ? "some" : "none");
    /* the same product as matmul_accumulate (beta = 1) on 2 threads, after one call to start the team */
    uint32_t state = 11;
    float *a = random_matrix(m * k, &state), *b = random_matrix(k * n, &state), *sum = random_matrix(m * n, &state);
    accumulate_kernel(false, 2, false, false, m, n, k, sum, a, b);
    int64_t fewest = INT64_MAX;
    for (int attempt = 0; attempt < 3; attempt++) {
      tf_probe_phase(&probe, "matmul_accumulate");
      accumulate_kernel(false, 2, false, false, m, n, k, sum, a, b);
      int64_t seen = tf_probe_phase(&probe, "~after matmul_accumulate").program.allocations;
      fewest = seen < fewest ? seen : fewest;
    }
    printf("%-4s m=%lld n=%lld k=%lld: matmul_accumulate (beta = 1, 2 threads) made %lld heap allocations\n",
           fewest == 0 ? "ok" : "FAIL", (long long)m, (long long)n, (long long)k, (long long)fewest);
    CHECK(&counts, fewest == 0, "matmul_accumulate m=%lld n=%lld k=%lld allocated %lld times", (long long)m,
          (long long)n, (long long)k, (long long)fewest);
    free(a);
    free(b);
    free(sum);
  }
}

/* c[0..3] zeroed [m, n]; c[0..2] += op(a) b (A transposed with ta) on 1, 2 and 3 threads. */
static void on_three_thread_counts(float *c[4], bool ta, int64_t m, int64_t n, int64_t k, float *a, float *b) {
  for (int v = 0; v < 4; v++)
    c[v] = calloc((size_t)(m * n), sizeof(float));
  for (int v = 0; v < 3; v++)
    accumulate_kernel(false, v + 1, ta, false, m, n, k, c[v], a, b);
}

/* c[0..2]: one product on 1, 2 and 3 threads; c[3]: its cut (the first `cut_elements` compared) or
 * slices. Checks and prints that all give the same bits; frees the four. */
static void check_variants(float *c[4], size_t elements, size_t cut_elements, const char *product,
                           const char *cut_what) {
  const bool threads_equal =
      !memcmp(c[0], c[1], sizeof(float) * elements) && !memcmp(c[0], c[2], sizeof(float) * elements);
  const bool cut_equal = !memcmp(c[0], c[3], sizeof(float) * cut_elements);
  CHECK(&counts, threads_equal, "%s: the bits differ between 1, 2 and 3 threads", product);
  CHECK(&counts, cut_equal, "%s: the bits %s differ from the whole product's", product, cut_what);
  printf("%-4s matmul %s: the same bits on 1, 2 and 3 threads (%s) and %s (%s)\n",
         threads_equal && cut_equal ? "ok" : "FAIL", product, threads_equal ? "yes" : "no", cut_what,
         cut_equal ? "yes" : "no");
  for (int v = 0; v < 4; v++)
    free(c[v]);
}

/* (4) A product's bits do not depend on the thread count: the kernel cuts C into fixed tiles
 * (TF_CPU_MATMUL_ROW_TILE x TF_CPU_MATMUL_COLUMN_TILE, core/workspace_cpu.h), one BLAS call each,
 * whatever the threads, so [700, 1100] = [700, 300] x [300, 1100] (remainder tiles both ways) on 1,
 * 2 and 3 threads gives the same f32 bits, and so do its first 512 rows computed alone (a cut at a
 * row-tile boundary: the CPU's half slices, core/half_slices.c). Cutting rows by thread count, as
 * the kernel once did, hands OpenBLAS calls of other heights, whose remainder kernels sum in
 * another order. */
static void check_thread_invariance(void) {
  enum { M = 700, N = 1100, K = 300, CUT = 512 };
  uint32_t state = 77u;
  float *a = random_matrix((int64_t)M * K, &state), *b = random_matrix((int64_t)K * N, &state);
  float *c[4];
  on_three_thread_counts(c, false, M, N, K, a, b);
  accumulate_kernel(false, 2, false, false, CUT, N, K, c[3], a, b);
  char product[64], cut[64];
  snprintf(product, sizeof(product), "f32 [%d, %d] x [%d, %d]", M, K, K, N);
  snprintf(cut, sizeof(cut), "for its first %d rows alone", CUT);
  check_variants(c, (size_t)M * N, (size_t)CUT * N, product, cut);
  free(a);
  free(b);
}

/* A weight's gradient [k, m]^T [k, n] on 1, 2 and 3 threads, and accumulated over two depth slices
 * cut at `cut` (a depth-tile boundary: the half slices), each told the whole's depth: all the same
 * bits. */
static void check_depth_slices(int64_t m, int64_t n, int64_t k, int64_t cut, uint32_t state, const char *what) {
  float *a = random_matrix(k * m, &state), *b = random_matrix(k * n, &state);
  float *c[4];
  on_three_thread_counts(c, true, m, n, k, a, b);
  accumulate_slice(false, 2, true, false, m, n, cut, c[3], a, b, k);
  accumulate_slice(false, 2, true, false, m, n, k - cut, c[3], a + cut * m, b + cut * n, k);
  char product[96];
  snprintf(product, sizeof(product), "f32 [%lld, %lld]^T x [%lld, %lld] (%s)", (long long)k, (long long)m, (long long)k,
           (long long)n, what);
  check_variants(c, (size_t)(m * n), (size_t)(m * n), product, "over two depth slices");
  free(a);
  free(b);
}

/* (5) A small weight's gradient ([700, 128]^T [700, 384]: one 256 x 512 tile, so cut into four
 * 96-column tiles by its shape, core/workspace_cpu.h). */
static void check_narrow_weight_gradient(void) { check_depth_slices(128, 384, 700, 512, 78u, "narrow tiles"); }

/* (6) A product of few rows ([300, 128] x [128, 200]: two row tiles of one 512-column tile, so cut
 * into two 112-column tiles by the whole product's shape, core/workspace_cpu.h): the same bits on 1,
 * 2 and 3 threads, and its first 256 rows computed as a half slice of the 300 (the kernel told the
 * whole's rows) give the whole's. Taken alone, those rows would be cut into 64-column tiles, which on
 * OpenBLAS's 256-bit kernels (test_cpu_gemm_haswell) give other bits. */
static void check_few_rows(void) {
  enum { M = 300, N = 200, K = 128, CUT = 256 };
  uint32_t state = 79u;
  float *a = random_matrix((int64_t)M * K, &state), *b = random_matrix((int64_t)K * N, &state);
  float *c[4];
  on_three_thread_counts(c, false, M, N, K, a, b);
  accumulate_slice(false, 2, false, false, CUT, N, K, c[3], a, b, M);
  char product[64], cut[64];
  snprintf(product, sizeof(product), "f32 [%d, %d] x [%d, %d] (few rows)", M, K, K, N);
  snprintf(cut, sizeof(cut), "for its first %d rows as a half slice", CUT);
  check_variants(c, (size_t)M * N, (size_t)CUT * N, product, cut);
  free(a);
  free(b);
}

/* (7) A weight's gradient narrowed only by its whole depth ([700, 64]^T x [700, 128]: 5.7 M
 * multiply-adds, above TF_CPU_MATMUL_NARROW_MIN_WORK, cut into 64-column tiles). Alone, each depth
 * slice is under the threshold and would be one 128-column call, which on the Haswell kernels gives
 * other bits. */
static void check_depth_slices_of_narrow(void) { check_depth_slices(64, 128, 700, 256, 80u, "narrowed by its depth"); }

/* Whether this run is test_cpu_gemm_haswell's (OpenBLAS forced to its 256-bit Haswell kernels). */
static bool haswell_forced(void) {
  const char *wanted = getenv("TF_TEST_BLAS_HASWELL");
  return wanted && strcmp(wanted, "1") == 0;
}

int main(int argc, char **argv) {
  (void)argc;
  if (avx512_forced()) {
    if (!tf_cpu_blas_has_avx512()) {
      printf("SKIP: this CPU has no AVX-512, which OpenBLAS's SkylakeX kernels need\n");
      return 77;
    }
    char blas[256];
    tf_cpu_blas_describe(blas, sizeof(blas));
    printf("%s\n", blas);
    CHECK(&counts, tf_cpu_blas_narrowed() == false, "OpenBLAS runs 256-bit kernels: %s", blas);
  }
#if defined(__x86_64__) || defined(__i386__)
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool has_avx2 = false;
#endif
  if (haswell_forced()) {
    if (!has_avx2) {
      printf("SKIP: this CPU has no AVX2 and FMA, which OpenBLAS's Haswell kernels need\n");
      return 77;
    }
    char blas[256];
    tf_cpu_blas_describe(blas, sizeof(blas));
    printf("%s\n", blas);
  }
  check_allocations(argv);
  check_values();
  check_accumulate_kernel();
  check_thread_invariance();
  check_narrow_weight_gradient();
  check_few_rows();
  check_depth_slices_of_narrow();
  return tf_test_finish("cpu gemm", &counts);
}
