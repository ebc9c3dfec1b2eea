// Shared pieces of the schema glue (see attrs_fb.h): the Attrs union both file formats hold, and
// the small helpers graph_fb.cc and plan_fb.cc both need.
#include "schema/attrs_fb.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace tightfit {
namespace schema {

namespace {

constexpr int kPairEntries = 2; // conv/pool vectors: [height, width]

std::string vformat(const char *fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int length = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (length < 0)
    return fmt;
  std::string text(static_cast<size_t>(length) + 1, '\0');
  std::vsnprintf(&text[0], text.size(), fmt, args);
  text.resize(static_cast<size_t>(length));
  return text;
}

Offset<Vector<int32_t>> pair(flatbuffers::FlatBufferBuilder &fbb, const int32_t values[2]) {
  return fbb.CreateVector(values, kPairEntries);
}

} // namespace

// ---- messages ----

tf_status fail(tf_code code, const char *source, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string text = vformat(fmt, args);
  va_end(args);
  if (source)
    return tf_status_new(code, "%s: %s", source, text.c_str());
  return tf_status_new(code, "%s", text.c_str());
}

std::string quoted(const char *name) {
  std::string text = name ? name : "";
  if (text.size() > 80)
    text.replace(77, std::string::npos, "...");
  return "'" + text + "'";
}

std::string quoted(const flatbuffers::String *name) { return quoted(name ? name->c_str() : ""); }

std::string identifier_text(const uint8_t *bytes) {
  std::string text;
  for (int i = 0; i < 4; i++) {
    uint8_t c = bytes[sizeof(uoffset_t) + i];
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      text += static_cast<char>(c);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      text += escaped;
    }
  }
  return text;
}

// ---- reading ----

tf_status check_string(const flatbuffers::String *text, const char *field) {
  if (text && std::memchr(text->data(), '\0', text->size()))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s contains a NUL byte", field);
  return nullptr;
}

tf_status read_ints(const Vector<int32_t> *values, const char *field, int32_t limit, int32_t *out, int32_t *count) {
  uoffset_t n = values ? values->size() : 0;
  if (n > static_cast<uoffset_t>(limit))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s has %u entries; at most %d are allowed", field, n, limit);
  for (uoffset_t i = 0; i < n; i++)
    out[i] = values->Get(i);
  if (count)
    *count = static_cast<int32_t>(n);
  return nullptr;
}

tf_status read_dims(const Vector<const fb::Dim *> *dims, const char *field, tf_shape *shape) {
  if (!dims_aligned(dims))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: misaligned vector of dimensions (corrupt FlatBuffer)", field);
  if (dims->size() > TF_MAX_RANK)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s has %u dimensions; at most %d are allowed", field, dims->size(),
                         TF_MAX_RANK);
  shape->rank = static_cast<int32_t>(dims->size());
  for (uoffset_t d = 0; d < dims->size(); d++)
    shape->dims[d] = tf_dim{dims->Get(d)->size(), dims->Get(d)->symbol()};
  return nullptr;
}

void read_training(const fb::TrainingConfig *config, tf_training_config *out) {
  *out = tf_training_config{};
  store_enum(&out->optimizer, config->optimizer());
  out->learning_rate = config->learning_rate();
  out->momentum = config->momentum();
  out->beta1 = config->beta1();
  out->beta2 = config->beta2();
  out->epsilon = config->epsilon();
  out->weight_decay = config->weight_decay();
  out->clip_norm = config->clip_norm();
  out->global_batch = config->global_batch();
  out->accumulate_steps = config->accumulate_steps();
  store_enum(&out->precision, config->precision());
  out->loss_scale = config->loss_scale();
}

