/* The safetensors header: a strict parser for exactly its JSON grammar,
 *
 *   header   = "{" [ member *( "," member ) ] "}" ws
 *   member   = string ":" ( tensor | metadata )         ; metadata when the key is "__metadata__"
 *   tensor   = "{" dtype, shape, data_offsets in any order, each exactly once "}"
 *   metadata = "{" [ string ":" string *( "," string ":" string ) ] "}"
 *
 * with JSON strings (all escapes, \u surrogate pairs, UTF-8 checked) and non-negative integers.
 * Nothing else is accepted: no floats, booleans or nulls, no unknown fields, no duplicate keys. The
 * grammar's depth is fixed at three, so no recursion can run away on hostile input. */
#include "runtime/safetensors_header.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tf_safetensors_type types[] = {
    {"BOOL", TF_SAFETENSORS_OTHER, 1, 0},
    {"U8", TF_U8, 1, 1},
    {"I8", TF_SAFETENSORS_OTHER, 1, 2},
    {"F8_E5M2", TF_SAFETENSORS_OTHER, 1, 3},
    {"F8_E4M3", TF_SAFETENSORS_OTHER, 1, 4},
    {"I16", TF_SAFETENSORS_OTHER, 2, 5},
    {"U16", TF_SAFETENSORS_OTHER, 2, 6},
    {"F16", TF_F16, 2, 7},
    {"BF16", TF_BF16, 2, 8},
    {"I32", TF_I32, 4, 9},
    {"U32", TF_SAFETENSORS_OTHER, 4, 10},
    {"F32", TF_F32, 4, 11},
    {"F64", TF_FILE_F64, 8, 12},
    {"I64", TF_I64, 8, 13},
    {"U64", TF_SAFETENSORS_OTHER, 8, 14},
};
#define TYPE_COUNT (sizeof(types) / sizeof(types[0]))

const tf_safetensors_type *tf_safetensors_type_named(const char *name) {
  for (size_t i = 0; i < TYPE_COUNT; i++)
    if (strcmp(types[i].name, name) == 0)
      return &types[i];
  return NULL;
}

const tf_safetensors_type *tf_safetensors_type_of(tf_dtype dtype) {
  if (dtype == TF_SAFETENSORS_OTHER)
    return NULL;
  for (size_t i = 0; i < TYPE_COUNT; i++)
    if (types[i].dtype == dtype)
      return &types[i];
  return NULL;
}

/* Length of the well-formed UTF-8 sequence at bytes[0..available), or 0. */
static size_t utf8_sequence(const unsigned char *bytes, size_t available) {
  unsigned char lead = bytes[0];
  size_t length;
  uint32_t code, minimum;
  if (lead < 0x80)
    return 1;
  if (lead >= 0xC2 && lead <= 0xDF)
    length = 2, code = lead & 0x1F, minimum = 0x80;
  else if (lead >= 0xE0 && lead <= 0xEF)
    length = 3, code = lead & 0x0F, minimum = 0x800;
  else if (lead >= 0xF0 && lead <= 0xF4)
    length = 4, code = lead & 0x07, minimum = 0x10000;
  else
    return 0;
  if (length > available)
    return 0;
  for (size_t i = 1; i < length; i++) {
    if ((bytes[i] & 0xC0) != 0x80)
      return 0;
    code = code << 6 | (bytes[i] & 0x3F);
  }
  if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return 0;
  return length;
}

bool tf_safetensors_utf8_valid(const unsigned char *bytes, size_t length) {
  for (size_t i = 0; i < length;) {
    size_t step = utf8_sequence(bytes + i, length - i);
    if (!step)
      return false;
    i += step;
  }
  return true;
}

/* ---- the lexer ---- */

typedef struct parser {
  const char *path;
  const unsigned char *text, *at, *end;
} parser;

