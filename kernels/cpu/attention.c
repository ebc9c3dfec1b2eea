/* Fused scaled-dot-product attention and its gradient, flash-style: O(T) memory per thread.
 *
 * q [N, Tq, H*D], k and v [N, Tk, H*D]; head h reads columns [h*D, (h+1)*D). Query rows go in blocks
 * (tf_cpu_attention_block_rows: 32 to 128 rows, by Tk): a block's scores [rows, Tk] are one product into the thread's
 * workspace slice, turned into probabilities row by row (max-subtracted exponentials), then
 * multiplied by V. Nothing [Tq, Tk] is kept for more than one block. Causal: key j is visible to
 * query i when j <= i (top-left aligned, as torch's is_causal), so a block only reads the keys its
 * last row can see, and the products skip the 4 x 16 tiles the mask zeroes (kernels/cpu/tile.h:
 * register-tiled); unmasked products of 64K multiply-adds or more are BLAS's (blas_pays below). With
 * no keys (Tk = 0) the output is 0.
 *
 * The gradient recomputes each block's probabilities P (no saved statistics), then
 *   dP = dO Vᵀ,  dS = P ∘ (dP - rowsum(P ∘ dP)),  dQ = scale dS K,  dK += scale dSᵀ Q,  dV += Pᵀ dO.
 * dK and dV sum over every query row of a head, so a thread owns whole (n, h) pairs: no races, and
 * a fixed summation order. The forward's tasks are independent blocks of rows. */
#include <assert.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "core/workspace_cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/list.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/real.h"
#include "kernels/cpu/tile.h"
#include "kernels/cpu/vector_math.h"

// The omp simd loops below are a request, not a requirement: clang, when sanitizers keep it from
// vectorising them, would otherwise warn at each.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

typedef struct attention {
  int64_t batch, queries, keys, heads, width, depth; /* width E = heads x depth D */
  int64_t block;                                     /* query rows per block */
  int64_t blocks;                                    /* per head */
  real scale;
  bool causal;
} attention;

static attention attention_of(const tf_cpu_args *args) {
  const tf_attention_attrs *a = &args->attrs->u.attention;
  const tf_cpu_tensor *q = &args->inputs[0], *k = &args->inputs[1];
  attention at;
  at.batch = q->shape[0];
  at.queries = q->shape[1];
  at.keys = k->shape[1];
  at.width = q->shape[2];
  at.heads = a->num_heads;
  at.depth = at.width / at.heads;
  at.block = tf_cpu_attention_block_rows(at.queries, at.keys);
  at.blocks = at.block > 0 ? (at.queries + at.block - 1) / at.block : 0;
  at.scale = a->scale != 0 ? (real)a->scale : (real)1 / TF_REAL_SQRT((real)at.depth);
  at.causal = a->causal;
  return at;
}

/* Keys that rows [first, first + rows) of a block may see: all, or up to the last row when causal. */
static int64_t visible_keys(const attention *at, int64_t first, int64_t rows) {
  if (!at->causal || first + rows > at->keys)
    return at->keys;
  return first + rows;
}

#ifdef TF_REAL_F64
#define exp_nonpositive TF_REAL_EXP
#define SIMD_EXP_LOOP /* libm's exp is a call: nothing to vectorise */
#else
#define SIMD_EXP_LOOP _Pragma("omp simd")
/* exp(x) for the x <= 0 of a max-subtracted softmax, in a form the compiler vectorises (libm's expf
 * is a call per element, and would cost more than the softmax's two gemms): 2^n exp(r) with
 * n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts), exp(r) by its degree-7 Taylor polynomial
 * (|r| <= 0.35: truncation 5e-9, under f32 rounding). x is first clamped at -87, where exp(x) ~
 * 1.6e-38 is still a normal float, so 2^n is built from exponent bits. The clamp compares bit
 * patterns as integers (for x <= 0 they grow with |x|): a float compare would stop GCC from
 * vectorising under its default -ftrapping-math. A NaN stays NaN. */