tf_status read_attrs(fb::Attrs type, const void *table, tf_attrs *attrs) {
  static const tf_attrs none{}; // static storage: every byte zero, padding included
  *attrs = none;
  store_enum(&attrs->kind, type);
  // An unknown type is kept as written for the semantic checks to refuse; it has no table here.
  if (type == fb::Attrs_NONE || type > fb::Attrs_MAX)
    return nullptr;
  if (!table)
    return tf_status_new(TF_ERR_INVALID_INPUT, "attrs_type is %s but the attribute table is missing",
                         fb::EnumNameAttrs(type));
  switch (type) {
  case fb::Attrs_MatmulAttrs: {
    auto t = static_cast<const fb::MatmulAttrs *>(table);
    attrs->u.matmul = tf_matmul_attrs{t->transpose_a(), t->transpose_b()};
    break;
  }
  case fb::Attrs_ReduceAttrs: {
    auto t = static_cast<const fb::ReduceAttrs *>(table);
    TF_RETURN_IF_ERROR(
        read_ints(t->axes(), "ReduceAttrs.axes", TF_MAX_RANK, attrs->u.reduce.axes, &attrs->u.reduce.n_axes));
    attrs->u.reduce.keepdims = t->keepdims();
    break;
  }
  case fb::Attrs_AxisAttrs: attrs->u.axis.axis = static_cast<const fb::AxisAttrs *>(table)->axis(); break;
  case fb::Attrs_NormAttrs:
    attrs->u.norm.epsilon = static_cast<const fb::NormAttrs *>(table)->epsilon();
    attrs->u.norm.momentum = static_cast<const fb::NormAttrs *>(table)->momentum();
    break;
  case fb::Attrs_ShapeAttrs: {
    auto shape = static_cast<const fb::ShapeAttrs *>(table)->shape();
    if (shape)
      TF_RETURN_IF_ERROR(read_dims(shape, "ShapeAttrs.shape", &attrs->u.shape.shape));
    break;
  }
  case fb::Attrs_TransposeAttrs:
    TF_RETURN_IF_ERROR(read_ints(static_cast<const fb::TransposeAttrs *>(table)->perm(), "TransposeAttrs.perm",
                                 TF_MAX_RANK, attrs->u.transpose.perm, &attrs->u.transpose.rank));
    break;
  case fb::Attrs_SliceAttrs: {
    auto t = static_cast<const fb::SliceAttrs *>(table);
    attrs->u.slice = tf_slice_attrs{t->axis(), t->start(), t->end(), t->step()};
    break;
  }
  case fb::Attrs_ConvAttrs: {
    auto t = static_cast<const fb::ConvAttrs *>(table);
    tf_conv_attrs *conv = &attrs->u.conv;
    TF_RETURN_IF_ERROR(read_ints(t->stride(), "ConvAttrs.stride", kPairEntries, conv->stride, nullptr));
    TF_RETURN_IF_ERROR(read_ints(t->padding(), "ConvAttrs.padding", kPairEntries, conv->padding, nullptr));
    TF_RETURN_IF_ERROR(read_ints(t->dilation(), "ConvAttrs.dilation", kPairEntries, conv->dilation, nullptr));
    TF_RETURN_IF_ERROR(
        read_ints(t->output_padding(), "ConvAttrs.output_padding", kPairEntries, conv->output_padding, nullptr));
    conv->groups = t->groups();
    break;
  }
  case fb::Attrs_PoolAttrs: {
    auto t = static_cast<const fb::PoolAttrs *>(table);
    tf_pool_attrs *pool = &attrs->u.pool;
    TF_RETURN_IF_ERROR(read_ints(t->kernel(), "PoolAttrs.kernel", kPairEntries, pool->kernel, nullptr));
    TF_RETURN_IF_ERROR(read_ints(t->stride(), "PoolAttrs.stride", kPairEntries, pool->stride, nullptr));
    TF_RETURN_IF_ERROR(read_ints(t->padding(), "PoolAttrs.padding", kPairEntries, pool->padding, nullptr));
    break;
  }
  case fb::Attrs_DropoutAttrs: {
    auto t = static_cast<const fb::DropoutAttrs *>(table);
    attrs->u.dropout = tf_dropout_attrs{t->rate(), t->seed()};
    break;
  }
  case fb::Attrs_AttentionAttrs: {
    auto t = static_cast<const fb::AttentionAttrs *>(table);
    attrs->u.attention = tf_attention_attrs{t->num_heads(), t->causal(), t->scale()};
    break;
  }
  case fb::Attrs_CastAttrs: store_enum(&attrs->u.cast.to, static_cast<const fb::CastAttrs *>(table)->to()); break;
  case fb::Attrs_GeluAttrs: attrs->u.gelu.approximate = static_cast<const fb::GeluAttrs *>(table)->approximate(); break;
  case fb::Attrs_CrossEntropyAttrs: {
    auto t = static_cast<const fb::CrossEntropyAttrs *>(table);
    attrs->u.cross_entropy = tf_cross_entropy_attrs{t->ignore_index(), t->transpose_weight(), t->chunk_rows()};
    break;
  }
  case fb::Attrs_OptimizerAttrs: {
    auto t = static_cast<const fb::OptimizerAttrs *>(table);
    attrs->u.optimizer = tf_optimizer_attrs{t->learning_rate(), t->momentum(),     t->beta1(),     t->beta2(),
                                            t->epsilon(),       t->weight_decay(), t->clip_norm(), t->grad_scale()};
    break;
  }
  case fb::Attrs_LeakyReluAttrs:
    attrs->u.leaky_relu.alpha = static_cast<const fb::LeakyReluAttrs *>(table)->alpha();
    break;
  case fb::Attrs_CtcAttrs: {
    auto t = static_cast<const fb::CtcAttrs *>(table);
    attrs->u.ctc = tf_ctc_attrs{t->blank(), t->zero_infinity()};
    break;
  }
  case fb::Attrs_ClipAttrs: {
    auto t = static_cast<const fb::ClipAttrs *>(table);
    attrs->u.clip = tf_clip_attrs{t->no_lo() ? -INFINITY : t->lo(), t->no_hi() ? INFINITY : t->hi()};
    break;
  }
  case fb::Attrs_NONE: break;
  }
  return nullptr;
}

