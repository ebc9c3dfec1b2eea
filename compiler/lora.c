/* LoRA (tf_compile_options.lora_rank, compile --lora RANK[:ALPHA] --lora-targets PATTERN): each linear
 * weight W a target pattern names (a 2-D parameter read only as a matmul's second operand) gets two
 * new trainable parameters, A [r, in] (uniform in +-1/sqrt(in), as PEFT's kaiming_uniform(a=sqrt(5)))
 * and B [out, r] (zeros), and every y = x W (or x W^T) becomes
 *     y = x W + alpha/r * (x A^T) B^T
 * as PEFT's LoraLayer computes it (no dropout). Every parameter of the graph is then frozen as
 * PEFT's get_peft_model does, except the adapters and those a --train-only pattern names. Runs on
 * the bound copy right after freeze.c, before autocast, so the products below are ordinary nodes
 * every later pass (autocast, recompute, the planner) treats like any other. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "graph/passes.h"

/* The names of W's adapters: "x.lora_A.weight" for "x.weight", else "W.lora_A". */
static void adapter_name(const char *w, const char *which, char *out, size_t size) {
  size_t n = strlen(w);
  if (n > 7 && strcmp(w + n - 7, ".weight") == 0)
    snprintf(out, size, "%.*s.lora_%s.weight", (int)(n - 7), w, which);
  else
    snprintf(out, size, "%s.lora_%s", w, which);
}

/* Whether W (tensor w) is read only as a matmul's second operand without transpose_a; else an error
 * naming the first other reader. */
static tf_status check_linear(const tf_graph *g, int32_t w, int32_t *readers) {
  *readers = 0;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const tf_ir_node *node = &g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++) {
      if (node->inputs[k] != w)
        continue;
      if (node->op != TF_OP_MATMUL || k != 1 || node->attrs.u.matmul.transpose_a)
        return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                             "LoRA on '%s': node '%s' (%s) reads it as its input %d, not as a linear layer's weight "
                             "(a matmul's second operand): LoRA rewrites linear weights only; leave it out of "
                             "--lora-targets",
                             g->tensors[w].name, node->name, tf_op_name(node->op), k);
      (*readers)++;
    }
  }
  if (*readers == 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "LoRA on '%s': no node reads it", g->tensors[w].name);
  return NULL;
}

/* A new parameter `name` [rows, cols] initialised by `init`, trainable. */
static int32_t add_parameter(tf_training *t, const char *name, int64_t rows, int64_t cols, tf_init init,
                             tf_status *status) {
  if (tf_graph_find_tensor(t->g, name) >= 0) {
    *status =
        tf_status_new(TF_ERR_INVALID_ARGUMENT, "LoRA: graph '%s' already has a tensor named '%s'", t->g->name, name);
    return -1;
  }
  tf_shape shape = tf_shape_from((const tf_dim[]){tf_fixed(rows), tf_fixed(cols)}, 2);
  int32_t id = tf_ir_add_tensor(t->g, name, TF_F32, TF_PARAMETER, &shape, &init, status);
  if (*status)
    return -1;
  *status = tf_shapes_resolve_tensor(t->g, id);
  return *status ? -1 : id;
}

/* A new activation written by a new node `op` over `inputs`, shapes inferred; pushed on `order`. */
static int32_t add_node(tf_training *t, const char *base, tf_op op, const int32_t *inputs, int32_t n_inputs,
                        const tf_attrs *attrs, int32_t output, tf_node_order *order, tf_status *status) {
  tf_graph *g = t->g;
  char name[600];
  *status = tf_ir_unique_name(g, base, name, sizeof(name));
  if (*status)
    return -1;
  if (output < 0) {
    tf_shape unknown;
    memset(&unknown, 0, sizeof(unknown));
    unknown.rank = -1;
    output = tf_ir_add_tensor(g, name, TF_F32, TF_ACTIVATION, &unknown, NULL, status);
    if (*status)
      return -1;
  }
  int32_t node = tf_ir_add_node(g, name, op, inputs, n_inputs, &output, 1, attrs, status);
  if (!*status)
    *status = tf_shapes_infer_node(g, node, false);
  if (!*status)
    *status = tf_node_order_push(order, node, "lora");
  return *status ? -1 : output;
}

