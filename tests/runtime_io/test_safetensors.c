/* runtime/safetensors: writer -> reader round trips of every dtype, the writer's exact bytes and
 * their independence of insertion order, unaligned files from other writers, escapes and Unicode,
 * lookups, the writer's errors, and a corpus of malformed files refused with their code and a
 * message naming the file and the problem. */
#include "io_test.h"

#include <inttypes.h>
#include <stdint.h>

#include "runtime/safetensors.h"

static tf_test_counts counts;

static size_t pattern_fill(unsigned char *data, size_t bytes, unsigned salt) {
  for (size_t j = 0; j < bytes; j++)
    data[j] = (unsigned char)(j * 29 + salt);
  return bytes;
}

typedef struct spec {
  const char *name;
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
} spec;

static const spec specs[] = {
    {"w.f32", TF_F32, 2, {3, 4}},
    {"w.f16", TF_F16, 1, {5}},
    {"w.bf16", TF_BF16, 3, {1, 3, 1}},
    {"ids.i32", TF_I32, 1, {7}},
    {"ids.i64", TF_I64, 2, {2, 3}},
    {"bytes.u8", TF_U8, 1, {9}},
    {"double.f64", TF_FILE_F64, 0, {0}},
    {"empty", TF_F32, 2, {0, 4}},
    {"rank8", TF_U8, 8, {1, 2, 1, 2, 1, 2, 1, 3}},
    {"caf\xc3\xa9 \"quoted\" back\\slash\ttab", TF_F32, 1, {2}},
};
#define SPEC_COUNT (sizeof(specs) / sizeof(specs[0]))

static int64_t count_of(const spec *s) {
  int64_t count = 1;
  for (int32_t d = 0; d < s->rank; d++)
    count *= s->shape[d];
  return count;
}

static tf_status write_specs(const char *path, const int *order) {
  tf_safetensors_writer *writer;
  TF_RETURN_IF_ERROR(tf_safetensors_writer_create(&writer));
  static unsigned char buffers[SPEC_COUNT][256];
  tf_status status = tf_safetensors_writer_set_metadata(writer, "step", "41");
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "format", "pt");
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "step", "42"); /* replaces */
  if (!status)
    status = tf_safetensors_writer_set_metadata(writer, "note", "line\nbreak \xe2\x9c\x93 \x01");
  for (size_t k = 0; k < SPEC_COUNT && !status; k++) {
    const spec *s = &specs[order[k]];
    size_t bytes = (size_t)(count_of(s) * tf_file_dtype_size(s->dtype));
    pattern_fill(buffers[order[k]], bytes, (unsigned)order[k]);
    status = tf_safetensors_writer_add(writer, s->name, s->dtype, s->rank, s->shape, buffers[order[k]]);
  }
  if (!status)
    status = tf_safetensors_writer_write(writer, path);
  tf_safetensors_writer_destroy(writer);
  return status;
}

