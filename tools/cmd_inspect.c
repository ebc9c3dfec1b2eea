/* `tightfit inspect F.tfg`: what a graph holds, in numbers: parameters and their bytes, tensors by
 * kind, ops by type, precision overrides, symbols, inputs, outputs, the loss and the training
 * configuration. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tightfit/graph.h"
#include "tools/cli.h"

static void help(void) {
  fprintf(tf_cli_out(),
          "usage: tightfit inspect F.tfg [--set N=8,T=256 ...] [--json]\n\n"
          "Loads the graph (FlatBuffers Verifier, semantic checks, shape inference) and summarises it:\n"
          "parameters (count and bytes), tensors by kind, ops by type, symbols, inputs, labels,\n"
          "outputs, the loss, the nodes' precision overrides and the training configuration.\n"
          "Shapes are inferred at the symbols' defaults unless --set binds them.\n\n"
          "options:\n"
          "  --set NAME=V[,NAME=V]  bind symbols (repeatable)\n"
          "  --json                 machine-readable output\n\n"
          "exit codes: 0 ok, 2 bad usage or a malformed graph (the message names the file and problem).\n");
}

typedef struct kind_totals {
  int32_t tensors;
  int64_t elements, bytes;
} kind_totals;

typedef struct op_count {
  tf_op op;
  int32_t count;
} op_count;

static int by_count_desc(const void *a, const void *b) {
  const op_count *x = a, *y = b;
  if (x->count != y->count)
    return y->count - x->count;
  return (int)x->op - (int)y->op;
}

/* Totals saturate instead of overflowing: a hostile file may declare many huge tensors. */
static int64_t add_saturating(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

static int64_t elements_of(const tf_tensor_info *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
}

static const char *concrete_shape(const tf_tensor_info *t, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < t->rank && used < size; d++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", t->shape[d]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

static const char *declared_shape(const tf_graph *g, const tf_tensor_info *t, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < t->declared.rank && used < size; d++) {
    tf_dim dim = t->declared.dims[d];
    const char *sep = d ? "," : "";
    const char *name;
    int64_t def, value;
    if (dim.symbol >= 0 && tf_graph_symbol_at(g, dim.symbol, &name, &def, &value)) {
      if (dim.size == 1)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, name);
      else
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64 "*%s", sep, dim.size, name);
    } else {
      used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, sep, dim.size);
    }
  }
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}

static void print_tensor_list(const tf_graph *g, tf_tensor_kind kind, const char *title) {
  bool any = false;
  for (int32_t i = 0; i < tf_graph_tensor_count(g); i++) {
    tf_tensor_info t;
    tf_graph_tensor(g, i, &t);
    if (t.kind != kind)
      continue;
    if (!any)
      fprintf(tf_cli_out(), "%s:\n", title);
    any = true;
    char declared[256], concrete[256], bytes[32];
    fprintf(tf_cli_out(), "  %-28s %-4s %-18s = %-18s %s\n", t.name, tf_dtype_name(t.dtype),
            declared_shape(g, &t, declared, sizeof(declared)), concrete_shape(&t, concrete, sizeof(concrete)),
            tf_cli_bytes(t.bytes, bytes, sizeof(bytes)));
  }
}

/* The nodes whose precision override differs from inheriting the policy, one line, when any. */
static void print_overrides(const tf_graph *g) {
  int32_t shown = 0;
  for (int32_t i = 0; i < tf_graph_node_count(g); i++) {
    tf_node_info node;
    tf_graph_node_at(g, i, &node);
    if (node.precision == TF_PRECISION_INHERIT)
      continue;
    fprintf(tf_cli_out(), "%s %s %s", shown ? "," : "precision overrides (saved activations):", node.name,
            tf_precision_name(node.precision));
    shown++;
  }
  if (shown)
    fprintf(tf_cli_out(), "\n");
}

