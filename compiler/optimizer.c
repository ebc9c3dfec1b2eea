/* Pass 4, optimizer: per trained parameter, a gradient accumulator (gradients region) that each
 * micro-batch adds its gradient to (each part of it on its own, for parameters used twice), the optimizer state
 * (momentum, or Adam's two moments), and the update in the optimizer block: optional global-norm clipping, SGD or AdamW
 * with the accumulated gradient scaled by 1/k, then the accumulator is zeroed for the next step.
 *
 * Plans that store f16 activations (an f16 policy or a node's f16 override; config.loss_scale > 0)
 * scale the loss (dynamic loss scaling): the runtime writes the scale S, a power of two,
 * into the loss gradient's seed and passes 1/S to the updates with each run. Every update of such a
 * plan also reads the sum of squares of all accumulated gradients (the same global_norm_sq that
 * clipping reads) and leaves its parameter and state untouched when that sum is not finite; the
 * runtime reads the sum after the optimizer block (t->overflow_check, live to the end) to learn
 * that the step was skipped and to adjust S. Scaling by a power of two is exact in f32 (barring
 * overflow, which the check catches), so a scaled step updates the weights bit for bit as an
 * unscaled one would. Plans that clip read the same sum and skip the same way.
 *
 * With options.offload_gradients (below ZeRO stage 2: tf_training_host_accumulates) every gradient
 * part goes through accumulate (no direct writes, no in-place products): the accumulators then live
 * in host memory (compiler/offload.c). At stage 2 the gradients are written as without offloading:
 * into the device's buckets, which the job reduces into the shards in host memory.
 *
 * A half parameter (compiler/master_weights.c) is updated through its f32 master, an optimizer-state
 * tensor `master(name)` drawn from the parameter's initialiser: the update reads the gradient widened
 * to f32 (a half gradient written whole, cast; parts summed into an f32 accumulator) and changes the
 * master, then cast_into writes the parameter from it.
 *
 * With options.update_in_backward (k = 1, no clipping, no loss scaling), a gradient that one
 * backward step writes whole becomes an arena temporary instead of a gradients-region buffer: the
 * schedule (schedule_updates.c) runs its update right after it, so it lives for a few steps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/copy.h"
#include "compiler/training.h"
#include "core/linear_loss.h"
#include "core/ops.h"

static tf_attrs optimizer_attrs(const tf_training *t) {
  const tf_training_config *c = &t->config;
  /* the gradient an update reads is summed over k micro-batches, and over the ranks of a data-parallel job */
  const double parts = (double)c->accumulate_steps * (t->options.ranks > 1 ? t->options.ranks : 1);
  tf_attrs at;
  memset(&at, 0, sizeof(at));
  at.kind = TF_ATTR_OPTIMIZER;
  at.u.optimizer =
      (tf_optimizer_attrs){(float)c->learning_rate, (float)c->momentum,     (float)c->beta1,     (float)c->beta2,
                           (float)c->epsilon,       (float)c->weight_decay, (float)c->clip_norm, (float)(1.0 / parts)};
  return at;
}

/* Sum of squares of every accumulator: chunks of at most TF_OP_VARIADIC_INTERNAL inputs, added. */
static tf_status global_norm(tf_training *t, const int32_t *grads, int32_t n, int32_t *norm) {
  *norm = -1;
  for (int32_t start = 0; start < n; start += TF_OP_VARIADIC_INTERNAL) {
    int32_t count = n - start < TF_OP_VARIADIC_INTERNAL ? n - start : TF_OP_VARIADIC_INTERNAL;
    int32_t part;
    TF_RETURN_IF_ERROR(tf_training_emit(t, TF_OP_GLOBAL_NORM_SQ, grads + start, count, NULL, TF_PHASE_OPTIMIZER,
                                        "optimizer/global_norm_sq", &part));
    if (*norm < 0) {
      *norm = part;
    } else {
      int32_t pair[2] = {*norm, part};
      TF_RETURN_IF_ERROR(
          tf_training_emit(t, TF_OP_ADD, pair, 2, NULL, TF_PHASE_OPTIMIZER, "optimizer/global_norm_sq_sum", norm));
    }
  }
  return NULL;
}

