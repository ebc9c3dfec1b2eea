/* Checked arithmetic and strict integer parsing for numbers that come from files.
 *
 * Every size, offset and counter read from a file is hostile until checked: a product of shape
 * dimensions, a sum of offsets or a counter near INT64_MAX must be refused with a message, never
 * wrap (undefined behaviour for signed integers) or saturate silently. The helpers return false
 * instead of a wrong result; the caller turns that into a tf_status naming the file and the numbers. */
#ifndef TIGHTFIT_COMMON_CHECKED_H
#define TIGHTFIT_COMMON_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2^53: the largest count that a double (and so a JSON reader, or pow() in an optimizer) still
 * represents exactly, with every smaller integer. The bound for file-supplied step counters. */
#define TF_CHECKED_EXACT_DOUBLE_MAX ((int64_t)1 << 53)

/* *out = a + b; false (and *out untouched) when the sum does not fit in int64. */
static inline bool tf_checked_add_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t sum;
#if defined(__GNUC__) || defined(__clang__)
  if (__builtin_add_overflow(a, b, &sum))
    return false;
#else
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
    return false;
  sum = a + b;
#endif
  *out = sum;
  return true;
}

/* *out = a - b; false (and *out untouched) when the difference does not fit in int64. */
static inline bool tf_checked_sub_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t difference;
#if defined(__GNUC__) || defined(__clang__)
  if (__builtin_sub_overflow(a, b, &difference))
    return false;
#else
  if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))
    return false;
  difference = a - b;
#endif
  *out = difference;
  return true;
}

/* *out = a * b; false (and *out untouched) when the product does not fit in int64. */
static inline bool tf_checked_mul_i64(int64_t a, int64_t b, int64_t *out) {
  int64_t product;
#if defined(__GNUC__) || defined(__clang__)
  if (__builtin_mul_overflow(a, b, &product))
    return false;
#else
  if (a != 0 && b != 0 &&
      ((a == -1 && b == INT64_MIN) || (b == -1 && a == INT64_MIN) ||
       (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a) : (b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b))))
    return false;
  product = a * b;
#endif
  *out = product;
  return true;
}

/* *out = values[0] * ... * values[count - 1] (1 when count is 0: a scalar's element count); false
 * when a value is negative or the product does not fit in int64. For shapes read from files. */
bool tf_checked_product_i64(const int64_t *values, int32_t count, int64_t *out);

/* Why tf_parse_i64 refused a text. */
typedef enum tf_parse_result {
  TF_PARSE_OK = 0,
  TF_PARSE_SYNTAX, /* empty, not decimal digits, a sign where none is allowed, or trailing text */
  TF_PARSE_RANGE   /* decimal, but outside [minimum, maximum] (also when beyond int64 itself) */
} tf_parse_result;

/* Parses `text` as exactly one decimal integer in [minimum, maximum] into *value: an optional '-'
 * (a negative number below `minimum` is TF_PARSE_RANGE), then one or more digits, nothing else (no spaces, '+', "0x",
 * exponent or trailing text). Unlike strtoll it never saturates: "99999999999999999999" is TF_PARSE_RANGE, not
 * INT64_MAX. *value is written only on TF_PARSE_OK. Does not read errno or the locale. */
tf_parse_result tf_parse_i64(const char *text, int64_t minimum, int64_t maximum, int64_t *value);

#ifdef __cplusplus
}
#endif
#endif
