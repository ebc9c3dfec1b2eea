/* Pass 2, shapes: bind symbols, then infer every tensor's concrete shape, dtype and byte size in
 * node order. Errors name the node, its op and the shapes involved. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "graph/passes.h"

tf_status tf_graph_bind(tf_graph *g, const char *name, int64_t value) {
  int32_t symbol = tf_ir_find_symbol(g, name);
  if (symbol < 0) {
    char known[512] = "";
    size_t used = 0;
    for (int32_t i = 0; i < g->n_symbols && used < sizeof(known); i++)
      used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "", g->symbols[i].name);
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "graph '%s' has no symbol '%s' (its symbols: %s)", g->name, name,
                         g->n_symbols ? known : "none");
  }
  if (value < 1)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "symbol %s=%" PRId64 ": a symbol's value must be >= 1", name, value);
  g->symbols[symbol].value = value;
  g->symbols[symbol].bound = true;
  return NULL;
}

/* Whether the list `list` binds `name` (of `length` bytes) before position `here`. */
static bool bound_before(const char *list, const char *here, const char *name, size_t length) {
  for (const char *p = list; p < here; p++) {
    bool starts = p == list || p[-1] == ',' || p[-1] == ' ';
    if (starts && strncmp(p, name, length) == 0) {
      const char *after = p + length;
      while (*after == ' ')
        after++;
      if (*after == '=')
        return true;
    }
  }
  return false;
}

tf_status tf_graph_bind_list(tf_graph *g, const char *list) {
  const char *p = list;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p)
      break;
    const char *eq = strchr(p, '=');
    const char *end = strchr(p, ',');
    if (!end)
      end = p + strlen(p);
    if (!eq || eq > end || eq == p)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "bad binding '%.*s': expected NAME=VALUE, e.g. N=8", (int)(end - p),
                           p);
    char name[128];
    size_t length = (size_t)(eq - p);
    while (length && p[length - 1] == ' ')
      length--;
    if (length >= sizeof(name))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "symbol name '%.*s' is too long", (int)length, p);
    memcpy(name, p, length);
    name[length] = '\0';
    if (bound_before(list, p, name, length))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "'%s' binds %s twice; give each symbol one value", list, name);
    char *number_end;
    errno = 0;
    long long value = strtoll(eq + 1, &number_end, 10);
    bool out_of_range = errno == ERANGE;
    while (*number_end == ' ')
      number_end++;
    if (number_end == eq + 1 || number_end != end)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "bad value in '%.*s': expected an integer", (int)(end - p), p);
    if (out_of_range)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "'%.*s': the value does not fit 64 bits", (int)(end - p), p);
    TF_RETURN_IF_ERROR(tf_graph_bind(g, name, value));
    p = end;
  }
  return NULL;
}

tf_status tf_shapes_resolve_tensor(tf_graph *g, int32_t id) {
  tf_ir_tensor *t = &g->tensors[id];
  char text[256];
  if (t->declared.rank < 0 || t->declared.rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_INVALID_INPUT, "tensor '%s' (%s) has no valid declared shape (rank %d)", t->name,
                         tf_kind_name(t->kind), t->declared.rank);
  for (int32_t i = 0; i < t->declared.rank; i++) {
    int64_t value = tf_ir_dim_value(g, t->declared.dims[i]);
    if (value < 0)
      return tf_status_new(TF_ERR_SHAPE, "tensor '%s' has invalid dimension %d in %s", t->name, i,
                           tf_ir_format_declared(g, &t->declared, text, sizeof(text)));
    t->shape[i] = value;
  }
  t->rank = t->declared.rank;
  if (!tf_ir_bytes(t->dtype, t->shape, t->rank, &t->bytes))
    return tf_status_new(TF_ERR_SHAPE, "tensor '%s' %s: its byte size overflows 64 bits", t->name,
                         tf_format_shape(t->shape, t->rank, text, sizeof(text)));
  return NULL;
}

/* A shape rule's view of the graph's symbols (core/shape_rules.h). */
static int64_t graph_dim_value(const void *graph, tf_dim dim) { return tf_ir_dim_value(graph, dim); }

