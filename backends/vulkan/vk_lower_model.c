/* The model-layer steps: normalisation (shaders/norm.comp), embedding (shaders/embedding.comp),
 * pooling (shaders/pool.comp), the losses (shaders/loss.comp) and the optimizers
 * (shaders/optimizer.comp). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/ops.h"
#include "core/workspace.h"

typedef struct norm_push {
  uint32_t rows, features;
  float epsilon;
  uint32_t mode, rms, has_beta, keep;
  uint32_t chunk_rows, chunks; /* NORM_PARAM_PARTIALS / _COMBINE */
} norm_push;

typedef struct embedding_push {
  uint32_t count, depth, rows, mode, chunk_rows, chunks, wide_ids;
} embedding_push;

typedef struct pool_push {
  uint32_t planes, height, width, out_height, out_width;
  uint32_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, mode;
} pool_push;

typedef struct loss_push {
  uint32_t count, classes;
  int32_t ignore_low, ignore_high;
  uint32_t mode, wide_labels;
} loss_push;

typedef struct optimizer_push {
  uint32_t count, adamw, has_norm, slot;
  float learning_rate, momentum, weight_decay, decay;
  float beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, clip_norm, grad_scale;
} optimizer_push;

enum { NORM_FORWARD = 0, NORM_STATS, NORM_PARAMS, NORM_INPUT, NORM_PARAM_PARTIALS, NORM_PARAM_COMBINE };
/* norm.comp's PARAMS layout: a workgroup of 64 owns 8 columns, 8 lanes sharing each one's rows. */
enum { NORM_PARAM_COLUMNS = 8, NORM_PARAM_LANES = 8 };

/* dgamma and dbeta: split in chunks of rows where the plan gives the workspace (core/workspace.h),
 * else 8 lanes a column over every row. `buffers` holds the step's six operands. */
static tf_status norm_params(vk_lower *l, norm_push *push, const int32_t *buffers, bool keep) {
  const int64_t chunk_rows = tf_vulkan_column_chunk_rows(push->features, push->rows);
  const int64_t bytes = tf_vulkan_norm_grad_workspace_bytes(push->rows, push->features);
  if (chunk_rows == 0 || !vk_split_columns_on(l, push->features, bytes)) {
    TF_RETURN_IF_ERROR(
        vk_check_loops(l, vk_grid_rounds(push->features, NORM_PARAM_COLUMNS) *
                              ((push->rows + NORM_PARAM_LANES - 1) / NORM_PARAM_LANES + NORM_PARAM_LANES) *
                              (keep ? 1 : 2 * push->features + 1)));
    push->mode = NORM_PARAMS;
    return vk_emit_dispatch(l, vk_variant(l, VK_SHADER_norm), 6, buffers, 0x30, push, sizeof(*push),
                            vk_groups(push->features, NORM_PARAM_COLUMNS), 1, 1);
  }
  const int64_t chunks = tf_vulkan_column_chunks(push->rows, chunk_rows);
  push->chunk_rows = (uint32_t)chunk_rows;
  push->chunks = (uint32_t)chunks;
  const int32_t split[7] = {buffers[0], buffers[1], buffers[2], buffers[3], buffers[4], buffers[5], l->step->workspace};
  TF_RETURN_IF_ERROR(vk_check_loops(l, (chunk_rows + 1) * (keep ? 1 : 2 * push->features + 1)));
  push->mode = NORM_PARAM_PARTIALS;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_norm_split, 7, split, 0x40, push, sizeof(*push),
                                      vk_groups(push->features, TF_VULKAN_SPLIT_COLUMNS), (uint32_t)chunks, 1));
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds(push->features, 64) * (chunks + 1)));
  push->mode = NORM_PARAM_COMBINE;
  return vk_emit_dispatch(l, VK_SHADER_norm_split, 7, split, 0x30, push, sizeof(*push), vk_groups(push->features, 64),
                          1, 1);
}

