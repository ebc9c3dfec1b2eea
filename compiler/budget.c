/* Pass 11, budget: the outer search over micro-batch N, accumulation k (N x k = the global batch)
 * and recompute, for the plan with the least estimated step time that fits the budget. Each
 * candidate is compiled for real, so every number compared is an exact plan size; the cost model
 * only ranks the candidates that fit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linear_loss.h"
#include "graph/ir.h"
#include "tightfit/compiler.h"

static tf_tensor_ref shape_of(const tf_plan_buffer *b) {
  tf_tensor_ref t;
  memset(&t, 0, sizeof(t));
  t.dtype = b->dtype;
  t.rank = b->rank;
  t.count = 1;
  for (int32_t d = 0; d < b->rank; d++) {
    t.shape[d] = b->shape[d];
    t.count *= b->shape[d];
  }
  return t;
}

static tf_linear_loss_geometry head_geometry(const tf_plan *plan, const tf_plan_step *step) {
  tf_tensor_ref x = shape_of(&plan->buffers[step->inputs[0]]), weight = shape_of(&plan->buffers[step->inputs[1]]);
  return tf_linear_loss_geometry_of(&step->attrs, &x, &weight);
}

static bool is_fused_head(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD;
}

/* The fused head's passes over its weight: each chunk reads the weight in the forward product and,
 * in the gradient, in the logits' recompute and in dx, and reads and writes dweight: 5 passes at the
 * target's memory bandwidth. gpt2-small cut to 2 layers at 2 x 128 on the CPU (docs/performance.md,
 * 1 thread): with the head's extra product this adds 0.21, 0.29 and 0.44 s to the unfused step in
 * 1, 2 and 4 chunks; measured 0.25, 0.32 and 0.46 s. Only kernels that chunk into a workspace count
 * (CPU, CUDA). */
static double head_pass_seconds(const tf_plan *plan, const tf_target *target) {
  if (target->bytes_per_second <= 0)
    return 0;
  double bytes = 0;
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (!is_fused_head(step->op) || step->workspace < 0)
      continue;
    tf_linear_loss_geometry g = head_geometry(plan, step);
    int64_t chunks = g.chunk_rows > 0 ? (g.rows + g.chunk_rows - 1) / g.chunk_rows : 0;
    double passes = step->op == TF_OP_LINEAR_CROSS_ENTROPY ? 1 : 4;
    bytes += (double)chunks * passes * (double)plan->buffers[step->inputs[1]].bytes;
  }
  return bytes / target->bytes_per_second;
}

/* Step time: FLOPs at the target's throughput plus a fixed cost per executed step (kernel launch,
 * synchronisation) and the fused loss head's weight passes, times the micro-batches per optimizer
 * step. */
static double estimate_seconds(const tf_plan *plan, const tf_target *target) {
  double flops = 0;
  for (int32_t s = 0; s < plan->micro_steps; s++)
    flops += plan->steps[s].flops;
  double per_step = target->kind == TF_TARGET_CPU ? 2e-6 : 10e-6;
  double micro = flops / target->flops_per_second + per_step * plan->micro_steps + head_pass_seconds(plan, target);
  double optimizer = 0;
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++)
    optimizer += plan->steps[s].flops;
  return plan->accumulate * micro + optimizer / target->flops_per_second;
}

static void append(char *summary, int64_t n, int32_t k, const char *mode, const char *precision, int64_t bytes,
                   double seconds, const char *verdict) {
  size_t used = strlen(summary);
  if (used < 1023)
    snprintf(summary + used, 1024 - used, "N=%" PRId64 " x k=%d, recompute %s, %s: %.2f GiB, %.3f s/step%s\n", n, k,
             mode, precision, (double)bytes / 1073741824.0, seconds, verdict);
}

/* What a plan holds, part by part: its regions, then the device overhead. */
typedef struct plan_parts {
  int64_t bytes[TF_REGION_COUNT + 1];
} plan_parts;

static plan_parts parts_of(const tf_plan *plan) {
  plan_parts p;
  for (int r = 0; r < TF_REGION_COUNT; r++)
    p.bytes[r] = plan->region_bytes[r];
  p.bytes[TF_REGION_COUNT] = tf_plan_overhead_bytes(plan);
  return p;
}

/* One summary line: what the choice saved at its micro-batch, per part, against the plain plan
 * (f32, no recompute) tried first there. */
static void append_saving(char *summary, const char *choice, int64_t n, const plan_parts *plain,
                          const plan_parts *chosen) {
  size_t used = strlen(summary);
  if (used + 1 >= 1024)
    return;
  int64_t total = 0;
  char *end = summary + used;
  size_t left = 1024 - used;
  int written = snprintf(end, left, "  %s saved at N=%" PRId64 " against f32 without recompute:", choice, n);
  for (int r = 0; r <= TF_REGION_COUNT && written > 0 && (size_t)written < left; r++) {
    int64_t saved = plain->bytes[r] - chosen->bytes[r];
    total += saved;
    if (saved != 0)
      written +=
          snprintf(end + written, left - (size_t)written, " %s %.2f MiB,",
                   r < TF_REGION_COUNT ? tf_region_name((tf_region)r) : "device overhead", (double)saved / 1048576.0);
  }
  if (written > 0 && (size_t)written < left)
    snprintf(end + written, left - (size_t)written, " in all %.2f MiB\n", (double)total / 1048576.0);
}

