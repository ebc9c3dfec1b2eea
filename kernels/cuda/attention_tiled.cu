/* Fused attention and its gradient for heads of up to 128 features, in 64 x 64 tiles through shared
 * memory: the same algorithm as attention.cu's row kernels (online softmax forward; a backward that
 * recomputes the row statistics, then dQ per query tile and dK, dV per key tile, each output
 * owned by one thread: deterministic, no atomics, nothing [Tq, Tk] stored), but each block of 256
 * threads works on 64 rows at once and each thread on a 4 x 4 piece of a score tile, so a value read
 * from shared memory feeds four multiply-adds instead of one shuffle each.
 *
 * Layout: q [N, Tq, H*D], k and v [N, Tk, H*D]; head h is columns [h*D, (h+1)*D). Thread t is
 * (ty, tx) = (t / 16, t % 16); in a score tile it holds rows ty*4 + r and columns tx + 16*c
 * (r, c < 4), in a [64, D] tile rows ty*4 + r and columns tx + 16*cc (cc < DC, D <= 16*DC). Tiles
 * are stored with a row stride of 16*DC + 1 floats (conflict-free column reads), zero past D and
 * past the last row.
 *
 * Exactness where it matters: every score and every dO.v_j is one thread's fmaf chain over d in
 * order, and delta = dO.O is summed the same way, so a query that sees a single key (p = 1, O = v_j
 * bit for bit: the first rows of causal attention) gets dS = dP - delta = 0 exactly, as on the CPU.
 *
 * Needs up to 162 KiB of shared memory per block (the dK/dV kernel at D = 128): tiled_attention()
 * declines (the row kernels run) on a device that cannot give it.
 *
 * The kernels are templated on the storage T of q, k, v, dy and the outputs: f32, and f16/bf16 for
 * the cuda target's half kernels, whose elements are loaded to f32 (into the f32 tiles, and dO for
 * delta) and whose results are each rounded once to T; the recomputed O, the workspace's L and
 * delta and all shared memory stay f32, so a half kernel writes exactly what cast up -> f32 kernel
 * -> cast down writes. The gradient's q, k, v may have a storage I of their own: f16/bf16 beside an
 * f32 dy and f32 gradients (a --precision plan reading the q, k, v it stored in half). */
#include "kernels/cuda/attention_dims.cuh"

namespace tf_cuda {
namespace {

constexpr int kTileRows = 64;
constexpr int kTileThreads = 256;
constexpr int kScoreStride = kTileRows + 1;

__host__ __device__ inline int64_t tiles_of(int64_t rows) { return (rows + kTileRows - 1) / kTileRows; }

/* Rows [first, first + 64) of one head of a [rows, width] tensor of storage T into the f32 `tile`
 * (stride DM + 1): zeros past `limit` rows and past `depth` columns. */
template <int DM, typename T>
__device__ inline void load_tile(float *tile, const T *head, int64_t first, int64_t limit, const AttentionDims &d) {
  for (int idx = threadIdx.x; idx < kTileRows * DM; idx += kTileThreads) {
    const int r = idx / DM, c = idx % DM;
    tile[r * (DM + 1) + c] = first + r < limit && c < d.depth ? to_f32(head[(first + r) * d.width + c]) : 0.0f;
  }
}

/* acc[r][c] = sum over d of a[row r][d] * b[col c][d], one fmaf chain in d order per element. */
template <int DM>
__device__ inline void tile_products(const float *a, const float *b, int ty, int tx, float (&acc)[4][4]) {
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int c = 0; c < 4; c++)
      acc[r][c] = 0.0f;
#pragma unroll 4
  for (int dd = 0; dd < DM; dd++) {
    float av[4], bv[4];
#pragma unroll
    for (int r = 0; r < 4; r++)
      av[r] = a[(ty * 4 + r) * (DM + 1) + dd];
#pragma unroll
    for (int c = 0; c < 4; c++)
      bv[c] = b[(tx + 16 * c) * (DM + 1) + dd];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int c = 0; c < 4; c++)
        acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
  }
}

/* Reductions over the 16 threads that share a row (tx = 0..15: one half of a warp). */
__device__ inline float row_max16(float v) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
__device__ inline float row_sum16(float v) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ inline bool visible(int64_t i, int64_t j, const AttentionDims &d) {
  return i < d.queries && j < d.keys && (!d.causal || j <= i);
}

