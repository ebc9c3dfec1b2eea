/* batch_norm and its gradient (shaders/batch_norm.comp; the CPU's kernels/cpu/batch_norm.c): one
 * dispatch each, a workgroup per channel of x viewed as [N, C, S]. The gradient recomputes the
 * channel statistics rather than keeping them between passes, so it needs no workspace and no
 * room in its outputs (dgamma and dbeta hold one element a channel). */
#include "backends/vulkan/vk_lower.h"

#define BATCH_NORM_INVOCATIONS 256 /* local_size_x of shaders/batch_norm.comp */

/* Mirrors the shader's push constant block field by field. */
typedef struct batch_norm_push {
  uint32_t batch, channels, spatial;
  float epsilon;
  uint32_t backward;
} batch_norm_push;

/* Loop iterations one invocation runs, from above: per channel, the walks over its elements
 * (statistics: 2; forward output: 1; gradient sums and output: 2) and the trees (3 at most; a
 * tree is 8 halvings, or up to 31 subgroup partials with lavapipe's 8 lanes). */
static int64_t loop_estimate(int64_t channels, int64_t per_channel, bool backward) {
  const int64_t walk = (per_channel + BATCH_NORM_INVOCATIONS - 1) / BATCH_NORM_INVOCATIONS;
  const int64_t per_round = (backward ? 4 : 3) * walk + (backward ? 3 : 2) * 32 + 1;
  return vk_grid_rounds(channels, 1) * per_round;
}

tf_status vk_lower_batch_norm(vk_lower *l) {
  const bool backward = l->step->op == TF_OP_BATCH_NORM_GRAD;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0)), *gamma = vk_buffer(l, vk_in(l, 1));
  if (x->rank < 2)
    return vk_refuse(l, "x '%s' has rank %d; batch_norm needs [N, C, ...]", x->name, x->rank);
  int64_t spatial = 1;
  for (int32_t d = 2; d < x->rank; d++)
    spatial *= x->shape[d];
  const int64_t batch = x->shape[0], channels = x->shape[1], count = vk_count(x);
  // No channels: nothing to write. No elements: only the gradient writes (zero dgamma and dbeta).
  if (channels == 0 || (count == 0 && !backward))
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, x->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, channels, gamma->name));
  TF_RETURN_IF_ERROR(vk_check_loops(l, loop_estimate(channels, count / channels, backward)));
  // With C >= 1, N x S <= count: the shader's element counts fit 32 bits too.
  const batch_norm_push push = {.batch = (uint32_t)(count ? batch : 0),
                                .channels = (uint32_t)channels,
                                .spatial = (uint32_t)(count ? spatial : 0),
                                .epsilon = l->step->attrs.u.norm.epsilon,
                                .backward = backward};
  const vk_shader shader = vk_variant(l, VK_SHADER_batch_norm);
  const uint32_t groups = vk_groups(channels, 1);
  if (!backward) {
    const int32_t buffers[4] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_out(l, 0)};
    return vk_emit_dispatch(l, shader, 4, buffers, 0x8, &push, sizeof(push), groups, 1, 1);
  }
  const int32_t buffers[6] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_out(l, 0), vk_out(l, 1), vk_out(l, 2)};
  return vk_emit_dispatch(l, shader, 6, buffers, 0x38, &push, sizeof(push), groups, 1, 1);
}
