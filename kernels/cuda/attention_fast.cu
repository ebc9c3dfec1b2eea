/* Attention on tensor cores, FlashAttention-2 style (the default, TIGHTFIT_CUDA_TENSOR_ATTENTION unset
 * or =fast): the forward and the gradient's statistics; dQ, dK and dV are attention_fast_backward.cu, the tiles,
 * fragments and products attention_fast.cuh. attention_mma.cu chooses the path and checks the
 * operands (tf_cuda_tensor_attention_refusal) before anything here runs.
 *
 * Forward, per block one (n, h) and 64 queries (the last query tiles first: under causal masking
 * they have the most key tiles), 4 warps of 16 query rows: K and V tiles of 64 keys arrive by
 * cp.async into one of two buffers while the other is used; S = Q K^T stays in registers; each
 * thread holds 2 of its rows' 16 scores per tile (rows g and g + 8 of its warp), so the row max
 * is the max over the quad's 4 lanes (__shfl_xor_sync 1 and 2). P = expf(scale s - m) (f32, summed
 * per thread into the row sum; the quad's partial sums are added once at the end) is rounded once
 * to 16 bits and used from registers as the A operand of O += P V. Key tiles wholly above the
 * causal diagonal are skipped; only tiles with a pair not visible (the diagonal, the tails) test
 * each element. O / l is rounded once to the storage type.
 *
 * Statistics (the same workspace and meaning as attention_mma.cu's): lse = m + logf(l) and delta =
 * sum_j P_ij dP_ij / l, with S and dP from attention_fast.cuh's scores(), the very products the dQ
 * and dK/dV kernels recompute. */
#include "kernels/cuda/attention_fast.cuh"

