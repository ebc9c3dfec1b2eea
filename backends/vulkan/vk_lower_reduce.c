/* Reductions (shaders/reduce.comp): sum, mean, max, sum_to, max_grad and global_norm_sq; and the
 * softmax family (shaders/softmax.comp). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/workspace.h"

typedef struct reduce_push {
  uint32_t outputs, group, mode, per_thread, n_kept, n_reduced;
  float divisor;
  uint32_t accumulate;
  uint32_t kept_shape[4], kept_stride[4], reduced_shape[4], reduced_stride[4];
  uint32_t chunk_rows, chunks; /* the split (REDUCE_SPLIT_*) */
} reduce_push;

enum { REDUCE_SUM = 0, REDUCE_MAX = 1, REDUCE_MAX_GRAD = 2, REDUCE_NORM_SQ = 3 };

/* per_thread's third value, and reduce.comp's COLUMNS x LANES workgroup in that layout; the split's
 * two passes (core/workspace.h) and their SPLIT_COLUMNS x SPLIT_LANES workgroup. */
enum { REDUCE_IN_COLUMNS = 2, REDUCE_COLUMNS = 16, REDUCE_LANES = 16 };
enum { REDUCE_SPLIT_PARTIALS = 3, REDUCE_SPLIT_COMBINE = 4, REDUCE_SPLIT_LANES = 4 };

typedef struct softmax_push {
  uint32_t lines, classes, inner, mode;
} softmax_push;

/* Fills the geometry of reducing x over the axes marked in reduced[]: size-1 axes dropped, adjacent
 * axes of the same kind merged (x is contiguous), then split into kept and reduced runs. */
static tf_status geometry(vk_lower *l, const tf_plan_buffer *x, const bool *reduced, reduce_push *push) {
  int32_t rank = 0;
  int64_t shape[TF_MAX_RANK];
  bool kind[TF_MAX_RANK];
  for (int32_t i = 0; i < x->rank; i++) {
    if (x->shape[i] == 1)
      continue;
    if (rank > 0 && kind[rank - 1] == reduced[i]) {
      shape[rank - 1] *= x->shape[i];
      continue;
    }
    shape[rank] = x->shape[i];
    kind[rank++] = reduced[i];
  }
  int64_t stride = 1, outputs = 1, group = 1;
  int64_t strides[TF_MAX_RANK];
  for (int32_t i = rank - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape[i];
  }
  for (int32_t i = 0; i < rank; i++) {
    uint32_t *n = kind[i] ? &push->n_reduced : &push->n_kept;
    if (*n == 4)
      return vk_refuse(l, "the reduction alternates kept and reduced axes more than 4 times");
    (kind[i] ? push->reduced_shape : push->kept_shape)[*n] = (uint32_t)shape[i];
    (kind[i] ? push->reduced_stride : push->kept_stride)[*n] = (uint32_t)strides[i];
    (*n)++;
    *(kind[i] ? &group : &outputs) *= shape[i];
  }
  TF_RETURN_IF_ERROR(vk_check_count(l, outputs * group, x->name));
  push->outputs = (uint32_t)outputs;
  push->group = (uint32_t)group;
  return NULL;
}

/* The split sum (core/workspace.h): partials of each (64 outputs, chunk) into the workspace, then
 * each output's partials added in chunk order. */
static tf_status split(vk_lower *l, reduce_push *push, int64_t chunk_rows) {
  const int64_t chunks = tf_vulkan_column_chunks(push->group, chunk_rows);
  push->chunk_rows = (uint32_t)chunk_rows;
  push->chunks = (uint32_t)chunks;
  int32_t buffers[5] = {vk_in(l, 0), -1, -1, vk_out(l, 0), l->step->workspace};
  TF_RETURN_IF_ERROR(
      vk_check_loops(l, (chunk_rows + REDUCE_SPLIT_LANES - 1) / REDUCE_SPLIT_LANES + REDUCE_SPLIT_LANES));
  push->per_thread = REDUCE_SPLIT_PARTIALS;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_reduce_split, 5, buffers, 0x10, push, sizeof(*push),
                                      vk_groups(push->outputs, TF_VULKAN_SPLIT_COLUMNS), (uint32_t)chunks, 1));
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds(push->outputs, 256) * (chunks + 1)));
  push->per_thread = REDUCE_SPLIT_COMBINE;
  return vk_emit_dispatch(l, VK_SHADER_reduce_split, 5, buffers, 0x8, push, sizeof(*push),
                          vk_groups(push->outputs, 256), 1, 1);
}

