/* ctc_loss and ctc_loss_grad on the Vulkan backend: shaders/ctc.comp's passes, one dispatch each,
 * in the step's workspace (core/ctc.h; compiler/workspace.c plans it for the vulkan target). */
#include <string.h>

#include "backends/vulkan/vk_lower.h"
#include "core/ctc.h"

enum { CTC_FRAMES = 0, CTC_ALPHA, CTC_BETA, CTC_FINISH, CTC_GRAD };
enum { WIDE_LABELS = 1, HAS_LENGTHS = 2, WIDE_LENGTHS = 4, ZERO_INFINITY = 8 };

typedef struct ctc_push {
  uint32_t batch, frames, classes, label_length, blank, flags, mode;
} ctc_push;

static tf_status check_integer(const vk_lower *l, const tf_plan_buffer *b, const char *what) {
  if (b->dtype == TF_I32 || b->dtype == TF_I64)
    return NULL;
  return vk_refuse(l, "%s '%s' are %s; the vulkan backend reads i32 and i64 %s", what, b->name, tf_dtype_name(b->dtype),
                   what);
}

tf_status vk_lower_ctc(vk_lower *l) {
  const tf_plan_step *step = l->step;
  const bool gradient = step->op == TF_OP_CTC_LOSS_GRAD;
  const int32_t lengths_input = gradient ? 3 : 2;
  const bool has_lengths = step->n_inputs > lengths_input;
  const tf_plan_buffer *logits = vk_buffer(l, vk_in(l, 0)), *labels = vk_buffer(l, vk_in(l, 1));
  if (logits->dtype != TF_F32)
    return vk_refuse(l,
                     "logits '%s' are %s; the vulkan ctc shader reads f32 (a plan on half data runs it between "
                     "casts)",
                     logits->name, tf_dtype_name(logits->dtype));
  TF_RETURN_IF_ERROR(check_integer(l, labels, "labels"));
  if (has_lengths)
    TF_RETURN_IF_ERROR(check_integer(l, vk_buffer(l, vk_in(l, lengths_input)), "input lengths"));
  const tf_tensor_ref lr = tf_tensor_ref_make(NULL, logits->dtype, logits->rank, logits->shape);
  const tf_tensor_ref br = tf_tensor_ref_make(NULL, labels->dtype, labels->rank, labels->shape);
  const tf_ctc_geometry g = tf_ctc_geometry_of(&lr, &br);
  const int64_t needed = 4 * tf_ctc_workspace_elements(&g);
  TF_RETURN_IF_ERROR(vk_check_workspace(l, needed));
  TF_RETURN_IF_ERROR(vk_check_count(l, vk_count(logits), logits->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, needed / 4, "the workspace"));
  /* the longest invocation: a frame's classes, or the recursion's frames x positions, or the
   * gradient's positions per logit, or the finish's batch x labels */
  const int64_t rounds = vk_grid_rounds(g.batch * g.frames * (g.classes > 0 ? g.classes : 1), 256);
  int64_t loops = g.classes * vk_grid_rounds(g.batch * g.frames, 256);
  const int64_t candidates[3] = {g.frames * (g.extended / 256 + 1) * 4, rounds * (g.extended + g.label_length + 2),
                                 g.batch * (g.label_length + 1)};
  for (int i = 0; i < 3; i++)
    loops = candidates[i] > loops ? candidates[i] : loops;
  TF_RETURN_IF_ERROR(vk_check_loops(l, loops));
  ctc_push push;
  memset(&push, 0, sizeof(push));
  push.batch = (uint32_t)g.batch;
  push.frames = (uint32_t)g.frames;
  push.classes = (uint32_t)g.classes;
  push.label_length = (uint32_t)g.label_length;
  push.blank = (uint32_t)step->attrs.u.ctc.blank;
  push.flags = (labels->dtype == TF_I64 ? WIDE_LABELS : 0) | (has_lengths ? HAS_LENGTHS : 0) |
               (has_lengths && vk_buffer(l, vk_in(l, lengths_input))->dtype == TF_I64 ? WIDE_LENGTHS : 0);
  const uint32_t zero_infinity = step->attrs.u.ctc.zero_infinity ? ZERO_INFINITY : 0;
  const int32_t buffers[6] = {
      vk_in(l, 0),     vk_in(l, 1), has_lengths ? vk_in(l, lengths_input) : -1, gradient ? vk_in(l, 2) : -1,
      step->workspace, vk_out(l, 0)};
  if (g.batch == 0) /* a mean over nothing is 0; no logits to differentiate */
    return gradient ? NULL : vk_emit_fill(l, vk_out(l, 0));
  const uint32_t sequences = vk_groups(g.batch, 1);
  push.mode = CTC_FRAMES;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_ctc, 6, buffers, 0x10, &push, sizeof(push),
                                      vk_groups(g.batch * g.frames, 256), 1, 1));
  push.mode = CTC_ALPHA; /* the gradient reads the losses before zero_infinity, as the CPU kernel does */
  const uint32_t flags = push.flags;
  push.flags = flags | (gradient ? 0 : zero_infinity);
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_ctc, 6, buffers, 0x10, &push, sizeof(push), sequences, 1, 1));
  push.flags = flags | zero_infinity;
  if (!gradient) {
    push.mode = CTC_FINISH;
    return vk_emit_dispatch(l, VK_SHADER_ctc, 6, buffers, 0x20, &push, sizeof(push), 1, 1, 1);
  }
  push.mode = CTC_BETA;
  TF_RETURN_IF_ERROR(vk_emit_dispatch(l, VK_SHADER_ctc, 6, buffers, 0x10, &push, sizeof(push), sequences, 1, 1));
  push.mode = CTC_GRAD;
  return vk_emit_dispatch(l, VK_SHADER_ctc, 6, buffers, 0x20, &push, sizeof(push),
                          vk_groups(g.batch * g.frames * g.classes, 256), 1, 1);
}