static void test_round_trip(const char *folder) {
  printf("round trip:\n");
  char path[4096], path2[4096];
  snprintf(path, sizeof(path), "%s/a.safetensors", folder);
  snprintf(path2, sizeof(path2), "%s/b.safetensors", folder);
  const int forward[SPEC_COUNT] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int backward[SPEC_COUNT] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  CHECK_OK(&counts, write_specs(path, forward));
  CHECK_OK(&counts, write_specs(path2, backward));
  size_t size1, size2;
  unsigned char *bytes1 = io_read_file(path, &size1), *bytes2 = io_read_file(path2, &size2);
  CHECK(&counts, bytes1 && bytes2 && size1 == size2 && memcmp(bytes1, bytes2, size1) == 0,
        "insertion order changed the bytes (%zu vs %zu)", size1, size2);
  uint64_t header = 0;
  for (int i = 7; bytes1 && i >= 0; i--)
    header = header << 8 | bytes1[i];
  CHECK(&counts, header % 8 == 0 && bytes1 && bytes1[8] == '{' && bytes1[8 + header - 1] == ' ',
        "header of %" PRIu64 " bytes not padded to 8 with spaces", header);
  printf("  %zu bytes, header %" PRIu64 " bytes (multiple of 8), same bytes for both insertion orders\n", size1,
         header);
  free(bytes1);
  free(bytes2);

  tf_safetensors *file = NULL;
  CHECK_OK(&counts, tf_safetensors_open(path, &file));
  if (!file)
    return;
  CHECK(&counts, tf_safetensors_count(file) == (int32_t)SPEC_COUNT, "count %d", (int)tf_safetensors_count(file));
  const char *step = tf_safetensors_metadata(file, "step");
  const char *note = tf_safetensors_metadata(file, "note");
  CHECK(&counts, step && strcmp(step, "42") == 0, "metadata step = %s", step ? step : "(absent)");
  CHECK(&counts, note && strcmp(note, "line\nbreak \xe2\x9c\x93 \x01") == 0, "metadata note differs");
  CHECK(&counts, tf_safetensors_metadata(file, "absent") == NULL, "absent metadata found");
  CHECK(&counts, tf_safetensors_metadata_count(file) == 3, "metadata count %d",
        (int)tf_safetensors_metadata_count(file));
  const char *key, *value, *previous = "";
  for (int32_t i = 0; tf_safetensors_metadata_at(file, i, &key, &value); previous = key, i++)
    CHECK(&counts, strcmp(previous, key) < 0, "metadata not in key order: '%s' after '%s'", key, previous);
  for (size_t k = 0; k < SPEC_COUNT; k++) {
    const spec *s = &specs[k];
    tf_safetensors_tensor view;
    tf_status status = tf_safetensors_expect(file, s->name, s->dtype, s->rank, s->shape, &view);
    CHECK(&counts, status == NULL, "%s", tf_status_message(status));
    tf_status_free(status);
    if (status)
      continue;
    unsigned char expected[256];
    size_t bytes = pattern_fill(expected, (size_t)(count_of(s) * tf_file_dtype_size(s->dtype)), (unsigned)k);
    bool same = view.bytes == bytes && view.count == count_of(s) &&
                (bytes == 0 ? view.data == NULL : memcmp(view.data, expected, bytes) == 0) &&
                (uintptr_t)view.data % (uintptr_t)tf_file_dtype_size(s->dtype) == 0;
    CHECK(&counts, same, "tensor '%s' differs", s->name);
    printf("  %-12s %-5s rank %d, %3zu bytes, aligned, equal: %s\n", view.file_dtype, tf_file_dtype_name(view.dtype),
           (int)view.rank, view.bytes, same ? "yes" : "NO");
  }
  tf_safetensors_tensor view, before = {0};
  for (int32_t i = 0; tf_safetensors_at(file, i, &view); before = view, i++)
    CHECK(&counts, !before.name || strcmp(before.name, view.name) < 0, "tensors not in name order");
  CHECK(&counts, !tf_safetensors_at(file, -1, &view) && !tf_safetensors_at(file, (int32_t)SPEC_COUNT, &view),
        "out-of-range index accepted");
  io_check_refusal(&counts, "absent tensor", tf_safetensors_find(file, "nope", &view), TF_ERR_INVALID_INPUT,
                   "no tensor named 'nope'", path);
  const int64_t shape34[2] = {3, 4}, shape43[2] = {4, 3};
  io_check_refusal(&counts, "dtype mismatch", tf_safetensors_expect(file, "w.f32", TF_F16, 2, shape34, &view),
                   TF_ERR_SHAPE, "tensor 'w.f32' is F32 [3, 4]; expected F16 [3, 4]", path);
  io_check_refusal(&counts, "shape mismatch", tf_safetensors_expect(file, "w.f32", TF_F32, 2, shape43, &view),
                   TF_ERR_SHAPE, "is F32 [3, 4]; expected F32 [4, 3]", path);
  tf_safetensors_close(file);
  CHECK(&counts, io_count_temporaries(folder) == 0, "temporary files left in %s", folder);
}