static void print_text(const char *path, const tf_graph *g, const kind_totals *totals, const op_count *ops,
                       int32_t n_op_types) {
  char a[64], b[64];
  fprintf(tf_cli_out(), "%s: graph '%s' (schema version %d)\n", path, tf_graph_name(g), TF_SCHEMA_VERSION);
  fprintf(tf_cli_out(), "symbols:");
  for (int32_t i = 0; i < tf_graph_symbol_count(g); i++) {
    const char *name;
    int64_t def, value;
    tf_graph_symbol_at(g, i, &name, &def, &value);
    fprintf(tf_cli_out(), " %s=%" PRId64 " (default %" PRId64 ")%s", name, value, def,
            i + 1 < tf_graph_symbol_count(g) ? "," : "");
  }
  fprintf(tf_cli_out(), "%s\n", tf_graph_symbol_count(g) ? "" : " none");
  const kind_totals *p = &totals[TF_PARAMETER];
  fprintf(tf_cli_out(), "parameters: %s in %d tensors, %s", tf_cli_count(p->elements, a, sizeof(a)), p->tensors,
          tf_cli_bytes(p->bytes, b, sizeof(b)));
  const kind_totals *f = &totals[TF_KIND_COUNT];
  if (f->tensors)
    fprintf(tf_cli_out(), "; frozen (not trained): %s in %d tensors, %s", tf_cli_count(f->elements, a, sizeof(a)),
            f->tensors, tf_cli_bytes(f->bytes, b, sizeof(b)));
  fprintf(tf_cli_out(), "\n");
  const kind_totals *act = &totals[TF_ACTIVATION];
  fprintf(tf_cli_out(), "activations: %d tensors, %s summed without reuse (the compiled plan reuses memory)\n",
          act->tensors, tf_cli_bytes(act->bytes, b, sizeof(b)));
  print_tensor_list(g, TF_INPUT, "inputs");
  print_tensor_list(g, TF_LABEL, "labels");
  print_tensor_list(g, TF_CONSTANT, "constants");
  if (tf_graph_output_count(g)) {
    fprintf(tf_cli_out(), "outputs:");
    for (int32_t i = 0; i < tf_graph_output_count(g); i++) {
      tf_tensor_info t;
      tf_graph_tensor(g, tf_graph_output_at(g, i), &t);
      fprintf(tf_cli_out(), " %s %s%s", t.name, concrete_shape(&t, a, sizeof(a)),
              i + 1 < tf_graph_output_count(g) ? "," : "");
    }
    fprintf(tf_cli_out(), "\n");
  }
  tf_tensor_info loss;
  if (tf_graph_tensor(g, tf_graph_loss(g), &loss))
    fprintf(tf_cli_out(), "loss: %s (%s scalar)\n", loss.name, tf_dtype_name(loss.dtype));
  else
    fprintf(tf_cli_out(), "loss: none (inference only)\n");
  fprintf(tf_cli_out(), "ops: %d nodes of %d types\n", tf_graph_node_count(g), n_op_types);
  for (int32_t i = 0; i < n_op_types; i++)
    fprintf(tf_cli_out(), "  %-18s %6d\n", tf_op_name(ops[i].op), ops[i].count);
  print_overrides(g);
  const tf_training_config *c = tf_graph_training(g);
  if (c) {
    static const char *const optimizers[] = {"none", "sgd", "adamw", "adamw8bit"};
    static const char *const precisions[] = {"f32", "bf16", "f16"};
    fprintf(tf_cli_out(), "training: %s lr %g", optimizers[c->optimizer], c->learning_rate);
    if (c->optimizer == TF_OPTIMIZER_SGD)
      fprintf(tf_cli_out(), " momentum %g", c->momentum);
    if (c->optimizer == TF_OPTIMIZER_ADAMW || c->optimizer == TF_OPTIMIZER_ADAMW8BIT)
      fprintf(tf_cli_out(), " betas %g/%g eps %g", c->beta1, c->beta2, c->epsilon);
    fprintf(tf_cli_out(), " weight decay %g, clip %g, global batch %" PRId64 ", accumulate %d, precision %s\n",
            c->weight_decay, c->clip_norm, c->global_batch, c->accumulate_steps, precisions[c->precision]);
  }
}

