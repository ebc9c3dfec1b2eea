/* cuda_copies.h: the schedule of an offloaded activation's copies on CUDA. */
#include "backends/cuda/cuda_copies.h"

#include <stdlib.h>
#include <string.h>

static bool overlaps(const tf_plan_buffer *a, const tf_plan_buffer *b) {
  return a->region == b->region && a->bytes > 0 && b->bytes > 0 && a->offset < b->offset + b->bytes &&
         b->offset < a->offset + a->bytes;
}

bool tf_cuda_step_touches_bytes_of(const tf_plan *plan, int32_t step, int32_t buffer, bool reads) {
  const tf_plan_step *s = &plan->steps[step];
  const tf_plan_buffer *b = &plan->buffers[buffer];
  for (int32_t k = 0; k < s->n_inputs + s->n_outputs; k++) {
    bool written;
    const int32_t id = tf_plan_step_operand(s, k, &written);
    if ((written || (reads && tf_plan_step_reads(s, k))) && overlaps(&plan->buffers[id], b))
      return true;
  }
  return s->workspace >= 0 && overlaps(&plan->buffers[s->workspace], b);
}

/* Whether a step in [from, to] writes bytes of `buffer` (with `reads`: or reads any). */
static bool touched(const tf_plan *plan, int32_t from, int32_t to, int32_t buffer, bool reads) {
  for (int32_t i = from; i <= to; i++)
    if (tf_cuda_step_touches_bytes_of(plan, i, buffer, reads))
      return true;
  return false;
}

/* The first micro-batch step from `at` on that writes bytes of `buffer`, or -1. */
static int32_t first_writer(const tf_plan *plan, int32_t at, int32_t buffer) {
  for (int32_t j = at; j < plan->micro_steps; j++)
    if (tf_cuda_step_touches_bytes_of(plan, j, buffer, false))
      return j;
  return -1;
}

/* Moves the copies placed inside group g's span (before one of its steps but the first) out of it: a
 * copy down after the span, a copy back before it; false (nothing moved) when a step it would pass
 * touches the bytes it moves, or when a host step the runtime runs (not in `taken`) falls inside the
 * span: the runtime cuts the range there, so the group runs unfused anyway, and a moved copy would
 * pass that host step, whose operands `touched` does not see (a gradient the host accumulates, whose
 * bytes a copy back reuses). */
static bool place_outside(const tf_plan *plan, const bool *taken, tf_cuda_copy_schedule *k, const tf_cuda_fusion *g) {
  if (g->first >= plan->micro_steps)
    return true;
  for (int32_t h = 0; h < plan->n_host_steps; h++)
    if (!taken[h] && plan->host_at[h] > g->first && plan->host_at[h] <= g->last)
      return false;
  for (int32_t pass = 0; pass < 2; pass++) /* check every copy, then move them */
    for (int32_t c = 0; c < k->n_copies; c++) {
      tf_cuda_copy *copy = &k->copies[c];
      if (copy->at <= g->first || copy->at > g->last)
        continue;
      const tf_plan_step *step = &plan->host_steps[copy->host_step];
      const bool stuck = copy->down ? touched(plan, copy->at, g->last, step->inputs[0], false)
                                    : touched(plan, g->first, copy->at - 1, step->outputs[0], true);
      if (stuck)
        return false;
      if (pass == 1)
        copy->at = copy->down ? g->last + 1 : g->first;
    }
  return true;
}

/* Sorts the copies by place (stable: insertion) and indexes them by place. */
static void index_places(const tf_plan *plan, tf_cuda_copy_schedule *k) {
  for (int32_t c = 1; c < k->n_copies; c++) {
    const tf_cuda_copy copy = k->copies[c];
    int32_t d = c;
    for (; d > 0 && k->copies[d - 1].at > copy.at; d--)
      k->copies[d] = k->copies[d - 1];
    k->copies[d] = copy;
  }
  for (int32_t at = 0, c = 0; at <= plan->micro_steps + 1; at++) {
    while (c < k->n_copies && k->copies[c].at < at)
      c++;
    k->first[at] = c;
  }
}

/* Which copies down run beside the steps, and where the steps wait for them (cuda_copies.h). */
static void place_waits(const tf_plan *plan, const tf_cuda_fusion *groups, const bool *kept, int32_t n_groups,
                        tf_cuda_copy_schedule *k) {
  memset(k->join_before, 0, sizeof(bool) * (size_t)(plan->micro_steps + 1));
  for (int32_t c = 0; c < k->n_copies; c++) {
    tf_cuda_copy *copy = &k->copies[c];
    const int32_t writer = copy->down ? first_writer(plan, copy->at, plan->host_steps[copy->host_step].inputs[0]) : -1;
    copy->beside = copy->down && writer != copy->at;
    if (writer > copy->at)
      k->join_before[writer] = true;
  }
  for (int32_t g = 0; g < n_groups; g++) {
    const tf_cuda_fusion *f = &groups[g];
    if (!kept[g] || f->first >= plan->micro_steps)
      continue;
    for (int32_t i = f->first + 1; i <= f->last; i++) /* the launch writes for every member */
      k->join_before[f->first] = k->join_before[f->first] || k->join_before[i];
    for (int32_t c = k->first[f->first]; c < k->first[f->first + 1]; c++) {
      tf_cuda_copy *copy = &k->copies[c];
      copy->beside =
          copy->beside && !touched(plan, f->first, f->last, plan->host_steps[copy->host_step].inputs[0], false);
    }
  }
}

tf_status tf_cuda_copy_schedule_make(const tf_plan *plan, const bool *taken, const tf_cuda_fusion *groups,
                                     int32_t n_groups, bool *kept, tf_cuda_copy_schedule *out) {
  memset(out, 0, sizeof(*out));
  out->copies = calloc((size_t)(plan->n_host_steps > 0 ? plan->n_host_steps : 1), sizeof(tf_cuda_copy));
  out->first = calloc((size_t)plan->micro_steps + 2, sizeof(int32_t));
  out->join_before = calloc((size_t)plan->micro_steps + 1, sizeof(bool));
  if (!out->copies || !out->first || !out->join_before) {
    tf_cuda_copy_schedule_free(out);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot schedule %d host copies", plan->n_host_steps);
  }
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    if (!taken[h])
      continue;
    if (step->n_inputs != 1 || step->n_outputs != 1 || step->phase == TF_PHASE_OPTIMIZER ||
        plan->host_at[h] > plan->micro_steps) {
      tf_cuda_copy_schedule_free(out);
      return tf_status_new(TF_ERR_INTERNAL, "cuda backend: host step %d '%s' is not an activation's copy", h,
                           step->name);
    }
    const bool down = plan->buffers[step->outputs[0]].region == TF_REGION_HOST;
    out->copies[out->n_copies++] = (tf_cuda_copy){.host_step = h, .at = plan->host_at[h], .down = down};
  }
  index_places(plan, out);
  for (int32_t g = 0; g < n_groups; g++)
    kept[g] = place_outside(plan, taken, out, &groups[g]);
  index_places(plan, out);
  place_waits(plan, groups, kept, n_groups, out);
  return NULL;
}

void tf_cuda_copy_schedule_free(tf_cuda_copy_schedule *schedule) {
  free(schedule->copies);
  free(schedule->first);
  free(schedule->join_before);
  memset(schedule, 0, sizeof(*schedule));
}