// ---- writing ----

tf_status check_rank(int32_t rank, const char *field) {
  if (rank < 0 || rank > TF_MAX_RANK)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s has rank %d; it must be 0..%d", field, rank, TF_MAX_RANK);
  return nullptr;
}

Offset<Vector<const fb::Dim *>> write_dims(flatbuffers::FlatBufferBuilder &fbb, const tf_shape &shape) {
  std::vector<fb::Dim> dims;
  for (int32_t d = 0; d < shape.rank; d++)
    dims.emplace_back(shape.dims[d].size, shape.dims[d].symbol);
  return fbb.CreateVectorOfStructs(dims);
}

tf_status write_training(flatbuffers::FlatBufferBuilder &fbb, const tf_training_config &config,
                         Offset<fb::TrainingConfig> *out) {
  uint32_t optimizer = 0, precision = 0;
  TF_RETURN_IF_ERROR(fit_enum(load_enum(config.optimizer), "training optimizer", 255, &optimizer));
  TF_RETURN_IF_ERROR(fit_enum(load_enum(config.precision), "training precision", 255, &precision));
  *out = fb::CreateTrainingConfig(fbb, static_cast<fb::Optimizer>(optimizer), config.learning_rate, config.momentum,
                                  config.beta1, config.beta2, config.epsilon, config.weight_decay, config.clip_norm,
                                  config.global_batch, config.accumulate_steps, static_cast<fb::Precision>(precision),
                                  config.loss_scale);
  return nullptr;
}

tf_status fit_enum(int32_t value, const char *field, uint32_t max, uint32_t *out) {
  if (value < 0 || static_cast<uint32_t>(value) > max)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s %d does not fit the file format (0..%u)", field, value, max);
  *out = static_cast<uint32_t>(value);
  return nullptr;
}

