/* The products: matmul (shaders/matmul.comp) and the convolutions (conv1d, conv2d, their gradients,
 * conv_transpose2d) as implicit GEMMs (the same shader with MODE 1..3: no column matrix, no
 * workspace). Fused attention: vk_lower_attention.c. */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/workspace_cpu.h"

/* The tile of C a workgroup computes (matmul.comp's BM x BN): 64 x 64, or 64 x 32 in the subgroup
 * variant; 128 x 128 in the big-tile variant (BIG_TILE). */
#define TILE_M 64
static int64_t tile_width(bool subgroups) { return subgroups ? 32 : 64; }
static int64_t tile_n(const vk_lower *l) { return tile_width(l->limits->subgroup_size != 0); }
/* Whether a product takes the subgroup variant (vk_limits.matmul_subgroups). */
static bool product_subgroups(const vk_lower *l) { return l->limits->subgroup_size && l->limits->matmul_subgroups; }
#define BIG_TILE 128
/* The big-tile variant takes a product (by default) when it has at least this many 128 x 128
 * tiles: two workgroups on each of 128 compute units, a large GPU's (an H200 has 132 SMs). Below it
 * the 4x more workgroups of the 64-row tiles keep more of the GPU busy (a weight gradient of
 * 768 x 768 has 36 big tiles). */
#define BIG_MIN_TILES 256
/* Its shared memory: two tiles of 16 x (128 / 4 + 1) vec4 (matmul.comp's tile_a, tile_b), more than
 * the 16 KiB Vulkan guarantees; a device with less runs the 64-row tiles. */
#define BIG_SHARED_BYTES (2 * 16 * (128 / 4 + 1) * 16)

typedef struct matmul_push {
  uint32_t m, n, k, flags, lda, ldb, batch_rank, a_offset;
  uint32_t batch_shape[4], a_batch_stride[4], b_batch_stride[4];
  uint32_t b_offset, c_offset;
} matmul_push;
_Static_assert(sizeof(matmul_push) <= VK_PUSH_WORDS * 4, "matmul push constants");

typedef struct conv_push {
  uint32_t m, n, k, flags, batch;
  uint32_t channels, height, width, out_channels, out_height, out_width;
  uint32_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
} conv_push;

_Static_assert(sizeof(conv_push) <= VK_PUSH_WORDS * 4, "conv push constants");

static tf_status check_grid(const vk_lower *l, int64_t m, int64_t n, int64_t batches) {
  if ((m + TILE_M - 1) / TILE_M > VK_GROUP_LIMIT || (n + tile_n(l) - 1) / tile_n(l) > VK_GROUP_LIMIT ||
      batches > VK_GROUP_LIMIT)
    return vk_refuse(l, "a product of %lld x %lld in %lld batches exceeds the dispatch grid", (long long)m,
                     (long long)n, (long long)batches);
  return NULL;
}

/* Element strides of x's batch axes aligned to the output's `batch_rank` axes (0 where broadcast). */
static void batch_strides(const tf_plan_buffer *x, int32_t batch_rank, int64_t *strides) {
  int32_t x_batch_rank = x->rank - 2;
  int64_t stride = x->shape[x->rank - 2] * x->shape[x->rank - 1];
  for (int32_t i = batch_rank - 1; i >= 0; i--) {
    int32_t axis = i - (batch_rank - x_batch_rank);
    strides[i] = axis < 0 || x->shape[axis] == 1 ? 0 : stride;
    if (axis >= 0)
      stride *= x->shape[axis];
  }
}

/* Whether the subgroup variant may read B as aligned vec4s (matmul.comp's flag bit 3): B not
 * transposed, and its row length, width, element offset and batch strides multiples of 4. */
static bool b_reads_vec4(bool tb, int64_t n, int64_t ldb, int64_t b_offset, int32_t batch_rank,
                         const int64_t *strides) {
  bool aligned = !tb && n % 4 == 0 && ldb % 4 == 0 && b_offset % 4 == 0;
  for (int32_t i = 0; i < batch_rank; i++)
    aligned = aligned && strides[i] % 4 == 0;
  return aligned;
}

