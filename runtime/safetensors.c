#define _POSIX_C_SOURCE 200809L
/* The safetensors reader: map, parse the header, then check what the JSON alone cannot: sizes
 * against dtype x shape, and that the tensors tile the data exactly, as the reference
 * implementation requires (so a file we accept is one every other reader accepts). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/checked.h"
#include "common/xxh64.h"
#include "runtime/mapped_file.h"
#include "runtime/safetensors_header.h"

struct tf_safetensors {
  char *path;
  tf_mapped_file map;
  tf_safetensors_header header; /* tensors sorted by name, metadata by key, after validation */
  const void **data;            /* per tensor, parallel to header.tensors */
  void *copy;                   /* aligned copies of tensors the file leaves unaligned */
};

/* The product of the shape, or -1 when it overflows int64 (dimensions are non-negative: the header
 * parser reads no sign). */
static int64_t element_count(const tf_safetensors_entry *entry) {
  int64_t count;
  return tf_checked_product_i64(entry->shape, entry->rank, &count) ? count : -1;
}

static int compare_by_name(const void *a, const void *b) {
  return strcmp(((const tf_safetensors_entry *)a)->name, ((const tf_safetensors_entry *)b)->name);
}

/* A tensor's byte range, for checking that the ranges tile the data. */
typedef struct span {
  uint64_t begin, end;
  const char *name;
} span;

static int compare_spans(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return 0;
}

static tf_status check_sizes(const tf_safetensors *file, uint64_t data_size) {
  for (int32_t i = 0; i < file->header.n_tensors; i++) {
    const tf_safetensors_entry *e = &file->header.tensors[i];
    int64_t count = element_count(e), bytes;
    if (count < 0 || !tf_checked_mul_i64(count, e->type->size, &bytes))
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: tensor '%s': the size of its %d-dimensional shape overflows int64", file->path, e->name,
                           (int)e->rank);
    if (e->begin > e->end)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run backwards", file->path,
                           e->name, e->begin, e->end);
    if (e->end > data_size)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                           "] run past the end of the data (%" PRIu64 " bytes)",
                           file->path, e->name, e->begin, e->end, data_size);
    if (e->end - e->begin != (uint64_t)bytes)
      return tf_status_new(TF_ERR_INVALID_INPUT,
                           "%s: tensor '%s': %s x %" PRId64 " elements is %" PRId64 " bytes, but data_offsets [%" PRIu64
                           ", %" PRIu64 "] span %" PRIu64,
                           file->path, e->name, e->type->name, count, bytes, e->begin, e->end, e->end - e->begin);
  }
  return NULL;
}

/* The tensors must tile [0, data_size): sorted by offset, each begins where the previous ended. */
static tf_status check_tiling(const tf_safetensors *file, uint64_t data_size) {
  int32_t n = file->header.n_tensors;
  span *spans = malloc((size_t)(n ? n : 1) * sizeof(span));
  if (!spans)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate %d spans", file->path, (int)n);
  for (int32_t i = 0; i < n; i++)
    spans[i] = (span){file->header.tensors[i].begin, file->header.tensors[i].end, file->header.tensors[i].name};
  qsort(spans, (size_t)n, sizeof(span), compare_spans);
  tf_status status = NULL;
  uint64_t covered = 0;
  for (int32_t i = 0; i < n && !status; i++) {
    if (spans[i].begin < covered)
      status = tf_status_new(TF_ERR_INVALID_INPUT,
                             "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %" PRIu64 ") overlap",
                             file->path, spans[i - 1].name, spans[i - 1].begin, spans[i - 1].end, spans[i].name,
                             spans[i].begin, spans[i].end);
    else if (spans[i].begin > covered)
      status = tf_status_new(TF_ERR_INVALID_INPUT,
                             "%s: data bytes [%" PRIu64 ", %" PRIu64 ") before tensor '%s' belong to no tensor",
                             file->path, covered, spans[i].begin, spans[i].name);
    covered = spans[i].end;
  }
  if (!status && covered != data_size)
    status =
        tf_status_new(TF_ERR_INVALID_INPUT,
                      "%s: the tensors cover %" PRIu64 " of the %" PRIu64 " data bytes; the rest belongs to no tensor",
                      file->path, covered, data_size);
  free(spans);
  return status;
}