tf_status vk_lower_norm(vk_lower *l) {
  tf_op op = l->step->op;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0));
  bool rms = op == TF_OP_RMS_NORM || op == TF_OP_RMS_NORM_GRAD;
  int64_t features = x->shape[x->rank - 1], count = vk_count(x);
  if (features == 0)
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, x->name));
  norm_push push = {.rows = (uint32_t)(count / features),
                    .features = (uint32_t)features,
                    .epsilon = l->step->attrs.u.norm.epsilon,
                    .mode = NORM_FORWARD,
                    .rms = rms,
                    .has_beta = 0,
                    .keep = 0};
  uint32_t row_groups = vk_groups(push.rows, 1);
  // A workgroup walks its rows a 64th at a time, a few times; the parameter pass walks every row
  // per column (and re-derives short rows' statistics).
  int64_t rounds = vk_grid_rounds(push.rows, 1), walk = (features + 63) / 64;
  TF_RETURN_IF_ERROR(vk_check_loops(l, rounds * (4 * walk + 12)));
  // The gradient keeps its row statistics in dx's rows when they fit: 1 (rms) or 2 f32s, an f32
  // taking two elements of f16/bf16 data (shaders/common.glsl, STORE_STAT).
  const int64_t stat_elements = tf_dtype_size(vk_buffer(l, vk_out(l, 0))->dtype) == 2 ? 2 : 1;
  const bool keep = features >= (rms ? 1 : 2) * stat_elements;
  if (op == TF_OP_LAYER_NORM || op == TF_OP_RMS_NORM) {
    push.has_beta = !rms && l->step->n_inputs > 2;
    int32_t buffers[4] = {vk_in(l, 0), vk_in(l, 1), push.has_beta ? vk_in(l, 2) : -1, vk_out(l, 0)};
    return count ? vk_emit_dispatch(l, vk_variant(l, VK_SHADER_norm), 4, buffers, 0x8, &push, sizeof(push), row_groups,
                                    1, 1)
                 : NULL;
  }
  // (x, gamma, dy) -> (dx, dgamma [, dbeta]): statistics kept in dx rows long enough (above).
  push.has_beta = !rms;
  push.keep = keep;
  int32_t buffers[6] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_out(l, 0), vk_out(l, 1), rms ? -1 : vk_out(l, 2)};
  if (push.keep && count) {
    push.mode = NORM_STATS;
    TF_RETURN_IF_ERROR(
        vk_emit_dispatch(l, vk_variant(l, VK_SHADER_norm), 6, buffers, 0x8, &push, sizeof(push), row_groups, 1, 1));
  }
  TF_RETURN_IF_ERROR(norm_params(l, &push, buffers, keep));
  push.mode = NORM_INPUT;
  return count ? vk_emit_dispatch(l, vk_variant(l, VK_SHADER_norm), 6, buffers, 0x8, &push, sizeof(push), row_groups, 1,
                                  1)
               : NULL;
}

enum { EMBEDDING_LINK = 3, EMBEDDING_CHAINS, EMBEDDING_ZERO };

/* embedding_grad on f16/bf16 data (the half variants of shaders/embedding.comp, modes 3 to 5):
 * dtable zeroed, the ids' positions linked in the workspace, each first position's chain of dy rows
 * summed in f32 and rounded once into its row. */
static tf_status lower_embedding_grad_half(vk_lower *l, embedding_push *push) {
  const tf_plan_step *step = l->step;
  const int64_t needed = tf_vulkan_embedding_grad_half_workspace_bytes(push->count);
  const int64_t given = step->workspace >= 0 ? vk_buffer(l, step->workspace)->bytes : 0;
  if (given < needed)
    return vk_refuse(
        l,
        "on %s data its Vulkan shader needs %lld workspace bytes and the plan gives it %lld: the plan file "
        "does not match what the compiler plans for the vulkan target; compile it for 'vulkan' again",
        tf_dtype_name(vk_buffer(l, vk_out(l, 0))->dtype), (long long)needed, (long long)given);
  TF_RETURN_IF_ERROR(vk_check_count(l, 2 * (int64_t)push->count, "the workspace"));
  TF_RETURN_IF_ERROR(vk_check_count(l, (int64_t)push->count * push->depth, "the gradient's tasks"));
  // Linking walks the ids both ways from each position; a chain is at most every position.
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds(push->count, 256) * push->count));
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds((int64_t)push->count * push->depth, 256) * push->count));
  const int32_t buffers[4] = {vk_in(l, 0), vk_in(l, 1), vk_out(l, 0), step->workspace};
  push->mode = EMBEDDING_ZERO;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_embedding, 4, buffers, 0x4, push, sizeof(*push),
                                      vk_groups((int64_t)push->rows * push->depth, 256), 1, 1));
  if (push->count == 0)
    return NULL;
  push->mode = EMBEDDING_LINK;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_embedding, 4, buffers, 0x8, push, sizeof(*push),
                                      vk_groups(push->count, 256), 1, 1));
  push->mode = EMBEDDING_CHAINS;
  return vk_emit_dispatch(l, VK_SHADER_embedding, 4, buffers, 0x4, push, sizeof(*push),
                          vk_groups((int64_t)push->count * push->depth, 256), 1, 1);
}