/* Whether a product of m x n in `batches` runs in 128 x 128 tiles (vk_limits.big_matmul). */
static bool big_tiles(const vk_lower *l, int64_t m, int64_t n, int64_t batches) {
  const int64_t tiles = ((m + BIG_TILE - 1) / BIG_TILE) * ((n + BIG_TILE - 1) / BIG_TILE) * batches;
  return l->limits->max_shared_bytes >= BIG_SHARED_BYTES &&
         (l->limits->big_matmul == VK_BIG_MATMUL_ALL ||
          (l->limits->big_matmul == VK_BIG_MATMUL_LARGE && tiles >= BIG_MIN_TILES));
}

/* Whether an operand's quads (four elements along its contiguous axis from a multiple of 4) are
 * aligned vec4s of its binding: its row stride, element offset and batch strides multiples of 4. */
static bool quads_aligned(uint32_t row_stride, uint32_t offset, const uint32_t *batch_strides, uint32_t batch_rank) {
  bool aligned = row_stride % 4 == 0 && offset % 4 == 0;
  for (uint32_t i = 0; i < batch_rank; i++)
    aligned = aligned && batch_strides[i] % 4 == 0;
  return aligned;
}

/* The dispatch of one matmul.comp product (MODE 0): a workgroup per tile of C, a grid layer per batch;
 * the big-tile variant reads A and B in aligned quads where it can (flag bits 5 and 6). */
static tf_status emit_product(vk_lower *l, const int32_t buffers[4], const matmul_push *push, int64_t m, int64_t n,
                              int64_t batches) {
  if (big_tiles(l, m, n, batches)) {
    matmul_push big = *push;
    if (l->limits->matmul_quads && quads_aligned(big.lda, big.a_offset, big.a_batch_stride, big.batch_rank))
      big.flags |= 32u;
    if (l->limits->matmul_quads && quads_aligned(big.ldb, big.b_offset, big.b_batch_stride, big.batch_rank))
      big.flags |= 64u;
    return vk_emit_dispatch(l, VK_SHADER_matmul_big, 4, buffers, 0x4, &big, sizeof(big),
                            (uint32_t)((n + BIG_TILE - 1) / BIG_TILE), (uint32_t)((m + BIG_TILE - 1) / BIG_TILE),
                            (uint32_t)batches);
  }
  const vk_shader shader = product_subgroups(l) ? vk_variant(l, VK_SHADER_matmul) : VK_SHADER_matmul;
  return vk_emit_dispatch(l, shader, 4, buffers, 0x4, push, sizeof(*push),
                          (uint32_t)((n + tile_width(product_subgroups(l)) - 1) / tile_width(product_subgroups(l))),
                          (uint32_t)((m + TILE_M - 1) / TILE_M), (uint32_t)batches);
}

/* matmul (a, b) -> c, and matmul_accumulate (c, a, b): c += the product (flag bit 4), c's binding
 * read and written by the same invocation per element, and marked written for the barriers. */
