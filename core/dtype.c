/* Names and sizes of the core vocabulary (tightfit/types.h): element types, initialisers, precisions. */
#include "tightfit/types.h"

#include <inttypes.h>
#include <stdio.h>

const char *tf_dtype_name(tf_dtype dtype) {
  static const char *const names[TF_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32", "i64", "u8"};
  return (int)dtype >= 0 && dtype < TF_DTYPE_COUNT ? names[dtype] : "?";
}

int64_t tf_dtype_size(tf_dtype dtype) {
  static const int64_t sizes[TF_DTYPE_COUNT] = {4, 2, 2, 4, 8, 1};
  return (int)dtype >= 0 && dtype < TF_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *tf_init_name(tf_init_kind kind) {
  static const char *const names[TF_INIT_COUNT] = {"none",           "zeros",          "ones",   "normal",   "uniform",
                                                   "xavier_uniform", "kaiming_normal", "arange", "external", "fill"};
  return (int)kind >= 0 && kind < TF_INIT_COUNT ? names[kind] : "?";
}

const char *tf_precision_name(tf_precision precision) {
  static const char *const names[] = {"f32", "bf16", "f16"};
  if (precision == TF_PRECISION_INHERIT)
    return "inherit";
  return (int)precision >= 0 && precision <= TF_PRECISION_F16 ? names[precision] : "?";
}

const char *tf_format_shape(const int64_t *shape, int32_t rank, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, size, "[");
  for (int32_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? "," : "", shape[i]);
  if (used < size)
    snprintf(buf + used, size - used, "]");
  return buf;
}
