/* The gradient of attention on tensor cores, after attention_mma.cu's statistics kernel wrote lse
 * and delta: the CUDA-core kernels' deterministic structure (every output written by one block, no
 * atomics, nothing [Tq, Tk] in memory) with the products on tensor cores (attention_mma.cuh).
 *   - dQ, per block one query tile over the key tiles it sees: S = Q K^T and dP = dO V^T (the very
 *     products the statistics made), P = exp(scale S - lse), dS = P (dP - delta) in f32 per element,
 *     dS in 16 bits (split: hi + lo), dQ += dS K; dQ = scale dQ rounded once to the storage type.
 *   - dK and dV, per block one key tile over the query tiles that see it (from the tile's own first
 *     key when causal): the same P and dS, then dV += P^T dO and dK += dS^T Q (P and dS read
 *     transposed from shared memory as column-major fragments); dK = scale dK, each rounded once.
 * Rows past the last query or key are zero in the tiles, invisible (P = 0) and never written. */
#include "kernels/cuda/attention_mma.cuh"

namespace tf_cuda {
namespace {

using namespace mma_attention;

#ifdef TF_MMA_ATTENTION
/* P and dS of one (query tile i0, key tile j0) pair from the scores in `ss`, `dps` and the query
 * rows' lse and delta, into 16-bit tiles (rows = queries, columns = keys); p_hi NULL: dS only. */
template <typename W>
__device__ inline void probabilities(const float *ss, const float *dps, const float *row_lse, const float *row_delta,
                                     int64_t i0, int64_t j0, const Params &p, W *p_hi, W *p_lo, W *ds_hi, W *ds_lo) {
  const AttentionDims &d = p.d;
  for (int idx = threadIdx.x; idx < kRows * kRows; idx += kBlockThreads) {
    const int r = idx / kRows, c = idx % kRows;
    // __fmul_rn: the scaled score rounded as the forward and the statistics rounded it
    const float pv = visible(i0 + r, j0 + c, d) ? expf(__fmul_rn(ss[r * kScoreLd + c], d.scale) - row_lse[r]) : 0.0f;
    const float ds = pv * (dps[r * kScoreLd + c] - row_delta[r]);
    if (p_hi)
      split_into(pv, p.split, &p_hi[r * kHalfLd + c], &p_lo[r * kHalfLd + c]);
    split_into(ds, p.split, &ds_hi[r * kHalfLd + c], &ds_lo[r * kHalfLd + c]);
  }
}

/* The query tile's rows of lse and delta (0 past the last query). */
__device__ inline void load_rows(float *row_lse, float *row_delta, const float *lse, const float *delta,
                                 int64_t stat_base, int64_t i0, const AttentionDims &d) {
  if (threadIdx.x < kRows) {
    const int64_t i = i0 + threadIdx.x;
    row_lse[threadIdx.x] = i < d.queries ? lse[stat_base + i] : 0.0f;
    row_delta[threadIdx.x] = i < d.queries ? delta[stat_base + i] : 0.0f;
  }
}
#endif

template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads)
    mma_query_gradient(const T *q, const T *k, const T *v, const T *dy, const float *lse, const float *delta, T *dq,
                       Params p) {
#ifdef TF_MMA_ATTENTION
  using W = typename Wmma<T>::type;
  extern __shared__ __align__(kAlign) unsigned char shared[];
  Carver carve{shared};
  uint16_t *qs = carve.take<uint16_t>(staged_bytes(D)), *dos = carve.take<uint16_t>(staged_bytes(D));
  uint16_t *ks = carve.take<uint16_t>(staged_bytes(D)), *vs = carve.take<uint16_t>(staged_bytes(D));
  float *ss = carve.take<float>(score_bytes()), *dps = carve.take<float>(score_bytes());
  W *ds_hi = carve.take<W>(half_tile_bytes()), *ds_lo = carve.take<W>(half_tile_bytes());
  float *row_lse = carve.take<float>(row_bytes()), *row_delta = carve.take<float>(row_bytes());
  float *scratch = carve.take<float>(scratch_bytes());
  const AttentionDims &d = p.d;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tiles = tiles_of(d.queries);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t i0 = blockIdx.x % tiles * kRows;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  load_tile<D>(qs, reinterpret_cast<const uint16_t *>(q) + q_base, i0, d.queries, d.width);
  load_tile<D>(dos, reinterpret_cast<const uint16_t *>(dy) + q_base, i0, d.queries, d.width);
  load_rows(row_lse, row_delta, lse, delta, (n * d.heads + h) * d.queries, i0, d);
  Accumulator acc[D / 16];
#pragma unroll
  for (int dn = 0; dn < D / 16; dn++)
    wmma::fill_fragment(acc[dn], 0.0f);
  const int64_t keys_end = d.causal && i0 + kRows < d.keys ? i0 + kRows : d.keys;
  for (int64_t j0 = 0; j0 < keys_end; j0 += kRows) {
    __syncthreads(); /* the last tile's K and dS are read */
    load_tile<D>(ks, reinterpret_cast<const uint16_t *>(k) + k_base, j0, d.keys, d.width);
    load_tile<D>(vs, reinterpret_cast<const uint16_t *>(v) + k_base, j0, d.keys, d.width);
    __syncthreads();
    score_tile<W, D>(reinterpret_cast<const W *>(qs), reinterpret_cast<const W *>(ks), ss, warp);
    score_tile<W, D>(reinterpret_cast<const W *>(dos), reinterpret_cast<const W *>(vs), dps, warp);
    __syncthreads();
    probabilities<W>(ss, dps, row_lse, row_delta, i0, j0, p, (W *)NULL, (W *)NULL, ds_hi, ds_lo);
    __syncthreads();
    accumulate<W, D, wmma::row_major>(acc, ds_hi, reinterpret_cast<const W *>(ks), warp);
    if (p.split)
      accumulate<W, D, wmma::row_major>(acc, ds_lo, reinterpret_cast<const W *>(ks), warp);
  }
  write_rows<T, D>(acc, d.scale, scratch + warp * 256, dq + q_base, i0, d.queries, d.width, warp, lane);
#endif
}

template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads)
    mma_key_gradient(const T *q, const T *k, const T *v, const T *dy, const float *lse, const float *delta, T *dk,
                     T *dv, Params p) {
#ifdef TF_MMA_ATTENTION
  using W = typename Wmma<T>::type;
  extern __shared__ __align__(kAlign) unsigned char shared[];
  Carver carve{shared};
  uint16_t *qs = carve.take<uint16_t>(staged_bytes(D)), *dos = carve.take<uint16_t>(staged_bytes(D));
  uint16_t *ks = carve.take<uint16_t>(staged_bytes(D)), *vs = carve.take<uint16_t>(staged_bytes(D));
  float *ss = carve.take<float>(score_bytes()), *dps = carve.take<float>(score_bytes());
  W *p_hi = carve.take<W>(half_tile_bytes()), *p_lo = carve.take<W>(half_tile_bytes());
  W *ds_hi = carve.take<W>(half_tile_bytes()), *ds_lo = carve.take<W>(half_tile_bytes());
  float *row_lse = carve.take<float>(row_bytes()), *row_delta = carve.take<float>(row_bytes());
  float *scratch = carve.take<float>(scratch_bytes());
  const AttentionDims &d = p.d;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tiles = tiles_of(d.keys);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t j0 = blockIdx.x % tiles * kRows;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  load_tile<D>(ks, reinterpret_cast<const uint16_t *>(k) + k_base, j0, d.keys, d.width);
  load_tile<D>(vs, reinterpret_cast<const uint16_t *>(v) + k_base, j0, d.keys, d.width);
  Accumulator dk_acc[D / 16], dv_acc[D / 16];
#pragma unroll
  for (int dn = 0; dn < D / 16; dn++) {
    wmma::fill_fragment(dk_acc[dn], 0.0f);
    wmma::fill_fragment(dv_acc[dn], 0.0f);
  }
  /* causal: query i sees key j when j <= i, so the queries before j0 see none of this tile */
  for (int64_t i0 = d.causal ? j0 : 0; i0 < d.queries; i0 += kRows) {
    __syncthreads(); /* the last tile's Q, dO, P and dS are read */
    load_tile<D>(qs, reinterpret_cast<const uint16_t *>(q) + q_base, i0, d.queries, d.width);
    load_tile<D>(dos, reinterpret_cast<const uint16_t *>(dy) + q_base, i0, d.queries, d.width);
    load_rows(row_lse, row_delta, lse, delta, (n * d.heads + h) * d.queries, i0, d);
    __syncthreads();
    score_tile<W, D>(reinterpret_cast<const W *>(qs), reinterpret_cast<const W *>(ks), ss, warp);
    score_tile<W, D>(reinterpret_cast<const W *>(dos), reinterpret_cast<const W *>(vs), dps, warp);
    __syncthreads();
    probabilities<W>(ss, dps, row_lse, row_delta, i0, j0, p, p_hi, p_lo, ds_hi, ds_lo);
    __syncthreads();
    /* rows = keys now: warp w's keys [16w, 16w + 16), summed over the tile's queries */
    accumulate<W, D, wmma::col_major>(dv_acc, p_hi, reinterpret_cast<const W *>(dos), warp);
    accumulate<W, D, wmma::col_major>(dk_acc, ds_hi, reinterpret_cast<const W *>(qs), warp);
    if (p.split) {
      accumulate<W, D, wmma::col_major>(dv_acc, p_lo, reinterpret_cast<const W *>(dos), warp);
      accumulate<W, D, wmma::col_major>(dk_acc, ds_lo, reinterpret_cast<const W *>(qs), warp);
    }
  }
  write_rows<T, D>(dv_acc, 1.0f, scratch + warp * 256, dv + k_base, j0, d.keys, d.width, warp, lane);
  write_rows<T, D>(dk_acc, d.scale, scratch + warp * 256, dk + k_base, j0, d.keys, d.width, warp, lane);
#endif
}