/* Matmul node n reading W (with adapters a, b): its output y now comes from
 * add(matmul(x, W), mul(matmul(matmul(x, a^T), b^T), scale)); y's id and name are kept. */
static tf_status rewrite(tf_training *t, int32_t n, int32_t a, int32_t b, int32_t scale, tf_node_order *order) {
  tf_graph *g = t->g;
  const int32_t y = g->nodes[n].outputs[0], x = g->nodes[n].inputs[0];
  char base[600];
  snprintf(base, sizeof(base), "%s/lora", g->nodes[n].name);
  tf_status status = NULL;
  tf_shape unknown;
  memset(&unknown, 0, sizeof(unknown));
  unknown.rank = -1;
  char name[600];
  TF_RETURN_IF_ERROR(tf_ir_unique_name(g, base, name, sizeof(name)));
  int32_t y0 = tf_ir_add_tensor(g, name, g->tensors[y].dtype, TF_ACTIVATION, &unknown, NULL, &status);
  TF_RETURN_IF_ERROR(status);
  g->nodes[n].outputs[0] = y0;
  g->tensors[y0].producer = n;
  g->tensors[y].producer = -1; /* the add below writes it */
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, n, false));
  TF_RETURN_IF_ERROR(tf_node_order_push(order, n, "lora"));
  tf_attrs transposed = {.kind = TF_ATTR_MATMUL};
  transposed.u.matmul.transpose_b = true;
  tf_attrs none = {.kind = TF_ATTR_NONE};
  int32_t h = add_node(t, base, TF_OP_MATMUL, (const int32_t[]){x, a}, 2, &transposed, -1, order, &status);
  int32_t d =
      status ? -1 : add_node(t, base, TF_OP_MATMUL, (const int32_t[]){h, b}, 2, &transposed, -1, order, &status);
  int32_t s = status ? -1 : add_node(t, base, TF_OP_MUL, (const int32_t[]){d, scale}, 2, &none, -1, order, &status);
  if (!status)
    add_node(t, base, TF_OP_ADD, (const int32_t[]){y0, s}, 2, &none, y, order, &status);
  return status;
}

static bool named_by(const char *const *patterns, int32_t count, const char *name) {
  for (int32_t k = 0; k < count; k++)
    if (fnmatch(patterns[k], name, 0) == 0)
      return true;
  return false;
}

/* The targets: every parameter a pattern names, each checked; an error for a pattern naming none. */
static tf_status find_targets(tf_training *t, bool *target) {
  const tf_graph *g = t->g;
  const tf_compile_options *o = &t->options;
  for (int32_t k = 0; k < o->lora_target_count; k++) {
    bool any = false;
    for (int32_t i = 0; i < g->n_tensors; i++) {
      if (g->tensors[i].kind != TF_PARAMETER || fnmatch(o->lora_targets[k], g->tensors[i].name, 0) != 0)
        continue;
      any = true;
      target[i] = true;
    }
    if (!any)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "--lora-targets pattern '%s' names no parameter of graph '%s' (tightfit inspect lists "
                           "them)",
                           o->lora_targets[k], g->name);
  }
  if (o->lora_target_count == 0 && o->lora_all_linear) /* the search's default: every linear weight it can */
    for (int32_t i = 0; i < g->n_tensors; i++) {
      const tf_ir_tensor *w = &g->tensors[i];
      int32_t readers;
      tf_status status = w->kind == TF_PARAMETER && w->rank == 2 ? check_linear(g, i, &readers) : NULL;
      target[i] = w->kind == TF_PARAMETER && w->rank == 2 && !status &&
                  o->lora_rank <= (w->shape[0] < w->shape[1] ? w->shape[0] : w->shape[1]);
      tf_status_free(status);
    }
  for (int32_t i = 0; i < g->n_tensors; i++) {
    if (!target[i])
      continue;
    const tf_ir_tensor *w = &g->tensors[i];
    if (w->rank != 2)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "LoRA on '%s': a linear weight is 2-D, this one has rank %d; leave it out of --lora-targets",
                           w->name, w->rank);
    int32_t readers;
    TF_RETURN_IF_ERROR(check_linear(g, i, &readers));
    const int64_t smaller = w->shape[0] < w->shape[1] ? w->shape[0] : w->shape[1];
    if (o->lora_rank > smaller)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "LoRA rank %d is larger than weight '%s' [%lld, %lld] allows (at most %lld, its smaller "
                           "side)",
                           o->lora_rank, w->name, (long long)w->shape[0], (long long)w->shape[1], (long long)smaller);
  }
  return NULL;
}

