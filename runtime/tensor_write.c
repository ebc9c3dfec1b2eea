/* runtime/tensor_write.h: file tensors into session buffers, converted. */
#include "runtime/tensor_write.h"

#include <stdlib.h>
#include <string.h>

#include "core/half_bits.h"
#include "tightfit/plan.h"

#define STAGING_ELEMENTS ((int64_t)1 << 18) /* 1 MiB of f32 */

static bool is_float(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

bool tf_tensor_write_convertible(tf_dtype dtype, tf_dtype file_dtype) {
  return is_float(dtype) ? is_float(file_dtype) || file_dtype == TF_FILE_F64 : file_dtype == dtype;
}

/* Element `i` of the file tensor as f32 bits. */
static uint32_t element_bits(const tf_safetensors_tensor *v, int64_t i) {
  const char *at = (const char *)v->data;
  if (v->dtype == TF_FILE_F64) {
    double d;
    memcpy(&d, at + 8 * i, 8);
    float f = (float)d;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
  }
  if (v->dtype == TF_F32) {
    uint32_t bits;
    memcpy(&bits, at + 4 * i, 4);
    return bits;
  }
  uint16_t h;
  memcpy(&h, at + 2 * i, 2);
  return v->dtype == TF_BF16 ? tf_f32_bits_from_bf16(h) : tf_f32_bits_from_f16(h);
}

/* Elements [begin, begin + count) of buffer b from the file's, converted, into staging. */
static void convert(const tf_plan_buffer *b, const tf_safetensors_tensor *v, int64_t first, bool transpose,
                    int64_t begin, int64_t count, void *staging) {
  const int64_t element = tf_dtype_size(b->dtype);
  const int64_t rows = transpose ? b->shape[0] : 1, cols = transpose ? b->shape[1] : 1;
  for (int64_t k = 0; k < count; k++) {
    const int64_t i = begin + k, source = first + (transpose ? (i % cols) * rows + i / cols : i);
    if (!is_float(b->dtype)) { /* an integer tensor of the same dtype, transposed */
      memcpy((char *)staging + element * k, (const char *)v->data + element * source, (size_t)element);
      continue;
    }
    const uint32_t bits = element_bits(v, source);
    if (b->dtype == TF_F32)
      memcpy((char *)staging + 4 * k, &bits, 4);
    else
      ((uint16_t *)staging)[k] = b->dtype == TF_BF16 ? tf_bf16_from_f32_bits(bits) : tf_f16_from_f32_bits(bits);
  }
}

tf_status tf_tensor_write(tf_session *session, int32_t id, const tf_safetensors_tensor *view, int64_t first,
                          bool transpose) {
  const tf_plan_buffer *b = &tf_session_plan(session)->buffers[id];
  const int64_t element = tf_dtype_size(b->dtype), total = b->bytes / element;
  if (!transpose && view->dtype == b->dtype)
    return tf_session_write_range(session, id, 0, (const char *)view->data + first * element, b->bytes);
  void *staging = malloc((size_t)STAGING_ELEMENTS * 8);
  if (!staging)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "no memory to convert '%s'", b->name);
  tf_status status = NULL;
  for (int64_t begin = 0; begin < total && !status; begin += STAGING_ELEMENTS) {
    const int64_t count = total - begin < STAGING_ELEMENTS ? total - begin : STAGING_ELEMENTS;
    convert(b, view, first, transpose, begin, count, staging);
    status = tf_session_write_range(session, id, begin * element, staging, count * element);
  }
  free(staging);
  return status;
}
