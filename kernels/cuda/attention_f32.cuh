/* Attention on tensor cores for f32 q, k, v (TIGHTFIT_CUDA_F32_ATTENTION=tensor): the tiles,
 * fragments and products attention_f32.cu (forward, the gradient's statistics) and
 * attention_f32_backward.cu (dQ; dK and dV) share. The kernels are attention_fast*.cu's
 * FlashAttention-2 structure (blocks of 4 warps over tiles of 64 rows, K and V or Q and dO double
 * buffered by cp.async, online softmax with the scores in registers, the statistics kernel, then
 * deterministic dQ and dK/dV kernels; attention_fast.cuh) on f32 tiles, each product made of three
 * TF32 ones ("3xTF32", CUTLASS's OpMultiplyAddFastF32, which PyTorch's memory-efficient attention
 * runs for f32 on sm_80 and newer): x = big + small with big = x rounded to TF32 (10 mantissa bits)
 * and small = (x - big) rounded to TF32, and a b = a_small b_big + a_big b_small + a_big b_big, each
 * on mma.sync m16n8k8 into f32 accumulators (the dropped a_small b_small is ~2^-22 of a b).
 *
 * Fragments (PTX ISA, mma.m16n8k8 with .tf32; g = lane / 4, t = lane % 4; one element a register):
 *   A (16 x 8, row):  a0 = (g, t)  a1 = (g + 8, t)  a2 = (g, t + 4)  a3 = (g + 8, t + 4)
 *   B (8 x 8, col):   b0 = (k t, n g)  b1 = (k t + 4, n g)
 *   C (16 x 8, f32):  c0, c1 = (g, 2t), (g, 2t + 1)  c2, c3 = (g + 8, 2t), (g + 8, 2t + 1)
 * A product sums over k in any order, so each product maps its 8 k indices onto what it reads:
 *   - score products (S = Q K^T, dP = dO V^T; k = features): k t -> feature t, k t + 4 -> t + 4;
 *   - products over rows of the B tile (O += P V, dQ += dS K over keys; dV += P^T dO, dK += dS^T Q
 *     over queries): k t -> row 2t, k t + 4 -> row 2t + 1 of each chunk of 8. A score block's C
 *     fragments of n-tile kk are then the A fragments of chunk kk as they are (a0 = c0, a1 = c2,
 *     a2 = c1, a3 = c3): P and dS go from registers into O += P V and dQ += dS K with no shuffle.
 * Shared rows are D + 4 floats (P and dS: 64 + 4), 4 words mod 16, so a warp's 32 loads hit 32
 * distinct banks both ways: row g, column t at 4g + t; row 2t, column g at 8t + g.
 *
 * Precision: every product is the f32 product to ~2^-21 relative, summed in f32; P and dS stay f32
 * (no rounding to a half type); the softmax arithmetic is attention_fast.cuh's (the scaled score
 * __fmul_rn(s, scale), expf). All kernels make their scores with scores() on 64-aligned tiles, so an
 * element's bits are the same in the statistics, dQ and dK/dV kernels, and a query that sees one key
 * gets dS exactly 0 (attention_mma.cu). */
#ifndef TIGHTFIT_KERNELS_CUDA_ATTENTION_F32_CUH
#define TIGHTFIT_KERNELS_CUDA_ATTENTION_F32_CUH

#include "kernels/cuda/attention_fast.cuh"

namespace tf_cuda {
namespace f32_attention {

using fast_attention::kBlockThreads;
using fast_attention::kRows;
using fast_attention::tiles_of;

constexpr int kPad = 4;                    /* floats past D (or 64) in a shared row */
constexpr int kScoreStride = kRows + kPad; /* P and dS tiles (dK, dV kernel) */

/* Bytes of one staged f32 [64 x D] tile and one f32 [64 x 64] score tile (multiples of 16). */
__host__ __device__ constexpr int tile_bytes(int depth) { return kRows * (depth + kPad) * 4; }
__host__ __device__ constexpr int score_bytes() { return kRows * kScoreStride * 4; }
/* forward: Q, then K and V twice (double buffered) */
__host__ __device__ constexpr int forward_shared(int depth) { return 5 * tile_bytes(depth); }
/* statistics and dQ: Q, dO, then K and V twice */
__host__ __device__ constexpr int query_shared(int depth) { return 6 * tile_bytes(depth); }
/* dK and dV: K, V, then Q and dO twice, then P and dS */
__host__ __device__ constexpr int key_shared(int depth) { return 6 * tile_bytes(depth) + 2 * score_bytes(); }

#ifdef TF_FAST_ATTENTION

using fast_attention::copy_async;
using fast_attention::shared_address;

/* x = big + small, each a TF32 value in an f32 register (cvt.rna: to nearest, ties away). */
__device__ inline void split(float x, uint32_t &big, uint32_t &small) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(rest));
}

/* c += a b, one m16n8k8 product of TF32 operands. */
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* An A fragment (four f32 elements, in fragment order) as its big and small TF32 parts. */
struct Operand {
  uint32_t big[4], small[4];
};

__device__ inline Operand operand(float a0, float a1, float a2, float a3) {
  Operand o;
  split(a0, o.big[0], o.small[0]);
  split(a1, o.big[1], o.small[1]);
  split(a2, o.big[2], o.small[2]);
  split(a3, o.big[3], o.small[3]);
  return o;
}

/* c += a b in f32 from three TF32 products: b0, b1 the B fragment's two f32 elements. */
__device__ inline void mma3(float (&c)[4], const Operand &a, float b0, float b1) {
  uint32_t big0, small0, big1, small1;
  split(b0, big0, small0);
  split(b1, big1, small1);
  mma(c, a.small, big0, big1);
  mma(c, a.big, small0, small1);
  mma(c, a.big, big0, big1);
}

