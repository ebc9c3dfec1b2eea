/* tf_compile: the pass pipeline and the training options. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/stages.h"
#include "graph/passes.h"

tf_compile_options tf_compile_options_default(tf_target_kind target) {
  tf_compile_options options;
  memset(&options, 0, sizeof(options));
  options.target = tf_target_default(target);
  options.training = true;
  options.optimizer = TF_OPTIMIZER_NONE;
  options.learning_rate = 0;
  options.accumulate = 0;
  options.clip_norm = -1;
  options.weight_decay = -1;
  return options;
}

/* Whether `optimizer` keeps Adam's two moments (AdamW, 8-bit AdamW): their defaults are AdamW's. */
static bool adam_moments(tf_optimizer optimizer) {
  return optimizer == TF_OPTIMIZER_ADAMW || optimizer == TF_OPTIMIZER_ADAMW8BIT;
}

/* Why a plan of `c` cannot update its parameters in the backward pass, or NULL when it can. */
static const char *update_in_backward_refusal(const tf_training_config *c) {
  return c->accumulate_steps > 1 ? "it accumulates micro-batches (--accumulate > 1)"
         : c->clip_norm > 0      ? "it clips the global gradient norm (--clip)"
         : c->loss_scale > 0     ? "it stores f16 activations, so it scales the loss and skips overflowed updates"
                                 : NULL;
}

/* The graph's training configuration with the command line's choices applied, defaults filled. */
static tf_status resolve_config(const tf_graph *g, const tf_compile_options *o, tf_training_config *c) {
  if (g->has_training)
    *c = g->training;
  else
    memset(c, 0, sizeof(*c));
  if (o->optimizer != TF_OPTIMIZER_NONE && c->optimizer != TF_OPTIMIZER_NONE &&
      adam_moments(c->optimizer) != adam_moments(o->optimizer)) {
    /* the graph's learning rate, momentum, betas and epsilon were its own optimizer's (mlp's SGD lr 0.05
     * is no AdamW rate): another optimizer starts from its own defaults, below, unless the options say.
     * AdamW and 8-bit AdamW are one optimizer with two ways of storing its moments: they share them. */
    c->learning_rate = c->momentum = c->beta1 = c->beta2 = c->epsilon = 0;
  }
  if (o->optimizer != TF_OPTIMIZER_NONE)
    c->optimizer = o->optimizer;
  if (c->optimizer == TF_OPTIMIZER_NONE)
    c->optimizer = TF_OPTIMIZER_SGD;
  if (o->learning_rate > 0)
    c->learning_rate = o->learning_rate;
  if (c->learning_rate <= 0)
    c->learning_rate = adam_moments(c->optimizer) ? 3e-4 : 0.01;
  if (o->epsilon > 0)
    c->epsilon = o->epsilon;
  if (adam_moments(c->optimizer)) {
    if (c->beta1 <= 0)
      c->beta1 = 0.9;
    if (c->beta2 <= 0)
      c->beta2 = 0.999;
    if (c->epsilon <= 0)
      c->epsilon = 1e-8;
  }
  if (o->weight_decay >= 0)
    c->weight_decay = o->weight_decay;
  if (o->clip_norm >= 0)
    c->clip_norm = o->clip_norm;
  if (o->accumulate > 0)
    c->accumulate_steps = o->accumulate;
  if (c->accumulate_steps <= 0)
    c->accumulate_steps = 1;
  if (o->set_precision)
    c->precision = o->precision;
  if ((int)c->precision < 0 || c->precision > TF_PRECISION_F16)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown precision %d (0 f32, 1 bf16, 2 f16)", (int)c->precision);
  if (o->loss_scale > 0)
    c->loss_scale = o->loss_scale;
  if (!tf_training_stores_f16(g, c) && o->autocast != TF_F16 && o->param_dtype != TF_F16)
    c->loss_scale = 0; /* only plans that store f16 (or compute on it: autocast.c and master_weights.c run
                        * later) scale the loss */
  else if (c->loss_scale == 0)
    c->loss_scale = 65536.0; /* torch.cuda.amp.GradScaler's initial scale */
  int exponent;
  if (c->loss_scale != 0 && (frexp(c->loss_scale, &exponent) != 0.5 || exponent - 1 < TF_LOSS_SCALE_MIN_LOG2 ||
                             exponent - 1 > TF_LOSS_SCALE_MAX_LOG2))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "loss scale %g: it must be a power of two from 2^%d to 2^%d (scaling by a power of two is "
                         "exact, so the scaled step updates the weights as the unscaled one would)",
                         c->loss_scale, TF_LOSS_SCALE_MIN_LOG2, TF_LOSS_SCALE_MAX_LOG2);
  const char *why = update_in_backward_refusal(c);
  if (o->update_in_backward == TF_CHOICE_ON && o->training && why)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--update-in-backward: this plan cannot update a parameter before the backward pass "
                         "ends: %s, which needs every gradient before the first update",
                         why);
  if (!isfinite(c->learning_rate) || c->beta1 >= 1 || c->beta2 >= 1)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "invalid optimizer settings: lr %g, betas %g/%g", c->learning_rate,
                         c->beta1, c->beta2);
  return NULL;
}