/* The reference writer's bytes for a small file, worked out by hand from its rules. */
static void test_exact_bytes(const char *folder) {
  printf("exact bytes:\n");
  char path[4096];
  snprintf(path, sizeof(path), "%s/exact.safetensors", folder);
  const float b[2] = {1.0f, 2.0f};
  const unsigned char a[3] = {7, 8, 9};
  const int64_t two = 2, three = 3;
  tf_safetensors_writer *writer = NULL;
  CHECK_OK(&counts, tf_safetensors_writer_create(&writer));
  if (!writer)
    return;
  CHECK_OK(&counts, tf_safetensors_writer_add(writer, "a", TF_U8, 1, &three, a));
  CHECK_OK(&counts, tf_safetensors_writer_add(writer, "b", TF_F32, 1, &two, b));
  CHECK_OK(&counts, tf_safetensors_writer_set_metadata(writer, "format", "pt"));
  CHECK_OK(&counts, tf_safetensors_writer_write(writer, path));
  tf_safetensors_writer_destroy(writer);
  const char *json =
      "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]}}";
  size_t json_length = strlen(json), padded = (json_length + 7) / 8 * 8;
  unsigned char expected[512] = {0};
  expected[0] = (unsigned char)padded;
  memcpy(expected + 8, json, json_length);
  memset(expected + 8 + json_length, ' ', padded - json_length);
  memcpy(expected + 8 + padded, b, 8);
  memcpy(expected + 8 + padded + 8, a, 3);
  size_t size;
  unsigned char *written = io_read_file(path, &size);
  bool same = written && size == 8 + padded + 11 && memcmp(written, expected, size) == 0;
  CHECK(&counts, same, "bytes differ from the reference layout (%zu bytes)", size);
  printf("  F32 before U8 (reference order), compact JSON, %zu-byte header: %s\n", padded,
         same ? "identical" : "DIFFERENT");
  free(written);
}

static size_t st_bytes(unsigned char *out, const char *json, size_t data_bytes, size_t pad_to) {
  size_t length = strlen(json), padded = length;
  while (padded % pad_to)
    padded++;
  for (int i = 0; i < 8; i++)
    out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(out + 8, json, length);
  memset(out + 8 + length, ' ', padded - length);
  for (size_t j = 0; j < data_bytes; j++)
    out[8 + padded + j] = (unsigned char)(j * 29 + 3);
  return 8 + padded + data_bytes;
}

static void test_foreign_files(const char *folder) {
  printf("files from other writers:\n");
  unsigned char file[4096];
  char path[4096];
  /* Unpadded header and U8 data first: the F32 and I64 tensors land on odd offsets and are copied. */
  const char *json = "{\"m\": {\"data_offsets\": [0, 3], \"shape\": [3], \"dtype\": \"U8\"} ,\n"
                     "  \"w\" : {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[3,11]},"
                     "\"\\u00e9\\ud83d\\ude00\\/\": {\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[11,19]},"
                     "\"odd\": {\"dtype\":\"I16\",\"shape\":[1,1],\"data_offsets\":[19,21]},"
                     "\"__metadata__\": {\"k\\\"ey\": \"v\\u0041l\"}}\t";
  size_t size = st_bytes(file, json, 21, 1);
  io_write_file(folder, "unaligned.safetensors", file, size, path, sizeof(path));
  tf_safetensors *st = NULL;
  CHECK_OK(&counts, tf_safetensors_open(path, &st));
  if (!st)
    return;
  size_t data_start = size - 21;
  tf_safetensors_tensor view;
  CHECK_OK(&counts, tf_safetensors_find(st, "w", &view));
  bool ok = view.dtype == TF_F32 && (uintptr_t)view.data % 4 == 0 && memcmp(view.data, file + data_start + 3, 8) == 0;
  CHECK(&counts, ok, "unaligned F32 tensor not copied correctly");
  CHECK_OK(&counts, tf_safetensors_find(st, "\xc3\xa9\xf0\x9f\x98\x80/", &view));
  ok = view.dtype == TF_I64 && view.rank == 0 && view.count == 1 && (uintptr_t)view.data % 8 == 0 &&
       memcmp(view.data, file + data_start + 11, 8) == 0;
  CHECK(&counts, ok, "escaped name / scalar I64 wrong");
  CHECK_OK(&counts, tf_safetensors_find(st, "odd", &view));
  CHECK(&counts, view.dtype == TF_SAFETENSORS_OTHER && strcmp(view.file_dtype, "I16") == 0 && view.bytes == 2,
        "I16 tensor not reported as other");
  const char *value = tf_safetensors_metadata(st, "k\"ey");
  CHECK(&counts, value && strcmp(value, "vAl") == 0, "escaped metadata wrong");
  printf(
      "  unpadded header, whitespace, escapes (\\u00e9, surrogate pair, \\/), I16 tensor, unaligned F32/I64: read\n");
  tf_safetensors_close(st);

  size = st_bytes(file, "{}", 0, 8);
  io_write_file(folder, "empty.safetensors", file, size, path, sizeof(path));
  CHECK_OK(&counts, tf_safetensors_open(path, &st));
  CHECK(&counts, st && tf_safetensors_count(st) == 0 && tf_safetensors_metadata_count(st) == 0, "empty file");
  tf_safetensors_close(st);
  printf("  an empty file ({}) opens with no tensors\n");
}

