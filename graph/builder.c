/* The C builder API: tensors and op constructors. Each constructor checks its arguments, adds a
 * node, and infers its output shape at once at the symbols' current values, so a mistake is
 * reported at the op that made it. The first error is kept (sticky); later calls do nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "graph/passes.h"

tf_dim tf_fixed(int64_t size) { return (tf_dim){size, -1}; }
tf_dim tf_sym(int32_t symbol) { return (tf_dim){1, symbol}; }
tf_dim tf_sym_times(int32_t symbol, int64_t multiple) { return (tf_dim){multiple, symbol}; }

tf_shape tf_shape_from(const tf_dim *dims, int32_t rank) {
  tf_shape shape;
  memset(&shape, 0, sizeof(shape));
  shape.rank = rank;
  for (int32_t i = 0; i < rank && i < TF_MAX_RANK; i++)
    shape.dims[i] = dims[i];
  return shape;
}

tf_init tf_init_make(tf_init_kind kind, double a, double b) {
  tf_init init = {kind, a, b, NULL, NULL};
  return init;
}

int32_t tf_graph_symbol(tf_graph *g, const char *name, int64_t default_value) {
  if (g->status)
    return -1;
  tf_status status;
  int32_t id = tf_ir_add_symbol(g, name, default_value, &status);
  tf_ir_fail(g, status);
  return id;
}

void tf_graph_set_scope(tf_graph *g, const char *scope) {
  free(g->scope);
  g->scope = NULL;
  if (scope && *scope) {
    size_t length = strlen(scope) + 1;
    g->scope = malloc(length);
    if (g->scope)
      memcpy(g->scope, scope, length);
    else
      tf_ir_fail(g, tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot copy scope '%s'", scope));
  }
}

static tf_tensor_id add_declared(tf_graph *g, const char *name, tf_dtype dtype, tf_tensor_kind kind, tf_shape shape,
                                 const tf_init *init) {
  if (g->status)
    return TF_NO_TENSOR;
  if ((int)dtype < 0 || dtype >= TF_DTYPE_COUNT) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s '%s': unknown dtype %d", tf_kind_name(kind),
                                name ? name : "?", (int)dtype));
    return TF_NO_TENSOR;
  }
  if (shape.rank < 0 || shape.rank > TF_MAX_RANK) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s '%s': rank %d is outside 0..%d", tf_kind_name(kind),
                                name ? name : "?", shape.rank, TF_MAX_RANK));
    return TF_NO_TENSOR;
  }
  tf_status status;
  int32_t id = tf_ir_add_tensor(g, name, dtype, kind, &shape, init, &status);
  if (status) {
    tf_ir_fail(g, status);
    return TF_NO_TENSOR;
  }
  status = tf_shapes_resolve_tensor(g, id);
  if (status)
    tf_ir_fail(g, status);
  return status ? TF_NO_TENSOR : id;
}

tf_tensor_id tf_graph_input(tf_graph *g, const char *name, tf_dtype dtype, tf_shape shape) {
  return add_declared(g, name, dtype, TF_INPUT, shape, NULL);
}

tf_tensor_id tf_graph_label(tf_graph *g, const char *name, tf_dtype dtype, tf_shape shape) {
  return add_declared(g, name, dtype, TF_LABEL, shape, NULL);
}

tf_tensor_id tf_graph_parameter(tf_graph *g, const char *name, tf_dtype dtype, tf_shape shape, tf_init init) {
  for (int32_t i = 0; i < shape.rank && i < TF_MAX_RANK && !g->status; i++)
    if (shape.dims[i].symbol >= 0)
      tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT,
                                  "parameter '%s': dimension %d is symbolic; parameter shapes must be fixed", name, i));
  if (!g->status && init.kind == TF_INIT_NONE)
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "parameter '%s' needs an initializer", name));
  return add_declared(g, name, dtype, TF_PARAMETER, shape, &init);
}

tf_tensor_id tf_graph_constant(tf_graph *g, const char *name, tf_dtype dtype, tf_shape shape, tf_init init) {
  if (!g->status && init.kind == TF_INIT_NONE)
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "constant '%s' needs an initializer", name));
  return add_declared(g, name, dtype, TF_CONSTANT, shape, &init);
}

static bool inputs_valid(tf_graph *g, const tf_op_info *info, const tf_tensor_id *inputs, int32_t n_inputs) {
  if (n_inputs < info->min_inputs || n_inputs > info->max_inputs) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s takes %d to %d inputs, got %d", info->name,
                                info->min_inputs, info->max_inputs, n_inputs));
    return false;
  }
  for (int32_t i = 0; i < n_inputs; i++) {
    if (inputs[i] < 0 || inputs[i] >= g->n_tensors) {
      tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: input %d is tensor id %d, outside 0..%d", info->name, i,
                                  inputs[i], g->n_tensors - 1));
      return false;
    }
  }
  return true;
}

tf_tensor_id tf_graph_node(tf_graph *g, tf_op op, const tf_tensor_id *inputs, int32_t n_inputs, const tf_attrs *attrs) {
  if (g->status)
    return TF_NO_TENSOR;
  const tf_op_info *info = tf_op_info_get(op);
  if (!info) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "unknown op %d", (int)op));
    return TF_NO_TENSOR;
  }
  if (info->scope != TF_SCOPE_GRAPH) {
    tf_ir_fail(
        g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s is a training-only op; model graphs cannot hold it", info->name));
    return TF_NO_TENSOR;
  }
  if (!inputs_valid(g, info, inputs, n_inputs))
    return TF_NO_TENSOR;
  tf_attrs none;
  memset(&none, 0, sizeof(none));
  if (!attrs)
    attrs = &none;
  if (attrs->kind != info->attrs) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s takes %s attributes, got %s", info->name,
                                tf_attr_kind_name(info->attrs), tf_attr_kind_name(attrs->kind)));
    return TF_NO_TENSOR;
  }
  /* "scope/op", or "scope/op_2", "scope/op_3", ... when taken */
  char base[512], name[512];
  snprintf(base, sizeof(base), "%s%s%s", g->scope ? g->scope : "", g->scope ? "/" : "", info->name);
  tf_status status = tf_ir_unique_name(g, base, name, sizeof(name));
  if (status) {
    tf_ir_fail(g, status);
    return TF_NO_TENSOR;
  }
  int32_t output = tf_ir_add_tensor(g, name, TF_F32, TF_ACTIVATION, NULL, NULL, &status);
  if (status) {
    tf_ir_fail(g, status);
    return TF_NO_TENSOR;
  }
  int32_t node = tf_ir_add_node(g, name, op, inputs, n_inputs, &output, 1, attrs, &status);
  if (status) {
    tf_ir_fail(g, status);
    return TF_NO_TENSOR;
  }
  status = tf_shapes_infer_node(g, node, false);
  if (status) {
    tf_ir_fail(g, status);
    return TF_NO_TENSOR;
  }
  return output;
}

