/* Internal to the safetensors reader and writer: the table of element types and the parser of the
 * JSON header. Not a public API. */
#ifndef TIGHTFIT_RUNTIME_SAFETENSORS_HEADER_H
#define TIGHTFIT_RUNTIME_SAFETENSORS_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/safetensors.h"

/* Tensor names longer than this are refused (tightfit's own names are a few dozen bytes). */
#define TF_SAFETENSORS_MAX_NAME 65536

/* One safetensors element type: its name in files, tightfit's dtype (TF_SAFETENSORS_OTHER when it
 * has none), bytes per element, and its rank in the reference writer's ordering (the Rust enum's
 * declaration order; data is laid out from the highest rank down). */
typedef struct tf_safetensors_type {
  const char *name;
  tf_dtype dtype;
  int64_t size;
  int order;
} tf_safetensors_type;

/* The type named `name` ("F32"), or NULL. */
const tf_safetensors_type *tf_safetensors_type_named(const char *name);
/* The type tightfit writes for `dtype` (a graph dtype or TF_FILE_F64), or NULL. */
const tf_safetensors_type *tf_safetensors_type_of(tf_dtype dtype);

/* True when bytes[0..length) is well-formed UTF-8 (no overlong forms, surrogates or values past
 * U+10FFFF). */
bool tf_safetensors_utf8_valid(const unsigned char *bytes, size_t length);

/* One tensor as the header declares it; offsets are relative to the start of the data. */
typedef struct tf_safetensors_entry {
  char *name;
  const tf_safetensors_type *type;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  uint64_t begin, end;
} tf_safetensors_entry;

typedef struct tf_safetensors_header {
  tf_safetensors_entry *tensors; /* in file order */
  int32_t n_tensors;
  char **keys, **values; /* metadata, in file order */
  int32_t n_metadata;
} tf_safetensors_header;

/* Parses the header text[0..length) of file `path` into *out (zeroed first; cleared by the caller
 * with tf_safetensors_header_clear even on failure). Checks the grammar, types, ranks and duplicate
 * fields inside a tensor entry; not duplicate names or metadata keys (found after sorting), nor the
 * offsets. Error offsets count from the start of the file. */
tf_status tf_safetensors_header_parse(const char *path, const unsigned char *text, size_t length,
                                      tf_safetensors_header *out) TF_MUST_USE;

/* Frees what tf_safetensors_header_parse allocated and zeroes *header. */
void tf_safetensors_header_clear(tf_safetensors_header *header);

#endif