/* At ZeRO stage 2 no rank holds the whole gradients: the norm is a constant scalar the data-parallel
 * job writes before each optimizer block, the sum of the ranks' sums of squares of their shards
 * (tools/dist_buckets.c), which compiler/zero.c and the verifier allow for no other kind of plan. */
static bool norm_from_ranks(const tf_training *t) { return t->options.zero == 2 && t->options.ranks > 1; }

/* How many gradient parts (a parameter's first, t->grad, and its extra ones) of `param`, or of any
 * parameter when param is -1, are the tensor `part`: more than one where gradients pass through
 * unchanged (w + w, w1 + w2: each use's part is the add's upstream gradient), each then added as
 * one more summand. */
static int32_t part_uses(const tf_training *t, int32_t param, int32_t part) {
  int32_t uses = 0;
  for (int32_t p = 0; p < t->g->n_tensors; p++)
    uses += (param < 0 || p == param) && t->grad[p] == part;
  for (int32_t e = 0; e < t->n_extra_parts; e++)
    uses += (param < 0 || t->extra_parts[2 * e] == param) && t->extra_parts[2 * e + 1] == part;
  return uses;
}

/* With one micro-batch per step (k = 1) nothing needs summing across micro-batches: the step
 * that computes a parameter's (first) gradient part (a backward step, or the fused loss head's
 * single pass in the forward pass) writes it straight into the gradients region,
 * and the optimizer never zeroes it (the next step overwrites it). Possible when that part is an
 * activation of the backward pass, shaped and typed like the parameter. */
static bool writes_directly(const tf_training *t, int32_t param, int32_t part) {
  const tf_graph *g = t->g;
  if (part_uses(t, param, part) > 1)
    return false; /* the gradient would be the part and also add it to itself */
  const tf_ir_tensor *x = &g->tensors[part];
  int32_t producer = x->producer;
  const bool gradient_step =
      producer >= 0 && (t->phase[producer] == TF_PHASE_BACKWARD || tf_linear_loss_is_train(g->nodes[producer].op));
  return t->config.accumulate_steps == 1 && gradient_step && x->kind == TF_ACTIVATION &&
         t->role[part] == TF_ROLE_ACTIVATION && x->dtype == g->tensors[param].dtype &&
         x->bytes == g->tensors[param].bytes && x->rank == g->tensors[param].rank;
}

/* Whether `part` is a 2-D product that matmul_accumulate can add to `accumulator` in place: a
 * backward matmul that nothing else reads, of two rank-2 operands (neither the accumulator),
 * shaped and typed as the accumulator. That is every weight gradient vjp_matmul gives a rank-2
 * weight: one product over the flattened rows when the activation is batched (a linear layer),
 * dy^T x for a rank-2 one. A batched product, or one that sum_to reduces (a broadcast operand's
 * gradient), is not taken: it keeps its arena part and accumulate. */
static bool accumulates_in_place(const tf_training *t, int32_t accumulator, int32_t part) {
  const tf_graph *g = t->g;
  const tf_ir_tensor *x = &g->tensors[part], *sum = &g->tensors[accumulator];
  const int32_t producer = x->producer;
  if (producer < 0 || g->nodes[producer].op != TF_OP_MATMUL || t->phase[producer] != TF_PHASE_BACKWARD ||
      x->kind != TF_ACTIVATION || t->role[part] != TF_ROLE_ACTIVATION || tf_training_readers(g, part) != 0)
    return false;
  const tf_ir_node *node = &g->nodes[producer];
  for (int32_t i = 0; i < 2; i++)
    if (node->inputs[i] == accumulator || g->tensors[node->inputs[i]].rank != 2)
      return false;
  return x->dtype == sum->dtype && x->rank == 2 && sum->rank == 2 && x->shape[0] == sum->shape[0] &&
         x->shape[1] == sum->shape[1];
}

/* Whether `part`, a gradient output of a fused loss head's gradient step, can be added in place by
 * that step with its other gradient outputs (dweight, dbias): each has an accumulator in `sums`,
 * is added once, nothing else reads it, and it has its accumulator's dtype. */
