/* The fused loss head on f16/bf16 data (linear_cross_entropy and its gradient and single-pass forms
 * without accumulators; the Vulkan target's half kernels, targets/target.c): x, the weight (and the
 * bias) and dx, dweight (and dbias) in one half type, labels, an f32 loss and dloss.
 *
 * The f32 lowering (vk_lower_linear_loss.c) walks row chunks outside and every class inside: on half
 * data it would need an f32 copy of the whole weight and an f32 dweight (147 MiB each for GPT-2's
 * tied head). This one walks the classes in spans outside and the row chunks inside, as the CPU's
 * half kernel (kernels/cpu/linear_loss_half.c): pass 1 keeps each row's running max, sum of
 * exponentials and label logit over the spans (shaders/linear_loss_half.comp, STATS); the loss is
 * their mean (LOSS); pass 2 computes each chunk's logits of a span again, turns them into dlogits
 * (GRAD), sums dx over the spans and dweight (and dbias) over the chunks in the workspace in f32,
 * and rounds each span of dweight once into its half output and dx once at the end (NARROW). The
 * products are matmul.comp's f32 GEMMs on the workspace's widened span of the weight and chunk of x
 * (WIDEN). Workspace: core/linear_loss.h, tf_linear_loss_vulkan_half_workspace_of. */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/linear_loss.h"

enum { MODE_COUNT = 0, MODE_WIDEN, MODE_NARROW, MODE_STATS, MODE_GRAD, MODE_DBIAS, MODE_LOSS };

typedef struct half_push {
  uint32_t rows, classes;
  int32_t ignore_low, ignore_high;
  uint32_t wide_labels, mode, first, chunk, first_class, span, has_bias, add;
  uint32_t statistics_at, logits_at, dbias_at, count_at;
  uint32_t copy_rows, copy_cols, source_offset, source_stride, dest_offset, dest_stride;
} half_push;

typedef struct head {
  vk_loss_head io; /* no accumulators: head_of refuses them */
  tf_linear_loss_vulkan_half_workspace at;
  vk_shader shader; /* linear_loss_half_f16 or _bf16 */
  half_push push;
} head;

/* Bindings: labels, dloss, workspace, source, loss, destination (-1: the dummy). */
static tf_status dispatch(vk_lower *l, const head *h, const half_push *push, int32_t source, int32_t dest,
                          uint32_t groups, int64_t loops) {
  const int32_t buffers[6] = {h->io.labels, h->io.dloss, h->io.work, source, push->mode == MODE_LOSS ? h->io.loss : -1,
                              dest};
  const uint32_t writes = push->mode == MODE_LOSS ? 0x10 : push->mode == MODE_NARROW ? 0x20 : 0x4;
  TF_RETURN_IF_ERROR(vk_check_loops(l, loops));
  return vk_emit_dispatch(l, h->shader, 6, buffers, writes, push, sizeof(*push), groups, 1, 1);
}

/* A one-workgroup mode (COUNT, LOSS) or a row mode (STATS, GRAD: a workgroup per row of the chunk). */
static tf_status rows_mode(vk_lower *l, const head *h, uint32_t mode) {
  half_push push = h->push;
  push.mode = mode;
  if (mode == MODE_COUNT || mode == MODE_LOSS)
    return dispatch(l, h, &push, -1, -1, 1, (h->io.g.rows + 255) / 256 + 16);
  const int64_t loops = vk_grid_rounds(push.chunk, 1) * (3 * ((push.span + 255) / 256) + 32);
  return dispatch(l, h, &push, h->io.bias, -1, vk_groups(push.chunk, 1), loops);
}

