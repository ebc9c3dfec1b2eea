/* Attention on tensor cores, FlashAttention-2 style (TIGHTFIT_CUDA_TENSOR_ATTENTION=fast): what
 * attention_fast.cu (forward, the gradient's statistics) and attention_fast_backward.cu (dQ; dK and
 * dV) share. The contract is attention_mma.cu's (the same operands, workspace, visibility and
 * statistics); the products are mma.sync m16n8k16 (f16/bf16 operands, f32 accumulators) on
 * fragments loaded with ldmatrix, scores stay in registers, tiles arrive by cp.async.
 *
 * Tiles: 64 rows (queries or keys) x D (32, 64, 128), 16-bit, row stride D + 8 in shared memory
 * (the 16-byte pad puts the 8 rows one ldmatrix reads in 8 distinct groups of 4 banks), rows past
 * the last query or key zero (cp.async with source size 0). A block is 4 warps; in every score
 * product warp w owns the tile's query rows [16w, 16w + 16) and all 64 keys.
 *
 * Fragments (PTX ISA, mma.m16n8k16 with .bf16/.f16; g = lane / 4, t = lane % 4; a 32-bit register
 * holds two 16-bit elements, the lower column or k index in the low half):
 *   A (16 x 16, row):  a0 = (g, 2t..2t+1)  a1 = (g + 8, 2t..)  a2 = (g, 2t + 8..)  a3 = (g + 8, 2t + 8..)
 *   B (16 x 8, col):   b0 = (k 2t..2t+1, n g)  b1 = (k 2t + 8.., n g)
 *   C (16 x 8, f32):   c0, c1 = (g, 2t), (g, 2t + 1)  c2, c3 = (g + 8, 2t), (g + 8, 2t + 1)
 * ldmatrix.x4 gives register i the 8 x 8 matrix whose rows lanes 8i..8i+7 address: without .trans
 * lane l holds its (row l / 4, columns 2 (l % 4)..+1), with .trans (rows 2 (l % 4)..+1, column l / 4).
 * So an A fragment of a [m][k] tile loads plainly, of a tile stored [k][m] (P, dS for dK, dV) with
 * .trans; a B fragment of a tile stored [n][k] (K in Q K^T, V in dO V^T) plainly, of one stored
 * [k][n] (V in P V, K in dS K, dO and Q in dV, dK) with .trans; each x4 covers two n-tiles of 8.
 * The C fragments of a score row's 16-key chunk kk (n-tiles 2kk, 2kk + 1) are the A fragment of
 * that chunk once packed to 16 bits: a0 = (c0, c1) and a1 = (c2, c3) of n-tile 2kk, a2 and a3 the
 * same of n-tile 2kk + 1: that is how P (forward) and dS (dQ) go from a score product straight into
 * the next product without shared memory.
 *
 * Precision: P and dS rounded once to the half type (as `rounded`), everything else f32; the
 * scaled score is __fmul_rn(s, scale) and exp is expf, as the other kernels. The score products S =
 * Q K^T and dP = dO V^T are one function (scores()) run on 64-aligned query tiles in every kernel,
 * so an element's bits are the same in the statistics, dQ and dK/dV kernels: delta = sum P dP is
 * then exactly a lone visible key's dP and dS = P (dP - delta) exactly 0 there (attention_mma.cu). */
#ifndef TIGHTFIT_KERNELS_CUDA_ATTENTION_FAST_CUH
#define TIGHTFIT_KERNELS_CUDA_ATTENTION_FAST_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>

#include "kernels/cuda/attention_dims.cuh"
#include "kernels/cuda/attention_mma.cuh"

