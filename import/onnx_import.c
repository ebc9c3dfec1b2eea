/* tf_onnx_import: reads the ONNX protobuf (protobuf-c, C generated from Debian's onnx.proto at build
 * time), checks the opset, lists every unsupported operator at once, then builds the graph in node
 * order and writes the initializers to the weights file only when the whole graph was built. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "graph/ir.h"
#include "import/onnx_internal.h"
#include "runtime/safetensors.h"

#define OX_MIN_OPSET 7
#define OX_MAX_OPSET 18

tf_onnx_options tf_onnx_options_default(void) {
  tf_onnx_options options;
  memset(&options, 0, sizeof(options));
  options.ignore_index = -100;
  return options;
}

static const char *const loss_names[] = {"none", "cross_entropy", "mse", "bce_with_logits", "l1", "ctc", "output"};

int32_t tf_onnx_frozen_batch_norms(const tf_graph *graph) {
  int32_t count = 0;
  for (int32_t id = 0; id < tf_graph_tensor_count(graph); id++) {
    tf_tensor_info info;
    count += tf_graph_tensor(graph, id, &info) && info.kind == TF_CONSTANT && info.name &&
             strstr(info.name, OX_FROZEN_BATCH_NORM_SUFFIX) != NULL;
  }
  return count;
}

int32_t tf_onnx_batch_statistics_norms(const tf_graph *graph) {
  int32_t count = 0;
  for (int32_t id = 0; id < tf_graph_node_count(graph); id++) {
    tf_node_info info;
    count += tf_graph_node_at(graph, id, &info) && info.op == TF_OP_BATCH_NORM;
  }
  return count;
}

const char *tf_onnx_loss_name(tf_onnx_loss loss) {
  return (int)loss >= 0 && (size_t)loss < sizeof(loss_names) / sizeof(loss_names[0]) ? loss_names[loss] : "?";
}

bool tf_onnx_loss_parse(const char *name, tf_onnx_loss *out) {
  for (size_t i = 0; name && i < sizeof(loss_names) / sizeof(loss_names[0]); i++) {
    if (strcmp(name, loss_names[i]) == 0) {
      *out = (tf_onnx_loss)i;
      return true;
    }
  }
  return false;
}

int64_t ox_symbol_prime(int32_t symbol) {
  static const int64_t primes[OX_MAX_SYMBOLS] = {100003, 100019, 100043, 100049, 100057, 100069, 100103, 100109,
                                                 100129, 100151, 100153, 100169, 100183, 100189, 100193, 100207};
  return symbol >= 0 && symbol < OX_MAX_SYMBOLS ? primes[symbol] : 0;
}

/* The default of symbol `name` from "N=8,T=64"; 1 when not listed. */
static int64_t symbol_default(const char *list, const char *name) {
  size_t length = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t item = end ? (size_t)(end - p) : strlen(p);
    if (item > length && strncmp(p, name, length) == 0 && p[length] == '=') {
      long long value = strtoll(p + length + 1, NULL, 10);
      return value >= 1 ? value : 1;
    }
    p = end ? end + 1 : p + item;
  }
  return 1;
}

static tf_status symbol_for(ox_import *im, const char *name, int32_t *out) {
  for (int32_t s = 0; s < im->n_symbols; s++) {
    const char *known;
    int64_t d, v;
    if (tf_graph_symbol_at(im->graph, s, &known, &d, &v) && strcmp(known, name) == 0) {
      *out = s;
      return NULL;
    }
  }
  if (im->n_symbols == OX_MAX_SYMBOLS)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: more than %d dynamic axes", im->source, OX_MAX_SYMBOLS);
  int32_t s = tf_graph_symbol(im->graph, name, symbol_default(im->options->symbol_defaults, name));
  if (s < 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: dynamic axis '%s': %s", im->source, name,
                         tf_status_message(tf_graph_status(im->graph)));
  im->n_symbols++;
  TF_RETURN_IF_ERROR(tf_graph_bind(im->graph, name, ox_symbol_prime(s)));
  *out = s;
  return NULL;
}

