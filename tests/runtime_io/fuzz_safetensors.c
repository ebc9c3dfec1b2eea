/* libFuzzer target for the safetensors reader: any bytes must give a clean error or a file whose
 * every tensor byte can be read and found by name, and a file that opens must survive
 * write -> read unchanged. The reader takes a path and maps it: the input goes to a memfd, and
 * heap_mapping.c makes the mapping an exact-size heap block so ASan sees any read past the end. The
 * JSON header is also parsed alone from its own exact-size block, so a parser that reads past the
 * header into the tensor data is caught too. docs/fuzzing.md runs it. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/safetensors.h"
#include "runtime/safetensors_header.h"
#include "tests/fuzz/fuzz_support.h"

static void parse_header_alone(const uint8_t *data, size_t size) {
  if (size < 8)
    return;
  uint64_t length = 0;
  for (int i = 7; i >= 0; i--)
    length = length << 8 | data[i];
  if (length > size - 8)
    return;
  unsigned char *text = fuzz_heap_copy(data + 8, (size_t)length);
  tf_safetensors_header header;
  tf_status_free(tf_safetensors_header_parse("fuzz.safetensors", text, (size_t)length, &header));
  tf_safetensors_header_clear(&header);
  free(text);
}

/* Every view is consistent, readable, aligned and found again by its name; every metadata key too. */
static void check_views(const tf_safetensors *file) {
  tf_safetensors_tensor view, found;
  for (int32_t i = 0; tf_safetensors_at(file, i, &view); i++) {
    fuzz_touch(view.data, view.bytes);
    if (view.rank < 0 || view.rank > TF_MAX_RANK || (view.bytes == 0) != (view.data == NULL))
      __builtin_trap();
    if (view.dtype != TF_SAFETENSORS_OTHER) {
      size_t element = (size_t)tf_file_dtype_size(view.dtype);
      if ((size_t)view.count * element != view.bytes || (uintptr_t)view.data % element != 0)
        __builtin_trap();
    }
    if (tf_safetensors_find(file, view.name, &found) || found.data != view.data || found.bytes != view.bytes)
      __builtin_trap();
  }
  const char *key, *value;
  for (int32_t i = 0; tf_safetensors_metadata_at(file, i, &key, &value); i++)
    if (tf_safetensors_metadata(file, key) != value)
      __builtin_trap();
}

static void round_trip(const tf_safetensors *file) {
  tf_safetensors_writer *writer = NULL;
  if (tf_safetensors_writer_create(&writer))
    __builtin_trap();
  tf_safetensors_tensor view;
  const char *key, *value;
  bool writable = true;
  for (int32_t i = 0; tf_safetensors_metadata_at(file, i, &key, &value); i++)
    if (tf_safetensors_writer_set_metadata(writer, key, value))
      __builtin_trap();
  for (int32_t i = 0; tf_safetensors_at(file, i, &view); i++) {
    if (view.dtype == TF_SAFETENSORS_OTHER) {
      writable = false; /* the writer takes tightfit's dtypes only */
      continue;
    }
    if (tf_safetensors_writer_add(writer, view.name, view.dtype, view.rank, view.shape, view.data))
      __builtin_trap();
  }
  if (writable) {
    char path[96];
    snprintf(path, sizeof(path), "%s/tf_fuzz_safetensors_%ld.safetensors", fuzz_scratch_folder(), (long)getpid());
    tf_status status = tf_safetensors_writer_write(writer, path);
    tf_safetensors *again = NULL;
    if (status || tf_safetensors_open(path, &again) || tf_safetensors_count(again) != tf_safetensors_count(file) ||
        tf_safetensors_metadata_count(again) != tf_safetensors_metadata_count(file))
      __builtin_trap();
    for (int32_t i = 0; tf_safetensors_at(file, i, &view); i++) {
      tf_safetensors_tensor other;
      if (tf_safetensors_find(again, view.name, &other) || other.dtype != view.dtype || other.rank != view.rank ||
          memcmp(other.shape, view.shape, sizeof(view.shape)) != 0 || other.bytes != view.bytes ||
          (view.bytes && memcmp(other.data, view.data, view.bytes) != 0))
        __builtin_trap();
    }
    for (int32_t i = 0; tf_safetensors_metadata_at(file, i, &key, &value); i++) {
      const char *other = tf_safetensors_metadata(again, key);
      if (!other || strcmp(other, value) != 0)
        __builtin_trap();
    }
    tf_safetensors_close(again);
    unlink(path);
  }
  tf_safetensors_writer_destroy(writer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  parse_header_alone(data, size);
  tf_safetensors *file = NULL;
  tf_status status = tf_safetensors_open(fuzz_memory_file(data, size), &file);
  if (!status) {
    check_views(file);
    round_trip(file);
  } else if (!*tf_status_message(status)) {
    __builtin_trap(); /* an error must say what is wrong */
  }
  tf_status_free(status);
  tf_safetensors_close(file);
  return 0;
}