static inline float exp_nonpositive(float x) {
  union {
    float f;
    uint32_t u;
  } in = {x}, shifted, scale;
  in.u = in.u > 0xC2AE0000u ? 0xC2AE0000u : in.u; // -87.0f
  x = in.f;
  shifted.f = x * 1.44269504088896341f + 12582912.0f; // 1.5 x 2^23: rounds n into the low mantissa bits
  float n = shifted.f - 12582912.0f;
  float r = x - n * 0.693145751953125f - n * 1.42860682030941723212e-6f;
  float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 +
                                          r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  scale.u = (shifted.u - 0x4B400000u + 127u) << 23; // the exponent field of 2^n, n in [-126, 0]
  return p * scale.f;
}
#endif

/* The largest of row[0, n), n >= 1, in 8 independent lanes (a vector register's worth). */
static real row_max(const real *row, int64_t n) {
  real lanes[8], top = row[0];
  for (int l = 0; l < 8; l++)
    lanes[l] = top;
  int64_t done = 0;
  for (; done + 8 <= n; done += 8)
    for (int l = 0; l < 8; l++)
      lanes[l] = row[done + l] > lanes[l] ? row[done + l] : lanes[l];
  for (; done < n; done++)
    top = row[done] > top ? row[done] : top;
  for (int l = 0; l < 8; l++)
    top = lanes[l] > top ? lanes[l] : top;
  return top;
}

/* row[j] = e^(row[j] - top) for j in [0, n): a map, so it may take the wider clones
 * (TF_CPU_VECTOR_CLONES: the same bits on every one). */
TF_CPU_VECTOR_CLONES static void exp_shifted(real *row, int64_t n, real top) {
  SIMD_EXP_LOOP
  for (int64_t j = 0; j < n; j++)
    row[j] = exp_nonpositive(row[j] - top);
}

/* row[j] *= factor for j in [0, n), a map too. */
TF_CPU_VECTOR_CLONES static void scale_row(real *row, int64_t n, real factor) {
#pragma omp simd
  for (int64_t j = 0; j < n; j++)
    row[j] *= factor;
}

/* Row-wise softmax of the first `allowed` scores of a row of `keys`; the rest (masked) become 0.
 * The sum stays in this function, unlike the maps around it: its lanes' order follows the vector
 * width, which must not change with the machine. */
static void softmax_row(real *row, int64_t allowed, int64_t keys) {
  real top = allowed > 0 ? row_max(row, allowed) : 0;
  exp_shifted(row, allowed, top);
  double sum = 0; // a double accumulator: Tk terms in f32 would lose the small ones
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < allowed; j++)
    sum += (double)row[j];
  real inverse = sum > 0 ? (real)(1.0 / sum) : 0;
  scale_row(row, allowed, inverse);
  for (int64_t j = allowed; j < keys; j++)
    row[j] = 0;
}

/* sum of a[j] b[j] over [0, n) in double. Its own function because the parallel loop that uses it
 * is a macro argument (kernels/cpu/parallel.h), where a #pragma line cannot stand. */
static double row_dot(const real *a, const real *b, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; j++)
    sum += (double)a[j] * (double)b[j];
  return sum;
}

/* The block products: BLAS (kernels/cpu/gemm.h) where no mask applies and it is the faster (at least
 * TF_CPU_ATTENTION_BLAS_WORK multiply-adds, and for the NN form at least 32 columns: on a Zen 2 core
 * OpenBLAS reached 73-83 GFLOP/s at asr's 100 x 100 x 64 and 100 x 64 x 100 where the register
 * tiles reach 51-61, and the tiles stay ahead below it, e.g. 52 against 42 at 32³ NN); the
 * register tiles (kernels/cpu/tile.h) otherwise, and always under a causal band, whose masked
 * tiles they skip. The choice follows the shapes alone, never the thread count. */
#define TF_CPU_ATTENTION_BLAS_WORK 65536
static bool blas_pays(tf_cpu_band band, int64_t m, int64_t n, int64_t k, bool nn) {
  return band.kind == TF_CPU_BAND_ALL && m * n * k >= TF_CPU_ATTENTION_BLAS_WORK && (!nn || n >= 32);
}

/* C[m, n] = alpha A B (+ C when `accumulate`), A(i, p) at a[i a_row + p a_col] (one stride 1). */
static void product_nn(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t a_row, int64_t a_col,
                       const real *b, int64_t ldb, tf_cpu_band band, bool accumulate, real *c, int64_t ldc) {
  if (!blas_pays(band, m, n, k, true)) {
    TF_REAL_NAME(tf_cpu_tile_nn)(m, n, k, alpha, a, a_row, a_col, b, ldb, band, accumulate, c, ldc);
    return;
  }
  const bool transposed = a_col != 1;
  tf_cpu_gemm(transposed, false, m, n, k, alpha, a, transposed ? a_col : a_row, b, ldb, accumulate ? 1 : 0, c, ldc);
}

