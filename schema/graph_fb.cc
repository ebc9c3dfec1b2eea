// The .tfg format: flatc's generated C++ for schema/graph.fbs, wrapped behind the C API of
// schema/graph_fb.h. Decoding is structural only (see the header); values are copied as written.
//
// Two C++ hazards shape this file. (1) A file may hold any byte where the C enums (tf_dtype, tf_op,
// ...) expect a listed value; in C++ an enum object outside its enumerators' range is undefined,
// and UBSan traps loading one. So enum fields of the C structs are written and read through
// memcpy as their int storage (store_enum/load_enum), never as enum values. (2) No exception may
// reach C: each API function catches everything and turns it into a tf_status (guarded).
// The helpers for both, and the Attrs union that plans share, live in schema/attrs_fb.cc; what
// both formats do with a whole file (checks, JSON) in schema/fb_file.cc.
#include "schema/graph_fb.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graph_generated.h"   // flatc --cpp schema/graph.fbs, in the build tree
#include "graph_schema_text.h" // tf_graph_schema_text[]: graph.fbs itself, embedded at build time
#include "schema/attrs_fb.h"
#include "schema/fb_file.h"

using namespace tightfit::schema;

namespace {

// ---- the schema mirrors graph.h: each schema value equals its C value ----

// clang-format off
#define SAME(fb_value, c_value) \
  static_assert(static_cast<int>(fb::fb_value) == static_cast<int>(c_value), #fb_value " must equal " #c_value);
SAME(DType_f32, TF_F32) SAME(DType_f16, TF_F16) SAME(DType_bf16, TF_BF16) SAME(DType_i32, TF_I32)
SAME(DType_i64, TF_I64) SAME(DType_u8, TF_U8) SAME(DType_MAX, TF_DTYPE_COUNT - 1)
SAME(TensorKind_input, TF_INPUT) SAME(TensorKind_label, TF_LABEL) SAME(TensorKind_parameter, TF_PARAMETER)
SAME(TensorKind_constant, TF_CONSTANT) SAME(TensorKind_activation, TF_ACTIVATION)
SAME(TensorKind_MAX, TF_KIND_COUNT - 1)
SAME(InitKind_none, TF_INIT_NONE) SAME(InitKind_zeros, TF_INIT_ZEROS) SAME(InitKind_ones, TF_INIT_ONES)
SAME(InitKind_normal, TF_INIT_NORMAL) SAME(InitKind_uniform, TF_INIT_UNIFORM)
SAME(InitKind_xavier_uniform, TF_INIT_XAVIER_UNIFORM) SAME(InitKind_kaiming_normal, TF_INIT_KAIMING_NORMAL)
SAME(InitKind_arange, TF_INIT_ARANGE) SAME(InitKind_external, TF_INIT_EXTERNAL) SAME(InitKind_fill, TF_INIT_FILL)
SAME(InitKind_MAX, TF_INIT_COUNT - 1)
// Every row of the op table (core/op_table.h) has its Op value, and Op ends with the last row.
#define SAME_OP(ID, name, ...) SAME(Op_##name, TF_OP_##ID)
TF_OP_TABLE(SAME_OP)
#undef SAME_OP
SAME(Op_MAX, TF_OP_COUNT - 1)
SAME(Attrs_NONE, TF_ATTR_NONE) SAME(Attrs_MatmulAttrs, TF_ATTR_MATMUL) SAME(Attrs_ReduceAttrs, TF_ATTR_REDUCE)
SAME(Attrs_AxisAttrs, TF_ATTR_AXIS) SAME(Attrs_NormAttrs, TF_ATTR_NORM) SAME(Attrs_ShapeAttrs, TF_ATTR_SHAPE)
SAME(Attrs_TransposeAttrs, TF_ATTR_TRANSPOSE) SAME(Attrs_SliceAttrs, TF_ATTR_SLICE)
SAME(Attrs_ConvAttrs, TF_ATTR_CONV) SAME(Attrs_PoolAttrs, TF_ATTR_POOL) SAME(Attrs_DropoutAttrs, TF_ATTR_DROPOUT)
SAME(Attrs_AttentionAttrs, TF_ATTR_ATTENTION) SAME(Attrs_CastAttrs, TF_ATTR_CAST) SAME(Attrs_GeluAttrs, TF_ATTR_GELU)
SAME(Attrs_CrossEntropyAttrs, TF_ATTR_CROSS_ENTROPY) SAME(Attrs_OptimizerAttrs, TF_ATTR_OPTIMIZER)
SAME(Attrs_LeakyReluAttrs, TF_ATTR_LEAKY_RELU) SAME(Attrs_CtcAttrs, TF_ATTR_CTC)
SAME(Attrs_ClipAttrs, TF_ATTR_CLIP)
SAME(Attrs_MAX, TF_ATTR_COUNT - 1)
SAME(Optimizer_none, TF_OPTIMIZER_NONE) SAME(Optimizer_sgd, TF_OPTIMIZER_SGD) SAME(Optimizer_adamw, TF_OPTIMIZER_ADAMW)
SAME(Optimizer_adamw8bit, TF_OPTIMIZER_ADAMW8BIT)
SAME(Precision_f32, TF_PRECISION_F32) SAME(Precision_bf16, TF_PRECISION_BF16) SAME(Precision_f16, TF_PRECISION_F16)
SAME(Precision_MAX, TF_PRECISION_F16)
// A node without an override has no Node.precision (a null optional scalar): inherit is no stored value.
static_assert(TF_PRECISION_INHERIT < 0, "TF_PRECISION_INHERIT must not be a stored Precision value");
#undef SAME
// clang-format on

// ---- the file format ----

// The Verifier only says yes or no. After a no, this walk looks for the one refusal worth naming,
// a symbol, tensor or node without its required name; each step is guarded by the Verifier's own
// checks. Returns "" when the bytes are broken in another way.
std::string find_nameless(flatbuffers::Verifier &verifier, const uint8_t *bytes, const flatbuffers::Table *graph,
                          flatbuffers::voffset_t field, flatbuffers::voffset_t name_field, const char *what) {
  if (!graph->VerifyOffset(verifier, field))
    return "";
  auto tables = graph->GetPointer<const Vector<Offset<flatbuffers::Table>> *>(field);
  if (!tables || !verifier.VerifyVector(tables))
    return "";
  for (uoffset_t i = 0; i < tables->size(); i++) {
    size_t slot = static_cast<size_t>(tables->Data() - bytes) + i * sizeof(uoffset_t);
    uoffset_t offset = verifier.VerifyOffset(slot);
    if (!offset)
      return "";
    auto table = reinterpret_cast<const flatbuffers::Table *>(bytes + slot + offset);
    if (!table->VerifyTableStart(verifier))
      return "";
    verifier.EndTable();
    if (table->GetOptionalFieldOffset(name_field) == 0)
      return std::string(what) + " " + std::to_string(i) + " has no name (a required field)";
  }
  return "";
}

std::string find_missing_name(const uint8_t *bytes, size_t size) {
  flatbuffers::Verifier verifier(bytes, size, verifier_options());
  uoffset_t root = verifier.VerifyOffset(0);
  if (!root)
    return "";
  auto graph = reinterpret_cast<const flatbuffers::Table *>(bytes + root);
  if (!graph->VerifyTableStart(verifier))
    return "";
  std::string found = find_nameless(verifier, bytes, graph, fb::Graph::VT_SYMBOLS, fb::Symbol::VT_NAME, "symbol");
  if (found.empty())
    found = find_nameless(verifier, bytes, graph, fb::Graph::VT_TENSORS, fb::Tensor::VT_NAME, "tensor");
  if (found.empty())
    found = find_nameless(verifier, bytes, graph, fb::Graph::VT_NODES, fb::Node::VT_NAME, "node");
  return found;
}

// What the Verifier lets through but flatc's printer cannot take: misaligned Dim vectors (see
// dims_aligned) and attribute unions it cannot print (check_attrs_printable).
tf_status check_printable(const uint8_t *bytes) {
  const fb::Graph *root = fb::GetGraph(bytes);
  const Vector<Offset<fb::Tensor>> *tensors = root->tensors();
  for (uoffset_t i = 0; tensors && i < tensors->size(); i++)
    if (!dims_aligned(tensors->Get(i)->shape()))
      return tf_status_new(TF_ERR_INVALID_INPUT, "tensor %u %s: misaligned vector of dimensions (corrupt FlatBuffer)",
                           i, quoted(tensors->Get(i)->name()).c_str());
  return check_attrs_printable(root->nodes(), "node");
}

// clang-format off
const FileFormat kGraphFile = {
    "graph", "graph (.tfg)", fb::GraphIdentifier(),           // noun, description, identifier
    "schema version", "Graph.version", TF_SCHEMA_VERSION,      // the version field
    "schema/graph.fbs", tf_graph_schema_text,                  // for flatc's JSON printer
    fb::VerifyGraphBuffer, find_missing_name, check_printable, // verify, explain_refusal, check_printable
};
// clang-format on

// ---- decode: FlatBuffer -> sink ----

class Decoder {
public:
  Decoder(const char *source, const tf_graph_fb_sink *sink) : source_(source), sink_(sink) {}

  tf_status symbols(const Vector<Offset<fb::Symbol>> *symbols) {
    return decode_each(symbols, source_, "symbol", [&](const fb::Symbol *symbol, uoffset_t) {
      TF_RETURN_IF_ERROR(check_string(symbol->name(), "name"));
      return sink_->symbol(sink_->context, symbol->name()->c_str(), symbol->default_value());
    });
  }

  tf_status tensors(const Vector<Offset<fb::Tensor>> *tensors) {
    return decode_each(tensors, source_, "tensor",
                       [&](const fb::Tensor *tensor, uoffset_t) { return tensor_at(tensor); });
  }

  tf_status nodes(const Vector<Offset<fb::Node>> *nodes) {
    return decode_each(nodes, source_, "node", [&](const fb::Node *node, uoffset_t) { return node_at(node); });
  }

private:
  tf_status tensor_at(const fb::Tensor *tensor) {
    tf_shape declared{};
    if (tensor->shape())
      TF_RETURN_IF_ERROR(read_dims(tensor->shape(), "shape", &declared));
    tf_init init{};
    const fb::Initializer *initializer = tensor->init();
    if (initializer) {
      store_enum(&init.kind, initializer->kind());
      init.a = initializer->a();
      init.b = initializer->b();
      TF_RETURN_IF_ERROR(check_string(initializer->file(), "init.file"));
      TF_RETURN_IF_ERROR(check_string(initializer->key(), "init.key"));
      init.file = initializer->file() ? initializer->file()->c_str() : nullptr;
      init.key = initializer->key() ? initializer->key()->c_str() : nullptr;
    }
    TF_RETURN_IF_ERROR(check_string(tensor->name(), "name"));
    tf_graph_fb_tensor item{};
    item.name = tensor->name()->c_str();
    store_enum(&item.dtype, tensor->dtype());
    store_enum(&item.kind, tensor->kind());
    item.shape = tensor->shape() ? &declared : nullptr;
    item.init = initializer ? &init : nullptr;
    item.frozen = !tensor->trainable();
    return sink_->tensor(sink_->context, &item);
  }

  tf_status node_at(const fb::Node *node) {
    TF_RETURN_IF_ERROR(check_string(node->name(), "name"));
    uoffset_t n_outputs = node->outputs() ? node->outputs()->size() : 0;
    if (n_outputs != 1)
      return tf_status_new(TF_ERR_INVALID_INPUT, "has %u outputs; a node has exactly one in schema version %d",
                           n_outputs, TF_SCHEMA_VERSION);
    std::vector<int32_t> inputs;
    if (node->inputs())
      inputs.assign(node->inputs()->begin(), node->inputs()->end());
    tf_attrs attrs;
    TF_RETURN_IF_ERROR(read_attrs(node->attrs_type(), node->attrs(), &attrs));
    int32_t output = node->outputs()->Get(0);
    tf_graph_fb_node item{};
    item.name = node->name()->c_str();
    store_enum(&item.op, node->op());
    item.n_inputs = static_cast<int32_t>(inputs.size());
    item.inputs = inputs.data();
    item.n_outputs = 1;
    item.outputs = &output;
    item.attrs = &attrs;
    flatbuffers::Optional<fb::Precision> precision = node->precision();
    store_enum(&item.precision, precision ? static_cast<int32_t>(*precision) : TF_PRECISION_INHERIT);
    return sink_->node(sink_->context, &item);
  }

  const char *source_;
  const tf_graph_fb_sink *sink_;
};

tf_status decode(const void *data, size_t size, const char *source, const tf_graph_fb_sink *sink) {
  AlignedBytes aligned(data, size);
  TF_RETURN_IF_ERROR(check_file(data, size, aligned.bytes(), source, kGraphFile));
  const fb::Graph *root = fb::GetGraph(aligned.bytes());
  TF_RETURN_IF_ERROR(check_version(root->version(), source, kGraphFile));
  const flatbuffers::String *name = root->name();
  if (name && std::memchr(name->data(), '\0', name->size()))
    return fail(TF_ERR_INVALID_INPUT, source, "the graph name contains a NUL byte");

  TF_RETURN_IF_ERROR(sink->begin(sink->context, name ? name->c_str() : "", root->version()));
  Decoder decoder(source, sink);
  TF_RETURN_IF_ERROR(decoder.symbols(root->symbols()));
  TF_RETURN_IF_ERROR(decoder.tensors(root->tensors()));
  TF_RETURN_IF_ERROR(decoder.nodes(root->nodes()));
  for (uoffset_t i = 0; root->outputs() && i < root->outputs()->size(); i++)
    TF_RETURN_IF_ERROR(sink->output(sink->context, root->outputs()->Get(i)));
  tf_training_config training{};
  if (root->training())
    read_training(root->training(), &training);
  sink->finish(sink->context, root->loss(), root->training() ? &training : nullptr);
  return nullptr;
}

// ---- encode: source -> FlatBuffer ----

class Encoder : public EncoderBase<tf_graph_fb_source> {
public:
  explicit Encoder(const tf_graph_fb_source *graph) : EncoderBase(graph, graph->name) {}

  tf_status run(void **data, size_t *size) {
    std::vector<Offset<fb::Symbol>> symbols;
    for (int32_t i = 0; i < item_->n_symbols; i++) {
      const char *name = nullptr;
      int64_t default_value = 0;
      item_->symbol_at(item_->context, i, &name, &default_value);
      symbols.push_back(fb::CreateSymbol(fbb_, string(name), default_value));
    }
    std::vector<tf_graph_fb_tensor> tensor_items(static_cast<size_t>(item_->n_tensors));
    for (int32_t i = 0; i < item_->n_tensors; i++)
      item_->tensor_at(item_->context, i, &tensor_items[static_cast<size_t>(i)]);
    std::vector<Offset<fb::Tensor>> tensors;
    TF_RETURN_IF_ERROR(encode_each(
        tensor_items.data(), item_->n_tensors, "tensor",
        [&](const tf_graph_fb_tensor &tensor, Offset<fb::Tensor> *out) { return tensor_at(tensor, out); }, &tensors));
    std::vector<tf_graph_fb_node> node_items(static_cast<size_t>(item_->n_nodes));
    for (int32_t i = 0; i < item_->n_nodes; i++)
      item_->node_at(item_->context, i, &node_items[static_cast<size_t>(i)]);
    std::vector<Offset<fb::Node>> nodes;
    TF_RETURN_IF_ERROR(encode_each(
        node_items.data(), item_->n_nodes, "node",
        [&](const tf_graph_fb_node &node, Offset<fb::Node> *out) { return node_at(node, out); }, &nodes));
    Offset<fb::TrainingConfig> training;
    if (item_->training)
      TF_RETURN_IF_ERROR(write_training(fbb_, *item_->training, &training));
    auto outputs = fbb_.CreateVector(item_->outputs, static_cast<size_t>(item_->n_outputs));
    auto name = item_->name ? fbb_.CreateString(item_->name) : Offset<flatbuffers::String>();
    auto root = fb::CreateGraph(fbb_, TF_SCHEMA_VERSION, name, fbb_.CreateVector(symbols), fbb_.CreateVector(tensors),
                                fbb_.CreateVector(nodes), outputs, item_->loss, training);
    fb::FinishGraphBuffer(fbb_, root);
    return copy_finished(fbb_, kGraphFile, data, size);
  }

private:
  Offset<flatbuffers::String> string(const char *text) { return fbb_.CreateString(text ? text : ""); }

  tf_status tensor_at(const tf_graph_fb_tensor &tensor, Offset<fb::Tensor> *out) {
    uint32_t dtype = 0, kind = 0, init_kind = 0;
    TF_RETURN_IF_ERROR(fit_enum(load_enum(tensor.dtype), "dtype", 255, &dtype));
    TF_RETURN_IF_ERROR(fit_enum(load_enum(tensor.kind), "kind", 255, &kind));
    if (tensor.init)
      TF_RETURN_IF_ERROR(fit_enum(load_enum(tensor.init->kind), "init kind", 255, &init_kind));
    Offset<Vector<const fb::Dim *>> shape;
    if (tensor.shape) { // activations have no declared shape
      TF_RETURN_IF_ERROR(check_rank(tensor.shape->rank, "the declared shape"));
      shape = write_dims(fbb_, *tensor.shape);
    }
    Offset<fb::Initializer> init;
    const tf_init *given = tensor.init;
    if (given && (init_kind != fb::InitKind_none || given->a != 0 || given->b != 0 || given->file || given->key)) {
      auto file = given->file ? fbb_.CreateString(given->file) : Offset<flatbuffers::String>();
      auto key = given->key ? fbb_.CreateString(given->key) : Offset<flatbuffers::String>();
      init = fb::CreateInitializer(fbb_, static_cast<fb::InitKind>(init_kind), given->a, given->b, file, key);
    }
    *out = fb::CreateTensor(fbb_, string(tensor.name), static_cast<fb::DType>(dtype), static_cast<fb::TensorKind>(kind),
                            shape, init, !tensor.frozen);
    return nullptr;
  }

  tf_status node_at(const tf_graph_fb_node &node, Offset<fb::Node> *out) {
    uint32_t op = 0;
    TF_RETURN_IF_ERROR(fit_enum(load_enum(node.op), "op", 0xffff, &op));
    if (node.n_inputs < 0 || (node.n_inputs > 0 && !node.inputs))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "has %d inputs", node.n_inputs);
    fb::Attrs kind = fb::Attrs_NONE;
    Offset<void> attrs;
    TF_RETURN_IF_ERROR(write_attrs(fbb_, *node.attrs, &kind, &attrs));
    // No override writes no field, so a graph without overrides encodes as it did before they existed.
    flatbuffers::Optional<fb::Precision> precision = flatbuffers::nullopt;
    if (load_enum(node.precision) != TF_PRECISION_INHERIT) {
      uint32_t value = 0;
      TF_RETURN_IF_ERROR(fit_enum(load_enum(node.precision), "precision override", 255, &value));
      precision = static_cast<fb::Precision>(value);
    }
    auto inputs = fbb_.CreateVector(node.inputs, static_cast<size_t>(node.n_inputs));
    auto outputs = fbb_.CreateVector(node.outputs, static_cast<size_t>(node.n_outputs));
    *out = fb::CreateNode(fbb_, string(node.name), static_cast<fb::Op>(op), inputs, outputs, kind, attrs, precision);
    return nullptr;
  }
};

} // namespace

extern "C" tf_status tf_graph_fb_decode(const void *data, size_t size, const char *source,
                                        const tf_graph_fb_sink *sink) {
  return decode_file(data, size, source, kGraphFile, sink, decode);
}

extern "C" tf_status tf_graph_fb_encode(const tf_graph_fb_source *graph, void **data, size_t *size) {
  return encode_file<Encoder>(graph, kGraphFile, data, size);
}

extern "C" tf_status tf_graph_fb_to_json(const void *data, size_t size, char **json) {
  return file_to_json(data, size, kGraphFile, json);
}
