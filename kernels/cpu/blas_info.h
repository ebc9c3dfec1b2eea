/* Which BLAS the CPU kernels call, and how it was set up: `tightfit devices` and the CPU profile
 * print it, since matrix products are most of a transformer's step and their kernel decides it. */
#ifndef TIGHTFIT_KERNELS_CPU_BLAS_INFO_H
#define TIGHTFIT_KERNELS_CPU_BLAS_INFO_H

#include <stdbool.h>
#include <stddef.h>

/* Whether this CPU has the AVX-512 subsets OpenBLAS's 512-bit kernels need (F, BW, DQ, VL). */
bool tf_cpu_blas_has_avx512(void);

/* Whether OpenBLAS runs 256-bit (or narrower) kernels, forced through OPENBLAS_CORETYPE or its own
 * choice, on a CPU that has the AVX-512 its 512-bit kernels need (F, BW, DQ, VL). */
bool tf_cpu_blas_narrowed(void);

/* Writes e.g. "OpenBLAS 0.3.21, Cooperlake kernels" into out (always terminated when size > 0),
 * with the OPENBLAS_CORETYPE that forced the core, and how to widen them when tf_cpu_blas_narrowed(). */
void tf_cpu_blas_describe(char *out, size_t size);

#endif
