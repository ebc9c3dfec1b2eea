/* Fused attention on tensor cores for f16/bf16 q, k, v (and dy, and the gradients): the forward, the
 * gradient's statistics, and the choice of path (attention.cu's launchers call tensor_attention()
 * first; when it declines, the tiled and row kernels run as before). The gradient's dQ, dK and dV
 * kernels are attention_mma_backward.cu; the tiles, products and precision are attention_mma.cuh.
 *
 * Forward, per block one (n, h) and 64 queries: online softmax over key tiles of 64 (skipping tiles
 * wholly above the causal diagonal). S = Q K^T goes to shared memory in f32; two threads per query
 * row take the row's running max and sum (f32), write P = exp(s - m) in 16 bits (split: hi + lo) and
 * the row's rescaling factor; each warp rescales its O accumulators by row (the accumulator layout
 * is unspecified, so the row of each element is read from a fragment loaded from a matrix of row
 * numbers) and adds P V. O is divided by the row sum and rounded once to the storage type.
 *
 * Statistics (the gradient's first kernel, the same workspace as the CUDA-core kernels: lse, then
 * delta at tf_cuda_round_up(4 rows)): lse = m + log(l) as the forward's, and delta = sum_j P_ij dP_ij
 * with dP = dO V^T from the very tensor-core product the dQ and dK/dV kernels recompute: equal to
 * dO . O, and for a query that sees one key (P = 1) exactly that key's dP, so dS = P (dP - delta) is 0
 * there bit for bit, as on the CPU (the first rows of causal attention; a few 1e-8 left there make
 * Adam take a full step, see attention.cu). A dO . O in another summation order would not be.
 *
 * Switch: TIGHTFIT_CUDA_TENSOR_ATTENTION (kernels.h), read at each launch (a getenv: launches happen
 * at warm-up and capture, or per step without graphs). Anything refused or failing before the
 * kernels run falls back to the other kernels. The default (`fast`) hands the whole step to
 * attention_fast.cu's FlashAttention-2-style kernels (same contract and workspace, less shared
 * memory for every D); `split` and `rounded` run this file's wmma kernels. The host logic here
 * serves both. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_f32.cuh" /* includes attention_fast.cuh and attention_mma.cuh */

