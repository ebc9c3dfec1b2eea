/* libFuzzer target for the .npy reader: any bytes must give a clean error or an array whose every
 * data byte can be read, and an array that opens must survive write -> read unchanged (dtype, shape,
 * bytes). The reader takes a path and maps it: the input goes to a memfd, and heap_mapping.c makes the
 * mapping an exact-size heap block so ASan sees any read past the end. docs/fuzzing.md runs it. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/npy.h"
#include "tests/fuzz/fuzz_support.h"

static void check_array(const tf_npy *npy) {
  int32_t rank = tf_npy_rank(npy);
  int64_t count = 1;
  for (int32_t d = 0; d < rank; d++)
    count *= tf_npy_shape(npy)[d]; /* the reader refused any product that overflows */
  if (rank < 0 || rank > TF_MAX_RANK || count != tf_npy_count(npy) ||
      (size_t)count * (size_t)tf_file_dtype_size(tf_npy_dtype(npy)) != tf_npy_bytes(npy))
    __builtin_trap();
  if (tf_npy_bytes(npy) && (uintptr_t)tf_npy_data(npy) % (uintptr_t)tf_file_dtype_size(tf_npy_dtype(npy)) != 0)
    __builtin_trap(); /* promised: aligned to the element size */
  fuzz_touch(tf_npy_data(npy), tf_npy_bytes(npy));
}

static void round_trip(const tf_npy *npy) {
  char path[96];
  snprintf(path, sizeof(path), "%s/tf_fuzz_npy_%ld.npy", fuzz_scratch_folder(), (long)getpid());
  tf_status status = tf_npy_write(path, tf_npy_dtype(npy), tf_npy_rank(npy), tf_npy_shape(npy), tf_npy_data(npy));
  tf_npy *again = NULL;
  if (status || tf_npy_open(path, &again))
    __builtin_trap();
  if (tf_npy_dtype(again) != tf_npy_dtype(npy) || tf_npy_rank(again) != tf_npy_rank(npy) ||
      memcmp(tf_npy_shape(again), tf_npy_shape(npy), sizeof(int64_t) * (size_t)tf_npy_rank(npy)) != 0 ||
      tf_npy_bytes(again) != tf_npy_bytes(npy) ||
      (tf_npy_bytes(npy) && memcmp(tf_npy_data(again), tf_npy_data(npy), tf_npy_bytes(npy)) != 0))
    __builtin_trap();
  tf_npy_close(again);
  unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tf_npy *npy = NULL;
  tf_status status = tf_npy_open(fuzz_memory_file(data, size), &npy);
  if (!status) {
    check_array(npy);
    round_trip(npy);
  } else if (!*tf_status_message(status)) {
    __builtin_trap(); /* an error must say what is wrong */
  }
  tf_status_free(status);
  tf_npy_close(npy);
  return 0;
}
