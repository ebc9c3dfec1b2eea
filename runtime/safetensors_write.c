#define _POSIX_C_SOURCE 200809L
/* The safetensors writer. Output matches the reference writer byte for byte: data ordered by
 * element type from widest (the Rust enum order, descending) then by name, which keeps every tensor
 * aligned to its element size; compact JSON with serde_json's escaping; the header padded with
 * spaces to a multiple of 8. Metadata keys are sorted (the reference uses a hash map, so any order
 * is valid; sorting makes our bytes deterministic). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/copy.h"
#include "common/xxh64.h"
#include "runtime/safetensors_header.h"

typedef struct writer_entry {
  char *name;
  const tf_safetensors_type *type;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  uint64_t bytes;
  const void *data;
} writer_entry;

struct tf_safetensors_writer {
  writer_entry *entries;
  int32_t n_entries, entry_capacity;
  char **keys, **values;
  int32_t n_metadata, metadata_capacity;
  bool checksums; /* tf_safetensors_writer_add_checksums */
};

void tf_safetensors_writer_add_checksums(tf_safetensors_writer *writer) { writer->checksums = true; }

tf_status tf_safetensors_writer_create(tf_safetensors_writer **out) {
  *out = calloc(1, sizeof(**out));
  return *out ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "cannot allocate a safetensors writer");
}

void tf_safetensors_writer_destroy(tf_safetensors_writer *writer) {
  if (!writer)
    return;
  for (int32_t i = 0; i < writer->n_entries; i++)
    free(writer->entries[i].name);
  for (int32_t i = 0; i < writer->n_metadata; i++) {
    free(writer->keys[i]);
    free(writer->values[i]);
  }
  free(writer->entries);
  free(writer->keys);
  free(writer->values);
  free(writer);
}

static bool reserve(void **array, int32_t *capacity, int32_t count, size_t element) {
  if (count < *capacity)
    return true;
  if (*capacity > INT32_MAX / 2)
    return false;
  int32_t grown = *capacity ? *capacity * 2 : 16;
  void *bigger = realloc(*array, (size_t)grown * element);
  if (!bigger)
    return false;
  *array = bigger;
  *capacity = grown;
  return true;
}

static bool valid_text(const char *text) {
  return text && tf_safetensors_utf8_valid((const unsigned char *)text, strlen(text));
}

/* Metadata TF_SAFETENSORS_CHECKSUM_PREFIX + name: the XXH64 of the tensor's bytes in hex. */
static tf_status set_checksum(tf_safetensors_writer *writer, const writer_entry *entry) {
  size_t length = strlen(TF_SAFETENSORS_CHECKSUM_PREFIX) + strlen(entry->name) + 1;
  char *key = malloc(length), hex[24];
  if (!key)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "safetensors writer: no memory for the checksum of '%s'", entry->name);
  snprintf(key, length, "%s%s", TF_SAFETENSORS_CHECKSUM_PREFIX, entry->name);
  snprintf(hex, sizeof(hex), "%016" PRIx64, tf_xxh64(entry->data, (size_t)entry->bytes, 0));
  tf_status status = tf_safetensors_writer_set_metadata(writer, key, hex);
  free(key);
  return status;
}

tf_status tf_safetensors_writer_add(tf_safetensors_writer *writer, const char *name, tf_dtype dtype, int32_t rank,
                                    const int64_t *shape, const void *data) {
  if (!valid_text(name) || !*name || strlen(name) > TF_SAFETENSORS_MAX_NAME)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "safetensors writer: tensor name %s%s%s is not non-empty UTF-8 of at most %d bytes",
                         name ? "'" : "", name ? name : "NULL", name ? "'" : "", TF_SAFETENSORS_MAX_NAME);
  if (strcmp(name, "__metadata__") == 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: '__metadata__' is reserved, not a tensor name");
  const tf_safetensors_type *type = tf_safetensors_type_of(dtype);
  if (!type)
    return tf_status_new(TF_ERR_UNSUPPORTED, "safetensors writer: tensor '%s': cannot write dtype %d", name,
                         (int)dtype);
  if (rank < 0 || rank > TF_MAX_RANK || (rank > 0 && !shape))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: tensor '%s': rank %d outside 0..%d", name,
                         (int)rank, TF_MAX_RANK);
  writer_entry entry = {.type = type, .rank = rank, .data = data};
  int64_t count = 1, bytes;
  for (int32_t d = 0; d < rank; d++) {
    if (shape[d] < 0 || !tf_checked_mul_i64(count, shape[d], &count))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "safetensors writer: tensor '%s': dimension %d (%" PRId64 ") is negative or overflows", name,
                           (int)d, shape[d]);
    entry.shape[d] = shape[d];
  }
  if (!tf_checked_mul_i64(count, type->size, &bytes) || (uint64_t)bytes > SIZE_MAX)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: tensor '%s': size overflows", name);
  if (bytes > 0 && !data)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: tensor '%s': NULL data for %" PRId64 " bytes",
                         name, bytes);
  entry.bytes = (uint64_t)bytes;
  if (!reserve((void **)&writer->entries, &writer->entry_capacity, writer->n_entries, sizeof(writer_entry)) ||
      !(entry.name = tf_copy_string(name)))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "safetensors writer: cannot add tensor '%s'", name);
  writer->entries[writer->n_entries++] = entry;
  return writer->checksums ? set_checksum(writer, &entry) : NULL;
}