tf_status vk_lower_embedding(vk_lower *l) {
  /* embedding_grad_accumulate adds to its input 2 in place: the gradient without the zeroing */
  bool accumulate = l->step->op == TF_OP_EMBEDDING_GRAD_ACCUMULATE;
  bool gradient = l->step->op == TF_OP_EMBEDDING_GRAD || accumulate;
  int32_t out_id = accumulate ? vk_in(l, 2) : vk_out(l, 0);
  const tf_plan_buffer *ids = vk_buffer(l, vk_in(l, 0)), *out = vk_buffer(l, out_id);
  const tf_plan_buffer *table = gradient ? out : vk_buffer(l, vk_in(l, 1));
  if (ids->dtype != TF_I32 && ids->dtype != TF_I64)
    return vk_refuse(l, "ids '%s' are %s; the Vulkan shaders take i32 and i64 ids", ids->name,
                     tf_dtype_name(ids->dtype));
  embedding_push push = {.count = (uint32_t)vk_count(ids),
                         .depth = (uint32_t)table->shape[1],
                         .rows = (uint32_t)table->shape[0],
                         .mode = accumulate ? 2 : gradient,
                         .chunk_rows = 0,
                         .chunks = 0,
                         .wide_ids = ids->dtype == TF_I64};
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(out), out->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(table), table->name));
  if (vk_count(out) == 0)
    return NULL;
  int32_t buffers[3] = {vk_in(l, 0), vk_in(l, 1), out_id};
  if (!gradient)
    return vk_emit_dispatch(l, VK_SHADER_embedding, 3, buffers, 0x4, &push, sizeof(push),
                            vk_groups((int64_t)push.count * push.depth, 256), 1, 1);
  if (out->dtype == TF_F16 || out->dtype == TF_BF16)
    return lower_embedding_grad_half(l, &push);
  // Invocations own (chunk of table rows, column): about 16384 of them, each walking every id.
  int64_t chunks = (16384 + push.depth - 1) / push.depth;
  chunks = chunks < 1 ? 1 : chunks > push.rows ? push.rows : chunks;
  push.chunk_rows = (uint32_t)((push.rows + chunks - 1) / chunks);
  push.chunks = (push.rows + push.chunk_rows - 1) / push.chunk_rows;
  // Each gradient task clears its chunk of rows, then reads every id.
  TF_RETURN_IF_ERROR(
      vk_check_loops(l, vk_grid_rounds((int64_t)push.chunks * push.depth, 256) * (push.chunk_rows + push.count)));
  return vk_emit_dispatch(l, VK_SHADER_embedding, 3, buffers, 0x4, &push, sizeof(push),
                          vk_groups((int64_t)push.chunks * push.depth, 256), 1, 1);
}

enum { POOL_MAX = 0, POOL_AVG, POOL_MAX_GRAD, POOL_AVG_GRAD };

