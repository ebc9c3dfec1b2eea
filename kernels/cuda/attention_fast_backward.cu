/* The gradient of attention on tensor cores, FlashAttention-2 style (TIGHTFIT_CUDA_TENSOR_ATTENTION=
 * fast), after attention_fast.cu's statistics kernel wrote lse and delta. Deterministic as the other
 * paths: every output element is written by one block, no atomics; so dQ and dK/dV are two kernels,
 * each recomputing S and dP (FlashAttention-2 makes both in one pass with atomic dQ).
 *   - dQ, per block one query tile (the last first) over the key tiles it sees, K and V double
 *     buffered by cp.async: S, dP in registers (scores()), P = expf(scale s - lse), dS = P (dP -
 *     delta) in f32, dS rounded once to 16 bits and used from registers as the A operand of dQ += dS K
 *     (K through ldmatrix.trans); dQ = scale dQ rounded once to the storage type.
 *   - dK and dV, per block one key tile over the query tiles that see it (from the tile's own first
 *     key when causal), Q and dO double buffered: S and dP with warp w on the query rows [16w, 16w +
 *     16) as everywhere, P and dS rounded once to 16 bits into shared memory ([query][key]), then warp
 *     w on the keys [16w, 16w + 16): dV += P^T dO, dK += dS^T Q (P^T, dS^T, dO and Q all through
 *     ldmatrix.trans); dK = scale dK, each rounded once.
 * Pairs not visible (causal, tails) have P = 0 and dS = 0; rows past the last query or key are zero in
 * the tiles and never written. */
#include "kernels/cuda/attention_fast.cuh"