/* Whether the plan keeps something in host memory (--offload optimizer or gradients). */
static bool offloads(const tf_compile_options *o) { return o->offload_optimizer || o->offload_gradients; }

static tf_status check_options(const tf_compile_options *o) {
  const tf_target *t = &o->target;
  if ((int)t->kind < 0 || t->kind >= TF_TARGET_COUNT)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown target kind %d", (int)t->kind);
  if (t->alignment < 1 || (t->alignment & (t->alignment - 1)) != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "target alignment %lld is not a power of two",
                         (long long)t->alignment);
  if (t->threads < 1 || t->threads > 1024)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "target threads %d is outside 1..1024", t->threads);
  if ((int)o->update_in_backward < 0 || o->update_in_backward > TF_CHOICE_SMALLEST)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown update_in_backward choice %d", (int)o->update_in_backward);
  if ((int)o->fuse_loss < 0 || o->fuse_loss > TF_FUSE_LOSS_SMALLEST)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown fuse_loss choice %d", (int)o->fuse_loss);
  if ((int)o->remat < 0 || o->remat > TF_REMAT_LIST)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown recompute mode %d", (int)o->remat);
  if (o->remat == TF_REMAT_LIST && (o->remat_list_count < 0 || (o->remat_list_count > 0 && !o->remat_list)))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "recompute 'list' needs its names");
  if (o->remat == TF_REMAT_AUTO && o->remat_budget <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "recompute 'auto' needs a budget in bytes");
  if (o->accumulate < 0 || o->accumulate > 1 << 20)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "accumulation steps %d is outside 1..%d", o->accumulate, 1 << 20);
  if (o->matmul_math != TF_F32 && o->matmul_math != TF_BF16 && o->matmul_math != TF_F16)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "matmul math %d is not f32, bf16 or f16", (int)o->matmul_math);
  if (o->param_dtype != TF_F32 && o->param_dtype != TF_BF16 && o->param_dtype != TF_F16)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "parameter dtype %d is not f32, bf16 or f16", (int)o->param_dtype);
  if (o->autocast != TF_F32 && o->autocast != TF_BF16 && o->autocast != TF_F16)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "autocast %d is not f32 (off), bf16 or f16", (int)o->autocast);
  if (o->ranks < 0 || o->ranks > TF_PLAN_MAX_RANKS)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "ranks %d is outside 1..%d", o->ranks, TF_PLAN_MAX_RANKS);
  if (o->ranks > 1 && o->update_in_backward == TF_CHOICE_ON)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--ranks %d sums the gradients across the ranks after the backward pass: it cannot go with "
                         "--update-in-backward",
                         o->ranks);
  const char *offload = o->offload_gradients ? "gradients" : "optimizer";
  if (offloads(o) && !o->training)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--offload %s: an inference plan has no %s", offload,
                         o->offload_gradients ? "gradients" : "optimizer state");
  if (o->zero < 0 || o->zero > 2)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--zero takes 0, 1 or 2 (the ZeRO stage), got %d", o->zero);
  if (o->zero > 0 && (o->ranks < 2 || !o->training))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--zero %d shards the optimizer state across the ranks of a data-parallel training plan: "
                         "give --ranks R (2 or more)",
                         o->zero);
  if (o->offload_activations && !o->training)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--offload activations: an inference plan keeps no activation for a backward pass");
  if (offloads(o) && o->update_in_backward == TF_CHOICE_ON)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "--offload %s runs the updates on the host after the backward pass: it cannot go with "
                         "--update-in-backward",
                         offload);
  return NULL;
}

/* The compiler works on its own copy (tf_ir_copy), bound to concrete shapes. */
static tf_status bound_copy(const tf_graph *graph, const char *bindings, tf_graph **out) {
  tf_status status = tf_ir_copy(graph, out);
  if (!status && bindings)
    status = tf_graph_bind_list(*out, bindings);
  if (!status)
    status = tf_graph_infer_shapes(*out);
  if (status) {
    tf_graph_destroy(*out);
    *out = NULL;
  }
  return status;
}

