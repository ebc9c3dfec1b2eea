/* Pass 12, emit: the plan. Every tensor becomes a buffer at its assigned offset (inputs and labels
 * twice, for double buffering), every scheduled node a step (reshape/expand targets made concrete),
 * every workspace a buffer live at its step only; then the memory report. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "compiler/stages.h"
#include "core/ops.h"

static tf_buffer_role role_of(const tf_training *t, int32_t id) {
  if (t->role[id] == TF_ROLE_STATE) /* a constant of the graph that batch_norm_running updates */
    return TF_ROLE_STATE;
  switch (t->g->tensors[id].kind) {
  case TF_PARAMETER: return TF_ROLE_PARAMETER;
  case TF_CONSTANT: return TF_ROLE_CONSTANT;
  case TF_INPUT: return TF_ROLE_INPUT;
  case TF_LABEL: return TF_ROLE_LABEL;
  default: return t->role[id];
  }
}

/* The products a plan is emitted from. */
typedef struct products {
  const tf_training *t;
  const tf_order *order;
  const tf_lifetimes *life;
  const tf_layout *layout;
} products;

static tf_region region_of(tf_buffer_role role) {
  switch (role) {
  case TF_ROLE_PARAMETER:
  case TF_ROLE_CONSTANT:
  case TF_ROLE_STATE: return TF_REGION_PARAMETERS;
  case TF_ROLE_GRADIENT: return TF_REGION_GRADIENTS;
  case TF_ROLE_OPTIMIZER_STATE: return TF_REGION_OPTIMIZER_STATE;
  case TF_ROLE_INPUT:
  case TF_ROLE_LABEL: return TF_REGION_IO;
  default: return TF_REGION_ARENA;
  }
}

static int64_t elements(const tf_ir_tensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
}

/* Rough FLOPs: matmul-like ops count 2 per multiply-add; the rest a few per element. */
static double estimate_flops(const tf_graph *g, const tf_ir_node *node) {
  const tf_ir_tensor *out = node->n_outputs ? &g->tensors[node->outputs[0]] : &g->tensors[node->inputs[0]];
  double n = (double)elements(out);
  const tf_ir_tensor *a = &g->tensors[node->inputs[0]];
  switch (node->op) {
  case TF_OP_MATMUL: {
    int64_t k = node->attrs.u.matmul.transpose_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
    return 2.0 * n * (double)k;
  }
  case TF_OP_MATMUL_ACCUMULATE: { /* (sum, a, b): the product, plus one add per element of the sum */
    const tf_ir_tensor *left = &g->tensors[node->inputs[1]];
    int64_t k = node->attrs.u.matmul.transpose_a ? left->shape[0] : left->shape[1];
    return 2.0 * n * (double)k + n;
  }
  case TF_OP_CONV1D:
  case TF_OP_CONV2D:
  case TF_OP_CONV_TRANSPOSE2D:
  case TF_OP_CONV1D_GRAD_INPUT:
  case TF_OP_CONV2D_GRAD_INPUT:
  case TF_OP_CONV1D_GRAD_WEIGHT:
  case TF_OP_CONV2D_GRAD_WEIGHT: {
    /* 2 x (weight elements) x (output positions per weight) ~ 2 x weight x output / out channels */
    int32_t w_index = node->op == TF_OP_CONV1D_GRAD_INPUT || node->op == TF_OP_CONV2D_GRAD_INPUT ? 1 : 2;
    if (node->op <= TF_OP_CONV_TRANSPOSE2D)
      w_index = 1;
    const tf_ir_tensor *w = &g->tensors[node->inputs[w_index]];
    const tf_ir_tensor *dy = &g->tensors[node->inputs[node->op <= TF_OP_CONV_TRANSPOSE2D ? 0 : 1]];
    double spatial =
        (double)elements(node->op <= TF_OP_CONV_TRANSPOSE2D ? out : dy) / (double)(w->shape[0] > 0 ? w->shape[0] : 1);
    return 2.0 * (double)elements(w) * spatial;
  }
  case TF_OP_ATTENTION:
  case TF_OP_ATTENTION_GRAD: {
    const tf_ir_tensor *k = &g->tensors[node->inputs[1]];
    double forward = 4.0 * (double)elements(a) * (double)k->shape[1];
    return node->op == TF_OP_ATTENTION ? forward : 2.5 * forward;
  }
  case TF_OP_LINEAR_CROSS_ENTROPY:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD:
  case TF_OP_LINEAR_CROSS_ENTROPY_TRAIN:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE: { /* the logits' product; the gradient adds dx's, dweight's */
    const tf_ir_tensor *w = &g->tensors[node->inputs[1]];
    double forward = 2.0 * (double)elements(a) * (double)elements(w) / (double)(a->rank ? a->shape[a->rank - 1] : 1);
    return node->op == TF_OP_LINEAR_CROSS_ENTROPY ? forward : 3.0 * forward;
  }
  default: return 4.0 * n;
  }
}

