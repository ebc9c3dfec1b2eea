/* Fused attention and its gradient: shaders/attention_tiled.comp (a workgroup per block of 32 or 16
 * query or key rows, K and V tiles in shared memory) where it applies, else shaders/attention.comp (an
 * invocation, or an 8-lane cluster, per row). Both keep the gradient's row statistics in dq's rows:
 * no workspace. */
#include <math.h>
#include <string.h>

#include "backends/vulkan/vk_lower.h"

typedef struct attention_push {
  uint32_t batch, queries, keys, heads, depth, width;
  float scale;
  uint32_t causal, mode, keep;
} attention_push;

enum { ATTENTION_FORWARD = 0, ATTENTION_STATS, ATTENTION_KV, ATTENTION_QUERY };

/* attention_tiled.comp's variants: blocks of `block` rows, heads of at most `depth`, the first that
 * holds the head and whose shared memory (`tiles` [block, depth + 4] f32 tiles, two [block, block + 1]
 * score tiles and 3 x block row statistics) the device has: 32-row blocks do twice the score
 * products per shared-memory read and twice the work per tile load and barrier of 16-row ones, and
 * keep Q and dO apart in the KV pass (a fourth tile, FOUR_TILES). */
typedef struct tiled_variant {
  vk_shader shader;
  uint32_t block, depth, tiles;
} tiled_variant;
static const tiled_variant TILED[] = {
    {VK_SHADER_attention_tiled_d32, 32, 32, 4}, /* 27,264 bytes */
    {VK_SHADER_attention_tiled_d64, 32, 64, 4}, /* 43,648 bytes */
    {VK_SHADER_attention_tiled, 16, 128, 3},    /* 27,712 bytes */
};
#define TILED_DEPTH 128

static int64_t tiled_shared_bytes(const tiled_variant *v) {
  return 4 * ((int64_t)v->tiles * v->block * (v->depth + 4) + 2 * (int64_t)v->block * (v->block + 1) +
              3 * (int64_t)v->block);
}

/* The variant for heads of `depth` on a device of `limits`, or NULL (none applies). */
static const tiled_variant *tiled_variant_of(const vk_limits *limits, uint32_t depth) {
  for (size_t i = 0; limits->tiled_attention && i < sizeof(TILED) / sizeof(TILED[0]); i++)
    if (depth <= TILED[i].depth && tiled_shared_bytes(&TILED[i]) <= (int64_t)limits->max_shared_bytes &&
        (TILED[i].block == 16 || limits->tiled_wide))
      return &TILED[i];
  return NULL;
}
/* Heads narrower than 8 leave most of the 8 invocations that share a row idle (lavapipe runs them
 * all: a first version took 42 s instead of 9 on test_vulkan_ops' forward over 87,382 heads of 3);
 * from 8 on, the gradient's statistics fit in dq's rows in every dtype (6 elements in f16/bf16), so
 * an f32 plan and its half twin take the same shaders. */
#define TILED_MIN_DEPTH 8

bool vk_attention_tiled(const vk_limits *limits) { return tiled_variant_of(limits, TILED_DEPTH) != NULL; }

/* Loop iterations one invocation of attention.comp may run in all, from above. An invocation
 * walks its head-width `elements` (depth, or ceil(depth / 8) for a lane of the subgroup variant)
 * a few times per key (query) it visits, each of its grid rounds; without kept statistics
 * (depth < 3) the gradient also recomputes a query's statistics, two walks over the keys, for
 * each query it visits. */
static int64_t row_loops(const attention_push *p, int64_t elements, int64_t items, int64_t rows_per_group,
                         bool gradient) {
  double longest = p->keys > p->queries ? p->keys : p->queries;
  double per_row = 3 * longest * (double)(elements + 1) + 4 * (double)elements;
  if (gradient && p->depth < 3)
    per_row += (double)p->queries * p->keys * (double)(3 * elements + 2);
  double loops = (double)vk_grid_rounds(items, rows_per_group) * (per_row + 1);
  return loops < 1e18 ? (int64_t)loops : (int64_t)1e18; // in double: queries x keys x ... may pass int64
}