tf_status vk_lower_matmul(vk_lower *l) {
  const bool accumulate = l->step->op == TF_OP_MATMUL_ACCUMULATE;
  const int32_t a_id = vk_in(l, accumulate ? 1 : 0), b_id = vk_in(l, accumulate ? 2 : 1);
  const int32_t c_id = accumulate ? vk_in(l, 0) : vk_out(l, 0);
  const tf_plan_buffer *a = vk_buffer(l, a_id), *b = vk_buffer(l, b_id), *c = vk_buffer(l, c_id);
  bool ta = l->step->attrs.u.matmul.transpose_a, tb = l->step->attrs.u.matmul.transpose_b;
  int64_t m = c->shape[c->rank - 2], n = c->shape[c->rank - 1], k = ta ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
  if (vk_count(c) == 0)
    return NULL;
  int32_t batch_rank = c->rank - 2;
  int64_t shape[TF_MAX_RANK] = {0}, strides[3][TF_MAX_RANK] = {{0}}, batches = 1, b_batches = 1;
  for (int32_t i = 0; i < batch_rank; i++)
    batches *= (shape[i] = c->shape[i]);
  for (int32_t i = 0; i < b->rank - 2; i++)
    b_batches *= b->shape[i];
  batch_strides(a, batch_rank, strides[0]);
  batch_strides(b, batch_rank, strides[1]);
  int64_t stride = m * n;
  for (int32_t i = batch_rank - 1; i >= 0; i--) {
    strides[2][i] = stride;
    stride *= shape[i];
  }
  // One B for every batch entry and A not transposed: A's and C's batch entries are consecutive
  // row blocks, so the whole product is one GEMM (a linear layer over [N, T, E]).
  if (!ta && b_batches == 1) {
    m *= batches;
    batches = 1;
    batch_rank = 0;
  }
  if (batch_rank > 0)
    vk_collapse(&batch_rank, shape, 3, strides);
  if (batches == 1)
    batch_rank = 0;
  if (batch_rank > 4)
    return vk_refuse(l, "%d batch axes after merging; the matmul shader takes 4", batch_rank);
  TF_RETURN_IF_ERROR(check_grid(l, m, n, batches));
  TF_RETURN_IF_ERROR(vk_check_loops(l, (k + 7) / 8 + 8)); // K in steps of 8 (16 without subgroups)
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(a), a->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(b), b->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(c), c->name));
  matmul_push push;
  memset(&push, 0, sizeof(push));
  push.m = (uint32_t)m;
  push.n = (uint32_t)n;
  push.k = (uint32_t)k;
  push.flags = (ta ? 1u : 0u) | (tb ? 2u : 0u) |
               (b_reads_vec4(tb, n, b->shape[b->rank - 1], 0, batch_rank, strides[1]) ? 8u : 0u) |
               (accumulate ? 16u : 0u);
  push.lda = (uint32_t)a->shape[a->rank - 1];
  push.ldb = (uint32_t)b->shape[b->rank - 1];
  push.batch_rank = (uint32_t)batch_rank;
  for (int32_t i = 0; i < batch_rank; i++) {
    push.batch_shape[i] = (uint32_t)shape[i];
    push.a_batch_stride[i] = (uint32_t)strides[0][i];
    push.b_batch_stride[i] = (uint32_t)strides[1][i];
  }
  int32_t buffers[4] = {a_id, b_id, c_id, -1};
  return emit_product(l, buffers, &push, m, n, batches);
}

tf_status vk_emit_gemm(vk_lower *l, const vk_gemm *g) {
  const int64_t batches = g->batches > 1 ? g->batches : 1;
  if (g->m == 0 || g->n == 0)
    return NULL;
  TF_RETURN_IF_ERROR(check_grid(l, g->m, g->n, batches));
  TF_RETURN_IF_ERROR(vk_check_loops(l, (g->k + 7) / 8 + 8));
  matmul_push push;
  memset(&push, 0, sizeof(push));
  push.m = (uint32_t)g->m;
  push.n = (uint32_t)g->n;
  push.k = (uint32_t)g->k;
  const int64_t b_stride[1] = {g->b_batch_stride};
  const bool vec4 = b_reads_vec4(g->tb, g->n, g->ldb, g->b_offset, batches > 1 ? 1 : 0, b_stride);
  push.flags = (g->ta ? 1u : 0u) | (g->tb ? 2u : 0u) | (vec4 ? 8u : 0u) | (g->accumulate ? 16u : 0u);
  push.lda = (uint32_t)g->lda;
  push.ldb = (uint32_t)g->ldb;
  push.a_offset = (uint32_t)g->a_offset;
  push.b_offset = (uint32_t)g->b_offset;
  push.c_offset = (uint32_t)g->c_offset;
  if (batches > 1) {
    push.batch_rank = 1;
    push.batch_shape[0] = (uint32_t)batches;
    push.a_batch_stride[0] = (uint32_t)g->a_batch_stride;
    push.b_batch_stride[0] = (uint32_t)g->b_batch_stride;
  }
  int32_t buffers[4] = {g->a, g->b, g->c, -1};
  return emit_product(l, buffers, &push, g->m, g->n, batches);
}

static tf_tensor_ref tensor_of(const tf_plan_buffer *b) {
  tf_tensor_ref t;
  memset(&t, 0, sizeof(t));
  t.dtype = b->dtype;
  t.rank = b->rank;
  t.count = vk_count(b);
  for (int32_t d = 0; d < b->rank; d++)
    t.shape[d] = b->shape[d];
  return t;
}