static void skip_space(parser *p) {
  while (p->at < p->end && (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r'))
    p->at++;
}

static bool accept(parser *p, char expected) {
  skip_space(p);
  if (p->at < p->end && *p->at == (unsigned char)expected) {
    p->at++;
    return true;
  }
  return false;
}

/* The header starts at byte 8 of the file. */
static uint64_t file_offset(const parser *p) { return 8 + (uint64_t)(p->at - p->text); }

static tf_status fail(const parser *p, const char *expected) {
  if (p->at >= p->end)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: bad safetensors header: it ends early (expected %s)", p->path,
                         expected);
  unsigned char c = *p->at;
  char found[16];
  if (c >= ' ' && c < 127)
    snprintf(found, sizeof(found), "'%c'", c);
  else
    snprintf(found, sizeof(found), "byte 0x%02x", c);
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: bad safetensors header at byte %" PRIu64 ": expected %s, found %s",
                       p->path, file_offset(p), expected, found);
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Four hex digits after "\u". */
static bool read_hex4(parser *p, uint32_t *value) {
  if (p->end - p->at < 4)
    return false;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int digit = hex_digit(p->at[i]);
    if (digit < 0)
      return false;
    v = v << 4 | (uint32_t)digit;
  }
  p->at += 4;
  *value = v;
  return true;
}

static size_t encode_utf8(uint32_t code, char *out) {
  if (code < 0x80) {
    out[0] = (char)code;
    return 1;
  }
  if (code < 0x800) {
    out[0] = (char)(0xC0 | code >> 6);
    out[1] = (char)(0x80 | (code & 0x3F));
    return 2;
  }
  if (code < 0x10000) {
    out[0] = (char)(0xE0 | code >> 12);
    out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[2] = (char)(0x80 | (code & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | code >> 18);
  out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
  out[3] = (char)(0x80 | (code & 0x3F));
  return 4;
}

/* One escape after the backslash, appended to out; false (with p->at on the culprit) if malformed. */
static bool read_escape(parser *p, char *out, size_t *length) {
  static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
  const char *which = p->at < p->end && *p->at ? strchr(simple_in, *p->at) : NULL;
  if (which) {
    out[(*length)++] = simple_out[which - simple_in];
    p->at++;
    return true;
  }
  if (p->at >= p->end || *p->at != 'u')
    return false;
  p->at++;
  uint32_t code;
  if (!read_hex4(p, &code))
    return false;
  if (code >= 0xDC00 && code <= 0xDFFF)
    return false; /* a trailing surrogate alone */
  if (code >= 0xD800 && code <= 0xDBFF) {
    uint32_t low;
    if (p->end - p->at < 2 || p->at[0] != '\\' || p->at[1] != 'u')
      return false;
    p->at += 2;
    if (!read_hex4(p, &low) || low < 0xDC00 || low > 0xDFFF)
      return false;
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }
  if (code == 0)
    return false; /* names are C strings */
  *length += encode_utf8(code, out + *length);
  return true;
}

/* A JSON string, decoded into a new NUL-terminated buffer *out (the caller frees it). */
static tf_status read_string(parser *p, const char *what, size_t limit, char **out) {
  *out = NULL;
  if (!accept(p, '"'))
    return fail(p, what);
  /* Decoding never lengthens the text, so the raw length bounds the buffer. */
  const unsigned char *close = p->at;
  while (close < p->end && *close != '"')
    close += *close == '\\' ? 2 : 1;
  if (close >= p->end)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: bad safetensors header: unterminated string at byte %" PRIu64,
                         p->path, file_offset(p) - 1);
  size_t raw = (size_t)(close - p->at);
  if (raw > limit * 6)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: bad safetensors header: string at byte %" PRIu64 " longer than %zu bytes", p->path,
                         file_offset(p) - 1, limit);
  char *text = malloc(raw + 1);
  if (!text)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a %zu-byte string", p->path, raw);
  size_t length = 0;
  while (*p->at != '"') {
    unsigned char c = *p->at;
    if (c < 0x20) {
      free(text);
      return fail(p, "no raw control character inside a string");
    }
    if (c == '\\') {
      p->at++;
      if (!read_escape(p, text, &length)) {
        free(text);
        return fail(p, "a valid escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u with paired surrogates, not \\u0000)");
      }
      continue;
    }
    size_t step = utf8_sequence(p->at, (size_t)(p->end - p->at));
    if (!step) {
      free(text);
      return fail(p, "well-formed UTF-8");
    }
    memcpy(text + length, p->at, step);
    length += step;
    p->at += step;
  }
  p->at++;
  text[length] = '\0';
  if (length > limit) {
    free(text);
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: bad safetensors header: string before byte %" PRIu64 " longer than %zu bytes", p->path,
                         file_offset(p), limit);
  }
  *out = text;
  return NULL;
}

