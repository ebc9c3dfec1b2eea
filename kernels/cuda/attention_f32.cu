/* Attention on tensor cores for f32 operands (TIGHTFIT_CUDA_F32_ATTENTION=tensor): the forward, the
 * gradient's statistics, and the host side (the switch, the checks, `tightfit devices`' line). dQ, dK
 * and dV are attention_f32_backward.cu; tiles, fragments and the 3xTF32 products attention_f32.cuh.
 * The kernels are attention_fast.cu's with f32 tiles: per block one (n, h) and 64 queries, 4 warps of
 * 16 query rows, K and V tiles double buffered by cp.async, S in registers, the online softmax of
 * attention_fast.cuh (softmax_tile), P kept in f32 and used from registers in O += P V, O / l written
 * in f32. The statistics: lse = m + logf(l), delta = sum_j P_ij dP_ij / l, with S and dP from
 * attention_f32.cuh's scores(), the products the dQ and dK/dV kernels recompute. */
#include <stdlib.h>
#include <string.h>

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
    f32_forward(const float *q, const float *k, const float *v, float *y, AttentionDims d) {
#ifdef TF_FAST_ATTENTION
  extern __shared__ __align__(128) unsigned char shared[];
  float *qs = reinterpret_cast<float *>(shared);
  constexpr int tile = tile_bytes(D) / 4; /* floats; buffer b's K at qs + (1 + 2b) tile, V after it */
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const QueryBlock block = query_block<D>(d);
  const int64_t i0 = block.i0, key_tiles = block.key_tiles;
  const float *kh = k + block.k_base, *vh = v + block.k_base;
  load_tile<D>(qs, q + block.q_base, i0, d.queries, d.width);
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
    const float *ks = qs + (1 + 2 * buf) * tile, *vs = ks + tile;
    float s[8][4], correction[2];
    scores<D>(s, qs, ks, warp, lane);
    fast_attention::softmax_tile(s, m, l, correction, row, i0, j0, t, d);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        o[dn][e] *= correction[e >> 1];
    accumulate<D>(o, s, vs, lane);
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
  write_rows<D>(o, 1.0f, y + block.q_base, i0, d.queries, d.width, warp, lane);
#endif
}

/* The gradient's statistics over one query tile: lse and delta (see the top). */
template <int D>
__global__ void __launch_bounds__(kBlockThreads, 1)
    f32_statistics(const float *q, const float *k, const float *v, const float *dy, float *lse, float *delta,
                   AttentionDims d) {
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
    const float *ks = qs + (2 + 2 * buf) * tile, *vs = ks + tile;
    float s[8][4], dp[8][4], correction[2];
    scores<D>(s, qs, ks, warp, lane);
    scores<D>(dp, dos, vs, warp, lane);
    fast_attention::softmax_tile(s, m, l, correction, row, i0, j0, t, d); /* P: 0 exactly where not visible */
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
      const int64_t stat = (block.n * d.heads + block.h) * d.queries + row[r];
      lse[stat] = l[r] > 0.0f ? m[r] + logf(l[r]) : 0.0f;
      delta[stat] = l[r] > 0.0f ? weighted[r] / l[r] : 0.0f;
    }
  }
#endif
}