/* Forward over one query tile: y, or (dy != NULL) the backward's statistics lse and delta. */
template <typename T, int DC, typename I = T>
__global__ void __launch_bounds__(kTileThreads)
    tiled_forward(const I *q, const I *k, const I *v, const T *dy, T *y, float *lse, float *delta, AttentionDims d) {
  constexpr int DM = 16 * DC, SD = DM + 1;
  extern __shared__ float shared[];
  float *qs = shared, *kv = qs + kTileRows * SD, *ps = kv + kTileRows * SD;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = tiles_of(d.queries);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t i0 = blockIdx.x % tiles * kTileRows;
  const int64_t q_base = n * d.queries * d.width + h * d.depth, k_base = n * d.keys * d.width + h * d.depth;
  load_tile<DM>(qs, q + q_base, i0, d.queries, d);
  float m[4], l[4], o[4][DC];
#pragma unroll
  for (int r = 0; r < 4; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      o[r][cc] = 0.0f;
  }
  const int64_t keys_end = d.causal && i0 + kTileRows < d.keys ? i0 + kTileRows : d.keys;
  for (int64_t j0 = 0; j0 < keys_end; j0 += kTileRows) {
    __syncthreads(); /* the last tile's V and P are read */
    load_tile<DM>(kv, k + k_base, j0, d.keys, d);
    __syncthreads();
    float s[4][4];
    tile_products<DM>(qs, kv, ty, tx, s);
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int64_t i = i0 + ty * 4 + r;
      float row_top = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        s[r][c] = visible(i, j0 + tx + 16 * c, d) ? __fmul_rn(s[r][c], d.scale) : -INFINITY;
        row_top = fmaxf(row_top, s[r][c]);
      }
      const float m_new = fmaxf(m[r], row_max16(row_top));
      float p_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const float p = s[r][c] == -INFINITY ? 0.0f : expf(s[r][c] - m_new);
        ps[(ty * 4 + r) * kScoreStride + tx + 16 * c] = p;
        p_sum += p;
      }
      p_sum = row_sum16(p_sum);
      if (m_new != -INFINITY) {
        const float correction = expf(m[r] - m_new); /* 0 when m was -inf */
        l[r] = l[r] * correction + p_sum;
#pragma unroll
        for (int cc = 0; cc < DC; cc++)
          o[r][cc] *= correction;
        m[r] = m_new;
      }
    }
    __syncthreads(); /* P written; K read by everyone */
    load_tile<DM>(kv, v + k_base, j0, d.keys, d);
    __syncthreads();
    for (int jj = 0; jj < kTileRows; jj++) {
      float vv[DC];
#pragma unroll
      for (int cc = 0; cc < DC; cc++)
        vv[cc] = kv[jj * SD + tx + 16 * cc];
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const float p = ps[(ty * 4 + r) * kScoreStride + jj];
#pragma unroll
        for (int cc = 0; cc < DC; cc++)
          o[r][cc] = fmaf(p, vv[cc], o[r][cc]);
      }
    }
  }
  float inverse[4];
#pragma unroll
  for (int r = 0; r < 4; r++)
    inverse[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
  if (!dy) {
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int64_t i = i0 + ty * 4 + r;
      if (i >= d.queries)
        continue;
#pragma unroll
      for (int cc = 0; cc < DC; cc++)
        if (tx + 16 * cc < d.depth)
          y[q_base + i * d.width + tx + 16 * cc] = from_f32<T>(o[r][cc] * inverse[r]);
    }
    return;
  }
  /* Statistics: O into shared memory (over Q, no longer read), then one thread per row sums
   * dO . O in d order, as tile_products sums dO . v_j. */
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      qs[(ty * 4 + r) * SD + tx + 16 * cc] = o[r][cc] * inverse[r];
  __syncthreads();
  if (threadIdx.x < kTileRows) {
    const int row = threadIdx.x;
    const int64_t i = i0 + row;
    if (i < d.queries) {
      const T *dyr = dy + q_base + i * d.width;
      float dot = 0.0f;
      for (int dd = 0; dd < DM; dd++)
        dot = fmaf(dd < d.depth ? to_f32(dyr[dd]) : 0.0f, qs[row * SD + dd], dot);
      const int64_t stat = (n * d.heads + h) * d.queries + i;
      delta[stat] = dot;
    }
  }
  if (tx == 0)
#pragma unroll
    for (int r = 0; r < 4; r++) {
      const int64_t i = i0 + ty * 4 + r;
      if (i < d.queries)
        lse[(n * d.heads + h) * d.queries + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : 0.0f;
    }
}

/* P and dS of one (query tile, key tile) pair from the staged Q, dO, K, V and the query rows'
 * statistics (rows = queries ty*4 + r, columns = keys tx + 16c). */