static bool head_accumulates(const tf_training *t, const int32_t *sums, const tf_ir_node *node) {
  for (int32_t j = 1; j < node->n_outputs; j++) {
    const int32_t out = node->outputs[j];
    if (sums[out] < 0 || tf_training_readers(t->g, out) != 0 || part_uses(t, -1, out) != 1 ||
        t->g->tensors[out].dtype != t->g->tensors[sums[out]].dtype)
      return false;
  }
  return true;
}

/* The fused head's gradient step `n` becomes its _accumulate form: (x, weight, labels, dloss [,
 * bias], dweight_sum [, dbias_sum]) -> dx, adding dweight (and dbias) chunk by chunk straight into
 * the accumulators, so the [V, d] part never exists; its parts are marked handled (-2) in `sums`. */
static tf_status head_accumulate(tf_training *t, int32_t *sums, int32_t n) {
  tf_ir_node *node = &t->g->nodes[n];
  const bool bias = node->op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD;
  const int32_t n_inputs = node->n_inputs + node->n_outputs - 1;
  int32_t *inputs = realloc(node->inputs, sizeof(int32_t) * (size_t)n_inputs);
  if (!inputs)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "optimizer: cannot rewrite node '%s'", node->name);
  for (int32_t j = 1; j < node->n_outputs; j++) {
    const int32_t out = node->outputs[j];
    inputs[node->n_inputs + j - 1] = sums[out];
    t->g->tensors[out].producer = -1;
    sums[out] = -2;
  }
  node->inputs = inputs;
  node->n_inputs = n_inputs;
  node->n_outputs = 1;
  node->op = bias ? TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE : TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE;
  return NULL;
}

/* *wide = cast(x -> f32), a new activation of `phase` named after `label`. */
static tf_status widen(tf_training *t, int32_t x, tf_phase phase, const char *label, int32_t *wide) {
  char name[560];
  snprintf(name, sizeof(name), "%s/f32", label);
  return tf_training_emit_cast(t, x, TF_F32, phase, name, wide);
}

/* Adds gradient part `part` to `accumulator`. A part that embedding_grad writes and nothing reads
 * is scattered straight into the accumulator instead (its node becomes embedding_grad_accumulate),
 * so the dense [V, d] part never exists; a weight's 2-D matmul part is added by its own gemm (the
 * node becomes matmul_accumulate(accumulator, a, b), beta = 1), so the [out, in] part never exists
 * either; any other part goes through accumulate. */
static tf_status add_part(tf_training *t, int32_t *sums, int32_t accumulator, int32_t part, bool repeated,
                          const char *label) {
  tf_graph *g = t->g;
  if (sums[part] == -2)
    return NULL; /* added in place by the fused head's step, with its other part */
  const int32_t producer = g->tensors[part].producer;
  /* A part added more than once (to one gradient or to several) stays a tensor: the rewrites below
   * turn its producer into the add. Offloaded gradients live in host memory: every part is then a
   * temporary of the arena that a host step (accumulate) adds to its gradient there. */
  const bool rewrite = !repeated && !tf_training_host_accumulates(&t->options);
  if (rewrite && producer >= 0 && t->phase[producer] == TF_PHASE_BACKWARD &&
      (g->nodes[producer].op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD ||
       g->nodes[producer].op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD) &&
      head_accumulates(t, sums, &g->nodes[producer]))
    return head_accumulate(t, sums, producer);
  if (rewrite && producer >= 0 && g->nodes[producer].op == TF_OP_EMBEDDING_GRAD &&
      t->phase[producer] == TF_PHASE_BACKWARD && tf_training_readers(g, part) == 0 &&
      g->tensors[part].dtype == g->tensors[accumulator].dtype) {
    tf_ir_node *node = &g->nodes[producer];
    node->op = TF_OP_EMBEDDING_GRAD_ACCUMULATE;
    node->inputs[2] = accumulator; /* was the table, read for its shape */
    node->n_outputs = 0;
    g->tensors[part].producer = -1;
    return NULL;
  }
  if (rewrite && accumulates_in_place(t, accumulator, part)) {
    tf_ir_node *node = &g->nodes[producer];
    int32_t *inputs = realloc(node->inputs, sizeof(int32_t) * 3);
    if (!inputs)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "optimizer: cannot rewrite node '%s'", node->name);
    inputs[2] = inputs[1];
    inputs[1] = inputs[0];
    inputs[0] = accumulator;
    node->inputs = inputs;
    node->n_inputs = 3;
    node->op = TF_OP_MATMUL_ACCUMULATE; /* the transposes stay: same attributes */
    node->n_outputs = 0;
    g->tensors[part].producer = -1;
    return NULL;
  }
  int32_t pair[2] = {accumulator, part};
  if (g->tensors[part].dtype != g->tensors[accumulator].dtype) {
    /* a half parameter's part, summed in f32: widened right after the step that makes it */
    TF_RETURN_IF_ERROR(widen(t, part, TF_PHASE_BACKWARD, label, &pair[1]));
    t->follows[g->n_nodes - 1] = g->tensors[part].producer;
  }
  return tf_training_emit(t, TF_OP_ACCUMULATE, pair, 2, NULL, TF_PHASE_ACCUMULATE, label, NULL);
}

