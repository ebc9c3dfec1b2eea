/* Initial values of parameters and constants, computed on the host from their tf_init.
 *
 * Every random value is a pure function of (seed, tensor name, element index): element i of tensor
 * `name` comes from common/rng.h with stream tf_rng_hash(name), step TF_INIT_RNG_STEP and index i,
 * so a parameter's values do not depend on which other tensors exist, on the order they are
 * filled, on chunking or on threads. Distributions and fans follow docs/format.md:
 *
 *   zeros, ones, fill(a)        every element 0, 1, a
 *   normal(a, b)                mean a, standard deviation b >= 0
 *   uniform(a, b)               on [a, b), a <= b
 *   xavier_uniform(a)           uniform on [-l, l), l = a * sqrt(6 / (fan_in + fan_out)), gain a >= 0
 *   kaiming_normal(a)           mean 0, std = a / sqrt(fan_in), gain a >= 0
 *   arange(a, b)                element i of the flattened tensor = a + i * b
 *
 * Integer tensors take zeros, ones, fill and arange with integral a and b whose every value fits.
 * Errors name the tensor; `a` and `b` must be finite. */
#ifndef TIGHTFIT_RUNTIME_INIT_H
#define TIGHTFIT_RUNTIME_INIT_H

#include <stdint.h>

#include "tightfit/status.h"
#include "tightfit/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The RNG step for initial values: one no training step reaches, so initial values never share
 * counters with dropout masks (keyed by the training step). */
#define TF_INIT_RNG_STEP UINT64_MAX

/* Fans by PyTorch's positional convention: rank 0: 1 and 1; rank 1 [n]: n and n; rank 2 [out, in]:
 * in and out; rank >= 3 [out, in/groups, k...]: shape[1] x prod(k) and shape[0] x prod(k).
 * TF_ERR_INVALID_ARGUMENT for a bad rank, a negative dimension or overflow. */
tf_status tf_init_fans(int32_t rank, const int64_t *shape, int64_t *fan_in, int64_t *fan_out) TF_MUST_USE;

/* Fills out[0 .. count(shape)) with the initial values of f32 tensor `tensor_name` (rank, shape)
 * under `seed`. TF_INIT_EXTERNAL is TF_ERR_UNSUPPORTED (the session loads it from safetensors);
 * TF_INIT_NONE and bad parameters are TF_ERR_INVALID_ARGUMENT. */
tf_status tf_init_fill_f32(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, float *out) TF_MUST_USE;

/* The same for i32 and i64 tensors (position ids: arange(0, 1)); random kinds are refused. */
tf_status tf_init_fill_i32(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, int32_t *out) TF_MUST_USE;
tf_status tf_init_fill_i64(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, int64_t *out) TF_MUST_USE;

/* Fills out[0 .. count) with elements [begin, begin + count) of the flattened tensor, `dtype` being
 * TF_F32, TF_I32, TF_I64 or TF_U8 (out points to that type): the values are those of the whole-tensor
 * calls, so a large parameter can be initialised chunk by chunk or by several threads. */
tf_status tf_init_fill_range(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                             uint64_t seed, tf_dtype dtype, int64_t begin, int64_t count, void *out) TF_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif
