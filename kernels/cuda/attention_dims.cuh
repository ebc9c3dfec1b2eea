/* The sizes every attention kernel works from (attention.cu's row kernels, attention_tiled.cu's
 * tiles), read once from the launch arguments. */
#ifndef TIGHTFIT_KERNELS_CUDA_ATTENTION_DIMS_CUH
#define TIGHTFIT_KERNELS_CUDA_ATTENTION_DIMS_CUH

#include "kernels/cuda/common.cuh"

namespace tf_cuda {

/* q [batch, queries, width], k and v [batch, keys, width]; width = heads x depth. row_blocks: the
 * row kernels' blocks per (n, h), set by them (0 otherwise). */
struct AttentionDims {
  int64_t batch, queries, keys, heads, depth, width, row_blocks;
  float scale;
  bool causal;
};

inline AttentionDims attention_dims_of(const tf_cuda_args *args) {
  const tf_attention_attrs *a = &args->attrs->u.attention;
  AttentionDims d;
  d.batch = args->inputs[0].shape[0];
  d.queries = args->inputs[0].shape[1];
  d.keys = args->inputs[1].shape[1];
  d.width = args->inputs[0].shape[2];
  d.heads = a->num_heads;
  d.depth = d.width / d.heads;
  d.scale = a->scale != 0 ? a->scale : 1.0f / sqrtf((float)d.depth);
  d.causal = a->causal;
  d.row_blocks = 0;
  return d;
}

} // namespace tf_cuda

#endif
