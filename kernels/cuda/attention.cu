/* Fused scaled-dot-product attention and its gradient, flash-style: nothing [Tq, Tk] is ever stored;
 * the forward keeps O(1) state per query row and the backward O(Tq) per head (the workspace).
 *
 * q [N, Tq, H*D], k and v [N, Tk, H*D]; head h reads columns [h*D, (h+1)*D); causal: key j is visible
 * to query i when j <= i (top-left aligned, as the CPU kernel and torch's is_causal). A block is 8
 * warps on 8 consecutive rows of one (n, h); keys (or queries) go in tiles of 32, one per lane, staged
 * in shared memory when D <= 128 (read through L1/L2 otherwise). Within a tile a lane computes its
 * key's score (the row broadcast by shuffles), the warp updates the online softmax (running max,
 * running sum, rescaled accumulator), then lanes switch to the D axis to accumulate p_j v_j.
 *
 * Backward (no saved statistics: the plan passes q, k, v, dy only):
 *   1. per query row, recompute the forward: L = log-sum-exp of the scores and delta = dO . O;
 *   2. dQ, a warp per query row: dS = P (dO . v_j - delta), dQ = scale sum_j dS k_j;
 *   3. dK and dV, a warp per key row over the query tiles: dV = sum_i P dO_i, dK = scale sum_i dS q_i.
 * Every output element is owned by one lane: deterministic, no atomics. Scores are exp'd with
 * expf; the CPU adds the same terms in another order (gemm, then a double row sum).
 *
 * The kernels are templated on the storage T of q, k, v, dy and the outputs: f32, and f16/bf16 for
 * the cuda target's half kernels, whose elements are loaded to f32 (into the shared tiles, the
 * registers, or as read through L1/L2) and whose results are each rounded once to T; everything
 * else (the recomputed O, the workspace's L and delta, shared memory) stays f32, so a half kernel
 * writes exactly what cast up -> f32 kernel -> cast down writes. The gradient's q, k, v may have a
 * storage I of their own: f16/bf16 beside an f32 dy and f32 gradients (a --precision plan reading the
 * q, k, v it stored in half, compiler/precision.c), widened exactly as the cast back would. */
#include "kernels/cuda/attention_dims.cuh"

