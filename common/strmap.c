#include "common/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *key) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* The slot holding `key` (whose hash is h), or the empty slot where it would go. Slots remember
 * their key's hash: a probe compares strings only on equal hashes, and growing rehashes nothing. */
static int32_t slot_of(const tf_strmap *map, const char *key, uint64_t h) {
  const uint64_t mask = (uint64_t)map->capacity - 1;
  for (uint64_t i = h & mask;; i = (i + 1) & mask)
    if (!map->keys[i] || (map->hashes[i] == h && strcmp(map->keys[i], key) == 0))
      return (int32_t)i;
}

int32_t tf_strmap_get(const tf_strmap *map, const char *key) {
  if (map->capacity == 0)
    return -1;
  int32_t slot = slot_of(map, key, hash(key));
  return map->keys[slot] ? map->values[slot] : -1;
}

/* Reallocates to `capacity` slots (a power of two above twice the count), moving every entry. */
static bool resize(tf_strmap *map, int32_t capacity) {
  tf_strmap bigger = {calloc((size_t)capacity, sizeof(char *)), calloc((size_t)capacity, sizeof(int32_t)),
                      calloc((size_t)capacity, sizeof(uint64_t)), 0, capacity};
  if (!bigger.keys || !bigger.values || !bigger.hashes) {
    tf_strmap_clear(&bigger);
    return false;
  }
  for (int32_t i = 0; i < map->capacity; i++) {
    if (map->keys[i]) {
      int32_t slot = slot_of(&bigger, map->keys[i], map->hashes[i]);
      bigger.keys[slot] = map->keys[i];
      bigger.values[slot] = map->values[i];
      bigger.hashes[slot] = map->hashes[i];
      bigger.count++;
    }
  }
  tf_strmap_clear(map);
  *map = bigger;
  return true;
}

bool tf_strmap_reserve(tf_strmap *map, int32_t count) {
  int32_t capacity = map->capacity ? map->capacity : 64;
  while ((int64_t)count * 2 >= capacity) {
    if (capacity > INT32_MAX / 2)
      return false;
    capacity *= 2;
  }
  return capacity == map->capacity || resize(map, capacity);
}

bool tf_strmap_put(tf_strmap *map, const char *key, int32_t value) {
  if ((map->count + 1) * 2 > map->capacity && !resize(map, map->capacity ? map->capacity * 2 : 64))
    return false;
  const uint64_t h = hash(key);
  int32_t slot = slot_of(map, key, h);
  if (!map->keys[slot]) {
    map->keys[slot] = key;
    map->hashes[slot] = h;
    map->count++;
  }
  map->values[slot] = value;
  return true;
}

bool tf_strmap_copy(const tf_strmap *from, tf_strmap *to,
                    const char *(*key_of)(const char *key, int32_t value, void *context), void *context) {
  *to = (tf_strmap){0};
  if (from->capacity == 0)
    return true;
  const size_t n = (size_t)from->capacity;
  tf_strmap copy = {calloc(n, sizeof(char *)), malloc(n * sizeof(int32_t)), malloc(n * sizeof(uint64_t)), from->count,
                    from->capacity};
  if (!copy.keys || !copy.values || !copy.hashes) {
    tf_strmap_clear(&copy);
    return false;
  }
  memcpy(copy.values, from->values, n * sizeof(int32_t));
  memcpy(copy.hashes, from->hashes, n * sizeof(uint64_t));
  for (size_t i = 0; i < n; i++)
    copy.keys[i] = from->keys[i] ? key_of(from->keys[i], from->values[i], context) : NULL;
  *to = copy;
  return true;
}

void tf_strmap_clear(tf_strmap *map) {
  free((void *)map->keys);
  free(map->values);
  free(map->hashes);
  map->keys = NULL;
  map->values = NULL;
  map->hashes = NULL;
  map->count = map->capacity = 0;
}
