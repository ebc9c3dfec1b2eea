#define _POSIX_C_SOURCE 200809L
/* .npy: "\x93NUMPY", major, minor, a little-endian header length (u16 for 1.0, u32 for 2.0/3.0),
 * then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with
 * spaces and a newline, then the raw elements. The dict is parsed by hand, accepting exactly the
 * literals NumPy writes, never evaluated. */
#include "runtime/npy.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "runtime/mapped_file.h"

/* NumPy's own reader refuses headers past 10 000 characters; alignment padding (at most 4 KiB in
 * practice) never needs more than this. */
#define MAX_HEADER_BYTES (1 << 20)

struct tf_npy {
  char *path;
  tf_mapped_file map;
  void *copy; /* the data, when its place in the file is not aligned to the element size */
  const void *data;
  tf_dtype dtype;
  char dtype_description[32]; /* "float64 ('<f8')" */
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count;
  size_t bytes;
};

/* The types read, with NumPy's names for messages; the first row of a dtype is the one written. */
static const struct {
  const char *descr;
  tf_dtype dtype;
  const char *numpy_name;
} descriptors[] = {
    {"<f4", TF_F32, "float32"}, {"<f8", TF_FILE_F64, "float64"}, {"<f2", TF_F16, "float16"}, {"<i4", TF_I32, "int32"},
    {"<i8", TF_I64, "int64"},   {"|u1", TF_U8, "uint8"},         {"<u1", TF_U8, "uint8"},    {">u1", TF_U8, "uint8"},
};
#define DESCRIPTOR_COUNT (sizeof(descriptors) / sizeof(descriptors[0]))

/* What tightfit reads, for messages about what it does not. */
#define READABLE_TYPES "float32 '<f4', float64 '<f8', float16 '<f2', int32 '<i4', int64 '<i8', uint8 '|u1'"

/* ---- reading the header dict ---- */

typedef struct cursor {
  const char *path;
  const char *at, *end;
} cursor;

static void skip_space(cursor *c) {
  while (c->at < c->end && (*c->at == ' ' || *c->at == '\t' || *c->at == '\n' || *c->at == '\r'))
    c->at++;
}

static bool accept(cursor *c, char expected) {
  skip_space(c);
  if (c->at < c->end && *c->at == expected) {
    c->at++;
    return true;
  }
  return false;
}

static tf_status syntax_error(const cursor *c, const char *start, const char *expected) {
  long offset = (long)(c->at - start);
  if (c->at >= c->end)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: npy header ends early (expected %s)", c->path, expected);
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: bad npy header at character %ld: expected %s, found '%c'", c->path,
                       offset, expected, *c->at >= ' ' && *c->at < 127 ? *c->at : '?');
}

/* A quoted Python string without escapes (NumPy's keys and type strings never need them), copied
 * into text[capacity]. */
static bool read_string(cursor *c, char *text, size_t capacity) {
  skip_space(c);
  if (c->at >= c->end || (*c->at != '\'' && *c->at != '"'))
    return false;
  char quote = *c->at++;
  size_t length = 0;
  while (c->at < c->end && *c->at != quote) {
    if (*c->at == '\\' || *c->at == '\n' || length + 1 >= capacity)
      return false;
    text[length++] = *c->at++;
  }
  if (c->at >= c->end)
    return false;
  c->at++;
  text[length] = '\0';
  return true;
}

static bool read_word(cursor *c, const char *word) {
  skip_space(c);
  size_t length = strlen(word);
  if ((size_t)(c->end - c->at) < length || memcmp(c->at, word, length) != 0)
    return false;
  c->at += length;
  return true;
}

/* A non-negative decimal integer, optionally with Python 2's 'L' suffix. */
static bool read_dimension(cursor *c, int64_t *value) {
  skip_space(c);
  if (c->at >= c->end || *c->at < '0' || *c->at > '9')
    return false;
  int64_t v = 0;
  while (c->at < c->end && *c->at >= '0' && *c->at <= '9') {
    int digit = *c->at++ - '0';
    if (v > (INT64_MAX - digit) / 10)
      return false;
    v = v * 10 + digit;
  }
  if (c->at < c->end && *c->at == 'L')
    c->at++;
  *value = v;
  return true;
}

/* NumPy's name for the type string `descr` ("<u2" -> "uint16", ">f4" -> "big-endian float32"), written
 * into text[capacity]; "an unknown type" for anything NumPy would not write. */