namespace tf_cuda {
namespace {

constexpr int kRows = 8;  /* rows per block, one per warp */
constexpr int kTile = 32; /* keys or queries per tile, one per lane */
constexpr int kMaxDepth = 512;

using Dims = AttentionDims;

/* The sizes, with `rows` (queries, or keys for dK/dV) in blocks of kRows. */
Dims dims_of(const tf_cuda_args *args, int64_t rows) {
  Dims d = attention_dims_of(args);
  d.row_blocks = (rows + kRows - 1) / kRows;
  return d;
}

/* A tile of 32 rows x D columns of a [rows, E] head view, rows [first, first + 32): in shared memory
 * (f32, stride D + 1, rows past `limit` zero) or in global memory (storage E, stride E, rows past
 * `limit` read as row limit - 1). Either way the results of rows past the limit are masked. */
template <typename E> struct Tile {
  const E *base;
  int64_t stride, last;
  __device__ const E *row(int r) const { return base + (r < last ? r : last) * stride; }
};

/* A staged tile holds f32; an unstaged one reads the storage T. */
template <bool STAGED, typename T> struct TileElement { typedef T type; };
template <typename T> struct TileElement<true, T> { typedef float type; };

template <bool STAGED, typename T>
__device__ inline Tile<typename TileElement<STAGED, T>::type> stage(float *shared, const T *global, int64_t first,
                                                                    int64_t limit, const Dims &d) {
  if constexpr (!STAGED) {
    Tile<T> t = {global + first * d.width, d.width, limit - 1 - first};
    return t;
  } else {
    for (int64_t idx = threadIdx.x; idx < kTile * d.depth; idx += blockDim.x) {
      const int64_t r = idx / d.depth, c = idx % d.depth;
      shared[r * (d.depth + 1) + c] = first + r < limit ? to_f32(global[(first + r) * d.width + c]) : 0.0f;
    }
    Tile<float> t = {shared, d.depth + 1, kTile - 1};
    return t;
  }
}

/* dot(x, row) with x spread over the warp (element d at lane d % 32 of register d / 32); row is f32
 * (shared) or storage (global). */
template <int DPL, typename E> __device__ inline float dot_spread(const float (&x)[DPL], const E *row, int64_t depth) {
  float sum = 0.0f;
#pragma unroll
  for (int r = 0; r < DPL; r++)
#pragma unroll 4
    for (int src = 0; src < 32; src++) {
      const float xd = __shfl_sync(kFullMask, x[r], src);
      if (r * 32 + src < depth)
        sum += xd * to_f32(row[r * 32 + src]);
    }
  return sum;
}

template <int DPL, typename T>
__device__ inline void load_spread(float (&x)[DPL], const T *row, int64_t depth, int lane) {
#pragma unroll
  for (int r = 0; r < DPL; r++)
    x[r] = r * 32 + lane < depth ? to_f32(row[r * 32 + lane]) : 0.0f;
}

/* Forward (dy == NULL: writes y) or the backward's statistics (writes lse and delta). */
template <typename T, int DPL, bool STAGED, typename I = T>
__global__ void __launch_bounds__(kRows * 32)
    forward_rows(const I *q, const I *k, const I *v, const T *dy, T *y, float *lse, float *delta, Dims d) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = blockIdx.x / (d.heads * d.row_blocks), h = blockIdx.x / d.row_blocks % d.heads;
  const int64_t first_row = blockIdx.x % d.row_blocks * kRows, i = first_row + warp;
  const bool active = i < d.queries;
  const int64_t last_row = first_row + kRows <= d.queries ? first_row + kRows - 1 : d.queries - 1;
  const int64_t keys_end = d.causal && last_row + 1 < d.keys ? last_row + 1 : d.keys;
  const I *k_head = k + n * d.keys * d.width + h * d.depth, *v_head = v + n * d.keys * d.width + h * d.depth;
  const int64_t row_at = (n * d.queries + (active ? i : 0)) * d.width + h * d.depth;
  float q_reg[DPL], acc[DPL];
  load_spread(q_reg, q + row_at, d.depth, lane);
#pragma unroll
  for (int r = 0; r < DPL; r++)
    acc[r] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int64_t t0 = 0; t0 < keys_end; t0 += kTile) {
    if (STAGED)
      __syncthreads();
    const auto kt = stage<STAGED>(shared, k_head, t0, d.keys, d);
    const auto vt = stage<STAGED>(shared + kTile * (d.depth + 1), v_head, t0, d.keys, d);
    if (STAGED)
      __syncthreads();
    if (!active)
      continue;
    const int64_t j = t0 + lane;
    const bool valid = j < d.keys && (!d.causal || j <= i);
    float s = dot_spread(q_reg, kt.row(lane), d.depth);
    s = valid ? __fmul_rn(s, d.scale) : -INFINITY; /* rounded as the backward rounds it */
    const float m_new = fmaxf(m, warp_max(s));
    if (m_new == -INFINITY)
      continue;
    const float p = valid ? expf(s - m_new) : 0.0f, correction = expf(m - m_new);
    l = l * correction + warp_sum(p);
#pragma unroll
    for (int r = 0; r < DPL; r++)
      acc[r] *= correction;
    for (int jj = 0; jj < kTile && t0 + jj < keys_end; jj++) {
      const float pj = __shfl_sync(kFullMask, p, jj);
      const auto *vrow = vt.row(jj);
#pragma unroll
      for (int r = 0; r < DPL; r++)
        if (r * 32 + lane < d.depth)
          acc[r] += pj * to_f32(vrow[r * 32 + lane]);
    }
    m = m_new;
  }
  if (!active)
    return;
  const float inverse = l > 0.0f ? 1.0f / l : 0.0f;
  if (!dy) {
#pragma unroll
    for (int r = 0; r < DPL; r++)
      if (r * 32 + lane < d.depth)
        y[row_at + r * 32 + lane] = from_f32<T>(acc[r] * inverse);
    return;
  }
  // delta = dO . O, summed exactly as dot_spread sums dO . v_j in the gradient kernels: where a row
  // sees one key (p = 1, O = v_j bit for bit: the first rows of causal attention) dS = dp - delta is
  // then exactly 0, as on the CPU. A warp_sum order left ~1e-8, which Adam's m / sqrt(v) turned into
  // a full-size step of q (H200, 2026-11-27: q off by 386x the tolerance after one optimizer step).
  float out_reg[DPL];
#pragma unroll
  for (int r = 0; r < DPL; r++)
    out_reg[r] = acc[r] * inverse;
  const float dot = dot_spread(out_reg, dy + row_at, d.depth);
  if (lane == 0) {
    const int64_t stat = (n * d.heads + h) * d.queries + i;
    lse[stat] = l > 0.0f ? m + logf(l) : 0.0f;
    delta[stat] = dot;
  }
}