/* The stages after the training graph (compiler/stages.h), owned by the driver. */
typedef struct placement {
  tf_order order;
  tf_lifetimes lifetimes;
  tf_layout layout;
} placement;

static void placement_free(placement *p) {
  tf_order_free(&p->order);
  tf_lifetimes_free(&p->lifetimes);
  tf_layout_free(&p->layout);
}

/* Order, lifetimes and layout for one order of the training graph. */
static tf_status place_in_order(const tf_training *t, bool memory_aware, placement *p) {
  TF_RETURN_IF_ERROR(memory_aware ? tf_order_memory_aware(t, &p->order) : tf_order_model(t, &p->order));
  TF_RETURN_IF_ERROR(tf_order_move_updates(t, &p->order));
  TF_RETURN_IF_ERROR(tf_lifetimes_find(t, &p->order, &p->lifetimes));
  return tf_layout_assign(t, &p->order, &p->lifetimes, &p->layout);
}

/* Tries the memory-aware order (schedule_memory.c) and the model order and keeps the one whose
 * arena is smaller (the model order on a tie), so a plan never gets a larger arena from the
 * reordering. Inference plans keep the model order. On error *p is freed. */
static tf_status schedule_and_assign(const tf_training *t, placement *p) {
  memset(p, 0, sizeof(*p));
  tf_status status = NULL;
  if (!t->options.training) {
    snprintf(p->order.notes, sizeof(p->order.notes), "schedule: model order");
    status = place_in_order(t, false, p);
  } else {
    placement memory;
    memset(&memory, 0, sizeof(memory));
    status = place_in_order(t, true, &memory);
    if (!status)
      status = place_in_order(t, false, p);
    const bool keep_memory =
        !status && memory.layout.region_bytes[TF_REGION_ARENA] < p->layout.region_bytes[TF_REGION_ARENA];
    if (!status) {
      const int64_t memory_arena = memory.layout.region_bytes[TF_REGION_ARENA];
      const int64_t model_arena = p->layout.region_bytes[TF_REGION_ARENA];
      if (keep_memory) {
        placement_free(p);
        *p = memory;
        memset(&memory, 0, sizeof(memory));
      }
      int used = snprintf(p->order.notes, sizeof(p->order.notes),
                          "schedule: %s (arena %.2f MiB in the memory-aware order, %.2f MiB in model order)",
                          keep_memory ? "memory-aware order" : "model order", (double)memory_arena / 1048576.0,
                          (double)model_arena / 1048576.0);
      if (t->options.update_in_backward)
        snprintf(p->order.notes + used, sizeof(p->order.notes) - (size_t)used,
                 "; each update in the backward pass, right after its gradient and its parameter's last reader");
    }
    placement_free(&memory);
  }
  if (status)
    placement_free(p);
  return status;
}

/* A copy of `name` (malloc), or NULL on no memory. */
static char *copy_name(const char *name) {
  size_t n = strlen(name) + 1;
  char *out = malloc(n);
  if (out)
    memcpy(out, name, n);
  return out;
}

void tf_compile_free_names(char **names, int32_t count) {
  for (int32_t i = 0; names && i < count; i++)
    free(names[i]);
  free(names);
}

/* What one run of the pipeline recomputes: `drop` segments in auto mode, the cuts' phase (remat.c),
 * and whether recomputed activations stay f32 under a half policy (precision.c). */
typedef struct remat_choice {
  int32_t drop, phase;
  bool recomputed_f32;
} remat_choice;

/* What a run found out: droppable segments, the kept cuts' phases (remat.c), recomputed
 * activations stored in half (precision.c). */
typedef struct pipeline_facts {
  int32_t n_segments, stride, recomputed_half;
} pipeline_facts;

/* The most bytes the buffers of a training graph may hold in all: recompute, storage casts and
 * offloaded copies add at most a few copies of what is there, and the planner's sums (arena, regions,
 * live bytes, the report) then stay far inside int64. 2^60 bytes is 1 EiB, beyond any device. */
#define MOST_GRAPH_BYTES ((int64_t)1 << 60)

/* Refuses a graph whose tensors' bytes sum past MOST_GRAPH_BYTES (symbols bound too large), before
 * any stage adds them up. */
static tf_status check_graph_bytes(const tf_graph *g, const char *bindings) {
  int64_t total = 0;
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (__builtin_add_overflow(total, g->tensors[i].bytes, &total) || total > MOST_GRAPH_BYTES)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "graph '%s'%s%s: its tensors need more than 2^60 bytes (1 EiB) in all, past what a plan "
                           "may hold (at tensor '%s', %" PRId64 " bytes): bind smaller symbols",
                           g->name, bindings && *bindings ? " with " : "", bindings && *bindings ? bindings : "",
                           g->tensors[i].name, g->tensors[i].bytes);
  return NULL;
}