/* A non-negative JSON integer no larger than `maximum`. */
static tf_status read_integer(parser *p, const char *what, uint64_t maximum, uint64_t *value) {
  skip_space(p);
  if (p->at < p->end && *p->at == '-')
    return fail(p, what);
  if (p->at >= p->end || *p->at < '0' || *p->at > '9')
    return fail(p, what);
  const unsigned char *start = p->at;
  uint64_t v = 0;
  while (p->at < p->end && *p->at >= '0' && *p->at <= '9') {
    unsigned digit = (unsigned)(*p->at - '0');
    if (v > (maximum - digit) / 10) {
      p->at = start;
      return fail(p, "an integer small enough");
    }
    v = v * 10 + digit;
    p->at++;
  }
  if (p->at - start > 1 && *start == '0') {
    p->at = start;
    return fail(p, "an integer without leading zeros");
  }
  if (p->at < p->end && (*p->at == '.' || *p->at == 'e' || *p->at == 'E'))
    return fail(p, "an integer (no fraction or exponent)");
  *value = v;
  return NULL;
}

/* ---- the grammar ---- */

enum { DTYPE = 1, SHAPE = 2, OFFSETS = 4 };

static tf_status read_shape(parser *p, tf_safetensors_entry *entry) {
  if (!accept(p, '['))
    return fail(p, "'[' opening \"shape\"");
  entry->rank = 0;
  if (accept(p, ']'))
    return NULL;
  do {
    if (entry->rank == TF_MAX_RANK)
      return tf_status_new(TF_ERR_UNSUPPORTED, "%s: tensor '%s' has more than %d dimensions", p->path, entry->name,
                           TF_MAX_RANK);
    uint64_t dim = 0;
    TF_RETURN_IF_ERROR(read_integer(p, "a dimension (a non-negative integer)", INT64_MAX, &dim));
    entry->shape[entry->rank++] = (int64_t)dim;
  } while (accept(p, ','));
  if (!accept(p, ']'))
    return fail(p, "',' or ']' in \"shape\"");
  return NULL;
}

static tf_status read_offsets(parser *p, tf_safetensors_entry *entry) {
  if (!accept(p, '['))
    return fail(p, "'[' opening \"data_offsets\"");
  TF_RETURN_IF_ERROR(read_integer(p, "the begin offset", INT64_MAX, &entry->begin));
  if (!accept(p, ','))
    return fail(p, "',' between the two data_offsets");
  TF_RETURN_IF_ERROR(read_integer(p, "the end offset", INT64_MAX, &entry->end));
  if (!accept(p, ']'))
    return fail(p, "']' after two data_offsets");
  return NULL;
}

static tf_status read_field(parser *p, tf_safetensors_entry *entry, int *seen) {
  char *key;
  TF_RETURN_IF_ERROR(read_string(p, "a field name in a tensor entry", 64, &key));
  int which = strcmp(key, "dtype") == 0          ? DTYPE
              : strcmp(key, "shape") == 0        ? SHAPE
              : strcmp(key, "data_offsets") == 0 ? OFFSETS
                                                 : 0;
  tf_status status = NULL;
  if (!which)
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: tensor '%s' has unknown field '%s'", p->path, entry->name, key);
  else if (*seen & which)
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: tensor '%s' repeats field '%s'", p->path, entry->name, key);
  free(key);
  TF_RETURN_IF_ERROR(status);
  *seen |= which;
  if (!accept(p, ':'))
    return fail(p, "':' after a field name");
  if (which == SHAPE)
    return read_shape(p, entry);
  if (which == OFFSETS)
    return read_offsets(p, entry);
  char *dtype;
  TF_RETURN_IF_ERROR(read_string(p, "a dtype string", 64, &dtype));
  entry->type = tf_safetensors_type_named(dtype);
  if (!entry->type)
    status = tf_status_new(TF_ERR_INVALID_INPUT, "%s: tensor '%s' has unknown dtype '%s'", p->path, entry->name, dtype);
  free(dtype);
  return status;
}