tf_status vk_lower_reduce(vk_lower *l) {
  tf_op op = l->step->op;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0));
  bool reduced[TF_MAX_RANK];
  if (op == TF_OP_SUM_TO) {
    // dy's leading axes that `like` lacks and the axes where it has size 1 (right-aligned).
    const tf_plan_buffer *like = vk_buffer(l, vk_in(l, 1));
    int32_t offset = x->rank - like->rank;
    for (int32_t i = 0; i < x->rank; i++)
      reduced[i] = i < offset || like->shape[i - offset] == 1;
  } else {
    const tf_reduce_attrs *a = &l->step->attrs.u.reduce;
    for (int32_t i = 0; i < TF_MAX_RANK; i++)
      reduced[i] = a->n_axes == 0;
    for (int32_t i = 0; i < a->n_axes; i++)
      reduced[a->axes[i] < 0 ? a->axes[i] + x->rank : a->axes[i]] = true;
  }
  reduce_push push;
  memset(&push, 0, sizeof(push));
  TF_RETURN_IF_ERROR(geometry(l, x, reduced, &push));
  push.mode = op == TF_OP_MAX ? REDUCE_MAX : op == TF_OP_MAX_GRAD ? REDUCE_MAX_GRAD : REDUCE_SUM;
  push.divisor = op == TF_OP_MEAN ? (float)push.group : 1.0f;
  // A workgroup per output (a tree in shared memory) only for a few long groups (full sums, long
  // rows); many long groups (bias gradients) in columns: a workgroup's 16 lanes share each of its
  // 16 outputs' groups, neighbouring invocations reading neighbouring columns; otherwise an
  // invocation per output walks its group.
  // (core/workspace.h: the planner reserves the split's workspace by the same rule)
  // max_grad: a workgroup per output only where a sum would take one (a few long groups), else an
  // invocation per output counts and writes its group (Clip's and Max's stacks of 2: 256 times fewer
  // invocations than a workgroup each, and no barriers).
  push.per_thread = !tf_vulkan_reduce_tree(push.outputs, push.group);
  if (push.per_thread && push.mode != REDUCE_MAX_GRAD && tf_vulkan_reduce_in_columns(push.outputs, push.group))
    push.per_thread = REDUCE_IN_COLUMNS;
  if (push.outputs == 0)
    return NULL;
  const int64_t chunk_rows = tf_vulkan_reduce_chunk_rows(op, vk_count(x), push.outputs);
  if (chunk_rows > 0 &&
      vk_split_columns_on(l, push.outputs, tf_vulkan_reduce_workspace_bytes(op, vk_count(x), push.outputs)))
    return split(l, &push, chunk_rows);
  int32_t buffers[4] = {vk_in(l, 0), -1, -1, vk_out(l, 0)};
  if (op == TF_OP_MAX_GRAD) {
    buffers[1] = vk_in(l, 1);
    buffers[2] = vk_in(l, 2);
  }
  const int64_t per_group = push.per_thread == REDUCE_IN_COLUMNS ? REDUCE_COLUMNS : push.per_thread ? 256 : 1;
  uint32_t groups = vk_groups(push.outputs, per_group);
  // An invocation walks whole groups (per_thread; twice for max_grad), a 16th of each (columns, then
  // adds 16 partials) or a 256th (twice for max_grad).
  const int64_t passes = op == TF_OP_MAX_GRAD ? 2 : 1;
  int64_t walk = push.per_thread == REDUCE_IN_COLUMNS ? (push.group + REDUCE_LANES - 1) / REDUCE_LANES + REDUCE_LANES
                 : push.per_thread                    ? passes * push.group
                                                      : passes * ((push.group + 255) / 256) + 8;
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds(push.outputs, per_group) * (walk + 1)));
  return vk_emit_dispatch(l, vk_variant(l, VK_SHADER_reduce), 4, buffers, 0x8, &push, sizeof(push), groups, 1, 1);
}