typedef struct pair {
  char *key, *value;
} pair;

static int compare_pairs(const void *a, const void *b) {
  return strcmp(((const pair *)a)->key, ((const pair *)b)->key);
}

/* Sorts the metadata by key, in place. */
static bool sort_metadata(tf_safetensors_header *h) {
  pair *pairs = malloc((size_t)(h->n_metadata ? h->n_metadata : 1) * sizeof(pair));
  if (!pairs)
    return false;
  for (int32_t i = 0; i < h->n_metadata; i++)
    pairs[i] = (pair){h->keys[i], h->values[i]};
  qsort(pairs, (size_t)h->n_metadata, sizeof(pair), compare_pairs);
  for (int32_t i = 0; i < h->n_metadata; i++) {
    h->keys[i] = pairs[i].key;
    h->values[i] = pairs[i].value;
  }
  free(pairs);
  return true;
}

/* Sorts the tensors by name and the metadata by key, refusing duplicates of either. Runs before the
 * offsets are checked: a name given twice is reported as the duplicate it is, not as the overlap or
 * gap its two entries also make. */
static tf_status index_names(tf_safetensors *file) {
  tf_safetensors_header *h = &file->header;
  if (h->n_tensors > 1)
    qsort(h->tensors, (size_t)h->n_tensors, sizeof(tf_safetensors_entry), compare_by_name);
  for (int32_t i = 1; i < h->n_tensors; i++)
    if (strcmp(h->tensors[i - 1].name, h->tensors[i].name) == 0)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: duplicate name (tensor '%s' appears twice in the header)",
                           file->path, h->tensors[i].name);
  if (!sort_metadata(h))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot sort the metadata", file->path);
  for (int32_t i = 1; i < h->n_metadata; i++)
    if (strcmp(h->keys[i - 1], h->keys[i]) == 0)
      return tf_status_new(TF_ERR_INVALID_INPUT, "%s: duplicate metadata key (metadata key '%s' appears twice)",
                           file->path, h->keys[i]);
  return NULL;
}

/* Points each tensor into the mapping, or into an aligned copy when its place in the file is not a
 * multiple of its element size (files from writers that do not pad the header). */
static tf_status place_data(tf_safetensors *file, uint64_t data_start) {
  tf_safetensors_header *h = &file->header;
  file->data = calloc((size_t)(h->n_tensors ? h->n_tensors : 1), sizeof(void *));
  if (!file->data)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate the tensor index", file->path);
  /* No overflow: the tiling check has bounded the spans' sum by the data size, which is mapped, and
   * rounding adds at most 7 bytes per tensor. */
  size_t copy_bytes = 0;
  for (int32_t i = 0; i < h->n_tensors; i++) {
    const tf_safetensors_entry *e = &h->tensors[i];
    if (e->end > e->begin && (data_start + e->begin) % (uint64_t)e->type->size != 0)
      copy_bytes += (size_t)((e->end - e->begin + 7) & ~(uint64_t)7);
  }
  if (copy_bytes && !(file->copy = malloc(copy_bytes)))
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for unaligned tensors", file->path,
                         copy_bytes);
  unsigned char *next = file->copy;
  for (int32_t i = 0; i < h->n_tensors; i++) {
    const tf_safetensors_entry *e = &h->tensors[i];
    const unsigned char *in_file = file->map.data + data_start + e->begin;
    if (e->end == e->begin)
      file->data[i] = NULL;
    else if ((data_start + e->begin) % (uint64_t)e->type->size == 0)
      file->data[i] = in_file;
    else {
      memcpy(next, in_file, (size_t)(e->end - e->begin));
      file->data[i] = next;
      next += (size_t)((e->end - e->begin + 7) & ~(uint64_t)7);
    }
  }
  return NULL;
}

