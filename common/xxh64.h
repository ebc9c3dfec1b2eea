/* XXH64 (https://github.com/Cyan4973/xxHash, its 64-bit hash), the checksum of tensors in the
 * safetensors files tightfit writes (issue 49): fast (about the speed of memory) and the same value
 * `python3 -c "import xxhash; xxhash.xxh64(data).hexdigest()"` prints. */
#ifndef TIGHTFIT_COMMON_XXH64_H
#define TIGHTFIT_COMMON_XXH64_H

#include <stddef.h>
#include <stdint.h>

/* The XXH64 hash of data[0, size) with `seed` (tightfit uses 0). */
uint64_t tf_xxh64(const void *data, size_t size, uint64_t seed);

#endif
