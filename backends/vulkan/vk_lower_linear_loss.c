/* The fused loss head: linear_cross_entropy and its gradient forms, chunk_rows rows at a time as on
 * the CPU and CUDA (kernels/cpu/linear_loss.c): per chunk, the logits as one GEMM into the step's
 * workspace (shaders/matmul.comp on row blocks), the row pass (shaders/linear_loss.comp: log sum
 * exp, loss terms, dlogits in place), then dx (a GEMM into the chunk's rows of dx, or one a slice
 * of the classes into the workspace and a pass summing them: tf_linear_loss_vulkan_dx_slices),
 * dweight (a GEMM summed over the chunks) and dbias. The loss is summed once, after the last chunk,
 * from every row's term. The workspace is core/linear_loss.h's tf_linear_loss_vulkan_workspace_words.
 * A head with no features is refused (its logits would be the bias alone; no model has one). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/linear_loss.h"

enum { MODE_COUNT = 0, MODE_ROWS, MODE_DBIAS, MODE_LOSS, MODE_DX_SUM };

typedef struct linear_loss_push {
  uint32_t rows, classes;
  int32_t ignore_low, ignore_high;
  uint32_t mode, first, chunk, terms_at, count_at, has_bias, want_loss, want_grad, add, wide_labels;
  uint32_t features, slices, partials_at;
} linear_loss_push;

typedef struct head {
  vk_loss_head io;
  linear_loss_push push;
  int64_t slices; /* the dx product's slices of the classes (1: one product straight into dx) */
} head;

/* Bindings: labels, dloss, workspace, bias, loss, dbias or dx (DX_SUM) (-1: the dummy). */
static tf_status shader(vk_lower *l, const head *h, uint32_t mode, uint32_t groups, int64_t loops) {
  linear_loss_push push = h->push;
  push.mode = mode;
  const int32_t buffers[6] = {h->io.labels,
                              h->io.dloss,
                              h->io.work,
                              h->io.bias,
                              mode == MODE_LOSS ? h->io.loss : -1,
                              mode == MODE_DBIAS    ? h->io.dbias
                              : mode == MODE_DX_SUM ? h->io.dx
                                                    : -1};
  const uint32_t writes = mode == MODE_LOSS ? 0x10 : mode == MODE_DBIAS || mode == MODE_DX_SUM ? 0x20 : 0x4;
  TF_RETURN_IF_ERROR(vk_check_loops(l, loops));
  return vk_emit_dispatch(l, VK_SHADER_linear_loss, 6, buffers, writes, &push, sizeof(push), groups, 1, 1);
}

/* logits[0 .. rows) of the workspace = x[first ..] weightᵀ (or x weight); the bias is the row pass's. */
static tf_status chunk_logits(vk_lower *l, const vk_loss_head *h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->g;
  vk_gemm p = {.a = h->x,
               .b = h->weight,
               .c = h->work,
               .a_offset = first * g->features,
               .lda = g->features,
               .ldb = g->transpose_weight ? g->features : g->classes,
               .m = rows,
               .n = g->classes,
               .k = g->features,
               .tb = g->transpose_weight};
  return vk_emit_gemm(l, &p);
}

/* dx[first ..] = dlogits weight (or dlogits weightᵀ) over `slices` x `width` classes from `from`:
 * with one slice into dx's rows; with more, slice z into the workspace's partial product z. */
static tf_status dx_product(vk_lower *l, const vk_loss_head *h, int64_t first, int64_t rows, int64_t from,
                            int64_t width, int64_t slices) {
  const tf_linear_loss_geometry *g = &h->g;
  vk_gemm p = {.a = h->work,
               .b = h->weight,
               .c = slices > 1 ? h->work : h->dx,
               .a_offset = from,
               .b_offset = g->transpose_weight ? from * g->features : from,
               .c_offset = slices > 1 ? tf_linear_loss_vulkan_partials_at(g) : first * g->features,
               .lda = g->classes,
               .ldb = g->transpose_weight ? g->features : g->classes,
               .m = rows,
               .n = g->features,
               .k = width,
               .tb = !g->transpose_weight,
               .batches = slices,
               .a_batch_stride = width,
               .b_batch_stride = g->transpose_weight ? width * g->features : width};
  return vk_emit_gemm(l, &p);
}

/* The chunk's dx: one product; or, in slices (tf_linear_loss_vulkan_dx_slices), the classes left over
 * straight into dx, the slices in one batched product, and the pass adding them to dx in order. */
