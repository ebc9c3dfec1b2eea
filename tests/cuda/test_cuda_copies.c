/* The schedule of an offloaded activation's copies on CUDA (backends/cuda/cuda_copies.h), on real
 * compiled plans without a GPU: gpt2-small (1 layer) and the zoo's gpt (2 layers) with their
 * activations in host memory, with recompute's checkpoints, bf16 storage, and the gradients offloaded
 * too. Each schedule is replayed as the streams would run it (a copy down in flight from its place to
 * the next wait; a copy back, and the end of the block, wait for them all; a fused group kept with the
 * copies writes every member's bytes at its span's first step) and checked from outside the schedule:
 * no step writes a byte of a copy down's source while that copy may still read it, every copy is at
 * its host step's place, and no kept group has a copy inside its span. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_copies.h"
#include "check.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

static tf_test_counts counts;

static tf_plan *compile_zoo(const char *preset, const char *override, tf_compile_options o) {
  tf_graph *g = NULL;
  tf_plan *plan = NULL;
  const char *overrides[] = {override};
  tf_status status = tf_zoo_build(preset, overrides, 1, &g);
  if (!status)
    status = tf_compile(g, &o, &plan);
  CHECK(&counts, status == NULL, "%s: %s", preset, tf_status_message(status));
  tf_status_free(status);
  tf_graph_destroy(g);
  return plan;
}

/* The byte range [begin, end) of buffer id in its region. */
typedef struct span {
  int32_t region;
  int64_t begin, end;
} span;

static span span_of(const tf_plan *plan, int32_t id) {
  const tf_plan_buffer *b = &plan->buffers[id];
  return (span){b->region, b->offset, b->offset + b->bytes};
}

static bool meet(span a, span b) {
  return a.region == b.region && a.begin < b.end && b.begin < a.end && a.end > a.begin && b.end > b.begin;
}

/* Whether step i writes data of `source`: its outputs, the inputs it updates (not its workspace:
 * a fused launch runs none of its members' own kernels, and its GEMM's workspace is cuda_fuse.c's
 * check, test_cuda_fuse's). */
static bool writes_data(const tf_plan *plan, int32_t i, span source) {
  const tf_plan_step *s = &plan->steps[i];
  for (int32_t k = 0; k < s->n_outputs; k++)
    if (meet(span_of(plan, s->outputs[k]), source))
      return true;
  for (int32_t k = 0; k < s->n_inputs; k++) {
    bool written;
    tf_plan_step_operand(s, k, &written);
    if (written && meet(span_of(plan, s->inputs[k]), source))
      return true;
  }
  return false;
}

/* Whether step i reads or writes data of `target` (every input counted as read). */
static bool touches_data(const tf_plan *plan, int32_t i, span target) {
  const tf_plan_step *s = &plan->steps[i];
  for (int32_t k = 0; k < s->n_inputs; k++)
    if (meet(span_of(plan, s->inputs[k]), target))
      return true;
  return writes_data(plan, i, target);
}

static bool in_workspace(const tf_plan *plan, int32_t i, span bytes) {
  return plan->steps[i].workspace >= 0 && meet(span_of(plan, plan->steps[i].workspace), bytes);
}

/* The same with the step's workspace: what step i does when it runs as compiled. */
static bool writes(const tf_plan *plan, int32_t i, span source) {
  return writes_data(plan, i, source) || in_workspace(plan, i, source);
}

static bool touches(const tf_plan *plan, int32_t i, span target) {
  return touches_data(plan, i, target) || in_workspace(plan, i, target);
}

/* The kept group whose span step i lies in, or -1. */
static int32_t group_of(const tf_cuda_fusion *groups, const bool *kept, int32_t n, int32_t i) {
  for (int32_t g = 0; g < n; g++)
    if (kept[g] && i >= groups[g].first && i <= groups[g].last)
      return g;
  return -1;
}

/* Whether, run as scheduled, a step writes bytes a copy down in flight still reads; *first_bad names it. */
static bool replay(const tf_plan *plan, const tf_cuda_copy_schedule *k, const tf_cuda_fusion *groups, const bool *kept,
                   int32_t n_groups, int32_t *first_bad) {
  enum { MAX_FLIGHT = 4096 };
  span *flight = malloc(sizeof(span) * MAX_FLIGHT);
  int32_t n_flight = 0;
  bool ok = flight != NULL;
  for (int32_t at = 0; ok && at <= plan->micro_steps; at++) {
    if (at < plan->micro_steps && k->join_before[at])
      n_flight = 0;
    for (int32_t c = k->first[at]; c < k->first[at + 1]; c++) {
      const tf_plan_step *copy = &plan->host_steps[k->copies[c].host_step];
      if (!k->copies[c].beside)
        n_flight = 0; /* a copy in order (a copy back, or a copy down whose next step writes its source) waits */
      else if (n_flight < MAX_FLIGHT)
        flight[n_flight++] = span_of(plan, copy->inputs[0]);
    }
    if (at == plan->micro_steps)
      break;
    /* a kept group's launch (at its first step) writes for all its members; its other steps nothing */
    const int32_t g = group_of(groups, kept, n_groups, at);
    const int32_t from = g >= 0 ? (at == groups[g].first ? groups[g].first : -1) : at;
    const int32_t to = g >= 0 ? groups[g].last : at;
    for (int32_t i = from; from >= 0 && i <= to && ok; i++)
      for (int32_t f = 0; f < n_flight && ok; f++)
        if (writes(plan, i, flight[f])) {
          ok = false;
          *first_bad = at;
        }
  }
  free(flight);
  return ok;
}