/* An inference plan runs the forward pass as PyTorch's eval mode does: each dropout of data the
 * identity (a copy at rate 0, which every backend's dropout kernel makes), never a random mask on a
 * prediction. A dropout of a constant fill is a random draw (the importer's RandomNormalLike,
 * RandomUniformLike, Bernoulli and torch.bernoulli(x, p): bits of noise), which eval mode draws too. */
static void inference_without_dropout(tf_graph *g) {
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const tf_ir_node *node = &g->nodes[n];
    const tf_ir_tensor *x = node->n_inputs > 0 ? &g->tensors[node->inputs[0]] : NULL;
    const bool draw = x && x->kind == TF_CONSTANT && x->init_kind == TF_INIT_FILL;
    if (node->op == TF_OP_DROPOUT && !draw)
      g->nodes[n].attrs.u.dropout.rate = 0.0f;
  }
}

/* The passes that no recompute choice changes, the same for every trial of a search: the bound
 * copy through the optimizer pass. On error *t is freed. */
static tf_status run_front(const tf_graph *graph, const tf_compile_options *options, tf_training *t) {
  memset(t, 0, sizeof(*t));
  t->options = *options;
  t->matmul_math = options->matmul_math;
  tf_status status = bound_copy(graph, options->bindings, &t->g);
  if (!status)
    status = resolve_config(t->g, options, &t->config);
  if (!status && !options->training)
    inference_without_dropout(t->g);
  if (!status)
    status = tf_freeze_pass(t);
  if (!status)
    status = tf_lora_pass(t);
  if (!status)
    status = tf_autocast_pass(t);
  if (!status)
    status = tf_fuse_loss_pass(t);
  if (!status)
    status = tf_master_weights_pass(t);
  if (!status)
    status = tf_training_reserve(t);
  if (!status)
    status = tf_half_ops_pass(t, &t->half_nodes);
  if (!status) {
    t->loss = t->g->loss;
    t->loss_seed = t->overflow_check = -1;
    t->n_forward_nodes = t->g->n_nodes;
    if (options->training && t->loss < 0)
      status = tf_status_new(TF_ERR_INVALID_INPUT, "graph '%s' has no loss: compile it with --inference", graph->name);
  }
  if (!status && options->training)
    status = tf_autodiff(t);
  if (!status && options->training)
    status = tf_slice_grads_pass(t);
  if (!status && options->training)
    status = tf_fuse_loss_train_pass(t);
  if (!status && options->training)
    status = tf_optimizer_pass(t);
  if (!status)
    status = check_graph_bytes(t->g, options->bindings);
  if (status)
    tf_training_free(t);
  return status;
}

/* The passes from recompute on, with `choice`, the stages after the training graph, and the plan;
 * frees *t. With `saved`, also returns the names of the saved activations (remat's candidates);
 * with `facts`, what the run found out. */
static tf_status run_back(tf_training *t, remat_choice choice, tf_plan **out, pipeline_facts *facts, char ***saved,
                          int32_t *n_saved) {
  *out = NULL;
  const tf_remat_request request = {choice.drop, choice.phase, saved != NULL};
  tf_remat_result remat;
  tf_status status = tf_remat(t, &request, &remat);
  if (!status)
    status = tf_gelu_pair_pass(t);
  if (!status)
    status = tf_running_stats_pass(t);
  if (!status)
    status = tf_precision_pass(t, choice.recomputed_f32);
  if (!status)
    status = tf_offload_activations_pass(t);
  placement placed;
  memset(&placed, 0, sizeof(placed));
  if (!status)
    status = schedule_and_assign(t, &placed);
  tf_plan *plan = NULL;
  if (!status) /* verified once chosen (tf_compile), not each trial of a search */
    status = tf_emit(t, &placed.order, &placed.lifetimes, &placed.layout, &plan);
  /* ZeRO first: its shards of the optimizer state are what an offload then moves to host memory, and
   * its updates (each held by one rank) the steps it moves to the host's cores */
  if (!status && t->options.zero > 0 && t->options.training)
    status = tf_zero_pass(plan, &t->options.target, t->options.zero);
  if (!status && (offloads(&t->options) || t->options.offload_activations) && t->options.training)
    status = tf_offload_pass(plan, &t->options.target, offloads(&t->options), t->options.offload_gradients);
  placement_free(&placed);
  if (facts)
    *facts = (pipeline_facts){remat.n_segments, remat.stride, t->recomputed_half};
  if (!status && saved) {
    *saved = calloc((size_t)(remat.n_saved ? remat.n_saved : 1), sizeof(char *));
    *n_saved = 0;
    for (int32_t i = 0; *saved && i < remat.n_saved; i++) {
      (*saved)[i] = copy_name(t->g->tensors[remat.saved_list[i]].name);
      (*n_saved)++;
    }
    if (!*saved)
      status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot list the saved activations");
  }
  free(remat.saved_list);
  tf_training_free(t);
  if (status) {
    tf_plan_destroy(plan);
    return status;
  }
  *out = plan;
  return NULL;
}

