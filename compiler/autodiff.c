/* Pass 3, autodiff: appends the backward graph. Which tensors need a gradient: those that depend
 * on a trained parameter and that the loss depends on. Forward nodes are visited in reverse; each
 * op's VJP rule (autodiff_rules.c) emits its backward nodes. Gradients of a tensor with several
 * consumers are summed, except a parameter's: afterwards t->grad[p] holds the first gradient part
 * of every trained parameter p and t->extra_parts the others (arena temporaries each; the
 * optimizer pass accumulates each part as it is produced). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/autodiff.h"
#include "core/ops.h"

static bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

/* Whether the op's output is a constant to autodiff: stop_gradient (PyTorch's detach()), and the
 * steps floor, ceil, round and sign, whose gradient is 0 wherever it exists (PyTorch's too). */
static bool passes_no_gradient(tf_op op) {
  return op == TF_OP_STOP_GRADIENT || op == TF_OP_FLOOR || op == TF_OP_CEIL || op == TF_OP_ROUND || op == TF_OP_SIGN;
}

/* Whether input k of an op passes a gradient: not through an op of passes_no_gradient, nor to keep's
 * mask (input 1), whose output is piecewise constant in it. */
static bool input_passes_gradient(tf_op op, int32_t k) {
  return !passes_no_gradient(op) && !(op == TF_OP_KEEP && k == 1);
}

/* depends[t]: t is a trained (not frozen) parameter or computed from one (floating only). What
 * only frozen parameters feed gets no gradient: the backward pass stops there, as it does at an op
 * whose output is a constant to autodiff (passes_no_gradient). */
static void mark_dependents(const tf_graph *g, bool *depends) {
  for (int32_t i = 0; i < g->n_tensors; i++)
    depends[i] = g->tensors[i].kind == TF_PARAMETER && !g->tensors[i].frozen && is_floating(g->tensors[i].dtype);
  for (int32_t n = 0; n < g->n_nodes; n++) {
    const tf_ir_node *node = &g->nodes[n];
    bool any = false;
    for (int32_t k = 0; k < node->n_inputs; k++)
      any = any || (depends[node->inputs[k]] && input_passes_gradient(node->op, k));
    for (int32_t k = 0; k < node->n_outputs; k++)
      depends[node->outputs[k]] = any && is_floating(g->tensors[node->outputs[k]].dtype);
  }
}

/* needs[t]: depends[t] and the loss is reachable from t. */
static void mark_needs(const tf_graph *g, int32_t n_forward, int32_t loss, const bool *depends, bool *needs) {
  memset(needs, 0, sizeof(bool) * (size_t)g->n_tensors);
  needs[loss] = depends[loss];
  for (int32_t n = n_forward - 1; n >= 0; n--) {
    const tf_ir_node *node = &g->nodes[n];
    if (!needs[node->outputs[0]])
      continue;
    for (int32_t k = 0; k < node->n_inputs; k++)
      if (depends[node->inputs[k]] && input_passes_gradient(node->op, k))
        needs[node->inputs[k]] = true;
  }
}

int32_t tf_vjp_input(const tf_vjp *v, int32_t i) {
  return v->widened && v->wide[i] >= 0 ? v->wide[i] : v->t->g->nodes[v->node].inputs[i];
}
int32_t tf_vjp_output(const tf_vjp *v) {
  return v->widened && v->wide_output >= 0 ? v->wide_output : v->t->g->nodes[v->node].outputs[0];
}

bool tf_vjp_wants(const tf_vjp *v, int32_t i) {
  const tf_ir_node *node = &v->t->g->nodes[v->node];
  return i < node->n_inputs && v->needs[node->inputs[i]];
}

void tf_vjp_op_multi(tf_vjp *v, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs,
                     int32_t *outputs) {
  for (int32_t i = 0; i < TF_MAX_OUTPUTS; i++)
    outputs[i] = -1;
  if (v->status)
    return;
  for (int32_t i = 0; i < n_inputs; i++)
    if (inputs[i] < 0)
      return;
  char name[512];
  snprintf(name, sizeof(name), "grad/%s/%s", v->t->g->nodes[v->node].name, tf_op_name(op));
  v->status = tf_training_emit_half(v->t, op, inputs, n_inputs, attrs, TF_PHASE_BACKWARD, name, outputs);
}

int32_t tf_vjp_op(tf_vjp *v, tf_op op, const int32_t *inputs, int32_t n_inputs, const tf_attrs *attrs) {
  int32_t outputs[TF_MAX_OUTPUTS];
  tf_vjp_op_multi(v, op, inputs, n_inputs, attrs, outputs);
  return outputs[0];
}