void tf_graph_rename(tf_graph *g, tf_tensor_id id, const char *name) {
  if (g->status)
    return;
  if (id < 0 || id >= g->n_tensors || !name || !*name) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "rename: tensor id %d or name is invalid", id));
    return;
  }
  if (tf_strmap_get(&g->tensor_names, name) >= 0) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "rename: tensor name '%s' is already used", name));
    return;
  }
  size_t length = strlen(name) + 1;
  char *copy = malloc(length);
  if (!copy) {
    tf_ir_fail(g, tf_status_new(TF_ERR_OUT_OF_MEMORY, "rename: cannot copy '%s'", name));
    return;
  }
  memcpy(copy, name, length);
  free(g->tensors[id].name);
  g->tensors[id].name = copy;
  /* The map holds pointers to the names: rebuild it (renames are rare). */
  tf_ir_forget_suffixes(g);
  tf_strmap_clear(&g->tensor_names);
  for (int32_t i = 0; i < g->n_tensors; i++)
    if (!tf_strmap_put(&g->tensor_names, g->tensors[i].name, i))
      tf_ir_fail(g, tf_status_new(TF_ERR_OUT_OF_MEMORY, "rename: cannot index tensor names"));
}

void tf_graph_add_output(tf_graph *g, tf_tensor_id id) {
  if (g->status)
    return;
  if (id < 0 || id >= g->n_tensors)
    tf_ir_fail(g,
               tf_status_new(TF_ERR_INVALID_ARGUMENT, "output: tensor id %d is outside 0..%d", id, g->n_tensors - 1));
  else
    tf_ir_fail(g, tf_ir_add_output(g, id));
}