/* Whether a fed tensor's first declared dim is the micro-batch N itself: the feed then cuts its
 * file into samples. A static shape ([3,4,5], what torch.onnx.export writes without dynamic_axes)
 * or a tensor every sample shares is fed whole instead (tf_plan_buffer.unbatched). */
static bool leading_is_batch(const tf_graph *g, const tf_ir_tensor *t) {
  const int32_t n = tf_ir_find_symbol(g, "N");
  return n >= 0 && t->declared.rank >= 1 && t->declared.dims[0].symbol == n && t->declared.dims[0].size == 1;
}

static tf_status add_buffer(tf_plan *plan, const products *p, int32_t tensor, int32_t *id) {
  const tf_training *t = p->t;
  const tf_ir_tensor *src = &t->g->tensors[tensor];
  tf_plan_buffer *b = &plan->buffers[plan->n_buffers];
  memset(b, 0, sizeof(*b));
  b->name = tf_copy_string(src->name);
  b->role = role_of(t, tensor);
  b->region = t->host[tensor] ? TF_REGION_HOST : region_of(b->role); /* an offloaded activation's copy */
  b->offset = p->layout->offset[tensor];
  b->bytes = src->bytes;
  b->dtype = src->dtype;
  b->rank = src->rank;
  memcpy(b->shape, src->shape, sizeof(b->shape));
  b->first_step = b->region == TF_REGION_ARENA ? p->life->first[tensor] : -1;
  b->last_step = b->region == TF_REGION_ARENA ? p->life->last[tensor] : -1;
  b->init = (tf_init){src->init_kind, src->init_a, src->init_b, tf_copy_string(src->init_file),
                      tf_copy_string(src->init_key)};
  b->owner = -1;
  b->io_twin = -1;
  b->alias_of = -1;
  b->unbatched = b->region == TF_REGION_IO && !leading_is_batch(t->g, src);
  if (!b->name)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "emit: cannot copy a name");
  *id = plan->n_buffers++;
  return NULL;
}

static tf_status emit_buffers(tf_plan *plan, const products *p, int32_t *buffer_of) {
  const tf_training *t = p->t;
  const tf_graph *g = t->g;
  int64_t io_half = p->layout->region_bytes[TF_REGION_IO] / 2;
  for (int32_t i = 0; i < g->n_tensors; i++) {
    buffer_of[i] = -1;
    if (p->layout->offset[i] < 0)
      continue;
    TF_RETURN_IF_ERROR(add_buffer(plan, p, i, &buffer_of[i]));
  }
  for (int32_t i = 0; i < g->n_tensors; i++) {
    int32_t id = buffer_of[i];
    if (id < 0)
      continue;
    if (p->layout->alias_of && p->layout->alias_of[i] >= 0)
      plan->buffers[id].alias_of = buffer_of[p->layout->alias_of[i]];
    if (t->owner[i] >= 0)
      plan->buffers[id].owner = buffer_of[t->owner[i]];
    if (plan->buffers[id].region == TF_REGION_IO) {
      int32_t twin;
      TF_RETURN_IF_ERROR(add_buffer(plan, p, i, &twin));
      plan->buffers[twin].offset += io_half;
      plan->buffers[twin].io_twin = id;
      plan->buffers[id].io_twin = twin;
    }
  }
  return NULL;
}

