#include "common/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *key) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}

static int32_t slot_of(const tf_strmap *map, const char *key) {
  uint64_t mask = (uint64_t)map->capacity - 1;
  for (uint64_t i = hash(key) & mask;; i = (i + 1) & mask)
    if (!map->keys[i] || strcmp(map->keys[i], key) == 0)
      return (int32_t)i;
}

int32_t tf_strmap_get(const tf_strmap *map, const char *key) {
  if (map->capacity == 0)
    return -1;
  int32_t slot = slot_of(map, key);
  return map->keys[slot] ? map->values[slot] : -1;
}

static bool grow(tf_strmap *map) {
  int32_t capacity = map->capacity ? map->capacity * 2 : 64;
  tf_strmap bigger = {calloc((size_t)capacity, sizeof(char *)), calloc((size_t)capacity, sizeof(int32_t)), 0, capacity};
  if (!bigger.keys || !bigger.values) {
    free(bigger.keys);
    free(bigger.values);
    return false;
  }
  for (int32_t i = 0; i < map->capacity; i++) {
    if (map->keys[i]) {
      int32_t slot = slot_of(&bigger, map->keys[i]);
      bigger.keys[slot] = map->keys[i];
      bigger.values[slot] = map->values[i];
      bigger.count++;
    }
  }
  tf_strmap_clear(map);
  *map = bigger;
  return true;
}

bool tf_strmap_put(tf_strmap *map, const char *key, int32_t value) {
  if ((map->count + 1) * 2 > map->capacity && !grow(map))
    return false;
  int32_t slot = slot_of(map, key);
  if (!map->keys[slot]) {
    map->keys[slot] = key;
    map->count++;
  }
  map->values[slot] = value;
  return true;
}

void tf_strmap_clear(tf_strmap *map) {
  free((void *)map->keys);
  free(map->values);
  map->keys = NULL;
  map->values = NULL;
  map->count = map->capacity = 0;
}