void tf_graph_set_loss(tf_graph *g, tf_tensor_id id) {
  if (g->status)
    return;
  if (id < 0 || id >= g->n_tensors) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "loss: tensor id %d is outside 0..%d", id, g->n_tensors - 1));
    return;
  }
  const tf_ir_tensor *t = &g->tensors[id];
  if (t->rank != 0 || t->dtype != TF_F32) {
    tf_ir_fail(g,
               tf_status_new(TF_ERR_INVALID_ARGUMENT, "loss: '%s' must be an f32 scalar (rank 0), it is %s of rank %d",
                             t->name, tf_dtype_name(t->dtype), t->rank));
    return;
  }
  g->loss = id;
}

void tf_graph_set_training(tf_graph *g, const tf_training_config *config) {
  if (g->status || !config)
    return;
  g->training = *config;
  g->has_training = true;
}

tf_status tf_graph_set_node_precision(tf_graph *g, int32_t node, tf_precision precision) {
  if (node < 0 || node >= g->n_nodes)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "precision override: node id %d is outside 0..%d", node,
                         g->n_nodes - 1);
  if (precision != TF_PRECISION_INHERIT && ((int)precision < 0 || precision > TF_PRECISION_F16))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "precision override of node '%s': unknown precision %d (-1 inherit, 0 f32, 1 bf16, 2 f16)",
                         g->nodes[node].name, (int)precision);
  g->nodes[node].precision = precision;
  return NULL;
}

/* ---- op constructors ---- */

static tf_tensor_id node1(tf_graph *g, tf_op op, tf_tensor_id x, const tf_attrs *attrs) {
  return tf_graph_node(g, op, &x, 1, attrs);
}

static tf_tensor_id node2(tf_graph *g, tf_op op, tf_tensor_id a, tf_tensor_id b, const tf_attrs *attrs) {
  tf_tensor_id inputs[2] = {a, b};
  return tf_graph_node(g, op, inputs, 2, attrs);
}

/* Inputs that may be absent (bias, beta) are dropped from the end. */
static tf_tensor_id node_optional3(tf_graph *g, tf_op op, tf_tensor_id a, tf_tensor_id b, tf_tensor_id c,
                                   const tf_attrs *attrs) {
  tf_tensor_id inputs[3] = {a, b, c};
  return tf_graph_node(g, op, inputs, c == TF_NO_TENSOR ? 2 : 3, attrs);
}

static tf_attrs attrs_of(tf_attr_kind kind) {
  tf_attrs attrs;
  memset(&attrs, 0, sizeof(attrs));
  attrs.kind = kind;
  return attrs;
}

tf_tensor_id tf_matmul(tf_graph *g, tf_tensor_id a, tf_tensor_id b, bool transpose_a, bool transpose_b) {
  tf_attrs attrs = attrs_of(TF_ATTR_MATMUL);
  attrs.u.matmul.transpose_a = transpose_a;
  attrs.u.matmul.transpose_b = transpose_b;
  return node2(g, TF_OP_MATMUL, a, b, &attrs);
}

tf_tensor_id tf_add(tf_graph *g, tf_tensor_id a, tf_tensor_id b) { return node2(g, TF_OP_ADD, a, b, NULL); }
tf_tensor_id tf_sub(tf_graph *g, tf_tensor_id a, tf_tensor_id b) { return node2(g, TF_OP_SUB, a, b, NULL); }
tf_tensor_id tf_mul(tf_graph *g, tf_tensor_id a, tf_tensor_id b) { return node2(g, TF_OP_MUL, a, b, NULL); }
tf_tensor_id tf_div(tf_graph *g, tf_tensor_id a, tf_tensor_id b) { return node2(g, TF_OP_DIV, a, b, NULL); }
tf_tensor_id tf_keep(tf_graph *g, tf_tensor_id x, tf_tensor_id m) { return node2(g, TF_OP_KEEP, x, m, NULL); }