static const char *precision_name(tf_precision precision) {
  return precision == TF_PRECISION_BF16 ? "bf16" : precision == TF_PRECISION_F16 ? "f16" : "f32";
}

/* Keeps `plan` as the best and/or the smallest so far; frees whatever no longer has a role. */
static void keep(tf_plan *plan, bool better, tf_plan **best, tf_plan **smallest) {
  tf_plan *old_best = *best, *old_smallest = *smallest;
  if (better)
    *best = plan;
  if (!*smallest || tf_plan_device_total(plan) < tf_plan_device_total(*smallest))
    *smallest = plan;
  if (old_best && old_best != *best && old_best != *smallest)
    tf_plan_destroy(old_best);
  if (old_smallest && old_smallest != old_best && old_smallest != *best && old_smallest != *smallest)
    tf_plan_destroy(old_smallest);
  if (plan != *best && plan != *smallest)
    tf_plan_destroy(plan);
}

static tf_status try_one(const tf_graph *graph, const tf_budget_options *o, int64_t n, tf_remat_mode remat, bool half,
                         tf_plan **plan) {
  char bindings[1100];
  if (o->base.bindings && *o->base.bindings)
    snprintf(bindings, sizeof(bindings), "%s,N=%" PRId64, o->base.bindings, n);
  else
    snprintf(bindings, sizeof(bindings), "N=%" PRId64, n);
  tf_compile_options options = o->base;
  options.bindings = bindings;
  options.accumulate = (int32_t)(o->global_batch / n);
  options.remat = remat;
  options.remat_budget = o->budget;
  if (half) {
    options.set_precision = true;
    options.precision = o->precision;
  }
  return tf_compile(graph, &options, plan);
}

tf_status tf_compile_budget(const tf_graph *graph, const tf_budget_options *o, tf_plan **out,
                            tf_budget_result *result) {
  *out = NULL;
  memset(result, 0, sizeof(*result));
  if (o->global_batch < 1 || o->global_batch > (1 << 20))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "global batch %" PRId64 " is outside 1..%d", o->global_batch,
                         1 << 20);
  if (o->budget <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "the budget must be positive");
  if (tf_ir_find_symbol(graph, "N") < 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "graph '%s' has no batch symbol N to search", graph->name);
  if (o->base.bindings && strstr(o->base.bindings, "N="))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--set N=... and --global-batch both fix the batch: give one");
  tf_plan *best = NULL, *smallest = NULL;
  double best_seconds = 0;
  tf_status status = NULL;
  for (int64_t n = o->global_batch; n >= 1 && !status; n--) {
    if (o->global_batch % n != 0)
      continue;
    int32_t k = (int32_t)(o->global_batch / n);
    /* At each micro-batch, in order of cost: as it is, half storage (a cast each way), recompute,
     * both; the first that fits ends this micro-batch's attempts. */
    plan_parts plain;
    memset(&plain, 0, sizeof(plain));
    for (int attempt = 0; attempt < 4 && !status; attempt++) {
      tf_remat_mode remat = attempt >= 2 ? TF_REMAT_AUTO : TF_REMAT_NONE;
      bool half = attempt % 2 == 1;
      if ((remat == TF_REMAT_AUTO && !o->allow_remat) || (half && !o->allow_precision))
        continue;
      tf_plan *plan = NULL;
      status = try_one(graph, o, n, remat, half, &plan);
      if (status)
        break;
      result->tried++;
      int64_t bytes = tf_plan_device_total(plan);
      double seconds = estimate_seconds(plan, &o->base.target);
      bool fits = bytes <= o->budget;
      bool better = fits && (!best || seconds < best_seconds);
      append(result->summary, n, k, remat == TF_REMAT_AUTO ? "auto" : "none",
             precision_name(plan->training_config.precision), bytes, seconds,
             fits ? (better ? " (fits, fastest so far)" : " (fits)") : " (does not fit)");
      if (attempt == 0)
        plain = parts_of(plan);
      if (fits && attempt > 0) {
        plan_parts chosen = parts_of(plan);
        append_saving(result->summary,
                      half && remat == TF_REMAT_AUTO ? "half storage + recompute"
                      : half                         ? "half storage"
                                                     : "recompute",
                      n, &plain, &chosen);
      }
      if (better) {
        best_seconds = seconds;
        result->remat = remat;
        result->precision = plan->training_config.precision;
      }
      keep(plan, better, &best, &smallest);
      if (fits)
        break; /* no need to recompute at this micro-batch */
    }
  }
  if (status) {
    if (smallest != best)
      tf_plan_destroy(smallest);
    tf_plan_destroy(best);
    return status;
  }
  if (!best && !smallest)
    return tf_status_new(TF_ERR_INTERNAL, "budget search compiled nothing");
  tf_plan *chosen = best ? best : smallest;
  if (smallest != chosen)
    tf_plan_destroy(smallest);
  result->fits = best != NULL;
  result->micro_batch = chosen->micro_batch;
  result->accumulate = chosen->accumulate;
  result->total_bytes = tf_plan_device_total(chosen);
  result->seconds_per_step = estimate_seconds(chosen, &o->base.target);
  if (!best) {
    result->remat = o->allow_remat ? TF_REMAT_AUTO : TF_REMAT_NONE;
    result->precision = chosen->training_config.precision;
  }
  *out = chosen;
  return NULL;
}