namespace tf_cuda {
namespace {

using namespace fast_attention;

template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    fast_forward(const T *q, const T *k, const T *v, T *y, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  uint16_t *qs = reinterpret_cast<uint16_t *>(shared);
  constexpr int tile = tile_bytes(D) / 2; /* elements; buffer b's K at qs + (1 + 2b) tile, V after it */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const QueryBlock block = query_block<D>(d);
  const int64_t i0 = block.i0, q_base = block.q_base, k_base = block.k_base, key_tiles = block.key_tiles;
  const uint16_t *qh = reinterpret_cast<const uint16_t *>(q) + q_base;
  const uint16_t *kh = reinterpret_cast<const uint16_t *>(k) + k_base;
  const uint16_t *vh = reinterpret_cast<const uint16_t *>(v) + k_base;
  load_tile<D>(qs, qh, i0, d.queries, d.width);
  load_tile<D>(qs + tile, kh, 0, d.keys, d.width);
  load_tile<D>(qs + 2 * tile, vh, 0, d.keys, d.width);
  copies_commit();
  const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float o[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      o[dn][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* l: this thread's part of the row sum */
  for (int64_t jt = 0; jt < key_tiles; jt++) {
    const int buf = (int)(jt & 1);
    const int64_t j0 = jt * kRows;
    copies_wait();
    __syncthreads(); /* tile jt is in; everyone is done with tile jt - 1's buffer */
    if (jt + 1 < key_tiles) {
      load_tile<D>(qs + (3 - 2 * buf) * tile, kh, j0 + kRows, d.keys, d.width); /* the other buffer */
      load_tile<D>(qs + (4 - 2 * buf) * tile, vh, j0 + kRows, d.keys, d.width);
      copies_commit();
    }
    float s[8][4];
    const uint32_t k_at = shared_address(qs + (1 + 2 * buf) * tile), v_at = k_at + tile * 2;
    scores<T, D>(s, shared_address(qs), k_at, warp, lane);
    float correction[2];
    softmax_tile(s, m, l, correction, row, i0, j0, t, d);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        o[dn][e] *= correction[e >> 1];
    uint32_t p16[4][4];
    as_operand<T>(s, p16);
    accumulate<T, D>(o, p16, v_at, lane);
  }
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    inverse[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
  }
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      o[dn][e] *= inverse[e >> 1];
  __syncthreads(); /* Q's rows become the output's staging (each warp its own) */
  write_rows<T, D>(o, 1.0f, qs, reinterpret_cast<uint16_t *>(y) + q_base, i0, d.queries, d.width, warp, lane);
#endif
}

/* The gradient's statistics over one query tile: lse and delta (see the top). */
template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    fast_statistics(const T *q, const T *k, const T *v, const T *dy, float *lse, float *delta, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  uint16_t *qs = reinterpret_cast<uint16_t *>(shared), *dos = qs + tile_bytes(D) / 2;
  constexpr int tile = tile_bytes(D) / 2; /* elements; buffer b's K at qs + (2 + 2b) tile, V after it */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const QueryBlock block = query_block<D>(d);
  const int64_t i0 = block.i0, n = block.n, h = block.h, q_base = block.q_base, k_base = block.k_base;
  const int64_t key_tiles = block.key_tiles;
  const uint16_t *kh = reinterpret_cast<const uint16_t *>(k) + k_base;
  const uint16_t *vh = reinterpret_cast<const uint16_t *>(v) + k_base;
  load_tile<D>(qs, reinterpret_cast<const uint16_t *>(q) + q_base, i0, d.queries, d.width);
  load_tile<D>(dos, reinterpret_cast<const uint16_t *>(dy) + q_base, i0, d.queries, d.width);
  load_tile<D>(qs + 2 * tile, kh, 0, d.keys, d.width);
  load_tile<D>(qs + 3 * tile, vh, 0, d.keys, d.width);
  copies_commit();
  const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  /* this thread's parts of the row sums l and weighted = sum exp(scale s - m) dP */
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, weighted[2] = {0.0f, 0.0f};
  for (int64_t jt = 0; jt < key_tiles; jt++) {
    const int buf = (int)(jt & 1);
    const int64_t j0 = jt * kRows;
    copies_wait();
    __syncthreads();
    if (jt + 1 < key_tiles) {
      load_tile<D>(qs + (4 - 2 * buf) * tile, kh, j0 + kRows, d.keys, d.width); /* the other buffer */
      load_tile<D>(qs + (5 - 2 * buf) * tile, vh, j0 + kRows, d.keys, d.width);
      copies_commit();
    }
    float s[8][4], dp[8][4];
    const uint32_t k_at = shared_address(qs + (2 + 2 * buf) * tile), v_at = k_at + tile * 2;
    scores<T, D>(s, shared_address(qs), k_at, warp, lane);
    scores<T, D>(dp, shared_address(dos), v_at, warp, lane);
    float correction[2];
    softmax_tile(s, m, l, correction, row, i0, j0, t, d); /* P: 0 exactly where not visible */
#pragma unroll
    for (int r = 0; r < 2; r++)
      weighted[r] *= correction[r];
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        weighted[e >> 1] += s[nt][e] * dp[nt][e];
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    /* a query seeing one key: the other terms are exact zeros, l = 1 and weighted = that dP exactly */
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    weighted[r] += __shfl_xor_sync(kFullMask, weighted[r], 1);
    weighted[r] += __shfl_xor_sync(kFullMask, weighted[r], 2);
    if (t == 0 && row[r] < d.queries) {
      const int64_t stat = (n * d.heads + h) * d.queries + row[r];
      lse[stat] = l[r] > 0.0f ? m[r] + logf(l[r]) : 0.0f;
      delta[stat] = l[r] > 0.0f ? weighted[r] / l[r] : 0.0f;
    }
  }
#endif
}

template <typename T, int D> tf_status run(const tf_cuda_args *args, const AttentionDims &d, bool backward) {
  const unsigned blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  cudaStream_t stream = stream_of(args);
  const T *q = (const T *)args->inputs[0].data, *k = (const T *)args->inputs[1].data;
  const T *v = (const T *)args->inputs[2].data;
  if (!backward) {
    const char *refused = prepare_fast_kernel(fast_forward<T, D>, forward_shared(D));
    if (refused)
      return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention (fast): %s", refused);
    fast_forward<T, D><<<blocks, kBlockThreads, forward_shared(D), stream>>>(q, k, v, (T *)args->outputs[0].data, d);
    return launch_status();
  }
  const char *refused = prepare_fast_kernel(fast_statistics<T, D>, query_shared(D));
  if (refused)
    return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention (fast): %s", refused);
  const int64_t rows = d.batch * d.heads * d.queries;
  float *lse = (float *)args->workspace, *delta = (float *)((char *)args->workspace + tf_cuda_round_up(4 * rows));
  fast_statistics<T, D>
      <<<blocks, kBlockThreads, query_shared(D), stream>>>(q, k, v, (const T *)args->inputs[3].data, lse, delta, d);
  TF_RETURN_IF_ERROR(launch_status());
  return launch_fast_attention_gradients(args, d, lse, delta);
}

template <typename T> tf_status run_of_depth(const tf_cuda_args *args, const AttentionDims &d, bool backward) {
  switch (d.depth) {
  case 32: return run<T, 32>(args, d, backward);
  case 64: return run<T, 64>(args, d, backward);
  default: return run<T, 128>(args, d, backward);
  }
}

} // namespace

tf_status launch_fast_attention(const tf_cuda_args *args, bool backward) {
  const AttentionDims d = attention_dims_of(args);
  if (args->inputs[0].dtype == TF_BF16)
    return run_of_depth<Bf16>(args, d, backward);
  return run_of_depth<F16>(args, d, backward);
}

} // namespace tf_cuda