/* Records another gradient part of parameter `param` (tf_training.extra_parts). */
static void add_extra_part(tf_vjp *v, int32_t param, int32_t part) {
  tf_training *t = v->t;
  if (t->n_extra_parts == t->capacity_extra_parts) {
    int32_t capacity = t->capacity_extra_parts ? 2 * t->capacity_extra_parts : 16;
    int32_t *grown = realloc(t->extra_parts, sizeof(int32_t) * 2 * (size_t)capacity);
    if (!grown) {
      v->status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "autodiff: cannot record %d gradient parts", capacity);
      return;
    }
    t->extra_parts = grown;
    t->capacity_extra_parts = capacity;
  }
  t->extra_parts[2 * t->n_extra_parts] = param;
  t->extra_parts[2 * t->n_extra_parts + 1] = part;
  t->n_extra_parts++;
}

void tf_vjp_give(tf_vjp *v, int32_t i, int32_t gradient) {
  if (v->status || gradient < 0 || !tf_vjp_wants(v, i))
    return;
  int32_t target = v->t->g->nodes[v->node].inputs[i];
  const tf_dtype dtype = v->t->g->tensors[target].dtype;
  if (v->widened && v->t->g->tensors[gradient].dtype != dtype) { /* the f32 chain's result, rounded once */
    char name[600];
    snprintf(name, sizeof(name), "grad/%s/input%d_to_%s", v->t->g->nodes[v->node].name, i, tf_dtype_name(dtype));
    v->status = tf_training_emit_cast(v->t, gradient, dtype, TF_PHASE_BACKWARD, name, &gradient);
    if (v->status)
      return;
  }
  if (v->grads[target] < 0) {
    v->grads[target] = gradient;
    return;
  }
  if (v->t->g->tensors[target].kind == TF_PARAMETER) {
    add_extra_part(v, target, gradient);
    return;
  }
  /* on half parts, the add widens both, adds and rounds once (a half kernel, or between casts) */
  int32_t sum[2] = {v->grads[target], gradient};
  v->grads[target] = tf_vjp_op(v, TF_OP_ADD, sum, 2, NULL);
}

int32_t tf_vjp_scalar(tf_vjp *v, double value) {
  if (v->status)
    return -1;
  char name[64];
  snprintf(name, sizeof(name), "const/%g", value);
  return tf_training_scalar(v->t, value, name, &v->status);
}

tf_attrs tf_vjp_shape_attrs(const tf_vjp *v, int32_t id) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = TF_ATTR_SHAPE;
  const tf_ir_tensor *t = &v->t->g->tensors[id];
  attrs.u.shape.shape.rank = t->rank;
  for (int32_t d = 0; d < t->rank; d++)
    attrs.u.shape.shape.dims[d] = (tf_dim){t->shape[d], -1};
  return attrs;
}

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

