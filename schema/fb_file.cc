// The file-level glue both formats share (see fb_file.h).
#include "schema/fb_file.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "flatbuffers/idl.h"

namespace tightfit {
namespace schema {

// ---- checking raw bytes ----

flatbuffers::Verifier::Options verifier_options() {
  flatbuffers::Verifier::Options options;
  options.max_depth = 64;
  options.max_tables = 1u << 24;
  return options;
}

tf_status check_file(const void *data, size_t size, const uint8_t *bytes, const char *source,
                     const FileFormat &format) {
  if (!data || size == 0)
    return fail(TF_ERR_INVALID_INPUT, source, "empty input: no bytes to read");
  if (size < kHeaderBytes)
    return fail(TF_ERR_INVALID_INPUT, source, "%zu bytes is too short for a FlatBuffer (its header alone is %zu bytes)",
                size, kHeaderBytes);
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return fail(TF_ERR_INVALID_INPUT, source, "%zu bytes is over the FlatBuffers limit of 2 GiB", size);
  if (!flatbuffers::BufferHasIdentifier(bytes, format.identifier))
    return fail(TF_ERR_INVALID_INPUT, source, "file identifier is '%s', expected '%s': not a tightfit %s file",
                identifier_text(bytes).c_str(), format.identifier, format.description);
  flatbuffers::Verifier verifier(bytes, size, verifier_options());
  if (!format.verify(verifier)) {
    std::string reason = format.explain_refusal ? format.explain_refusal(bytes, size) : "";
    if (!reason.empty())
      return fail(TF_ERR_INVALID_INPUT, source, "%s", reason.c_str());
    return fail(TF_ERR_INVALID_INPUT, source,
                "corrupt or truncated FlatBuffer (%zu bytes): the FlatBuffers Verifier refused it", size);
  }
  return nullptr;
}

tf_status check_version(uint32_t version, const char *source, const FileFormat &format) {
  if (version == 0)
    return fail(TF_ERR_INVALID_INPUT, source, "missing %s (%s is absent or 0)", format.version_name,
                format.version_field);
  if (version > static_cast<uint32_t>(format.newest_version))
    return fail(TF_ERR_INVALID_INPUT, source, "written by a newer tightfit: %s %u; this build reads up to %d",
                format.version_name, version, format.newest_version);
  return nullptr;
}

// ---- decoding ----

tf_status refuse(tf_status status, const char *source, const char *what, flatbuffers::uoffset_t index,
                 const flatbuffers::String *name) {
  tf_code code = tf_status_code(status) == TF_ERR_OUT_OF_MEMORY ? TF_ERR_OUT_OF_MEMORY : TF_ERR_INVALID_INPUT;
  tf_status refused =
      what ? fail(code, source, "%s %u %s: %s", what, index, quoted(name).c_str(), tf_status_message(status))
           : fail(code, source, "%s", tf_status_message(status));
  tf_status_free(status);
  return refused;
}

// ---- encoding ----

tf_status copy_finished(const flatbuffers::FlatBufferBuilder &fbb, const FileFormat &format, void **data,
                        size_t *size) {
  *data = std::malloc(fbb.GetSize());
  if (!*data)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate %u bytes for the %s file", fbb.GetSize(), format.noun);
  std::memcpy(*data, fbb.GetBufferPointer(), fbb.GetSize());
  *size = fbb.GetSize();
  return nullptr;
}

// ---- JSON ----

namespace {

tf_status render_json(const void *data, size_t size, const FileFormat &format, char **json) {
  AlignedBytes aligned(data, size);
  TF_RETURN_IF_ERROR(check_file(data, size, aligned.bytes(), nullptr, format));
  TF_RETURN_IF_ERROR(format.check_printable(aligned.bytes()));

  flatbuffers::IDLOptions options;
  options.strict_json = true;                    // quoted field names: JSON that any tool reads
  options.output_enum_identifiers = true;        // "op": "matmul", not "op": 0
  options.output_default_scalars_in_json = true; // show every scalar, written or default
  options.indent_step = 2;
  flatbuffers::Parser parser(options);
  if (!parser.Parse(format.schema_text))
    return tf_status_new(TF_ERR_INTERNAL, "the embedded %s does not parse: %s", format.schema_file,
                         parser.error_.c_str());
  std::string text;
  if (!flatbuffers::GenerateText(parser, aligned.bytes(), &text))
    return tf_status_new(TF_ERR_INVALID_INPUT, "a string in the %s is not valid UTF-8; JSON cannot hold it",
                         format.noun);

  *json = static_cast<char *>(std::malloc(text.size() + 1));
  if (!*json)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of JSON", text.size() + 1);
  std::memcpy(*json, text.c_str(), text.size() + 1);
  return nullptr;
}

} // namespace

tf_status file_to_json(const void *data, size_t size, const FileFormat &format, char **json) {
  if (!json)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_%s_fb_to_json: json is NULL", format.noun);
  *json = nullptr;
  char what[64];
  std::snprintf(what, sizeof what, "converting the %s to JSON", format.noun);
  return guarded(what, [&] { return render_json(data, size, format, json); });
}

} // namespace schema
} // namespace tightfit