namespace tf_cuda {
namespace {

using namespace mma_attention;

/* Forward over one query tile. */
template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads) mma_forward(const T *q, const T *k, const T *v, T *y, Params p) {
#ifdef TF_MMA_ATTENTION
  using W = typename Wmma<T>::type;
  extern __shared__ __align__(kAlign) unsigned char shared[];
  Carver carve{shared};
  uint16_t *qs = carve.take<uint16_t>(staged_bytes(D)), *ks = carve.take<uint16_t>(staged_bytes(D));
  uint16_t *vs = carve.take<uint16_t>(staged_bytes(D));
  float *ss = carve.take<float>(score_bytes());
  W *p_hi = carve.take<W>(half_tile_bytes()), *p_lo = carve.take<W>(half_tile_bytes());
  float *row_scale = carve.take<float>(row_bytes());
  float *row_map = carve.take<float>(aligned(16 * 16 * 4)), *scratch = carve.take<float>(scratch_bytes());
  const AttentionDims &d = p.d;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tiles = tiles_of(d.queries);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t i0 = blockIdx.x % tiles * kRows;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  load_tile<D>(qs, reinterpret_cast<const uint16_t *>(q) + q_base, i0, d.queries, d.width);
  for (int idx = threadIdx.x; idx < 256; idx += kBlockThreads)
    row_map[idx] = (float)(idx / 16);
  __syncthreads();
  Accumulator rows_of; /* rows_of.x[e]: the row (0..15) of element e of any accumulator */
  wmma::load_matrix_sync(rows_of, row_map, 16, wmma::mem_row_major);
  Accumulator o[D / 16];
#pragma unroll
  for (int dn = 0; dn < D / 16; dn++)
    wmma::fill_fragment(o[dn], 0.0f);
  const int row = threadIdx.x / 2, half = threadIdx.x % 2; /* softmax: row `row`, columns [32 half, +32) */
  const int64_t i = i0 + row;
  float m = -INFINITY, l = 0.0f;
  const int64_t keys_end = d.causal && i0 + kRows < d.keys ? i0 + kRows : d.keys;
  for (int64_t j0 = 0; j0 < keys_end; j0 += kRows) {
    __syncthreads(); /* the last tile's K, V, P and scales are read */
    load_tile<D>(ks, reinterpret_cast<const uint16_t *>(k) + k_base, j0, d.keys, d.width);
    load_tile<D>(vs, reinterpret_cast<const uint16_t *>(v) + k_base, j0, d.keys, d.width);
    __syncthreads();
    score_tile<W, D>(reinterpret_cast<const W *>(qs), reinterpret_cast<const W *>(ks), ss, warp);
    __syncthreads();
    const float *srow = ss + row * kScoreLd + 32 * half;
    float top = -INFINITY;
    for (int c = 0; c < 32; c++)
      if (visible(i, j0 + 32 * half + c, d))
        top = fmaxf(top, __fmul_rn(srow[c], d.scale)); /* rounded as the backward rounds it */
    top = fmaxf(top, __shfl_xor_sync(kFullMask, top, 1));
    const float m_new = fmaxf(m, top);
    float sum = 0.0f;
    for (int c = 0; c < 32; c++) {
      const int col = 32 * half + c;
      const float pv = visible(i, j0 + col, d) ? expf(__fmul_rn(srow[c], d.scale) - m_new) : 0.0f;
      split_into(pv, p.split, &p_hi[row * kHalfLd + col], &p_lo[row * kHalfLd + col]);
      sum += pv;
    }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    const float correction = m_new == -INFINITY ? 1.0f : expf(m - m_new); /* 0 when m was -inf */
    l = l * correction + sum;
    m = m_new;
    if (half == 0)
      row_scale[row] = correction;
    __syncthreads();
#pragma unroll
    for (int dn = 0; dn < D / 16; dn++)
#pragma unroll
      for (int e = 0; e < o[dn].num_elements; e++)
        o[dn].x[e] *= row_scale[warp * 16 + (int)rows_of.x[e]];
    accumulate<W, D, wmma::row_major>(o, p_hi, reinterpret_cast<const W *>(vs), warp);
    if (p.split)
      accumulate<W, D, wmma::row_major>(o, p_lo, reinterpret_cast<const W *>(vs), warp);
  }
  __syncthreads();
  if (half == 0)
    row_scale[row] = l > 0.0f ? 1.0f / l : 0.0f;
  __syncthreads();
#pragma unroll
  for (int dn = 0; dn < D / 16; dn++)
#pragma unroll
    for (int e = 0; e < o[dn].num_elements; e++)
      o[dn].x[e] *= row_scale[warp * 16 + (int)rows_of.x[e]];
  write_rows<T, D>(o, 1.0f, scratch + warp * 256, y + q_base, i0, d.queries, d.width, warp, lane);
#endif
}

/* The gradient's statistics over one query tile: lse and delta = sum_j P_ij dP_ij (see the top). */
template <typename T, int D>
__global__ void __launch_bounds__(kBlockThreads)
    mma_statistics(const T *q, const T *k, const T *v, const T *dy, float *lse, float *delta, Params p) {
#ifdef TF_MMA_ATTENTION
  using W = typename Wmma<T>::type;
  extern __shared__ __align__(kAlign) unsigned char shared[];
  Carver carve{shared};
  uint16_t *qs = carve.take<uint16_t>(staged_bytes(D)), *dos = carve.take<uint16_t>(staged_bytes(D));
  uint16_t *ks = carve.take<uint16_t>(staged_bytes(D)), *vs = carve.take<uint16_t>(staged_bytes(D));
  float *ss = carve.take<float>(score_bytes()), *dps = carve.take<float>(score_bytes());
  const AttentionDims &d = p.d;
  const int warp = threadIdx.x / 32;
  const int64_t tiles = tiles_of(d.queries);
  const int64_t n = blockIdx.x / (d.heads * tiles), h = blockIdx.x / tiles % d.heads;
  const int64_t i0 = blockIdx.x % tiles * kRows;
  const int64_t q_base = n * d.queries * d.width + h * D, k_base = n * d.keys * d.width + h * D;
  load_tile<D>(qs, reinterpret_cast<const uint16_t *>(q) + q_base, i0, d.queries, d.width);
  load_tile<D>(dos, reinterpret_cast<const uint16_t *>(dy) + q_base, i0, d.queries, d.width);
  const int row = threadIdx.x / 2, half = threadIdx.x % 2;
  const int64_t i = i0 + row;
  float m = -INFINITY, l = 0.0f, weighted = 0.0f; /* weighted: sum of exp(s - m) dP */
  const int64_t keys_end = d.causal && i0 + kRows < d.keys ? i0 + kRows : d.keys;
  for (int64_t j0 = 0; j0 < keys_end; j0 += kRows) {
    __syncthreads();
    load_tile<D>(ks, reinterpret_cast<const uint16_t *>(k) + k_base, j0, d.keys, d.width);
    load_tile<D>(vs, reinterpret_cast<const uint16_t *>(v) + k_base, j0, d.keys, d.width);
    __syncthreads();
    score_tile<W, D>(reinterpret_cast<const W *>(qs), reinterpret_cast<const W *>(ks), ss, warp);
    score_tile<W, D>(reinterpret_cast<const W *>(dos), reinterpret_cast<const W *>(vs), dps, warp);
    __syncthreads();
    const float *srow = ss + row * kScoreLd + 32 * half, *dprow = dps + row * kScoreLd + 32 * half;
    float top = -INFINITY;
    for (int c = 0; c < 32; c++)
      if (visible(i, j0 + 32 * half + c, d))
        top = fmaxf(top, __fmul_rn(srow[c], d.scale));
    top = fmaxf(top, __shfl_xor_sync(kFullMask, top, 1));
    const float m_new = fmaxf(m, top);
    float sum = 0.0f, dot = 0.0f;
    for (int c = 0; c < 32; c++)
      if (visible(i, j0 + 32 * half + c, d)) {
        const float pv = expf(__fmul_rn(srow[c], d.scale) - m_new);
        sum += pv;
        dot += pv * dprow[c];
      }
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    dot += __shfl_xor_sync(kFullMask, dot, 1);
    const float correction = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    l = l * correction + sum;
    weighted = weighted * correction + dot;
    m = m_new;
  }
  if (half == 0 && i < d.queries) {
    const int64_t stat = (n * d.heads + h) * d.queries + i;
    lse[stat] = l > 0.0f ? m + logf(l) : 0.0f;
    delta[stat] = l > 0.0f ? weighted / l : 0.0f;
  }
#endif
}

/* Opts `kernel` in to `bytes` of shared memory; NULL, or why it cannot run here (no sm_80+ code
 * for this device in the build, too little shared memory): the caller falls back. */
template <typename Kernel> const char *prepare_kernel(Kernel kernel, int bytes) {
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    cudaGetLastError();
    return "the kernels have no code for this device in this build";
  }
  /* code for an older architecture (SASS, or PTX the driver compiled for this device) is empty */
  if (attributes.binaryVersion < 80 || attributes.ptxVersion < 80) {
    return "the build's code for this device is below sm_80";
  }
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    cudaGetLastError();
    return "the device refused the kernels' shared memory";
  }
  return NULL;
}