template <int D> tf_status run(const tf_cuda_args *args, const AttentionDims &d, bool backward) {
  const unsigned blocks = (unsigned)(d.batch * d.heads * tiles_of(d.queries));
  cudaStream_t stream = stream_of(args);
  const float *q = (const float *)args->inputs[0].data, *k = (const float *)args->inputs[1].data;
  const float *v = (const float *)args->inputs[2].data;
  if (!backward) {
    const char *refused = prepare_fast_kernel(f32_forward<D>, forward_shared(D));
    if (refused)
      return tf_status_new(TF_ERR_UNSUPPORTED, "f32 tensor-core attention: %s", refused);
    f32_forward<D><<<blocks, kBlockThreads, forward_shared(D), stream>>>(q, k, v, (float *)args->outputs[0].data, d);
    return launch_status();
  }
  const char *refused = prepare_fast_kernel(f32_statistics<D>, query_shared(D));
  if (refused)
    return tf_status_new(TF_ERR_UNSUPPORTED, "f32 tensor-core attention: %s", refused);
  const int64_t rows = d.batch * d.heads * d.queries;
  float *lse = (float *)args->workspace, *delta = (float *)((char *)args->workspace + tf_cuda_round_up(4 * rows));
  f32_statistics<D>
      <<<blocks, kBlockThreads, query_shared(D), stream>>>(q, k, v, (const float *)args->inputs[3].data, lse, delta, d);
  TF_RETURN_IF_ERROR(launch_status());
  return launch_f32_attention_gradients(args, d, lse, delta);
}

} // namespace

tf_status launch_f32_attention(const tf_cuda_args *args, bool backward) {
  const AttentionDims d = attention_dims_of(args);
  switch (d.depth) {
  case 32: return run<32>(args, d, backward);
  case 64: return run<64>(args, d, backward);
  default: return run<128>(args, d, backward);
  }
}

} // namespace tf_cuda

using namespace tf_cuda;

extern "C" bool tf_cuda_f32_attention_on(const char *value) {
  return !value || (strcmp(value, "0") != 0 && strcmp(value, "cores") != 0);
}

extern "C" int64_t tf_cuda_f32_attention_shared(int64_t depth, bool backward) {
  if (depth != 32 && depth != 64 && depth != 128)
    return 0;
  const int dm = (int)depth, query = f32_attention::query_shared(dm), key = f32_attention::key_shared(dm);
  return !backward ? f32_attention::forward_shared(dm) : key > query ? key : query;
}

/* The shared memory the f32 kernels need for D = 32, 64, 128: need[0] the forward's, need[1] the gradient's. */
static void shared_needs(int64_t (&need)[2][3]) {
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 2; b++)
      need[b][i] = tf_cuda_f32_attention_shared(32 << i, b == 1);
}

extern "C" const char *tf_cuda_f32_attention_refusal(const tf_cuda_args *args, int major, int minor,
                                                     int64_t shared_optin) {
  (void)minor;
  if (args->op != TF_OP_ATTENTION && args->op != TF_OP_ATTENTION_GRAD)
    return "not an attention step";
  const bool backward = args->op == TF_OP_ATTENTION_GRAD;
  if (args->n_inputs < (backward ? 4 : 3) || args->n_outputs < (backward ? 3 : 1))
    return "not the operands of attention";
  if (major < 8)
    return "compute capability below 8.0 (no TF32 tensor-core products)";
  for (int32_t k = 0; k < (backward ? 4 : 3); k++)
    if (args->inputs[k].dtype != TF_F32)
      return backward ? "q, k, v and dy are not all f32" : "q, k and v are not all f32";
  for (int32_t k = 0; k < (backward ? 3 : 1); k++)
    if (args->outputs[k].dtype != TF_F32)
      return "the outputs are not f32";
  int64_t need[2][3];
  shared_needs(need);
  return attention_operands_refusal(args, need, shared_optin);
}

extern "C" void tf_cuda_f32_attention_describe(char *text, size_t size, int major, int minor, int64_t shared_optin,
                                               bool on) {
  if (size == 0)
    return;
  if (!on) {
    snprintf(text, size, "f32 attention: CUDA cores (TIGHTFIT_CUDA_F32_ATTENTION=cores; unset: tensor cores, 3xTF32)");
    return;
  }
  if (major < 8) {
    snprintf(text, size, "f32 attention: CUDA cores (compute capability %d.%d: the 3xTF32 kernels need 8.0)", major,
             minor);
    return;
  }
  int64_t need[2][3];
  shared_needs(need);
  describe_depths(text, size, "f32 attention", "3xTF32 mma.sync", need, shared_optin);
}
