#include "common/rng.h"

#include <math.h>

static void philox_round(uint32_t c[4], const uint32_t k[2]) {
  const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
  const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
  uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  uint32_t next[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  c[0] = next[0];
  c[1] = next[1];
  c[2] = next[2];
  c[3] = next[3];
}

void tf_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c[4] = {counter[0], counter[1], counter[2], counter[3]};
  uint32_t k[2] = {key[0], key[1]};
  for (int round = 0; round < 10; round++) {
    philox_round(c, k);
    k[0] += 0x9E3779B9u;
    k[1] += 0xBB67AE85u;
  }
  for (int i = 0; i < 4; i++)
    out[i] = c[i];
}

/* The key is the seed; the counter packs (index, step ^ stream-mix). */
static void draw(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index, uint32_t out[4]) {
  uint64_t mixed = step * 0x9E3779B97F4A7C15ull ^ stream;
  uint32_t counter[4] = {(uint32_t)index, (uint32_t)(index >> 32), (uint32_t)mixed, (uint32_t)(mixed >> 32)};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  tf_philox4x32(counter, key, out);
}

float tf_rng_uniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
  uint32_t words[4];
  draw(seed, step, stream, index, words);
  return (float)(words[0] >> 8) * (1.0f / 16777216.0f);
}

double tf_rng_normal(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index) {
  uint32_t words[4];
  draw(seed, step, stream, index, words);
  /* u1 in (0, 1] so that log(u1) is finite. */
  double u1 = ((double)words[0] + 1.0) / 4294967296.0;
  double u2 = (double)words[1] / 4294967296.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tf_rng_hash(const char *text) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    h = (h ^ *p) * 1099511628211ull;
  return h;
}