template <int DM>
__device__ inline void scores_and_gradients(const float *qs, const float *dos, const float *ks, const float *vs,
                                            const float *row_lse, const float *row_delta, int64_t i0, int64_t j0,
                                            const AttentionDims &d, int ty, int tx, float (&p)[4][4],
                                            float (&ds)[4][4]) {
  float s[4][4], dp[4][4];
  tile_products<DM>(qs, ks, ty, tx, s);
  tile_products<DM>(dos, vs, ty, tx, dp);
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const int row = ty * 4 + r;
#pragma unroll
    for (int c = 0; c < 4; c++) {
      // __fmul_rn: the scaled score rounded as the forward rounded it (an fma with -lse would not be)
      p[r][c] = visible(i0 + row, j0 + tx + 16 * c, d) ? expf(__fmul_rn(s[r][c], d.scale) - row_lse[row]) : 0.0f;
      ds[r][c] = p[r][c] * (dp[r][c] - row_delta[row]);
    }
  }
}

/* The query tile's rows of lse and delta into shared memory (0 past the last query). */
__device__ inline void load_stats(float *row_lse, float *row_delta, const float *lse, const float *delta,
                                  int64_t stat_base, int64_t i0, const AttentionDims &d) {
  if (threadIdx.x < kTileRows) {
    const int64_t i = i0 + threadIdx.x;
    row_lse[threadIdx.x] = i < d.queries ? lse[stat_base + i] : 0.0f;
    row_delta[threadIdx.x] = i < d.queries ? delta[stat_base + i] : 0.0f;
  }
}