namespace tf_cuda {
namespace fast_attention {

constexpr int kRows = 64; /* queries or keys per tile */
constexpr int kWarps = 4;
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kPad = 8;                    /* 16-bit elements past D (or 64) in a shared row */
constexpr int kScoreStride = kRows + kPad; /* P and dS tiles (dK, dV kernel) */

/* Bytes of one staged [64 x D] tile and one 16-bit [64 x 64] score tile (multiples of 128). */
__host__ __device__ constexpr int tile_bytes(int depth) { return kRows * (depth + kPad) * 2; }
__host__ __device__ constexpr int score_bytes() { return kRows * kScoreStride * 2; }
/* forward: Q, then K and V twice (double buffered) */
__host__ __device__ constexpr int forward_shared(int depth) { return 5 * tile_bytes(depth); }
/* statistics and dQ: Q, dO, then K and V twice */
__host__ __device__ constexpr int query_shared(int depth) { return 6 * tile_bytes(depth); }
/* dK and dV: K, V, then Q and dO twice, then P and dS */
__host__ __device__ constexpr int key_shared(int depth) { return 6 * tile_bytes(depth) + 2 * score_bytes(); }

__host__ __device__ inline int64_t tiles_of(int64_t rows) { return (rows + kRows - 1) / kRows; }

/* Key j is visible to query i: attention_mma.cuh's definition, the one both tensor paths use. */
using mma_attention::visible;

/* Whether the (query tile i0, key tile j0) pair has any pair not visible (causal diagonal, tails). */
__device__ inline bool needs_mask(int64_t i0, int64_t j0, const AttentionDims &d) {
  return (d.causal && j0 + kRows - 1 > i0) || j0 + kRows > d.keys || i0 + kRows > d.queries;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TF_FAST_ATTENTION 1 /* device code for sm_80 and newer; older architectures get empty kernels */

__device__ inline uint32_t shared_address(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* Where a query-tile block (forward, statistics, dQ) works: its first query (the last tiles first:
 * under causal masking they see the most key tiles), its head (n, h), the element offsets of that
 * head in q, dy and y (q_base) and in k and v (k_base), and how many key tiles it sees. */
struct QueryBlock {
  int64_t i0, n, h, q_base, k_base, key_tiles;
};

template <int D> __device__ inline QueryBlock query_block(const AttentionDims &d) {
  const int64_t heads_total = d.batch * d.heads, tiles = tiles_of(d.queries);
  QueryBlock b;
  b.i0 = (tiles - 1 - blockIdx.x / heads_total) * kRows;
  b.n = blockIdx.x % heads_total / d.heads;
  b.h = blockIdx.x % heads_total % d.heads;
  b.q_base = b.n * d.queries * d.width + b.h * D;
  b.k_base = b.n * d.keys * d.width + b.h * D;
  const int64_t keys_end = d.causal && b.i0 + kRows < d.keys ? b.i0 + kRows : d.keys;
  b.key_tiles = tiles_of(keys_end);
  return b;
}

/* 16 bytes global -> shared, bypassing L1; zeros when !valid (nothing read). */
__device__ inline void copy_async(uint32_t to, const void *from, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(valid ? 16 : 0) : "memory");
}
__device__ inline void copies_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ inline void copies_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ inline void ldmatrix(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}
__device__ inline void ldmatrix_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

/* c += a b, one m16n8k16 product of T (F16 or Bf16) operands. */
template <typename T> __device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<T, Bf16>::value)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two f32 values as a 16-bit pair for an operand fragment (round to nearest even, once); `low`
 * is the lower column. */
template <typename T> __device__ inline uint32_t pack(float low, float high) {
  uint32_t bits;
  if constexpr (std::is_same<T, Bf16>::value) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    memcpy(&bits, &pair, 4);
  } else {
    const __half2 pair = __floats2half2_rn(low, high);
    memcpy(&bits, &pair, 4);
  }
  return bits;
}

/* Two results rounded to the storage type as the other kernels round them (from_f32). */
template <typename T> __device__ inline uint32_t pack_result(float low, float high) {
  return (uint32_t)from_f32<T>(low).bits | (uint32_t)from_f32<T>(high).bits << 16;
}

/* Rows [first, first + 64) of one head (16-bit elements at `head`, row stride `width`) into `tile`
 * by cp.async (not committed); rows at or past `limit` zero. */
template <int D>
__device__ inline void load_tile(uint16_t *tile, const uint16_t *head, int64_t first, int64_t limit, int64_t width) {
  constexpr int chunks = D / 8; /* 16 bytes each */
  const uint32_t base = shared_address(tile);
#pragma unroll
  for (int step = 0; step < kRows * chunks / kBlockThreads; step++) {
    const int idx = step * kBlockThreads + threadIdx.x, r = idx / chunks, c = idx % chunks;
    const bool valid = first + r < limit;
    copy_async(base + (uint32_t)(r * (D + kPad) + c * 8) * 2, head + (valid ? (first + r) * width + c * 8 : 0), valid);
  }
}

/* acc[nt] = C fragments of rows [16w, 16w + 16) of `a` times the 64 rows of `b` (both staged [64 x
 * D] tiles at shared addresses), n-tile nt = columns [8 nt, 8 nt + 8): S = Q K^T, dP = dO V^T. Every
 * kernel makes its scores with this, on 64-aligned tiles: the same instructions on the same
 * operands in the same k order give the same bits. */
template <typename T, int D>
__device__ inline void scores(float (&acc)[8][4], uint32_t a, uint32_t b, int warp, int lane) {
  constexpr int stride = D + kPad;
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc[nt][e] = 0.0f;
  const uint32_t a_at = a + (uint32_t)((warp * 16 + (lane & 15)) * stride + (lane >> 4) * 8) * 2;
  const uint32_t b_at = b + (uint32_t)(((lane & 7) + (lane >> 4) * 8) * stride + ((lane >> 3) & 1) * 8) * 2;
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    uint32_t fa[4];
    ldmatrix(fa, a_at + k * 2);
#pragma unroll
    for (int np = 0; np < 4; np++) { /* keys [16 np, 16 np + 16): n-tiles 2 np and 2 np + 1 */
      uint32_t fb[4];
      ldmatrix(fb, b_at + (uint32_t)(np * 16 * stride + k) * 2);
      mma<T>(acc[2 * np], fa, fb[0], fb[1]);
      mma<T>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

/* The 16-bit A fragments of a [16 x 64] score block held as C fragments (see the top). */
template <typename T> __device__ inline void as_operand(const float (&c)[8][4], uint32_t (&a)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    a[kk][0] = pack<T>(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack<T>(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

/* acc[dn] += a (this warp's 16 rows x 64 keys, A fragments per 16-key chunk) times the staged [64 x
 * D] tile at `b` (rows = keys): O += P V, dQ += dS K. */
template <typename T, int D>
__device__ inline void accumulate(float (&acc)[D / 8][4], const uint32_t (&a)[4][4], uint32_t b, int lane) {
  constexpr int stride = D + kPad;
  const uint32_t b_at = b + (uint32_t)(((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 8) * 2;
#pragma unroll
  for (int kk = 0; kk < 4; kk++)
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) { /* features [16 dp, 16 dp + 16) */
      uint32_t fb[4];
      ldmatrix_trans(fb, b_at + (uint32_t)(kk * 16 * stride + dp * 16) * 2);
      mma<T>(acc[2 * dp], a[kk], fb[0], fb[1]);
      mma<T>(acc[2 * dp + 1], a[kk], fb[2], fb[3]);
    }
}

/* acc[dn] += (the 16-bit [64 queries x 64 keys] tile at `scores` transposed: this warp's keys [16w,
 * 16w + 16) as rows) times the staged [64 x D] tile at `b` (rows = queries): dV += P^T dO, dK += dS^T Q. */
template <typename T, int D>
__device__ inline void accumulate_transposed(float (&acc)[D / 8][4], uint32_t scores_at, uint32_t b, int warp,
                                             int lane) {
  constexpr int stride = D + kPad;
  const uint32_t a_at =
      scores_at + (uint32_t)(((lane & 7) + (lane >> 4) * 8) * kScoreStride + warp * 16 + ((lane >> 3) & 1) * 8) * 2;
  const uint32_t b_at = b + (uint32_t)(((lane & 7) + ((lane >> 3) & 1) * 8) * stride + (lane >> 4) * 8) * 2;
  /* D 128: beside 2 x 64 accumulators, the four steps' fragments loaded ahead would spill */
#pragma unroll(D == 128 ? 1 : 4)
  for (int kk = 0; kk < 4; kk++) { /* queries [16 kk, 16 kk + 16) */
    uint32_t fa[4];
    ldmatrix_trans(fa, a_at + (uint32_t)(kk * 16 * kScoreStride) * 2);
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      uint32_t fb[4];
      ldmatrix_trans(fb, b_at + (uint32_t)(kk * 16 * stride + dp * 16) * 2);
      mma<T>(acc[2 * dp], fa, fb[0], fb[1]);
      mma<T>(acc[2 * dp + 1], fa, fb[2], fb[3]);
    }
  }
}

/* Writes acc x factor (C fragments of rows [16w, 16w + 16) of a 64-row tile, D columns) rounded to
 * T to rows first + 16w + r < limit of `head` (row stride width): staged through this warp's own rows
 * of `stage` (a [64 x D] tile no other warp touches any more), then 16 bytes per store. */
template <typename T, int D>
__device__ inline void write_rows(const float (&acc)[D / 8][4], float factor, uint16_t *stage, uint16_t *head,
                                  int64_t first, int64_t limit, int64_t width, int warp, int lane) {
  constexpr int stride = D + kPad, chunks = D / 8;
  const int g = lane >> 2, t = lane & 3;
  uint16_t *rows = stage + warp * 16 * stride;
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++) {
    *reinterpret_cast<uint32_t *>(rows + g * stride + dn * 8 + 2 * t) =
        pack_result<T>(acc[dn][0] * factor, acc[dn][1] * factor);
    *reinterpret_cast<uint32_t *>(rows + (g + 8) * stride + dn * 8 + 2 * t) =
        pack_result<T>(acc[dn][2] * factor, acc[dn][3] * factor);
  }
  __syncwarp();
#pragma unroll
  for (int idx = lane; idx < 16 * chunks; idx += 32) {
    const int r = idx / chunks, c = idx % chunks;
    const int64_t row = first + warp * 16 + r;
    if (row < limit)
      *reinterpret_cast<uint4 *>(head + row * width + c * 8) =
          *reinterpret_cast<const uint4 *>(rows + r * stride + c * 8);
  }
}

/* One key tile of the online softmax over a warp's [16 x 64] score block (C fragments; rows row[0],
 * row[1] are this thread's g and g + 8): s scaled (__fmul_rn, as the statistics and the gradient
 * round it) and masked, the rows' running max m raised (over the quad's 4 lanes), this thread's part
 * of the row sums l rescaled by `correction` (returned for what else the caller rescales), and s
 * turned into P = expf(x - m), added to l. */
__device__ inline void softmax_tile(float (&s)[8][4], float (&m)[2], float (&l)[2], float (&correction)[2],
                                    const int64_t (&row)[2], int64_t i0, int64_t j0, int t, const AttentionDims &d) {
  const bool mask = needs_mask(i0, j0, d);
  float top[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float x = __fmul_rn(s[nt][e], d.scale);
      if (mask && !visible(row[e >> 1], j0 + nt * 8 + 2 * t + (e & 1), d))
        x = -INFINITY;
      s[nt][e] = x;
      top[e >> 1] = fmaxf(top[e >> 1], x);
    }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    top[r] = fmaxf(top[r], __shfl_xor_sync(kFullMask, top[r], 1));
    top[r] = fmaxf(top[r], __shfl_xor_sync(kFullMask, top[r], 2));
    const float m_new = fmaxf(m[r], top[r]);
    correction[r] = m_new == -INFINITY ? 1.0f : expf(m[r] - m_new); /* 0 when m was -inf */
    m[r] = m_new;
    l[r] *= correction[r];
  }
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e >> 1; /* m finite: expf(-inf - m) = 0 for the masked; m -inf: none visible yet */
      const float pv = m[r] == -INFINITY ? 0.0f : expf(s[nt][e] - m[r]);
      s[nt][e] = pv;
      l[r] += pv;
    }
}

/* The rows' lse and delta (0 past the last query). */
__device__ inline void load_statistics(const float *lse, const float *delta, int64_t stat_base, const int64_t (&row)[2],
                                       const AttentionDims &d, float (&row_lse)[2], float (&row_delta)[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    row_lse[r] = row[r] < d.queries ? lse[stat_base + row[r]] : 0.0f;
    row_delta[r] = row[r] < d.queries ? delta[stat_base + row[r]] : 0.0f;
  }
}

/* s becomes P and dp becomes dS for the (query tile i0, key tile j0) pair, element by element. */
__device__ inline void probabilities(float (&s)[8][4], float (&dp)[8][4], const float (&row_lse)[2],
                                     const float (&row_delta)[2], const int64_t (&row)[2], int64_t i0, int64_t j0,
                                     int t, const AttentionDims &d) {
  const bool mask = needs_mask(i0, j0, d);
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = e >> 1;
      const bool seen = !mask || visible(row[r], j0 + nt * 8 + 2 * t + (e & 1), d);
      /* __fmul_rn: the scaled score rounded as the forward and the statistics rounded it */
      const float pv = seen ? expf(__fmul_rn(s[nt][e], d.scale) - row_lse[r]) : 0.0f;
      s[nt][e] = pv;
      dp[nt][e] = pv * (dp[nt][e] - row_delta[r]);
    }
}

#endif

} // namespace fast_attention

/* Opts `kernel` in to `bytes` of shared memory; NULL, or why it cannot run here (no sm_80+ code for
 * this device in the build, too little shared memory), as attention_mma.cu's prepare_kernel. */
template <typename Kernel> const char *prepare_fast_kernel(Kernel kernel, int bytes) {
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    cudaGetLastError();
    return "the kernels have no code for this device in this build";
  }
  if (attributes.binaryVersion < 80 || attributes.ptxVersion < 80)
    return "the build's code for this device is below sm_80";
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    cudaGetLastError();
    return "the device refused the kernels' shared memory";
  }
  return NULL;
}

/* attention_fast.cu: the forward (y) or the gradient (statistics into the workspace, then
 * attention_fast_backward.cu's kernels) of an attention step tf_cuda_tensor_attention_refusal
 * accepted; NULL, TF_ERR_UNSUPPORTED (the kernels cannot run here: nothing ran) or the failed
 * launch's status. */
tf_status launch_fast_attention(const tf_cuda_args *args, bool backward);

/* attention_fast_backward.cu: dQ, then dK and dV, from lse and delta. */
tf_status launch_fast_attention_gradients(const tf_cuda_args *args, const AttentionDims &d, const float *lse,
                                          const float *delta);

} // namespace tf_cuda

#endif