static tf_status check_file(tf_safetensors *file) {
  const unsigned char *bytes = file->map.data;
  uint64_t size = file->map.size;
  if (size < 8)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: not a safetensors file: %" PRIu64 " bytes, shorter than the 8-byte header length",
                         file->path, size);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; i--)
    header_bytes = header_bytes << 8 | bytes[i];
  if (header_bytes > TF_SAFETENSORS_MAX_HEADER)
    return tf_status_new(TF_ERR_INVALID_INPUT, "%s: header length %" PRIu64 " exceeds the limit of %d bytes",
                         file->path, header_bytes, TF_SAFETENSORS_MAX_HEADER);
  if (header_bytes > size - 8)
    return tf_status_new(TF_ERR_INVALID_INPUT,
                         "%s: truncated: header length %" PRIu64 ", but only %" PRIu64 " bytes follow it", file->path,
                         header_bytes, size - 8);
  TF_RETURN_IF_ERROR(tf_safetensors_header_parse(file->path, bytes + 8, (size_t)header_bytes, &file->header));
  uint64_t data_size = size - 8 - header_bytes;
  TF_RETURN_IF_ERROR(index_names(file));
  TF_RETURN_IF_ERROR(check_sizes(file, data_size));
  TF_RETURN_IF_ERROR(check_tiling(file, data_size));
  return place_data(file, 8 + header_bytes);
}

tf_status tf_safetensors_open(const char *path, tf_safetensors **out) {
  *out = NULL;
  if (!path)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "tf_safetensors_open: NULL path");
  tf_safetensors *file = calloc(1, sizeof(*file));
  size_t length = strlen(path) + 1;
  char *copy = malloc(length);
  if (!file || !copy) {
    free(file);
    free(copy);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: cannot allocate a reader", path);
  }
  memcpy(copy, path, length);
  file->path = copy;
  tf_status status = tf_mapped_file_open(path, &file->map);
  if (!status)
    status = check_file(file);
  if (status) {
    tf_safetensors_close(file);
    return status;
  }
  *out = file;
  return NULL;
}

void tf_safetensors_close(tf_safetensors *file) {
  if (!file)
    return;
  tf_mapped_file_close(&file->map);
  tf_safetensors_header_clear(&file->header);
  free(file->data);
  free(file->copy);
  free(file->path);
  free(file);
}

int32_t tf_safetensors_count(const tf_safetensors *file) { return file->header.n_tensors; }

bool tf_safetensors_at(const tf_safetensors *file, int32_t index, tf_safetensors_tensor *view) {
  if (index < 0 || index >= file->header.n_tensors)
    return false;
  const tf_safetensors_entry *e = &file->header.tensors[index];
  view->name = e->name;
  view->dtype = e->type->dtype;
  view->file_dtype = e->type->name;
  view->rank = e->rank;
  memset(view->shape, 0, sizeof(view->shape));
  memcpy(view->shape, e->shape, (size_t)e->rank * sizeof(int64_t));
  view->count = element_count(e);
  view->bytes = (size_t)(e->end - e->begin);
  view->data = file->data[index];
  return true;
}

/* The index of tensor `name` (binary search over the sorted names), or -1. */
static int32_t index_of(const tf_safetensors *file, const char *name) {
  int32_t low = 0, high = file->header.n_tensors;
  while (low < high) {
    int32_t middle = low + (high - low) / 2;
    int order = strcmp(file->header.tensors[middle].name, name);
    if (order == 0)
      return middle;
    if (order < 0)
      low = middle + 1;
    else
      high = middle;
  }
  return -1;
}

