/* Embedding lookup and its gradient, as kernels/cpu/embedding.c: ids are i32 or i64; an id outside
 * [0, V) reads as a zero row and receives no gradient.
 *
 * The gradient is deterministic without atomics: the keys (id << 32 | position) are sorted in the
 * workspace (bitonic: shared memory for the stages within 1024 keys, global passes across), then
 * the first position of each id's run adds the dy rows of its run in position order into its table
 * row, column by column: the same additions in the same order as the CPU's loop over positions.
 * Table rows no id names are zeroed first. Positions must fit in 32 bits.
 *
 * The lookup is templated on the storage of the table and output (f32, and f16/bf16 for the cuda
 * target's half kernels): a row element is loaded to f32 and stored back rounded once, which gives
 * its bits (a NaN as its quiet NaN, as a cast up and down does). So is the gradient: each table row
 * is written by one run, its sum kept in f32 from the zero dtable holds and rounded once, the f32
 * kernel's additions then the cast. embedding_grad_accumulate on half data is refused (table.cu):
 * its sums would be rounded at every micro-batch. */
#include "kernels/cuda/common.cuh"

namespace tf_cuda {
namespace {

constexpr int kSortBlock = 1024; /* keys a block sorts in shared memory */
constexpr uint64_t kInvalid = 0xFFFFFFFFull << 32;

__device__ inline int64_t id_at(const void *ids, bool wide, int64_t i) {
  return wide ? ((const int64_t *)ids)[i] : (int64_t)((const int32_t *)ids)[i];
}

template <typename T>
__global__ void lookup(const void *ids, bool wide, const T *table, int64_t rows, int64_t depth, T *y, int64_t n) {
  TF_CUDA_GRID_STRIDE(i, n) {
    const int64_t id = id_at(ids, wide, i / depth);
    y[i] = from_f32<T>(id >= 0 && id < rows ? to_f32(table[id * depth + i % depth]) : 0.0f);
  }
}

__global__ void make_keys(const void *ids, bool wide, int64_t count, int64_t rows, uint64_t *keys, int64_t padded) {
  TF_CUDA_GRID_STRIDE(i, padded) {
    if (i >= count) {
      keys[i] = ~0ull;
      continue;
    }
    const int64_t id = id_at(ids, wide, i);
    keys[i] = (id >= 0 && id < rows ? (uint64_t)id << 32 : kInvalid) | (uint64_t)i;
  }
}

__device__ inline void compare_swap(uint64_t *a, uint64_t *b, bool ascending) {
  if ((*a > *b) == ascending) {
    uint64_t t = *a;
    *a = *b;
    *b = t;
  }
}

/* Stages (k, j) with j < kSortBlock, from `first_k` (doubling) up to `last_k`, within each block of
 * kSortBlock keys in shared memory; j starts at first_j for the first k, at k / 2 afterwards. */
__global__ void sort_local(uint64_t *keys, int64_t padded, int64_t first_k, int64_t first_j, int64_t last_k) {
  __shared__ uint64_t local[kSortBlock];
  const int64_t base = (int64_t)blockIdx.x * kSortBlock;
  const int64_t width = padded < kSortBlock ? padded : kSortBlock;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    local[i] = keys[base + i];
  __syncthreads();
  for (int64_t k = first_k; k <= last_k; k <<= 1) {
    for (int64_t j = k == first_k ? first_j : k >> 1; j > 0; j >>= 1) {
      for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
        const int64_t partner = i ^ j;
        if (partner > i)
          compare_swap(&local[i], &local[partner], ((base + i) & k) == 0);
      }
      __syncthreads();
    }
  }
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    keys[base + i] = local[i];
}

__global__ void sort_global(uint64_t *keys, int64_t padded, int64_t k, int64_t j) {
  TF_CUDA_GRID_STRIDE(i, padded) {
    const int64_t partner = i ^ j;
    if (partner > i)
      compare_swap(&keys[i], &keys[partner], (i & k) == 0);
  }
}

/* Block s adds the run of equal ids starting at sorted position s (if one starts there): each
 * element's sum is kept in f32 from what dtable holds and written once (rounded on half storage). */
template <typename T>
__global__ void add_runs(const uint64_t *keys, int64_t count, const T *dy, int64_t depth, T *dtable) {
  for (int64_t s = blockIdx.x; s < count; s += gridDim.x) {
    const uint64_t id = keys[s] >> 32;
    if (keys[s] >= kInvalid || (s > 0 && keys[s - 1] >> 32 == id))
      continue;
    for (int64_t c = threadIdx.x; c < depth; c += blockDim.x) {
      float sum = to_f32(dtable[id * depth + c]);
      for (int64_t t = s; t < count && keys[t] >> 32 == id; t++)
        sum += to_f32(dy[(int64_t)(keys[t] & 0xFFFFFFFFull) * depth + c]);
      dtable[id * depth + c] = from_f32<T>(sum);
    }
  }
}

/* Sorts `padded` keys (a power of two) ascending. */
tf_status sort_keys(uint64_t *keys, int64_t padded, cudaStream_t stream) {
  const unsigned local_blocks = (unsigned)((padded + kSortBlock - 1) / kSortBlock);
  const int64_t local_limit = padded < kSortBlock ? padded : kSortBlock;
  sort_local<<<local_blocks, kThreads, 0, stream>>>(keys, padded, 2, 1, local_limit);
  for (int64_t k = 2 * kSortBlock; k <= padded; k <<= 1) {
    int64_t j = k >> 1;
    for (; j >= kSortBlock; j >>= 1)
      sort_global<<<blocks_for(padded), kThreads, 0, stream>>>(keys, padded, k, j);
    sort_local<<<local_blocks, kThreads, 0, stream>>>(keys, padded, k, j, k);
  }
  return launch_status();
}

} // namespace