/* Reshape/expand targets in plans are numbers: symbols are replaced by their bound values. */
static tf_attrs concrete_attrs(const tf_graph *g, const tf_ir_node *node) {
  tf_attrs attrs = node->attrs;
  if (attrs.kind == TF_ATTR_SHAPE) {
    tf_shape *shape = &attrs.u.shape.shape;
    for (int32_t d = 0; d < shape->rank; d++)
      if (shape->dims[d].symbol >= 0)
        shape->dims[d] = (tf_dim){tf_ir_dim_value(g, shape->dims[d]), -1};
  }
  return attrs;
}

static tf_status emit_steps(tf_plan *plan, const products *p, const int32_t *buffer_of) {
  const tf_training *t = p->t;
  const tf_graph *g = t->g;
  for (int32_t s = 0; s < p->order->n_steps; s++) {
    const tf_ir_node *node = &g->nodes[p->order->steps[s]];
    tf_plan_step *step = &plan->steps[plan->n_steps++];
    memset(step, 0, sizeof(*step));
    step->name = tf_copy_string(node->name);
    step->op = node->op;
    step->attrs = concrete_attrs(g, node);
    step->phase = t->phase[p->order->steps[s]];
    step->n_inputs = node->n_inputs;
    step->inputs = malloc(sizeof(int32_t) * (size_t)(node->n_inputs ? node->n_inputs : 1));
    if (!step->name || !step->inputs)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "emit: cannot allocate step %d", s);
    for (int32_t k = 0; k < node->n_inputs; k++)
      step->inputs[k] = buffer_of[node->inputs[k]];
    step->n_outputs = node->n_outputs;
    for (int32_t k = 0; k < node->n_outputs; k++)
      step->outputs[k] = buffer_of[node->outputs[k]];
    step->workspace = -1;
    step->flops = estimate_flops(g, node);
    if (p->life->workspace_bytes[s] > 0) {
      tf_plan_buffer *w = &plan->buffers[plan->n_buffers];
      memset(w, 0, sizeof(*w));
      char name[600];
      snprintf(name, sizeof(name), "workspace/%s", node->name);
      w->name = tf_copy_string(name);
      w->role = TF_ROLE_WORKSPACE;
      w->region = TF_REGION_ARENA;
      w->offset = p->layout->workspace_offset[s];
      w->bytes = p->life->workspace_bytes[s];
      w->dtype = TF_U8;
      w->rank = 1;
      w->shape[0] = w->bytes;
      w->first_step = w->last_step = s;
      w->owner = w->io_twin = w->alias_of = -1;
      step->workspace = plan->n_buffers++;
    }
  }
  return NULL;
}

/* A line (or nothing) saying which samples the batch_norm nodes' statistics come from: each
 * micro-batch's, which accumulation makes smaller than the global batch (PyTorch's gradient
 * accumulation does the same), and an inference plan's batch, not running statistics. */
static void batch_norm_note(const tf_training *t, const tf_plan *plan, char *line, size_t size) {
  int32_t count = 0;
  for (int32_t n = 0; n < t->n_forward_nodes; n++)
    count += t->g->nodes[n].op == TF_OP_BATCH_NORM;
  line[0] = '\0';
  if (count == 0)
    return;
  if (!plan->training) {
    snprintf(line, size,
             "batch_norm: %d node%s normalise%s with the batch's own statistics (running statistics not updated)\n",
             count, count == 1 ? "" : "s", count == 1 ? "s" : "");
    return;
  }
  char running[160] = "";
  const int32_t tracked = t->running_stats_nodes;
  if (tracked > 0 && count == 1)
    snprintf(running, sizeof(running), "; it updates its running statistics once per micro-batch (%d time%s a step)",
             plan->accumulate, plan->accumulate == 1 ? "" : "s");
  else if (tracked > 0)
    snprintf(running, sizeof(running),
             "; %d of them update%s running statistics once per micro-batch (%d time%s a step)", tracked,
             tracked == 1 ? "s its" : " their", plan->accumulate, plan->accumulate == 1 ? "" : "s");
  snprintf(line, size,
           "batch_norm: %d node%s normalise%s with each micro-batch's statistics, over %" PRId64 " samples%s%s\n",
           count, count == 1 ? "" : "s", count == 1 ? "s" : "", plan->micro_batch,
           plan->accumulate > 1 ? " (not the global batch: gradient accumulation splits it)" : "", running);
}

