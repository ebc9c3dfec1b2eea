/* Autocast (tf_compile_options.autocast bf16 or f16): the forward graph computes on half
 * activations, as PyTorch's torch.autocast does, while parameters (the master weights), gradients
 * of parameters, optimizer state and the loss stay f32. Runs on the bound copy before the fused
 * loss head and half_ops.c, so what it makes is an ordinary graph on half data: the target's half
 * kernels run it (half_ops.c puts the rest between casts) and autodiff differentiates through the
 * casts, so the gradient of a half activation is half and a weight's gradient is widened once by
 * its cast's backward, as under autocast.
 *
 * The rules, node by node in graph order, after the node's inputs got their new dtypes (autocast's
 * op lists, mapped onto our ops):
 *   - lower precision (matmul, the convolutions, attention): every f32 floating operand is cast to
 *     the half type, so the product runs on half operands (tensor cores with f32 accumulation on
 *     CUDA) and writes a half result;
 *   - f32 (exp, log, rsqrt, softplus, sum, softmax, log_softmax, layer_norm, rms_norm): half operands
 *     are cast up, the op computes and writes f32, as autocast's fp32 list;
 *   - everything else runs on what it is given; where f32 and half operands meet, an f32 parameter
 *     or constant is cast down (a linear layer's bias added to its half product: torch's linear
 *     adds it in half), otherwise the half operands are cast up (autocast's promotion to the widest
 *     type: a half branch added to an f32 residual stream gives f32).
 * The losses read half logits as they are: their kernels widen them exactly and compute in f32,
 * which is what autocast's fp32 cross_entropy computes, and their result is f32 (the shape rules).
 * The loss never changes dtype, nor does an inference plan's output: where its producer now writes
 * half, it writes a new half tensor and a cast writes the output in its declared type. A training
 * plan's other outputs (logits, which the fused loss head usually removes) may become half.
 *
 * Each reader gets its own cast of an operand (a parameter read by two products is cast twice), so
 * no half copy outlives the step that reads it unless the backward pass reads it too; the casts of
 * parameters are the only copies of weights, sized by the planner like any activation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"
#include "graph/passes.h"

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }
static bool is_floating(tf_dtype dtype) { return dtype == TF_F32 || is_half(dtype); }

typedef enum autocast_list { RUNS_AS_GIVEN = 0, LOWER_PRECISION, FULL_PRECISION } autocast_list;

static autocast_list list_of(tf_op op) {
  switch (op) {
  case TF_OP_MATMUL:
  case TF_OP_CONV1D:
  case TF_OP_CONV2D:
  case TF_OP_CONV_TRANSPOSE2D:
  case TF_OP_ATTENTION: return LOWER_PRECISION;
  case TF_OP_EXP:
  case TF_OP_LOG:
  case TF_OP_RSQRT:
  case TF_OP_SOFTPLUS:
  case TF_OP_SUM:
  case TF_OP_SOFTMAX:
  case TF_OP_LOG_SOFTMAX:
  case TF_OP_LAYER_NORM:
  case TF_OP_RMS_NORM: return FULL_PRECISION;
  default: return RUNS_AS_GIVEN;
  }
}

/* Whether input k of node n is a floating operand whose data the node reads. */
static bool floating_operand(const tf_graph *g, int32_t n, int32_t k) {
  const int32_t x = g->nodes[n].inputs[k];
  return x >= 0 && !tf_op_input_shape_only(g->nodes[n].op, k) && is_floating(g->tensors[x].dtype);
}

static bool weight_like(const tf_ir_tensor *x) { return x->kind == TF_PARAMETER || x->kind == TF_CONSTANT; }

/* Input k of node n read through a new cast to `to` (pushed on the order). */
static tf_status cast_input(tf_training *t, int32_t n, int32_t k, tf_dtype to, tf_node_order *order, int32_t *casts) {
  tf_graph *g = t->g;
  char name[600];
  snprintf(name, sizeof(name), "%s/input%d_%s", g->nodes[n].name, k, tf_dtype_name(to));
  int32_t cast;
  TF_RETURN_IF_ERROR(tf_training_emit_cast(t, g->nodes[n].inputs[k], to, TF_PHASE_FORWARD, name, &cast));
  g->nodes[n].inputs[k] = cast;
  (*casts)++;
  return tf_node_order_push(order, g->tensors[cast].producer, "autocast");
}

