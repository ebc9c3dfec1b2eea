// What the C++ glue of the two file formats (schema/graph_fb.cc, schema/plan_fb.cc) does the same
// way with a whole file: check its bytes before any accessor runs, name the item a decoder refuses,
// encode and decode the items of a table vector one by one, copy the built bytes out for C, and
// render a file as JSON with flatc's printer. What differs between the formats is data, a
// FileFormat. C++ only, and internal to schema/: the C API is graph_fb.h and plan_fb.h.
#ifndef TIGHTFIT_SCHEMA_FB_FILE_H
#define TIGHTFIT_SCHEMA_FB_FILE_H

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "schema/attrs_fb.h"

namespace tightfit {
namespace schema {

// One file format, as the shared checks and the JSON printer see it.
struct FileFormat {
  const char *noun;          // "graph" or "plan", in messages ("the graph file")
  const char *description;   // "graph (.tfg)", in "not a tightfit graph (.tfg) file"
  const char *identifier;    // the file identifier: "TFGR" or "TFPL"
  const char *version_name;  // "schema version" or "plan version", in messages
  const char *version_field; // "Graph.version" or "Plan.version", in messages
  int newest_version;        // the newest version this build reads
  const char *schema_file;   // "schema/graph.fbs", in messages
  const char *schema_text;   // that schema embedded as text (with what it includes), for flatc's printer
  bool (*verify)(flatbuffers::Verifier &verifier); // the generated Verify<Root>Buffer
  // After the Verifier refused the bytes: a more precise reason than "corrupt", or "" (may be NULL).
  std::string (*explain_refusal)(const uint8_t *bytes, size_t size);
  // What the Verifier lets through but flatc's printer cannot take (checked bytes, aligned).
  tf_status (*check_printable)(const uint8_t *bytes);
};

// ---- checking raw bytes ----

// The Verifier's limits: a file nests 4 deep (root, Node or Step, Attrs, vector); the table count
// bounds the work on hostile input (real files use far fewer).
flatbuffers::Verifier::Options verifier_options();

// Size, identifier and the Verifier: after this, every accessor of the generated code is safe
// (vectors of 8-byte scalars still need vector_aligned before they are read). `bytes` is `data`
// at an aligned address (AlignedBytes); messages start with `source` when it is not NULL.
tf_status check_file(const void *data, size_t size, const uint8_t *bytes, const char *source, const FileFormat &format);

// The root's version field: 0 (absent) or newer than this build reads is refused.
tf_status check_version(uint32_t version, const char *source, const FileFormat &format);

// ---- decoding ----

// Reports `status` (from a decoder or from the IR) as bad input in `source`, naming the `index`th
// `what` and its name when `what` is not NULL; frees `status`. Out of memory stays out of memory.
tf_status refuse(tf_status status, const char *source, const char *what = nullptr, flatbuffers::uoffset_t index = 0,
                 const flatbuffers::String *name = nullptr);

// Runs decode(table, index) on each table of `tables` (NULL reads as empty); the first failure is
// refused (see refuse) as the `index`th `what`.
template <typename Table, typename Decode>
tf_status decode_each(const flatbuffers::Vector<flatbuffers::Offset<Table>> *tables, const char *source,
                      const char *what, Decode decode) {
  for (flatbuffers::uoffset_t i = 0; tables && i < tables->size(); i++) {
    const Table *table = tables->Get(i);
    tf_status status = decode(table, i);
    if (status)
      return refuse(status, source, what, i, table->name());
  }
  return nullptr;
}

// ---- encoding ----

// What the encoders of both formats start from: the item they encode (a tf_graph_fb_source or a
// tf_plan), the name that messages give it, and a builder that writes every field, default or not,
// so that a dump shows every value as stored. A format's Encoder derives from it and adds
// run(data, size), which encode_file calls.
template <typename Item> class EncoderBase {
public:
  const char *name() const { return name_; }

protected:
  EncoderBase(const Item *item, const char *name) : item_(item), name_(name), fbb_(4096) { fbb_.ForceDefaults(true); }

  const Item *item_;
  const char *name_;
  flatbuffers::FlatBufferBuilder fbb_;
};

// Runs encode(item, &offset) on items[0..count) and appends the offsets to *out; the first failure
// is prefixed with the `i`th `what` and the item's name.
template <typename Item, typename Table, typename Encode>
tf_status encode_each(const Item *items, int32_t count, const char *what, Encode encode,
                      std::vector<flatbuffers::Offset<Table>> *out) {
  for (int32_t i = 0; i < count; i++) {
    flatbuffers::Offset<Table> table;
    tf_status status = encode(items[i], &table);
    if (status)
      return tf_status_prefix(status, "%s %d %s", what, i, quoted(items[i].name).c_str());
    out->push_back(table);
  }
  return nullptr;
}

// Copies the finished buffer of fbb into *data (*size bytes), which the caller frees with free().
tf_status copy_finished(const flatbuffers::FlatBufferBuilder &fbb, const FileFormat &format, void **data, size_t *size);

// ---- JSON ----

// Whether flatc's printer can show the Attrs union of every item of `items` (Nodes or Steps, each a
// `what`; NULL reads as empty): the printer reads the union's type from the field printed before
// the table, and asserts or fails when that type is absent or unknown; a ShapeAttrs table needs
// aligned dims. The first item it cannot show is refused, by index and name.
template <typename Item>
tf_status check_attrs_printable(const flatbuffers::Vector<flatbuffers::Offset<Item>> *items, const char *what) {
  for (flatbuffers::uoffset_t index = 0; items && index < items->size(); index++) {
    const Item *item = items->Get(index);
    if (!item->attrs())
      continue;
    auto table = reinterpret_cast<const flatbuffers::Table *>(item);
    bool has_type = table->GetOptionalFieldOffset(Item::VT_ATTRS_TYPE) != 0;
    if (!has_type || item->attrs_type() == fb::Attrs_NONE || item->attrs_type() > fb::Attrs_MAX)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s %u %s: an attribute table of unknown type %u (attrs_type %s); JSON cannot show it", what,
                           index, quoted(item->name()).c_str(), static_cast<unsigned>(item->attrs_type()),
                           has_type ? "out of range" : "absent");
    if (item->attrs_type() == fb::Attrs_ShapeAttrs && !dims_aligned(item->attrs_as_ShapeAttrs()->shape()))
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s %u %s: misaligned vector of dimensions (corrupt FlatBuffer)", what,
                           index, quoted(item->name()).c_str());
  }
  return nullptr;
}

