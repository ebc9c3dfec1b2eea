#include "common/file.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tf_status tf_file_read(const char *path, void **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *file = fopen(path, "rb");
  if (!file)
    return tf_status_new(TF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  tf_status status = NULL;
  size_t capacity = 1 << 16, used = 0;
  unsigned char *buffer = malloc(capacity);
  while (buffer) {
    used += fread(buffer + used, 1, capacity - used, file);
    if (used < capacity)
      break;
    unsigned char *bigger = capacity <= SIZE_MAX / 2 ? realloc(buffer, capacity * 2) : NULL;
    if (!bigger) {
      free(buffer);
      buffer = NULL;
      break;
    }
    buffer = bigger;
    capacity *= 2;
  }
  if (!buffer)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "%s: file too large to read into memory", path);
  else if (ferror(file))
    status = tf_status_new(TF_ERR_IO, "%s: read failed: %s", path, strerror(errno));
  fclose(file);
  if (status) {
    free(buffer);
    return status;
  }
  *data = buffer;
  *size = used;
  return NULL;
}

