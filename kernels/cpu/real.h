/* The compute type of a CPU kernel file. Each kernel source file is compiled twice: with
 * TF_REAL_F64 defined (the float64 reference) and without (f32, what the backend runs). Kernel
 * functions are named with TF_REAL_NAME(tf_cpu_matmul) -> tf_cpu_matmul_f32 / tf_cpu_matmul_f64. */
#ifndef TIGHTFIT_KERNELS_CPU_REAL_H
#define TIGHTFIT_KERNELS_CPU_REAL_H

#include <cblas.h>
#include <math.h>

#include "kernels/cpu/kernels.h"

#define TF_REAL_CONCAT2(a, b) a##b
#define TF_REAL_CONCAT(a, b) TF_REAL_CONCAT2(a, b)

#ifdef TF_REAL_F64
typedef double real;
#define TF_REAL_SUFFIX _f64
#define TF_REAL_GEMM cblas_dgemm
#define TF_REAL_EXP exp
#define TF_REAL_LOG log
#define TF_REAL_LOG1P log1p
#define TF_REAL_SQRT sqrt
#define TF_REAL_TANH tanh
#define TF_REAL_ERF erf
#define TF_REAL_FABS fabs
#define TF_REAL_FLOOR floor
#define TF_REAL_CEIL ceil
#define TF_REAL_ROUND_EVEN nearbyint
#define TF_REAL_SIN sin
#define TF_REAL_COS cos
#define TF_REAL_ASIN asin
#define TF_REAL_ACOS acos
#define TF_REAL_ATAN atan
#define TF_REAL_TAN tan
#define TF_REAL_SINH sinh
#define TF_REAL_COSH cosh
#define TF_REAL_ASINH asinh
#define TF_REAL_ACOSH acosh
#define TF_REAL_ATANH atanh
#else
typedef float real;
#define TF_REAL_SUFFIX _f32
#define TF_REAL_GEMM cblas_sgemm
#define TF_REAL_EXP expf
#define TF_REAL_LOG logf
#define TF_REAL_LOG1P log1pf
#define TF_REAL_SQRT sqrtf
#define TF_REAL_TANH tanhf
#define TF_REAL_ERF erff
#define TF_REAL_FABS fabsf
#define TF_REAL_FLOOR floorf
#define TF_REAL_CEIL ceilf
#define TF_REAL_ROUND_EVEN nearbyintf
#define TF_REAL_SIN sinf
#define TF_REAL_COS cosf
#define TF_REAL_ASIN asinf
#define TF_REAL_ACOS acosf
#define TF_REAL_ATAN atanf
#define TF_REAL_TAN tanf
#define TF_REAL_SINH sinhf
#define TF_REAL_COSH coshf
#define TF_REAL_ASINH asinhf
#define TF_REAL_ACOSH acoshf
#define TF_REAL_ATANH atanhf
#endif

#define TF_REAL_NAME(name) TF_REAL_CONCAT(name, TF_REAL_SUFFIX)

#endif