tf_tensor_id tf_unary(tf_graph *g, tf_op op, tf_tensor_id x) {
  const tf_op_info *info = tf_op_info_get(op);
  if (!g->status &&
      (!info || info->shape_rule != tf_shape_unary_float || info->attrs != TF_ATTR_NONE || info->max_inputs != 1)) {
    tf_ir_fail(
        g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_unary: %s is not an attribute-free unary op", tf_op_name(op)));
    return TF_NO_TENSOR;
  }
  return node1(g, op, x, NULL);
}

tf_tensor_id tf_gelu(tf_graph *g, tf_tensor_id x, bool approximate) {
  tf_attrs attrs = attrs_of(TF_ATTR_GELU);
  attrs.u.gelu.approximate = approximate;
  return node1(g, TF_OP_GELU, x, &attrs);
}

tf_tensor_id tf_leaky_relu(tf_graph *g, tf_tensor_id x, float alpha) {
  tf_attrs attrs = attrs_of(TF_ATTR_LEAKY_RELU);
  attrs.u.leaky_relu.alpha = alpha;
  return node1(g, TF_OP_LEAKY_RELU, x, &attrs);
}

tf_tensor_id tf_clip(tf_graph *g, tf_tensor_id x, float lo, float hi) {
  tf_attrs attrs = attrs_of(TF_ATTR_CLIP);
  attrs.u.clip.lo = lo;
  attrs.u.clip.hi = hi;
  return node1(g, TF_OP_CLIP, x, &attrs);
}

tf_tensor_id tf_reduce(tf_graph *g, tf_op op, tf_tensor_id x, const int32_t *axes, int32_t n_axes, bool keepdims) {
  if (!g->status && op != TF_OP_SUM && op != TF_OP_MEAN && op != TF_OP_MAX) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_reduce: %s is not sum, mean or max", tf_op_name(op)));
    return TF_NO_TENSOR;
  }
  if (!g->status && (n_axes < 0 || n_axes > TF_MAX_RANK)) {
    tf_ir_fail(g,
               tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: %d axes (at most %d)", tf_op_name(op), n_axes, TF_MAX_RANK));
    return TF_NO_TENSOR;
  }
  tf_attrs attrs = attrs_of(TF_ATTR_REDUCE);
  attrs.u.reduce.n_axes = n_axes;
  for (int32_t i = 0; i < n_axes && i < TF_MAX_RANK; i++)
    attrs.u.reduce.axes[i] = axes[i];
  attrs.u.reduce.keepdims = keepdims;
  return node1(g, op, x, &attrs);
}

tf_tensor_id tf_softmax(tf_graph *g, tf_tensor_id x, int32_t axis) {
  tf_attrs attrs = attrs_of(TF_ATTR_AXIS);
  attrs.u.axis.axis = axis;
  return node1(g, TF_OP_SOFTMAX, x, &attrs);
}

tf_tensor_id tf_log_softmax(tf_graph *g, tf_tensor_id x, int32_t axis) {
  tf_attrs attrs = attrs_of(TF_ATTR_AXIS);
  attrs.u.axis.axis = axis;
  return node1(g, TF_OP_LOG_SOFTMAX, x, &attrs);
}

tf_tensor_id tf_layer_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta, float epsilon) {
  tf_attrs attrs = attrs_of(TF_ATTR_NORM);
  attrs.u.norm.epsilon = epsilon;
  return node_optional3(g, TF_OP_LAYER_NORM, x, gamma, beta, &attrs);
}

tf_tensor_id tf_rms_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, float epsilon) {
  tf_attrs attrs = attrs_of(TF_ATTR_NORM);
  attrs.u.norm.epsilon = epsilon;
  return node2(g, TF_OP_RMS_NORM, x, gamma, &attrs);
}

tf_tensor_id tf_batch_norm(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta, float epsilon) {
  tf_attrs attrs = attrs_of(TF_ATTR_NORM);
  attrs.u.norm.epsilon = epsilon;
  tf_tensor_id inputs[3] = {x, gamma, beta};
  return tf_graph_node(g, TF_OP_BATCH_NORM, inputs, 3, &attrs);
}