static bool same_shape(const tf_ir_tensor *a, const tf_ir_tensor *b) {
  return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* The batch axes of x (all but its last two) equal out's. */
static bool same_batch(const tf_ir_tensor *x, const tf_ir_tensor *out) {
  return x->rank == out->rank && memcmp(x->shape, out->shape, sizeof(int64_t) * (size_t)(x->rank - 2)) == 0;
}

/* Whether node n is on half data (a half kernel: half_ops.c left it so) and its rule computes a
 * gradient with several ops, each of which would round to the half type where the node between
 * casts rounds once: div, sqrt, rsqrt, softplus, a product by a broadcast operand (its gradient is
 * a product, then a sum), a matmul with broadcast batch axes (likewise). The other rules give each
 * gradient from one op on what the forward pass stored, or from exact moves, sums and negations. */
static bool gradient_chain_on_half(const tf_graph *g, int32_t n) {
  const tf_ir_node *node = &g->nodes[n];
  bool half = false;
  for (int32_t k = 0; k < node->n_inputs; k++)
    half = half || is_half(g->tensors[node->inputs[k]].dtype);
  if (!half || node->op == TF_OP_CAST)
    return false;
  const tf_ir_tensor *out = &g->tensors[node->outputs[0]];
  switch (node->op) {
  case TF_OP_DIV:
  case TF_OP_SQRT:
  case TF_OP_RSQRT:
  case TF_OP_SOFTPLUS: return true;
  case TF_OP_MUL:
    return !same_shape(&g->tensors[node->inputs[0]], out) || !same_shape(&g->tensors[node->inputs[1]], out);
  case TF_OP_MATMUL: {
    const tf_ir_tensor *a = &g->tensors[node->inputs[0]], *b = &g->tensors[node->inputs[1]];
    const bool linear = b->rank == 2 && a->rank > 2 && !node->attrs.u.matmul.transpose_a && same_batch(a, out);
    return out->rank > 2 && !linear && (!same_batch(a, out) || !same_batch(b, out));
  }
  default: return false;
  }
}

/* Which of node n's operands its rule reads as data (not for a shape only): bit i for input i,
 * OUTPUT_READ for its output. Widening only those keeps a forward tensor that the rule does not read
 * from living into the backward pass (a product by a constant: its input is only the shape its
 * gradient is summed to). Mirrors the rules of autodiff_rules.c for the ops of
 * gradient_chain_on_half(). */
enum { OUTPUT_READ = 1u << 8 };

static uint32_t chain_reads(const tf_vjp *v, int32_t n) {
  const tf_ir_node *node = &v->t->g->nodes[n];
  const bool da = v->needs[node->inputs[0]], db = node->n_inputs > 1 && v->needs[node->inputs[1]];
  switch (node->op) {
  case TF_OP_DIV: return ((da || db) ? 2u : 0u) | (db ? OUTPUT_READ : 0u); /* dy / b; -dy y / b */
  case TF_OP_SQRT:
  case TF_OP_RSQRT: return OUTPUT_READ; /* dy / (2 y); -dy y^3 / 2 */
  case TF_OP_SOFTPLUS: return 1u;       /* dy sigmoid(x) */
  case TF_OP_MUL:
  case TF_OP_MATMUL: return (da ? 2u : 0u) | (db ? 1u : 0u); /* each gradient reads the other operand */
  default: return 0;
  }
}

/* An f32 copy of half tensor x for node n's rule (a backward cast named after `what`). */
static int32_t widen(tf_vjp *v, const char *node_name, const char *what, int32_t x) {
  if (v->status || !is_half(v->t->g->tensors[x].dtype))
    return -1;
  char name[600];
  snprintf(name, sizeof(name), "grad/%s/%s_f32", node_name, what);
  int32_t wide = -1;
  v->status = tf_training_emit_cast(v->t, x, TF_F32, TF_PHASE_BACKWARD, name, &wide);
  return wide;
}

/* Readies v for node n: for a node of gradient_chain_on_half(), f32 copies of the operands its
 * rule reads and of dy (backward casts, emitted before the rule's nodes). */
static void widen_for_rule(tf_vjp *v, int32_t n) {
  v->widened = false;
  if (!gradient_chain_on_half(v->t->g, n) ||
      v->t->g->nodes[n].n_inputs > (int32_t)(sizeof(v->wide) / sizeof(v->wide[0])))
    return;
  const tf_ir_node node = v->t->g->nodes[n]; /* a copy: the casts below may move the node array */
  const uint32_t reads = chain_reads(v, n);
  char what[32];
  for (int32_t k = 0; k < node.n_inputs; k++) {
    snprintf(what, sizeof(what), "input%d", k);
    v->wide[k] = ((reads >> k) & 1u) ? widen(v, node.name, what, node.inputs[k]) : -1;
  }
  v->wide_output = (reads & OUTPUT_READ) ? widen(v, node.name, "output", node.outputs[0]) : -1;
  const int32_t dy = widen(v, node.name, "dy", v->dy);
  v->dy = dy >= 0 ? dy : v->dy;
  v->widened = !v->status;
}

tf_status tf_autodiff(tf_training *t) {
  tf_graph *g = t->g;
  int32_t n_tensors = g->n_tensors;
  bool *depends = malloc(sizeof(bool) * (size_t)n_tensors);
  bool *needs = malloc(sizeof(bool) * (size_t)n_tensors);
  /* Only forward tensors (ids < n_tensors) ever receive a gradient. */
  int32_t *grads = malloc(sizeof(int32_t) * (size_t)(n_tensors ? n_tensors : 1));
  tf_status status = NULL;
  if (!depends || !needs || !grads) {
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "autodiff: cannot allocate state for %d tensors", n_tensors);
    goto done;
  }
  mark_dependents(g, depends);
  if (!depends[t->loss]) {
    status = tf_status_new(TF_ERR_INVALID_INPUT,
                           "the loss '%s' does not depend on any trainable parameter: nothing to train",
                           g->tensors[t->loss].name);
    goto done;
  }
  mark_needs(g, t->n_forward_nodes, t->loss, depends, needs);
  for (int32_t i = 0; i < n_tensors; i++)
    grads[i] = -1;

  tf_vjp v = {t, -1, -1, grads, needs, NULL, false, {0}, -1};
  grads[t->loss] = tf_training_scalar(t, 1.0, "grad/loss_seed", &v.status);
  t->loss_seed = grads[t->loss];
  for (int32_t n = t->n_forward_nodes - 1; n >= 0 && !v.status; n--) {
    const tf_ir_node *node = &g->nodes[n];
    int32_t dy = grads[node->outputs[0]];
    if (dy < 0 || !needs[node->outputs[0]])
      continue;
    tf_vjp_rule rule = tf_vjp_rule_for(node->op);
    if (!rule) {
      v.status =
          tf_status_new(TF_ERR_UNSUPPORTED, "node '%s' (%s): no gradient rule", node->name, tf_op_name(node->op));
      break;
    }
    v.node = n;
    v.dy = dy;
    widen_for_rule(&v, n);
    rule(&v);
    v.widened = false;
  }
  status = v.status;
  if (!status)
    status = tf_training_reserve(t);
  for (int32_t i = 0; i < n_tensors && !status; i++)
    if (g->tensors[i].kind == TF_PARAMETER)
      t->grad[i] = needs[i] ? grads[i] : -1;
done:
  free(depends);
  free(needs);
  free(grads);
  return status;
}