tf_status tf_shapes_infer_node(tf_graph *g, int32_t id, bool check_dtype) {
  tf_ir_node *node = &g->nodes[id];
  const tf_op_info *info = tf_op_info_get(node->op);
  if (!info)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' has unknown op %d", node->name, (int)node->op);
  if (node->n_inputs < info->min_inputs || node->n_inputs > info->max_inputs)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) has %d inputs; %s takes %d to %d", node->name,
                         info->name, node->n_inputs, info->name, info->min_inputs, info->max_inputs);
  tf_shape_operand operands[TF_OP_VARIADIC_INTERNAL];
  for (int32_t i = 0; i < node->n_inputs; i++) {
    const tf_ir_tensor *in = &g->tensors[node->inputs[i]];
    if (in->rank < 0)
      return tf_status_new(TF_ERR_INTERNAL, "node '%s' (%s): input '%s' has no shape yet", node->name, info->name,
                           in->name);
    operands[i] = (tf_shape_operand){in->name, in->dtype, in->kind, in->rank, in->shape};
  }
  tf_shape_query query = {node->op, &node->attrs, node->n_inputs, operands, graph_dim_value, g};
  tf_shape_result results[TF_MAX_OUTPUTS];
  memset(results, 0, sizeof(results));
  tf_status status = info->shape_rule(&query, results);
  if (status)
    return tf_status_prefix(status, "node '%s' (%s)", node->name, info->name);
  if (node->n_outputs != info->n_outputs)
    return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) has %d outputs; %s has %d", node->name, info->name,
                         node->n_outputs, info->name, info->n_outputs);
  for (int32_t i = 0; i < node->n_outputs; i++) {
    const tf_shape_result *result = &results[i];
    tf_ir_tensor *out = &g->tensors[node->outputs[i]];
    if (check_dtype && out->dtype != result->dtype)
      return tf_status_new(TF_ERR_INVALID_INPUT, "node '%s' (%s) produces %s but its output '%s' is stored as %s",
                           node->name, info->name, tf_dtype_name(result->dtype), out->name, tf_dtype_name(out->dtype));
    out->dtype = result->dtype;
    out->rank = result->rank;
    memcpy(out->shape, result->shape, sizeof(out->shape));
    char text[256];
    if (!tf_ir_bytes(out->dtype, out->shape, out->rank, &out->bytes))
      return tf_status_new(TF_ERR_SHAPE, "node '%s' (%s): output %s overflows 64 bits in bytes", node->name, info->name,
                           tf_format_shape(out->shape, out->rank, text, sizeof(text)));
  }
  return NULL;
}

/* The symbols a tensor's declared shape uses, as "T=512" pairs (what a user bound). */
static void describe_bindings(const tf_graph *g, const tf_ir_tensor *t, char *text, size_t size) {
  size_t used = 0;
  text[0] = '\0';
  for (int32_t d = 0; d < t->declared.rank && used < size; d++) {
    int32_t symbol = t->declared.dims[d].symbol;
    if (symbol >= 0 && symbol < g->n_symbols)
      used += (size_t)snprintf(text + used, size - used, "%s%s=%" PRId64, used ? ", " : "", g->symbols[symbol].name,
                               g->symbols[symbol].value);
  }
}

/* Embedding ids that are constants (position ids: arange over a bound length) are known at compile
 * time: each must index a row of the table. Without this check a context longer than the position
 * table (--set T=512 on a 256-row table) would compile and read past it. */
static tf_status check_constant_ids(const tf_graph *g, const tf_ir_node *node) {
  const tf_ir_tensor *ids = &g->tensors[node->inputs[0]], *table = &g->tensors[node->inputs[1]];
  if (ids->kind != TF_CONSTANT || (ids->init_kind != TF_INIT_ARANGE && ids->init_kind != TF_INIT_FILL))
    return NULL;
  int64_t count = 1;
  for (int32_t d = 0; d < ids->rank; d++)
    count *= ids->shape[d];
  if (count == 0)
    return NULL;
  double first = ids->init_a, step = ids->init_kind == TF_INIT_ARANGE ? ids->init_b : 0.0;
  double last = first + step * (double)(count - 1);
  double low = first < last ? first : last, high = first < last ? last : first;
  int64_t rows = table->shape[0];
  if (low >= 0 && high < (double)rows)
    return NULL;
  char bound[256];
  describe_bindings(g, ids, bound, sizeof(bound));
  return tf_status_new(
      TF_ERR_SHAPE,
      "node '%s' (embedding): the ids '%s' run from %.0f to %.0f%s%s%s, but the table '%s' has %" PRId64
      " rows (ids 0..%" PRId64 "): bind a smaller value, or give the model a larger table",
      node->name, ids->name, low, high, bound[0] ? " (with " : "", bound, bound[0] ? ")" : "", table->name, rows,
      rows - 1);
}

/* Assumes a validated graph: ids in range and nodes in topological order. */
tf_status tf_graph_infer_shapes(tf_graph *g) {
  for (int32_t i = 0; i < g->n_tensors; i++) {
    if (g->tensors[i].kind == TF_ACTIVATION) {
      g->tensors[i].rank = -1;
      g->tensors[i].bytes = -1;
    } else {
      TF_RETURN_IF_ERROR(tf_shapes_resolve_tensor(g, i));
    }
  }
  for (int32_t i = 0; i < g->n_nodes; i++)
    TF_RETURN_IF_ERROR(tf_shapes_infer_node(g, i, true));
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == TF_OP_EMBEDDING)
      TF_RETURN_IF_ERROR(check_constant_ids(g, &g->nodes[i]));
  if (g->loss >= 0) {
    const tf_ir_tensor *loss = &g->tensors[g->loss];
    char text[256];
    if (loss->rank != 0 || loss->dtype != TF_F32)
      return tf_status_new(TF_ERR_SHAPE, "the loss '%s' must be an f32 scalar; it is %s %s", loss->name,
                           tf_dtype_name(loss->dtype), tf_format_shape(loss->shape, loss->rank, text, sizeof(text)));
  }
  return NULL;
}