static tf_status chunk_dx(vk_lower *l, head *h, int64_t first, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->io.g;
  if (h->slices <= 1)
    return dx_product(l, &h->io, first, rows, 0, g->classes, 1);
  const int64_t width = g->classes / h->slices, rest = g->classes - h->slices * width;
  if (rest > 0)
    TF_RETURN_IF_ERROR(dx_product(l, &h->io, first, rows, h->slices * width, rest, 1));
  TF_RETURN_IF_ERROR(dx_product(l, &h->io, first, rows, 0, width, h->slices));
  const int64_t count = rows * g->features;
  h->push.add = rest > 0;
  h->push.slices = (uint32_t)h->slices;
  const tf_status status =
      shader(l, h, MODE_DX_SUM, vk_groups(count, 256), vk_grid_rounds(count, 256) * (h->slices + 2));
  h->push.add = 0;
  return status;
}

/* dweight (+)= dlogitsᵀ x[first ..] ([V, d]) or x[first ..]ᵀ dlogits ([d, V]). */
static tf_status chunk_dweight(vk_lower *l, const vk_loss_head *h, int64_t first, int64_t rows, bool add) {
  const tf_linear_loss_geometry *g = &h->g;
  vk_gemm p = {.c = h->dweight, .k = rows, .ta = true, .accumulate = add};
  if (g->transpose_weight) {
    p.a = h->work, p.lda = g->classes, p.b = h->x, p.b_offset = first * g->features, p.ldb = g->features;
    p.m = g->classes, p.n = g->features;
  } else {
    p.a = h->x, p.a_offset = first * g->features, p.lda = g->features, p.b = h->work, p.ldb = g->classes;
    p.m = g->features, p.n = g->classes;
  }
  return vk_emit_gemm(l, &p);
}

tf_status vk_loss_head_of(vk_lower *l, vk_loss_head *h) {
  const tf_plan_step *step = l->step;
  memset(h, 0, sizeof(*h));
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0)), *weight = vk_buffer(l, vk_in(l, 1));
  const tf_plan_buffer *labels = vk_buffer(l, vk_in(l, 2));
  if (labels->dtype != TF_I32 && labels->dtype != TF_I64)
    return vk_refuse(l, "labels '%s' are %s; the vulkan backend reads i32 and i64 labels", labels->name,
                     tf_dtype_name(labels->dtype));
  tf_tensor_ref xr = tf_tensor_ref_make(NULL, x->dtype, x->rank, x->shape);
  tf_tensor_ref wr = tf_tensor_ref_make(NULL, weight->dtype, weight->rank, weight->shape);
  h->g = tf_linear_loss_geometry_of(&step->attrs, &xr, &wr);
  const bool forward = step->op == TF_OP_LINEAR_CROSS_ENTROPY;
  const int32_t bias = tf_linear_loss_bias_input(step->op, step->n_inputs);
  h->x = vk_in(l, 0), h->weight = vk_in(l, 1), h->labels = vk_in(l, 2);
  h->dloss = forward ? -1 : vk_in(l, 3);
  h->bias = bias >= 0 ? vk_in(l, bias) : -1;
  h->work = step->workspace;
  h->accumulate = tf_linear_loss_accumulates(step->op);
  h->loss = forward || tf_linear_loss_is_train(step->op) ? vk_out(l, 0) : -1;
  if (!forward) {
    const int32_t dx = tf_linear_loss_dx_output(step->op), sum = tf_linear_loss_dweight_input(step->op, step->n_inputs);
    h->dx = vk_out(l, dx);
    h->dweight = h->accumulate ? vk_in(l, sum) : vk_out(l, dx + 1);
    h->dbias = bias < 0 ? -1 : h->accumulate ? vk_in(l, sum + 1) : vk_out(l, dx + 2);
  } else {
    h->dx = h->dweight = h->dbias = -1;
  }
  return NULL;
}