/* (ids, table) -> rows: T is the table's (and the output's) storage. */
TF_CUDA_LAUNCHER(embedding) {
  const tf_cuda_tensor *ids = &args->inputs[0], *table = &args->inputs[1];
  const int64_t n = args->outputs[0].count;
  if (n == 0)
    return NULL;
  return with_storage(table->dtype, [&](auto tag) {
    using T = decltype(tag);
    lookup<T><<<blocks_for(n), kThreads, 0, stream_of(args)>>>(ids->data, ids->dtype == TF_I64, (const T *)table->data,
                                                               table->shape[0], table->shape[1],
                                                               (T *)args->outputs[0].data, n);
    return launch_status();
  });
}

/* embedding_grad writes dtable (f32 or, a half kernel, f16/bf16); embedding_grad_accumulate adds to
 * its input 2, f32 (the run sums add to what the table holds either way). */
TF_CUDA_LAUNCHER(embedding_grad) {
  const bool accumulate = args->op == TF_OP_EMBEDDING_GRAD_ACCUMULATE;
  const tf_cuda_tensor *ids = &args->inputs[0], *dtable = accumulate ? &args->inputs[2] : &args->outputs[0];
  const int64_t rows = dtable->shape[0], depth = dtable->shape[1], count = ids->count;
  cudaStream_t stream = stream_of(args);
  if (!accumulate)
    TF_RETURN_IF_ERROR(zero(dtable, stream));
  if (count == 0 || depth == 0 || rows == 0)
    return NULL;
  uint64_t *keys = (uint64_t *)args->workspace;
  const int64_t padded = tf_cuda_embedding_keys(count);
  make_keys<<<blocks_for(padded), kThreads, 0, stream>>>(ids->data, ids->dtype == TF_I64, count, rows, keys, padded);
  TF_RETURN_IF_ERROR(sort_keys(keys, padded, stream));
  const int threads = depth < kThreads ? (int)((depth + 31) / 32 * 32) : kThreads;
  return with_storage(dtable->dtype, [&](auto tag) {
    using T = decltype(tag);
    add_runs<T><<<(unsigned)(count < kMaxBlocks ? count : kMaxBlocks), threads, 0, stream>>>(
        keys, count, (const T *)args->inputs[1].data, depth, (T *)dtable->data);
    return launch_status();
  });
}

} // namespace tf_cuda