/* Whether every update reads the gradients' sum of squares (clipping, loss scaling). */
static bool needs_norm(const tf_training *t) { return t->config.clip_norm > 0 || t->config.loss_scale > 0; }

static bool has_extra_parts(const tf_training *t, int32_t param) {
  for (int32_t e = 0; e < t->n_extra_parts; e++)
    if (t->extra_parts[2 * e] == param)
      return true;
  return false;
}

/* An optimizer-state tensor of `param` with its own dtype and shape (rank 1: [count]; else param's). */
static tf_status state_tensor(tf_training *t, int32_t param, const char *label, tf_dtype dtype, int64_t count,
                              bool param_shape, int32_t *id) {
  tf_status status = NULL;
  *id = tf_training_tensor_like(t, param, TF_ROLE_OPTIMIZER_STATE, label, &status);
  if (status)
    return status;
  tf_ir_tensor *tensor = &t->g->tensors[*id];
  tensor->dtype = dtype;
  if (!param_shape) {
    tensor->rank = 1;
    tensor->shape[0] = count;
  }
  tensor->bytes = count * tf_dtype_size(dtype);
  t->owner[*id] = param;
  return NULL;
}

/* adamw8bit's state of `param`, appended to inputs: each moment's u8 codes (param's shape) and f32
 * scales, one per TF_ADAMW8BIT_BLOCK elements; zero-initialised, which is all-zero moments. */
static tf_status state8(tf_training *t, int32_t param, int32_t *inputs, int32_t *n) {
  const tf_ir_tensor *p = &t->g->tensors[param];
  int64_t count = 1;
  for (int32_t d = 0; d < p->rank; d++)
    count *= p->shape[d];
  const char *name = p->name;
  static const char *const moments[2] = {"adam8_m", "adam8_v"};
  for (int32_t k = 0; k < 2; k++) {
    char label[512];
    snprintf(label, sizeof(label), "%s(%s)", moments[k], name);
    TF_RETURN_IF_ERROR(state_tensor(t, param, label, TF_U8, count, true, &inputs[(*n)++]));
    name = t->g->tensors[param].name; /* the tensor array may have moved */
    snprintf(label, sizeof(label), "%s_scales(%s)", moments[k], name);
    TF_RETURN_IF_ERROR(state_tensor(t, param, label, TF_F32, tf_adamw8bit_blocks(count), false, &inputs[(*n)++]));
    name = t->g->tensors[param].name;
  }
  return NULL;
}

/* The f32 master weights of half parameter `param`: optimizer state of its shape, initialised by
 * its initialiser (the runtime draws them from the parameter's name: tf_plan_init_name), so the
 * master starts at full precision and the parameter at its rounding. */
static tf_status master(tf_training *t, int32_t param, int32_t *id) {
  char label[512];
  tf_plan_master_name(t->g->tensors[param].name, label, sizeof(label));
  const tf_ir_tensor *p = &t->g->tensors[param];
  TF_RETURN_IF_ERROR(state_tensor(t, param, label, TF_F32, p->bytes / tf_dtype_size(p->dtype), true, id));
  tf_ir_tensor *m = &t->g->tensors[*id];
  p = &t->g->tensors[param];
  m->init_kind = p->init_kind;
  m->init_a = p->init_a;
  m->init_b = p->init_b;
  m->init_file = tf_copy_string(p->init_file);
  m->init_key = tf_copy_string(p->init_key);
  if ((p->init_file && !m->init_file) || (p->init_key && !m->init_key))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "optimizer: cannot copy the initialiser of '%s'", p->name);
  return NULL;
}