tf_status vk_lower_pool(vk_lower *l) {
  tf_op op = l->step->op;
  // image: x (forward, max grad) or dx (avg grad); pooled: y or dy.
  const tf_plan_buffer *image = vk_buffer(l, op == TF_OP_AVG_POOL2D_GRAD ? vk_out(l, 0) : vk_in(l, 0));
  const tf_plan_buffer *pooled = vk_buffer(l, op == TF_OP_MAX_POOL2D || op == TF_OP_AVG_POOL2D ? vk_out(l, 0)
                                              : op == TF_OP_MAX_POOL2D_GRAD                    ? vk_in(l, 1)
                                                                                               : vk_in(l, 0));
  const tf_pool_attrs *a = &l->step->attrs.u.pool;
  pool_push push = {.planes = (uint32_t)(image->shape[0] * image->shape[1]),
                    .height = (uint32_t)image->shape[2],
                    .width = (uint32_t)image->shape[3],
                    .out_height = (uint32_t)pooled->shape[2],
                    .out_width = (uint32_t)pooled->shape[3],
                    .kernel_h = (uint32_t)a->kernel[0],
                    .kernel_w = (uint32_t)a->kernel[1],
                    .stride_h = (uint32_t)a->stride[0],
                    .stride_w = (uint32_t)a->stride[1],
                    .pad_h = (uint32_t)a->padding[0],
                    .pad_w = (uint32_t)a->padding[1],
                    .mode = op == TF_OP_MAX_POOL2D        ? POOL_MAX
                            : op == TF_OP_AVG_POOL2D      ? POOL_AVG
                            : op == TF_OP_MAX_POOL2D_GRAD ? POOL_MAX_GRAD
                                                          : POOL_AVG_GRAD};
  const tf_plan_buffer *out = vk_buffer(l, vk_out(l, 0));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(image), image->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(pooled), pooled->name));
  if (vk_count(out) == 0)
    return NULL;
  if (op == TF_OP_MAX_POOL2D && (push.height == 0 || push.width == 0))
    return vk_emit_fill(l, vk_out(l, 0)); // windows of padding only: no element to take
  int32_t buffers[3] = {vk_in(l, 0), op == TF_OP_MAX_POOL2D_GRAD ? vk_in(l, 1) : -1, vk_out(l, 0)};
  return vk_emit_dispatch(l, VK_SHADER_pool, 3, buffers, 0x4, &push, sizeof(push), vk_groups(vk_count(out), 256), 1, 1);
}

enum { LOSS_CE = 0, LOSS_CE_GRAD, LOSS_MSE, LOSS_MSE_GRAD, LOSS_BCE, LOSS_BCE_GRAD };

/* Rows per workgroup of cross_entropy_grad in loss.comp's subgroup variant: 256 invocations in
 * clusters of 8 lanes, a cluster per row. */
#define LOSS_ROWS_PER_GROUP 32

/* A loss is one workgroup (its tree sum is deterministic). A gradient gives each invocation an
 * element, cross_entropy_grad a row: per invocation, or per cluster of 8 lanes in the subgroup
 * variant. */
static uint32_t loss_groups(const vk_lower *l, const loss_push *push, bool gradient) {
  if (!gradient)
    return 1;
  if (push->mode == LOSS_CE_GRAD && l->limits->subgroup_size)
    return vk_groups(push->count, LOSS_ROWS_PER_GROUP);
  return vk_groups(push->count, 256);
}

/* Loop iterations per invocation, from above: a loss walks a 256th of the elements, or of the
 * rows (a 32nd with clusters) three times over the classes (an eighth of them with clusters); a
 * gradient counts the labels (a 256th of the rows), then walks its rows' classes. */
static int64_t loss_loops(const vk_lower *l, const loss_push *push, bool gradient, int64_t count) {
  bool clusters = l->limits->subgroup_size != 0;
  int64_t walk = clusters ? (push->classes + 7) / 8 : push->classes;
  if (push->mode == LOSS_CE)
    return ((push->count + (clusters ? 31 : 255)) / (clusters ? 32 : 256)) * (3 * walk + 1) + 8;
  if (push->mode == LOSS_CE_GRAD)
    return (push->count + 255) / 256 +
           vk_grid_rounds(push->count, clusters ? LOSS_ROWS_PER_GROUP : 256) * (3 * walk + 1);
  return gradient ? vk_grid_rounds(count, 256) : (count + 255) / 256 + 8;
}

/* The loss shader of step l->step: on f32 data loss.comp (its subgroup variant where the device has
 * one); on f16/bf16 x its LOSS_HALF variants, which read x and the target and write the gradient in
 * that type and take an f32 dloss and loss (the shape rules' types), refused otherwise. */
