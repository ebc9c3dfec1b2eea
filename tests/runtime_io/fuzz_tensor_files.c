/* libFuzzer target for the .npy and safetensors readers: the first byte picks the format, the rest
 * is the file. Any bytes must give a clean error or a file whose every tensor byte can be read;
 * a safetensors file that opens must survive a write -> read round trip unchanged. Built only with
 * -DTIGHTFIT_FUZZ=ON (clang); run e.g. `fuzz_tensor_files -max_total_time=60`. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/npy.h"
#include "runtime/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads every byte, so that ASan sees any view that strays outside its memory. */
static void touch(const void *data, size_t bytes) {
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < bytes; i++)
    sink ^= ((const unsigned char *)data)[i];
  (void)sink;
}

static void round_trip(const tf_safetensors *file, const char *path) {
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
    touch(view.data, view.bytes);
    if (view.dtype == TF_SAFETENSORS_OTHER) {
      writable = false;
      continue;
    }
    if (tf_safetensors_writer_add(writer, view.name, view.dtype, view.rank, view.shape, view.data))
      __builtin_trap();
  }
  if (writable) {
    tf_status status = tf_safetensors_writer_write(writer, path);
    tf_safetensors *again = NULL;
    if (status || tf_safetensors_open(path, &again) || tf_safetensors_count(again) != tf_safetensors_count(file))
      __builtin_trap();
    for (int32_t i = 0; tf_safetensors_at(file, i, &view); i++) {
      tf_safetensors_tensor other;
      if (tf_safetensors_find(again, view.name, &other) || other.bytes != view.bytes ||
          (view.bytes && memcmp(other.data, view.data, view.bytes) != 0))
        __builtin_trap();
    }
    tf_safetensors_close(again);
  }
  tf_safetensors_writer_destroy(writer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  char path[64], copy[80];
  snprintf(path, sizeof(path), "/tmp/tf_fuzz_tensor_%ld", (long)getpid());
  snprintf(copy, sizeof(copy), "%s.copy", path);
  FILE *file = fopen(path, "wb");
  if (!file)
    return 0;
  fwrite(data + 1, 1, size - 1, file);
  fclose(file);
  if (data[0] & 1) {
    tf_npy *npy = NULL;
    tf_status status = tf_npy_open(path, &npy);
    if (!status)
      touch(tf_npy_data(npy), tf_npy_bytes(npy));
    tf_status_free(status);
    tf_npy_close(npy);
  } else {
    tf_safetensors *st = NULL;
    tf_status status = tf_safetensors_open(path, &st);
    if (!status)
      round_trip(st, copy);
    tf_status_free(status);
    tf_safetensors_close(st);
  }
  unlink(path);
  unlink(copy);
  return 0;
}