static tf_status update(tf_training *t, int32_t param, int32_t accumulator, int32_t norm, bool direct) {
  tf_status status = NULL;
  const char *name = t->g->tensors[param].name;
  char label[512];
  int32_t inputs[7], n = 0;
  /* A half parameter: the update changes its f32 master from the f32 gradient (a half one widened),
   * and cast_into writes the parameter from the master; its state is f32, shaped like the master. */
  int32_t weights = param, gradient = accumulator;
  if (tf_master_weights_needed(t, param)) {
    TF_RETURN_IF_ERROR(master(t, param, &weights));
    snprintf(label, sizeof(label), "optimizer/%s", name);
    if (t->g->tensors[accumulator].dtype != TF_F32)
      TF_RETURN_IF_ERROR(widen(t, accumulator, TF_PHASE_OPTIMIZER, label, &gradient));
  }
  inputs[n++] = weights;
  inputs[n++] = gradient;
  if (t->config.optimizer == TF_OPTIMIZER_ADAMW8BIT) {
    TF_RETURN_IF_ERROR(state8(t, param, inputs, &n));
  } else if (t->config.optimizer == TF_OPTIMIZER_ADAMW) {
    snprintf(label, sizeof(label), "adam_m(%s)", name);
    inputs[n++] = tf_training_tensor_like(t, weights, TF_ROLE_OPTIMIZER_STATE, label, &status);
    if (!status) {
      snprintf(label, sizeof(label), "adam_v(%s)", name);
      inputs[n++] = tf_training_tensor_like(t, weights, TF_ROLE_OPTIMIZER_STATE, label, &status);
    }
  } else {
    snprintf(label, sizeof(label), "momentum(%s)", name);
    inputs[n++] = tf_training_tensor_like(t, weights, TF_ROLE_OPTIMIZER_STATE, label, &status);
  }
  if (status)
    return status;
  for (int32_t i = 2; i < n; i++)
    t->owner[inputs[i]] = param;
  if (norm >= 0)
    inputs[n++] = norm;
  tf_attrs at = optimizer_attrs(t);
  snprintf(label, sizeof(label), "optimizer/%s", name);
  tf_op op = t->config.optimizer == TF_OPTIMIZER_ADAMW       ? TF_OP_ADAMW
             : t->config.optimizer == TF_OPTIMIZER_ADAMW8BIT ? TF_OP_ADAMW8BIT
                                                             : TF_OP_SGD;
  TF_RETURN_IF_ERROR(tf_training_emit(t, op, inputs, n, &at, TF_PHASE_OPTIMIZER, label, NULL));
  if (weights != param) {
    const int32_t pair[2] = {param, weights};
    snprintf(label, sizeof(label), "optimizer/%s/cast_into", name);
    TF_RETURN_IF_ERROR(tf_training_emit(t, TF_OP_CAST_INTO, pair, 2, NULL, TF_PHASE_OPTIMIZER, label, NULL));
  }
  if (direct)
    return NULL;
  snprintf(label, sizeof(label), "optimizer/zero/%s", name);
  return tf_training_emit(t, TF_OP_ZERO, &accumulator, 1, NULL, TF_PHASE_OPTIMIZER, label, NULL);
}