/* dQ: a warp per query row over the key tiles. */
template <typename T, int DPL, bool STAGED, typename I = T>
__global__ void __launch_bounds__(kRows * 32) query_gradient(const I *q, const I *k, const I *v, const T *dy,
                                                             const float *lse, const float *delta, T *dq, Dims d) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = blockIdx.x / (d.heads * d.row_blocks), h = blockIdx.x / d.row_blocks % d.heads;
  const int64_t first_row = blockIdx.x % d.row_blocks * kRows, i = first_row + warp;
  const bool active = i < d.queries;
  const int64_t last_row = first_row + kRows <= d.queries ? first_row + kRows - 1 : d.queries - 1;
  const int64_t keys_end = d.causal && last_row + 1 < d.keys ? last_row + 1 : d.keys;
  const I *k_head = k + n * d.keys * d.width + h * d.depth, *v_head = v + n * d.keys * d.width + h * d.depth;
  const int64_t row_at = (n * d.queries + (active ? i : 0)) * d.width + h * d.depth;
  const int64_t stat = (n * d.heads + h) * d.queries + (active ? i : 0);
  float q_reg[DPL], do_reg[DPL], acc[DPL];
  load_spread(q_reg, q + row_at, d.depth, lane);
  load_spread(do_reg, dy + row_at, d.depth, lane);
#pragma unroll
  for (int r = 0; r < DPL; r++)
    acc[r] = 0.0f;
  const float row_lse = lse[stat], row_delta = delta[stat];
  for (int64_t t0 = 0; t0 < keys_end; t0 += kTile) {
    if (STAGED)
      __syncthreads();
    const auto kt = stage<STAGED>(shared, k_head, t0, d.keys, d);
    const auto vt = stage<STAGED>(shared + kTile * (d.depth + 1), v_head, t0, d.keys, d);
    if (STAGED)
      __syncthreads();
    if (!active)
      continue;
    const int64_t j = t0 + lane;
    const bool valid = j < d.keys && (!d.causal || j <= i);
    const float s = __fmul_rn(dot_spread(q_reg, kt.row(lane), d.depth), d.scale);
    const float dp = dot_spread(do_reg, vt.row(lane), d.depth);
    const float p = valid ? expf(s - row_lse) : 0.0f;
    const float ds = p * (dp - row_delta);
    for (int jj = 0; jj < kTile && t0 + jj < keys_end; jj++) {
      const float dsj = __shfl_sync(kFullMask, ds, jj);
      const auto *krow = kt.row(jj);
#pragma unroll
      for (int r = 0; r < DPL; r++)
        if (r * 32 + lane < d.depth)
          acc[r] += dsj * to_f32(krow[r * 32 + lane]);
    }
  }
  if (!active)
    return;
#pragma unroll
  for (int r = 0; r < DPL; r++)
    if (r * 32 + lane < d.depth)
      dq[row_at + r * 32 + lane] = from_f32<T>(d.scale * acc[r]);
}