tf_tensor_id tf_batch_norm_tracked(tf_graph *g, tf_tensor_id x, tf_tensor_id gamma, tf_tensor_id beta,
                                   tf_tensor_id running_mean, tf_tensor_id running_var, float epsilon, float momentum) {
  tf_attrs attrs = attrs_of(TF_ATTR_NORM);
  attrs.u.norm.epsilon = epsilon;
  attrs.u.norm.momentum = momentum;
  tf_tensor_id inputs[5] = {x, gamma, beta, running_mean, running_var};
  return tf_graph_node(g, TF_OP_BATCH_NORM, inputs, 5, &attrs);
}

tf_tensor_id tf_embedding(tf_graph *g, tf_tensor_id ids, tf_tensor_id table) {
  return node2(g, TF_OP_EMBEDDING, ids, table, NULL);
}

tf_tensor_id tf_reshape(tf_graph *g, tf_tensor_id x, tf_shape shape) {
  tf_attrs attrs = attrs_of(TF_ATTR_SHAPE);
  attrs.u.shape.shape = shape;
  return node1(g, TF_OP_RESHAPE, x, &attrs);
}

tf_tensor_id tf_transpose(tf_graph *g, tf_tensor_id x, const int32_t *perm, int32_t rank) {
  if (!g->status && (rank < 0 || rank > TF_MAX_RANK)) {
    tf_ir_fail(
        g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "transpose: permutation length %d (at most %d)", rank, TF_MAX_RANK));
    return TF_NO_TENSOR;
  }
  tf_attrs attrs = attrs_of(TF_ATTR_TRANSPOSE);
  attrs.u.transpose.rank = rank;
  for (int32_t i = 0; i < rank && i < TF_MAX_RANK; i++)
    attrs.u.transpose.perm[i] = perm[i];
  return node1(g, TF_OP_TRANSPOSE, x, &attrs);
}

tf_tensor_id tf_concat(tf_graph *g, const tf_tensor_id *xs, int32_t n, int32_t axis) {
  tf_attrs attrs = attrs_of(TF_ATTR_AXIS);
  attrs.u.axis.axis = axis;
  return tf_graph_node(g, TF_OP_CONCAT, xs, n, &attrs);
}

tf_tensor_id tf_slice(tf_graph *g, tf_tensor_id x, int32_t axis, int64_t start, int64_t end, int64_t step) {
  tf_attrs attrs = attrs_of(TF_ATTR_SLICE);
  attrs.u.slice.axis = axis;
  attrs.u.slice.start = start;
  attrs.u.slice.end = end;
  attrs.u.slice.step = step;
  return node1(g, TF_OP_SLICE, x, &attrs);
}

tf_tensor_id tf_expand(tf_graph *g, tf_tensor_id x, tf_shape shape) {
  tf_attrs attrs = attrs_of(TF_ATTR_SHAPE);
  attrs.u.shape.shape = shape;
  return node1(g, TF_OP_EXPAND, x, &attrs);
}

tf_tensor_id tf_conv1d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, int32_t stride, int32_t padding,
                       int32_t dilation, int32_t groups) {
  tf_attrs attrs = attrs_of(TF_ATTR_CONV);
  attrs.u.conv.stride[0] = attrs.u.conv.stride[1] = stride;
  attrs.u.conv.padding[0] = attrs.u.conv.padding[1] = padding;
  attrs.u.conv.dilation[0] = attrs.u.conv.dilation[1] = dilation;
  attrs.u.conv.groups = groups;
  return node_optional3(g, TF_OP_CONV1D, x, w, bias, &attrs);
}

tf_tensor_id tf_conv2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias, const tf_conv_attrs *a) {
  tf_attrs attrs = attrs_of(TF_ATTR_CONV);
  attrs.u.conv = *a;
  return node_optional3(g, TF_OP_CONV2D, x, w, bias, &attrs);
}

tf_tensor_id tf_conv_transpose2d(tf_graph *g, tf_tensor_id x, tf_tensor_id w, tf_tensor_id bias,
                                 const tf_conv_attrs *a) {
  tf_attrs attrs = attrs_of(TF_ATTR_CONV);
  attrs.u.conv = *a;
  return node_optional3(g, TF_OP_CONV_TRANSPOSE2D, x, w, bias, &attrs);
}

