/* Ops on half-precision data: every kernel computes in f32 (DESIGN.md, precision), so a graph
 * node other than a cast that reads or writes f16/bf16 floating tensors (a model built or
 * imported with bf16 activations) becomes
 *
 *     cast(each half input -> f32) -> the node on f32 -> cast(each half output -> its type)
 *
 * on the compiler's bound copy, before autodiff. The node then runs the f32 kernel of every backend,
 * its half outputs keep their ids, names and dtype (so graph outputs, the loss and later readers
 * see what the graph declared), and autodiff differentiates through the casts: the gradient of a
 * half tensor is itself half, as under autocast. Each reader gets its own cast of an input, so an
 * f32 copy lives only for the step that reads it; the planner sizes every buffer by its dtype. What
 * a backward step reads of such an op is restored from the half tensor, not kept in f32 (precision.c).
 *
 * The stated accuracy of a node on half data follows: its inputs widen exactly, its f32 result is
 * within the op's f32 tolerance of the f64 result on those inputs, and a half output adds one
 * rounding to nearest even (relative 2^-8 for bf16, 2^-11 for f16).
 *
 * Half kernels: where the target runs an op on half data itself (tf_target_half_kernel: the Vulkan
 * f16/bf16 shader variants, the CPU's f32 kernels over half slices) and every floating operand of
 * the node has one half type (or one half type and f32, where the target takes both and the op's
 * shape rule does), the node stays as it is. Such a kernel widens each element exactly, computes in
 * f32 and rounds its result once as the cast down does, so it computes bit for bit what the casts
 * around the f32 kernel would, without the f32 copies or their traffic. On the CPU, only where the
 * slices hold less than the casts' copies (tf_cpu_half_pays): an op run as one whole slice would
 * keep its half operands beside their f32 copies. Autodiff then differentiates the node itself, and its
 * backward nodes go through tf_training_emit_half: on half data, each is a half kernel where the
 * target has one, else it is put between casts here too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/half_slices.h"
#include "core/ops.h"
#include "graph/passes.h"

static bool is_half(tf_dtype dtype) { return dtype == TF_F16 || dtype == TF_BF16; }

/* What half_type_of() saw besides the half type: an f32 operand, or operands of both half types. */
enum { SEEN_F32 = 1u, SEEN_TWO_HALVES = 2u };

/* The one half type of `op`'s floating operands among ids[0..n) (inputs when `inputs`: those read
 * for their shape only are not operands), or TF_F32 when none is half; *seen gathers SEEN_F32 and
 * SEEN_TWO_HALVES. */
static tf_dtype half_type_of(const tf_graph *g, tf_op op, const int32_t *ids, int32_t n, bool inputs, uint32_t *seen) {
  tf_dtype half = TF_F32;
  for (int32_t k = 0; k < n; k++) {
    if (ids[k] < 0 || (inputs && tf_op_input_shape_only(op, k)))
      continue;
    if (inputs && op == TF_OP_BATCH_NORM && k >= 3)
      continue; /* f32 running statistics, which the plan's batch_norm steps never read (running_stats.c) */
    const tf_dtype dtype = g->tensors[ids[k]].dtype;
    if (dtype == TF_F32)
      *seen |= SEEN_F32;
    else if (is_half(dtype) && half != TF_F32 && dtype != half)
      *seen |= SEEN_TWO_HALVES;
    else if (is_half(dtype))
      half = dtype;
  }
  return half;
}

/* Whether op's shape rule takes inputs[0..n) with their dtypes as they are (a loss takes half
 * logits beside its f32 seed; a binary op refuses a half tensor beside an f32 one); its outputs
 * into out[0..TF_MAX_OUTPUTS). */