/* Adds W's adapters (tensor w) into *a, *b. */
static tf_status add_adapters(tf_training *t, int32_t w, int32_t *a, int32_t *b) {
  tf_graph *g = t->g;
  bool transposed = false; /* every reader is checked alike: the first one says the layout */
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (g->nodes[n].op == TF_OP_MATMUL && g->nodes[n].n_inputs > 1 && g->nodes[n].inputs[1] == w) {
      transposed = g->nodes[n].attrs.u.matmul.transpose_b;
      break;
    }
  const int64_t in = transposed ? g->tensors[w].shape[1] : g->tensors[w].shape[0];
  const int64_t out = transposed ? g->tensors[w].shape[0] : g->tensors[w].shape[1];
  char name[600];
  tf_status status = NULL;
  const double bound = 1.0 / sqrt((double)in);
  adapter_name(g->tensors[w].name, "A", name, sizeof(name));
  *a = add_parameter(t, name, t->options.lora_rank, in, tf_init_make(TF_INIT_UNIFORM, -bound, bound), &status);
  TF_RETURN_IF_ERROR(status);
  adapter_name(g->tensors[w].name, "B", name, sizeof(name));
  *b = add_parameter(t, name, out, t->options.lora_rank, tf_init_make(TF_INIT_ZEROS, 0, 0), &status);
  return status;
}

tf_status tf_lora_pass(tf_training *t) {
  const tf_compile_options *o = &t->options;
  if (o->lora_rank == 0 && o->lora_target_count == 0)
    return NULL;
  if (o->lora_rank <= 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--lora-targets needs --lora RANK (a rank >= 1)");
  if ((o->lora_target_count <= 0 || !o->lora_targets) && !o->lora_all_linear)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "--lora needs --lora-targets PATTERN: the linear weights to adapt");
  if (o->lora_alpha < 0 || !isfinite(o->lora_alpha))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "LoRA alpha %g: it must be > 0 (0: the rank)", o->lora_alpha);
  const double alpha = o->lora_alpha > 0 ? o->lora_alpha : o->lora_rank;
  tf_graph *g = t->g;
  const int32_t n_tensors = g->n_tensors, n_nodes = g->n_nodes;
  bool *target = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof(bool));
  int32_t *a = calloc((size_t)(n_tensors ? n_tensors : 1), 2 * sizeof(int32_t));
  if (!target || !a) {
    free(target);
    free(a);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "LoRA: out of memory for %d tensors", n_tensors);
  }
  tf_status status = find_targets(t, target);
  for (int32_t i = 0; i < n_tensors && !status; i++) /* PEFT's default: only the adapters train */
    if (g->tensors[i].kind == TF_PARAMETER && !named_by(o->train_only, o->train_only_count, g->tensors[i].name))
      g->tensors[i].frozen = true;
  for (int32_t i = 0; i < n_tensors && !status; i++)
    if (target[i])
      status = add_adapters(t, i, &a[2 * i], &a[2 * i + 1]);
  int32_t scale = -1;
  if (!status)
    scale = tf_training_scalar(t, alpha / o->lora_rank, "lora_scale", &status);
  tf_node_order order = {NULL, 0, 0};
  for (int32_t n = 0; n < n_nodes && !status; n++) {
    const tf_ir_node *node = &g->nodes[n];
    const int32_t w = node->op == TF_OP_MATMUL && node->n_inputs > 1 ? node->inputs[1] : -1;
    if (w >= 0 && w < n_tensors && target[w])
      status = rewrite(t, n, a[2 * w], a[2 * w + 1], scale, &order);
    else
      status = tf_node_order_push(&order, n, "lora");
  }
  if (!status && order.n != g->n_nodes)
    status = tf_status_new(TF_ERR_INTERNAL, "lora: ordered %d of %d nodes", order.n, g->n_nodes);
  if (!status)
    status = tf_ir_reorder_nodes(g, order.ids);
  if (!status)
    status = tf_training_reserve(t);
  free(order.ids);
  free(target);
  free(a);
  return status;
}
