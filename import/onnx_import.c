/* tf_onnx_import, the importer's driver (import/stages.txt), runs the stages in order: decode the
 * protobuf and its nodes, add the inputs and initializers as values, rewrite the patterns, mark the
 * live nodes, list every unsupported operator at once, then convert the live nodes in order, add
 * the outputs and the loss, and write the initializers to the weights file only when the whole
 * graph was built. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "graph/ir.h"
#include "import/onnx_ops.h"
#include "import/onnx_patterns.h"
#include "runtime/safetensors.h"

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

/* Every live node's operator must have a converter: one message lists them all. */
static tf_status check_operators(ox_import *im) {
  const char *names[64], *domains[64];
  const char *first[64];
  int32_t counts[64], n = 0, total = 0;
  for (int32_t i = 0; i < im->n_nodes; i++) {
    const ox_node *node = &im->nodes[i];
    if (!node->live || node->fused != OX_PLAIN || ox_op_supported(node->proto->domain, node->proto->op_type))
      continue;
    const char *op = node->proto->op_type ? node->proto->op_type : "?";
    const char *domain = ox_default_domain(node->proto->domain) ? "" : node->proto->domain;
    int32_t j = 0;
    while (j < n && (strcmp(names[j], op) != 0 || strcmp(domains[j], domain) != 0))
      j++;
    if (j == n && n < 64) {
      names[n] = op;
      domains[n] = domain;
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
    used +=
        (size_t)snprintf(list + used, sizeof(list) - used, "%s%s%s%s (%" PRId32 " node%s, first '%s')", j ? ", " : "",
                         domains[j], *domains[j] ? "::" : "", names[j], counts[j], counts[j] == 1 ? "" : "s", first[j]);
  return tf_status_new(TF_ERR_UNSUPPORTED, "%s: %" PRId32 " node%s with unsupported operators: %s", im->source, total,
                       total == 1 ? "" : "s", list);
}

/* PyTorch's F.l1_loss (reduction "mean"): the mean of |output - label| over every element, in f32
 * (a half output widened first). */
static tf_tensor_id l1_loss(tf_graph *g, tf_tensor_id output, tf_tensor_id label) {
  tf_tensor_info info;
  if (tf_graph_tensor(g, output, &info) && info.dtype != TF_F32)
    output = tf_cast(g, output, TF_F32);
  return tf_reduce(g, TF_OP_MEAN, tf_unary(g, TF_OP_ABS, tf_sub(g, output, label)), NULL, 0, false);
}

/* A declared float64 output: tightfit computes no float64, so it would come out as f32 (unless the
 * options narrow float64). */
static tf_status check_output_type(const ox_import *im, const Onnx__ValueInfoProto *info) {
  const Onnx__TypeProto *type = info->type;
  if (im->options->narrow_float64 || !type || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !type->tensor_type || type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE)
    return NULL;
  return tf_status_new(TF_ERR_UNSUPPORTED,
                       "%s: output '%s' is DOUBLE: tightfit computes in f32 at most, so it would "
                       "come out as FLOAT (`tightfit import --narrow-float64` allows it)",
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

/* An output ONNX types BOOL that the importer computed as an f32 mask of 0s and 1s (And, Equal of
 * data): cast to u8, the type tightfit reads and writes bool data as; the output keeps its name. */
static tf_status bool_output(ox_import *im, const Onnx__ValueInfoProto *info, tf_tensor_id *id) {
  const Onnx__TypeProto *type = info->type;
  tf_tensor_info tensor;
  if (!type || type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !type->tensor_type ||
      type->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ||
      !tf_graph_tensor(im->graph, *id, &tensor) || tensor.dtype != TF_F32)
    return NULL;
  char mask[300];
  snprintf(mask, sizeof(mask), "%s.mask", tensor.name);
  if (tensor.kind == TF_ACTIVATION)
    tf_graph_rename(im->graph, *id, mask);
  *id = tf_cast(im->graph, *id, TF_U8);
  return ox_graph_error(im, NULL);
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
    if (name && ox_is_selected(ox_value_find(im, name)))
      return tf_status_new(TF_ERR_UNSUPPORTED, "%s: output '%s' is the positions or values of boolean indexing%s",
                           im->source, name, ox_selection_hint());
    const ox_value *v = name ? ox_value_find(im, name) : NULL;
    if (v && v->empty)
      return tf_status_new(TF_ERR_UNSUPPORTED,
                           "%s: output '%s' has no elements (a slice that selects nothing, or an elementwise op of "
                           "one): a graph's outputs must hold data",
                           im->source, name);
    tf_tensor_id id;
    TF_RETURN_IF_ERROR(ox_tensor(im, NULL, name ? name : "", &id));
    tf_tensor_info info;
    if (name && tf_graph_tensor(im->graph, id, &info) && info.kind != TF_ACTIVATION && strcmp(info.name, name) != 0) {
      id = output_copy(im, id);
      TF_RETURN_IF_ERROR(ox_graph_error(im, NULL));
    }
    TF_RETURN_IF_ERROR(bool_output(im, g->output[i], &id));
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

static tf_status import_model(ox_import *im, const void *data, size_t size) {
  TF_RETURN_IF_ERROR(ox_decode_model(im, data, size));
  const char *name = im->options->graph_name             ? im->options->graph_name
                     : im->onnx->name && *im->onnx->name ? im->onnx->name
                                                         : "onnx";
  TF_RETURN_IF_ERROR(tf_graph_create(name, &im->graph));
  TF_RETURN_IF_ERROR(ox_decode_nodes(im));
  TF_RETURN_IF_ERROR(ox_add_graph_values(im));
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
  for (int32_t i = 0; i < im->n_values; i++) {
    ox_known_free(im->values[i].known);
    free(im->values[i].empty);
  }
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
  im.file_bytes = (int64_t)size;
  im.options = options ? options : &defaults;
  im.weights_ref = im.options->weights_ref ? im.options->weights_ref
                   : weights_path          ? base_name(weights_path)
                                           : "weights.safetensors";
  tf_status status = import_model(&im, data, size);
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