static bool rule_takes(const tf_graph *g, tf_op op, const tf_attrs *attrs, const int32_t *inputs, int32_t n,
                       tf_shape_result *out) {
  tf_shape_operand operands[TF_OP_VARIADIC_INTERNAL];
  if (n > TF_OP_VARIADIC_INTERNAL)
    return false;
  for (int32_t k = 0; k < n; k++) {
    const tf_ir_tensor *x = &g->tensors[inputs[k]];
    operands[k] = (tf_shape_operand){x->name, x->dtype, x->kind, x->rank, x->shape};
  }
  const tf_shape_query query = {op, attrs, n, operands, NULL, NULL};
  memset(out, 0, sizeof(tf_shape_result) * TF_MAX_OUTPUTS);
  tf_status status = tf_op_info_get(op)->shape_rule(&query, out);
  tf_status_free(status);
  return status == NULL;
}

/* The CPU target: whether its half slices hold less than the casts would (tf_cpu_half_pays). */
static bool cpu_slices_pay(const tf_graph *g, tf_op op, const tf_attrs *attrs, const int32_t *inputs, int32_t n) {
  tf_tensor_ref refs[TF_CPU_HALF_MAX_OPERANDS];
  tf_shape_result out[TF_MAX_OUTPUTS];
  if (n > TF_CPU_HALF_MAX_OPERANDS || !rule_takes(g, op, attrs, inputs, n, out))
    return false;
  for (int32_t k = 0; k < n; k++)
    refs[k] =
        tf_tensor_ref_make(NULL, g->tensors[inputs[k]].dtype, g->tensors[inputs[k]].rank, g->tensors[inputs[k]].shape);
  const tf_tensor_ref output0 = tf_tensor_ref_make(NULL, out[0].dtype, out[0].rank, out[0].shape);
  return tf_cpu_half_pays(op, attrs, n, refs, &output0);
}

/* Whether the target computes op(inputs) -> outputs on half data itself: a half kernel of the
 * target, the floating operands of one half type, or of one half type and f32 where the target's
 * half kernel of the op takes both (tf_target_mixed_half_kernel) and so does its shape rule (a loss of half logits
 * and its gradient); outputs may be omitted (n_outputs 0). */
static bool half_kernel_runs(const tf_training *t, tf_op op, const tf_attrs *attrs, const int32_t *inputs,
                             int32_t n_inputs, const int32_t *outputs, int32_t n_outputs) {
  if (!tf_target_half_kernel(&t->options.target, op))
    return false;
  uint32_t seen = 0;
  const tf_dtype in = half_type_of(t->g, op, inputs, n_inputs, true, &seen);
  const tf_dtype out = half_type_of(t->g, op, outputs, n_outputs, false, &seen);
  if (!is_half(in) || (seen & SEEN_TWO_HALVES) || (n_outputs > 0 && out != in && out != TF_F32))
    return false;
  tf_shape_result results[TF_MAX_OUTPUTS];
  if ((seen & SEEN_F32) &&
      !(tf_target_mixed_half_kernel(&t->options.target, op) && rule_takes(t->g, op, attrs, inputs, n_inputs, results)))
    return false;
  /* the CPU moves elements of any dtype as bytes (no slices, no copies): a move always pays */
  return t->options.target.kind != TF_TARGET_CPU || tf_op_moves_elements(op) ||
         cpu_slices_pay(t->g, op, attrs, inputs, n_inputs);
}

bool tf_training_half_kernel_takes(const tf_training *t, int32_t n, const int32_t *inputs) {
  const tf_ir_node *node = &t->g->nodes[n];
  tf_shape_result results[TF_MAX_OUTPUTS];
  if (node->op == TF_OP_CAST ||
      !half_kernel_runs(t, node->op, &node->attrs, inputs, node->n_inputs, node->outputs, node->n_outputs) ||
      !rule_takes(t->g, node->op, &node->attrs, inputs, node->n_inputs, results))
    return false;
  for (int32_t i = 0; i < node->n_outputs; i++)
    if (results[i].dtype != t->g->tensors[node->outputs[i]].dtype)
      return false;
  return true;
}

/* Whether node `n` reads or writes half floating data, is not a cast and is no half kernel of the
 * target. */
