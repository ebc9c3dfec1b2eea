/* Copies into fresh malloc'ed memory, for the layers that keep their own strings and arrays (the
 * IR, plans, files being written). */
#ifndef TIGHTFIT_COMMON_COPY_H
#define TIGHTFIT_COMMON_COPY_H

#include <stddef.h>
#include <stdint.h>

/* A copy of `text`; NULL for NULL text or when out of memory. */
char *tf_copy_string(const char *text);

/* An array of `capacity` elements of `element` bytes (at least one) holding the first `count` of
 * `array`; NULL when out of memory. */
void *tf_copy_array(const void *array, int32_t count, int32_t capacity, size_t element);

#endif