/* C[m, n] = alpha A Bᵀ (+ C when `accumulate`), A [m, k] and B [n, k] row-major. */
static void product_nt(int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda, const real *b,
                       int64_t ldb, tf_cpu_band band, bool accumulate, real *c, int64_t ldc) {
  if (!blas_pays(band, m, n, k, false)) {
    TF_REAL_NAME(tf_cpu_tile_nt)(m, n, k, alpha, a, lda, b, ldb, band, accumulate, c, ldc);
    return;
  }
  tf_cpu_gemm(false, true, m, n, k, alpha, a, lda, b, ldb, accumulate ? 1 : 0, c, ldc);
}

/* The rows of a block see keys up to their own position when causal (top-left aligned): the band
 * of the products whose rows are the block's query rows, and of those whose rows are keys. */
static tf_cpu_band query_band(const attention *at, int64_t first) {
  return (tf_cpu_band){at->causal ? TF_CPU_BAND_UPTO : TF_CPU_BAND_ALL, first};
}
static tf_cpu_band key_band(const attention *at, int64_t first) {
  return (tf_cpu_band){at->causal ? TF_CPU_BAND_FROM : TF_CPU_BAND_ALL, first};
}

/* The keys row r of a block starting at query `first` may see, of the block's `keys`. */
static int64_t allowed_keys(const attention *at, int64_t first, int64_t r, int64_t keys) {
  return at->causal && first + r + 1 < keys ? first + r + 1 : keys;
}

/* The probabilities of query rows [first, first + rows) of one head over keys [0, keys), into
 * p [rows, keys]: softmax(scale q kᵀ), masked entries exactly 0. */
static void probabilities(const attention *at, const real *q_block, const real *k_head, int64_t first, int64_t rows,
                          int64_t keys, real *p) {
  if (keys == 0) // no keys (Tk = 0): the caller's products come out 0
    return;
  product_nt(rows, keys, at->depth, at->scale, q_block, at->width, k_head, at->width, query_band(at, first), false, p,
             keys);
  for (int64_t r = 0; r < rows; r++)
    softmax_row(p + r * keys, allowed_keys(at, first, r, keys), keys);
}

/* dS = P ∘ (dP - rowsum(P ∘ dP)) over each row's allowed keys, into dp; 0 past them (dP is not
 * computed there). */
static void score_gradient(const attention *at, int64_t first, int64_t rows, int64_t keys, const real *p, real *dp) {
  for (int64_t r = 0; r < rows; r++) {
    const real *p_row = p + r * keys;
    real *dp_row = dp + r * keys;
    const int64_t allowed = allowed_keys(at, first, r, keys);
    const double delta = row_dot(p_row, dp_row, allowed);
    for (int64_t j = 0; j < allowed; j++)
      dp_row[j] = p_row[j] * (dp_row[j] - (real)delta);
    for (int64_t j = allowed; j < keys; j++)
      dp_row[j] = 0;
  }
}

/* The most threads (<= the context's) whose workspace fits the one this call was given; 0 if none. */
static int workers_for(const tf_cpu_args *args, const attention *at) {
  int32_t threads = args->context->threads > 0 ? args->context->threads : 1;
  int64_t slice = tf_cpu_attention_thread_elements(args->op, at->queries, at->keys) * (int64_t)sizeof(real);
  int64_t workers = tf_cpu_attention_workers(args->op, at->batch, at->heads, at->queries, at->keys, threads);
  while (workers > 1 && workers * slice > args->workspace_bytes)
    workers--;
  return workers * slice > args->workspace_bytes ? 0 : (int)workers;
}

/* The threads that share this call: 0 when there is nothing to compute (`empty`) or, a planning
 * bug, too little workspace. */
static int workers_of(const tf_cpu_args *args, const attention *at, bool empty) {
  if (empty)
    return 0;
  const int workers = workers_for(args, at);
  assert(workers > 0);
  return workers;
}

/* The workspace `offset` elements in; NULL when the call has none. */
static real *workspace_at(const tf_cpu_args *args, int64_t offset) {
  return args->workspace ? (real *)args->workspace + offset : NULL;
}