static tf_status read_tensor(parser *p, tf_safetensors_entry *entry) {
  if (!accept(p, '{'))
    return fail(p, "'{' opening a tensor entry");
  int seen = 0;
  if (!accept(p, '}')) {
    do
      TF_RETURN_IF_ERROR(read_field(p, entry, &seen));
    while (accept(p, ','));
    if (!accept(p, '}'))
      return fail(p, "',' or '}' in a tensor entry");
  }
  if (seen != (DTYPE | SHAPE | OFFSETS))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: tensor '%s' lacks field '%s'", p->path, entry->name,
                         !(seen & DTYPE)   ? "dtype"
                         : !(seen & SHAPE) ? "shape"
                                           : "data_offsets");
  return NULL;
}

static bool grow(void **array, int32_t count, size_t element) {
  if (count & (count - 1)) /* capacity is the next power of two at or above count */
    return true;
  if (count >= INT32_MAX / 2)
    return false;
  void *bigger = realloc(*array, (size_t)(count ? count * 2 : 1) * element);
  if (!bigger)
    return false;
  *array = bigger;
  return true;
}

static tf_status read_metadata(parser *p, tf_safetensors_header *header) {
  if (!accept(p, '{'))
    return fail(p, "'{' opening \"__metadata__\" (a map of strings to strings)");
  if (accept(p, '}'))
    return NULL;
  do {
    if (!grow((void **)&header->keys, header->n_metadata, sizeof(char *)) ||
        !grow((void **)&header->values, header->n_metadata, sizeof(char *)))
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate metadata", p->path);
    char *key, *value;
    TF_RETURN_IF_ERROR(read_string(p, "a metadata key", TF_SAFETENSORS_MAX_HEADER, &key));
    if (!accept(p, ':')) {
      free(key);
      return fail(p, "':' after a metadata key");
    }
    tf_status status = read_string(p, "a string metadata value", TF_SAFETENSORS_MAX_HEADER, &value);
    if (status) {
      free(key);
      return status;
    }
    header->keys[header->n_metadata] = key;
    header->values[header->n_metadata++] = value;
  } while (accept(p, ','));
  if (!accept(p, '}'))
    return fail(p, "',' or '}' in \"__metadata__\"");
  return NULL;
}

static tf_status read_member(parser *p, tf_safetensors_header *header, bool *seen_metadata) {
  char *name;
  TF_RETURN_IF_ERROR(read_string(p, "a tensor name (a string)", TF_SAFETENSORS_MAX_NAME, &name));
  if (!accept(p, ':')) {
    free(name);
    return fail(p, "':' after a tensor name");
  }
  if (strcmp(name, "__metadata__") == 0) {
    free(name);
    if (*seen_metadata)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: \"__metadata__\" appears twice", p->path);
    *seen_metadata = true;
    return read_metadata(p, header);
  }
  if (!*name) {
    free(name);
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: a tensor has an empty name", p->path);
  }
  if (!grow((void **)&header->tensors, header->n_tensors, sizeof(tf_safetensors_entry))) {
    free(name);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate tensor entries", p->path);
  }
  tf_safetensors_entry *entry = &header->tensors[header->n_tensors++];
  memset(entry, 0, sizeof(*entry));
  entry->name = name;
  return read_tensor(p, entry);
}

tf_status tf_safetensors_header_parse(const char *path, const unsigned char *text, size_t length,
                                      tf_safetensors_header *out) {
  memset(out, 0, sizeof(*out));
  parser p = {path, text, text, text + length};
  bool seen_metadata = false;
  /* The reference refuses a header that does not start with '{' (InvalidHeaderStart). */
  if (p.at >= p.end || *p.at != '{')
    return fail(&p, "'{' opening the header (as its first byte)");
  p.at++;
  if (!accept(&p, '}')) {
    do
      TF_RETURN_IF_ERROR(read_member(&p, out, &seen_metadata));
    while (accept(&p, ','));
    if (!accept(&p, '}'))
      return fail(&p, "',' or '}' between tensors");
  }
  skip_space(&p);
  if (p.at != p.end)
    return fail(&p, "only spaces after the header object");
  return NULL;
}

void tf_safetensors_header_clear(tf_safetensors_header *header) {
  for (int32_t i = 0; i < header->n_tensors; i++)
    free(header->tensors[i].name);
  for (int32_t i = 0; i < header->n_metadata; i++) {
    free(header->keys[i]);
    free(header->values[i]);
  }
  free(header->tensors);
  free(header->keys);
  free(header->values);
  memset(header, 0, sizeof(*header));
}