/* A graph input for ONNX input `info` (not an initializer). */
static tf_status add_input(ox_import *im, const Onnx__ValueInfoProto *info) {
  const char *name = info->name;
  if (!name || !*name)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: a graph input has no name", im->source);
  if (!info->type || info->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !info->type->tensor_type)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' is not a tensor", im->source, name);
  const Onnx__TypeProto__Tensor *type = info->type->tensor_type;
  tf_dtype dtype;
  if (!ox_dtype(type->elem_type, &dtype) || type->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has element type %s (%" PRId32 ")", im->source, name,
                         ox_dtype_name(type->elem_type), type->elem_type);
  if (!type->shape)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has no shape", im->source, name);
  if (type->shape->n_dim > TF_MAX_RANK)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: input '%s' has rank %zu (at most %d)", im->source, name,
                         type->shape->n_dim, TF_MAX_RANK);
  tf_dim dims[TF_MAX_RANK];
  for (size_t i = 0; i < type->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = type->shape->dim[i];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 1 &&
        d->dim_value < OX_SYMBOL_PRIME_MIN) {
      dims[i] = tf_fixed(d->dim_value);
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && *d->dim_param) {
      int32_t s = -1;
      TF_RETURN_IF_ERROR(symbol_for(im, d->dim_param, &s));
      dims[i] = tf_sym(s);
    } else {
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: input '%s' axis %zu has no size from 1 to %d and no name (name dynamic axes in "
                           "torch.onnx.export's dynamic_axes)",
                           im->source, name, i, OX_SYMBOL_PRIME_MIN - 1);
    }
  }
  ox_value *v = ox_value_get(im, name);
  if (!v)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
  v->tensor = tf_graph_input(im->graph, name, dtype, tf_shape_from(dims, (int32_t)type->shape->n_dim));
  return ox_graph_error(im, NULL);
}

static tf_status check_model(ox_import *im) {
  const Onnx__ModelProto *m = im->model;
  if (!m->graph)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: not an ONNX model: no graph", im->source);
  if (!m->has_ir_version || m->ir_version < 3)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: ONNX IR version %" PRId64 " (3 or newer)", im->source,
                         m->has_ir_version ? m->ir_version : 0);
  im->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0)
      im->opset = o->has_version ? o->version : -1;
  }
  if (im->opset < OX_MIN_OPSET || im->opset > OX_MAX_OPSET)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: opset %" PRId64 " of the default domain (supported: %d to %d; %s)",
                         im->source, im->opset, OX_MIN_OPSET, OX_MAX_OPSET,
                         im->opset < 0 ? "the model imports none"
                                       : "export with opset_version=14 or 17; PyTorch 2.x: with dynamo=False, or "
                                         "opset_version=18 for its dynamo exporter");
  im->onnx = m->graph;
  return NULL;
}

/* Every live node's operator must have a converter: one message lists them all. */
static tf_status check_operators(ox_import *im) {
  const char *names[64];
  const char *first[64];
  int32_t counts[64], n = 0, total = 0;
  for (int32_t i = 0; i < im->n_nodes; i++) {
    const ox_node *node = &im->nodes[i];
    const char *domain = node->proto->domain;
    bool default_domain = !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
    if (!node->live || node->fused != OX_PLAIN || (default_domain && ox_op_supported(node->proto->op_type)))
      continue;
    const char *op = node->proto->op_type ? node->proto->op_type : "?";
    int32_t j = 0;
    while (j < n && strcmp(names[j], op) != 0)
      j++;
    if (j == n && n < 64) {
      names[n] = op;
      first[n] = node->proto->name && *node->proto->name            ? node->proto->name
                 : node->proto->n_output && *node->proto->output[0] ? node->proto->output[0] /* unnamed: its output */
                                                                    : "?";
      counts[n++] = 0;
    }
    if (j < 64)
      counts[j]++;
    total++;
  }
  if (!n)
    return NULL;
  char list[2048] = "";
  size_t used = 0;
  for (int32_t j = 0; j < n && used < sizeof(list); j++)
    used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s (%" PRId32 " node%s, first '%s')", j ? ", " : "",
                             names[j], counts[j], counts[j] == 1 ? "" : "s", first[j]);
  return tf_status_new(TF_ERR_UNSUPPORTED, "%s: %" PRId32 " node%s with unsupported operators: %s", im->source, total,
                       total == 1 ? "" : "s", list);
}

/* ONNX is in SSA form: a second node writing `name` would silently replace the first one's value
 * (and drop that node as dead), so it is refused, naming both nodes. */
