/* TIGHTFIT_VULKAN_PROFILE (vk_internal.h): per-command timestamps, added up per step. Two queries
 * per command of the lowered program (2i before command i, 2i + 1 after it), both written at
 * BOTTOM_OF_PIPE, with a full barrier before every command so that each runs alone: the difference
 * is that command's time. Recordings are made once and replayed, so the timestamps are part of them
 * and every replay rewrites the same queries, which the run's wait reads back. The copies of offloaded
 * activations recorded among the steps (vk_lower.c) are timed apart, in a line of their own. */
#include <stdlib.h>

#include "backends/vulkan/vk_internal.h"
#include "plan/step_profile.h"

bool vk_profile_wanted(void) {
  const char *path = getenv("TIGHTFIT_VULKAN_PROFILE");
  return path && path[0] != '\0';
}

tf_status vk_profile_start(vk_state *vk) {
  TF_RETURN_IF_ERROR(tf_step_profile_check("TIGHTFIT_VULKAN_PROFILE", getenv("TIGHTFIT_VULKAN_PROFILE")));
  if (vk->timestamp_bits == 0)
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "vulkan: TIGHTFIT_VULKAN_PROFILE: device '%s' has no timestamps on its compute queue",
                         vk->properties.deviceName);
  const int32_t commands = vk->program.n_commands, slots = commands > 0 ? commands : 1;
  vk->profile_ms = calloc((size_t)(vk->plan->n_steps ? vk->plan->n_steps : 1), sizeof(double));
  vk->profile_ticks = malloc(sizeof(uint64_t) * 2 * (size_t)slots);
  vk->profile_step = malloc(sizeof(int32_t) * (size_t)slots);
  vk->profile_calls = calloc((size_t)(vk->plan->n_steps ? vk->plan->n_steps : 1), sizeof(int64_t));
  if (!vk->profile_ms || !vk->profile_ticks || !vk->profile_step || !vk->profile_calls)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "vulkan: cannot keep the profile of %d steps", vk->plan->n_steps);
  vk->profile_copies = 0;
  for (int32_t s = 0; s < vk->plan->n_steps; s++) /* each command's step, once; a host copy is no step's */
    for (int32_t c = vk->program.step_first[s]; c < vk->program.step_first[s + 1]; c++) {
      const bool copy = vk->program.commands[c].host_copy;
      vk->profile_step[c] = copy ? -1 : s;
      vk->profile_copies += copy;
    }
  VkQueryPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = (uint32_t)(2 * (commands > 0 ? commands : 1));
  return vk_check(vk->fn.CreateQueryPool(vk->device, &info, NULL, &vk->profile_pool), "vkCreateQueryPool");
}

void vk_profile_reset(const vk_state *vk, VkCommandBuffer commands, int32_t first, int32_t end) {
  if (vk->profile_pool && end > first)
    vk->fn.CmdResetQueryPool(commands, vk->profile_pool, (uint32_t)(2 * first), (uint32_t)(2 * (end - first)));
}

void vk_profile_mark(const vk_state *vk, VkCommandBuffer commands, int32_t index, bool after) {
  if (vk->profile_pool)
    vk->fn.CmdWriteTimestamp(commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, vk->profile_pool,
                             (uint32_t)(2 * index + (after ? 1 : 0)));
}

tf_status vk_profile_collect(vk_state *vk, int32_t first, int32_t end) {
  if (!vk->profile_pool || end <= first)
    return NULL;
  const size_t count = (size_t)(2 * (end - first));
  uint64_t *ticks = vk->profile_ticks;
  tf_status status =
      vk_check(vk->fn.GetQueryPoolResults(vk->device, vk->profile_pool, (uint32_t)(2 * first), (uint32_t)count,
                                          sizeof(uint64_t) * count, ticks, sizeof(uint64_t),
                                          VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
               "vkGetQueryPoolResults");
  if (!status) {
    const uint64_t mask = vk->timestamp_bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << vk->timestamp_bits) - 1);
    const double ms_per_tick = (double)vk->properties.limits.timestampPeriod * 1e-6;
    int32_t counted = -1;                   /* a step's commands are consecutive: counted once a run */
    for (int32_t i = first; i < end; i++) { /* a difference modulo the counter's width */
      const double ms = (double)((ticks[2 * (i - first) + 1] - ticks[2 * (i - first)]) & mask) * ms_per_tick;
      const int32_t step = vk->profile_step[i];
      if (step < 0) {
        vk->profile_copies_ms += ms;
        continue;
      }
      vk->profile_ms[step] += ms;
      if (step != counted)
        vk->profile_calls[step]++;
      counted = step;
    }
    vk->profile_runs++;
  }
  return status;
}

void vk_profile_finish(vk_state *vk) {
  if (vk->profile_ms && vk->profile_runs > 0 && vk->plan) {
    FILE *out = tf_step_profile_open(getenv("TIGHTFIT_VULKAN_PROFILE"));
    if (out)
      tf_step_profile_write(vk->plan, vk->profile_ms, vk->profile_calls, vk->profile_runs, "Vulkan", out);
    if (out && vk->profile_copies > 0)
      fprintf(out, "# host copies: %d recorded among the steps, %.3f ms in all (in no step's time above)\n",
              vk->profile_copies, vk->profile_copies_ms);
    tf_step_profile_close(out);
  }
  if (vk->profile_pool)
    vk->fn.DestroyQueryPool(vk->device, vk->profile_pool, NULL);
  vk->profile_pool = VK_NULL_HANDLE;
  free(vk->profile_ms);
  free(vk->profile_ticks);
  free(vk->profile_step);
  free(vk->profile_calls);
  vk->profile_calls = NULL;
  vk->profile_ms = NULL;
  vk->profile_ticks = NULL;
  vk->profile_step = NULL;
  vk->profile_runs = 0;
  vk->profile_copies_ms = 0;
  vk->profile_copies = 0;
}