static tf_status loss_shader(const vk_lower *l, bool gradient, vk_shader *shader) {
  *shader = vk_variant(l, VK_SHADER_loss);
  const tf_dtype half = vk_buffer(l, vk_in(l, 0))->dtype;
  if (half != TF_F16 && half != TF_BF16)
    return NULL;
  const bool f16 = half == TF_F16;
  const bool cross_entropy = l->step->op == TF_OP_CROSS_ENTROPY || l->step->op == TF_OP_CROSS_ENTROPY_GRAD;
  for (int32_t k = 0; k < l->step->n_inputs + l->step->n_outputs; k++) {
    const bool input = k < l->step->n_inputs;
    const tf_plan_buffer *b = vk_buffer(l, input ? vk_in(l, k) : vk_out(l, k - l->step->n_inputs));
    const bool labels = input && k == 1 && cross_entropy, scalar = input ? k == 2 : !gradient;
    if (!labels && b->dtype != (scalar ? TF_F32 : half))
      return vk_refuse(l,
                       "buffer '%s' is %s beside %s x; a loss on half data takes its target and gradient in x's type, "
                       "its loss and dloss in f32",
                       b->name, tf_dtype_name(b->dtype), tf_dtype_name(half));
  }
  if (*shader == VK_SHADER_loss_sg)
    *shader = f16 ? VK_SHADER_loss_sg_half_f16 : VK_SHADER_loss_sg_half_bf16;
  else
    *shader = f16 ? VK_SHADER_loss_half_f16 : VK_SHADER_loss_half_bf16;
  return NULL;
}

tf_status vk_lower_loss(vk_lower *l) {
  tf_op op = l->step->op;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0));
  bool cross_entropy = op == TF_OP_CROSS_ENTROPY || op == TF_OP_CROSS_ENTROPY_GRAD;
  bool gradient = op == TF_OP_CROSS_ENTROPY_GRAD || op == TF_OP_MSE_GRAD || op == TF_OP_BCE_WITH_LOGITS_GRAD;
  int64_t count = vk_count(x), classes = cross_entropy ? x->shape[x->rank - 1] : 1;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, x->name));
  int64_t ignore = cross_entropy ? l->step->attrs.u.cross_entropy.ignore_index : 0;
  loss_push push = {.count = (uint32_t)(classes > 0 ? count / classes : 0),
                    .classes = (uint32_t)classes,
                    .ignore_low = (int32_t)(uint32_t)ignore,
                    .ignore_high = (int32_t)(uint32_t)((uint64_t)ignore >> 32),
                    .mode = 0,
                    .wide_labels = cross_entropy && vk_buffer(l, vk_in(l, 1))->dtype == TF_I64};
  switch (op) {
  case TF_OP_CROSS_ENTROPY: push.mode = LOSS_CE; break;
  case TF_OP_CROSS_ENTROPY_GRAD: push.mode = LOSS_CE_GRAD; break;
  case TF_OP_MSE: push.mode = LOSS_MSE; break;
  case TF_OP_MSE_GRAD: push.mode = LOSS_MSE_GRAD; break;
  case TF_OP_BCE_WITH_LOGITS: push.mode = LOSS_BCE; break;
  default: push.mode = LOSS_BCE_GRAD; break;
  }
  int32_t buffers[5] = {vk_in(l, 0), cross_entropy ? -1 : vk_in(l, 1), gradient ? vk_in(l, 2) : -1, vk_out(l, 0),
                        cross_entropy ? vk_in(l, 1) : -1};
  if (gradient && count == 0)
    return NULL;
  vk_shader shader;
  TF_RETURN_IF_ERROR(loss_shader(l, gradient, &shader));
  uint32_t groups = loss_groups(l, &push, gradient);
  TF_RETURN_IF_ERROR(vk_check_loops(l, loss_loops(l, &push, gradient, count)));
  return vk_emit_dispatch(l, shader, 5, buffers, 0x8, &push, sizeof(push), groups, 1, 1);
}

/* The run-state slot carrying AdamW's corrections for (lr, beta1, beta2); -1 when all are taken. */
static int32_t adam_slot(vk_program *program, const tf_optimizer_attrs *a) {
  for (int32_t s = 0; s < program->n_adam_slots; s++) {
    const float *key = program->adam_key[s];
    if (key[0] == a->learning_rate && key[1] == a->beta1 && key[2] == a->beta2)
      return s;
  }
  if (program->n_adam_slots == VK_ADAM_SLOTS)
    return -1;
  float *key = program->adam_key[program->n_adam_slots];
  key[0] = a->learning_rate;
  key[1] = a->beta1;
  key[2] = a->beta2;
  return program->n_adam_slots++;
}

