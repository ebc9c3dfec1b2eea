/* The plan file's checksum trailer (plan/plan_checksum.h). */
#include "plan/plan_checksum.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/xxh64.h"

static const char marker[8] = {'T', 'F', 'P', 'L', 'X', 'X', '6', '4'};

static void put_u64(unsigned char *out, uint64_t v) {
  for (int i = 0; i < 8; i++)
    out[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)in[i] << (8 * i);
  return v;
}

tf_status tf_plan_checksum_append(void **data, size_t *size) {
  unsigned char *grown = realloc(*data, *size + TF_PLAN_TRAILER_BYTES);
  if (!grown)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "plan: no memory for the checksum");
  put_u64(grown + *size, tf_xxh64(grown, *size, 0));
  memcpy(grown + *size + 8, marker, sizeof(marker));
  *data = grown;
  *size += TF_PLAN_TRAILER_BYTES;
  return NULL;
}

size_t tf_plan_checksum_body(const void *data, size_t size, bool *has_trailer) {
  *has_trailer = data && size > TF_PLAN_TRAILER_BYTES &&
                 memcmp((const char *)data + size - sizeof(marker), marker, sizeof(marker)) == 0;
  return *has_trailer ? size - TF_PLAN_TRAILER_BYTES : size;
}

tf_status tf_plan_checksum_check(const void *data, size_t size, const char *source) {
  bool has_trailer;
  const size_t body = tf_plan_checksum_body(data, size, &has_trailer);
  if (!has_trailer)
    return NULL;
  const uint64_t stored = get_u64((const unsigned char *)data + body), computed = tf_xxh64(data, body, 0);
  if (stored == computed)
    return NULL;
  return tf_status_new(TF_ERR_INVALID_INPUT,
                       "%s: checksum mismatch: the plan's bytes hash to %016" PRIx64 ", its trailer says %016" PRIx64
                       " (the file is damaged: compile the graph again)",
                       source, computed, stored);
}