tf_status tf_safetensors_writer_set_metadata(tf_safetensors_writer *writer, const char *key, const char *value) {
  if (!valid_text(key) || !valid_text(value))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: metadata key and value must be UTF-8 strings");
  char *value_copy = tf_copy_string(value);
  if (!value_copy)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "safetensors writer: cannot copy metadata '%s'", key);
  for (int32_t i = 0; i < writer->n_metadata; i++)
    if (strcmp(writer->keys[i], key) == 0) {
      free(writer->values[i]);
      writer->values[i] = value_copy;
      return NULL;
    }
  int32_t capacity = writer->metadata_capacity;
  char *key_copy = tf_copy_string(key);
  if (!key_copy || !reserve((void **)&writer->keys, &capacity, writer->n_metadata, sizeof(char *)) ||
      !reserve((void **)&writer->values, &writer->metadata_capacity, writer->n_metadata, sizeof(char *))) {
    free(key_copy);
    free(value_copy);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "safetensors writer: cannot add metadata '%s'", key);
  }
  writer->keys[writer->n_metadata] = key_copy;
  writer->values[writer->n_metadata++] = value_copy;
  return NULL;
}

/* ---- the header text ---- */

typedef struct text {
  char *data;
  size_t length, capacity;
  bool failed;
} text;

static void append(text *t, const char *bytes, size_t length) {
  if (t->failed || length == 0)
    return;
  if (t->length + length > t->capacity) {
    size_t grown = t->capacity ? t->capacity : 256;
    while (grown < t->length + length)
      grown *= 2;
    char *bigger = realloc(t->data, grown);
    if (!bigger) {
      t->failed = true;
      return;
    }
    t->data = bigger;
    t->capacity = grown;
  }
  memcpy(t->data + t->length, bytes, length);
  t->length += length;
}

static void append_text(text *t, const char *s) { append(t, s, strlen(s)); }

static void append_number(text *t, uint64_t value) {
  char digits[24];
  append(t, digits, (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, value));
}

/* A JSON string as serde_json writes it: only '"', '\\' and control characters are escaped. */
static void append_string(text *t, const char *s) {
  append(t, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    char escape[8];
    switch (*c) {
    case '"': append(t, "\\\"", 2); break;
    case '\\': append(t, "\\\\", 2); break;
    case '\b': append(t, "\\b", 2); break;
    case '\f': append(t, "\\f", 2); break;
    case '\n': append(t, "\\n", 2); break;
    case '\r': append(t, "\\r", 2); break;
    case '\t': append(t, "\\t", 2); break;
    default:
      if (*c < 0x20)
        append(t, escape, (size_t)snprintf(escape, sizeof(escape), "\\u%04x", *c));
      else
        append(t, (const char *)c, 1);
    }
  }
  append(t, "\"", 1);
}

