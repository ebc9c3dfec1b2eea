/* tf_strmap (common/strmap.c), the name index of every graph: each slot keeps its key's hash, so a
 * probe compares strings only on equal hashes and growing rehashes nothing; tf_strmap_reserve makes
 * room up front. Random puts (new keys and replacements, many sharing long prefixes as graph names
 * do), with and without a reserve, checked after each step against a plain array searched from
 * scratch: every key present gives its last value, keys never put give -1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/strmap.h"

#define KEYS 3000

static tf_test_counts counts;

static uint64_t next_random(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

/* One run of `steps` puts over a pool of KEYS names; reserve first when `reserve` > 0. */
static void run(uint64_t seed, int32_t steps, int32_t reserve) {
  static char names[KEYS][64];
  int32_t expected[KEYS];
  for (int32_t i = 0; i < KEYS; i++) {
    snprintf(names[i], sizeof(names[i]), "grad/h.%d.attn/attention/attention_grad:%d", i % 97, i);
    expected[i] = -1;
  }
  tf_strmap map = {0};
  if (reserve > 0)
    CHECK(&counts, tf_strmap_reserve(&map, reserve), "reserve %d failed", reserve);
  const int32_t reserved_capacity = map.capacity;
  uint64_t state = seed;
  int64_t wrong = 0, present = 0;
  for (int32_t step = 0; step < steps; step++) {
    const int32_t k = (int32_t)(next_random(&state) % KEYS), value = (int32_t)(next_random(&state) % 100000);
    CHECK(&counts, tf_strmap_put(&map, names[k], value), "put %d failed", k);
    expected[k] = value;
    if (step % 97 != 0 && step != steps - 1)
      continue;
    present = 0;
    for (int32_t i = 0; i < KEYS; i++) {
      wrong += tf_strmap_get(&map, names[i]) != expected[i];
      present += expected[i] >= 0;
    }
    char absent[64];
    snprintf(absent, sizeof(absent), "%s/x", names[k]);
    wrong += tf_strmap_get(&map, absent) != -1;
  }
  CHECK(&counts, wrong == 0 && map.count == present, "seed %llu: %lld wrong lookups, %d keys counted, %lld put",
        (unsigned long long)seed, (long long)wrong, map.count, (long long)present);
  if (reserve >= present)
    CHECK(&counts, map.capacity == reserved_capacity, "seed %llu: grew from %d to %d after reserving %d",
          (unsigned long long)seed, reserved_capacity, map.capacity, reserve);
  printf("%s  seed %llu: %d puts, %lld keys, capacity %d%s\n", wrong == 0 ? "ok " : "FAIL", (unsigned long long)seed,
         steps, (long long)present, map.capacity, reserve > 0 ? " (reserved)" : "");
  tf_strmap_clear(&map);
}

int main(void) {
  for (uint64_t seed = 1; seed <= 6; seed++)
    run(seed, 4000, seed % 2 == 0 ? KEYS : 0);
  tf_strmap empty = {0};
  CHECK(&counts, tf_strmap_get(&empty, "x") == -1, "an empty map finds a key");
  return tf_test_finish("strmap", &counts);
}
