/* batch_norm, its gradient (shaders/batch_norm.comp) and the running statistics' update
 * (shaders/batch_norm_running.comp; the CPU's kernels/cpu/batch_norm.c): one dispatch each over
 * the channels of x viewed as [N, C, S], the statistics taken by the same code
 * (shaders/batch_norm_stats.glsl): a workgroup per channel, or an invocation per channel when a
 * channel holds at most BATCH_NORM_ALONE elements (x [2, 70001]: a workgroup each took lavapipe
 * about 25 s a dispatch, 0.35 ms a workgroup of barriers; an invocation each, milliseconds). The
 * gradient recomputes the channel statistics rather than keeping them between passes, so it needs
 * no workspace and no room in its outputs (dgamma and dbeta hold one element a channel). */
#include "backends/vulkan/vk_lower.h"
#include "core/ops.h"

#define BATCH_NORM_INVOCATIONS 256 /* local_size_x of shaders/batch_norm_stats.glsl */
#define BATCH_NORM_ALONE 64        /* elements a channel at most for an invocation per channel */

/* Mirrors the shader's push constant block field by field. */
typedef struct batch_norm_push {
  uint32_t batch, channels, spatial;
  float epsilon;
  uint32_t backward, alone;
} batch_norm_push;

/* ... of shaders/batch_norm_running.comp. */
typedef struct batch_norm_running_push {
  uint32_t batch, channels, spatial;
  float momentum;
  uint32_t alone;
} batch_norm_running_push;

static bool alone(int64_t per_channel) { return per_channel <= BATCH_NORM_ALONE; }

/* Workgroups of a dispatch over `channels` channels of `per_channel` elements. */
static uint32_t groups_of(int64_t channels, int64_t per_channel) {
  return vk_groups(channels, alone(per_channel) ? BATCH_NORM_INVOCATIONS : 1);
}

/* Loop iterations one invocation runs, from above: per channel, `walks` over its elements
 * (statistics: 2; forward output: 1; gradient sums and output: 2) and, with a workgroup per
 * channel, `trees` (a tree is 8 halvings, or up to 31 subgroup partials with lavapipe's 8 lanes). */
static int64_t loop_estimate(int64_t channels, int64_t per_channel, int64_t walks, int64_t trees) {
  if (alone(per_channel))
    return vk_grid_rounds(channels, BATCH_NORM_INVOCATIONS) * (walks * per_channel + 1);
  const int64_t walk = (per_channel + BATCH_NORM_INVOCATIONS - 1) / BATCH_NORM_INVOCATIONS;
  return vk_grid_rounds(channels, 1) * (walks * walk + trees * 32 + 1);
}

/* x [N, C, S...] viewed as [N, C, S]. */
typedef struct channel_view {
  int64_t batch, channels, spatial;
} channel_view;

/* Refuses an x below rank 2, else NULL with its view. */
static tf_status view_of(const vk_lower *l, const tf_plan_buffer *x, channel_view *v) {
  if (x->rank < 2)
    return vk_refuse(l, "x '%s' has rank %d; %s needs [N, C, ...]", x->name, x->rank, tf_op_name(l->step->op));
  v->batch = x->shape[0];
  v->channels = x->shape[1];
  v->spatial = 1;
  for (int32_t d = 2; d < x->rank; d++)
    v->spatial *= x->shape[d];
  return NULL;
}

tf_status vk_lower_batch_norm(vk_lower *l) {
  const bool backward = l->step->op == TF_OP_BATCH_NORM_GRAD;
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0)), *gamma = vk_buffer(l, vk_in(l, 1));
  channel_view v = {0, 0, 0};
  TF_RETURN_IF_ERROR(view_of(l, x, &v));
  const int64_t batch = v.batch, channels = v.channels, spatial = v.spatial, count = vk_count(x);
  // No channels: nothing to write. No elements: only the gradient writes (zero dgamma and dbeta).
  if (channels == 0 || (count == 0 && !backward))
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, x->name));
  TF_RETURN_IF_ERROR(vk_check_count(l, channels, gamma->name));
  TF_RETURN_IF_ERROR(vk_check_loops(l, loop_estimate(channels, count / channels, backward ? 4 : 3, backward ? 3 : 2)));
  // With C >= 1, N x S <= count: the shader's element counts fit 32 bits too.
  const batch_norm_push push = {.batch = (uint32_t)(count ? batch : 0),
                                .channels = (uint32_t)channels,
                                .spatial = (uint32_t)(count ? spatial : 0),
                                .epsilon = l->step->attrs.u.norm.epsilon,
                                .backward = backward,
                                .alone = alone(count / channels)};
  const vk_shader shader = vk_variant(l, VK_SHADER_batch_norm);
  const uint32_t groups = groups_of(channels, count / channels);
  if (!backward) {
    const int32_t buffers[4] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_out(l, 0)};
    return vk_emit_dispatch(l, shader, 4, buffers, 0x8, &push, sizeof(push), groups, 1, 1);
  }
  const int32_t buffers[6] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2), vk_out(l, 0), vk_out(l, 1), vk_out(l, 2)};
  return vk_emit_dispatch(l, shader, 6, buffers, 0x38, &push, sizeof(push), groups, 1, 1);
}

/* The running statistics (inputs 1 and 2, f32 whatever x's dtype: the half variants bind them as
 * f32, vk_lower.c's f32_in_every_variant) updated in place by a workgroup per channel. */
tf_status vk_lower_batch_norm_running(vk_lower *l) {
  const tf_plan_buffer *x = vk_buffer(l, vk_in(l, 0));
  channel_view v = {0, 0, 0};
  TF_RETURN_IF_ERROR(view_of(l, x, &v));
  const int64_t channels = v.channels;
  for (int32_t k = 1; k <= 2; k++) {
    const tf_plan_buffer *stat = vk_buffer(l, vk_in(l, k));
    if (stat->dtype != TF_F32 || vk_count(stat) != channels)
      return vk_refuse(l, "running statistic '%s' is %s with %lld elements; it must be f32 [%lld], one per channel",
                       stat->name, tf_dtype_name(stat->dtype), (long long)vk_count(stat), (long long)channels);
  }
  const int64_t count = vk_count(x);
  if (channels == 0 || count == 0) /* no statistics to update, or no batch to update them with */
    return NULL;
  TF_RETURN_IF_ERROR(vk_check_count(l, count, x->name));
  TF_RETURN_IF_ERROR(vk_check_loops(l, loop_estimate(channels, count / channels, 2, 2)));
  // With C >= 1, N x S <= count: the shader's element counts fit 32 bits too.
  const batch_norm_running_push push = {.batch = (uint32_t)v.batch,
                                        .channels = (uint32_t)channels,
                                        .spatial = (uint32_t)v.spatial,
                                        .momentum = l->step->attrs.u.norm.momentum,
                                        .alone = alone(count / channels)};
  const int32_t buffers[3] = {vk_in(l, 0), vk_in(l, 1), vk_in(l, 2)};
  return vk_emit_dispatch(l, vk_variant(l, VK_SHADER_batch_norm_running), 3, buffers, 0x6, &push, sizeof(push),
                          groups_of(channels, count / channels), 1, 1);
}