/* dK and dV: a warp per key row over the query tiles (row_blocks counts key blocks here). */
template <typename T, int DPL, bool STAGED, typename I = T>
__global__ void __launch_bounds__(kRows * 32) key_gradient(const I *q, const I *k, const I *v, const T *dy,
                                                           const float *lse, const float *delta, T *dk, T *dv, Dims d) {
  extern __shared__ float shared[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = blockIdx.x / (d.heads * d.row_blocks), h = blockIdx.x / d.row_blocks % d.heads;
  const int64_t first_key = blockIdx.x % d.row_blocks * kRows, j = first_key + warp;
  const bool active = j < d.keys;
  const I *q_head = q + n * d.queries * d.width + h * d.depth;
  const T *dy_head = dy + n * d.queries * d.width + h * d.depth;
  const float *lse_head = lse + (n * d.heads + h) * d.queries, *delta_head = delta + (n * d.heads + h) * d.queries;
  const int64_t key_at = (n * d.keys + (active ? j : 0)) * d.width + h * d.depth;
  float k_reg[DPL], v_reg[DPL], dk_acc[DPL], dv_acc[DPL];
  load_spread(k_reg, k + key_at, d.depth, lane);
  load_spread(v_reg, v + key_at, d.depth, lane);
#pragma unroll
  for (int r = 0; r < DPL; r++)
    dk_acc[r] = dv_acc[r] = 0.0f;
  float *row_stats = shared + 2 * kTile * (d.depth + 1);
  const int64_t start = d.causal ? first_key / kTile * kTile : 0;
  for (int64_t t0 = start; t0 < d.queries; t0 += kTile) {
    if (STAGED)
      __syncthreads();
    const auto qt = stage<STAGED>(shared, q_head, t0, d.queries, d);
    const auto ot = stage<STAGED>(shared + kTile * (d.depth + 1), dy_head, t0, d.queries, d);
    if (STAGED) {
      if (threadIdx.x < kTile) {
        const int64_t at = t0 + threadIdx.x < d.queries ? t0 + threadIdx.x : d.queries - 1;
        row_stats[threadIdx.x] = lse_head[at];
        row_stats[kTile + threadIdx.x] = delta_head[at];
      }
      __syncthreads();
    }
    if (!active)
      continue;
    const int64_t i = t0 + lane;
    const int64_t at = i < d.queries ? i : d.queries - 1;
    const bool valid = i < d.queries && (!d.causal || j <= i);
    const float s = __fmul_rn(dot_spread(k_reg, qt.row(lane), d.depth), d.scale);
    const float dp = dot_spread(v_reg, ot.row(lane), d.depth);
    const float row_lse = STAGED ? row_stats[lane] : lse_head[at];
    const float row_delta = STAGED ? row_stats[kTile + lane] : delta_head[at];
    const float p = valid ? expf(s - row_lse) : 0.0f;
    const float ds = p * (dp - row_delta);
    for (int ii = 0; ii < kTile && t0 + ii < d.queries; ii++) {
      const float pi = __shfl_sync(kFullMask, p, ii), dsi = __shfl_sync(kFullMask, ds, ii);
      const auto *qrow = qt.row(ii); /* storage I unstaged */
      const auto *orow = ot.row(ii);
#pragma unroll
      for (int r = 0; r < DPL; r++)
        if (r * 32 + lane < d.depth) {
          dv_acc[r] += pi * to_f32(orow[r * 32 + lane]);
          dk_acc[r] += dsi * to_f32(qrow[r * 32 + lane]);
        }
    }
  }
  if (!active)
    return;
#pragma unroll
  for (int r = 0; r < DPL; r++)
    if (r * 32 + lane < d.depth) {
      dk[key_at + r * 32 + lane] = from_f32<T>(d.scale * dk_acc[r]);
      dv[key_at + r * 32 + lane] = from_f32<T>(dv_acc[r]);
    }
}

size_t shared_bytes(const Dims &d, bool staged, bool stats) {
  return staged ? (size_t)(2 * kTile * (d.depth + 1) + (stats ? 2 * kTile : 0)) * sizeof(float) : 0;
}

template <typename T, int DPL, bool STAGED> tf_status run_forward(const tf_cuda_args *args) {
  Dims d = dims_of(args, args->inputs[0].shape[1]);
  const unsigned blocks = (unsigned)(d.batch * d.heads * d.row_blocks);
  forward_rows<T, DPL, STAGED><<<blocks, kRows * 32, shared_bytes(d, STAGED, false), stream_of(args)>>>(
      (const T *)args->inputs[0].data, (const T *)args->inputs[1].data, (const T *)args->inputs[2].data, NULL,
      (T *)args->outputs[0].data, NULL, NULL, d);
  return launch_status();
}

template <typename T, int DPL, bool STAGED, typename I = T> tf_status run_backward(const tf_cuda_args *args) {
  const I *q = (const I *)args->inputs[0].data, *k = (const I *)args->inputs[1].data;
  const I *v = (const I *)args->inputs[2].data;
  const T *dy = (const T *)args->inputs[3].data;
  cudaStream_t stream = stream_of(args);
  Dims d = dims_of(args, args->inputs[0].shape[1]);
  const int64_t rows = d.batch * d.heads * d.queries;
  float *lse = (float *)args->workspace, *delta = (float *)((char *)args->workspace + tf_cuda_round_up(4 * rows));
  if (d.queries > 0) {
    const unsigned blocks = (unsigned)(d.batch * d.heads * d.row_blocks);
    forward_rows<T, DPL, STAGED, I>
        <<<blocks, kRows * 32, shared_bytes(d, STAGED, false), stream>>>(q, k, v, dy, NULL, lse, delta, d);
    query_gradient<T, DPL, STAGED, I><<<blocks, kRows * 32, shared_bytes(d, STAGED, false), stream>>>(
        q, k, v, dy, lse, delta, (T *)args->outputs[0].data, d);
  }
  Dims kd = dims_of(args, args->inputs[1].shape[1]);
  if (kd.keys > 0) {
    if (d.queries == 0) { /* no query reaches any key */
      TF_RETURN_IF_ERROR(zero(&args->outputs[1], stream));
      return zero(&args->outputs[2], stream);
    }
    key_gradient<T, DPL, STAGED, I>
        <<<(unsigned)(kd.batch * kd.heads * kd.row_blocks), kRows * 32, shared_bytes(kd, STAGED, true), stream>>>(
            q, k, v, dy, lse, delta, (T *)args->outputs[1].data, (T *)args->outputs[2].data, kd);
  }
  return launch_status();
}

/* The gradient's kernels for heads of `depth` features, q, k, v of storage I, the rest of T. */
template <typename T, typename I> tf_status backward_of_depth(const tf_cuda_args *args, int64_t depth) {
  if (depth <= 32)
    return run_backward<T, 1, true, I>(args);
  if (depth <= 64)
    return run_backward<T, 2, true, I>(args);
  if (depth <= 128)
    return run_backward<T, 4, true, I>(args);
  if (depth <= 256)
    return run_backward<T, 8, false, I>(args);
  return run_backward<T, 16, false, I>(args);
}

template <typename T> tf_status forward_of_depth(const tf_cuda_args *args, int64_t depth) {
  if (depth <= 32)
    return run_forward<T, 1, true>(args);
  if (depth <= 64)
    return run_forward<T, 2, true>(args);
  if (depth <= 128)
    return run_forward<T, 4, true>(args);
  if (depth <= 256)
    return run_forward<T, 8, false>(args);
  return run_forward<T, 16, false>(args);
}

template <bool BACKWARD> tf_status dispatch(const tf_cuda_args *args) {
  const int64_t depth = args->inputs[0].shape[2] / args->attrs->u.attention.num_heads;
  if (args->inputs[0].shape[0] == 0 || depth == 0)
    return NULL;
  bool tensor = false; /* f16/bf16 heads of 32, 64, 128 on sm_80+: attention_mma.cu */
  tf_status status = tensor_attention(args, BACKWARD, &tensor);
  if (tensor || status)
    return status;
  bool tiled = false; /* heads of up to 128 on a device with the shared memory: attention_tiled.cu */
  status = tiled_attention(args, BACKWARD, &tiled);
  if (tiled || status)
    return status;
  /* q, k, v, dy and the outputs share one storage, or the gradient's q, k, v are half beside f32
   * (table.cu checks); the workspace stays f32 */
  return with_storage(args->inputs[0].dtype, [&](auto storage) {
    using I = decltype(storage);
    if constexpr (!BACKWARD)
      return forward_of_depth<I>(args, depth);
    else if (args->inputs[3].dtype == TF_F32)
      return backward_of_depth<float, I>(args, depth);
    else
      return backward_of_depth<I, I>(args, depth);
  });
}

} // namespace