static tf_status check_single_writer(ox_import *im, int32_t node, const char *name) {
  int32_t earlier = tf_strmap_get(&im->producers, name);
  if (earlier < 0)
    return NULL;
  char first[512], second[512];
  ox_node_label(&im->nodes[earlier], first, sizeof(first));
  ox_node_label(&im->nodes[node], second, sizeof(second));
  if (earlier == node)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %s lists output '%s' twice (each tensor has one writer)",
                         im->source, first, name);
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: tensor '%s' is written by two nodes, %s (node %" PRId32 ") and %s (node %" PRId32
                       "); ONNX allows one writer per tensor",
                       im->source, name, first, earlier, second, node);
}

static tf_status collect_nodes(ox_import *im) {
  const Onnx__GraphProto *g = im->onnx;
  if (g->n_node > (size_t)INT32_MAX / 2)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: too many nodes", im->source);
  im->nodes = calloc(g->n_node ? g->n_node : 1, sizeof(ox_node));
  if (!im->nodes)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory for %zu nodes", im->source, g->n_node);
  im->n_nodes = (int32_t)g->n_node;
  for (int32_t i = 0; i < im->n_nodes; i++) {
    ox_node *node = &im->nodes[i];
    node->proto = g->node[i];
    node->inputs = (const char *const *)node->proto->input;
    node->n_inputs = (int32_t)(node->proto->n_input < 4096 ? node->proto->n_input : 4096);
    if (!node->proto->op_type)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: node %" PRId32 " has no operator type", im->source, i);
    for (size_t j = 0; j < node->proto->n_output; j++) {
      const char *out = node->proto->output[j];
      if (!out || !*out)
        continue;
      TF_RETURN_IF_ERROR(check_single_writer(im, i, out));
      if (!tf_strmap_put(&im->producers, out, i))
        return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
    }
  }
  return NULL;
}

static tf_status add_values(ox_import *im) {
  const Onnx__GraphProto *g = im->onnx;
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->name || !*t->name)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: initializer %zu has no name", im->source, i);
    if (ox_value_find(im, t->name))
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: two initializers are named '%s'", im->source, t->name);
    ox_value *v = ox_value_get(im, t->name);
    if (!v)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: no memory", im->source);
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
        t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
        t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16) {
      v->initializer = t;
    } else {
      char what[512];
      snprintf(what, sizeof(what), "%s: initializer '%s'", im->source, t->name);
      TF_RETURN_IF_ERROR(ox_known_from_tensor(t, what, &v->known));
    }
  }
  for (size_t i = 0; i < g->n_input; i++) {
    ox_value *v = g->input[i]->name ? ox_value_find(im, g->input[i]->name) : NULL;
    if (!v || (!v->initializer && !v->known)) /* IR < 4 lists initializers as inputs too */
      TF_RETURN_IF_ERROR(add_input(im, g->input[i]));
  }
  return NULL;
}

/* PyTorch's F.l1_loss (reduction "mean"): the mean of |output - label| over every element, in f32
 * (a half output widened first). */
static tf_tensor_id l1_loss(tf_graph *g, tf_tensor_id output, tf_tensor_id label) {
  tf_tensor_info info;
  if (tf_graph_tensor(g, output, &info) && info.dtype != TF_F32)
    output = tf_cast(g, output, TF_F32);
  return tf_reduce(g, TF_OP_MEAN, tf_unary(g, TF_OP_ABS, tf_sub(g, output, label)), NULL, 0, false);
}

/* A declared float64 output: tightfit computes no float64, so it would come out as f32. */
static tf_status check_output_type(const ox_import *im, const Onnx__ValueInfoProto *info) {
  const Onnx__TypeProto *type = info->type;
  if (!type || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !type->tensor_type ||
      type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
    return NULL;
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "%s: output '%s' is DOUBLE: tightfit computes in f32 at most, so it would "
                       "come out as FLOAT",
                       im->source, info->name ? info->name : "?");
}

/* An output that no node computes (an Identity or a Cast to its own dtype of an input, a Constant):
 * a copy of it, so the plan has a result of the output's own name for `run --output` to write. */
static tf_tensor_id output_copy(ox_import *im, tf_tensor_id id) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, id, &rank, dims);
  return rank < 0 ? id : tf_reshape(im->graph, id, tf_shape_from(dims, rank));
}