namespace tf_cuda {
namespace {

using namespace fast_attention;

template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    fast_query_gradient(const T *q, const T *k, const T *v, const T *dy, const float *lse, const float *delta, T *dq,
                        AttentionDims d) {
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
  float row_lse[2], row_delta[2];
  load_statistics(lse, delta, (n * d.heads + h) * d.queries, row, d, row_lse, row_delta);
  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc[dn][e] = 0.0f;
  for (int64_t jt = 0; jt < key_tiles; jt++) {
    const int buf = (int)(jt & 1);
    const int64_t j0 = jt * kRows;
    copies_wait();
    __syncthreads(); /* tile jt is in; everyone is done with tile jt - 1's buffer */
    if (jt + 1 < key_tiles) {
      load_tile<D>(qs + (4 - 2 * buf) * tile, kh, j0 + kRows, d.keys, d.width); /* the other buffer */
      load_tile<D>(qs + (5 - 2 * buf) * tile, vh, j0 + kRows, d.keys, d.width);
      copies_commit();
    }
    float s[8][4], dp[8][4];
    const uint32_t k_at = shared_address(qs + (2 + 2 * buf) * tile), v_at = k_at + tile * 2;
    scores<T, D>(s, shared_address(qs), k_at, warp, lane);
    scores<T, D>(dp, shared_address(dos), v_at, warp, lane);
    probabilities(s, dp, row_lse, row_delta, row, i0, j0, t, d);
    uint32_t ds16[4][4];
    as_operand<T>(dp, ds16);
    accumulate<T, D>(acc, ds16, k_at, lane);
  }
  __syncthreads(); /* Q's rows become the output's staging (each warp its own) */
  write_rows<T, D>(acc, d.scale, qs, reinterpret_cast<uint16_t *>(dq) + q_base, i0, d.queries, d.width, warp, lane);
#endif
}

template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    fast_key_gradient(const T *q, const T *k, const T *v, const T *dy, const float *lse, const float *delta, T *dk,
                      T *dv, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  uint16_t *ks = reinterpret_cast<uint16_t *>(shared), *vs = ks + tile_bytes(D) / 2;
  constexpr int tile = tile_bytes(D) / 2; /* elements; buffer b's Q at ks + (2 + 2b) tile, dO after it */
  uint16_t *ps = ks + 6 * tile, *dss = ps + score_bytes() / 2; /* [query][key], stride kScoreStride */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t heads_total = d.batch * d.heads;
  /* the first key tiles first: under causal masking they have the most query tiles */
  const int64_t j0 = blockIdx.x / heads_total * kRows;
  const int64_t n = blockIdx.x % heads_total / d.heads, h = blockIdx.x % heads_total % d.heads;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  const uint16_t *qh = reinterpret_cast<const uint16_t *>(q) + q_base;
  const uint16_t *doh = reinterpret_cast<const uint16_t *>(dy) + q_base;
  const int64_t stat_base = (n * d.heads + h) * d.queries;
  /* causal: query i sees key j when j <= i, so the query tiles before j0's see none of this tile */
  const int64_t first_tile = d.causal ? j0 / kRows : 0, query_tiles = tiles_of(d.queries);
  load_tile<D>(ks, reinterpret_cast<const uint16_t *>(k) + k_base, j0, d.keys, d.width);
  load_tile<D>(vs, reinterpret_cast<const uint16_t *>(v) + k_base, j0, d.keys, d.width);
  if (first_tile < query_tiles) {
    load_tile<D>(ks + 2 * tile, qh, first_tile * kRows, d.queries, d.width);
    load_tile<D>(ks + 3 * tile, doh, first_tile * kRows, d.queries, d.width);
  }
  copies_commit();
  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      dk_acc[dn][e] = dv_acc[dn][e] = 0.0f;
  for (int64_t it = first_tile; it < query_tiles; it++) {
    const int buf = (int)((it - first_tile) & 1);
    const int64_t i0 = it * kRows;
    const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
    float row_lse[2], row_delta[2];
    load_statistics(lse, delta, stat_base, row, d, row_lse, row_delta);
    copies_wait();
    __syncthreads(); /* tile it is in; everyone is done with tile it - 1's buffer, P and dS */
    if (it + 1 < query_tiles) {
      load_tile<D>(ks + (4 - 2 * buf) * tile, qh, i0 + kRows, d.queries, d.width); /* the other buffer */
      load_tile<D>(ks + (5 - 2 * buf) * tile, doh, i0 + kRows, d.queries, d.width);
      copies_commit();
    }
    float s[8][4], dp[8][4];
    const uint32_t q_at = shared_address(ks + (2 + 2 * buf) * tile), do_at = q_at + tile * 2;
    scores<T, D>(s, q_at, shared_address(ks), warp, lane);
    scores<T, D>(dp, do_at, shared_address(vs), warp, lane);
    probabilities(s, dp, row_lse, row_delta, row, i0, j0, t, d);
#pragma unroll
    for (int nt = 0; nt < 8; nt++) { /* this warp's query rows g, g + 8; keys 8 nt + 2t, + 1 */
      const int at = (warp * 16 + g) * kScoreStride + nt * 8 + 2 * t, below = at + 8 * kScoreStride;
      *reinterpret_cast<uint32_t *>(ps + at) = pack<T>(s[nt][0], s[nt][1]);
      *reinterpret_cast<uint32_t *>(ps + below) = pack<T>(s[nt][2], s[nt][3]);
      *reinterpret_cast<uint32_t *>(dss + at) = pack<T>(dp[nt][0], dp[nt][1]);
      *reinterpret_cast<uint32_t *>(dss + below) = pack<T>(dp[nt][2], dp[nt][3]);
    }
    __syncthreads(); /* all of P and dS written */
    /* rows = keys now: warp w's keys [16w, 16w + 16), summed over the tile's 64 queries */
    accumulate_transposed<T, D>(dv_acc, shared_address(ps), do_at, warp, lane);
    accumulate_transposed<T, D>(dk_acc, shared_address(dss), q_at, warp, lane);
  }
  copies_wait();   /* nothing is left in flight; kept for the empty loop's first copies */
  __syncthreads(); /* K's and V's rows become the outputs' staging (each warp its own) */
  write_rows<T, D>(dv_acc, 1.0f, vs, reinterpret_cast<uint16_t *>(dv) + k_base, j0, d.keys, d.width, warp, lane);
  write_rows<T, D>(dk_acc, d.scale, ks, reinterpret_cast<uint16_t *>(dk) + k_base, j0, d.keys, d.width, warp, lane);
#endif
}

template <typename T, int D>
tf_status launch(const tf_cuda_args *args, const AttentionDims &d, const float *lse, const float *delta) {
  cudaStream_t stream = stream_of(args);
  const T *q = (const T *)args->inputs[0].data, *k = (const T *)args->inputs[1].data;
  const T *v = (const T *)args->inputs[2].data, *dy = (const T *)args->inputs[3].data;
  const char *refused = prepare_fast_kernel(fast_query_gradient<T, D>, query_shared(D));
  if (!refused)
    refused = prepare_fast_kernel(fast_key_gradient<T, D>, key_shared(D));
  if (refused) /* the statistics ran, but nothing was written to the outputs: the caller may redo it all */
    return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention (fast): %s", refused);
  const unsigned query_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  const unsigned key_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.keys));
  fast_query_gradient<T, D><<<query_blocks, kBlockThreads, query_shared(D), stream>>>(q, k, v, dy, lse, delta,
                                                                                      (T *)args->outputs[0].data, d);
  TF_RETURN_IF_ERROR(launch_status());
  fast_key_gradient<T, D><<<key_blocks, kBlockThreads, key_shared(D), stream>>>(
      q, k, v, dy, lse, delta, (T *)args->outputs[1].data, (T *)args->outputs[2].data, d);
  return launch_status();
}

template <typename T>
tf_status launch_of_depth(const tf_cuda_args *args, const AttentionDims &d, const float *lse, const float *delta) {
  switch (d.depth) {
  case 32: return launch<T, 32>(args, d, lse, delta);
  case 64: return launch<T, 64>(args, d, lse, delta);
  default: return launch<T, 128>(args, d, lse, delta);
  }
}

} // namespace

tf_status launch_fast_attention_gradients(const tf_cuda_args *args, const AttentionDims &d, const float *lse,
                                          const float *delta) {
  if (args->inputs[0].dtype == TF_BF16)
    return launch_of_depth<Bf16>(args, d, lse, delta);
  return launch_of_depth<F16>(args, d, lse, delta);
}

} // namespace tf_cuda