tf_status check_attention(const tf_cuda_args *args) {
  const int64_t heads = args->attrs->u.attention.num_heads, width = args->inputs[0].shape[2];
  const int64_t depth = width / heads;
  if (depth > kMaxDepth)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda %s kernel: head width %lld (%lld features / %lld heads) is above the CUDA attention "
                         "kernels' limit of %d",
                         tf_op_name(args->op), (long long)depth, (long long)width, (long long)heads, kMaxDepth);
  const int64_t batch = args->inputs[0].shape[0];
  const int64_t longest =
      args->inputs[0].shape[1] > args->inputs[1].shape[1] ? args->inputs[0].shape[1] : args->inputs[1].shape[1];
  const int64_t blocks = batch * heads * ((longest + kRows - 1) / kRows);
  if (blocks > INT32_MAX)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "cuda %s kernel: %lld row blocks (batch %lld x %lld heads x %lld rows / %d per block) exceed "
                         "the grid limit of %d",
                         tf_op_name(args->op), (long long)blocks, (long long)batch, (long long)heads,
                         (long long)longest, kRows, INT32_MAX);
  return NULL;
}

TF_CUDA_LAUNCHER(attention) {
  if (args->outputs[0].count == 0)
    return NULL;
  return dispatch<false>(args);
}

TF_CUDA_LAUNCHER(attention_grad) {
  if (args->outputs[0].count == 0 && args->outputs[1].count == 0)
    return NULL;
  return dispatch<true>(args);
}

} // namespace tf_cuda