/* The line saying which half parameters train through f32 masters (master_weights.c), or "". */
static void master_note(const tf_training *t, const tf_plan *plan, char *line, size_t size) {
  int64_t half_bytes = 0, master_bytes = 0;
  int32_t masters = 0;
  tf_dtype dtype = TF_BF16;
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->role != TF_ROLE_OPTIMIZER_STATE || b->init.kind == TF_INIT_NONE || b->owner < 0)
      continue;
    masters++;
    master_bytes += b->bytes;
    half_bytes += plan->buffers[b->owner].bytes;
    dtype = plan->buffers[b->owner].dtype;
  }
  line[0] = '\0';
  if (masters > 0)
    snprintf(line, size,
             "master weights: %d %s parameters (%.2f MiB%s) trained through f32 masters in the optimizer state "
             "(%.2f MiB), each written from its master after its update\n",
             masters, tf_dtype_name(dtype), (double)half_bytes / (1 << 20),
             t->half_parameters > 0 ? ", stored half by --param-dtype" : "", (double)master_bytes / (1 << 20));
}

static void emit_report(tf_plan *plan, const products *p) {
  const tf_training *t = p->t;
  tf_plan_report *r = &plan->report;
  for (int32_t i = 0; i < plan->n_buffers; i++)
    r->role_bytes[plan->buffers[i].role] += plan->buffers[i].bytes;
  r->arena_lower_bound = p->layout->arena_lower_bound;
  r->arena_naive = p->layout->arena_naive;
  r->peak_step = p->layout->peak_step;
  r->live_bytes = malloc(sizeof(int64_t) * (size_t)(p->order->n_steps ? p->order->n_steps : 1));
  if (r->live_bytes)
    memcpy(r->live_bytes, p->layout->live_bytes, sizeof(int64_t) * (size_t)p->order->n_steps);
  for (int32_t s = 0; s < plan->n_steps; s++)
    r->flops[plan->steps[s].phase] += plan->steps[s].flops;
  char notes[4096], batch_norm[512], masters[256];
  batch_norm_note(t, plan, batch_norm, sizeof(batch_norm));
  master_note(t, plan, masters, sizeof(masters));
  static const char *const optimizers[] = {"none", "sgd", "adamw", "adamw8bit"};
  if (plan->training)
    snprintf(notes, sizeof(notes),
             "micro-batch %" PRId64 " x %d accumulation steps = global batch %" PRId64 "\n"
             "optimizer %s, lr %g, weight decay %g, clip %g\n"
             "%s\n"
             "%s\n"
             "%s\n"
             "%s%s"
             "arena: greedy by size, best fit among buffers live at the same time\n",
             plan->micro_batch, plan->accumulate, plan->global_batch, optimizers[t->config.optimizer],
             t->config.learning_rate, t->config.weight_decay, t->config.clip_norm, t->remat_notes, t->precision_notes,
             p->order->notes, batch_norm, masters);
  else
    snprintf(notes, sizeof(notes), "inference plan: forward steps only, batch %" PRId64 "\n%s%s%s", plan->micro_batch,
             t->half_nodes + t->half_kernel_nodes > 0 ? t->precision_notes : "",
             t->half_nodes + t->half_kernel_nodes > 0 ? "\n" : "", batch_norm);
  r->notes = tf_copy_string(notes);
}

void tf_plan_note(tf_plan *plan, const char *line) {
  if (!plan->report.notes)
    return;
  size_t used = strlen(plan->report.notes), more = strlen(line);
  char *notes = realloc(plan->report.notes, used + more + 1);
  if (!notes)
    return; /* the note is lost, the plan is whole */
  memcpy(notes + used, line, more + 1);
  plan->report.notes = notes;
}