/* Opts `kernel` in to `bytes` of shared memory. */
template <typename Kernel> tf_status allow(Kernel kernel, int bytes) {
  return call_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
                     "allowing %d bytes of shared memory for a tensor-core attention kernel", bytes);
}

template <typename T, int D>
tf_status launch(const tf_cuda_args *args, const Params &p, const float *lse, const float *delta) {
  cudaStream_t stream = stream_of(args);
  const T *q = (const T *)args->inputs[0].data, *k = (const T *)args->inputs[1].data;
  const T *v = (const T *)args->inputs[2].data, *dy = (const T *)args->inputs[3].data;
  TF_RETURN_IF_ERROR(allow(mma_query_gradient<T, D>, query_shared(D)));
  TF_RETURN_IF_ERROR(allow(mma_key_gradient<T, D>, key_shared(D)));
  const unsigned query_blocks = (unsigned)(p.d.batch * p.d.heads * tiles_of(p.d.queries));
  const unsigned key_blocks = (unsigned)(p.d.batch * p.d.heads * tiles_of(p.d.keys));
  mma_query_gradient<T, D><<<query_blocks, kBlockThreads, query_shared(D), stream>>>(q, k, v, dy, lse, delta,
                                                                                     (T *)args->outputs[0].data, p);
  TF_RETURN_IF_ERROR(launch_status());
  mma_key_gradient<T, D><<<key_blocks, kBlockThreads, key_shared(D), stream>>>(
      q, k, v, dy, lse, delta, (T *)args->outputs[1].data, (T *)args->outputs[2].data, p);
  return launch_status();
}

template <typename T>
tf_status launch_of_depth(const tf_cuda_args *args, const Params &p, const float *lse, const float *delta) {
  switch (p.d.depth) {
  case 32: return launch<T, 32>(args, p, lse, delta);
  case 64: return launch<T, 64>(args, p, lse, delta);
  default: return launch<T, 128>(args, p, lse, delta);
  }
}

} // namespace

tf_status launch_mma_attention_gradients(const tf_cuda_args *args, const mma_attention::Params &p, const float *lse,
                                         const float *delta) {
  if (args->inputs[0].dtype == TF_BF16)
    return launch_of_depth<Bf16>(args, p, lse, delta);
  return launch_of_depth<F16>(args, p, lse, delta);
}

} // namespace tf_cuda