/* WIDEN (source -> workspace) or NARROW (workspace -> dest) of a rows x cols rectangle. */
static tf_status copy(vk_lower *l, const head *h, bool widen, int32_t buffer, int64_t rows, int64_t cols,
                      int64_t source_offset, int64_t source_stride, int64_t dest_offset, int64_t dest_stride) {
  half_push push = h->push;
  push.mode = widen ? MODE_WIDEN : MODE_NARROW;
  push.copy_rows = (uint32_t)rows, push.copy_cols = (uint32_t)cols;
  push.source_offset = (uint32_t)source_offset, push.source_stride = (uint32_t)source_stride;
  push.dest_offset = (uint32_t)dest_offset, push.dest_stride = (uint32_t)dest_stride;
  const int64_t n = rows * cols;
  return dispatch(l, h, &push, widen ? buffer : -1, widen ? -1 : buffer, vk_groups(n, 256), vk_grid_rounds(n, 256) + 8);
}

/* The weight's classes [first_class, first_class + n) into the workspace's span: n rows of d ([V, d]
 * weight) or d rows of n ([d, V]). */
static tf_status widen_weight_span(vk_lower *l, const head *h, int64_t first_class, int64_t n) {
  const tf_linear_loss_geometry *g = &h->io.g;
  if (g->transpose_weight)
    return copy(l, h, true, h->io.weight, n, g->features, first_class * g->features, g->features, h->at.weight_span,
                g->features);
  return copy(l, h, true, h->io.weight, g->features, n, first_class, g->classes, h->at.weight_span, n);
}

/* Rows [first, first + rows) of x into the workspace's chunk. */
static tf_status widen_rows(vk_lower *l, const head *h, int64_t first, int64_t rows) {
  const int64_t d = h->io.g.features;
  return copy(l, h, true, h->io.x, 1, rows * d, first * d, 0, h->at.x_chunk, 0);
}

/* logits [rows, n] = x_chunk · span (the bias is the row modes'). */
static tf_status span_logits(vk_lower *l, const head *h, int64_t n, int64_t rows) {
  const tf_linear_loss_geometry *g = &h->io.g;
  vk_gemm p = {.a = h->io.work,
               .b = h->io.work,
               .c = h->io.work,
               .a_offset = h->at.x_chunk,
               .b_offset = h->at.weight_span,
               .c_offset = h->at.logits,
               .lda = g->features,
               .ldb = g->transpose_weight ? g->features : n,
               .m = rows,
               .n = n,
               .k = g->features,
               .tb = g->transpose_weight};
  return vk_emit_gemm(l, &p);
}

/* dx_sum[first ..] (+)= dlogits · span; dweight_span (+)= dlogitsᵀ x_chunk ([n, d]) or x_chunkᵀ
 * dlogits ([d, n]). */
static tf_status span_products(vk_lower *l, const head *h, int64_t first, int64_t rows, int64_t first_class,
                               int64_t n) {
  const tf_linear_loss_geometry *g = &h->io.g;
  vk_gemm dx = {.a = h->io.work,
                .b = h->io.work,
                .c = h->io.work,
                .a_offset = h->at.logits,
                .b_offset = h->at.weight_span,
                .c_offset = h->at.dx_sum + first * g->features,
                .lda = n,
                .ldb = g->transpose_weight ? g->features : n,
                .m = rows,
                .n = g->features,
                .k = n,
                .tb = !g->transpose_weight,
                .accumulate = first_class > 0};
  TF_RETURN_IF_ERROR(vk_emit_gemm(l, &dx));
  vk_gemm dw = {.a = h->io.work,
                .b = h->io.work,
                .c = h->io.work,
                .c_offset = h->at.dweight_span,
                .k = rows,
                .ta = true,
                .accumulate = first > 0};
  if (g->transpose_weight) {
    dw.a_offset = h->at.logits, dw.lda = n, dw.b_offset = h->at.x_chunk, dw.ldb = g->features;
    dw.m = n, dw.n = g->features;
  } else {
    dw.a_offset = h->at.x_chunk, dw.lda = g->features, dw.b_offset = h->at.logits, dw.ldb = n;
    dw.m = g->features, dw.n = n;
  }
  return vk_emit_gemm(l, &dw);
}