/* The whole pipeline once. With `saved`, also returns the names of the saved activations (remat's
 * candidates); with `facts`, what the run found out. */
static tf_status run_pipeline(const tf_graph *graph, const tf_compile_options *options, remat_choice choice,
                              tf_plan **out, pipeline_facts *facts, char ***saved, int32_t *n_saved) {
  *out = NULL;
  tf_training t;
  TF_RETURN_IF_ERROR(run_front(graph, options, &t));
  return run_back(&t, choice, out, facts, saved, n_saved);
}

/* One trial of a search: the back of the pipeline on a copy of `front` (run_front), with the
 * recompute list `list[0..count)` (TF_REMAT_LIST) and `choice`. The plan is run_pipeline's with the
 * front's options and that list: the passes before recompute never read the list. */
static tf_status run_trial(const tf_training *front, const char *const *list, int32_t count, remat_choice choice,
                           tf_plan **out, pipeline_facts *facts) {
  *out = NULL;
  tf_training t;
  TF_RETURN_IF_ERROR(tf_training_copy(front, &t));
  t.options.remat_list = list;
  t.options.remat_list_count = count;
  return run_back(&t, choice, out, facts, NULL, NULL);
}

/* auto: the fewest recomputed segments whose plan fits remat_budget, by binary search over the
 * count with the exact plan each time (plan sizes fall as more segments are dropped). If even
 * dropping all does not fit, the smallest plan is returned; the caller compares it to the budget.
 * Each count is a trial on `front`. */
static tf_status search_segments(const tf_training *front, const tf_compile_options *options, tf_plan **out) {
  tf_plan *best = NULL;
  pipeline_facts facts;
  TF_RETURN_IF_ERROR(run_trial(front, NULL, 0, (remat_choice){0, 0, false}, &best, &facts));
  const int32_t n_segments = facts.n_segments;
  if (tf_plan_device_total(best) <= options->remat_budget || n_segments == 0) {
    *out = best;
    return NULL;
  }
  tf_plan *all = NULL;
  tf_status status = run_trial(front, NULL, 0, (remat_choice){n_segments, 0, false}, &all, NULL);
  if (status || tf_plan_device_total(all) > options->remat_budget) {
    tf_plan_destroy(best);
    *out = all;
    return status;
  }
  tf_plan_destroy(best);
  best = all;
  int32_t lo = 0, hi = n_segments; /* lo does not fit, hi fits */
  while (hi - lo > 1 && !status) {
    int32_t mid = lo + (hi - lo) / 2;
    tf_plan *plan = NULL;
    status = run_trial(front, NULL, 0, (remat_choice){mid, 0, false}, &plan, NULL);
    if (status)
      break;
    if (tf_plan_device_total(plan) <= options->remat_budget) {
      tf_plan_destroy(best);
      best = plan;
      hi = mid;
    } else {
      tf_plan_destroy(plan);
      lo = mid;
    }
  }
  if (status) {
    tf_plan_destroy(best);
    return status;
  }
  *out = best;
  return NULL;
}

static tf_status compile_auto(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) {
  tf_training front;
  TF_RETURN_IF_ERROR(run_front(graph, options, &front));
  tf_status status = search_segments(&front, options, out);
  tf_training_free(&front);
  return status;
}

/* auto on graphs too small or too unstructured for segments (at most 48 saved activations): greedy
 * over single activations, each candidate judged by an exact plan: drop the one with the most bytes
 * saved per recomputed FLOP, until the plan fits or nothing helps. O(candidates^2) trials on
 * `front` (compiled with TF_REMAT_LIST); chosen[0..n) is the caller's scratch. */
enum { GENERAL_GREEDY_LIMIT = 48 };

