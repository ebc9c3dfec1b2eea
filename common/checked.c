#include "common/checked.h"

#include <stddef.h>

bool tf_checked_product_i64(const int64_t *values, int32_t count, int64_t *out) {
  int64_t product = 1;
  for (int32_t i = 0; i < count; i++)
    if (values[i] < 0 || !tf_checked_mul_i64(product, values[i], &product))
      return false;
  *out = product;
  return true;
}

tf_parse_result tf_parse_i64(const char *text, int64_t minimum, int64_t maximum, int64_t *value) {
  if (!text || minimum > maximum)
    return TF_PARSE_SYNTAX;
  const char *at = text;
  /* A '-' is always read as a sign: "-1" where counts start at 0 is a number out of range, not
   * text that is not a number. */
  bool negative = *at == '-';
  if (negative)
    at++;
  if (*at < '0' || *at > '9')
    return TF_PARSE_SYNTAX;
  /* Accumulate the magnitude as a negative number: -INT64_MIN does not exist, INT64_MIN does. Once
   * out of range, keep scanning so that trailing garbage is still reported as a syntax error. */
  int64_t accumulated = 0;
  bool overflow = false;
  for (; *at >= '0' && *at <= '9'; at++) {
    int digit = *at - '0';
    if (overflow || accumulated < (INT64_MIN + digit) / 10)
      overflow = true;
    else
      accumulated = accumulated * 10 - digit;
  }
  if (*at != '\0')
    return TF_PARSE_SYNTAX;
  if (overflow || (!negative && accumulated == INT64_MIN))
    return TF_PARSE_RANGE;
  int64_t parsed = negative ? accumulated : -accumulated;
  if (parsed < minimum || parsed > maximum)
    return TF_PARSE_RANGE;
  *value = parsed;
  return TF_PARSE_OK;
}