tf_tensor_id tf_pool2d(tf_graph *g, tf_op op, tf_tensor_id x, const tf_pool_attrs *a) {
  if (!g->status && op != TF_OP_MAX_POOL2D && op != TF_OP_AVG_POOL2D) {
    tf_ir_fail(g, tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_pool2d: %s is not a pool", tf_op_name(op)));
    return TF_NO_TENSOR;
  }
  tf_attrs attrs = attrs_of(TF_ATTR_POOL);
  attrs.u.pool = *a;
  return node1(g, op, x, &attrs);
}

tf_tensor_id tf_dropout(tf_graph *g, tf_tensor_id x, float rate) {
  tf_attrs attrs = attrs_of(TF_ATTR_DROPOUT);
  attrs.u.dropout.rate = rate;
  /* A per-node seed: masks differ between dropout nodes and are reproducible across recompute. */
  attrs.u.dropout.seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)g->n_nodes;
  return node1(g, TF_OP_DROPOUT, x, &attrs);
}

tf_tensor_id tf_attention(tf_graph *g, tf_tensor_id q, tf_tensor_id k, tf_tensor_id v, int32_t num_heads, bool causal) {
  tf_attrs attrs = attrs_of(TF_ATTR_ATTENTION);
  attrs.u.attention.num_heads = num_heads;
  attrs.u.attention.causal = causal;
  attrs.u.attention.scale = 0.0f;
  tf_tensor_id inputs[3] = {q, k, v};
  return tf_graph_node(g, TF_OP_ATTENTION, inputs, 3, &attrs);
}

tf_tensor_id tf_cast(tf_graph *g, tf_tensor_id x, tf_dtype to) {
  tf_attrs attrs = attrs_of(TF_ATTR_CAST);
  attrs.u.cast.to = to;
  return node1(g, TF_OP_CAST, x, &attrs);
}

tf_tensor_id tf_cross_entropy(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, int64_t ignore_index) {
  tf_attrs attrs = attrs_of(TF_ATTR_CROSS_ENTROPY);
  attrs.u.cross_entropy.ignore_index = ignore_index;
  return node2(g, TF_OP_CROSS_ENTROPY, logits, labels, &attrs);
}

tf_tensor_id tf_linear_cross_entropy(tf_graph *g, tf_tensor_id x, tf_tensor_id weight, bool transpose_weight,
                                     tf_tensor_id labels, int64_t ignore_index, int64_t chunk_rows) {
  tf_attrs attrs = attrs_of(TF_ATTR_CROSS_ENTROPY);
  attrs.u.cross_entropy.ignore_index = ignore_index;
  attrs.u.cross_entropy.transpose_weight = transpose_weight;
  attrs.u.cross_entropy.chunk_rows = chunk_rows;
  tf_tensor_id inputs[3] = {x, weight, labels};
  return tf_graph_node(g, TF_OP_LINEAR_CROSS_ENTROPY, inputs, 3, &attrs);
}

tf_tensor_id tf_ctc_loss(tf_graph *g, tf_tensor_id logits, tf_tensor_id labels, tf_tensor_id input_lengths,
                         int64_t blank, bool zero_infinity) {
  tf_attrs attrs = attrs_of(TF_ATTR_CTC);
  attrs.u.ctc.blank = blank;
  attrs.u.ctc.zero_infinity = zero_infinity;
  tf_tensor_id inputs[3] = {logits, labels, input_lengths};
  return tf_graph_node(g, TF_OP_CTC_LOSS, inputs, input_lengths == TF_NO_TENSOR ? 2 : 3, &attrs);
}

tf_tensor_id tf_mse(tf_graph *g, tf_tensor_id prediction, tf_tensor_id target) {
  return node2(g, TF_OP_MSE, prediction, target, NULL);
}

tf_tensor_id tf_bce_with_logits(tf_graph *g, tf_tensor_id logits, tf_tensor_id target) {
  return node2(g, TF_OP_BCE_WITH_LOGITS, logits, target, NULL);
}