template <typename T, int D> tf_status run(const tf_cuda_args *args, const Params &p, bool backward) {
  const unsigned blocks = (unsigned)(p.d.batch * p.d.heads * tiles_of(p.d.queries));
  cudaStream_t stream = stream_of(args);
  const T *q = (const T *)args->inputs[0].data, *k = (const T *)args->inputs[1].data;
  const T *v = (const T *)args->inputs[2].data;
  if (!backward) {
    const char *refused = prepare_kernel(mma_forward<T, D>, forward_shared(D));
    if (refused)
      return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention: %s", refused);
    mma_forward<T, D><<<blocks, kBlockThreads, forward_shared(D), stream>>>(q, k, v, (T *)args->outputs[0].data, p);
    return launch_status();
  }
  const char *refused = prepare_kernel(mma_statistics<T, D>, statistics_shared(D));
  if (refused)
    return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention: %s", refused);
  const int64_t rows = p.d.batch * p.d.heads * p.d.queries;
  float *lse = (float *)args->workspace, *delta = (float *)((char *)args->workspace + tf_cuda_round_up(4 * rows));
  mma_statistics<T, D><<<blocks, kBlockThreads, statistics_shared(D), stream>>>(
      q, k, v, (const T *)args->inputs[3].data, lse, delta, p);
  TF_RETURN_IF_ERROR(launch_status());
  return launch_mma_attention_gradients(args, p, lse, delta);
}

