/* Attention on tensor cores (attention_mma.cu: forward and the gradient's statistics;
 * attention_mma_backward.cu: dQ, dK and dV): what both files share. nvcuda::wmma 16 x 16 x 16
 * fragments on f16/bf16 operands with f32 accumulators; everything goes through shared memory:
 *   - q, k, v, dy tiles of 64 rows x D (D in {32, 64, 128}) copied as they are (16-bit bits, row
 *     stride D + 8: wmma wants a leading dimension of 8 elements and 32-byte aligned fragments), rows
 *     past the last zero;
 *   - score tiles (S = Q K^T, dP = dO V^T; rows = queries, columns = keys) stored in f32 from the
 *     accumulators, where threads do the softmax arithmetic per element or per row;
 *   - P and dS in 16-bit for the next product: with `split`, as two terms hi + lo (hi = P rounded,
 *     lo = (P - hi) rounded: P to about 2^-16 relative in bf16, 2^-22 in f16), each multiplied on
 *     the tensor cores, so the result is the f32 kernels' to f32 summation order and the half
 *     kernels' contract (cast up -> f32 kernel -> cast down, checked step by step by the conformance
 *     suite at one rounding of the result) holds; without, P and dS are rounded once
 *     (FlashAttention-2's products: one product instead of two, errors of 2^-9 relative per term).
 * A block is 4 warps (128 threads); warp w owns rows [16w, 16w + 16) of every product it makes. */
#ifndef TIGHTFIT_KERNELS_CUDA_ATTENTION_MMA_CUH
#define TIGHTFIT_KERNELS_CUDA_ATTENTION_MMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <type_traits>

#include "kernels/cuda/attention_dims.cuh"

namespace tf_cuda {
namespace mma_attention {

constexpr int kRows = 64; /* queries or keys per tile */
constexpr int kWarps = 4;
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kPad = 8;               /* 16-bit elements past D in a staged row */
constexpr int kScoreLd = kRows + 4;   /* f32 score tiles' row stride (wmma: a multiple of 4) */
constexpr int kHalfLd = kRows + kPad; /* 16-bit P / dS tiles' row stride */
constexpr int kAlign = 128;           /* every shared array starts at a multiple */

/* The launch's sizes (attention_dims.cuh) and whether P and dS go as two terms. */
struct Params {
  AttentionDims d;
  bool split;
};

/* Bytes of shared memory, arrays rounded to kAlign. */
__host__ __device__ constexpr int aligned(int bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
__host__ __device__ constexpr int staged_bytes(int depth) { return aligned(kRows * (depth + kPad) * 2); }
__host__ __device__ constexpr int score_bytes() { return aligned(kRows * kScoreLd * 4); }
__host__ __device__ constexpr int half_tile_bytes() { return aligned(kRows * kHalfLd * 2); }
__host__ __device__ constexpr int row_bytes() { return aligned(kRows * 4); }
__host__ __device__ constexpr int scratch_bytes() { return aligned(kWarps * 16 * 16 * 4); }

/* forward: Q, K, V, S, P hi + lo, the rows' scales, the row map, the per-warp scratch */
__host__ __device__ constexpr int forward_shared(int depth) {
  return 3 * staged_bytes(depth) + score_bytes() + 2 * half_tile_bytes() + row_bytes() + aligned(16 * 16 * 4) +
         scratch_bytes();
}
/* statistics: Q, dO, K, V, S, dP */
__host__ __device__ constexpr int statistics_shared(int depth) { return 4 * staged_bytes(depth) + 2 * score_bytes(); }
/* dQ: Q, dO, K, V, S, dP, dS hi + lo, lse and delta rows, the scratch */
__host__ __device__ constexpr int query_shared(int depth) {
  return 4 * staged_bytes(depth) + 2 * score_bytes() + 2 * half_tile_bytes() + 2 * row_bytes() + scratch_bytes();
}
/* dK and dV: Q, dO, K, V, S, dP, P hi + lo, dS hi + lo, lse and delta rows, the scratch */
__host__ __device__ constexpr int key_shared(int depth) {
  return 4 * staged_bytes(depth) + 2 * score_bytes() + 4 * half_tile_bytes() + 2 * row_bytes() + scratch_bytes();
}

/* The wmma element type of a storage tag (common.cuh): the same 16 bits. */
template <typename T> struct Wmma;
template <> struct Wmma<F16> { typedef __half type; };
template <> struct Wmma<Bf16> { typedef __nv_bfloat16 type; };

__host__ __device__ inline int64_t tiles_of(int64_t rows) { return (rows + kRows - 1) / kRows; }

__device__ inline bool visible(int64_t i, int64_t j, const AttentionDims &d) {
  return i < d.queries && j < d.keys && (!d.causal || j <= i);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TF_MMA_ATTENTION 1 /* device code for sm_80 and newer; older architectures get empty kernels */

using namespace nvcuda;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> Accumulator;

/* Carves consecutive kAlign-aligned arrays out of dynamic shared memory. */
struct Carver {
  unsigned char *next;
  template <typename E> __device__ E *take(int bytes) {
    E *at = reinterpret_cast<E *>(next);
    next += bytes;
    return at;
  }
};

/* Rows [first, first + 64) of one head (16-bit elements at `head`, row stride `width`) into `tile`
 * (stride D + kPad), 16 bytes at a time; rows at or past `limit` zero. */
template <int D>
__device__ inline void load_tile(uint16_t *tile, const uint16_t *head, int64_t first, int64_t limit, int64_t width) {
  constexpr int chunks = D / 8;
  for (int idx = threadIdx.x; idx < kRows * chunks; idx += kBlockThreads) {
    const int r = idx / chunks, c = idx % chunks;
    uint4 value = make_uint4(0u, 0u, 0u, 0u);
    if (first + r < limit)
      value = *reinterpret_cast<const uint4 *>(head + (first + r) * width + c * 8);
    *reinterpret_cast<uint4 *>(tile + r * (D + kPad) + c * 8) = value;
  }
}

/* out[16w + r][c] (f32, stride kScoreLd) = sum over d of a[16w + r][d] b[c][d], c < 64: a score
 * tile of this warp's rows. The same instructions on the same tiles give the same bits in every
 * kernel (the statistics' delta relies on it). */
template <typename W, int D> __device__ inline void score_tile(const W *a, const W *b, float *out, int warp) {
  constexpr int ld = D + kPad;
  Accumulator acc[4];
#pragma unroll
  for (int c = 0; c < 4; c++)
    wmma::fill_fragment(acc[c], 0.0f);
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + warp * 16 * ld + k, ld);
#pragma unroll
    for (int c = 0; c < 4; c++) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major> fb;
      wmma::load_matrix_sync(fb, b + c * 16 * ld + k, ld);
      wmma::mma_sync(acc[c], fa, fb, acc[c]);
    }
  }
#pragma unroll
  for (int c = 0; c < 4; c++)
    wmma::store_matrix_sync(out + warp * 16 * kScoreLd + c * 16, acc[c], kScoreLd, wmma::mem_row_major);
}

/* acc[dn] += A[16w.., 0..64) x b[0..64)[16 dn..]: A a 16-bit [64 x 64] tile (stride kHalfLd), read
 * as it is (row_major: rows = this warp's rows) or transposed (col_major: A = tileᵀ, for dK and dV);
 * b a staged [64 x D] tile. */
template <typename W, int D, typename Layout>
__device__ inline void accumulate(Accumulator (&acc)[D / 16], const W *a, const W *b, int warp) {
  constexpr int ld = D + kPad;
#pragma unroll 1 /* unrolled, the loads of all four steps stay live beside D / 8 accumulators: spills */
  for (int k = 0; k < kRows; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, W, Layout> fa;
    if constexpr (std::is_same<Layout, wmma::row_major>::value)
      wmma::load_matrix_sync(fa, a + warp * 16 * kHalfLd + k, kHalfLd);
    else
      wmma::load_matrix_sync(fa, a + k * kHalfLd + warp * 16, kHalfLd);
#pragma unroll
    for (int dn = 0; dn < D / 16; dn++) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major> fb;
      wmma::load_matrix_sync(fb, b + k * ld + dn * 16, ld);
      wmma::mma_sync(acc[dn], fa, fb, acc[dn]);
    }
  }
}