tf_status write_attrs(flatbuffers::FlatBufferBuilder &fbb, const tf_attrs &attrs, fb::Attrs *type,
                      Offset<void> *table) {
  uint32_t kind = 0;
  TF_RETURN_IF_ERROR(fit_enum(load_enum(attrs.kind), "attribute kind", fb::Attrs_MAX, &kind));
  *type = static_cast<fb::Attrs>(kind);
  *table = Offset<void>();
  const auto &u = attrs.u;
  switch (*type) {
  case fb::Attrs_NONE: break;
  case fb::Attrs_MatmulAttrs:
    *table = fb::CreateMatmulAttrs(fbb, u.matmul.transpose_a, u.matmul.transpose_b).Union();
    break;
  case fb::Attrs_ReduceAttrs:
    TF_RETURN_IF_ERROR(check_rank(u.reduce.n_axes, "ReduceAttrs.axes"));
    *table = fb::CreateReduceAttrs(fbb, fbb.CreateVector(u.reduce.axes, static_cast<size_t>(u.reduce.n_axes)),
                                   u.reduce.keepdims)
                 .Union();
    break;
  case fb::Attrs_AxisAttrs: *table = fb::CreateAxisAttrs(fbb, u.axis.axis).Union(); break;
  case fb::Attrs_NormAttrs: *table = fb::CreateNormAttrs(fbb, u.norm.epsilon, u.norm.momentum).Union(); break;
  case fb::Attrs_ShapeAttrs:
    TF_RETURN_IF_ERROR(check_rank(u.shape.shape.rank, "ShapeAttrs.shape"));
    *table = fb::CreateShapeAttrs(fbb, write_dims(fbb, u.shape.shape)).Union();
    break;
  case fb::Attrs_TransposeAttrs:
    TF_RETURN_IF_ERROR(check_rank(u.transpose.rank, "TransposeAttrs.perm"));
    *table = fb::CreateTransposeAttrs(fbb, fbb.CreateVector(u.transpose.perm, static_cast<size_t>(u.transpose.rank)))
                 .Union();
    break;
  case fb::Attrs_SliceAttrs:
    *table = fb::CreateSliceAttrs(fbb, u.slice.axis, u.slice.start, u.slice.end, u.slice.step).Union();
    break;
  case fb::Attrs_ConvAttrs:
    *table = fb::CreateConvAttrs(fbb, pair(fbb, u.conv.stride), pair(fbb, u.conv.padding), pair(fbb, u.conv.dilation),
                                 pair(fbb, u.conv.output_padding), u.conv.groups)
                 .Union();
    break;
  case fb::Attrs_PoolAttrs:
    *table =
        fb::CreatePoolAttrs(fbb, pair(fbb, u.pool.kernel), pair(fbb, u.pool.stride), pair(fbb, u.pool.padding)).Union();
    break;
  case fb::Attrs_DropoutAttrs: *table = fb::CreateDropoutAttrs(fbb, u.dropout.rate, u.dropout.seed).Union(); break;
  case fb::Attrs_AttentionAttrs:
    *table = fb::CreateAttentionAttrs(fbb, u.attention.num_heads, u.attention.causal, u.attention.scale).Union();
    break;
  case fb::Attrs_CastAttrs: {
    uint32_t to = 0;
    TF_RETURN_IF_ERROR(fit_enum(load_enum(u.cast.to), "CastAttrs.to", 255, &to));
    *table = fb::CreateCastAttrs(fbb, static_cast<fb::DType>(to)).Union();
    break;
  }
  case fb::Attrs_GeluAttrs: *table = fb::CreateGeluAttrs(fbb, u.gelu.approximate).Union(); break;
  case fb::Attrs_CrossEntropyAttrs:
    *table = fb::CreateCrossEntropyAttrs(fbb, u.cross_entropy.ignore_index, u.cross_entropy.transpose_weight,
                                         u.cross_entropy.chunk_rows)
                 .Union();
    break;
  case fb::Attrs_OptimizerAttrs: {
    const tf_optimizer_attrs &o = u.optimizer;
    *table = fb::CreateOptimizerAttrs(fbb, o.learning_rate, o.momentum, o.beta1, o.beta2, o.epsilon, o.weight_decay,
                                      o.clip_norm, o.grad_scale)
                 .Union();
    break;
  }
  case fb::Attrs_LeakyReluAttrs: *table = fb::CreateLeakyReluAttrs(fbb, u.leaky_relu.alpha).Union(); break;
  case fb::Attrs_CtcAttrs: *table = fb::CreateCtcAttrs(fbb, u.ctc.blank, u.ctc.zero_infinity).Union(); break;
  case fb::Attrs_ClipAttrs: { // an absent bound as a flag: JSON has no infinities
    const bool no_lo = u.clip.lo == -INFINITY, no_hi = u.clip.hi == INFINITY;
    *table = fb::CreateClipAttrs(fbb, no_lo ? 0.0f : u.clip.lo, no_hi ? 0.0f : u.clip.hi, no_lo, no_hi).Union();
    break;
  }
  }
  return nullptr;
}

} // namespace schema
} // namespace tightfit