template <typename T> tf_status run_of_depth(const tf_cuda_args *args, const Params &p, bool backward) {
  switch (p.d.depth) {
  case 32: return run<T, 32>(args, p, backward);
  case 64: return run<T, 64>(args, p, backward);
  default: return run<T, 128>(args, p, backward);
  }
}

bool aligned16(const void *data) { return ((uintptr_t)data & 15u) == 0; }

/* The device's compute capability and opt-in shared memory as the kernels choose by them
 * (TIGHTFIT_CUDA_LIMITS lowers them); false when CUDA cannot say. */
bool device_limits(int *major, int *minor, int64_t *shared_optin) {
  tf_cuda_limits limits;
  if (!tf_cuda_current_limits(&limits))
    return false;
  *major = limits.major;
  *minor = limits.minor;
  *shared_optin = limits.shared_optin;
  return true;
}

} // namespace

void describe_depths(char *text, size_t size, const char *what, const char *kernels, const int64_t (&need)[2][3],
                     int64_t shared_optin) {
  char lists[2][32] = {"", ""};
  size_t used[2] = {0, 0};
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 2; b++)
      if (need[b][i] <= shared_optin)
        used[b] +=
            (size_t)snprintf(lists[b] + used[b], sizeof(lists[b]) - used[b], "%s%d", used[b] ? ", " : "", 32 << i);
  if (used[0] == 0)
    snprintf(text, size, "%s: CUDA cores (%lld bytes of shared memory per block are too few)", what,
             (long long)shared_optin);
  else if (strcmp(lists[0], lists[1]) == 0)
    snprintf(text, size, "%s: tensor cores (%s, D in {%s})", what, kernels, lists[0]);
  else
    snprintf(text, size, "%s: tensor cores (%s, D in {%s}; gradient D in {%s})", what, kernels, lists[0],
             used[1] ? lists[1] : "none");
}