/* Rows [first, first + 64) of one head (f32 at `head`, row stride `width`) into `tile` by cp.async
 * (not committed); rows at or past `limit` zero. */
template <int D>
__device__ inline void load_tile(float *tile, const float *head, int64_t first, int64_t limit, int64_t width) {
  constexpr int chunks = D / 4; /* 16 bytes each */
  const uint32_t base = shared_address(tile);
#pragma unroll
  for (int step = 0; step < kRows * chunks / kBlockThreads; step++) {
    const int idx = step * kBlockThreads + threadIdx.x, r = idx / chunks, c = idx % chunks;
    const bool valid = first + r < limit;
    copy_async(base + (uint32_t)(r * (D + kPad) + c * 4) * 4, head + (valid ? (first + r) * width + c * 4 : 0), valid);
  }
}

/* acc[nt] = C fragments of rows [16w, 16w + 16) of `a` times the 64 rows of `b` (both staged [64 x
 * D] tiles), n-tile nt = columns [8 nt, 8 nt + 8): S = Q K^T, dP = dO V^T. Every kernel makes its
 * scores with this, on 64-aligned tiles (see the top). */
template <int D> __device__ inline void scores(float (&acc)[8][4], const float *a, const float *b, int warp, int lane) {
  constexpr int stride = D + kPad;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 8; nt++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc[nt][e] = 0.0f;
  const float *a_at = a + (warp * 16 + g) * stride + t, *b_at = b + g * stride + t;
#pragma unroll
  for (int k = 0; k < D; k += 8) {
    const Operand fa = operand(a_at[k], a_at[8 * stride + k], a_at[k + 4], a_at[8 * stride + k + 4]);
#pragma unroll
    for (int nt = 0; nt < 8; nt++) /* keys [8 nt, 8 nt + 8): b0 = (feature k + t, key g), b1 = k + t + 4 */
      mma3(acc[nt], fa, b_at[nt * 8 * stride + k], b_at[nt * 8 * stride + k + 4]);
  }
}

/* acc[dn] += p (this warp's 16 rows x 64 keys as C fragments, see the top) times the staged [64 x D]
 * tile at `b` (rows = keys): O += P V, dQ += dS K. */
template <int D>
__device__ inline void accumulate(float (&acc)[D / 8][4], const float (&p)[8][4], const float *b, int lane) {
  constexpr int stride = D + kPad;
  const int g = lane >> 2, t = lane & 3;
  const float *b_at = b + 2 * t * stride + g;
#pragma unroll
  for (int kk = 0; kk < 8; kk++) { /* keys [8 kk, 8 kk + 8): k t -> key 2t, k t + 4 -> 2t + 1 */
    const Operand fa = operand(p[kk][0], p[kk][2], p[kk][1], p[kk][3]);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) { /* features [8 dn, 8 dn + 8) */
      const float *at = b_at + kk * 8 * stride + dn * 8;
      mma3(acc[dn], fa, at[0], at[stride]);
    }
  }
}

/* acc[dn] += (the f32 [64 queries x 64 keys] tile at `tile` transposed: this warp's keys [16w, 16w +
 * 16) as rows) times the staged [64 x D] tile at `b` (rows = queries): dV += P^T dO, dK += dS^T Q. */
template <int D>
__device__ inline void accumulate_transposed(float (&acc)[D / 8][4], const float *tile, const float *b, int warp,
                                             int lane) {
  constexpr int stride = D + kPad;
  const int g = lane >> 2, t = lane & 3;
  const float *a_at = tile + 2 * t * kScoreStride + warp * 16 + g, *b_at = b + 2 * t * stride + g;
#pragma unroll(D == 128 ? 1 : 8)
  for (int kk = 0; kk < 8; kk++) { /* queries [8 kk, 8 kk + 8): k t -> query 2t, k t + 4 -> 2t + 1 */
    const float *a = a_at + kk * 8 * kScoreStride;
    const Operand fa = operand(a[0], a[8], a[kScoreStride], a[kScoreStride + 8]);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++) {
      const float *at = b_at + kk * 8 * stride + dn * 8;
      mma3(acc[dn], fa, at[0], at[stride]);
    }
  }
}

/* Writes acc x factor (C fragments of rows [16w, 16w + 16) of a 64-row tile, D columns) to rows
 * first + 16w + r < limit of `head` (row stride width), 8 bytes per store. */
template <int D>
__device__ inline void write_rows(const float (&acc)[D / 8][4], float factor, float *head, int64_t first, int64_t limit,
                                  int64_t width, int warp, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int64_t upper = first + warp * 16 + g, lower = upper + 8;
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++) {
    if (upper < limit)
      *reinterpret_cast<float2 *>(head + upper * width + dn * 8 + 2 * t) =
          make_float2(acc[dn][0] * factor, acc[dn][1] * factor);
    if (lower < limit)
      *reinterpret_cast<float2 *>(head + lower * width + dn * 8 + 2 * t) =
          make_float2(acc[dn][2] * factor, acc[dn][3] * factor);
  }
}

#endif

} // namespace f32_attention

/* attention_f32.cu: the forward (y) or the gradient (statistics into the workspace, then
 * attention_f32_backward.cu's kernels) of an f32 attention step tf_cuda_f32_attention_refusal
 * accepted; NULL, TF_ERR_UNSUPPORTED (the kernels cannot run here: nothing ran) or the failed
 * launch's status. */
tf_status launch_f32_attention(const tf_cuda_args *args, bool backward);

/* attention_f32_backward.cu: dQ, then dK and dV, from lse and delta. */
tf_status launch_f32_attention_gradients(const tf_cuda_args *args, const AttentionDims &d, const float *lse,
                                         const float *delta);

} // namespace tf_cuda

#endif