/* Loop iterations one invocation of attention_tiled.comp (blocks of `block` rows) may run in all,
 * from above, in the longest of its passes: per tile it visits, a score product ceil(depth / 4) (vec4
 * steps), a walk over the tile's block rows or columns, plus 16 for the short loops; STATS then sums
 * dO . O over `depth` for each of the invocation's block / 8 rows; times the blocks' grid rounds. The
 * tile loads and the loops over a row's columns (e < PARTS), lanes and rows have constant bounds and
 * are unrolled: no iterations of their own (on lavapipe the causal [1,1024,64] gradient of
 * test_vulkan_ops, whose KV pass would run some 84,000 iterations per invocation were they loops,
 * matches the CPU). */
static int64_t tiled_loops(const attention_push *p, uint32_t block, bool gradient) {
  const double quads = (p->depth + 3) / 4, walk = block, slack = 16;
  const double key_tiles = (p->keys + block - 1) / block;
  const double query_tiles = (p->queries + block - 1) / block, heads = (double)p->batch * p->heads;
  /* forward and STATS, per key tile: S and O += P V; STATS: dO . O row by row */
  const double forward = key_tiles * (1 + quads + walk + slack) + (double)(block / 8) * p->depth + slack;
  double blocks = heads * query_tiles, longest = forward;
  if (gradient) {
    /* QUERY, per key tile: dO . V, S, dq += dS K; KV, per query tile: S, dO . V, dv += P dO and
     * dk += dS Q, each a walk over the tile's queries */
    const double query = key_tiles * (1 + 2 * quads + walk + slack) + slack;
    const double key = query_tiles * (1 + 2 * quads + 2 * walk + slack) + slack;
    longest = query > longest ? query : longest;
    longest = key > longest ? key : longest;
    blocks = heads * (query_tiles > key_tiles ? query_tiles : key_tiles);
  }
  const double loops = (double)vk_grid_rounds((int64_t)blocks, 1) * (longest + 1);
  return loops < 1e18 ? (int64_t)loops : (int64_t)1e18;
}

/* The tiled shaders' dispatches: a workgroup per block of rows, capped at VK_GROUP_LIMIT (the
 * shader walks the rest). */
static tf_status emit_tiled(vk_lower *l, const tiled_variant *v, attention_push *push, bool gradient) {
  const int64_t heads = (int64_t)push->batch * push->heads;
  const int64_t query_blocks = heads * ((push->queries + v->block - 1) / v->block);
  const int64_t key_blocks = heads * ((push->keys + v->block - 1) / v->block);
  if (!gradient) {
    push->mode = ATTENTION_FORWARD;
    int32_t buffers[5] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), -1, vk_out(l, 0)};
    return query_blocks == 0 ? NULL
                             : vk_emit_dispatch(l, v->shader, 5, buffers, 0x10, push, sizeof(*push),
                                                vk_groups(query_blocks, 1), 1, 1);
  }
  int32_t buffers[7] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_in(l, 3), vk_out(l, 0), vk_out(l, 1), vk_out(l, 2)};
  push->keep = 1;
  const struct {
    uint32_t mode, writes;
    int64_t blocks;
  } passes[3] = {
      {ATTENTION_STATS, 0x10, query_blocks}, {ATTENTION_KV, 0x60, key_blocks}, {ATTENTION_QUERY, 0x10, query_blocks}};
  for (int pass = 0; pass < 3; pass++) {
    push->mode = passes[pass].mode;
    if (passes[pass].blocks > 0)
      TF_RETURN_IF_ERROR(vk_emit_dispatch(l, v->shader, 7, buffers, passes[pass].writes, push, sizeof(*push),
                                          vk_groups(passes[pass].blocks, 1), 1, 1));
  }
  return NULL;
}