const char *attention_operands_refusal(const tf_cuda_args *args, const int64_t (&need)[2][3], int64_t shared_optin) {
  const bool backward = args->op == TF_OP_ATTENTION_GRAD;
  const int64_t heads = args->attrs->u.attention.num_heads, width = args->inputs[0].shape[2];
  if (heads <= 0 || width % heads != 0)
    return "the width is not heads x D";
  const int64_t depth = width / heads;
  if (depth != 32 && depth != 64 && depth != 128)
    return "head width not 32, 64 or 128";
  if (args->inputs[0].shape[0] < 1 || args->inputs[0].shape[1] < 1 || args->inputs[1].shape[1] < 1)
    return "no queries or no keys";
  if (args->inputs[1].shape[2] != width || args->inputs[2].shape[2] != width ||
      args->inputs[2].shape[1] != args->inputs[1].shape[1])
    return "k and v unlike q";
  for (int32_t k = 0; k < (backward ? 4 : 3); k++)
    if (!aligned16(args->inputs[k].data))
      return "an operand is not 16-byte aligned";
  for (int32_t k = 0; k < (backward ? 3 : 1); k++)
    if (!aligned16(args->outputs[k].data))
      return "an output is not 16-byte aligned";
  if (backward) {
    const int64_t rows = args->inputs[0].shape[0] * args->inputs[0].shape[1] * heads;
    if (!args->workspace || args->workspace_bytes < tf_cuda_round_up(4 * rows) + 4 * rows)
      return "the workspace is smaller than lse and delta";
  }
  const int64_t blocks = args->inputs[0].shape[0] * heads * tiles_of(args->inputs[0].shape[1]);
  if (blocks > INT32_MAX)
    return "more blocks than the grid takes";
  if (need[backward ? 1 : 0][depth == 32 ? 0 : depth == 64 ? 1 : 2] > shared_optin)
    return "the device gives less shared memory per block than the kernels need";
  return NULL;
}

namespace {

/* Runs the step on tensor cores (no checks but prepare_kernel's); fast: attention_fast.cu's kernels. */
tf_status launch_checked(const tf_cuda_args *args, tf_cuda_attention_mode mode) {
  if (mode == TF_CUDA_ATTENTION_FAST)
    return launch_fast_attention(args, args->op == TF_OP_ATTENTION_GRAD);
  Params p;
  p.d = attention_dims_of(args);
  p.split = mode != TF_CUDA_ATTENTION_ROUNDED;
  const bool backward = args->op == TF_OP_ATTENTION_GRAD;
  if (args->inputs[0].dtype == TF_BF16)
    return run_of_depth<Bf16>(args, p, backward);
  return run_of_depth<F16>(args, p, backward);
}

/* TIGHTFIT_CUDA_ATTENTION_DEBUG=1: the path of each attention launch on stderr (the warm-up and the
 * capture with graphs, every step without), `why` the reason it is not the tensor cores. The H200's
 * fourth lend timed the training step's attention at the CUDA-core kernels' speed though the plan's
 * operands pass every refusal here: this says which check or launch declined. */
bool debugging_paths(void) {
  const char *debug = getenv("TIGHTFIT_CUDA_ATTENTION_DEBUG");
  return debug && debug[0] && strcmp(debug, "0") != 0;
}

/* The tensor path's name in those lines. */
const char *path_name(bool f32, tf_cuda_attention_mode mode) {
  if (f32)
    return "f32, 3xTF32";
  return mode == TF_CUDA_ATTENTION_FAST ? "fast" : mode == TF_CUDA_ATTENTION_ROUNDED ? "rounded" : "split";
}

void say_path(const tf_cuda_args *args, const char *name, const char *why) {
  if (!debugging_paths())
    return;
  fprintf(stderr, "tightfit cuda attention: %s [%lld, %lld, %lld] %d heads: %s%s\n", tf_op_name(args->op),
          (long long)args->inputs[0].shape[0], (long long)args->inputs[0].shape[1], (long long)args->inputs[0].shape[2],
          (int)args->attrs->u.attention.num_heads, why ? "CUDA-core kernels: " : "tensor cores, ", why ? why : name);
}

/* Another call's error found pending before the launch (see tensor_attention). */
void say_pending(const tf_cuda_args *args, cudaError_t earlier) {
  if (debugging_paths())
    fprintf(stderr, "tightfit cuda attention: %s: an earlier call left %s pending; cleared before the launch\n",
            tf_op_name(args->op), cudaGetErrorName(earlier));
}

} // namespace