static tf_status search_greedy(const tf_training *front, const tf_compile_options *options, char **names, int32_t n,
                               const char **chosen, bool *used, tf_plan **out) {
  int32_t count = 0;
  tf_plan *current = NULL;
  TF_RETURN_IF_ERROR(run_trial(front, chosen, count, (remat_choice){0, 0, false}, &current, NULL));
  tf_status status = NULL;
  int32_t plateau = 0; /* moves that saved nothing, allowed since two drops can free what one cannot */
  while (!status && tf_plan_device_total(current) > options->remat_budget && plateau <= n) {
    int32_t best = -1, flat = -1;
    double best_score = 0, flat_cost = INFINITY;
    tf_plan *best_plan = NULL, *flat_plan = NULL;
    for (int32_t i = 0; i < n && !status; i++) {
      if (used[i])
        continue;
      chosen[count] = names[i];
      tf_plan *trial = NULL;
      status = run_trial(front, chosen, count + 1, (remat_choice){0, 0, false}, &trial, NULL);
      if (status)
        break;
      double saved = (double)(tf_plan_device_total(current) - tf_plan_device_total(trial));
      double cost = trial->report.flops[TF_PHASE_RECOMPUTE] - current->report.flops[TF_PHASE_RECOMPUTE] + 1.0;
      double score = saved / cost;
      if (saved > 0 && score > best_score) {
        best_score = score;
        best = i;
        tf_plan_destroy(best_plan);
        best_plan = trial;
      } else if (saved == 0 && cost < flat_cost) {
        flat_cost = cost;
        flat = i;
        tf_plan_destroy(flat_plan);
        flat_plan = trial;
      } else {
        tf_plan_destroy(trial);
      }
    }
    if (!status && best < 0 && flat >= 0) {
      best = flat;
      best_plan = flat_plan;
      flat_plan = NULL;
      plateau++;
    }
    tf_plan_destroy(flat_plan);
    if (status || best < 0) {
      tf_plan_destroy(best_plan);
      break;
    }
    used[best] = true;
    chosen[count++] = names[best];
    tf_plan_destroy(current);
    current = best_plan;
  }
  if (status) {
    tf_plan_destroy(current);
    return status;
  }
  *out = current;
  return NULL;
}

static tf_status compile_greedy(const tf_graph *graph, const tf_compile_options *options, char **names, int32_t n,
                                tf_plan **out) {
  const char **chosen = calloc((size_t)(n ? n : 1), sizeof(char *));
  bool *used = calloc((size_t)(n ? n : 1), sizeof(bool));
  tf_compile_options o = *options;
  o.remat = TF_REMAT_LIST;
  o.remat_list = NULL;
  o.remat_list_count = 0;
  tf_training front;
  tf_status status =
      !chosen || !used ? tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory") : run_front(graph, &o, &front);
  if (!status) {
    status = search_greedy(&front, options, names, n, chosen, used, out);
    tf_training_free(&front);
  }
  free(chosen);
  free(used);
  return status;
}

/* The phases of the kept cuts tried at most (remat.c keeps every s-th cut: s phases). */
#define CHECKPOINT_PHASES 4

/* The checkpoint variants on `front` (options without update_in_backward): the plan with the
 * smallest device total, its choice, and the notes' line listing every variant's total. */
static tf_status rank_checkpoints(const tf_training *front, tf_plan **out, remat_choice *chosen, char *line,
                                  size_t size) {
  pipeline_facts facts;
  tf_plan *best = NULL;
  TF_RETURN_IF_ERROR(run_trial(front, NULL, 0, (remat_choice){0, 0, false}, &best, &facts));
  const int32_t phases = facts.stride < CHECKPOINT_PHASES ? facts.stride : CHECKPOINT_PHASES;
  const int32_t storages = facts.recomputed_half > 0 ? 2 : 1;
  *chosen = (remat_choice){0, 0, false};
  int used = snprintf(line, size, "checkpoints: %d variants compiled (%d phases of the cuts%s), device totals %" PRId64,
                      phases * storages, phases, storages > 1 ? ", recomputed activations in half and in f32" : "",
                      tf_plan_device_total(best));
  for (int32_t v = 1; v < phases * storages; v++) {
    tf_plan *trial = NULL;
    const remat_choice choice = {0, v % phases, v >= phases};
    tf_status status = run_trial(front, NULL, 0, choice, &trial, NULL);
    if (status) {
      tf_plan_destroy(best);
      return status;
    }
    used += snprintf(line + used, size - (size_t)used, " %" PRId64, tf_plan_device_total(trial));
    const bool smaller = tf_plan_device_total(trial) < tf_plan_device_total(best);
    tf_plan_destroy(smaller ? best : trial);
    best = smaller ? trial : best;
    *chosen = smaller ? choice : *chosen;
  }
  if (phases * storages == 1)
    line[0] = '\0';
  *out = best;
  return NULL;
}