static int compare_layout(const void *a, const void *b) {
  const writer_entry *x = *(const writer_entry *const *)a, *y = *(const writer_entry *const *)b;
  if (x->type->order != y->type->order)
    return x->type->order > y->type->order ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int compare_names(const void *a, const void *b) {
  return strcmp((*(const writer_entry *const *)a)->name, (*(const writer_entry *const *)b)->name);
}

typedef struct metadata_pair {
  const char *key, *value;
} metadata_pair;

static int compare_keys(const void *a, const void *b) {
  return strcmp(((const metadata_pair *)a)->key, ((const metadata_pair *)b)->key);
}

static tf_status build_header(const tf_safetensors_writer *writer, const writer_entry *const *order, const char *path,
                              text *header) {
  append_text(header, "{");
  if (writer->n_metadata) {
    metadata_pair *pairs = malloc((size_t)writer->n_metadata * sizeof(metadata_pair));
    if (!pairs)
      return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot sort the metadata", path);
    for (int32_t i = 0; i < writer->n_metadata; i++)
      pairs[i] = (metadata_pair){writer->keys[i], writer->values[i]};
    qsort(pairs, (size_t)writer->n_metadata, sizeof(metadata_pair), compare_keys);
    append_text(header, "\"__metadata__\":{");
    for (int32_t i = 0; i < writer->n_metadata; i++) {
      append_text(header, i ? "," : "");
      append_string(header, pairs[i].key);
      append_text(header, ":");
      append_string(header, pairs[i].value);
    }
    append_text(header, writer->n_entries ? "}," : "}");
    free(pairs);
  }
  uint64_t offset = 0;
  for (int32_t i = 0; i < writer->n_entries; i++) {
    const writer_entry *e = order[i];
    append_text(header, i ? "," : "");
    append_string(header, e->name);
    append_text(header, ":{\"dtype\":");
    append_string(header, e->type->name);
    append_text(header, ",\"shape\":[");
    for (int32_t d = 0; d < e->rank; d++) {
      append_text(header, d ? "," : "");
      append_number(header, (uint64_t)e->shape[d]);
    }
    append_text(header, "],\"data_offsets\":[");
    append_number(header, offset);
    append_text(header, ",");
    append_number(header, offset + e->bytes);
    append_text(header, "]}");
    offset += e->bytes;
  }
  append_text(header, "}");
  while (header->length % 8)
    append_text(header, " ");
  if (header->failed)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot build the header", path);
  if (header->length > TF_SAFETENSORS_MAX_HEADER)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: header of %zu bytes exceeds the limit of %d", path,
                         header->length, TF_SAFETENSORS_MAX_HEADER);
  return NULL;
}

static tf_status write_file(const char *path, const text *header, const writer_entry *const *order, int32_t n) {
  unsigned char length[8];
  for (int i = 0; i < 8; i++)
    length[i] = (unsigned char)((uint64_t)header->length >> (8 * i));
  tf_atomic_file *file;
  TF_RETURN_IF_ERROR(tf_atomic_file_open(path, &file));
  tf_status status = tf_atomic_file_write(file, length, sizeof(length));
  if (!status)
    status = tf_atomic_file_write(file, header->data, header->length);
  for (int32_t i = 0; i < n && !status; i++)
    if (order[i]->bytes)
      status = tf_atomic_file_write(file, order[i]->data, (size_t)order[i]->bytes);
  if (status) {
    tf_atomic_file_discard(file);
    return status;
  }
  return tf_atomic_file_commit(file);
}

tf_status tf_safetensors_writer_write(const tf_safetensors_writer *writer, const char *path) {
  if (!path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "safetensors writer: NULL path");
  int32_t n = writer->n_entries;
  const writer_entry **order = malloc((size_t)(n ? n : 1) * sizeof(*order));
  if (!order)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot order %d tensors", path, (int)n);
  for (int32_t i = 0; i < n; i++)
    order[i] = &writer->entries[i];
  tf_status status = NULL;
  qsort(order, (size_t)n, sizeof(*order), compare_names);
  for (int32_t i = 1; i < n && !status; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: duplicate name (tensor '%s' was added twice)", path,
                             order[i]->name);
  int64_t data_bytes = 0;
  for (int32_t i = 0; i < n && !status; i++)
    if (!tf_checked_add_i64(data_bytes, (int64_t)order[i]->bytes, &data_bytes))
      status =
          tf_status_new(TF_ERR_INVALID_ARGUMENT, "%s: the %d tensors hold more than 2^63 bytes together", path, (int)n);
  text header = {0};
  if (!status) {
    qsort(order, (size_t)n, sizeof(*order), compare_layout);
    status = build_header(writer, order, path, &header);
  }
  if (!status)
    status = write_file(path, &header, order, n);
  free(header.data);
  free(order);
  return status;
}