static void json_tensor_list(tf_json *j, const tf_graph *g, tf_tensor_kind kind, const char *key) {
  tf_json_begin_array(j, key);
  for (int32_t i = 0; i < tf_graph_tensor_count(g); i++) {
    tf_tensor_info t;
    tf_graph_tensor(g, i, &t);
    if (t.kind != kind)
      continue;
    char declared[256];
    tf_json_begin_object(j, NULL);
    tf_json_string(j, "name", t.name);
    tf_json_string(j, "dtype", tf_dtype_name(t.dtype));
    tf_json_string(j, "declared_shape", declared_shape(g, &t, declared, sizeof(declared)));
    tf_json_begin_array(j, "shape");
    for (int32_t d = 0; d < t.rank; d++)
      tf_json_int(j, NULL, t.shape[d]);
    tf_json_end_array(j);
    tf_json_int(j, "bytes", t.bytes);
    tf_json_end_object(j);
  }
  tf_json_end_array(j);
}

static void print_json(const char *path, const tf_graph *g, const kind_totals *totals, const op_count *ops,
                       int32_t n_op_types) {
  tf_json j = {tf_cli_out(), 0, {false}};
  tf_json_begin_object(&j, NULL);
  tf_json_string(&j, "file", path);
  tf_json_string(&j, "graph", tf_graph_name(g));
  tf_json_int(&j, "schema_version", TF_SCHEMA_VERSION);
  tf_json_begin_object(&j, "symbols");
  for (int32_t i = 0; i < tf_graph_symbol_count(g); i++) {
    const char *name;
    int64_t def, value;
    tf_graph_symbol_at(g, i, &name, &def, &value);
    tf_json_begin_object(&j, name);
    tf_json_int(&j, "value", value);
    tf_json_int(&j, "default", def);
    tf_json_end_object(&j);
  }
  tf_json_end_object(&j);
  tf_json_int(&j, "parameters", totals[TF_PARAMETER].elements);
  tf_json_int(&j, "parameter_tensors", totals[TF_PARAMETER].tensors);
  tf_json_int(&j, "parameter_bytes", totals[TF_PARAMETER].bytes);
  tf_json_int(&j, "frozen_parameters", totals[TF_KIND_COUNT].elements);
  tf_json_int(&j, "frozen_parameter_tensors", totals[TF_KIND_COUNT].tensors);
  tf_json_int(&j, "frozen_parameter_bytes", totals[TF_KIND_COUNT].bytes);
  tf_json_int(&j, "activation_tensors", totals[TF_ACTIVATION].tensors);
  tf_json_int(&j, "activation_bytes_no_reuse", totals[TF_ACTIVATION].bytes);
  json_tensor_list(&j, g, TF_INPUT, "inputs");
  json_tensor_list(&j, g, TF_LABEL, "labels");
  json_tensor_list(&j, g, TF_CONSTANT, "constants");
  tf_json_begin_array(&j, "outputs");
  for (int32_t i = 0; i < tf_graph_output_count(g); i++) {
    tf_tensor_info t;
    tf_graph_tensor(g, tf_graph_output_at(g, i), &t);
    tf_json_string(&j, NULL, t.name);
  }
  tf_json_end_array(&j);
  tf_tensor_info loss;
  if (tf_graph_tensor(g, tf_graph_loss(g), &loss))
    tf_json_string(&j, "loss", loss.name);
  tf_json_int(&j, "nodes", tf_graph_node_count(g));
  tf_json_begin_object(&j, "ops");
  for (int32_t i = 0; i < n_op_types; i++)
    tf_json_int(&j, tf_op_name(ops[i].op), ops[i].count);
  tf_json_end_object(&j);
  tf_json_begin_object(&j, "precision_overrides"); /* node name -> f32/bf16/f16; empty when none */
  for (int32_t i = 0; i < tf_graph_node_count(g); i++) {
    tf_node_info node;
    tf_graph_node_at(g, i, &node);
    if (node.precision != TF_PRECISION_INHERIT)
      tf_json_string(&j, node.name, tf_precision_name(node.precision));
  }
  tf_json_end_object(&j);
  const tf_training_config *c = tf_graph_training(g);
  if (c) {
    static const char *const optimizers[] = {"none", "sgd", "adamw", "adamw8bit"};
    static const char *const precisions[] = {"f32", "bf16", "f16"};
    tf_json_begin_object(&j, "training");
    tf_json_string(&j, "optimizer", optimizers[c->optimizer]);
    tf_json_double(&j, "learning_rate", c->learning_rate);
    tf_json_double(&j, "momentum", c->momentum);
    tf_json_double(&j, "beta1", c->beta1);
    tf_json_double(&j, "beta2", c->beta2);
    tf_json_double(&j, "epsilon", c->epsilon);
    tf_json_double(&j, "weight_decay", c->weight_decay);
    tf_json_double(&j, "clip_norm", c->clip_norm);
    tf_json_int(&j, "global_batch", c->global_batch);
    tf_json_int(&j, "accumulate_steps", c->accumulate_steps);
    tf_json_string(&j, "precision", precisions[c->precision]);
    tf_json_end_object(&j);
  }
  tf_json_end_object(&j);
}