tf_status vk_lower_optimizer(vk_lower *l) {
  const tf_optimizer_attrs *a = &l->step->attrs.u.optimizer;
  bool adamw = l->step->op == TF_OP_ADAMW;
  int32_t states = adamw ? 4 : 3;
  const tf_plan_buffer *param = vk_buffer(l, vk_in(l, 0));
  int64_t count = vk_count(param);
  TF_RETURN_IF_ERROR(vk_check_count(l, count, param->name));
  optimizer_push push;
  memset(&push, 0, sizeof(push));
  push.count = (uint32_t)count;
  push.adamw = adamw;
  push.has_norm = l->step->n_inputs > states;
  if (adamw) {
    int32_t slot = adam_slot(l->program, a);
    if (slot < 0)
      return vk_refuse(l, "more than %d distinct (learning rate, beta1, beta2) AdamW settings", VK_ADAM_SLOTS);
    push.slot = (uint32_t)slot;
  }
  double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
  push.learning_rate = a->learning_rate;
  push.momentum = a->momentum;
  push.weight_decay = a->weight_decay;
  push.decay = (float)(1.0 - lr * (double)a->weight_decay);
  push.beta1 = a->beta1;
  push.beta2 = a->beta2;
  push.one_minus_beta1 = (float)(1.0 - beta1);
  push.one_minus_beta2 = (float)(1.0 - beta2);
  push.epsilon = a->epsilon;
  push.clip_norm = a->clip_norm;
  push.grad_scale = a->grad_scale;
  if (count == 0)
    return NULL;
  int32_t buffers[5] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), adamw ? vk_in(l, 3) : -1,
                        push.has_norm ? vk_in(l, states) : -1};
  return vk_emit_dispatch(l, VK_SHADER_optimizer, 5, buffers, adamw ? 0xdu : 0x5u, &push, sizeof(push),
                          vk_groups(count, 256), 1, 1);
}

typedef struct adamw8bit_push {
  uint32_t count, blocks, has_norm, slot;
  float decay, beta1, beta2, one_minus_beta1, one_minus_beta2, epsilon, clip_norm, grad_scale;
} adamw8bit_push;

/* adamw8bit (param, grad, m_codes, m_scales, v_codes, v_scales [, norm_sq]): shaders/adamw8bit.comp,
 * one workgroup per block of TF_ADAMW8BIT_BLOCK elements; the step's scalars as vk_lower_optimizer's. */
tf_status vk_lower_adamw8bit(vk_lower *l) {
  const tf_optimizer_attrs *a = &l->step->attrs.u.optimizer;
  const tf_plan_buffer *param = vk_buffer(l, vk_in(l, 0));
  const int64_t count = vk_count(param);
  TF_RETURN_IF_ERROR(vk_check_count(l, count, param->name));
  const int32_t slot = adam_slot(l->program, a);
  if (slot < 0)
    return vk_refuse(l, "more than %d distinct (learning rate, beta1, beta2) AdamW settings", VK_ADAM_SLOTS);
  const double lr = (double)a->learning_rate, beta1 = (double)a->beta1, beta2 = (double)a->beta2;
  const adamw8bit_push push = {
      .count = (uint32_t)count,
      .blocks = (uint32_t)tf_adamw8bit_blocks(count),
      .has_norm = l->step->n_inputs > 6,
      .slot = (uint32_t)slot,
      .decay = (float)(1.0 - lr * (double)a->weight_decay),
      .beta1 = a->beta1,
      .beta2 = a->beta2,
      .one_minus_beta1 = (float)(1.0 - beta1),
      .one_minus_beta2 = (float)(1.0 - beta2),
      .epsilon = a->epsilon,
      .clip_norm = a->clip_norm,
      .grad_scale = a->grad_scale,
  };
  if (count == 0)
    return NULL;
  int32_t buffers[7] = {
      vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_in(l, 3), vk_in(l, 4), vk_in(l, 5), push.has_norm ? vk_in(l, 6) : -1};
  return vk_emit_dispatch(l, VK_SHADER_adamw8bit, 7, buffers, 0x3du, &push, sizeof(push), vk_groups(push.blocks, 1), 1,
                          1);
}
