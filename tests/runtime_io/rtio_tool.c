/* A small command line over runtime/npy and runtime/safetensors for the python interop tests:
 *   rtio_tool npy-dump FILE                    prints dtype, shape and an FNV-1a hash of the data
 *   rtio_tool npy-write FILE DTYPE [DIM...]    writes pattern bytes (byte j = (j * 131 + 7) & 255)
 *   rtio_tool st-dump FILE                     prints metadata, then each tensor in name order
 *   rtio_tool st-write FILE [k=v | name:DTYPE:d1,d2 ...]
 *                                              writes metadata and pattern tensors (byte j =
 *                                              (j * 131 + 7 * strlen(name)) & 255)
 * Errors print "error: <code>: <message>" and exit 2. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/npy.h"
#include "runtime/safetensors.h"

static uint64_t fnv(const void *data, size_t size) {
  const unsigned char *bytes = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++)
    h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

static void print_shape(int32_t rank, const int64_t *shape) {
  printf("shape=");
  for (int32_t d = 0; d < rank; d++)
    printf("%s%" PRId64, d ? "," : "", shape[d]);
}

static int fail(tf_status status) {
  fprintf(stderr, "error: %s: %s\n", tf_code_name(tf_status_code(status)), tf_status_message(status));
  tf_status_free(status);
  return 2;
}

static bool parse_dtype(const char *text, tf_dtype *dtype) {
  static const struct {
    const char *name;
    tf_dtype dtype;
  } names[] = {{"f32", TF_F32}, {"f16", TF_F16}, {"bf16", TF_BF16},   {"i32", TF_I32},
               {"i64", TF_I64}, {"u8", TF_U8},   {"f64", TF_FILE_F64}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(text, names[i].name) == 0) {
      *dtype = names[i].dtype;
      return true;
    }
  return false;
}

static unsigned char *pattern(size_t bytes, size_t salt) {
  unsigned char *data = malloc(bytes ? bytes : 1);
  for (size_t j = 0; data && j < bytes; j++)
    data[j] = (unsigned char)((j * 131 + 7 * salt) & 255);
  return data;
}

static bool parse_dims(const char *text, int32_t *rank, int64_t *shape) {
  *rank = 0;
  while (*text) {
    if (*rank == TF_MAX_RANK)
      return false;
    char *end;
    shape[(*rank)++] = strtoll(text, &end, 10);
    if (end == text || (*end && *end != ','))
      return false;
    text = *end ? end + 1 : end;
  }
  return true;
}

static int npy_dump(const char *path) {
  tf_npy *npy;
  tf_status status = tf_npy_open(path, &npy);
  if (status)
    return fail(status);
  size_t element = (size_t)tf_file_dtype_size(tf_npy_dtype(npy));
  printf("dtype=%s ", tf_file_dtype_name(tf_npy_dtype(npy)));
  print_shape(tf_npy_rank(npy), tf_npy_shape(npy));
  printf(" count=%" PRId64 " bytes=%zu fnv=%016" PRIx64 " aligned=%d\n", tf_npy_count(npy), tf_npy_bytes(npy),
         fnv(tf_npy_data(npy), tf_npy_bytes(npy)), (int)((uintptr_t)tf_npy_data(npy) % element == 0));
  tf_npy_close(npy);
  return 0;
}

static int npy_write(const char *path, const char *dtype_name, int argc, char **dims) {
  tf_dtype dtype;
  if (!parse_dtype(dtype_name, &dtype) || argc > TF_MAX_RANK) {
    fprintf(stderr, "bad dtype or rank\n");
    return 2;
  }
  int64_t shape[TF_MAX_RANK], count = 1;
  for (int i = 0; i < argc; i++)
    count *= shape[i] = strtoll(dims[i], NULL, 10);
  unsigned char *data = pattern((size_t)(count * tf_file_dtype_size(dtype)), 1);
  tf_status status = tf_npy_write(path, dtype, argc, shape, data);
  free(data);
  return status ? fail(status) : 0;
}

static int st_dump(const char *path) {
  tf_safetensors *file;
  tf_status status = tf_safetensors_open(path, &file);
  if (status)
    return fail(status);
  const char *key, *value;
  for (int32_t i = 0; tf_safetensors_metadata_at(file, i, &key, &value); i++)
    printf("meta %s=%s\n", key, value);
  tf_safetensors_tensor view;
  for (int32_t i = 0; tf_safetensors_at(file, i, &view); i++) {
    size_t element = view.dtype == TF_SAFETENSORS_OTHER ? 1 : (size_t)tf_file_dtype_size(view.dtype);
    printf("tensor %s %s ", view.name, view.file_dtype);
    print_shape(view.rank, view.shape);
    printf(" count=%" PRId64 " bytes=%zu fnv=%016" PRIx64 " aligned=%d\n", view.count, view.bytes,
           fnv(view.data, view.bytes), (int)((uintptr_t)view.data % element == 0));
  }
  tf_safetensors_close(file);
  return 0;
}

static int st_write(const char *path, int argc, char **specs) {
  tf_safetensors_writer *writer;
  tf_status status = tf_safetensors_writer_create(&writer);
  if (status)
    return fail(status);
  unsigned char **buffers = calloc((size_t)argc + 1, sizeof(*buffers));
  for (int i = 0; i < argc && !status; i++) {
    char *spec = specs[i], *equals = strchr(spec, '='), *colon = strchr(spec, ':');
    if (equals && (!colon || equals < colon)) {
      *equals = '\0';
      status = tf_safetensors_writer_set_metadata(writer, spec, equals + 1);
      continue;
    }
    char *second = colon ? strchr(colon + 1, ':') : NULL;
    tf_dtype dtype;
    int32_t rank;
    int64_t shape[TF_MAX_RANK], count = 1;
    if (!second) {
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "bad spec '%s'", spec);
      break;
    }
    *colon = *second = '\0';
    if (!parse_dtype(colon + 1, &dtype) || !parse_dims(second + 1, &rank, shape)) {
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "bad spec for tensor '%s'", spec);
      break;
    }
    for (int32_t d = 0; d < rank; d++)
      count *= shape[d];
    buffers[i] = pattern((size_t)(count * tf_file_dtype_size(dtype)), strlen(spec));
    status = tf_safetensors_writer_add(writer, spec, dtype, rank, shape, buffers[i]);
  }
  if (!status)
    status = tf_safetensors_writer_write(writer, path);
  tf_safetensors_writer_destroy(writer);
  for (int i = 0; i < argc; i++)
    free(buffers[i]);
  free(buffers);
  return status ? fail(status) : 0;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "npy-dump") == 0)
    return npy_dump(argv[2]);
  if (argc >= 4 && strcmp(argv[1], "npy-write") == 0)
    return npy_write(argv[2], argv[3], argc - 4, argv + 4);
  if (argc >= 3 && strcmp(argv[1], "st-dump") == 0)
    return st_dump(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "st-write") == 0)
    return st_write(argv[2], argc - 3, argv + 3);
  fprintf(stderr,
          "usage: rtio_tool npy-dump FILE | npy-write FILE DTYPE DIM... | st-dump FILE | st-write FILE SPEC...\n");
  return 2;
}