/* Whether the fused launch of GEMM group f leaves buffer b unwritten though a member step writes it. */
static bool skips(const tf_plan *plan, const tf_cuda_fusion *f, int32_t b) {
  if (f->kind == TF_CUDA_FUSION_OPTIMIZER || b == f->output || b == f->aux || b == f->bias)
    return false;
  for (int32_t m = 0; m < f->n_members; m++)
    for (int32_t k = 0; k < plan->steps[f->members[m]].n_outputs; k++)
      if (plan->steps[f->members[m]].outputs[k] == b)
        return true;
  return false;
}

/* Whether the host steps, run by the runtime at their places (TIGHTFIT_HOST_COPIES=host: every group
 * found stays, each launch doing its members' work at its launch step), see what they would see
 * without fusion: no copy reads a buffer a group skips, and no member whose work moves across a
 * copy's place (the member on one side, the launch on the other) writes what the copy reads or
 * touches what it writes. *bad: the first host step that would not. */
static bool runtime_order_safe(const tf_plan *plan, const tf_cuda_fusion *groups, int32_t n, int32_t *bad) {
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *copy = &plan->host_steps[h];
    const int32_t p = plan->host_at[h];
    const span from = span_of(plan, copy->inputs[0]), to = span_of(plan, copy->outputs[0]);
    for (int32_t g = 0; g < n; g++) {
      const tf_cuda_fusion *f = &groups[g];
      bool ok = !skips(plan, f, copy->inputs[0]);
      for (int32_t m = 0; ok && p > f->first && p <= f->last && m < f->n_members; m++) {
        const int32_t i = f->members[m];
        if ((i < p) != (f->launch_step < p))
          ok = !writes_data(plan, i, from) && !touches_data(plan, i, to);
      }
      if (!ok) {
        *bad = h;
        return false;
      }
    }
  }
  return true;
}