tf_status vk_lower_conv(vk_lower *l) {
  tf_op op = l->step->op;
  tf_tensor_ref inputs[3], output = tensor_of(vk_buffer(l, vk_out(l, 0)));
  for (int32_t k = 0; k < l->step->n_inputs; k++)
    inputs[k] = tensor_of(vk_buffer(l, vk_in(l, k)));
  tf_cpu_conv_geometry g;
  if (!tf_cpu_conv_geometry_get(op, &l->step->attrs, inputs, &output, &g))
    return vk_refuse(l, "not a convolution");
  if (output.count == 0)
    return NULL;
  conv_push push = {0};
  int64_t cg = g.image_channels / g.groups, og = g.response_channels / g.groups, batches;
  int64_t m, n, k;
  vk_shader shader;
  int32_t buffers[4] = {-1, -1, vk_out(l, 0), -1};
  if (op == TF_OP_CONV1D || op == TF_OP_CONV2D) {
    shader = VK_SHADER_conv_forward;
    m = og, n = g.positions, k = g.column_rows, batches = g.batch * g.groups;
    buffers[0] = vk_in(l, 1); // w
    buffers[1] = vk_in(l, 0); // x
    if (l->step->n_inputs > 2) {
      buffers[3] = vk_in(l, 2);
      push.flags = 4u;
    }
  } else if (op == TF_OP_CONV1D_GRAD_WEIGHT || op == TF_OP_CONV2D_GRAD_WEIGHT) {
    shader = VK_SHADER_conv_grad_weight;
    m = og, n = g.column_rows, k = g.batch * g.positions, batches = g.groups;
    buffers[0] = vk_in(l, 1); // dy
    buffers[1] = vk_in(l, 0); // x
  } else {
    // conv*_grad_input(dy, w) and conv_transpose2d(x, w [, bias]): the adjoint of the convolution.
    shader = VK_SHADER_conv_grad_input;
    m = cg, n = g.image_height * g.image_width, k = og * g.kernel_height * g.kernel_width, batches = g.batch * g.groups;
    buffers[0] = vk_in(l, 1); // w
    buffers[1] = vk_in(l, 0); // dy, or conv_transpose2d's x
    if (op == TF_OP_CONV_TRANSPOSE2D && l->step->n_inputs > 2) {
      buffers[3] = vk_in(l, 2);
      push.flags = 4u;
    }
  }
  // Forward and grad input: the images side by side in C's columns (z the group only) where the grid
  // holds them, so that small images (a CNN's last stages: 2 x 2 to 7 x 7) fill a tile's columns.
  if (shader != VK_SHADER_conv_grad_weight && g.batch > 1 &&
      (n * g.batch + tile_n(l) - 1) / tile_n(l) <= VK_GROUP_LIMIT) {
    n *= g.batch;
    batches = g.groups;
    push.flags |= 8u;
  }
  TF_RETURN_IF_ERROR(check_grid(l, m, n, batches));
  TF_RETURN_IF_ERROR(vk_check_loops(l, (k + 7) / 8 + 8));
  for (int32_t i = 0; i < l->step->n_inputs; i++)
    TF_RETURN_IF_ERROR(vk_check_count(l, inputs[i].count, "an operand"));
  TF_RETURN_IF_ERROR(vk_check_count(l, output.count, "the output"));
  push.m = (uint32_t)m, push.n = (uint32_t)n, push.k = (uint32_t)k;
  push.batch = (uint32_t)g.batch;
  push.channels = (uint32_t)g.image_channels, push.height = (uint32_t)g.image_height;
  push.width = (uint32_t)g.image_width;
  push.out_channels = (uint32_t)g.response_channels, push.out_height = (uint32_t)g.response_height;
  push.out_width = (uint32_t)g.response_width;
  push.kernel_h = (uint32_t)g.kernel_height, push.kernel_w = (uint32_t)g.kernel_width;
  push.stride_h = (uint32_t)g.stride[0], push.stride_w = (uint32_t)g.stride[1];
  push.pad_h = (uint32_t)g.padding[0], push.pad_w = (uint32_t)g.padding[1];
  push.dilation_h = (uint32_t)g.dilation[0], push.dilation_w = (uint32_t)g.dilation[1];
  push.groups = (uint32_t)g.groups;
  return vk_emit_dispatch(l, vk_variant(l, shader), 4, buffers, 0x4, &push, sizeof(push),
                          (uint32_t)((n + tile_n(l) - 1) / tile_n(l)), (uint32_t)((m + TILE_M - 1) / TILE_M),
                          (uint32_t)batches);
}
