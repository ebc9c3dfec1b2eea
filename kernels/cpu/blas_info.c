/* Which BLAS the CPU kernels call (blas_info.h). Compiled once (not per precision). */
#define _POSIX_C_SOURCE 200809L
#include "kernels/cpu/blas_info.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* OpenBLAS 0.3.21's x86-64 cores whose sgemm kernels are 256 bits wide or narrower (its
 * driver/others/dynamic.c names): forcing one of them on an AVX-512 CPU halves the products' peak
 * (an AMD EPYC with AVX-512, one thread, 2026-12-03: sgemm at Haswell 115 GFLOP/s, SkylakeX and
 * Cooperlake 196-222; bench/results/2026-12-03-cpu-blas-core). */
static const char *const narrow_cores[] = {
    "Haswell", "Zen",          "SandyBridge", "Nehalem",    "Core2",       "Penryn",    "Dunnington",
    "Atom",    "Barcelona",    "Bulldozer",   "Piledriver", "Steamroller", "Excavator", "Prescott",
    "Opteron", "Opteron_SSE3", "Katmai",      "Coppermine", "Northwood",   "Banias",    "Athlon"};

bool tf_cpu_blas_has_avx512(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

static bool core_is_narrow(const char *core) {
  for (size_t i = 0; i < sizeof(narrow_cores) / sizeof(narrow_cores[0]); i++)
    if (strcasecmp(core, narrow_cores[i]) == 0)
      return true;
  return false;
}

/* The version word of openblas_get_config() ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), or "". */
static void version_of(const char *config, char *out, size_t size) {
  out[0] = '\0';
  const char *space = strchr(config, ' ');
  if (!space)
    return;
  size_t length = strcspn(space + 1, " ");
  if (length >= size)
    length = size - 1;
  memcpy(out, space + 1, length);
  out[length] = '\0';
}

bool tf_cpu_blas_narrowed(void) { return core_is_narrow(openblas_get_corename()) && tf_cpu_blas_has_avx512(); }

void tf_cpu_blas_describe(char *out, size_t size) {
  if (size == 0)
    return;
  char version[32];
  version_of(openblas_get_config(), version, sizeof(version));
  const char *forced = getenv("OPENBLAS_CORETYPE");
  const bool is_forced = forced && forced[0];
  int used = snprintf(out, size, "OpenBLAS %s, %s kernels", version, openblas_get_corename());
  if (used > 0 && (size_t)used < size && is_forced)
    used += snprintf(out + used, size - (size_t)used, " (OPENBLAS_CORETYPE=%s)", forced);
  if (used > 0 && (size_t)used < size && tf_cpu_blas_narrowed())
    snprintf(out + used, size - (size_t)used,
             "; this CPU has AVX-512, whose kernels run matrix products up to 2x faster: %s",
             is_forced ? "unset OPENBLAS_CORETYPE to let OpenBLAS choose them"
                       : "OPENBLAS_CORETYPE=SkylakeX selects them");
}