/* v as the 16-bit pair hi + lo (lo = 0 unless `split`). */
template <typename W> __device__ inline W round_to(float v);
template <> __device__ inline __half round_to<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 round_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <typename W> __device__ inline float widen(W v);
template <> __device__ inline float widen<__half>(__half v) { return __half2float(v); }
template <> __device__ inline float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename W> __device__ inline void split_into(float v, bool split, W *hi, W *lo) {
  const W high = round_to<W>(v);
  *hi = high;
  *lo = round_to<W>(split ? v - widen<W>(high) : 0.0f);
}

/* Writes this warp's rows [16w, 16w + 16) of `acc` x factor to rows first + 16w + r < limit of
 * `head` (storage T, row stride width), through the warp's 16 x 16 f32 scratch. */
template <typename T, int D>
__device__ inline void write_rows(const Accumulator (&acc)[D / 16], float factor, float *scratch, T *head,
                                  int64_t first, int64_t limit, int64_t width, int warp, int lane) {
#pragma unroll
  for (int dn = 0; dn < D / 16; dn++) {
    wmma::store_matrix_sync(scratch, acc[dn], 16, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int e = 0; e < 8; e++) {
      const int at = lane * 8 + e, r = at / 16, c = at % 16;
      const int64_t row = first + warp * 16 + r;
      if (row < limit)
        head[row * width + dn * 16 + c] = from_f32<T>(factor * scratch[at]);
    }
    __syncwarp();
  }
}
#endif

} // namespace mma_attention

/* attention_mma_backward.cu: dQ (query tiles over key tiles) and dK, dV (key tiles over query
 * tiles) from lse and delta; enqueues both kernels, NULL or the failed call's status. */
tf_status launch_mma_attention_gradients(const tf_cuda_args *args, const mma_attention::Params &p, const float *lse,
                                         const float *delta);

/* attention_mma.cu: why an attention step's operands do not fit a path's tensor-core kernels whatever
 * their type (heads and head width, sizes, alignment, the gradient's workspace, the grid, and the
 * shared memory its kernels need for D = 32, 64, 128, need[0] forward, need[1] gradient, against
 * `shared_optin`); NULL when they do. */
const char *attention_operands_refusal(const tf_cuda_args *args, const int64_t (&need)[2][3], int64_t shared_optin);

/* attention_mma.cu: the devices line of a tensor-core attention path, "WHAT: tensor cores (KERNELS, D
 * in {32, 64}; gradient D in {32})" or "WHAT: CUDA cores (...)", from the shared memory its kernels
 * need for D = 32, 64, 128 (need[0] the forward's, need[1] the gradient's) against `shared_optin`. */
void describe_depths(char *text, size_t size, const char *what, const char *kernels, const int64_t (&need)[2][3],
                     int64_t shared_optin);

} // namespace tf_cuda

#endif