tf_status tf_optimizer_pass(tf_training *t) {
  tf_graph *g = t->g;
  int32_t n_tensors = g->n_tensors;
  int32_t n_params = 0;
  for (int32_t p = 0; p < n_tensors; p++)
    n_params += t->grad[p] >= 0;
  int32_t *params = malloc(sizeof(int32_t) * (size_t)(n_params ? n_params : 1));
  int32_t *accumulators = malloc(sizeof(int32_t) * (size_t)(n_params ? n_params : 1));
  bool *direct = malloc(sizeof(bool) * (size_t)(n_params ? n_params : 1));
  tf_status status = NULL;
  if (!params || !accumulators || !direct)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "optimizer: cannot allocate for %d parameters", n_params);
  /* sums[part]: the accumulator a gradient part is added to (-1: none, -2: already added) */
  int32_t *sums = malloc(sizeof(int32_t) * (size_t)(n_tensors ? n_tensors : 1));
  if (!status && !sums)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "optimizer: cannot allocate for %d tensors", n_tensors);
  for (int32_t i = 0; !status && i < n_tensors; i++)
    sums[i] = -1;
  /* Every accumulator first, so a step that makes two parts (a fused head's dweight and dbias) can
   * add both in place when the first of them comes. */
  int32_t k = 0;
  for (int32_t p = 0; p < n_tensors && !status; p++) {
    if (t->grad[p] < 0)
      continue;
    int32_t accumulator = t->grad[p];
    /* A half parameter's gradient is summed in f32 where parts are added to it (a tied weight), the
     * gradients' norm reads it (the norm reads f32 sums) or the ranks of a data-parallel job sum it
     * (in f32: tools/dist.c). */
    const bool widened =
        tf_master_weights_needed(t, p) && (needs_norm(t) || has_extra_parts(t, p) || t->options.ranks > 1);
    direct[k] = !tf_training_host_accumulates(&t->options) && !widened && writes_directly(t, p, accumulator);
    if (direct[k]) {
      /* Updated in the backward pass (schedule_updates.c), a gradient that one step writes whole is
       * a temporary of the arena; one that later parts are added to in place stays a gradient. */
      t->role[accumulator] =
          t->options.update_in_backward && !has_extra_parts(t, p) ? TF_ROLE_ACTIVATION : TF_ROLE_GRADIENT;
    } else {
      char label[512];
      snprintf(label, sizeof(label), "grad(%s)", g->tensors[p].name);
      accumulator = tf_training_tensor_like(t, p, TF_ROLE_GRADIENT, label, &status);
      if (status)
        break;
      if (tf_master_weights_needed(t, p)) { /* summed in f32, as the master is updated */
        tf_ir_tensor *sum = &g->tensors[accumulator];
        sum->bytes = sum->bytes / tf_dtype_size(sum->dtype) * 4;
        sum->dtype = TF_F32;
      }
      sums[t->grad[p]] = accumulator;
    }
    if (t->role[accumulator] == TF_ROLE_GRADIENT)
      t->owner[accumulator] = p;
    for (int32_t e = 0; e < t->n_extra_parts; e++)
      if (t->extra_parts[2 * e] == p)
        sums[t->extra_parts[2 * e + 1]] = accumulator;
    params[k] = p;
    accumulators[k] = accumulator;
    k++;
  }
  for (int32_t i = 0; i < k && !status; i++) {
    const int32_t p = params[i];
    char label[512];
    if (!direct[i]) {
      snprintf(label, sizeof(label), "accumulate/%s", g->tensors[p].name);
      status = add_part(t, sums, accumulators[i], t->grad[p], part_uses(t, -1, t->grad[p]) > 1, label);
    }
    for (int32_t e = 0; e < t->n_extra_parts && !status; e++) {
      if (t->extra_parts[2 * e] != p)
        continue;
      snprintf(label, sizeof(label), "accumulate/%s/part%d", g->tensors[p].name, e + 2);
      int32_t part = t->extra_parts[2 * e + 1];
      status = add_part(t, sums, accumulators[i], part, part_uses(t, -1, part) > 1, label);
    }
  }
  free(sums);
  int32_t norm = -1;
  if (!status && k > 0 && needs_norm(t)) {
    if (norm_from_ranks(t))
      norm = tf_training_scalar(t, 0.0, "optimizer/global_norm_sq", &status);
    else
      status = global_norm(t, accumulators, k, &norm);
  }
  t->overflow_check = norm;
  for (int32_t i = 0; i < k && !status; i++)
    status = update(t, params[i], accumulators[i], norm, direct[i]);
  for (int32_t i = 0; i < k && !status; i++)
    t->grad[params[i]] = accumulators[i];
  free(params);
  free(accumulators);
  free(direct);
  return status;
}