static int64_t batch_of(const tf_graph *g) {
  int32_t n = tf_ir_find_symbol(g, "N");
  return n >= 0 ? g->symbols[n].value : 1;
}

tf_status tf_emit(const tf_training *t, const tf_order *order, const tf_lifetimes *lifetimes, const tf_layout *layout,
                  tf_plan **out) {
  *out = NULL;
  const products stages = {t, order, lifetimes, layout}, *p = &stages;
  const tf_graph *g = t->g;
  tf_plan *plan = calloc(1, sizeof(tf_plan));
  int32_t capacity = 2 * g->n_tensors + p->order->n_steps;
  int32_t *buffer_of = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (plan) {
    plan->buffers = calloc((size_t)(capacity ? capacity : 1), sizeof(tf_plan_buffer));
    plan->steps = calloc((size_t)(p->order->n_steps ? p->order->n_steps : 1), sizeof(tf_plan_step));
    plan->symbol_names = calloc((size_t)(g->n_symbols ? g->n_symbols : 1), sizeof(char *));
    plan->symbol_values = calloc((size_t)(g->n_symbols ? g->n_symbols : 1), sizeof(int64_t));
  }
  if (!plan || !buffer_of || !plan->buffers || !plan->steps || !plan->symbol_names || !plan->symbol_values) {
    free(buffer_of);
    tf_plan_destroy(plan);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "emit: cannot allocate the plan");
  }
  plan->version = TF_PLAN_VERSION;
  plan->graph_name = tf_copy_string(g->name);
  plan->target = tf_copy_string(tf_target_name(t->options.target.kind));
  plan->alignment = t->options.target.alignment;
  memcpy(plan->region_bytes, p->layout->region_bytes, sizeof(plan->region_bytes));
  plan->host_bytes = p->layout->host_bytes; /* the copies' host steps come with the offload pass */
  plan->training = t->options.training;
  plan->matmul_math = t->matmul_math;
  plan->training_config = t->config;
  plan->accumulate = t->options.training ? t->config.accumulate_steps : 1;
  plan->micro_batch = batch_of(g);
  plan->ranks = t->options.training && t->options.ranks > 1 ? t->options.ranks : 1;
  plan->global_batch = plan->micro_batch * plan->accumulate * plan->ranks;
  plan->micro_steps = p->order->micro_steps;
  plan->n_symbols = g->n_symbols;
  for (int32_t i = 0; i < g->n_symbols; i++) {
    plan->symbol_names[i] = tf_copy_string(g->symbols[i].name);
    plan->symbol_values[i] = g->symbols[i].value;
  }
  tf_status status = emit_buffers(plan, p, buffer_of);
  if (!status)
    status = emit_steps(plan, p, buffer_of);
  if (!status) {
    plan->loss = t->loss >= 0 ? buffer_of[t->loss] : -1;
    plan->loss_scale_seed = t->config.loss_scale > 0 && t->loss_seed >= 0 ? buffer_of[t->loss_seed] : -1;
    plan->overflow_check = t->overflow_check >= 0 ? buffer_of[t->overflow_check] : -1;
    if (!t->options.training && g->n_outputs > 0) {
      plan->outputs = malloc(sizeof(int32_t) * (size_t)g->n_outputs);
      if (!plan->outputs)
        status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "emit: cannot allocate outputs");
      for (int32_t i = 0; plan->outputs && i < g->n_outputs; i++)
        plan->outputs[plan->n_outputs++] = buffer_of[g->outputs[i]];
    }
    emit_report(plan, p);
    tf_target_plan_overhead(&t->options.target, plan->region_bytes, tf_plan_graph_steps(plan), &plan->overhead);
    tf_target_plan_collectives(&t->options.target, plan->ranks, &plan->overhead);
  }
  free(buffer_of);
  if (status) {
    tf_plan_destroy(plan);
    return status;
  }
  *out = plan;
  return NULL;
}
