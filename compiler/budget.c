/* Pass 11, budget: the outer search over micro-batch N, accumulation k (N x k = the global batch),
 * recompute, half storage and the fused loss head's chunk, for the plan with the least estimated
 * step time that fits the budget. Each candidate is compiled for real, so every number compared is
 * an exact plan size; the cost model only ranks the candidates that fit. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/stages.h"
#include "core/linear_loss.h"
#include "graph/ir.h"
#include "tightfit/compiler.h"

/* The smallest chunk the search gives a fused loss head, and its step. 64 rows is the smallest
 * chunk measured (bench/results/performance-history.md: gpt2-small cut to 2 layers at 2 x 128 on the CPU, 1.46x the
 * unfused step in 64-row chunks against 1.25x in 256); below it the products get too thin for the
 * gemm, which the cost model does not see. Steps of 32 rows keep the chunk a multiple of the
 * kernels' tiles and the search to a few compiles. */
#define LOSS_CHUNK_FLOOR 64
#define LOSS_CHUNK_STEP 32

/* A plan's loss heads as the search sees them: the fused ones (linear_cross_entropy and its
 * gradients), and whether a matmul [-> add(bias)] feeding a cross_entropy over
 * TF_FUSE_LOSS_AUTO_CLASSES classes or more is left that the rewrite could fuse.
 *
 * A loss may sum several heads (xtts: text and audio). They all take one chunk option
 * (options.loss_chunk_rows, which the search sets: fuse_loss.c gives it to every fused head, capped
 * at its rows), so the search follows one of them, the head whose step has the largest workspace:
 * its chunk is where the search starts, and 4 x its classes bytes is the most that a row off the
 * chunk takes off the plan (the heads' workspaces are step scratch, live one step at a time, so the
 * peak holds at most one of them). The other heads' chunks move with it. */
typedef struct loss_head {
  bool fused, fusable;
  bool below_auto; /* fused: some fused head is under the auto thresholds (the search fused it) */
  int32_t heads;   /* fused heads (their forward steps) */
  int64_t rows, classes;
  int64_t chunk_rows; /* fused: the largest head's rows of logits computed at a time */
  int64_t workspace;  /* fused: the largest workspace of the heads' forward and gradient steps, bytes */
} loss_head;

static tf_tensor_ref shape_of(const tf_plan_buffer *b) { return tf_tensor_ref_make(NULL, b->dtype, b->rank, b->shape); }

static tf_linear_loss_geometry head_geometry(const tf_plan *plan, const tf_plan_step *step) {
  tf_tensor_ref x = shape_of(&plan->buffers[step->inputs[0]]), weight = shape_of(&plan->buffers[step->inputs[1]]);
  return tf_linear_loss_geometry_of(&step->attrs, &x, &weight);
}

static bool is_fused_head(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD || tf_linear_loss_is_train(op) || tf_linear_loss_accumulates(op);
}

static int32_t writer_of(const tf_plan *plan, int32_t buffer) {
  for (int32_t s = 0; s < plan->n_steps; s++)
    for (int32_t o = 0; o < plan->steps[s].n_outputs; o++)
      if (plan->steps[s].outputs[o] == buffer)
        return s;
  return -1;
}

/* Whether the step writing `logits` is a matmul, or an add of one (the bias). */
static bool from_product(const tf_plan *plan, int32_t logits) {
  const int32_t producer = writer_of(plan, logits);
  if (producer < 0)
    return false;
  const tf_plan_step *p = &plan->steps[producer];
  if (p->op == TF_OP_MATMUL)
    return true;
  for (int32_t k = 0; p->op == TF_OP_ADD && k < p->n_inputs; k++) {
    const int32_t product = writer_of(plan, p->inputs[k]);
    if (product >= 0 && plan->steps[product].op == TF_OP_MATMUL)
      return true;
  }
  return false;
}