/* --loss output: the first output is the model's loss already; it must be a scalar. */
static tf_status output_loss(ox_import *im, tf_tensor_id first) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, first, &rank, dims);
  tf_tensor_info info;
  const char *name = tf_graph_tensor(im->graph, first, &info) ? info.name : "?";
  if (rank != 0)
    return tf_status_new(TF_ERR_SHAPE,
                         "%s: --loss output: the first output '%s' has rank %" PRId32 ", not a scalar loss; export "
                         "the model's loss (a 0-d tensor) as its first output, or name the loss to add (--loss ctc, "
                         "cross_entropy, ...)",
                         im->source, name, rank);
  tf_graph_set_loss(im->graph, first);
  tf_status status = ox_graph_error(im, NULL);
  return status ? tf_status_prefix(status, "--loss output: output '%s'", name) : NULL;
}

/* --loss ctc: the first output is per-frame logits [N, T, C] (log_softmax applied by ctc_loss, so
 * log-probabilities do too); labels [N, S], S = label_length or T, targets padded with negatives. */
static tf_status ctc_loss(ox_import *im, tf_tensor_id first, int32_t rank, const tf_dim *dims) {
  if (rank != 3)
    return tf_status_new(TF_ERR_SHAPE,
                         "%s: --loss ctc needs an output of rank 3, [N, T, C] (batch, frames, classes); the first "
                         "output has rank %" PRId32,
                         im->source, rank);
  for (int32_t i = 0; i < 2; i++)
    if (dims[i].size == -1 && dims[i].symbol < 0)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: the output's axis %" PRId32 " is a product of symbols, so the labels' shape cannot "
                           "be named",
                           im->source, i);
  tf_dim label_dims[2] = {dims[0], dims[1]};
  if (im->options->label_length > 0)
    label_dims[1] = tf_fixed(im->options->label_length);
  const char *label_name = im->options->label_name ? im->options->label_name : "labels";
  tf_tensor_id label = tf_graph_label(im->graph, label_name, TF_I64, tf_shape_from(label_dims, 2));
  tf_graph_set_loss(im->graph, tf_ctc_loss(im->graph, first, label, TF_NO_TENSOR, 0, false));
  tf_status status = ox_graph_error(im, NULL);
  return status ? tf_status_prefix(status, "adding the ctc loss") : NULL;
}

/* An error when an axis below `rank` of the (first) output that ox_tensor_dims read as a fixed size
 * changes with a symbol: a length a strided convolution or pooling made of a dynamic one ((T - k) / s
 * + 1), which no label shape can name. Found by binding each symbol to another prime in turn, on a
 * copy (shapes that do not hold at the other value leave the import's graph as it was). */
static tf_status check_label_axes(ox_import *im, tf_tensor_id first, int32_t rank, const tf_dim *dims) {
  for (int32_t s = 0; s < im->n_symbols; s++) {
    const char *name;
    int64_t default_value, value;
    if (!tf_graph_symbol_at(im->graph, s, &name, &default_value, &value))
      continue;
    tf_graph *copy;
    TF_RETURN_IF_ERROR(tf_ir_copy(im->graph, &copy));
    tf_status status = tf_graph_bind(copy, name, ox_symbol_prime((s + 1) % OX_MAX_SYMBOLS));
    if (!status)
      status = tf_graph_infer_shapes(copy);
    tf_tensor_info info;
    int32_t moved = -1;
    if (!status && tf_graph_tensor(copy, first, &info))
      for (int32_t i = 0; i < rank && i < info.rank && moved < 0; i++)
        if (dims[i].symbol < 0 && dims[i].size >= 0 && info.shape[i] != dims[i].size)
          moved = i;
    tf_status_free(status); /* shapes that do not hold at the other value: nothing to learn there */
    tf_graph_destroy(copy);
    if (moved >= 0)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: the output's axis %" PRId32 " is a length computed from the dynamic axis '%s' (a "
                           "strided convolution or pooling over it, (%s - k) / stride + 1), so the label's shape "
                           "cannot be named: export with '%s' fixed (leave it out of dynamic_axes), or use a loss "
                           "whose labels do not follow that axis (--loss ctc, --loss output)",
                           im->source, moved, name, name, name);
  }
  return NULL;
}