typedef struct bad_case {
  const char *name, *json;
  size_t data_bytes;
  const char *phrase;
} bad_case;

#define T(dtype, shape, b, e) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_bad_files(const char *folder) {
  printf("malformed files:\n");
  static const bad_case cases[] = {
      {"overlap", "{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[2]", 4, 12) "}", 12, "overlap"},
      {"same_range", "{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[2]", 0, 8) "}", 8, "overlap"},
      {"gap", "{\"a\":" T("F32", "[1]", 0, 4) ",\"b\":" T("F32", "[1]", 8, 12) "}", 12,
       "[4, 8) before tensor 'b' belong to no tensor"},
      {"past_end", "{\"a\":" T("F32", "[4]", 0, 16) "}", 8, "run past the end of the data (8 bytes)"},
      {"size_mismatch", "{\"a\":" T("F32", "[3]", 0, 8) "}", 8,
       "F32 x 3 elements is 12 bytes, but data_offsets [0, 8] span 8"},
      {"backwards", "{\"a\":" T("U8", "[0]", 8, 4) "}", 8, "run backwards"},
      {"trailing_data", "{\"a\":" T("F32", "[1]", 0, 4) "}", 8, "cover 4 of the 8 data bytes"},
      {"shape_overflow", "{\"a\":" T("F64", "[4294967296,4294967296]", 0, 8) "}", 8, "overflows"},
      {"missing_brace", "{\"a\":" T("F32", "[1]", 0, 4), 4, "',' or '}' between tensors"},
      {"trailing_comma", "{\"a\":" T("F32", "[1]", 0, 4) ",}", 4, "a tensor name (a string)"},
      {"float_shape", "{\"a\":" T("F32", "[1.0]", 0, 4) "}", 4, "no fraction or exponent"},
      {"exponent", "{\"a\":" T("F32", "[1e0]", 0, 4) "}", 4, "no fraction or exponent"},
      {"negative", "{\"a\":" T("F32", "[-1]", 0, 4) "}", 4, "a dimension"},
      {"leading_zero", "{\"a\":" T("F32", "[01]", 0, 4) "}", 4, "without leading zeros"},
      {"huge_offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
       "small enough"},
      {"true_value", "{\"a\":{\"dtype\":true,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "a dtype string"},
      {"null_shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":null,\"data_offsets\":[0,4]}}", 4, "'[' opening \"shape\""},
      {"three_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4,
       "']' after two data_offsets"},
      {"unknown_field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
       "unknown field 'x'"},
      {"missing_field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks field 'data_offsets'"},
      {"repeated_field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
       "repeats field 'dtype'"},
      {"duplicate_tensor", "{\"a\":" T("F32", "[1]", 0, 4) ",\"a\":" T("F32", "[1]", 4, 8) "}", 8,
       "tensor 'a' appears twice"},
      {"duplicate_metadata", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "metadata key 'k' appears twice"},
      {"two_metadata", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
      {"metadata_number", "{\"__metadata__\":{\"k\":1}}", 0, "a string metadata value"},
      {"metadata_array", "{\"__metadata__\":[]}", 0, "a map of strings to strings"},
      {"unknown_dtype", "{\"a\":" T("F128", "[1]", 0, 16) "}", 16, "unknown dtype 'F128'"},
      {"rank9", "{\"a\":" T("U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1, "more than 8 dimensions"},
      {"bad_escape", "{\"a\\x\":" T("U8", "[1]", 0, 1) "}", 1, "a valid escape"},
      {"lone_surrogate", "{\"a\\ud800\":" T("U8", "[1]", 0, 1) "}", 1, "a valid escape"},
      {"trailing_surrogate", "{\"a\\udc00\":" T("U8", "[1]", 0, 1) "}", 1, "a valid escape"},
      {"nul_escape", "{\"a\\u0000\":" T("U8", "[1]", 0, 1) "}", 1, "not \\u0000"},
      {"short_hex", "{\"a\\u12\":" T("U8", "[1]", 0, 1) "}", 1, "a valid escape"},
      {"control_char", "{\"a\tb\":" T("U8", "[1]", 0, 1) "}", 1, "no raw control character"},
      {"invalid_utf8", "{\"a\xff\":" T("U8", "[1]", 0, 1) "}", 1, "well-formed UTF-8"},
      {"overlong_utf8", "{\"a\xc0\xaf\":" T("U8", "[1]", 0, 1) "}", 1, "well-formed UTF-8"},
      {"utf8_surrogate", "{\"a\xed\xa0\x80\":" T("U8", "[1]", 0, 1) "}", 1, "well-formed UTF-8"},
      {"unterminated", "{\"abc", 0, "unterminated string"},
      {"top_array", "[]", 0, "'{' opening the header"},
      {"not_json", "hello", 0, "'{' opening the header"},
      {"leading_space", " {}", 0, "'{' opening the header (as its first byte)"},
      {"after_object", "{} x", 0, "only spaces after the header object"},
      {"two_objects", "{}{}", 0, "only spaces after the header object"},
      {"empty_name", "{\"\":" T("U8", "[1]", 0, 1) "}", 1, "empty name"},
      {"name_not_string", "{1:" T("U8", "[1]", 0, 1) "}", 1, "a tensor name (a string)"},
      {"tensor_not_object", "{\"a\":[1]}", 0, "'{' opening a tensor entry"},
      {"deep", "{\"a\":{\"dtype\":{\"dtype\":{\"dtype\":\"F32\"}},\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
       "a dtype string"},
  };
  unsigned char file[4096];
  char path[4096];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t size = st_bytes(file, cases[i].json, cases[i].data_bytes, 8);
    char name[128];
    snprintf(name, sizeof(name), "%s.safetensors", cases[i].name);
    io_write_file(folder, name, file, size, path, sizeof(path));
    tf_safetensors *st = NULL;
    tf_code code = strcmp(cases[i].name, "rank9") == 0 ? TF_ERR_UNSUPPORTED : TF_ERR_INVALID_INPUT;
    io_check_refusal(&counts, cases[i].name, tf_safetensors_open(path, &st), code, cases[i].phrase, path);
    CHECK(&counts, st == NULL, "%s: handle returned on failure", cases[i].name);
  }

  /* Damage to the length prefix. */
  size_t good = st_bytes(file, "{\"a\":" T("F32", "[1]", 0, 4) "}", 4, 8);
  struct {
    const char *name;
    size_t size;
    uint64_t header;
    const char *phrase;
  } raw[] = {
      {"empty_file", 0, 0, "shorter than the 8-byte header length"},
      {"short_file", 5, 0, "shorter than the 8-byte header length"},
      {"zero_header", good, 1, "ends early"},
      {"huge_header", good, UINT64_MAX, "header length 18446744073709551615 exceeds the limit of 100000000 bytes"},
      {"header_over_limit", good, 100000001, "exceeds the limit"},
      {"truncated_header", good, 4096, "truncated: header length 4096"},
      {"truncated_data", good - 2, 0, "run past the end of the data (2 bytes)"},
  };
  for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
    unsigned char copy[4096];
    memcpy(copy, file, good);
    if (raw[i].header)
      for (int b = 0; b < 8; b++)
        copy[b] = (unsigned char)((raw[i].header == 1 ? 0 : raw[i].header) >> (8 * b));
    io_write_file(folder, raw[i].name, copy, raw[i].size, path, sizeof(path));
    tf_safetensors *st = NULL;
    io_check_refusal(&counts, raw[i].name, tf_safetensors_open(path, &st), TF_ERR_INVALID_INPUT, raw[i].phrase, path);
  }
  tf_safetensors *st = NULL;
  snprintf(path, sizeof(path), "%s/missing.safetensors", folder);
  io_check_refusal(&counts, "missing file", tf_safetensors_open(path, &st), TF_ERR_IO, "cannot open", path);
}