tf_status vk_lower_global_norm_sq(vk_lower *l) {
  for (int32_t k = 0; k < l->step->n_inputs; k++) {
    const tf_plan_buffer *g = vk_buffer(l, vk_in(l, k));
    int64_t count = vk_count(g);
    TF_RETURN_IF_ERROR(vk_check_count(l, count, g->name));
    reduce_push push;
    memset(&push, 0, sizeof(push));
    push.outputs = 1;
    push.group = (uint32_t)count;
    push.mode = REDUCE_NORM_SQ;
    push.n_reduced = 1;
    push.reduced_shape[0] = (uint32_t)(count > 0 ? count : 1);
    push.reduced_stride[0] = 1;
    push.divisor = 1.0f;
    push.accumulate = k > 0;
    // One workgroup per input, each adding its share to the scalar after the previous one.
    int32_t buffers[4] = {vk_in(l, k), -1, -1, vk_out(l, 0)};
    TF_RETURN_IF_ERROR(vk_check_loops(l, (count + 255) / 256 + 8));
    TF_RETURN_IF_ERROR(
        vk_emit_dispatch(l, vk_variant(l, VK_SHADER_reduce), 4, buffers, 0x8, &push, sizeof(push), 1, 1, 1));
  }
  return NULL;
}

/* Rows per workgroup of softmax.comp's subgroup variant: 64 invocations in clusters of 8 lanes. */
#define SOFTMAX_ROWS_PER_GROUP 8

tf_status vk_lower_softmax(vk_lower *l) {
  tf_op op = l->step->op;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0));
  int32_t axis = l->step->attrs.u.axis.axis < 0 ? l->step->attrs.u.axis.axis + x->rank : l->step->attrs.u.axis.axis;
  int64_t outer = 1, inner = 1;
  for (int32_t i = 0; i < axis; i++)
    outer *= x->shape[i];
  for (int32_t i = axis + 1; i < x->rank; i++)
    inner *= x->shape[i];
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(x), x->name));
  softmax_push push = {.lines = (uint32_t)(outer * inner),
                       .classes = (uint32_t)x->shape[axis],
                       .inner = (uint32_t)inner,
                       .mode = op == TF_OP_SOFTMAX        ? 0u
                               : op == TF_OP_LOG_SOFTMAX  ? 1u
                               : op == TF_OP_SOFTMAX_GRAD ? 2u
                                                          : 3u};
  if (vk_count(x) == 0)
    return NULL;
  bool gradient = op == TF_OP_SOFTMAX_GRAD || op == TF_OP_LOG_SOFTMAX_GRAD;
  int32_t buffers[3] = {vk_in(l, 0), gradient ? vk_in(l, 1) : -1, vk_out(l, 0)};
  // The subgroup variant (a cluster of 8 lanes per row, coalesced) only for contiguous rows: with
  // inner > 1 the plain shader's neighbouring invocations already read neighbouring columns.
  vk_shader shader = push.inner == 1 ? vk_variant(l, VK_SHADER_softmax) : VK_SHADER_softmax;
  int64_t per_group = shader == VK_SHADER_softmax ? 64 : SOFTMAX_ROWS_PER_GROUP;
  // Three walks of a line (max, sum, outputs), each over its classes or a lane's eighth of them.
  int64_t walk = shader == VK_SHADER_softmax ? push.classes : (push.classes + 7) / 8;
  TF_RETURN_IF_ERROR(vk_check_loops(l, vk_grid_rounds(push.lines, per_group) * (3 * walk + 1)));
  return vk_emit_dispatch(l, shader, 3, buffers, 0x4, &push, sizeof(push), vk_groups(push.lines, per_group), 1, 1);
}