// ---- the C entry points ----

// The body of tf_graph_fb_decode and tf_plan_fb_decode: checks `out` (what the decoded values go
// into), names the input (`source`, or "<memory>" when NULL) and runs decode(data, size, name, out)
// under guarded().
template <typename Target, typename Decode>
tf_status decode_file(const void *data, size_t size, const char *source, const FileFormat &format, Target *out,
                      Decode decode) {
  if (!out)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_%s_fb_decode: out is NULL", format.noun);
  const char *name = source ? source : "<memory>";
  return guarded(name, [&] { return decode(data, size, name, out); });
}

// The body of tf_graph_fb_encode and tf_plan_fb_encode: checks the arguments, then runs
// Encoder(item).run(data, size) under guarded(), naming the item (EncoderBase::name) in a failure.
template <typename Encoder, typename Item>
tf_status encode_file(const Item *item, const FileFormat &format, void **data, size_t *size) {
  if (!item || !data || !size)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_%s_fb_encode: %s, data and size must not be NULL", format.noun,
                         format.noun);
  *data = nullptr;
  *size = 0;
  char what[64];
  std::snprintf(what, sizeof what, "encoding the %s", format.noun);
  return guarded(what, [&] {
    Encoder encoder(item);
    tf_status status = encoder.run(data, size);
    return status ? tf_status_prefix(status, "encoding %s %s", format.noun, quoted(encoder.name()).c_str()) : nullptr;
  });
}

// The body of tf_graph_fb_to_json and tf_plan_fb_to_json: verifies the `size` bytes at `data` as
// `format` and renders them as JSON (see graph_fb.h) into *json, which the caller frees with free().
// Nothing thrown escapes (guarded).
tf_status file_to_json(const void *data, size_t size, const FileFormat &format, char **json);

} // namespace schema
} // namespace tightfit

#endif