/* attention.comp's dispatches (the subgroup variant where the device has one). */
static tf_status emit_rows(vk_lower *l, attention_push *push, bool gradient) {
  // The subgroup variant gives a row to a cluster of 8 lanes, each owning every 8th element of it.
  vk_shader shader = vk_variant(l, VK_SHADER_attention);
  bool clusters = shader != VK_SHADER_attention;
  int64_t rows_per_group = clusters ? 8 : 64;
  int64_t elements = clusters ? ((int64_t)push->depth + 7) / 8 : push->depth;
  int64_t query_items = (int64_t)push->batch * push->heads * push->queries;
  int64_t key_items = (int64_t)push->batch * push->heads * push->keys;
  int64_t items = query_items > key_items ? query_items : key_items;
  TF_RETURN_IF_ERROR(vk_check_loops(l, row_loops(push, elements, items, rows_per_group, gradient)));
  if (!gradient) {
    if (query_items == 0)
      return NULL;
    push->mode = ATTENTION_FORWARD;
    int32_t buffers[5] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), -1, vk_out(l, 0)};
    return vk_emit_dispatch(l, shader, 5, buffers, 0x10, push, sizeof(*push), vk_groups(query_items, rows_per_group), 1,
                            1);
  }
  int32_t buffers[7] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_in(l, 3), vk_out(l, 0), vk_out(l, 1), vk_out(l, 2)};
  // Three row statistics kept in dq's rows when they fit: an f32 takes two elements of f16/bf16 data
  // (shaders/common.glsl, STORE_STAT; dq is f32 where only q, k, v are half).
  push->keep = push->depth >= (tf_dtype_size(vk_buffer(l, vk_out(l, 0))->dtype) == 2 ? 6u : 3u);
  if (push->keep) {
    push->mode = ATTENTION_STATS;
    TF_RETURN_IF_ERROR(vk_emit_dispatch(l, shader, 7, buffers, 0x10, push, sizeof(*push),
                                        vk_groups(query_items, rows_per_group), 1, 1));
  }
  push->mode = ATTENTION_KV;
  if (key_items > 0)
    TF_RETURN_IF_ERROR(
        vk_emit_dispatch(l, shader, 7, buffers, 0x60, push, sizeof(*push), vk_groups(key_items, rows_per_group), 1, 1));
  push->mode = ATTENTION_QUERY;
  if (query_items == 0)
    return NULL;
  return vk_emit_dispatch(l, shader, 7, buffers, 0x10, push, sizeof(*push), vk_groups(query_items, rows_per_group), 1,
                          1);
}

tf_status vk_lower_attention(vk_lower *l) {
  const tf_attention_attrs *a = &l->step->attrs.u.attention;
  const tf_plan_buffer *q = vk_buffer(l, vk_in(l, 0)), *k = vk_buffer(l, vk_in(l, 1));
  attention_push push;
  memset(&push, 0, sizeof(push));
  push.batch = (uint32_t)q->shape[0];
  push.queries = (uint32_t)q->shape[1];
  push.keys = (uint32_t)k->shape[1];
  push.width = (uint32_t)q->shape[2];
  push.heads = (uint32_t)a->num_heads;
  push.depth = push.heads ? push.width / push.heads : 0;
  push.scale = a->scale != 0 ? a->scale : 1.0f / sqrtf((float)push.depth);
  push.causal = a->causal;
  if (push.depth > 128)
    return vk_refuse(l, "heads of width %u; the attention shader takes at most 128", push.depth);
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(q), q->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(k), k->name));
  const bool gradient = l->step->op != TF_OP_ATTENTION;
  if (push.depth == 0)
    return NULL;
  // Tiles where the device's shared memory holds them, the kept statistics fit and lavapipe's loop
  // limit allows; else a row per invocation (or cluster), which needs fewer loop iterations per
  // invocation at few rows and at the subgroup variant's 8 lanes a row.
  const tiled_variant *v = push.depth >= TILED_MIN_DEPTH ? tiled_variant_of(l->limits, push.depth) : NULL;
  const bool tiled =
      v && !(l->limits->loop_limit > 0 && tiled_loops(&push, v->block, gradient) > l->limits->loop_limit);
  return tiled ? emit_tiled(l, v, &push, gradient) : emit_rows(l, &push, gradient);
}