static tf_status add_outputs_and_loss(ox_import *im) {
  const Onnx__GraphProto *g = im->onnx;
  if (g->n_output == 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: the graph has no outputs", im->source);
  tf_tensor_id first = TF_NO_TENSOR;
  for (size_t i = 0; i < g->n_output; i++) {
    const char *name = g->output[i]->name;
    TF_RETURN_IF_ERROR(check_output_type(im, g->output[i]));
    tf_tensor_id id;
    TF_RETURN_IF_ERROR(ox_tensor(im, NULL, name ? name : "", &id));
    tf_tensor_info info;
    if (name && tf_graph_tensor(im->graph, id, &info) && info.kind != TF_ACTIVATION && strcmp(info.name, name) != 0) {
      id = output_copy(im, id);
      TF_RETURN_IF_ERROR(ox_graph_error(im, NULL));
    }
    if (name && tf_graph_tensor(im->graph, id, &info) && info.kind == TF_ACTIVATION && strcmp(info.name, name) != 0 &&
        tf_graph_find_tensor(im->graph, name) == TF_NO_TENSOR)
      tf_graph_rename(im->graph, id, name);
    tf_graph_add_output(im->graph, id);
    if (first == TF_NO_TENSOR)
      first = id;
  }
  TF_RETURN_IF_ERROR(ox_graph_error(im, NULL));
  tf_onnx_loss loss = im->options->loss;
  if (loss == TF_ONNX_LOSS_NONE)
    return NULL;
  if (loss == TF_ONNX_LOSS_OUTPUT)
    return output_loss(im, first);
  int32_t rank;
  tf_dim dims[TF_MAX_RANK];
  ox_tensor_dims(im, first, &rank, dims);
  if (loss == TF_ONNX_LOSS_CTC)
    return ctc_loss(im, first, rank, dims);
  if (loss == TF_ONNX_LOSS_CROSS_ENTROPY)
    rank--;
  for (int32_t i = 0; i < rank; i++)
    if (dims[i].size == -1 && dims[i].symbol < 0)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: the output's axis %" PRId32 " is a product of symbols, so the "
                           "label's shape cannot be named",
                           im->source, i);
  if (rank < 0)
    return tf_status_new(TF_ERR_SHAPE, "%s: cross_entropy needs an output of rank 1 or more", im->source);
  TF_RETURN_IF_ERROR(check_label_axes(im, first, rank, dims));
  const char *label_name = im->options->label_name ? im->options->label_name : "labels";
  tf_tensor_id label = tf_graph_label(im->graph, label_name, loss == TF_ONNX_LOSS_CROSS_ENTROPY ? TF_I64 : TF_F32,
                                      tf_shape_from(dims, rank));
  tf_tensor_id value = loss == TF_ONNX_LOSS_CROSS_ENTROPY
                           ? tf_cross_entropy(im->graph, first, label, im->options->ignore_index)
                       : loss == TF_ONNX_LOSS_MSE ? tf_mse(im->graph, first, label)
                       : loss == TF_ONNX_LOSS_L1  ? l1_loss(im->graph, first, label)
                                                  : tf_bce_with_logits(im->graph, first, label);
  tf_graph_set_loss(im->graph, value);
  tf_status status = ox_graph_error(im, NULL);
  return status ? tf_status_prefix(status, "adding the %s loss", tf_onnx_loss_name(loss)) : NULL;
}

static tf_status write_weights(ox_import *im, const char *path) {
  tf_safetensors_writer *writer;
  TF_RETURN_IF_ERROR(tf_safetensors_writer_create(&writer));
  tf_safetensors_writer_add_checksums(writer); /* a damaged weights file is refused where it is read */
  tf_status status = NULL;
  for (int32_t i = 0; i < im->n_weights && !status; i++) {
    const ox_weight *w = &im->weights[i];
    status = tf_safetensors_writer_add(writer, w->name, w->dtype, w->rank, w->shape, w->data);
  }
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "source", im->source);
  if (!status)
    status = tf_safetensors_writer_write(writer, path);
  tf_safetensors_writer_destroy(writer);
  return status ? tf_status_prefix(status, "writing the weights of %s", im->source) : NULL;
}