static void check_schedule(const char *label, tf_plan *plan) {
  if (!plan)
    return;
  bool *taken = calloc((size_t)(plan->n_host_steps > 0 ? plan->n_host_steps : 1), sizeof(bool));
  int32_t n_taken = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *s = &plan->host_steps[h];
    taken[h] = s->op == TF_OP_RESHAPE && s->phase != TF_PHASE_OPTIMIZER;
    n_taken += taken[h] ? 1 : 0;
  }
  tf_cuda_fusion *groups = NULL;
  int32_t n_groups = 0, n_kept = 0;
  /* every kind of group, the GELU epilogue on every type included */
  tf_status status = tf_cuda_fusion_find(
      plan, (tf_cuda_fusion_options){.epilogues = true, .multi_tensor = true, .gelu_dtypes = ~0u}, &groups, &n_groups);
  CHECK(&counts, status == NULL, "%s: fusion: %s", label, tf_status_message(status));
  tf_status_free(status);
  int32_t bad_copy = -1;
  const bool runtime_safe = runtime_order_safe(plan, groups, n_groups, &bad_copy);
  CHECK(&counts, runtime_safe, "%s: run by the runtime, host step %d ('%s') would see a fused group's reordering",
        label, bad_copy, bad_copy >= 0 ? plan->host_steps[bad_copy].name : "?");
  bool *kept = calloc((size_t)(n_groups > 0 ? n_groups : 1), sizeof(bool));
  tf_cuda_copy_schedule k;
  status = tf_cuda_copy_schedule_make(plan, taken, groups, n_groups, kept, &k);
  CHECK(&counts, status == NULL && n_taken > 0, "%s: %d copies: %s", label, n_taken, tf_status_message(status));
  tf_status_free(status);
  if (status || n_taken == 0) {
    free(kept);
    free(groups);
    free(taken);
    tf_plan_destroy(plan);
    return;
  }
  /* every taken copy once, in run order; at its host step's place, or moved past steps that do not
   * touch the bytes it moves (a copy down later, a copy back earlier) */
  bool placed = k.n_copies == n_taken, moved_safely = true;
  int32_t downs = 0, beside = 0, joins = 0, moved = 0;
  for (int32_t c = 0; c < k.n_copies && placed; c++) {
    const int32_t h = k.copies[c].host_step, at = k.copies[c].at, was = plan->host_at[h];
    const tf_plan_step *copy = &plan->host_steps[h];
    placed = taken[h] && c >= k.first[at] && c < k.first[at + 1] && (c == 0 || k.copies[c - 1].at <= at) &&
             k.copies[c].down == (plan->buffers[copy->outputs[0]].region == TF_REGION_HOST) &&
             (k.copies[c].down ? at >= was : at <= was);
    for (int32_t i = was; k.copies[c].down && i < at; i++)
      moved_safely = moved_safely && !writes(plan, i, span_of(plan, copy->inputs[0]));
    for (int32_t i = at; !k.copies[c].down && i < was; i++)
      moved_safely = moved_safely && !touches(plan, i, span_of(plan, copy->outputs[0]));
    downs += k.copies[c].down ? 1 : 0;
    beside += k.copies[c].beside ? 1 : 0;
    moved += at != was ? 1 : 0;
  }
  CHECK(&counts, placed, "%s: the copies are not each at its place, in order", label);
  CHECK(&counts, moved_safely, "%s: a copy moved past a step that touches the bytes it moves", label);
  /* no kept group has a copy inside its span */
  bool inside = false;
  for (int32_t g = 0; g < n_groups; g++) {
    n_kept += kept[g] ? 1 : 0;
    for (int32_t c = 0; c < k.n_copies && kept[g]; c++)
      inside = inside || (k.copies[c].at > groups[g].first && k.copies[c].at <= groups[g].last);
  }
  CHECK(&counts, !inside, "%s: a kept fused group has a copy inside its span", label);
  /* nor a host step the runtime runs: it cuts the range there, so the group runs unfused, and a copy
   * moved out of the span would have passed that step's operands (which `touched` does not see) */
  int32_t runtime_inside = -1;
  for (int32_t g = 0; g < n_groups; g++)
    for (int32_t h = 0; h < plan->n_host_steps && kept[g]; h++)
      if (!taken[h] && plan->host_at[h] > groups[g].first && plan->host_at[h] <= groups[g].last)
        runtime_inside = h;
  CHECK(&counts, runtime_inside < 0, "%s: a kept fused group's span holds host step %d ('%s'), which the runtime runs",
        label, runtime_inside, runtime_inside >= 0 ? plan->host_steps[runtime_inside].name : "?");
  /* a copy down reads a buffer a fused launch writes: never a member's output it skips (the matmul's
   * product under a bias epilogue, z under a GELU one without the aux output) */
  int32_t skipped = -1;
  for (int32_t g = 0; g < n_groups && skipped < 0; g++)
    for (int32_t c = 0; c < k.n_copies && skipped < 0 && kept[g]; c++)
      if (k.copies[c].down && skips(plan, &groups[g], plan->host_steps[k.copies[c].host_step].inputs[0]))
        skipped = plan->host_steps[k.copies[c].host_step].inputs[0];
  CHECK(&counts, skipped < 0, "%s: a copy to the host reads buffer %d ('%s'), which a kept fused group never writes",
        label, skipped, skipped >= 0 ? plan->buffers[skipped].name : "?");
  for (int32_t i = 0; i < plan->micro_steps; i++)
    joins += k.join_before[i] ? 1 : 0;
  int32_t bad = -1;
  const bool safe = replay(plan, &k, groups, kept, n_groups, &bad);
  CHECK(&counts, safe, "%s: step %d ('%s') writes bytes a copy to the host may still read", label, bad,
        bad >= 0 ? plan->steps[bad].name : "?");
  printf("%-4s %s: %d copies (%d down, %d of them beside the steps; %d back; %d moved out of a group) among %d "
         "steps, %d waits before a step, %d of %d fused groups kept\n",
         placed && moved_safely && safe && !inside && skipped < 0 && runtime_safe ? "ok" : "FAIL", label, k.n_copies,
         downs, beside, k.n_copies - downs, moved, plan->micro_steps, joins, n_kept, n_groups);
  free(kept);
  free(groups);
  tf_cuda_copy_schedule_free(&k);
  free(taken);
  tf_plan_destroy(plan);
}

static tf_compile_options options(const char *bindings) {
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CUDA);
  o.bindings = bindings;
  o.optimizer = TF_OPTIMIZER_ADAMW;
  o.offload_activations = true;
  return o;
}

int main(void) {
  check_schedule("gpt2-small 1 layer", compile_zoo("gpt2-small", "layers=1", options("N=2,T=64")));
  tf_compile_options o = options("N=4,T=64");
  check_schedule("gpt 2 layers", compile_zoo("gpt", "layers=2", o));
  o.remat = TF_REMAT_CHECKPOINTS;
  check_schedule("gpt, recompute's checkpoints", compile_zoo("gpt", "layers=2", o));
  o = options("N=4,T=64");
  o.set_precision = true;
  o.precision = TF_PRECISION_BF16;
  o.accumulate = 2;
  check_schedule("gpt, bf16, 2 micro-batches", compile_zoo("gpt", "layers=2", o));
  o = options("N=4,T=64");
  o.offload_gradients = true;
  check_schedule("gpt, the gradients offloaded too", compile_zoo("gpt", "layers=2", o));
  o.accumulate = 2;
  check_schedule("gpt, the gradients offloaded too, 2 micro-batches", compile_zoo("gpt", "layers=2", o));
  o = options("N=2,T=64");
  o.offload_gradients = true;
  check_schedule("gpt2-small 1 layer, the gradients offloaded too", compile_zoo("gpt2-small", "layers=1", o));
  return tf_test_finish("test_cuda_copies", &counts);
}