tf_status tensor_attention(const tf_cuda_args *args, bool backward, bool *handled) {
  *handled = false;
  const bool f32 = args->inputs[0].dtype == TF_F32;
  if (!is_half_dtype(args->inputs[0].dtype) && !f32)
    return NULL;
  /* f32 steps take the tensor cores only when TIGHTFIT_CUDA_F32_ATTENTION says so (kernels.h) */
  if (f32 && !tf_cuda_f32_attention_on(getenv("TIGHTFIT_CUDA_F32_ATTENTION")))
    return NULL;
  const tf_cuda_attention_mode mode =
      f32 ? TF_CUDA_ATTENTION_FAST : tf_cuda_attention_mode_of(getenv("TIGHTFIT_CUDA_TENSOR_ATTENTION"));
  const char *name = path_name(f32, mode);
  int major = 0, minor = 0;
  int64_t shared_optin = 0;
  if (!device_limits(&major, &minor, &shared_optin)) {
    say_path(args, name, "the device's limits are unknown");
    return NULL;
  }
  const char *refused = f32 ? tf_cuda_f32_attention_refusal(args, major, minor, shared_optin)
                            : tf_cuda_tensor_attention_refusal(args, major, minor, shared_optin, mode);
  if (refused) {
    say_path(args, name, refused);
    return NULL;
  }
  (void)backward; /* the op says it: args->op */
  /* An error another call left behind (the runtime keeps the last one per thread) would make this
   * launch's check fail and the step fall back, as the fallback below always cleared it: cleared
   * first, and said (a guess at the H200's slow attention: in training a cuBLAS product runs just
   * before each attention step; in the test nothing does). */
  const cudaError_t earlier = cudaGetLastError();
  if (earlier != cudaSuccess)
    say_pending(args, earlier);
  tf_status status = f32 ? launch_f32_attention(args, args->op == TF_OP_ATTENTION_GRAD) : launch_checked(args, mode);
  if (status) { /* refused or failed to launch: nothing ran to completion, the other kernels redo it all */
    say_path(args, name, tf_status_message(status));
    tf_status_free(status);
    cudaGetLastError();
    return NULL;
  }
  say_path(args, name, NULL);
  *handled = true;
  return NULL;
}

} // namespace tf_cuda

using namespace tf_cuda;
using namespace tf_cuda::mma_attention;

extern "C" tf_cuda_attention_mode tf_cuda_attention_mode_of(const char *value) {
  if (value && strcmp(value, "0") == 0)
    return TF_CUDA_ATTENTION_OFF;
  if (value && strcmp(value, "rounded") == 0)
    return TF_CUDA_ATTENTION_ROUNDED;
  if (value && strcmp(value, "split") == 0)
    return TF_CUDA_ATTENTION_SPLIT;
  return TF_CUDA_ATTENTION_FAST;
}

extern "C" int64_t tf_cuda_tensor_attention_shared(int64_t depth, bool backward, tf_cuda_attention_mode mode) {
  if (depth != 32 && depth != 64 && depth != 128)
    return 0;
  const int dm = (int)depth;
  if (mode == TF_CUDA_ATTENTION_FAST) { /* the statistics and dQ kernels both take query_shared */
    const int query = fast_attention::query_shared(dm), key = fast_attention::key_shared(dm);
    return !backward ? fast_attention::forward_shared(dm) : key > query ? key : query;
  }
  if (!backward)
    return forward_shared(dm);
  const int most = statistics_shared(dm) > query_shared(dm) ? statistics_shared(dm) : query_shared(dm);
  return most > key_shared(dm) ? most : key_shared(dm);
}

/* The shared memory `mode`'s kernels need for D = 32, 64, 128: need[0] the forward's, need[1] the gradient's. */
static void shared_needs(tf_cuda_attention_mode mode, int64_t (&need)[2][3]) {
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 2; b++)
      need[b][i] = tf_cuda_tensor_attention_shared(32 << i, b == 1, mode);
}