/* checkpoints: each phase of the kept cuts (up to CHECKPOINT_PHASES), and under a half policy each
 * with the recomputed activations stored in half and kept f32 (the casts cost steps, and with them
 * CUDA-graph memory, that a small micro-batch's arena may not win back), compiled; the plan with
 * the smallest device total kept (the first on a tie). Its notes list every variant's total. The
 * variants round different activations, so a plan with its updates in the backward pass takes the
 * variant its plain twin takes (ranked without the move, then compiled with it): both train the
 * same weights bit for bit. */
static tf_status compile_checkpoints(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) {
  tf_compile_options rank = *options;
  rank.update_in_backward = false;
  tf_training front;
  TF_RETURN_IF_ERROR(run_front(graph, &rank, &front));
  tf_plan *best = NULL;
  remat_choice chosen;
  char line[96 + 24 * 2 * CHECKPOINT_PHASES];
  tf_status status = rank_checkpoints(&front, &best, &chosen, line, sizeof(line));
  tf_training_free(&front);
  TF_RETURN_IF_ERROR(status);
  if (line[0]) {
    size_t used = strlen(line);
    snprintf(line + used, sizeof(line) - used, " bytes%s: the smallest kept\n",
             options->update_in_backward ? " with the updates after the backward pass" : "");
  }
  if (options->update_in_backward) {
    tf_plan_destroy(best);
    TF_RETURN_IF_ERROR(run_pipeline(graph, options, chosen, &best, NULL, NULL, NULL));
  }
  if (line[0])
    tf_plan_note(best, line);
  *out = best;
  return NULL;
}

/* The plan tf_compile returns, before its check. */
static tf_status compile_unverified(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) {
  *out = NULL;
  TF_RETURN_IF_ERROR(check_options(options));
  if (options->remat == TF_REMAT_AUTO && options->training) {
    char **names = NULL;
    int32_t n = 0;
    TF_RETURN_IF_ERROR(tf_compile_saved_activations(graph, options, &names, &n));
    tf_status status =
        n <= GENERAL_GREEDY_LIMIT ? compile_greedy(graph, options, names, n, out) : compile_auto(graph, options, out);
    tf_compile_free_names(names, n);
    return status;
  }
  if (options->remat == TF_REMAT_CHECKPOINTS && options->training)
    return compile_checkpoints(graph, options, out);
  return run_pipeline(graph, options, (remat_choice){0, 0, false}, out, NULL, NULL, NULL);
}

/* Every plan returned passes tf_plan_verify; the plans a search compiles only to compare them are
 * not checked one by one (about a tenth of a greedy search's time). */
/* Whether `plan` has a fused loss head (a linear_cross_entropy* step, any of its forms). */
static bool has_fused_head(const tf_plan *plan) {
  static const char fused[] = "linear_cross_entropy";
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (strncmp(tf_op_name(plan->steps[s].op), fused, sizeof(fused) - 1) == 0)
      return true;
  return false;
}

/* Keeps the smaller of *best and `trial` (*best on a tie) in *best, destroying the other; says
 * whether the trial was kept. */
static bool keep_smaller(tf_plan **best, tf_plan *trial) {
  if (*best && tf_plan_device_total(trial) >= tf_plan_device_total(*best)) {
    tf_plan_destroy(trial);
    return false;
  }
  tf_plan_destroy(*best);
  *best = trial;
  return true;
}

/* Appends "; KEPT (saves X MiB)" or "; NOT_KEPT (REWRITE would add X MiB)" to the notes line `line`
 * ("...:" before the first clause); `saved`: the rewrite's saving, negative when it costs bytes. */
static void add_clause(char *line, size_t size, bool kept, const char *rewrite, const char *not_kept, int64_t saved) {
  size_t used = strlen(line);
  const char *separator = line[used - 1] == ':' ? "" : ";";
  const double mib = (double)(saved < 0 ? -saved : saved) / 1048576.0;
  if (kept)
    snprintf(line + used, size - used, "%s %s (saves %.2f MiB)", separator, rewrite, mib);
  else
    snprintf(line + used, size - used, "%s %s (%s %s %.2f MiB)", separator, not_kept, rewrite,
             saved < 0 ? "would add" : "would save", mib);
}

/* One variant of compile_smallest into *trial; on error *best is destroyed (and NULL). */
static tf_status compile_variant(const tf_graph *graph, const tf_compile_options *options, tf_plan **best,
                                 tf_plan **trial) {
  tf_status status = compile_unverified(graph, options, trial);
  if (status) {
    tf_plan_destroy(*best);
    *best = NULL;
  }
  return status;
}