/* The head of step l->step: its buffers, geometry and push constants; refuses what it cannot run. */
static tf_status head_of(vk_lower *l, head *h) {
  TF_RETURN_IF_ERROR(vk_loss_head_of(l, &h->io));
  const vk_loss_head *io = &h->io;
  h->slices = io->dx >= 0 && l->limits->split_dx ? tf_linear_loss_vulkan_dx_slices(&io->g) : 1;
  /* a plan compiled before the slices (its workspace ends at the count) runs dx as one product */
  if (h->slices > 1 && vk_workspace_bytes(l) < 4 * tf_linear_loss_vulkan_workspace_words(&io->g, true))
    h->slices = 1;
  const int64_t needed = 4 * tf_linear_loss_vulkan_workspace_words(&io->g, h->slices > 1);
  TF_RETURN_IF_ERROR(vk_check_workspace(l, needed));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(vk_buffer(l, io->x)), vk_buffer(l, io->x)->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(vk_buffer(l, io->weight)), vk_buffer(l, io->weight)->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, needed / 4, "the workspace"));
  const int64_t ignore = l->step->attrs.u.cross_entropy.ignore_index;
  h->push = (linear_loss_push){.rows = (uint32_t)io->g.rows,
                               .classes = (uint32_t)io->g.classes,
                               .ignore_low = (int32_t)(uint32_t)ignore,
                               .ignore_high = (int32_t)(uint32_t)((uint64_t)ignore >> 32),
                               .terms_at = (uint32_t)tf_linear_loss_vulkan_terms_at(&io->g),
                               .count_at = (uint32_t)tf_linear_loss_vulkan_count_at(&io->g),
                               .has_bias = io->bias >= 0,
                               .want_loss = io->loss >= 0,
                               .want_grad = io->dx >= 0,
                               .wide_labels = vk_buffer(l, io->labels)->dtype == TF_I64,
                               .features = (uint32_t)io->g.features,
                               .partials_at = (uint32_t)tf_linear_loss_vulkan_partials_at(&io->g)};
  return NULL;
}

/* A step whose head has no rows: the loss is 0 (no label counts), dx is empty, dweight and dbias 0
 * (nothing to add when accumulating). Fills only: a dispatch would bind the empty labels. */
static tf_status no_rows(vk_lower *l, const vk_loss_head *h) {
  if (h->loss >= 0)
    TF_RETURN_IF_ERROR(vk_emit_fill(l, h->loss));
  if (h->dx < 0 || h->accumulate)
    return NULL;
  TF_RETURN_IF_ERROR(vk_emit_fill(l, h->dweight));
  return h->dbias >= 0 ? vk_emit_fill(l, h->dbias) : NULL;
}

tf_status vk_lower_linear_cross_entropy(vk_lower *l) {
  const tf_dtype x = vk_buffer(l, vk_in(l, 0))->dtype;
  if (x == TF_F16 || x == TF_BF16)
    return vk_lower_linear_cross_entropy_half(l);
  head h;
  TF_RETURN_IF_ERROR(head_of(l, &h));
  const tf_linear_loss_geometry *g = &h.io.g;
  if (g->rows == 0)
    return no_rows(l, &h.io);
  if (g->features == 0) /* the logits GEMM would bind the empty x */
    return vk_refuse(l, "x '%s' has no features; the vulkan backend needs d >= 1 for a fused loss head",
                     vk_buffer(l, h.io.x)->name);
  TF_RETURN_IF_ERROR(shader(l, &h, MODE_COUNT, 1, (g->rows + 255) / 256 + 16));
  const int64_t row_loops = 3 * ((g->classes + 255) / 256) + 32;
  for (int64_t first = 0; first < g->rows; first += g->chunk_rows) {
    const int64_t rows = g->rows - first < g->chunk_rows ? g->rows - first : g->chunk_rows;
    h.push.first = (uint32_t)first;
    h.push.chunk = (uint32_t)rows;
    TF_RETURN_IF_ERROR(chunk_logits(l, &h.io, first, rows));
    const uint32_t groups = vk_groups(rows, 1);
    TF_RETURN_IF_ERROR(shader(l, &h, MODE_ROWS, groups, vk_grid_rounds(rows, 1) * row_loops));
    if (h.io.dx < 0)
      continue;
    const bool add = first > 0 || h.io.accumulate;
    TF_RETURN_IF_ERROR(chunk_dx(l, &h, first, rows));
    TF_RETURN_IF_ERROR(chunk_dweight(l, &h.io, first, rows, add));
    if (h.io.dbias >= 0) {
      h.push.add = add;
      TF_RETURN_IF_ERROR(
          shader(l, &h, MODE_DBIAS, vk_groups(g->classes, 256), vk_grid_rounds(g->classes, 256) * (rows + 2)));
      h.push.add = 0;
    }
  }
  if (h.io.loss >= 0)
    TF_RETURN_IF_ERROR(shader(l, &h, MODE_LOSS, 1, (g->rows + 255) / 256 + 16));
  return NULL;
}