extern "C" const char *tf_cuda_tensor_attention_refusal(const tf_cuda_args *args, int major, int minor,
                                                        int64_t shared_optin, tf_cuda_attention_mode mode) {
  (void)minor;
  if (mode == TF_CUDA_ATTENTION_OFF)
    return "switched off (TIGHTFIT_CUDA_TENSOR_ATTENTION=0)";
  if (args->op != TF_OP_ATTENTION && args->op != TF_OP_ATTENTION_GRAD)
    return "not an attention step";
  const bool backward = args->op == TF_OP_ATTENTION_GRAD;
  if (args->n_inputs < (backward ? 4 : 3) || args->n_outputs < (backward ? 3 : 1))
    return "not the operands of attention";
  if (major < 8)
    return "compute capability below 8.0 (no bf16 tensor-core products)";
  const tf_dtype type = args->inputs[0].dtype;
  if (type != TF_F16 && type != TF_BF16)
    return "q is not f16 or bf16";
  for (int32_t k = 0; k < (backward ? 4 : 3); k++)
    if (args->inputs[k].dtype != type)
      return backward ? "q, k, v and dy are not of one half type" : "q, k and v are not of one half type";
  for (int32_t k = 0; k < (backward ? 3 : 1); k++)
    if (args->outputs[k].dtype != type)
      return "the outputs are not of q's half type";
  int64_t need[2][3];
  shared_needs(mode, need);
  return attention_operands_refusal(args, need, shared_optin);
}

extern "C" void tf_cuda_tensor_attention_describe(char *text, size_t size, int major, int minor, int64_t shared_optin,
                                                  tf_cuda_attention_mode mode) {
  if (size == 0)
    return;
  if (mode == TF_CUDA_ATTENTION_OFF) {
    snprintf(text, size, "attention: CUDA cores (TIGHTFIT_CUDA_TENSOR_ATTENTION=0)");
    return;
  }
  if (major < 8) {
    snprintf(text, size, "attention: CUDA cores (compute capability %d.%d: the tensor-core kernels need 8.0)", major,
             minor);
    return;
  }
  int64_t need[2][3];
  shared_needs(mode, need);
  const bool rounded = mode == TF_CUDA_ATTENTION_ROUNDED || mode == TF_CUDA_ATTENTION_FAST;
  char kernels[96];
  snprintf(kernels, sizeof(kernels), "%s bf16/f16, %s",
           mode == TF_CUDA_ATTENTION_FAST ? "FlashAttention-2-style mma.sync" : "wmma",
           rounded ? "P, dS rounded" : "P, dS in two terms");
  describe_depths(text, size, "attention", kernels, need, shared_optin);
}

extern "C" tf_status tf_cuda_tensor_attention_launch(const tf_cuda_args *args, tf_cuda_attention_mode mode) {
  int major = 0, minor = 0;
  int64_t shared_optin = 0;
  if (!device_limits(&major, &minor, &shared_optin))
    return tf_status_new(TF_ERR_BACKEND, "tensor-core attention: cannot read the device's limits");
  const char *refused = tf_cuda_tensor_attention_refusal(args, major, minor, shared_optin, mode);
  if (refused)
    return tf_status_new(TF_ERR_UNSUPPORTED, "tensor-core attention refused: %s", refused);
  return launch_checked(args, mode);
}

extern "C" tf_status tf_cuda_f32_attention_launch(const tf_cuda_args *args) {
  int major = 0, minor = 0;
  int64_t shared_optin = 0;
  if (!device_limits(&major, &minor, &shared_optin))
    return tf_status_new(TF_ERR_BACKEND, "f32 tensor-core attention: cannot read the device's limits");
  const char *refused = tf_cuda_f32_attention_refusal(args, major, minor, shared_optin);
  if (refused)
    return tf_status_new(TF_ERR_UNSUPPORTED, "f32 tensor-core attention refused: %s", refused);
  return launch_f32_attention(args, args->op == TF_OP_ATTENTION_GRAD);
}