static const char *numpy_type_name(const char *descr, char *text, size_t capacity) {
  static const struct {
    char kind;
    const char *name;
    bool sized; /* the name takes the width in bits */
  } kinds[] = {{'f', "float", true},       {'i', "int", true},         {'u', "uint", true},
               {'c', "complex", true},     {'b', "bool", false},       {'O', "Python objects", false},
               {'U', "str", false},        {'S', "bytes", false},      {'V', "void", false},
               {'M', "datetime64", false}, {'m', "timedelta64", false}};
  const char order = descr[0];
  if ((order != '<' && order != '>' && order != '|' && order != '=') || !descr[1]) {
    snprintf(text, capacity, "an unknown type");
    return text;
  }
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    if (kinds[i].kind != descr[1])
      continue;
    int64_t bytes = 0;
    bool has_width = descr[2] && tf_parse_i64(descr + 2, 1, 1 << 20, &bytes) == TF_PARSE_OK;
    const char *endian = order == '>' && bytes > 1 ? "big-endian " : "";
    if (kinds[i].sized && has_width)
      snprintf(text, capacity, "%s%s%" PRId64, endian, kinds[i].name, 8 * bytes);
    else
      snprintf(text, capacity, "%s%s", endian, kinds[i].name);
    return text;
  }
  snprintf(text, capacity, "an unknown type");
  return text;
}

static tf_status parse_descr(cursor *c, const char *start, tf_npy *npy) {
  skip_space(c);
  if (c->at < c->end && *c->at == '[')
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "%s: holds a structured record type: unsupported dtype; tightfit reads " READABLE_TYPES,
                         c->path);
  char descr[32];
  if (!read_string(c, descr, sizeof(descr)))
    return syntax_error(c, start, "a dtype string for 'descr'");
  for (size_t i = 0; i < DESCRIPTOR_COUNT; i++)
    if (strcmp(descr, descriptors[i].descr) == 0) {
      npy->dtype = descriptors[i].dtype;
      snprintf(npy->dtype_description, sizeof(npy->dtype_description), "%s ('%s')", descriptors[i].numpy_name,
               descriptors[i].descr);
      return NULL;
    }
  char name[64];
  numpy_type_name(descr, name, sizeof(name));
  const char *how = descr[0] == '>' ? " (convert with arr.astype(arr.dtype.newbyteorder('<')))" : "";
  return tf_status_new(TF_ERR_UNSUPPORTED, "%s: holds %s: unsupported dtype '%s'%s; tightfit reads " READABLE_TYPES,
                       c->path, name, descr, how);
}

static tf_status parse_shape(cursor *c, const char *start, tf_npy *npy) {
  if (!accept(c, '('))
    return syntax_error(c, start, "'(' opening the shape tuple");
  npy->rank = 0;
  bool comma = false;
  while (!accept(c, ')')) {
    if (npy->rank > 0 && !comma)
      return syntax_error(c, start, "',' or ')' in the shape tuple");
    int64_t dim;
    if (!read_dimension(c, &dim))
      return syntax_error(c, start, "a non-negative dimension below 2^63");
    if (npy->rank == TF_MAX_RANK)
      return tf_status_new(TF_ERR_UNSUPPORTED, "%s: shape has more than %d dimensions", c->path, TF_MAX_RANK);
    npy->shape[npy->rank++] = dim;
    comma = accept(c, ',');
  }
  if (npy->rank == 1 && !comma)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: shape (%" PRId64 ") is not a tuple (NumPy writes (%" PRId64 ",))",
                         c->path, npy->shape[0], npy->shape[0]);
  return NULL;
}

