/* The device limits the kernels choose their paths by (compute capability, opt-in shared memory per
 * block), read once per choice from the current device and lowered by TIGHTFIT_CUDA_LIMITS, so that a
 * big GPU runs the paths a smaller card takes (issue 42: the T4's row attention on an H200). Only
 * tightfit's own choices follow it: cuBLAS still picks its kernels for the real device. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include <cuda_runtime.h>

#include "kernels/cuda/kernels.h"

namespace {

struct NamedLimits {
  const char *name;
  int major, minor;
  int64_t shared_optin; /* cudaDevAttrMaxSharedMemoryPerBlockOptin of the architecture */
};

/* The CUDA programming guide's "technical specifications per compute capability" table: the
 * largest shared memory one block may opt in to. */
const NamedLimits kNamed[] = {
    {"t4", 7, 5, 64 * 1024},    {"sm75", 7, 5, 64 * 1024},  {"v100", 7, 0, 96 * 1024}, {"sm70", 7, 0, 96 * 1024},
    {"a100", 8, 0, 163 * 1024}, {"sm80", 8, 0, 163 * 1024}, {"a10", 8, 6, 99 * 1024},  {"sm86", 8, 6, 99 * 1024},
    {"l4", 8, 9, 99 * 1024},    {"sm89", 8, 9, 99 * 1024},
};

void lower(tf_cuda_limits *limits, int major, int minor, int64_t shared_optin) {
  if (major * 10 + minor < limits->major * 10 + limits->minor) {
    limits->major = major;
    limits->minor = minor;
  }
  if (shared_optin < limits->shared_optin)
    limits->shared_optin = shared_optin;
}

} // namespace

extern "C" const char *tf_cuda_limits_cap(const char *value, tf_cuda_limits *limits) {
  if (!value || !*value)
    return NULL;
  for (const NamedLimits &n : kNamed)
    if (strcasecmp(value, n.name) == 0) {
      lower(limits, n.major, n.minor, n.shared_optin);
      return NULL;
    }
  int major = 0, minor = 0, used = 0;
  long long bytes = 0;
  if (sscanf(value, "%d.%d%n", &major, &minor, &used) != 2 || major < 1 || minor < 0 || minor > 9)
    return "not t4, v100, a100, a10, l4, smXY or MAJOR.MINOR[:BYTES]";
  const char *rest = value + used;
  if (*rest == ':') {
    int more = 0;
    if (sscanf(rest + 1, "%lld%n", &bytes, &more) != 1 || rest[1 + more] != '\0' || bytes < 1024 || rest[1] == '-' ||
        rest[1] == '+')
      return "the shared memory after ':' is not a byte count of at least 1024";
  } else if (*rest != '\0') {
    return "not t4, v100, a100, a10, l4, smXY or MAJOR.MINOR[:BYTES]";
  } else {
    bytes = limits->shared_optin;
  }
  lower(limits, major, minor, (int64_t)bytes);
  return NULL;
}

extern "C" bool tf_cuda_current_limits(tf_cuda_limits *limits) {
  int device = 0, major = 0, minor = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError(); /* leave no error behind for a later check to find */
    return false;
  }
  *limits = tf_cuda_limits{major, minor, bytes};
  /* a bad value was refused when the session was created (tf_cuda_limits_cap there); here it is ignored */
  tf_cuda_limits_cap(getenv("TIGHTFIT_CUDA_LIMITS"), limits);
  return true;
}