static loss_head head_of(const tf_plan *plan) {
  loss_head h;
  memset(&h, 0, sizeof(h));
  int64_t largest = -1; /* the followed head's workspace, then its logits' elements, as one key */
  for (int32_t s = 0; s < plan->micro_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    if (is_fused_head(step->op)) {
      tf_linear_loss_geometry g = head_geometry(plan, step);
      int64_t workspace = step->workspace >= 0 ? plan->buffers[step->workspace].bytes : 0;
      int64_t key = workspace > 0 ? workspace : g.rows * g.classes;
      h.fused = true;
      if (key > largest) {
        largest = key;
        h.rows = g.rows;
        h.classes = g.classes;
        h.chunk_rows = g.chunk_rows;
      }
      h.workspace = workspace > h.workspace ? workspace : h.workspace;
      if (step->op == TF_OP_LINEAR_CROSS_ENTROPY || tf_linear_loss_is_train(step->op)) {
        h.heads++;
        h.below_auto =
            h.below_auto || g.classes < TF_FUSE_LOSS_AUTO_CLASSES || 4 * g.rows * g.classes < TF_FUSE_LOSS_AUTO_BYTES;
      }
    } else if (step->op == TF_OP_CROSS_ENTROPY && step->phase == TF_PHASE_FORWARD) {
      const tf_plan_buffer *logits = &plan->buffers[step->inputs[0]];
      int64_t classes = logits->rank > 0 ? logits->shape[logits->rank - 1] : 0;
      h.fusable = h.fusable || (logits->dtype == TF_F32 && classes >= TF_FUSE_LOSS_AUTO_CLASSES &&
                                from_product(plan, step->inputs[0]));
    }
  }
  return h;
}

/* The fused head's passes over its weight: each chunk reads the weight in the forward product and,
 * in the gradient, in the logits' recompute and in dx, and reads and writes dweight: 5 passes at the
 * target's memory bandwidth (4 in the single pass, linear_cross_entropy_train, which computes the
 * logits once). gpt2-small cut to 2 layers at 2 x 128 on the CPU (bench/results/performance-history.md,
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
/* The host steps of an offloaded plan (compiler/offload.c): the bytes moved between device and host
 * over the link, and every operand each host step reads or writes in host memory, at
 * TF_HOST_BYTES_PER_SECOND each (pageable, synchronous copies; host updates bound by memory). */
#define TF_HOST_BYTES_PER_SECOND 10e9
static double host_seconds(const tf_plan *plan) {
  double touched = 0;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    const double runs = step->phase == TF_PHASE_OPTIMIZER ? 1 : plan->accumulate;
    for (int32_t k = 0; k < step->n_inputs + step->n_outputs; k++) {
      bool written;
      touched += runs * (double)plan->buffers[tf_plan_step_operand(step, k, &written)].bytes;
    }
  }
  return ((double)tf_plan_host_moved_bytes(plan) + touched) / TF_HOST_BYTES_PER_SECOND;
}

static double estimate_seconds(const tf_plan *plan, const tf_target *target) {
  double flops = 0;
  for (int32_t s = 0; s < plan->micro_steps; s++)
    flops += plan->steps[s].flops;
  double per_step = target->kind == TF_TARGET_CPU ? 2e-6 : 10e-6;
  double micro = flops / target->flops_per_second + per_step * plan->micro_steps + head_pass_seconds(plan, target);
  double optimizer = 0;
  for (int32_t s = plan->micro_steps; s < plan->n_steps; s++)
    optimizer += plan->steps[s].flops;
  return plan->accumulate * micro + optimizer / target->flops_per_second + host_seconds(plan);
}