/* The dtype each floating operand of node n is to be read in: `half`, TF_F32, or as it is (-1). */
static void choose_operand_types(const tf_graph *g, int32_t n, tf_dtype half, tf_dtype *want) {
  const tf_ir_node *node = &g->nodes[n];
  bool any_half = false, any_f32 = false, f32_all_weights = true;
  for (int32_t k = 0; k < node->n_inputs; k++) {
    want[k] = (tf_dtype)-1;
    if (!floating_operand(g, n, k))
      continue;
    const tf_ir_tensor *x = &g->tensors[node->inputs[k]];
    any_half = any_half || is_half(x->dtype);
    any_f32 = any_f32 || x->dtype == TF_F32;
    f32_all_weights = f32_all_weights && (x->dtype != TF_F32 || weight_like(x));
  }
  const autocast_list list = list_of(node->op);
  tf_dtype to = (tf_dtype)-1;
  if (list == LOWER_PRECISION)
    to = half;
  else if (list == FULL_PRECISION)
    to = TF_F32;
  else if (any_half && any_f32)
    to = f32_all_weights ? half : TF_F32;
  for (int32_t k = 0; k < node->n_inputs && (int)to >= 0; k++)
    if (floating_operand(g, n, k) && g->tensors[node->inputs[k]].dtype != to)
      want[k] = to;
}

/* The loss, and an inference plan's outputs. A training plan's other outputs may become half: the
 * fused loss head drops the logits it fuses from the outputs, which a cast reading them would stop. */
static bool is_kept_output(const tf_training *t, int32_t tensor) {
  const tf_graph *g = t->g;
  if (tensor == g->loss)
    return true;
  for (int32_t i = 0; i < g->n_outputs && !t->options.training; i++)
    if (g->outputs[i] == tensor)
      return true;
  return false;
}

/* Output i of node n, a graph output or the loss declared `declared`, now half: the node writes a
 * new half tensor and a new cast writes the output in its declared dtype (id and name kept). */
static tf_status keep_output_type(tf_training *t, int32_t n, int32_t i, tf_dtype declared, tf_node_order *order,
                                  int32_t *casts) {
  tf_graph *g = t->g;
  const tf_dtype half = g->tensors[g->nodes[n].outputs[i]].dtype;
  int32_t narrow, cast;
  TF_RETURN_IF_ERROR(tf_training_cast_output(t, n, i, half, declared, &narrow, &cast));
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, n, false));
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, cast, true));
  (*casts)++;
  return tf_node_order_push(order, cast, "autocast");
}

/* Node n with its operands cast as the rules say and its outputs' dtypes inferred anew. */
static tf_status autocast_node(tf_training *t, int32_t n, tf_dtype half, tf_node_order *order, int32_t *casts,
                               int32_t *on_half) {
  tf_graph *g = t->g;
  if (g->nodes[n].op == TF_OP_CAST)
    return tf_node_order_push(order, n, "autocast");
  tf_dtype want[TF_OP_VARIADIC_INTERNAL];
  if (g->nodes[n].n_inputs > TF_OP_VARIADIC_INTERNAL)
    return tf_status_new(TF_ERR_INTERNAL, "autocast: node '%s' has %d inputs", g->nodes[n].name, g->nodes[n].n_inputs);
  choose_operand_types(g, n, half, want);
  for (int32_t k = g->nodes[n].n_inputs - 1; k >= 0; k--)
    if ((int)want[k] >= 0)
      TF_RETURN_IF_ERROR(cast_input(t, n, k, want[k], order, casts));
  TF_RETURN_IF_ERROR(tf_node_order_push(order, n, "autocast"));
  tf_dtype declared[TF_MAX_OUTPUTS];
  for (int32_t i = 0; i < g->nodes[n].n_outputs; i++)
    declared[i] = g->tensors[g->nodes[n].outputs[i]].dtype;
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, n, false));
  bool writes_half = false;
  for (int32_t i = 0; i < g->nodes[n].n_outputs; i++) {
    const int32_t y = g->nodes[n].outputs[i];
    writes_half = writes_half || is_half(g->tensors[y].dtype);
    if (g->tensors[y].dtype != declared[i] && is_kept_output(t, y))
      TF_RETURN_IF_ERROR(keep_output_type(t, n, i, declared[i], order, casts));
  }
  *on_half += writes_half;
  return NULL;
}

tf_status tf_autocast_pass(tf_training *t) {
  const tf_dtype half = t->options.autocast;
  if (half == TF_F32)
    return NULL;
  if (!is_half(half))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "autocast: %s is not a half type (bf16 or f16)", tf_dtype_name(half));
  TF_RETURN_IF_ERROR(tf_training_reserve(t));
  tf_graph *g = t->g;
  const int32_t n_nodes = g->n_nodes;
  tf_node_order order = {NULL, 0, 0};
  int32_t casts = 0, on_half = 0;
  tf_status status = NULL;
  for (int32_t n = 0; n < n_nodes && !status; n++)
    status = autocast_node(t, n, half, &order, &casts, &on_half);
  if (!status && order.n != g->n_nodes)
    status = tf_status_new(TF_ERR_INTERNAL, "autocast: ordered %d of %d nodes", order.n, g->n_nodes);
  if (!status)
    status = tf_ir_reorder_nodes(g, order.ids);
  free(order.ids);
  t->autocast_nodes = on_half;
  t->autocast_casts = casts;
  /* the products left on f32 operands (the fused loss head's gradient products) round them to the
   * half type on the tensor cores, as autocast computes them in half */
  if (t->matmul_math == TF_F32)
    t->matmul_math = half;
  return status;
}
