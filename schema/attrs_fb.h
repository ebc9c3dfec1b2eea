// Pieces shared by the C++ glue of graph.fbs and plan.fbs (schema/graph_fb.cc, schema/plan_fb.cc):
// the Attrs union <-> tf_attrs, enums stored as raw integers, input bytes at an aligned address,
// messages that start with the input's name, and the guard that keeps exceptions out of C.
// C++ only, and internal to schema/: the C API is graph_fb.h and plan_fb.h.
#ifndef TIGHTFIT_SCHEMA_ATTRS_FB_H
#define TIGHTFIT_SCHEMA_ATTRS_FB_H

#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "graph_generated.h" // flatc --cpp schema/graph.fbs, in the build tree
#include "tightfit/status.h"
#include "tightfit/types.h"

namespace tightfit {
namespace schema {

// The names the schema glue writes unqualified (graph_fb.cc and plan_fb.cc see them through their
// `using namespace tightfit::schema`).
namespace fb = tightfit::fb;
using flatbuffers::Offset;
using flatbuffers::uoffset_t;
using flatbuffers::Vector;

constexpr size_t kHeaderBytes = 2 * sizeof(flatbuffers::uoffset_t); // root offset + file identifier

// ---- enums as raw integers ----
// A file may hold any byte where a C enum (tf_dtype, tf_op, ...) expects a listed value; in C++ an
// enum object outside its enumerators' range is undefined, and UBSan traps loading one. So enum
// fields of C structs are written and read through memcpy as their int storage, never as enums.

template <typename E> int32_t load_enum(const E &field) {
  static_assert(sizeof(E) == sizeof(int32_t), "C enums are int-sized");
  int32_t value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

template <typename E> void store_enum(E *field, int32_t value) {
  static_assert(sizeof(E) == sizeof(int32_t), "C enums are int-sized");
  std::memcpy(field, &value, sizeof value);
}

// ---- alignment ----
// FlatBuffers reads scalars in place. The 2.0.8 Verifier checks a vector's length field (4-byte
// aligned) but not the alignment of 8-byte elements (long, double, Dim); reading a misaligned one
// is undefined, so such a vector is refused. An empty one has nothing to read, and builders do
// not align it.
template <typename T> bool vector_aligned(const flatbuffers::Vector<T> *values) {
  return !values || values->size() == 0 || reinterpret_cast<uintptr_t>(values->Data()) % alignof(T) == 0;
}
inline bool dims_aligned(const flatbuffers::Vector<const fb::Dim *> *dims) {
  return !dims || dims->size() == 0 || reinterpret_cast<uintptr_t>(dims->Data()) % alignof(fb::Dim) == 0;
}

// The caller's bytes must lie at an address aligned for the widest scalar (8 bytes); a buffer
// that does not (a slice of a larger file, say) is copied. One too large for a FlatBuffer is not
// copied (nor read: the size check refuses it first).
class AlignedBytes {
public:
  AlignedBytes(const void *data, size_t size) {
    if (size == 0 || size >= FLATBUFFERS_MAX_BUFFER_SIZE ||
        reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) == 0) {
      bytes_ = static_cast<const uint8_t *>(data);
    } else {
      copy_.resize((size + sizeof(uint64_t) - 1) / sizeof(uint64_t));
      std::memcpy(copy_.data(), data, size);
      bytes_ = reinterpret_cast<const uint8_t *>(copy_.data());
    }
  }
  const uint8_t *bytes() const { return bytes_; }

private:
  std::vector<uint64_t> copy_;
  const uint8_t *bytes_;
};

// ---- messages ----

// A status whose message starts with "source: " (no prefix when source is NULL).
tf_status fail(tf_code code, const char *source, const char *fmt, ...) TF_PRINTF(3, 4);
// A name for messages: quoted, cut to a readable length.
std::string quoted(const char *name);
std::string quoted(const flatbuffers::String *name);
// The four identifier bytes after the root offset, as text; non-printable bytes as \xNN.
std::string identifier_text(const uint8_t *bytes);

// ---- reading ----

// Strings become C strings: an embedded NUL would silently cut them. `field` names it in the error.
tf_status check_string(const flatbuffers::String *text, const char *field);
// Copies at most `limit` ints into out (and their count into *count when not NULL).
tf_status read_ints(const flatbuffers::Vector<int32_t> *values, const char *field, int32_t limit, int32_t *out,
                    int32_t *count);
// Copies a vector of Dim (at most TF_MAX_RANK, aligned) into *shape.
tf_status read_dims(const flatbuffers::Vector<const fb::Dim *> *dims, const char *field, tf_shape *shape);

// Fills *out from a TrainingConfig table (enums copied as written).
void read_training(const fb::TrainingConfig *config, tf_training_config *out);

// Fills *attrs from a union member: `type` and its table (NULL when absent). Every byte of *attrs
// is set. An unknown type is kept as written, with no table, for the semantic checks to refuse.
tf_status read_attrs(fb::Attrs type, const void *table, tf_attrs *attrs);

// ---- writing ----

// Builds the union member for `attrs` in fbb: its type and table (a null offset for NONE). Values
// the format cannot hold (a kind or dtype out of range, too many axes) give TF_ERR_INVALID_ARGUMENT.
tf_status write_attrs(flatbuffers::FlatBufferBuilder &fbb, const tf_attrs &attrs, fb::Attrs *type,
                      flatbuffers::Offset<void> *table);
// Builds a TrainingConfig table; an optimizer or precision above 255 gives TF_ERR_INVALID_ARGUMENT.
tf_status write_training(flatbuffers::FlatBufferBuilder &fbb, const tf_training_config &config,
                         flatbuffers::Offset<fb::TrainingConfig> *out);
// Builds a vector of Dim from shape's first shape.rank dims (check_rank first).
flatbuffers::Offset<flatbuffers::Vector<const fb::Dim *>> write_dims(flatbuffers::FlatBufferBuilder &fbb,
                                                                     const tf_shape &shape);
// A rank must be 0..TF_MAX_RANK to be written; `field` names it in the error.
tf_status check_rank(int32_t rank, const char *field);
// An enum value must fit the schema's storage type: 0..max.
tf_status fit_enum(int32_t value, const char *field, uint32_t max, uint32_t *out);

// ---- the C boundary ----

// Runs `body`, turning any exception into a status: nothing thrown may cross into C.
template <typename Body> tf_status guarded(const char *what, Body body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: out of host memory", what);
  } catch (const std::exception &error) {
    return tf_status_new(TF_ERR_INTERNAL, "%s: unexpected C++ exception: %s", what, error.what());
  } catch (...) {
    return tf_status_new(TF_ERR_INTERNAL, "%s: unexpected C++ exception", what);
  }
}

} // namespace schema
} // namespace tightfit

#endif