/* Appends one formatted line (or as much as fits) to the search's summary. */
static void say(tf_budget_result *result, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void say(tf_budget_result *result, const char *format, ...) {
  size_t used = strlen(result->summary), size = sizeof(result->summary);
  if (used + 1 >= size)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(result->summary + used, size - used, format, args);
  va_end(args);
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
static void append_saving(tf_budget_result *result, const char *choice, int64_t n, const plan_parts *plain,
                          const plan_parts *chosen) {
  char line[512];
  int64_t total = 0;
  int written = snprintf(line, sizeof(line), "  %s saved at N=%" PRId64 " against f32 without recompute:", choice, n);
  for (int r = 0; r <= TF_REGION_COUNT && written > 0 && (size_t)written < sizeof(line); r++) {
    int64_t saved = plain->bytes[r] - chosen->bytes[r];
    total += saved;
    if (saved != 0)
      written +=
          snprintf(line + written, sizeof(line) - (size_t)written, " %s %.2f MiB,",
                   r < TF_REGION_COUNT ? tf_region_name((tf_region)r) : "device overhead", (double)saved / 1048576.0);
  }
  say(result, "%s in all %.2f MiB\n", line, (double)total / 1048576.0);
}

static const char *precision_name(tf_precision precision) {
  return precision == TF_PRECISION_BF16 ? "bf16" : precision == TF_PRECISION_F16 ? "f16" : "f32";
}

/* One configuration to compile. */
typedef struct config {
  int64_t n;
  tf_remat_mode remat;
  bool half;
  bool fuse;          /* every loss head fused (--fuse-loss on) where auto left one unfused */
  int64_t chunk_rows; /* > 0: the fused head's chunk, chosen by the search */
} config;

/* What one compiled configuration was, read before the plan may be freed. */
typedef struct outcome {
  bool fits;
  int64_t bytes; /* device total */
  plan_parts parts;
  loss_head head;
} outcome;

typedef struct search {
  const tf_graph *graph;
  const tf_budget_options *o;
  tf_budget_result *result;
  tf_plan *best, *smallest;
  double best_seconds;
} search;

/* Keeps `plan` as the best and/or the smallest so far; frees whatever no longer has a role. */
static void keep(search *s, tf_plan *plan, bool better) {
  tf_plan *old_best = s->best, *old_smallest = s->smallest;
  if (better)
    s->best = plan;
  if (!s->smallest || tf_plan_device_total(plan) < tf_plan_device_total(s->smallest))
    s->smallest = plan;
  if (old_best && old_best != s->best && old_best != s->smallest)
    tf_plan_destroy(old_best);
  if (old_smallest && old_smallest != old_best && old_smallest != s->best && old_smallest != s->smallest)
    tf_plan_destroy(old_smallest);
  if (plan != s->best && plan != s->smallest)
    tf_plan_destroy(plan);
}

/* Whether `plan` updates parameters inside its micro-batch block (updates in the backward pass). */
static bool updates_in_backward(const tf_plan *plan) {
  for (int32_t s = 0; s < plan->micro_steps; s++)
    if (plan->steps[s].phase == TF_PHASE_OPTIMIZER)
      return true;
  return false;
}

/* Compiles `c`, says so in the summary and keeps the plan if it is the best or the smallest. */
static tf_status try_config(search *s, const config *c, outcome *out) {
  const tf_budget_options *o = s->o;
  char bindings[1100];
  if (o->base.bindings && *o->base.bindings)
    snprintf(bindings, sizeof(bindings), "%s,N=%" PRId64, o->base.bindings, c->n);
  else
    snprintf(bindings, sizeof(bindings), "N=%" PRId64, c->n);
  tf_compile_options options = o->base;
  options.bindings = bindings;
  options.accumulate = (int32_t)(o->global_batch / c->n);
  options.remat = c->remat;
  options.remat_budget = o->budget;
  /* Updates in the backward pass need one micro-batch per step and no f16 loss scaling: the other
   * candidates go without. */
  const bool legal = options.accumulate == 1 && !(c->half && o->precision == TF_PRECISION_F16);
  options.update_in_backward = legal ? o->base.update_in_backward : TF_CHOICE_OFF;
  if (c->half) {
    options.set_precision = true;
    options.precision = o->precision;
  }
  if (c->fuse)
    options.fuse_loss = TF_FUSE_LOSS_ON;
  if (c->chunk_rows > 0)
    options.loss_chunk_rows = c->chunk_rows;
  tf_plan *plan = NULL;
  TF_RETURN_IF_ERROR(tf_compile(s->graph, &options, &plan));
  s->result->tried++;
  out->bytes = tf_plan_device_total(plan);
  out->fits = out->bytes <= o->budget;
  out->parts = parts_of(plan);
  out->head = head_of(plan);
  double seconds = estimate_seconds(plan, &o->base.target);
  bool better = out->fits && (!s->best || seconds < s->best_seconds);
  char head[96] = "";
  if (c->fuse || c->chunk_rows > 0)
    snprintf(head, sizeof(head), "%s, loss chunk %" PRId64 " rows", c->fuse ? ", fused loss head" : "",
             out->head.chunk_rows);
  if (updates_in_backward(plan))
    snprintf(head + strlen(head), sizeof(head) - strlen(head), ", updates in backward");
  say(s->result, "N=%" PRId64 " x k=%d, recompute %s, %s%s: %.2f GiB, %.3f s/step%s\n", c->n, options.accumulate,
      c->remat == TF_REMAT_AUTO ? "auto" : "none", precision_name(plan->training_config.precision), head,
      (double)out->bytes / 1073741824.0, seconds,
      out->fits ? (better ? " (fits, fastest so far)" : " (fits)") : " (does not fit)");
  if (better) {
    s->best_seconds = seconds;
    s->result->remat = c->remat;
    s->result->precision = plan->training_config.precision;
  }
  keep(s, plan, better);
  return NULL;
}

/* The chunk of candidate i: LOSS_CHUNK_FLOOR, then a step of rows more each. */
static int64_t chunk_at(int32_t i) { return LOSS_CHUNK_FLOOR + (int64_t)i * LOSS_CHUNK_STEP; }

/* The loss heads of a configuration `c` whose plan (`as_is`) does not fit: every head fused where
 * --fuse-loss auto left one unfused, then the largest chunk on the grid below the default that fits
 * (one chunk for every head, the followed head's: loss_head). The
 * workspace is one chunk of f32 logits (4 x classes bytes a row; core/workspace_cpu.c,
 * core/workspace_cuda.h) plus parts that do not depend on the chunk, so taking r rows off the chunk
 * takes about 4 x classes x r bytes off the plan at most, and no chunk takes off more than the whole
 * workspace (a plan over by more is not searched). The first probe is the largest chunk that takes
 * off enough; one that fits is followed by the next chunk up, and a binary search finishes: the
 * chunk found fits and the next one up does not. An explicit --loss-chunk is kept, --fuse-loss off
 * never fused, and a head without a workspace (Vulkan) has nothing to shrink. Sets *fitted when a
 * plan fits; `next` names what the search tries after this (for the note). */
static tf_status fit_loss_head(search *s, const config *c, const outcome *as_is, const char *next, bool *fitted) {
  const tf_compile_options *base = &s->o->base;
  if (base->fuse_loss == TF_FUSE_LOSS_OFF || (!as_is->head.fused && !as_is->head.fusable))
    return NULL;
  config head = *c;
  outcome start = *as_is;
  if (start.head.fusable && base->fuse_loss == TF_FUSE_LOSS_AUTO && !c->fuse) {
    head.fuse = true;
    TF_RETURN_IF_ERROR(try_config(s, &head, &start));
    if (start.head.heads <= as_is->head.heads)
      return NULL; /* the rewrite did not match after all */
    say(s->result,
        "  loss head%s fused at N=%" PRId64
        " (tried before %s; auto fuses only at 128 MiB of logits or more): device total "
        "%.2f MiB %s, in %" PRId64 "-row chunks%s\n",
        start.head.heads > 1 ? "s" : "", c->n, next, fabs((double)(as_is->bytes - start.bytes)) / 1048576.0,
        start.bytes <= as_is->bytes ? "less" : "more (the chunk's workspace outweighs the logits at this batch)",
        start.head.chunk_rows, start.fits ? "" : ", still over");
    if (start.fits) {
      *fitted = true;
      return NULL;
    }
  }
  if (!start.head.fused)
    return NULL;
  const int64_t first = start.head.chunk_rows, over = start.bytes - s->o->budget;
  if (base->loss_chunk_rows > 0 || start.head.workspace == 0 || first <= LOSS_CHUNK_FLOOR ||
      over > start.head.workspace)
    return NULL; /* the user's chunk; nothing to shrink; or more over than the whole workspace */
  /* bisection over the chunk sizes: each probe is compiled and checked, so the chunk chosen fits; where
   * the bytes are not monotone in the chunk (the Vulkan head's dx slices, core/linear_loss.h) it may be
   * smaller than the largest that would */
  const int32_t count = (int32_t)((first - LOSS_CHUNK_FLOOR - 1) / LOSS_CHUNK_STEP + 1);
  const int64_t row_bytes = 4 * start.head.classes;
  const int64_t wanted = first - (over + row_bytes - 1) / row_bytes;
  int32_t lo = -1, hi = count; /* chunk_at(lo) fits (-1: none known), chunk_at(hi) does not (count: first) */
  int32_t probe = wanted < LOSS_CHUNK_FLOOR ? 0 : (int32_t)((wanted - LOSS_CHUNK_FLOOR) / LOSS_CHUNK_STEP);
  probe = probe >= count ? count - 1 : probe;
  bool fitted_before = false;
  outcome at_lo;
  memset(&at_lo, 0, sizeof(at_lo));
  while (hi - lo > 1) {
    head.chunk_rows = chunk_at(probe);
    outcome tried;
    TF_RETURN_IF_ERROR(try_config(s, &head, &tried));
    if (tried.fits) {
      lo = probe;
      at_lo = tried;
      probe = fitted_before ? lo + (hi - lo) / 2 : lo + 1;
      fitted_before = true;
    } else {
      hi = probe;
      probe = lo < 0 ? 0 : lo + (hi - lo) / 2; /* past the bound: the peak is elsewhere, try the floor */
    }
    if (probe <= lo || probe >= hi)
      probe = lo + (hi - lo) / 2;
  }
  if (lo < 0)
    return NULL;
  say(s->result,
      "  loss chunk %" PRId64 " rows chosen at N=%" PRId64
      " (tried before %s): workspace %.2f MiB less than the default "
      "%" PRId64 "-row chunk, device total %.2f MiB less; %" PRId64 " rows does not fit\n",
      chunk_at(lo), c->n, next, (double)(start.head.workspace - at_lo.head.workspace) / 1048576.0, first,
      (double)(start.bytes - at_lo.bytes) / 1048576.0, hi < count ? chunk_at(hi) : first);
  *fitted = true;
  return NULL;
}

/* A line in the chosen plan's notes when the search changed its loss head. */
static void note_head(tf_plan *plan, const tf_compile_options *base) {
  loss_head h = head_of(plan);
  if (!h.fused || !plan->report.notes)
    return;
  int64_t usual = base->loss_chunk_rows > 0 ? base->loss_chunk_rows : tf_fuse_loss_chunk_rows(base, h.rows, h.classes);
  usual = usual > h.rows ? h.rows : usual;
  bool fused_here = base->fuse_loss == TF_FUSE_LOSS_AUTO && h.below_auto;
  char line[300];
  if (fused_here)
    snprintf(line, sizeof(line),
             "loss head%s: fused by the budget search (auto fuses only at 128 MiB of logits or more), %" PRId64
             "-row chunks\n",
             h.heads > 1 ? "s" : "", h.chunk_rows);
  else if (h.chunk_rows != usual)
    snprintf(line, sizeof(line),
             "loss head: %" PRId64 "-row chunks chosen by the budget search (the default %" PRId64
             "-row chunk does not fit)\n",
             h.chunk_rows, usual);
  else
    return;
  tf_plan_note(plan, line);
}

static const char *const level_names[] = {"half storage", "recompute", "half storage + recompute"};

/* The search over micro-batch, accumulation, precision and recompute with `o` as it is. */
static tf_status search_plans(const tf_graph *graph, const tf_budget_options *o, tf_plan **out,
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
  search s = {.graph = graph, .o = o, .result = result};
  tf_status status = NULL;
  for (int64_t n = o->global_batch; n >= 1 && !status; n--) {
    if (o->global_batch % n != 0)
      continue;
    /* At each micro-batch, levels in order of cost: as it is, half storage (a cast each way),
     * recompute, both; the first level that fits as it is ends this micro-batch's attempts. A level
     * that does not fit tries its loss head before the next level (fit_loss_head: fused where
     * --fuse-loss auto left it unfused, then the largest chunk that fits): the head changes no
     * stored precision and recomputes no layer, it costs weight passes per extra chunk (and, fused,
     * one more product), which estimate_seconds counts. Those can cost more than a cast or a little
     * recompute, so a level that fits only through its head does not end the micro-batch: the
     * next levels are compiled as they are (no second head search) until one fits, and the faster
     * plan is kept, as across micro-batches. */
    plan_parts plain;
    memset(&plain, 0, sizeof(plain));
    bool head_fitted = false;
    for (int attempt = 0; attempt < 4 && !status; attempt++) {
      config c = {.n = n, .remat = attempt >= 2 ? TF_REMAT_AUTO : TF_REMAT_NONE, .half = attempt % 2 == 1};
      if ((c.remat == TF_REMAT_AUTO && !o->allow_remat) || (c.half && !o->allow_precision))
        continue;
      outcome as_is;
      status = try_config(&s, &c, &as_is);
      if (status)
        break;
      if (attempt == 0)
        plain = as_is.parts;
      if (as_is.fits) {
        if (attempt > 0)
          append_saving(result, level_names[attempt - 1], n, &plain, &as_is.parts);
        break; /* no need for a dearer level at this micro-batch */
      }
      if (head_fitted)
        continue;
      const char *next = "giving up on this micro-batch";
      for (int later = attempt + 1; later < 4; later++)
        if ((later < 2 || o->allow_remat) && (later % 2 == 0 || o->allow_precision)) {
          next = level_names[later - 1];
          break;
        }
      status = fit_loss_head(&s, &c, &as_is, next, &head_fitted);
    }
  }
  if (status) {
    if (s.smallest != s.best)
      tf_plan_destroy(s.smallest);
    tf_plan_destroy(s.best);
    return status;
  }
  if (!s.best && !s.smallest)
    return tf_status_new(TF_ERR_INTERNAL, "budget search compiled nothing");
  tf_plan *chosen = s.best ? s.best : s.smallest;
  if (s.smallest != chosen)
    tf_plan_destroy(s.smallest);
  result->fits = s.best != NULL;
  result->micro_batch = chosen->micro_batch;
  result->accumulate = chosen->accumulate;
  result->total_bytes = tf_plan_device_total(chosen);
  result->seconds_per_step = estimate_seconds(chosen, &o->base.target);
  loss_head head = head_of(chosen);
  result->loss_chunk_rows = head.fused ? head.chunk_rows : 0;
  result->optimizer = chosen->training_config.optimizer;
  if (!s.best) {
    result->remat = o->allow_remat ? TF_REMAT_AUTO : TF_REMAT_NONE;
    result->precision = chosen->training_config.precision;
  }
  note_head(chosen, &o->base);
  *out = chosen;
  return NULL;
}

/* Parameters, gradients and optimizer state of `plan`, for the line that says what LoRA saved. */
static void trained_bytes(const tf_plan *plan, int64_t bytes[3]) {
  bytes[0] = plan->region_bytes[TF_REGION_PARAMETERS];
  bytes[1] = plan->region_bytes[TF_REGION_GRADIENTS];
  bytes[2] = plan->region_bytes[TF_REGION_OPTIMIZER_STATE];
}

/* The optimizer a plan of `graph` compiled with `base` trains with, as compile.c resolves it: the
 * options', else the graph's, else SGD. */
static tf_optimizer optimizer_of(const tf_graph *graph, const tf_compile_options *base) {
  const tf_training_config *own = tf_graph_training(graph);
  if (base->optimizer != TF_OPTIMIZER_NONE)
    return base->optimizer;
  return own && own->optimizer != TF_OPTIMIZER_NONE ? own->optimizer : TF_OPTIMIZER_SGD;
}

/* The length of `text` cut to at most `limit` characters, at the end of a line where it must be cut. */
static int cut_at_line(const char *text, size_t limit) {
  size_t length = strlen(text);
  if (length <= limit)
    return (int)length;
  while (limit > 0 && text[limit - 1] != '\n')
    limit--;
  return (int)limit;
}

/* After a second search (`other`, `with`) for a chosen plan (*out, *result) that fits nowhere: keeps
 * the one that fits, else the smaller, and frees the plan left; counts both searches' compiles; the
 * summary becomes the first search's lines (cut to `share` characters where they must), `headline`,
 * then the second search's. Returns whether the second was taken. */
static bool keep_better(tf_plan **out, tf_budget_result *result, tf_plan *other, const tf_budget_result *with,
                        size_t share, const char *headline) {
  char first[sizeof(result->summary)];
  snprintf(first, sizeof(first), "%s", result->summary);
  const int32_t tried = result->tried + with->tried;
  const bool take = with->fits || with->total_bytes < result->total_bytes;
  if (take) {
    tf_plan_destroy(*out);
    *out = other;
    *result = *with;
  } else {
    tf_plan_destroy(other);
  }
  result->tried = tried;
  const size_t size = sizeof(result->summary);
  int written = snprintf(result->summary, size, "%.*s%s", cut_at_line(first, share), first, headline);
  if (written > 0 && (size_t)written < size)
    snprintf(result->summary + written, size - (size_t)written, "%.*s", (int)(size - (size_t)written - 1),
             with->summary);
  return take;
}

/* A second search's error: the first search's plan is freed (a caller owns no plan after an error). */
static tf_status drop_plan(tf_plan **out, tf_status status) {
  tf_plan_destroy(*out);
  *out = NULL;
  return status;
}

/* The line saying what 8-bit AdamW state saved: optimizer state of the smallest AdamW plan (`adamw`)
 * against the 8-bit search's plan (`eight`). */
static void say_8bit_saving(char *line, size_t size, const tf_plan *adamw, const tf_plan *eight, bool fits) {
  const int64_t before = adamw->region_bytes[TF_REGION_OPTIMIZER_STATE];
  const int64_t after = eight->region_bytes[TF_REGION_OPTIMIZER_STATE];
  snprintf(line, size,
           "nothing fits with AdamW's f32 moments: with 8-bit AdamW state (--allow-optimizer adamw8bit) %s\n"
           "  8-bit state saved %.2f MiB of optimizer state at the smallest plans (%.2f MiB against %.2f MiB; "
           "every parameter still trained)\n",
           fits ? "it fits:" : "it does not fit either", (double)(before - after) / 1048576.0,
           (double)after / 1048576.0, (double)before / 1048576.0);
}

/* What each offloading search of --allow-offload adds to host memory, in its order. */
typedef enum offload_stage { OFFLOAD_STATE, OFFLOAD_GRADIENTS, OFFLOAD_ACTIVATIONS } offload_stage;

/* The line saying what an offloading search saved on the device and what it moves: the smallest plan
 * before (`kept`) against the offloaded search's (`host`). */
static void say_offload_saving(char *line, size_t size, offload_stage stage, const tf_plan *kept, const tf_plan *host,
                               bool fits) {
  static const char *const on_device[] = {"optimizer state", "gradients", "activations kept for the backward pass"};
  snprintf(line, size,
           "nothing fits with the %s on the device: with %s in host memory (--allow-offload) %s\n"
           "  offloading saved %.2f MiB of device memory at the smallest plans (%.2f MiB of %s in host memory, "
           "%.2f MiB moved between device and host per step)\n",
           on_device[stage], stage == OFFLOAD_STATE ? "it" : "them", fits ? "it fits:" : "it does not fit either",
           (double)(tf_plan_device_total(kept) - tf_plan_device_total(host)) / 1048576.0,
           (double)host->host_bytes / 1048576.0, tf_plan_host_contents(host),
           (double)tf_plan_host_moved_bytes(host) / 1048576.0);
}

/* One offloading search after a chosen plan that fits nowhere (the optimizer state in host memory,
 * then the gradients too, then the activations too): keeps the better as keep_better does, and
 * `searched` becomes its options when taken. */
static tf_status search_offloaded(const tf_graph *graph, tf_budget_options *searched, offload_stage stage, size_t share,
                                  tf_plan **out, tf_budget_result *result) {
  tf_budget_options host = *searched;
  host.base.offload_optimizer = true;
  host.base.offload_gradients = stage >= OFFLOAD_GRADIENTS;
  host.base.offload_activations = stage >= OFFLOAD_ACTIVATIONS;
  if (host.base.update_in_backward != TF_CHOICE_OFF)
    host.base.update_in_backward = TF_CHOICE_OFF;
  tf_plan *plan = NULL;
  tf_budget_result with;
  tf_status status = search_plans(graph, &host, &plan, &with);
  if (status)
    return drop_plan(out, status);
  char headline[768];
  say_offload_saving(headline, sizeof(headline), stage, *out, plan, with.fits);
  if (keep_better(out, result, plan, &with, share, headline))
    *searched = host;
  return NULL;
}

/* The line saying what LoRA rank `rank` saved: the smallest plan training every parameter (`full`)
 * against the LoRA search's plan (`adapted`). */
static void say_lora_saving(char *line, size_t size, int32_t rank, const tf_plan *full, const tf_plan *adapted,
                            bool fits) {
  int64_t before[3], after[3];
  trained_bytes(full, before);
  trained_bytes(adapted, after);
  snprintf(line, size,
           "training every parameter fits nowhere: with LoRA rank %d (--allow-lora) %s\n"
           "  LoRA saved at the smallest plans: parameters %.2f MiB, gradients %.2f MiB, optimizer "
           "state %.2f MiB (the adapters trained, the rest frozen)\n",
           rank, fits ? "it fits:" : "it does not fit either", (double)(before[0] - after[0]) / 1048576.0,
           (double)(before[1] - after[1]) / 1048576.0, (double)(before[2] - after[2]) / 1048576.0);
}

/* `o` with 8-bit AdamW state (compile.c keeps the graph's AdamW learning rate, betas and epsilon). */
static tf_budget_options with_8bit_state(const tf_budget_options *o) {
  tf_budget_options eight = *o;
  eight.base.optimizer = TF_OPTIMIZER_ADAMW8BIT;
  return eight;
}

tf_status tf_compile_budget(const tf_graph *graph, const tf_budget_options *given, tf_plan **out,
                            tf_budget_result *result) {
  /* The search fuses loss heads itself where a configuration does not fit, and prefers the faster
   * unfused head where it does: the default SMALLEST is its AUTO. */
  tf_budget_options searched = *given;
  if (searched.base.fuse_loss == TF_FUSE_LOSS_SMALLEST)
    searched.base.fuse_loss = TF_FUSE_LOSS_AUTO;
  const tf_optimizer optimizer = optimizer_of(graph, &searched.base);
  *out = NULL;
  if (searched.allow_offload && searched.base.target.kind == TF_TARGET_CPU)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-offload: the cpu target's device memory is host memory already; offloading moves "
                         "nothing (search for --target cuda or vulkan)");
  if (searched.allow_optimizer_8bit && optimizer == TF_OPTIMIZER_SGD)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--allow-optimizer adamw8bit: graph '%s' trains with SGD, which keeps no Adam moments to "
                         "store in 8 bits (give --optimizer adamw, or leave the 8-bit state out)",
                         graph->name);
  TF_RETURN_IF_ERROR(search_plans(graph, &searched, out, result));
  /* Nothing fits with AdamW's f32 moments: the same search with 8-bit moments (2.031 bytes of state a
   * parameter against 8) before LoRA, since it keeps every parameter trained; LoRA, when allowed,
   * then starts from the 8-bit options. The 8-bit headline keeps a third of the summary for the first
   * search, so that LoRA's cut (half) still leaves it. */
  tf_plan *plan = NULL;
  tf_budget_result with;
  char headline[768];
  if (!result->fits && searched.allow_optimizer_8bit && optimizer == TF_OPTIMIZER_ADAMW) {
    const tf_budget_options eight = with_8bit_state(&searched);
    tf_status status = search_plans(graph, &eight, &plan, &with);
    if (status)
      return drop_plan(out, status);
    say_8bit_saving(headline, sizeof(headline), *out, plan, with.fits);
    if (keep_better(out, result, plan, &with, sizeof(result->summary) / 3, headline))
      searched = eight;
  }
  /* Still nothing: the optimizer state in host memory (compiler/offload.c), then the gradients too,
   * before LoRA (every parameter stays trained; each step moves the parameters and gradients
   * instead). */
  if (!result->fits && searched.allow_offload && !searched.base.offload_optimizer && !searched.base.offload_gradients)
    TF_RETURN_IF_ERROR(search_offloaded(graph, &searched, OFFLOAD_STATE, sizeof(result->summary) / 3, out, result));
  if (!result->fits && searched.allow_offload && !searched.base.offload_gradients)
    TF_RETURN_IF_ERROR(search_offloaded(graph, &searched, OFFLOAD_GRADIENTS, sizeof(result->summary) / 4, out, result));
  if (!result->fits && searched.allow_offload && !searched.base.offload_activations)
    TF_RETURN_IF_ERROR(
        search_offloaded(graph, &searched, OFFLOAD_ACTIVATIONS, sizeof(result->summary) / 5, out, result));
  if (result->fits || searched.allow_lora_rank <= 0 || searched.base.lora_rank > 0)
    return NULL;
  /* Nothing fits training every parameter: the same search with LoRA adapters (--allow-lora R) on
   * the --lora-targets weights, or on every linear weight when none is named. */
  tf_budget_options lora = searched;
  lora.base.lora_rank = searched.allow_lora_rank;
  lora.base.lora_all_linear = searched.base.lora_target_count == 0;
  tf_status status = search_plans(graph, &lora, &plan, &with);
  if (status)
    return drop_plan(out, status);
  say_lora_saving(headline, sizeof(headline), lora.base.lora_rank, *out, plan, with.fits);
  const bool taken = keep_better(out, result, plan, &with, sizeof(result->summary) / 2, headline);
  result->lora_rank = taken ? lora.base.lora_rank : 0; /* the chosen plan's, fitting or the smallest found */
  return NULL;
}