/* dweight's (and dbias's) classes [first_class, first_class + n) rounded from the span's sums. */
static tf_status store_span(vk_lower *l, const head *h, int64_t first_class, int64_t n) {
  const tf_linear_loss_geometry *g = &h->io.g;
  if (g->transpose_weight)
    TF_RETURN_IF_ERROR(
        copy(l, h, false, h->io.dweight, 1, n * g->features, h->at.dweight_span, 0, first_class * g->features, 0));
  else
    TF_RETURN_IF_ERROR(
        copy(l, h, false, h->io.dweight, g->features, n, h->at.dweight_span, n, first_class, g->classes));
  return h->io.dbias >= 0 ? copy(l, h, false, h->io.dbias, 1, n, h->at.dbias_span, 0, first_class, 0) : NULL;
}

/* One chunk of one span: its rows widened, its logits, then the statistics (pass 1) or the
 * gradients (pass 2). */
static tf_status chunk(vk_lower *l, head *h, bool gradients, int64_t first, int64_t rows, int64_t first_class,
                       int64_t n) {
  h->push.first = (uint32_t)first, h->push.chunk = (uint32_t)rows;
  h->push.first_class = (uint32_t)first_class, h->push.span = (uint32_t)n;
  TF_RETURN_IF_ERROR(widen_rows(l, h, first, rows));
  TF_RETURN_IF_ERROR(span_logits(l, h, n, rows));
  if (!gradients)
    return rows_mode(l, h, MODE_STATS);
  TF_RETURN_IF_ERROR(rows_mode(l, h, MODE_GRAD));
  TF_RETURN_IF_ERROR(span_products(l, h, first, rows, first_class, n));
  if (h->io.dbias < 0)
    return NULL;
  half_push push = h->push;
  push.mode = MODE_DBIAS;
  push.add = first > 0;
  return dispatch(l, h, &push, -1, -1, vk_groups(n, 256), vk_grid_rounds(n, 256) * (rows + 2));
}

/* Pass 1 (gradients false) or pass 2 over every span and chunk. */
static tf_status pass(vk_lower *l, head *h, bool gradients) {
  const tf_linear_loss_geometry *g = &h->io.g;
  for (int64_t first_class = 0; first_class < g->classes; first_class += h->at.span) {
    const int64_t n = g->classes - first_class < h->at.span ? g->classes - first_class : h->at.span;
    TF_RETURN_IF_ERROR(widen_weight_span(l, h, first_class, n));
    for (int64_t first = 0; first < g->rows; first += g->chunk_rows) {
      const int64_t rows = g->rows - first < g->chunk_rows ? g->rows - first : g->chunk_rows;
      TF_RETURN_IF_ERROR(chunk(l, h, gradients, first, rows, first_class, n));
    }
    if (gradients)
      TF_RETURN_IF_ERROR(store_span(l, h, first_class, n));
  }
  return NULL;
}

/* Whether every floating operand of the step but the loss and dloss has x's half type. */
static tf_status check_types(const vk_lower *l, const vk_loss_head *h, tf_dtype half) {
  const int32_t ids[6] = {h->x, h->weight, h->bias, h->dx, h->dweight, h->dbias};
  for (int i = 0; i < 6; i++)
    if (ids[i] >= 0 && vk_buffer(l, ids[i])->dtype != half)
      return vk_refuse(l, "buffer '%s' is %s beside %s x; the half loss head takes one half type",
                       vk_buffer(l, ids[i])->name, tf_dtype_name(vk_buffer(l, ids[i])->dtype), tf_dtype_name(half));
  const int32_t wide[2] = {h->loss, h->dloss};
  for (int i = 0; i < 2; i++)
    if (wide[i] >= 0 && vk_buffer(l, wide[i])->dtype != TF_F32)
      return vk_refuse(l, "buffer '%s' is %s; the half loss head's loss and dloss are f32", vk_buffer(l, wide[i])->name,
                       tf_dtype_name(vk_buffer(l, wide[i])->dtype));
  return NULL;
}

