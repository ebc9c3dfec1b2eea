/* tf_session_find_nonfinite (tightfit/runtime.h): the check behind `tightfit train --check-finite`
 * and the check of loaded weights. Buffers are read in pieces through the session's scratch (up to
 * 1 MiB, allocated at create: runtime/session_scratch.h) or a 16 KiB stack array, so the scan
 * allocates nothing and can run between training steps (tests/alloc_probe watches those). On a
 * device each read is a round trip: in 16 KiB pieces gpt2-small's scan took about half a second a step on
 * an H200 (1,011 ms steps with it, 466 ms of kernels). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/session_scratch.h"
#include "tightfit/runtime.h"

enum { CHUNK_BYTES = 16 << 10 };

/* The value of a non-finite element: NaN, or an infinity of its sign. */
static double nonfinite_value(bool nan, bool negative) { return nan ? NAN : negative ? -INFINITY : INFINITY; }

/* Whether any of `count` elements of `bits` has an all-ones exponent (NaN or infinity): no exit
 * inside the loop, so the compiler vectorises it. The scan of every weight runs after each of a
 * run's first steps: with an exit per element it cost gpt2-small cut to two layers ~100 ms of its
 * ~1 s step on a Zen 4 core, ~45 ms since (most of it the copy through the scratch). */
static bool any_nonfinite32(const uint32_t *bits, int64_t count) {
  uint32_t any = 0;
  for (int64_t i = 0; i < count; i++)
    any |= (uint32_t)((bits[i] & 0x7F800000u) == 0x7F800000u);
  return any != 0;
}

static bool any_nonfinite16(const uint16_t *bits, int64_t count, uint16_t exponent) {
  uint32_t any = 0;
  for (int64_t i = 0; i < count; i++)
    any |= (uint32_t)((bits[i] & exponent) == exponent);
  return any != 0;
}

/* The first non-finite element of `count` elements of `dtype` at `data`, or -1; *value gets it. */
static int64_t first_nonfinite(tf_dtype dtype, const void *data, int64_t count, double *value) {
  if (dtype == TF_F32) {
    const uint32_t *bits = data;
    if (!any_nonfinite32(bits, count))
      return -1;
    for (int64_t i = 0; i < count; i++)
      if ((bits[i] & 0x7F800000u) == 0x7F800000u) {
        *value = nonfinite_value((bits[i] & 0x007FFFFFu) != 0, bits[i] >> 31);
        return i;
      }
    return -1;
  }
  const uint16_t exponent = dtype == TF_F16 ? 0x7C00 : 0x7F80, mantissa = dtype == TF_F16 ? 0x03FF : 0x007F;
  const uint16_t *bits = data;
  if (!any_nonfinite16(bits, count, exponent))
    return -1;
  for (int64_t i = 0; i < count; i++)
    if ((bits[i] & exponent) == exponent) {
      *value = nonfinite_value((bits[i] & mantissa) != 0, bits[i] >> 15);
      return i;
    }
  return -1;
}

static bool is_float(tf_dtype dtype) { return dtype == TF_F32 || dtype == TF_F16 || dtype == TF_BF16; }

tf_status tf_session_find_nonfinite(tf_session *session, uint32_t roles, tf_nonfinite *out) {
  *out = (tf_nonfinite){-1, -1, 0};
  const tf_plan *plan = tf_session_plan(session);
  _Alignas(8) unsigned char stack_chunk[CHUNK_BYTES];
  /* the session's scratch when it is larger: one read per piece, and a device read is a round trip */
  int64_t chunk_bytes = 0;
  unsigned char *chunk = tf_session_scratch(session, &chunk_bytes);
  if (!chunk || chunk_bytes < CHUNK_BYTES) {
    chunk = stack_chunk;
    chunk_bytes = CHUNK_BYTES;
  }
  for (int32_t id = 0; id < plan->n_buffers; id++) {
    const tf_plan_buffer *b = &plan->buffers[id];
    if (!(roles & (1u << b->role)) || !is_float(b->dtype) || b->bytes == 0 || !tf_session_holds(session, id))
      continue;
    const int64_t element = tf_dtype_size(b->dtype), per_chunk = chunk_bytes / element;
    for (int64_t first = 0; first * element < b->bytes; first += per_chunk) {
      const int64_t bytes =
          b->bytes - first * element < per_chunk * element ? b->bytes - first * element : per_chunk * element;
      TF_RETURN_IF_ERROR(tf_session_read_range(session, id, first * element, chunk, bytes));
      double value = 0;
      int64_t bad = first_nonfinite(b->dtype, chunk, bytes / element, &value);
      if (bad >= 0) {
        *out = (tf_nonfinite){id, first + bad, value};
        return NULL;
      }
    }
  }
  return NULL;
}
