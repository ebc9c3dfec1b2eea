/* A string -> int32 hash map (open addressing). Keys are borrowed: the caller keeps them alive
 * while they are in the map (the IR keys it by the names it owns). */
#ifndef TIGHTFIT_COMMON_STRMAP_H
#define TIGHTFIT_COMMON_STRMAP_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tf_strmap {
  const char **keys;
  int32_t *values;
  uint64_t *hashes;        /* each slot's key's hash */
  int32_t count, capacity; /* capacity is 0 or a power of two */
} tf_strmap;

/* Returns the value of `key`, or -1 when absent. */
int32_t tf_strmap_get(const tf_strmap *map, const char *key);
/* Inserts or replaces `key`; false when memory runs out. */
bool tf_strmap_put(tf_strmap *map, const char *key, int32_t value);
/* Makes room for `count` keys without growing again; false when memory runs out. */
bool tf_strmap_reserve(tf_strmap *map, int32_t count);
/* Makes `to` (empty) a copy of `from` whose keys are key_of(key, value, context): equal strings
 * that `to`'s owner keeps alive (a copied IR's own names); false when memory runs out. */
bool tf_strmap_copy(const tf_strmap *from, tf_strmap *to,
                    const char *(*key_of)(const char *key, int32_t value, void *context), void *context);
/* Frees the map's arrays (not the keys). */
void tf_strmap_clear(tf_strmap *map);

#ifdef __cplusplus
}
#endif
#endif