/* dQ = scale sum_j dS_ij k_j over one query tile. */
template <typename T, int DC, typename I = T>
__global__ void __launch_bounds__(kTileThreads)
    tiled_query_gradient(const I *q, const I *k, const I *v, const T *dy, const float *lse, const float *delta, T *dq,
                         AttentionDims d) {
  constexpr int DM = 16 * DC, SD = DM + 1;
  extern __shared__ float shared[];
  float *qs = shared, *dos = qs + kTileRows * SD, *ks = dos + kTileRows * SD, *vs = ks + kTileRows * SD;
  float *dss = vs + kTileRows * SD, *row_lse = dss + kTileRows * kScoreStride, *row_delta = row_lse + kTileRows;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = tiles_of(d.queries);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t i0 = blockIdx.x % tiles * kTileRows;
  const int64_t q_base = n * d.queries * d.width + h * d.depth, k_base = n * d.keys * d.width + h * d.depth;
  load_tile<DM>(qs, q + q_base, i0, d.queries, d);
  load_tile<DM>(dos, dy + q_base, i0, d.queries, d);
  load_stats(row_lse, row_delta, lse, delta, (n * d.heads + h) * d.queries, i0, d);
  float acc[4][DC];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      acc[r][cc] = 0.0f;
  const int64_t keys_end = d.causal && i0 + kTileRows < d.keys ? i0 + kTileRows : d.keys;
  for (int64_t j0 = 0; j0 < keys_end; j0 += kTileRows) {
    __syncthreads(); /* the last tile's K and dS are read */
    load_tile<DM>(ks, k + k_base, j0, d.keys, d);
    load_tile<DM>(vs, v + k_base, j0, d.keys, d);
    __syncthreads();
    float p[4][4], ds[4][4];
    scores_and_gradients<DM>(qs, dos, ks, vs, row_lse, row_delta, i0, j0, d, ty, tx, p, ds);
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int c = 0; c < 4; c++)
        dss[(ty * 4 + r) * kScoreStride + tx + 16 * c] = ds[r][c];
    __syncthreads();
    for (int jj = 0; jj < kTileRows; jj++) {
      float kk[DC];
#pragma unroll
      for (int cc = 0; cc < DC; cc++)
        kk[cc] = ks[jj * SD + tx + 16 * cc];
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const float g = dss[(ty * 4 + r) * kScoreStride + jj];
#pragma unroll
        for (int cc = 0; cc < DC; cc++)
          acc[r][cc] = fmaf(g, kk[cc], acc[r][cc]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const int64_t i = i0 + ty * 4 + r;
    if (i >= d.queries)
      continue;
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      if (tx + 16 * cc < d.depth)
        dq[q_base + i * d.width + tx + 16 * cc] = from_f32<T>(d.scale * acc[r][cc]);
  }
}

/* dV = sum_i P_ij dO_i and dK = scale sum_i dS_ij q_i over one key tile. */
template <typename T, int DC, typename I = T>
__global__ void __launch_bounds__(kTileThreads)
    tiled_key_gradient(const I *q, const I *k, const I *v, const T *dy, const float *lse, const float *delta, T *dk,
                       T *dv, AttentionDims d) {
  constexpr int DM = 16 * DC, SD = DM + 1;
  extern __shared__ float shared[];
  float *qs = shared, *dos = qs + kTileRows * SD, *ks = dos + kTileRows * SD, *vs = ks + kTileRows * SD;
  float *pss = vs + kTileRows * SD, *dss = pss + kTileRows * kScoreStride;
  float *row_lse = dss + kTileRows * kScoreStride, *row_delta = row_lse + kTileRows;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t tiles = tiles_of(d.keys);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t j0 = blockIdx.x % tiles * kTileRows;
  const int64_t q_base = n * d.queries * d.width + h * d.depth, k_base = n * d.keys * d.width + h * d.depth;
  load_tile<DM>(ks, k + k_base, j0, d.keys, d);
  load_tile<DM>(vs, v + k_base, j0, d.keys, d);
  float dk_acc[4][DC], dv_acc[4][DC];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      dk_acc[r][cc] = dv_acc[r][cc] = 0.0f;
  /* causal: query i sees key j when j <= i, so the queries before j0 see none of this tile */
  for (int64_t i0 = d.causal ? j0 : 0; i0 < d.queries; i0 += kTileRows) {
    __syncthreads(); /* the last tile's Q, dO, P and dS are read */
    load_tile<DM>(qs, q + q_base, i0, d.queries, d);
    load_tile<DM>(dos, dy + q_base, i0, d.queries, d);
    load_stats(row_lse, row_delta, lse, delta, (n * d.heads + h) * d.queries, i0, d);
    __syncthreads();
    float p[4][4], ds[4][4];
    scores_and_gradients<DM>(qs, dos, ks, vs, row_lse, row_delta, i0, j0, d, ty, tx, p, ds);
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        pss[(ty * 4 + r) * kScoreStride + tx + 16 * c] = p[r][c];
        dss[(ty * 4 + r) * kScoreStride + tx + 16 * c] = ds[r][c];
      }
    __syncthreads();
    /* now rows = keys ty*4 + r, columns = features tx + 16cc, summed over the tile's queries */
    for (int ii = 0; ii < kTileRows; ii++) {
      float o_row[DC], q_row[DC];
#pragma unroll
      for (int cc = 0; cc < DC; cc++) {
        o_row[cc] = dos[ii * SD + tx + 16 * cc];
        q_row[cc] = qs[ii * SD + tx + 16 * cc];
      }
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const float pk = pss[ii * kScoreStride + ty * 4 + r], gk = dss[ii * kScoreStride + ty * 4 + r];
#pragma unroll
        for (int cc = 0; cc < DC; cc++) {
          dv_acc[r][cc] = fmaf(pk, o_row[cc], dv_acc[r][cc]);
          dk_acc[r][cc] = fmaf(gk, q_row[cc], dk_acc[r][cc]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const int64_t j = j0 + ty * 4 + r;
    if (j >= d.keys)
      continue;
#pragma unroll
    for (int cc = 0; cc < DC; cc++)
      if (tx + 16 * cc < d.depth) {
        dk[k_base + j * d.width + tx + 16 * cc] = from_f32<T>(d.scale * dk_acc[r][cc]);
        dv[k_base + j * d.width + tx + 16 * cc] = from_f32<T>(dv_acc[r][cc]);
      }
  }
}

size_t forward_shared(int dc) {
  return sizeof(float) * (size_t)(2 * kTileRows * (16 * dc + 1) + kTileRows * kScoreStride);
}
size_t query_shared(int dc) {
  return sizeof(float) * (size_t)(4 * kTileRows * (16 * dc + 1) + kTileRows * kScoreStride + 2 * kTileRows);
}
size_t key_shared(int dc) {
  return sizeof(float) * (size_t)(4 * kTileRows * (16 * dc + 1) + 2 * kTileRows * kScoreStride + 2 * kTileRows);
}

/* The shared memory a block may opt in to on the current device, as TIGHTFIT_CUDA_LIMITS may lower
 * it (0 when it cannot be read). */
size_t opt_in_shared() {
  tf_cuda_limits limits;
  return tf_cuda_current_limits(&limits) ? (size_t)limits.shared_optin : 0;
}

template <typename Kernel> tf_status allow_shared(Kernel kernel, size_t bytes) {
  return call_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
                     "allowing %zu bytes of shared memory for an attention kernel", bytes);
}

template <typename T, int DC> tf_status run_tiled_forward(const tf_cuda_args *args) {
  const AttentionDims d = attention_dims_of(args);
  const T *q = (const T *)args->inputs[0].data, *k = (const T *)args->inputs[1].data;
  const T *v = (const T *)args->inputs[2].data;
  const unsigned query_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  TF_RETURN_IF_ERROR(allow_shared(tiled_forward<T, DC>, forward_shared(DC)));
  tiled_forward<T, DC><<<query_blocks, kTileThreads, forward_shared(DC), stream_of(args)>>>(
      q, k, v, NULL, (T *)args->outputs[0].data, NULL, NULL, d);
  return launch_status();
}

/* The gradient: q, k, v of storage I, dy and the gradients of T. */
template <typename T, int DC, typename I> tf_status run_tiled_backward(const tf_cuda_args *args) {
  const AttentionDims d = attention_dims_of(args);
  cudaStream_t stream = stream_of(args);
  const I *q = (const I *)args->inputs[0].data, *k = (const I *)args->inputs[1].data;
  const I *v = (const I *)args->inputs[2].data;
  const unsigned query_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  const unsigned key_blocks = (unsigned)(d.batch * d.heads * tiles_of(d.keys));
  const T *dy = (const T *)args->inputs[3].data;
  const int64_t rows = d.batch * d.heads * d.queries;
  float *lse = (float *)args->workspace, *delta = (float *)((char *)args->workspace + tf_cuda_round_up(4 * rows));
  if (d.queries == 0) { /* no query reaches any key */
    TF_RETURN_IF_ERROR(zero(&args->outputs[1], stream));
    return zero(&args->outputs[2], stream);
  }
  TF_RETURN_IF_ERROR(allow_shared(tiled_forward<T, DC, I>, forward_shared(DC)));
  TF_RETURN_IF_ERROR(allow_shared(tiled_query_gradient<T, DC, I>, query_shared(DC)));
  TF_RETURN_IF_ERROR(allow_shared(tiled_key_gradient<T, DC, I>, key_shared(DC)));
  tiled_forward<T, DC, I><<<query_blocks, kTileThreads, forward_shared(DC), stream>>>(q, k, v, dy, NULL, lse, delta, d);
  tiled_query_gradient<T, DC, I><<<query_blocks, kTileThreads, query_shared(DC), stream>>>(
      q, k, v, dy, lse, delta, (T *)args->outputs[0].data, d);
  if (d.keys > 0)
    tiled_key_gradient<T, DC, I><<<key_blocks, kTileThreads, key_shared(DC), stream>>>(
        q, k, v, dy, lse, delta, (T *)args->outputs[1].data, (T *)args->outputs[2].data, d);
  return launch_status();
}

template <typename T> tf_status tiled_forward_of(const tf_cuda_args *args, int dc) {
  switch (dc) {
  case 1: return run_tiled_forward<T, 1>(args);
  case 2: return run_tiled_forward<T, 2>(args);
  case 4: return run_tiled_forward<T, 4>(args);
  default: return run_tiled_forward<T, 8>(args);
  }
}

template <typename T, typename I> tf_status tiled_backward_of(const tf_cuda_args *args, int dc) {
  switch (dc) {
  case 1: return run_tiled_backward<T, 1, I>(args);
  case 2: return run_tiled_backward<T, 2, I>(args);
  case 4: return run_tiled_backward<T, 4, I>(args);
  default: return run_tiled_backward<T, 8, I>(args);
  }
}

} // namespace

tf_status tiled_attention(const tf_cuda_args *args, bool backward, bool *handled) {
  *handled = false;
  const int64_t depth = args->inputs[0].shape[2] / args->attrs->u.attention.num_heads;
  const int dc = depth <= 16 ? 1 : depth <= 32 ? 2 : depth <= 64 ? 4 : depth <= 128 ? 8 : 0;
  if (dc == 0)
    return NULL;
  const size_t needed = backward ? key_shared(dc) : forward_shared(dc);
  if (opt_in_shared() < needed)
    return NULL;
  *handled = true;
  /* q, k, v, dy and the outputs share one storage, or the gradient's q, k, v are half beside f32
   * (table.cu checks); tiles and workspace stay f32 */
  return with_storage(args->inputs[0].dtype, [&](auto storage) {
    using I = decltype(storage);
    if (!backward)
      return tiled_forward_of<I>(args, dc);
    return args->inputs[3].dtype == TF_F32 ? tiled_backward_of<float, I>(args, dc) : tiled_backward_of<I, I>(args, dc);
  });
}

} // namespace tf_cuda