static tf_status parse_header(const char *path, const char *text, size_t length, tf_npy *npy) {
  cursor c = {path, text, text + length};
  enum { DESCR = 1, FORTRAN = 2, SHAPE = 4 };
  int seen = 0;
  if (!accept(&c, '{'))
    return syntax_error(&c, text, "'{' opening the header dict");
  while (!accept(&c, '}')) {
    char key[32];
    if (!read_string(&c, key, sizeof(key)))
      return syntax_error(&c, text, "a quoted key");
    int which = strcmp(key, "descr") == 0           ? DESCR
                : strcmp(key, "fortran_order") == 0 ? FORTRAN
                : strcmp(key, "shape") == 0         ? SHAPE
                                                    : 0;
    if (!which)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: npy header has unknown key '%s'", path, key);
    if (seen & which)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: npy header repeats key '%s'", path, key);
    seen |= which;
    if (!accept(&c, ':'))
      return syntax_error(&c, text, "':' after a key");
    if (which == DESCR) {
      TF_RETURN_IF_ERROR(parse_descr(&c, text, npy));
    } else if (which == SHAPE) {
      TF_RETURN_IF_ERROR(parse_shape(&c, text, npy));
    } else if (read_word(&c, "True")) {
      return tf_status_new(
          TF_ERR_UNSUPPORTED,
          "%s: fortran_order is True; tightfit reads C-order arrays only (save np.ascontiguousarray(a))", path);
    } else if (!read_word(&c, "False")) {
      return syntax_error(&c, text, "True or False for 'fortran_order'");
    }
    if (!accept(&c, ',')) {
      if (accept(&c, '}'))
        break;
      return syntax_error(&c, text, "',' or '}' after a value");
    }
  }
  skip_space(&c);
  if (c.at != c.end)
    return syntax_error(&c, text, "only padding after the header dict");
  if (seen != (DESCR | FORTRAN | SHAPE))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: npy header lacks key '%s'", path,
                         !(seen & DESCR)     ? "descr"
                         : !(seen & FORTRAN) ? "fortran_order"
                                             : "shape");
  return NULL;
}

/* ---- opening ---- */

static uint32_t read_le(const unsigned char *bytes, int count) {
  uint32_t value = 0;
  for (int i = count - 1; i >= 0; i--)
    value = value << 8 | bytes[i];
  return value;
}

static tf_status check_file(const char *path, tf_npy *npy) {
  const unsigned char *bytes = npy->map.data;
  size_t size = npy->map.size;
  if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: not a .npy file (%s)", path,
                         size < 10 ? "shorter than the 10-byte preamble" : "bad magic; expected \\x93NUMPY");
  int major = bytes[6], minor = bytes[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: npy format version %d.%d; tightfit reads 1.0, 2.0 and 3.0", path,
                         major, minor);
  size_t prefix = major == 1 ? 10 : 12;
  if (size < prefix)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: truncated in the npy preamble (%zu bytes)", path, size);
  uint32_t header_bytes = read_le(bytes + 8, major == 1 ? 2 : 4);
  if (header_bytes == 0 || header_bytes > MAX_HEADER_BYTES)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: implausible npy header length %" PRIu32 " (allowed 1..%d)", path,
                         header_bytes, MAX_HEADER_BYTES);
  if (header_bytes > size - prefix)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: truncated: npy header of %" PRIu32 " bytes, file has %zu after the preamble", path,
                         header_bytes, size - prefix);
  TF_RETURN_IF_ERROR(parse_header(path, (const char *)bytes + prefix, header_bytes, npy));

  int64_t element = tf_file_dtype_size(npy->dtype);
  int64_t count, data_bytes;
  if (!tf_checked_product_i64(npy->shape, npy->rank, &count))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: the element count of its %d-dimensional shape overflows int64",
                         path, (int)npy->rank);
  if (!tf_checked_mul_i64(count, element, &data_bytes))
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: %" PRId64 " elements of %" PRId64 " bytes overflow int64", path,
                         count, element);
  size_t offset = prefix + header_bytes;
  if ((uint64_t)data_bytes != size - offset)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: header promises %" PRId64 " data bytes (%" PRId64 " x %s), file holds %zu%s", path,
                         data_bytes, count, tf_file_dtype_name(npy->dtype), size - offset,
                         (uint64_t)data_bytes > size - offset ? " (truncated)" : " (trailing bytes)");
  npy->count = count;
  npy->bytes = (size_t)data_bytes;
  npy->data = bytes + offset;
  if (offset % (size_t)element != 0 && data_bytes > 0) {
    npy->copy = malloc(npy->bytes);
    if (!npy->copy)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for unaligned data", path, npy->bytes);
    memcpy(npy->copy, npy->data, npy->bytes);
    npy->data = npy->copy;
  }
  return NULL;
}