static bool on_half_data(const tf_training *t, int32_t n) {
  const tf_graph *g = t->g;
  const tf_ir_node *node = &g->nodes[n];
  if (node->op == TF_OP_CAST)
    return false;
  bool half = false;
  for (int32_t k = 0; k < node->n_inputs; k++)
    half = half || (node->inputs[k] >= 0 && is_half(g->tensors[node->inputs[k]].dtype));
  for (int32_t i = 0; i < node->n_outputs; i++)
    half = half || is_half(g->tensors[node->outputs[i]].dtype);
  return half &&
         !half_kernel_runs(t, node->op, &node->attrs, node->inputs, node->n_inputs, node->outputs, node->n_outputs);
}

/* Whether node n computes on half data in one of the target's half kernels. */
static bool in_half_kernel(const tf_training *t, int32_t n) {
  const tf_ir_node *node = &t->g->nodes[n];
  return node->op != TF_OP_CAST &&
         half_kernel_runs(t, node->op, &node->attrs, node->inputs, node->n_inputs, node->outputs, node->n_outputs);
}

/* Input k of node n, when half, read through a new cast to f32 (pushed on the order). */
static tf_status widen_input(tf_training *t, int32_t n, int32_t k, tf_node_order *order) {
  tf_graph *g = t->g;
  const int32_t x = g->nodes[n].inputs[k];
  if (x < 0 || !is_half(g->tensors[x].dtype) || tf_op_input_shape_only(g->nodes[n].op, k))
    return NULL;
  char name[600];
  snprintf(name, sizeof(name), "%s/input%d_f32", g->nodes[n].name, k);
  int32_t wide;
  TF_RETURN_IF_ERROR(tf_training_emit_cast(t, x, TF_F32, TF_PHASE_FORWARD, name, &wide));
  g->nodes[n].inputs[k] = wide;
  return tf_node_order_push(order, g->tensors[wide].producer, "half ops");
}

/* Records that f32 tensor `wide` is rounded into half tensor `half` (tf_training.narrowed). */
static tf_status record_narrowed(tf_training *t, int32_t wide, int32_t half) {
  if (t->n_narrowed == t->capacity_narrowed) {
    int32_t capacity = t->capacity_narrowed ? 2 * t->capacity_narrowed : 16;
    int32_t *grown = realloc(t->narrowed, sizeof(int32_t) * 2 * (size_t)capacity);
    if (!grown)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "half ops: cannot record %d outputs", capacity);
    t->narrowed = grown;
    t->capacity_narrowed = capacity;
  }
  t->narrowed[2 * t->n_narrowed] = wide;
  t->narrowed[2 * t->n_narrowed + 1] = half;
  t->n_narrowed++;
  return NULL;
}

/* Output i of node n, when half: the node writes a new f32 tensor and a new cast writes the
 * original one (its id, name and dtype kept). The cast is pushed on the order. */
static tf_status narrow_output(tf_training *t, int32_t n, int32_t i, tf_node_order *order) {
  tf_graph *g = t->g;
  const int32_t y = g->nodes[n].outputs[i];
  const tf_dtype half = g->tensors[y].dtype;
  if (!is_half(half))
    return NULL;
  int32_t wide, cast;
  TF_RETURN_IF_ERROR(tf_training_cast_output(t, n, i, TF_F32, half, &wide, &cast));
  TF_RETURN_IF_ERROR(record_narrowed(t, wide, y));
  return tf_node_order_push(order, cast, "half ops");
}

/* Lowers node n (inputs, then its own shapes on f32 operands, then outputs). The input casts come
 * last input first: autodiff visits them in reverse, so a half tensor the node reads several times
 * (attention's q = k = v) gets its gradient parts in input order, each rounded, summed as they come,
 * as the node's own backward gives them when the target runs it as a half kernel. */