/* The checksum a tightfit writer recorded for `view` (TF_SAFETENSORS_CHECKSUM_PREFIX), if any, against
 * its bytes: a flipped bit anywhere in them is refused here, where the tensor is looked up. */
static tf_status check_checksum(const tf_safetensors *file, const tf_safetensors_tensor *view) {
  char key[64 + TF_SAFETENSORS_MAX_NAME];
  snprintf(key, sizeof(key), "%s%s", TF_SAFETENSORS_CHECKSUM_PREFIX, view->name);
  const char *recorded = tf_safetensors_metadata(file, key);
  if (!recorded)
    return NULL;
  char computed[24];
  snprintf(computed, sizeof(computed), "%016" PRIx64, tf_xxh64(view->data, view->bytes, 0));
  if (strcmp(recorded, computed) == 0)
    return NULL;
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: tensor '%s': checksum mismatch: its %zu bytes hash to xxh64 %s, the metadata '%s' says %s "
                       "(the file is damaged)",
                       file->path, view->name, view->bytes, computed, key, recorded);
}

tf_status tf_safetensors_find(const tf_safetensors *file, const char *name, tf_safetensors_tensor *view) {
  int32_t index = index_of(file, name);
  if (index >= 0) {
    tf_safetensors_at(file, index, view);
    return check_checksum(file, view);
  }
  return tf_status_new(TF_ERR_INVALID_INPUT, "%s: no tensor named '%s' (the file holds %d tensors)", file->path, name,
                       (int)file->header.n_tensors);
}

static void format_shape(int32_t rank, const int64_t *shape, char *text, size_t capacity) {
  size_t used = (size_t)snprintf(text, capacity, "[");
  for (int32_t d = 0; d < rank && used < capacity; d++)
    used += (size_t)snprintf(text + used, capacity - used, "%s%" PRId64, d ? ", " : "", shape[d]);
  if (used < capacity)
    snprintf(text + used, capacity - used, "]");
}

tf_status tf_safetensors_expect(const tf_safetensors *file, const char *name, tf_dtype dtype, int32_t rank,
                                const int64_t *shape, tf_safetensors_tensor *view) {
  TF_RETURN_IF_ERROR(tf_safetensors_find(file, name, view));
  bool same = view->dtype == dtype && view->rank == rank;
  for (int32_t d = 0; same && d < rank; d++)
    same = view->shape[d] == shape[d];
  if (same)
    return NULL;
  char found[256], expected[256];
  format_shape(view->rank, view->shape, found, sizeof(found));
  format_shape(rank < 0 ? 0 : rank > TF_MAX_RANK ? TF_MAX_RANK : rank, shape, expected, sizeof(expected));
  const tf_safetensors_type *wanted = tf_safetensors_type_of(dtype);
  return tf_status_new(TF_ERR_SHAPE, "%s: tensor '%s' is %s %s; expected %s %s", file->path, name, view->file_dtype,
                       found, wanted ? wanted->name : tf_file_dtype_name(dtype), expected);
}

const char *tf_safetensors_metadata(const tf_safetensors *file, const char *key) {
  int32_t low = 0, high = file->header.n_metadata;
  while (low < high) {
    int32_t middle = low + (high - low) / 2;
    int order = strcmp(file->header.keys[middle], key);
    if (order == 0)
      return file->header.values[middle];
    if (order < 0)
      low = middle + 1;
    else
      high = middle;
  }
  return NULL;
}

int32_t tf_safetensors_metadata_count(const tf_safetensors *file) { return file->header.n_metadata; }

bool tf_safetensors_metadata_at(const tf_safetensors *file, int32_t index, const char **key, const char **value) {
  if (index < 0 || index >= file->header.n_metadata)
    return false;
  *key = file->header.keys[index];
  *value = file->header.values[index];
  return true;
}

const char *tf_safetensors_path(const tf_safetensors *file) { return file->path; }