int tf_cmd_inspect(int argc, char **argv) {
  const char *path = NULL;
  const char *bindings[32];
  int n_bindings = 0;
  bool json = false;
  tf_cli_args walk = tf_cli_args_start("inspect", argc, argv, help, &json);
  walk.dash_operand = true;
  while (tf_cli_args_next(&walk))
    if (!tf_cli_args_list(&walk, "--set", bindings, 32, &n_bindings))
      tf_cli_args_positional(&walk, "graph file", &path);
  if (!tf_cli_args_done(&walk, path != NULL, "missing the graph file"))
    return walk.exit_code;
  tf_graph *g;
  tf_status status = tf_graph_load(path, &g);
  if (status)
    return tf_cli_fail("inspect", status);
  for (int i = 0; i < n_bindings && !status; i++)
    status = tf_graph_bind_list(g, bindings[i]);
  if (!status && n_bindings)
    status = tf_graph_infer_shapes(g);
  if (status) {
    tf_graph_destroy(g);
    return tf_cli_fail("inspect", tf_status_prefix(status, "%s", path));
  }
  kind_totals totals[TF_KIND_COUNT + 1]; /* [TF_KIND_COUNT]: the frozen parameters among the parameters */
  memset(totals, 0, sizeof(totals));
  for (int32_t i = 0; i < tf_graph_tensor_count(g); i++) {
    tf_tensor_info t;
    tf_graph_tensor(g, i, &t);
    totals[t.kind].tensors++;
    totals[t.kind].elements = add_saturating(totals[t.kind].elements, elements_of(&t));
    totals[t.kind].bytes = add_saturating(totals[t.kind].bytes, t.bytes);
    if (t.kind == TF_PARAMETER && !tf_graph_is_trainable(g, i)) {
      kind_totals *f = &totals[TF_KIND_COUNT];
      f->tensors++;
      f->elements = add_saturating(f->elements, elements_of(&t));
      f->bytes = add_saturating(f->bytes, t.bytes);
    }
  }
  op_count ops[TF_OP_COUNT];
  for (int op = 0; op < TF_OP_COUNT; op++)
    ops[op] = (op_count){(tf_op)op, 0};
  for (int32_t i = 0; i < tf_graph_node_count(g); i++) {
    tf_node_info node;
    tf_graph_node_at(g, i, &node);
    ops[node.op].count++;
  }
  qsort(ops, TF_OP_COUNT, sizeof(op_count), by_count_desc);
  int32_t n_op_types = 0;
  while (n_op_types < TF_OP_COUNT && ops[n_op_types].count > 0)
    n_op_types++;
  if (json)
    print_json(path, g, totals, ops, n_op_types);
  else
    print_text(path, g, totals, ops, n_op_types);
  tf_graph_destroy(g);
  return TF_EXIT_OK;
}