/* The head of step l->step: its buffers, geometry, workspace and push constants; refuses what it
 * cannot run. */
static tf_status head_of(vk_lower *l, head *h) {
  memset(h, 0, sizeof(*h));
  TF_RETURN_IF_ERROR(vk_loss_head_of(l, &h->io));
  const vk_loss_head *io = &h->io;
  const tf_plan_buffer *x = vk_buffer(l, io->x), *weight = vk_buffer(l, io->weight);
  if (io->accumulate)
    return vk_refuse(l,
                     "x '%s' is %s, and this form adds into half accumulators, which would round its sums; "
                     "compile the plan for the vulkan target (which runs it between casts)",
                     x->name, tf_dtype_name(x->dtype));
  h->at = tf_linear_loss_vulkan_half_workspace_of(&io->g, io->dx >= 0, io->bias >= 0);
  TF_RETURN_IF_ERROR(vk_check_workspace(l, 4 * h->at.words));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(x), x->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(weight), weight->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, h->at.words, "the workspace"));
  h->shader = x->dtype == TF_F16 ? VK_SHADER_linear_loss_half_f16 : VK_SHADER_linear_loss_half_bf16;
  TF_RETURN_IF_ERROR(check_types(l, io, x->dtype));
  const int64_t ignore = l->step->attrs.u.cross_entropy.ignore_index;
  h->push = (half_push){.rows = (uint32_t)io->g.rows,
                        .classes = (uint32_t)io->g.classes,
                        .ignore_low = (int32_t)(uint32_t)ignore,
                        .ignore_high = (int32_t)(uint32_t)((uint64_t)ignore >> 32),
                        .wide_labels = vk_buffer(l, io->labels)->dtype == TF_I64,
                        .has_bias = io->bias >= 0,
                        .statistics_at = (uint32_t)h->at.statistics,
                        .logits_at = (uint32_t)h->at.logits,
                        .dbias_at = (uint32_t)h->at.dbias_span,
                        .count_at = (uint32_t)h->at.count};
  return NULL;
}

/* No rows or no classes: the loss is 0 (no label counts), the gradients 0. Fills only: a dispatch
 * would bind an empty buffer. */
static tf_status nothing_to_sum(vk_lower *l, const vk_loss_head *h) {
  const int32_t outputs[4] = {h->loss, h->dx, h->dweight, h->dbias};
  for (int i = 0; i < 4; i++)
    if (outputs[i] >= 0)
      TF_RETURN_IF_ERROR(vk_emit_fill(l, outputs[i]));
  return NULL;
}

tf_status vk_lower_linear_cross_entropy_half(vk_lower *l) {
  head h;
  TF_RETURN_IF_ERROR(head_of(l, &h));
  const tf_linear_loss_geometry *g = &h.io.g;
  if (g->rows == 0 || g->classes == 0)
    return nothing_to_sum(l, &h.io);
  if (g->features == 0) /* the logits GEMM would bind the empty x */
    return vk_refuse(l, "x '%s' has no features; the vulkan backend needs d >= 1 for a fused loss head",
                     vk_buffer(l, h.io.x)->name);
  TF_RETURN_IF_ERROR(rows_mode(l, &h, MODE_COUNT));
  TF_RETURN_IF_ERROR(pass(l, &h, false));
  if (h.io.loss >= 0)
    TF_RETURN_IF_ERROR(rows_mode(l, &h, MODE_LOSS));
  if (h.io.dx < 0)
    return NULL;
  TF_RETURN_IF_ERROR(pass(l, &h, true));
  const int64_t n_x = g->rows * g->features;
  return copy(l, &h, false, h.io.dx, 1, n_x, h.at.dx_sum, 0, 0, 0);
}
