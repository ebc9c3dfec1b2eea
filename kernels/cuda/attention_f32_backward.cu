/* The gradient of f32 attention on tensor cores (TIGHTFIT_CUDA_F32_ATTENTION=tensor), after
 * attention_f32.cu's statistics kernel wrote lse and delta: attention_fast_backward.cu's two
 * deterministic kernels with f32 tiles and 3xTF32 products (attention_f32.cuh).
 *   - dQ, per block one query tile (the last first) over the key tiles it sees, K and V double
 *     buffered: S, dP in registers (scores()), P and dS = P (dP - delta) in f32 (probabilities()), dS
 *     used from registers as the A operand of dQ += dS K; dQ = scale dQ.
 *   - dK and dV, per block one key tile over the query tiles that see it (from the tile's own first
 *     key when causal), Q and dO double buffered: S and dP with warp w on the query rows [16w, 16w +
 *     16), P and dS in f32 into shared memory ([query][key]), then warp w on the keys [16w, 16w + 16):
 *     dV += P^T dO, dK += dS^T Q; dK = scale dK.
 * Pairs not visible (causal, tails) have P = 0 and dS = 0; rows past the last query or key are zero in
 * the tiles and never written. */
#include "kernels/cuda/attention_f32.cuh"

namespace tf_cuda {
namespace {

using namespace f32_attention;
#ifdef TF_FAST_ATTENTION
using fast_attention::copies_commit;
using fast_attention::copies_wait;
using fast_attention::query_block;
using fast_attention::QueryBlock;
#endif

template <int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    f32_query_gradient(const float *q, const float *k, const float *v, const float *dy, const float *lse,
                       const float *delta, float *dq, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int tile = tile_bytes(D) / 4; /* floats; buffer b's K at qs + (2 + 2b) tile, V after it */
  float *qs = reinterpret_cast<float *>(shared), *dos = qs + tile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const QueryBlock block = query_block<D>(d);
  const int64_t i0 = block.i0, key_tiles = block.key_tiles;
  const float *kh = k + block.k_base, *vh = v + block.k_base;
  load_tile<D>(qs, q + block.q_base, i0, d.queries, d.width);
  load_tile<D>(dos, dy + block.q_base, i0, d.queries, d.width);
  load_tile<D>(qs + 2 * tile, kh, 0, d.keys, d.width);
  load_tile<D>(qs + 3 * tile, vh, 0, d.keys, d.width);
  copies_commit();
  const int64_t row[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  float row_lse[2], row_delta[2];
  fast_attention::load_statistics(lse, delta, (block.n * d.heads + block.h) * d.queries, row, d, row_lse, row_delta);
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
    const float *ks = qs + (2 + 2 * buf) * tile, *vs = ks + tile;
    float s[8][4], dp[8][4];
    scores<D>(s, qs, ks, warp, lane);
    scores<D>(dp, dos, vs, warp, lane);
    fast_attention::probabilities(s, dp, row_lse, row_delta, row, i0, j0, t, d);
    accumulate<D>(acc, dp, ks, lane);
  }
  write_rows<D>(acc, d.scale, dq + block.q_base, i0, d.queries, d.width, warp, lane);
#endif
}

template <int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    f32_key_gradient(const float *q, const float *k, const float *v, const float *dy, const float *lse,
                     const float *delta, float *dk, float *dv, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int tile = tile_bytes(D) / 4; /* floats; buffer b's Q at ks + (2 + 2b) tile, dO after it */
  float *ks = reinterpret_cast<float *>(shared), *vs = ks + tile;
  float *ps = ks + 6 * tile, *dss = ps + score_bytes() / 4; /* [query][key], stride kScoreStride */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int64_t heads_total = d.batch * d.heads;
  /* the first key tiles first: under causal masking they have the most query tiles */
  const int64_t j0 = blockIdx.x / heads_total * kRows;
  const int64_t n = blockIdx.x % heads_total / d.heads, h = blockIdx.x % heads_total % d.heads;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  const float *qh = q + q_base, *doh = dy + q_base;
  const int64_t stat_base = (n * d.heads + h) * d.queries;
  /* causal: query i sees key j when j <= i, so the query tiles before j0's see none of this tile */
  const int64_t first_tile = d.causal ? j0 / kRows : 0, query_tiles = tiles_of(d.queries);
  load_tile<D>(ks, k + k_base, j0, d.keys, d.width);
  load_tile<D>(vs, v + k_base, j0, d.keys, d.width);
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
    fast_attention::load_statistics(lse, delta, stat_base, row, d, row_lse, row_delta);
    copies_wait();
    __syncthreads(); /* tile it is in; everyone is done with tile it - 1's buffer, P and dS */
    if (it + 1 < query_tiles) {
      load_tile<D>(ks + (4 - 2 * buf) * tile, qh, i0 + kRows, d.queries, d.width); /* the other buffer */
      load_tile<D>(ks + (5 - 2 * buf) * tile, doh, i0 + kRows, d.queries, d.width);
      copies_commit();
    }
    const float *qs = ks + (2 + 2 * buf) * tile, *dos = qs + tile;
    float s[8][4], dp[8][4];
    scores<D>(s, qs, ks, warp, lane);
    scores<D>(dp, dos, vs, warp, lane);
    fast_attention::probabilities(s, dp, row_lse, row_delta, row, i0, j0, t, d);
#pragma unroll
    for (int nt = 0; nt < 8; nt++) { /* this warp's query rows g, g + 8; keys 8 nt + 2t, + 1 */
      const int at = (warp * 16 + g) * kScoreStride + nt * 8 + 2 * t, below = at + 8 * kScoreStride;
      ps[at] = s[nt][0], ps[at + 1] = s[nt][1], ps[below] = s[nt][2], ps[below + 1] = s[nt][3];
      dss[at] = dp[nt][0], dss[at + 1] = dp[nt][1], dss[below] = dp[nt][2], dss[below + 1] = dp[nt][3];
    }
    __syncthreads(); /* all of P and dS written */
    /* rows = keys now: warp w's keys [16w, 16w + 16), summed over the tile's 64 queries */
    accumulate_transposed<D>(dv_acc, ps, dos, warp, lane);
    accumulate_transposed<D>(dk_acc, dss, qs, warp, lane);
  }
  copies_wait(); /* nothing is left in flight (the empty loop's first copies) */
  write_rows<D>(dv_acc, 1.0f, dv + k_base, j0, d.keys, d.width, warp, lane);
  write_rows<D>(dk_acc, d.scale, dk + k_base, j0, d.keys, d.width, warp, lane);
#endif
}

template <int D>
tf_status launch(const tf_cuda_args *args, const AttentionDims &d, const float *lse, const float *delta) {
  cudaStream_t stream = stream_of(args);
  const float *q = (const float *)args->inputs[0].data, *k = (const float *)args->inputs[1].data;
  const float *v = (const float *)args->inputs[2].data, *dy = (const float *)args->inputs[3].data;
  const char *refused = prepare_fast_kernel(f32_query_gradient<D>, query_shared(D));
  if (!refused)
    refused = prepare_fast_kernel(f32_key_gradient<D>, key_shared(D));
  if (refused) /* the statistics ran, but nothing was written to the outputs: the caller may redo it all */
    return tf_status_new(TF_ERR_UNSUPPORTED, "f32 tensor-core attention: %s", refused);
  const unsigned query_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  const unsigned key_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.keys));
  f32_query_gradient<D><<<query_blocks, kBlockThreads, query_shared(D), stream>>>(q, k, v, dy, lse, delta,
                                                                                  (float *)args->outputs[0].data, d);
  TF_RETURN_IF_ERROR(launch_status());
  f32_key_gradient<D><<<key_blocks, kBlockThreads, key_shared(D), stream>>>(
      q, k, v, dy, lse, delta, (float *)args->outputs[1].data, (float *)args->outputs[2].data, d);
  return launch_status();
}

} // namespace

tf_status launch_f32_attention_gradients(const tf_cuda_args *args, const AttentionDims &d, const float *lse,
                                         const float *delta) {
  switch (d.depth) {
  case 32: return launch<32>(args, d, lse, delta);
  case 64: return launch<64>(args, d, lse, delta);
  default: return launch<128>(args, d, lse, delta);
  }
}

} // namespace tf_cuda