/* attention(q, k, v) -> y */
void TF_REAL_NAME(tf_cpu_attention)(const tf_cpu_args *args) {
  attention at = attention_of(args);
  const real *q = args->inputs[0].data, *k = args->inputs[1].data, *v = args->inputs[2].data;
  real *y = args->outputs[0].data;
  const int64_t slice = tf_cpu_attention_thread_elements(args->op, at.queries, at.keys);
  const int workers = workers_of(args, &at, args->outputs[0].count == 0);
  if (workers == 0)
    return;
  int64_t tasks = at.batch * at.heads * at.blocks;
  // Causal blocks differ in cost, so threads take the next block when done.
  TF_CPU_PARALLEL_FOR_DYNAMIC(
      workers, for (int64_t task = 0; task < tasks; task++) {
        int64_t n = task / (at.heads * at.blocks), h = task / at.blocks % at.heads;
        int64_t first = task % at.blocks * at.block;
        int64_t rows = first + at.block < at.queries ? at.block : at.queries - first;
        int64_t keys = visible_keys(&at, first, rows);
        int64_t column = h * at.depth, row_base = n * at.queries + first;
        real *p = workspace_at(args, omp_get_thread_num() * slice);
        probabilities(&at, q + row_base * at.width + column, k + n * at.keys * at.width + column, first, rows, keys, p);
        product_nn(rows, at.depth, keys, 1, p, keys, 1, v + n * at.keys * at.width + column, at.width,
                   query_band(&at, first), false, y + row_base * at.width + column, at.width);
      });
}

/* attention_grad(q, k, v, dy) -> (dq, dk, dv) */
void TF_REAL_NAME(tf_cpu_attention_grad)(const tf_cpu_args *args) {
  attention at = attention_of(args);
  const real *q = args->inputs[0].data, *k = args->inputs[1].data, *v = args->inputs[2].data;
  const real *dy = args->inputs[3].data;
  real *dq = args->outputs[0].data, *dk = args->outputs[1].data, *dv = args->outputs[2].data;
  const int64_t slice = tf_cpu_attention_thread_elements(args->op, at.queries, at.keys);
  const int workers = workers_of(args, &at, args->outputs[0].count == 0 && args->outputs[1].count == 0);
  if (workers == 0)
    return;
  int64_t pairs = at.batch * at.heads;
  TF_CPU_PARALLEL_FOR(
      workers, for (int64_t pair = 0; pair < pairs; pair++) {
        int64_t n = pair / at.heads, column = pair % at.heads * at.depth;
        const real *k_head = k + n * at.keys * at.width + column, *v_head = v + n * at.keys * at.width + column;
        real *dk_head = dk + n * at.keys * at.width + column, *dv_head = dv + n * at.keys * at.width + column;
        for (int64_t j = 0; j < at.keys; j++) {
          memset(dk_head + j * at.width, 0, sizeof(real) * (size_t)at.depth);
          memset(dv_head + j * at.width, 0, sizeof(real) * (size_t)at.depth);
        }
        real *p = workspace_at(args, omp_get_thread_num() * slice);
        real *dp = p ? p + at.block * at.keys : NULL;
        for (int64_t first = 0; first < at.queries; first += at.block) {
          int64_t rows = first + at.block < at.queries ? at.block : at.queries - first;
          int64_t keys = visible_keys(&at, first, rows);
          int64_t offset = (n * at.queries + first) * at.width + column;
          probabilities(&at, q + offset, k_head, first, rows, keys, p);
          product_nt(rows, keys, at.depth, 1, dy + offset, at.width, v_head, at.width, query_band(&at, first), false,
                     dp, keys);
          if (keys > 0)
            score_gradient(&at, first, rows, keys, p, dp);
          product_nn(rows, at.depth, keys, at.scale, dp, keys, 1, k_head, at.width, query_band(&at, first), false,
                     dq + offset, at.width);
          product_nn(keys, at.depth, rows, at.scale, dp, 1, keys, q + offset, at.width, key_band(&at, first), true,
                     dk_head, at.width);
          product_nn(keys, at.depth, rows, 1, p, 1, keys, dy + offset, at.width, key_band(&at, first), true, dv_head,
                     at.width);
        }
      });
}
