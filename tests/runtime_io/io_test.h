/* Helpers shared by the runtime_io tests: a scratch folder, writing and reading whole files, and
 * checking that a call was refused with the expected code and message. */
#ifndef TIGHTFIT_TESTS_RUNTIME_IO_IO_TEST_H
#define TIGHTFIT_TESTS_RUNTIME_IO_IO_TEST_H

#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/copy.h"
#include "runtime/npy.h"
#include "tightfit/compiler.h"
#include "tightfit/zoo.h"

/* A new scratch folder under $TMPDIR (or /tmp); NULL on failure. The caller frees it. */
static inline char *io_scratch_create(void) {
  const char *base = getenv("TMPDIR");
  char pattern[4096];
  snprintf(pattern, sizeof(pattern), "%s/tf_runtime_io_XXXXXX", base && *base ? base : "/tmp");
  return mkdtemp(pattern) ? tf_copy_string(pattern) : NULL;
}

/* Removes the files in `folder` (flat), then the folder, and frees the string. */
static inline void io_scratch_destroy(char *folder) {
  DIR *dir = folder ? opendir(folder) : NULL;
  if (dir) {
    struct dirent *entry;
    char path[4096];
    while ((entry = readdir(dir)) != NULL) {
      if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
        continue;
      snprintf(path, sizeof(path), "%s/%s", folder, entry->d_name);
      unlink(path);
    }
    closedir(dir);
    rmdir(folder);
  }
  free(folder);
}

/* The number of entries in `folder` whose name contains ".tmp" (leftover temporaries). */
static inline int io_count_temporaries(const char *folder) {
  DIR *dir = opendir(folder);
  int count = 0;
  if (!dir)
    return -1;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL)
    count += strstr(entry->d_name, ".tmp") != NULL;
  closedir(dir);
  return count;
}

/* Writes bytes[0..size) to folder/name; path receives the full path. */
static inline bool io_write_file(const char *folder, const char *name, const void *bytes, size_t size, char *path,
                                 size_t capacity) {
  snprintf(path, capacity, "%s/%s", folder, name);
  FILE *file = fopen(path, "wb");
  if (!file)
    return false;
  bool ok = fwrite(bytes, 1, size, file) == size;
  return fclose(file) == 0 && ok;
}

/* Reads all of `path` into a new buffer (the caller frees it); NULL on failure. */
static inline unsigned char *io_read_file(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  *size = 0;
  if (!file)
    return NULL;
  size_t capacity = 1 << 16;
  unsigned char *data = malloc(capacity);
  while (data) {
    *size += fread(data + *size, 1, capacity - *size, file);
    if (*size < capacity)
      break;
    unsigned char *bigger = realloc(data, capacity * 2);
    if (!bigger)
      free(data);
    data = bigger;
    capacity *= 2;
  }
  fclose(file);
  return data;
}

/* Checks that `status` failed with `code` and a message containing `phrase` and `path`; frees it. */
static inline void io_check_refusal(tf_test_counts *counts, const char *what, tf_status status, tf_code code,
                                    const char *phrase, const char *path) {
  const char *message = tf_status_message(status);
  bool ok = status && tf_status_code(status) == code && strstr(message, phrase) && (!path || strstr(message, path));
  CHECK(counts, ok, "%s: expected %s containing \"%s\", got %s: %s", what, tf_code_name(code), phrase,
        status ? tf_code_name(tf_status_code(status)) : "success", message);
  if (ok)
    printf("  refused %-28s %s\n", what, message);
  tf_status_free(status);
}

/* Writes DIR/FILE as a .npy of `dtype` and `shape` (a check in `counts`). */
static inline void io_write_npy(tf_test_counts *counts, const char *dir, const char *file, tf_dtype dtype, int32_t rank,
                                const int64_t *shape, const void *data) {
  char path[600];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  tf_status status = tf_npy_write(path, dtype, rank, shape, data);
  CHECK(counts, status == NULL, "write %s: %s", path, tf_status_message(status));
  tf_status_free(status);
}

/* The zoo's `preset` (knobs `overrides`) compiled for the cpu target with `bindings` and `accumulate`
 * micro-batches (0: the graph's); a check in `counts`; NULL when it failed. The caller destroys it. */
static inline tf_plan *io_compile_zoo(tf_test_counts *counts, const char *preset, const char *const *overrides,
                                      int32_t n, const char *bindings, int32_t accumulate) {
  tf_graph *graph = NULL;
  tf_plan *plan = NULL;
  tf_status status = tf_zoo_build(preset, overrides, n, &graph);
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = bindings;
  options.accumulate = accumulate;
  if (!status)
    status = tf_compile(graph, &options, &plan);
  tf_graph_destroy(graph);
  CHECK(counts, status == NULL, "compile %s: %s", preset, tf_status_message(status));
  tf_status_free(status);
  return plan;
}

#endif