static void test_writer_errors(const char *folder) {
  printf("writer errors:\n");
  tf_safetensors_writer *writer = NULL;
  CHECK_OK(&counts, tf_safetensors_writer_create(&writer));
  if (!writer)
    return;
  float data[4] = {0};
  const int64_t shape[TF_MAX_RANK + 1] = {2, 2, 1, 1, 1, 1, 1, 1, 1};
  io_check_refusal(&counts, "reserved name", tf_safetensors_writer_add(writer, "__metadata__", TF_F32, 1, shape, data),
                   TF_ERR_INVALID_ARGUMENT, "reserved", NULL);
  io_check_refusal(&counts, "empty name", tf_safetensors_writer_add(writer, "", TF_F32, 1, shape, data),
                   TF_ERR_INVALID_ARGUMENT, "non-empty UTF-8", NULL);
  io_check_refusal(&counts, "invalid UTF-8", tf_safetensors_writer_add(writer, "a\xff", TF_F32, 1, shape, data),
                   TF_ERR_INVALID_ARGUMENT, "non-empty UTF-8", NULL);
  io_check_refusal(&counts, "other dtype", tf_safetensors_writer_add(writer, "x", TF_SAFETENSORS_OTHER, 1, shape, data),
                   TF_ERR_UNSUPPORTED, "cannot write dtype", NULL);
  io_check_refusal(&counts, "rank 9", tf_safetensors_writer_add(writer, "x", TF_F32, 9, shape, data),
                   TF_ERR_INVALID_ARGUMENT, "rank 9", NULL);
  const int64_t negative[1] = {-1};
  io_check_refusal(&counts, "negative dim", tf_safetensors_writer_add(writer, "x", TF_F32, 1, negative, data),
                   TF_ERR_INVALID_ARGUMENT, "negative", NULL);
  io_check_refusal(&counts, "NULL data", tf_safetensors_writer_add(writer, "x", TF_F32, 2, shape, NULL),
                   TF_ERR_INVALID_ARGUMENT, "NULL data", NULL);
  io_check_refusal(&counts, "bad metadata", tf_safetensors_writer_set_metadata(writer, "k", "\xc0"),
                   TF_ERR_INVALID_ARGUMENT, "UTF-8", NULL);
  CHECK_OK(&counts, tf_safetensors_writer_add(writer, "x", TF_F32, 2, shape, data));
  CHECK_OK(&counts, tf_safetensors_writer_add(writer, "x", TF_BF16, 1, shape, data));
  char path[4096];
  snprintf(path, sizeof(path), "%s/dup.safetensors", folder);
  io_check_refusal(&counts, "duplicate name", tf_safetensors_writer_write(writer, path), TF_ERR_INVALID_ARGUMENT,
                   "tensor 'x' was added twice", path);
  tf_safetensors_writer_destroy(writer);
  CHECK(&counts, io_count_temporaries(folder) == 0 && access(path, F_OK) != 0, "a refused write left a file");

  CHECK_OK(&counts, tf_safetensors_writer_create(&writer));
  CHECK_OK(&counts, tf_safetensors_writer_add(writer, "x", TF_F32, 2, shape, data));
  snprintf(path, sizeof(path), "%s/no/such/folder/x.safetensors", folder);
  io_check_refusal(&counts, "missing folder", tf_safetensors_writer_write(writer, path), TF_ERR_IO, "cannot create",
                   path);
  tf_safetensors_writer_destroy(writer);
  tf_safetensors_writer_destroy(NULL);
  tf_safetensors_close(NULL);
}

int main(void) {
  char *folder = io_scratch_create();
  if (!folder) {
    fprintf(stderr, "cannot create a scratch folder\n");
    return 1;
  }
  test_round_trip(folder);
  test_exact_bytes(folder);
  test_foreign_files(folder);
  test_bad_files(folder);
  test_writer_errors(folder);
  io_scratch_destroy(folder);
  return tf_test_finish("test_safetensors", &counts);
}