static tf_status import_model(ox_import *im) {
  TF_RETURN_IF_ERROR(check_model(im));
  const char *name = im->options->graph_name             ? im->options->graph_name
                     : im->onnx->name && *im->onnx->name ? im->onnx->name
                                                         : "onnx";
  TF_RETURN_IF_ERROR(tf_graph_create(name, &im->graph));
  TF_RETURN_IF_ERROR(collect_nodes(im));
  TF_RETURN_IF_ERROR(add_values(im));
  ox_rewrite_patterns(im);
  ox_mark_live(im);
  TF_RETURN_IF_ERROR(check_operators(im));
  for (int32_t i = 0; i < im->n_nodes; i++) {
    ox_node *node = &im->nodes[i];
    if (!node->live)
      continue;
    char scope[512];
    snprintf(scope, sizeof(scope), "%s", node->proto->name && *node->proto->name ? node->proto->name : "");
    tf_graph_set_scope(im->graph, scope[0] ? scope : NULL);
    TF_RETURN_IF_ERROR(ox_op_emit(im, node));
  }
  tf_graph_set_scope(im->graph, NULL);
  TF_RETURN_IF_ERROR(add_outputs_and_loss(im));
  // Back from the import-time primes to the symbols' defaults.
  for (int32_t s = 0; s < im->graph->n_symbols; s++) {
    im->graph->symbols[s].value = im->graph->symbols[s].default_value;
    im->graph->symbols[s].bound = false;
  }
  tf_status status = tf_graph_infer_shapes(im->graph);
  return status ? tf_status_prefix(status, "%s: the imported graph at the symbols' defaults", im->source) : NULL;
}

static void release(ox_import *im) {
  for (int32_t i = 0; i < im->n_values; i++)
    ox_known_free(im->values[i].known);
  free(im->values);
  for (int32_t i = 0; i < im->n_weights; i++)
    free(im->weights[i].owned);
  free(im->weights);
  for (int32_t i = 0; i < im->owned_names.capacity; i++)
    if (im->owned_names.keys && im->owned_names.keys[i])
      free((char *)im->owned_names.keys[i]);
  tf_strmap_clear(&im->owned_names);
  tf_strmap_clear(&im->value_ids);
  tf_strmap_clear(&im->producers);
  free(im->nodes);
  if (im->model)
    onnx__model_proto__free_unpacked(im->model, NULL);
}

/* The last component of `path`. */
static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static tf_status import_bytes(const void *data, size_t size, const char *source, const tf_onnx_options *options,
                              const char *weights_path, tf_graph **out) {
  *out = NULL;
  tf_onnx_options defaults = tf_onnx_options_default();
  ox_import im;
  memset(&im, 0, sizeof(im));
  im.source = source;
  im.options = options ? options : &defaults;
  im.weights_ref = im.options->weights_ref ? im.options->weights_ref
                   : weights_path          ? base_name(weights_path)
                                           : "weights.safetensors";
  im.model = onnx__model_proto__unpack(NULL, size, data);
  tf_status status = NULL;
  if (!im.model)
    status = tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: not an ONNX model: the protobuf does not decode (%zu bytes; truncated, or not "
                           "protobuf)",
                           source, size);
  if (!status)
    status = import_model(&im);
  if (!status && weights_path && im.n_weights > 0)
    status = write_weights(&im, weights_path);
  if (status) {
    tf_graph_destroy(im.graph);
    im.graph = NULL;
  }
  *out = im.graph;
  release(&im);
  return status;
}

tf_status tf_onnx_import_bytes(const void *data, size_t size, const char *source, const tf_onnx_options *options,
                               tf_graph **out) {
  return import_bytes(data, size, source ? source : "onnx", options, options ? options->weights_path : NULL, out);
}

tf_status tf_onnx_import(const char *onnx_path, const tf_onnx_options *options, tf_graph **out) {
  *out = NULL;
  if (!onnx_path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_onnx_import: no path");
  void *data;
  size_t size;
  TF_RETURN_IF_ERROR(tf_file_read_bounded(onnx_path, OX_MAX_FILE_BYTES, "ONNX files", &data, &size));
  char derived[4096];
  const char *weights_path = options ? options->weights_path : NULL;
  if (!weights_path) {
    size_t length = strlen(onnx_path);
    bool has_ext = length > 5 && strcmp(onnx_path + length - 5, ".onnx") == 0;
    snprintf(derived, sizeof(derived), "%.*s.safetensors", (int)(has_ext ? length - 5 : length), onnx_path);
    weights_path = derived;
  }
  tf_status status = import_bytes(data, size, onnx_path, options, weights_path, out);
  free(data);
  return status;
}