tf_status tf_npy_open(const char *path, tf_npy **out) {
  *out = NULL;
  if (!path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_npy_open: NULL path");
  tf_npy *npy = calloc(1, sizeof(*npy));
  size_t length = strlen(path) + 1;
  char *copy = malloc(length);
  if (!npy || !copy) {
    free(npy);
    free(copy);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a reader", path);
  }
  memcpy(copy, path, length);
  npy->path = copy;
  tf_status status = tf_mapped_file_open(path, &npy->map);
  if (!status)
    status = check_file(path, npy);
  if (status) {
    tf_npy_close(npy);
    return status;
  }
  *out = npy;
  return NULL;
}

void tf_npy_close(tf_npy *npy) {
  if (!npy)
    return;
  tf_mapped_file_close(&npy->map);
  free(npy->copy);
  free(npy->path);
  free(npy);
}

tf_dtype tf_npy_dtype(const tf_npy *npy) { return npy->dtype; }
const char *tf_npy_dtype_description(const tf_npy *npy) { return npy->dtype_description; }
int32_t tf_npy_rank(const tf_npy *npy) { return npy->rank; }
const int64_t *tf_npy_shape(const tf_npy *npy) { return npy->shape; }
int64_t tf_npy_count(const tf_npy *npy) { return npy->count; }
size_t tf_npy_bytes(const tf_npy *npy) { return npy->bytes; }
const void *tf_npy_data(const tf_npy *npy) { return npy->data; }
const char *tf_npy_path(const tf_npy *npy) { return npy->path; }

/* ---- writing ---- */

static const char *descriptor_of(tf_dtype dtype) {
  for (size_t i = 0; i < DESCRIPTOR_COUNT; i++)
    if (descriptors[i].dtype == dtype)
      return descriptors[i].descr;
  return NULL;
}

tf_status tf_npy_write(const char *path, tf_dtype dtype, int32_t rank, const int64_t *shape, const void *data) {
  if (!path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_npy_write: NULL path");
  const char *descr = descriptor_of(dtype);
  if (!descr)
    return tf_status_new(TF_ERR_UNSUPPORTED, "%s: cannot write dtype %s to .npy (NumPy has no such type)", path,
                         tf_file_dtype_name(dtype));
  if (rank < 0 || rank > TF_MAX_RANK || (rank > 0 && !shape))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", path, (int)rank, TF_MAX_RANK);
  int64_t count = 1;
  for (int32_t d = 0; d < rank; d++) {
    if (shape[d] < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: dimension %d is negative (%" PRId64 ")", path, (int)d,
                           shape[d]);
    if (!tf_checked_mul_i64(count, shape[d], &count))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: element count overflows", path);
  }
  int64_t data_bytes;
  if (!tf_checked_mul_i64(count, tf_file_dtype_size(dtype), &data_bytes) || (uint64_t)data_bytes > SIZE_MAX)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: data size overflows", path);
  if (data_bytes > 0 && !data)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: NULL data for %" PRId64 " elements", path, count);

  /* The same text as NumPy 1.24: sorted keys, repr() of the shape, room for the first axis to grow
   * to 21 digits, then spaces and '\n' so that the data starts on a 64-byte boundary. */
  char header[512];
  int length = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int32_t d = 0; d < rank; d++)
    length += snprintf(header + length, sizeof(header) - (size_t)length, "%s%" PRId64, d ? ", " : "", shape[d]);
  length += snprintf(header + length, sizeof(header) - (size_t)length, "%s), }", rank == 1 ? "," : "");
  if (rank > 0) {
    int digits = snprintf(NULL, 0, "%" PRId64, shape[0]);
    for (int i = digits; i < 21; i++)
      header[length++] = ' ';
  }
  int unpadded = 10 + length + 1;
  int padding = 64 - unpadded % 64;
  unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  int header_bytes = length + padding + 1;
  preamble[8] = (unsigned char)(header_bytes & 0xff);
  preamble[9] = (unsigned char)(header_bytes >> 8);
  memset(header + length, ' ', (size_t)padding);
  header[length + padding] = '\n';

  tf_atomic_file *file;
  TF_RETURN_IF_ERROR(tf_atomic_file_open(path, &file));
  tf_status status = tf_atomic_file_write(file, preamble, sizeof(preamble));
  if (!status)
    status = tf_atomic_file_write(file, header, (size_t)header_bytes);
  if (!status && data_bytes > 0)
    status = tf_atomic_file_write(file, data, (size_t)data_bytes);
  if (status) {
    tf_atomic_file_discard(file);
    return status;
  }
  return tf_atomic_file_commit(file);
}