/* The rewrites left to SMALLEST (update_in_backward, fuse_loss) that leave the weights bit for bit
 * the same: each tried where it is legal and can change the plan, the smallest device total kept
 * (the plain plan on a tie). The first plan compiled is the plain one (updates after the backward
 * pass; the head fused only by AUTO's threshold); a fused head is tried when the plain plan left a
 * fusable head unfused (ON fuses one); the updates in the backward pass on the best of those. Its
 * notes say what was kept and what each saved. */
static tf_status compile_smallest(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) {
  tf_compile_options o = *options;
  /* offloaded updates run after the backward pass, on the host */
  const bool choose_updates = o.update_in_backward == TF_CHOICE_SMALLEST && !offloads(&o) && o.ranks <= 1;
  const bool choose_fusion = o.fuse_loss == TF_FUSE_LOSS_SMALLEST;
  if (o.update_in_backward == TF_CHOICE_SMALLEST)
    o.update_in_backward = TF_CHOICE_OFF;
  if (choose_fusion)
    o.fuse_loss = TF_FUSE_LOSS_AUTO;
  if (!o.training || (!choose_updates && !choose_fusion))
    return compile_unverified(graph, &o, out);
  tf_training_config config;
  TF_RETURN_IF_ERROR(check_options(&o));
  TF_RETURN_IF_ERROR(resolve_config(graph, &o, &config));
  tf_plan *best = NULL;
  TF_RETURN_IF_ERROR(compile_unverified(graph, &o, &best));
  const int64_t plain = tf_plan_device_total(best);
  char line[320] = "smallest plan:";
  if (choose_fusion && !has_fused_head(best)) {
    tf_compile_options fused = o;
    fused.fuse_loss = TF_FUSE_LOSS_ON;
    tf_plan *trial = NULL;
    TF_RETURN_IF_ERROR(compile_variant(graph, &fused, &best, &trial));
    if (!has_fused_head(trial)) {
      tf_plan_destroy(trial); /* no head to fuse: the same plan */
    } else {
      const int64_t bytes = tf_plan_device_total(trial);
      const bool kept = keep_smaller(&best, trial);
      o.fuse_loss = kept ? TF_FUSE_LOSS_ON : o.fuse_loss;
      add_clause(line, sizeof(line), kept, "fused loss head", "loss head not fused", plain - bytes);
    }
  }
  if (choose_updates && !update_in_backward_refusal(&config)) {
    tf_compile_options moved = o;
    moved.update_in_backward = TF_CHOICE_ON;
    tf_plan *trial = NULL;
    TF_RETURN_IF_ERROR(compile_variant(graph, &moved, &best, &trial));
    const int64_t before = tf_plan_device_total(best), bytes = tf_plan_device_total(trial);
    const bool kept = keep_smaller(&best, trial);
    add_clause(line, sizeof(line), kept, "updates in the backward pass", "updates after the backward pass",
               before - bytes);
  }
  if (line[strlen(line) - 1] != ':') {
    strncat(line, "\n", sizeof(line) - strlen(line) - 1);
    tf_plan_note(best, line);
  }
  *out = best;
  return NULL;
}

tf_status tf_compile(const tf_graph *graph, const tf_compile_options *options, tf_plan **out) {
  TF_RETURN_IF_ERROR(compile_smallest(graph, options, out));
  tf_status status = tf_plan_verify(*out);
  if (status) {
    tf_plan_destroy(*out);
    *out = NULL;
    return tf_status_prefix(status, "internal error: the compiled plan breaks an invariant");
  }
  return NULL;
}

tf_status tf_compile_saved_activations(const tf_graph *graph, const tf_compile_options *options, char ***names,
                                       int32_t *count) {
  *names = NULL;
  *count = 0;
  TF_RETURN_IF_ERROR(check_options(options));
  tf_compile_options plain = *options;
  plain.remat = TF_REMAT_NONE;
  plain.training = true;
  plain.update_in_backward = TF_CHOICE_OFF; /* no rewrite SMALLEST chooses changes what is saved */
  if (plain.fuse_loss == TF_FUSE_LOSS_SMALLEST)
    plain.fuse_loss = TF_FUSE_LOSS_AUTO;
  tf_plan *plan = NULL;
  tf_status status = run_pipeline(graph, &plain, (remat_choice){0, 0, false}, &plan, NULL, names, count);
  tf_plan_destroy(plan);
  return status;
}
