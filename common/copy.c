/* Copies of strings and arrays (common/copy.h). */
#include "common/copy.h"

#include <stdlib.h>
#include <string.h>

char *tf_copy_string(const char *text) {
  if (!text)
    return NULL;
  size_t length = strlen(text) + 1;
  char *copy = malloc(length);
  if (copy)
    memcpy(copy, text, length);
  return copy;
}

void *tf_copy_array(const void *array, int32_t count, int32_t capacity, size_t element) {
  void *copy = malloc(element * (size_t)(capacity > 0 ? capacity : 1));
  if (copy && count > 0)
    memcpy(copy, array, element * (size_t)count);
  return copy;
}
