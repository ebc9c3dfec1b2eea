/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): a pure function of
 * (key, counter), so any element's value can be recomputed anywhere, in any order, on any backend:
 * dropout masks are keyed by (seed, micro-step, node seed, element) and a recomputed forward pass
 * reproduces them bit for bit. */
#ifndef TIGHTFIT_COMMON_RNG_H
#define TIGHTFIT_COMMON_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Four 32-bit random words for counter (c0..c3) under key (k0, k1). */
void tf_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* A uniform float in [0, 1) (24 random bits) for element `index` of stream (seed, step, stream). */
float tf_rng_uniform(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index);

/* A standard normal double for element `index` (Box-Muller on two 32-bit words). */
double tf_rng_normal(uint64_t seed, uint64_t step, uint64_t stream, uint64_t index);

/* A 64-bit FNV-1a hash of a string: turns parameter names into RNG streams. */
uint64_t tf_rng_hash(const char *text);

#ifdef __cplusplus
}
#endif
#endif