static tf_status lower(tf_training *t, int32_t n, tf_node_order *order) {
  tf_graph *g = t->g;
  for (int32_t k = g->nodes[n].n_inputs - 1; k >= 0; k--)
    TF_RETURN_IF_ERROR(widen_input(t, n, k, order));
  TF_RETURN_IF_ERROR(tf_node_order_push(order, n, "half ops"));
  const int32_t first_cast = order->n;
  for (int32_t i = 0; i < g->nodes[n].n_outputs; i++)
    TF_RETURN_IF_ERROR(narrow_output(t, n, i, order));
  TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, n, false));
  for (int32_t c = first_cast; c < order->n; c++)
    TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, order->ids[c], true));
  return NULL;
}

tf_status tf_half_ops_pass(tf_training *t, int32_t *lowered) {
  tf_graph *g = t->g;
  *lowered = 0;
  const int32_t n_nodes = g->n_nodes;
  for (int32_t n = 0; n < n_nodes; n++) {
    *lowered += on_half_data(t, n);
    t->half_kernel_nodes += in_half_kernel(t, n);
  }
  if (*lowered == 0)
    return NULL;
  tf_node_order order = {NULL, 0, 0};
  tf_status status = NULL;
  for (int32_t n = 0; n < n_nodes && !status; n++)
    status = on_half_data(t, n) ? lower(t, n, &order) : tf_node_order_push(&order, n, "half ops");
  if (!status && order.n != g->n_nodes)
    status = tf_status_new(TF_ERR_INTERNAL, "half ops: ordered %d of %d nodes", order.n, g->n_nodes);
  if (!status)
    status = tf_ir_reorder_nodes(g, order.ids);
  free(order.ids);
  return status;
}

tf_status tf_training_emit_half(tf_training *t, tf_op op, const int32_t *inputs, int32_t n_inputs,
                                const tf_attrs *attrs, tf_phase phase, const char *name, int32_t *outputs) {
  /* attrs may live in the node array (a gradient rule passes its forward node's), which the casts
   * emitted below may move: ASan caught a read of the freed array once the casts grew it */
  tf_attrs copied;
  memset(&copied, 0, sizeof(copied));
  if (attrs) {
    copied = *attrs;
    attrs = &copied;
  }
  uint32_t seen = 0;
  const tf_dtype half = half_type_of(t->g, op, inputs, n_inputs, true, &seen); /* data inputs only */
  if (op == TF_OP_CAST || !is_half(half))
    return tf_training_emit(t, op, inputs, n_inputs, attrs, phase, name, outputs);
  if (half_kernel_runs(t, op, attrs, inputs, n_inputs, NULL, 0)) {
    t->half_kernel_nodes++;
    return tf_training_emit(t, op, inputs, n_inputs, attrs, phase, name, outputs);
  }
  int32_t wide[TF_OP_VARIADIC_INTERNAL];
  if (n_inputs > TF_OP_VARIADIC_INTERNAL)
    return tf_status_new(TF_ERR_INTERNAL, "half ops: '%s' has %d inputs", name, n_inputs);
  char cast_name[600];
  for (int32_t k = 0; k < n_inputs; k++) {
    wide[k] = inputs[k];
    if (inputs[k] < 0 || !is_half(t->g->tensors[inputs[k]].dtype) || tf_op_input_shape_only(op, k))
      continue; /* a half tensor read for its shape only is read as it is (its dtype is not used) */
    snprintf(cast_name, sizeof(cast_name), "%s/input%d_f32", name, k);
    TF_RETURN_IF_ERROR(tf_training_emit_cast(t, inputs[k], TF_F32, phase, cast_name, &wide[k]));
  }
  int32_t results[TF_MAX_OUTPUTS];
  TF_RETURN_IF_ERROR(tf_training_emit(t, op, wide, n_inputs, attrs, phase, name, results));
  for (int32_t i = 0; i < tf_op_info_get(op)->n_outputs && outputs; i++) {
    outputs[i] = results[i];
    if (t->g->tensors[results[i]].dtype != TF_F32)
      continue;
    snprintf(cast_name, sizeof(cast_name), "%s/to_%s", name, tf_dtype_name(half));
    TF_RETURN_IF_ERROR(tf_training_emit_cast(t, results[i], half, phase, cast_name, &outputs[i]));
  }
  return NULL;
}
