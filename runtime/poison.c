/* Poisoned regions: see poison.h. */
#include "runtime/poison.h"

#include <stdlib.h>
#include <string.h>

#define POISON_PIECE_BYTES ((int64_t)1 << 20)

static tf_status requested_of(bool *requested) {
  const char *value = getenv("TIGHTFIT_POISON_ARENA");
  *requested = value && strcmp(value, "1") == 0;
  if (value && *value && strcmp(value, "0") != 0 && strcmp(value, "1") != 0)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "TIGHTFIT_POISON_ARENA='%s'; use 1 (poison the arena) or 0", value);
  return NULL;
}

static tf_status poison_region(const tf_backend_vtable *backend, void *state, void *region, int64_t bytes,
                               const uint32_t *words) {
  tf_status status = NULL;
  for (int64_t at = 0; at < bytes && !status; at += POISON_PIECE_BYTES)
    status =
        backend->upload(state, region, at, words, bytes - at < POISON_PIECE_BYTES ? bytes - at : POISON_PIECE_BYTES);
  return status;
}

tf_status tf_poison_if_asked(const tf_backend_vtable *backend, void *state, const tf_plan *plan,
                             void *const regions[TF_REGION_COUNT]) {
  static const tf_region poisoned[] = {TF_REGION_ARENA, TF_REGION_IO};
  bool requested = false;
  TF_RETURN_IF_ERROR(requested_of(&requested));
  if (!requested)
    return NULL;
  uint32_t *words = malloc((size_t)POISON_PIECE_BYTES);
  if (!words)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "TIGHTFIT_POISON_ARENA=1: cannot allocate %lld bytes",
                         (long long)POISON_PIECE_BYTES);
  for (int64_t i = 0; i < POISON_PIECE_BYTES / 4; i++)
    words[i] = TF_POISON_WORD;
  tf_status status = NULL;
  for (size_t i = 0; i < sizeof(poisoned) / sizeof(poisoned[0]) && !status; i++)
    if (regions[poisoned[i]] && plan->region_bytes[poisoned[i]] > 0)
      status =
          tf_status_prefix(poison_region(backend, state, regions[poisoned[i]], plan->region_bytes[poisoned[i]], words),
                           "TIGHTFIT_POISON_ARENA=1: the %s region", tf_region_name(poisoned[i]));
  free(words);
  return status;
}
