/* Initialisers: the parameters of each kind are checked once, then every element is computed from
 * its index alone (see init.h for why). */
#include "runtime/init.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/rng.h"

tf_status tf_init_fans(int32_t rank, const int64_t *shape, int64_t *fan_in, int64_t *fan_out) {
  *fan_in = *fan_out = 1;
  if (rank < 0 || rank > TF_MAX_RANK || (rank > 0 && !shape))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "fans: rank %d outside 0..%d", (int)rank, TF_MAX_RANK);
  for (int32_t d = 0; d < rank; d++)
    if (shape[d] < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "fans: dimension %d is negative (%" PRId64 ")", (int)d, shape[d]);
  if (rank == 0)
    return NULL;
  if (rank == 1) {
    *fan_in = *fan_out = shape[0];
    return NULL;
  }
  int64_t receptive = 1;
  for (int32_t d = 2; d < rank; d++)
    if (__builtin_mul_overflow(receptive, shape[d], &receptive))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "fans: receptive field overflows");
  if (__builtin_mul_overflow(shape[1], receptive, fan_in) || __builtin_mul_overflow(shape[0], receptive, fan_out))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "fans: fan overflows");
  return NULL;
}

/* A kind reduced to what the element loop needs. */
typedef enum rule { CONSTANT, NORMAL, UNIFORM, ARANGE } rule;

typedef struct plan {
  rule rule;
  double a, b; /* CONSTANT: a. NORMAL: mean a, std b. UNIFORM: [a, b). ARANGE: a + i b */
  uint64_t stream;
} plan;

static const char *name_of(const char *tensor_name) { return tensor_name ? tensor_name : "?"; }

static tf_status make_plan(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           plan *out) {
  const char *name = name_of(tensor_name);
  if (!isfinite(init->a) || !isfinite(init->b))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': %s parameters must be finite (a = %g, b = %g)",
                         name, tf_init_name(init->kind), init->a, init->b);
  *out = (plan){CONSTANT, init->a, init->b, tensor_name ? tf_rng_hash(tensor_name) : 0};
  switch (init->kind) {
  case TF_INIT_ZEROS: out->a = 0; return NULL;
  case TF_INIT_ONES: out->a = 1; return NULL;
  case TF_INIT_FILL: return NULL;
  case TF_INIT_ARANGE: out->rule = ARANGE; return NULL;
  case TF_INIT_NORMAL:
    out->rule = NORMAL;
    if (init->b < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': normal std %g is negative", name, init->b);
    break;
  case TF_INIT_UNIFORM:
    out->rule = UNIFORM;
    if (init->a > init->b)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': uniform low %g exceeds high %g", name,
                           init->a, init->b);
    break;
  case TF_INIT_XAVIER_UNIFORM:
  case TF_INIT_KAIMING_NORMAL: {
    if (init->a < 0)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': %s gain %g is negative", name,
                           tf_init_name(init->kind), init->a);
    int64_t fan_in, fan_out;
    TF_RETURN_IF_ERROR(tf_status_prefix(tf_init_fans(rank, shape, &fan_in, &fan_out), "init of tensor '%s'", name));
    if (fan_in <= 0 || fan_out <= 0) /* only for empty tensors, which get no values */
      fan_in = fan_out = 1;
    if (init->kind == TF_INIT_XAVIER_UNIFORM) {
      double bound = init->a * sqrt(6.0 / ((double)fan_in + (double)fan_out));
      *out = (plan){UNIFORM, -bound, bound, out->stream};
    } else {
      *out = (plan){NORMAL, 0.0, init->a / sqrt((double)fan_in), out->stream};
    }
    break;
  }
  case TF_INIT_EXTERNAL:
    return tf_status_new(TF_ERR_UNSUPPORTED,
                         "init of tensor '%s': external weights ('%s' in %s) are loaded from safetensors, not computed",
                         name, init->key ? init->key : "?", init->file ? init->file : "?");
  default:
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': no initializer (kind %s)", name,
                         tf_init_name(init->kind));
  }
  if (!tensor_name)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init: a random initializer (%s) needs a tensor name to seed it",
                         tf_init_name(init->kind));
  return NULL;
}

static float uniform_value(const plan *p, uint64_t seed, uint64_t index) {
  double u = tf_rng_uniform(seed, TF_INIT_RNG_STEP, p->stream, index);
  float value = (float)(p->a + (p->b - p->a) * u);
  if (p->b > p->a && (double)value >= p->b) {
    /* Rounding to float reached the excluded bound: take the largest float below it. */
    float below = (float)p->b;
    while ((double)below >= p->b)
      below = nextafterf(below, -INFINITY);
    value = below < (float)p->a ? (float)p->a : below;
  }
  return value;
}

static void fill_f32(const plan *p, uint64_t seed, int64_t begin, int64_t count, float *out) {
  for (int64_t i = 0; i < count; i++) {
    uint64_t index = (uint64_t)(begin + i);
    switch (p->rule) {
    case CONSTANT: out[i] = (float)p->a; break;
    case ARANGE: out[i] = (float)(p->a + (double)index * p->b); break;
    case NORMAL: out[i] = (float)(p->a + p->b * tf_rng_normal(seed, TF_INIT_RNG_STEP, p->stream, index)); break;
    case UNIFORM: out[i] = uniform_value(p, seed, index); break;
    }
  }
}

/* Integers: a and b must be integral and every value a + i b (i in the range) must fit `dtype` (i32, i64,
 * or u8: a mask's ones). */
static tf_status fill_integer(const plan *p, const char *name, int64_t begin, int64_t count, tf_dtype dtype,
                              void *out) {
  if (p->rule == NORMAL || p->rule == UNIFORM)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': random initializers need a float tensor", name);
  bool arange = p->rule == ARANGE;
  bool integral =
      p->a == floor(p->a) && fabs(p->a) < 0x1p63 && (!arange || (p->b == floor(p->b) && fabs(p->b) < 0x1p63));
  if (!integral)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "init of tensor '%s': integer tensors need integer values (a = %g, b = %g)", name, p->a, p->b);
  __int128 a = (__int128)(int64_t)p->a, b = arange ? (__int128)(int64_t)p->b : 0;
  const int bits = dtype == TF_I64 ? 64 : dtype == TF_I32 ? 32 : 8;
  __int128 low = dtype == TF_U8 ? 0 : -((__int128)1 << (bits - 1));
  __int128 high = dtype == TF_U8 ? 255 : ((__int128)1 << (bits - 1)) - 1;
  if (count > 0) {
    __int128 first = a + (__int128)begin * b, last = a + (__int128)(begin + count - 1) * b;
    if (first < low || first > high || last < low || last > high)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': %s(%g, %g) leaves the range of %s", name,
                           arange ? "arange" : "fill", p->a, p->b, tf_dtype_name(dtype));
  }
  for (int64_t i = 0; i < count; i++) {
    __int128 value = a + (__int128)(begin + i) * b;
    if (dtype == TF_U8)
      ((uint8_t *)out)[i] = (uint8_t)value;
    else if (dtype == TF_I32)
      ((int32_t *)out)[i] = (int32_t)value;
    else
      ((int64_t *)out)[i] = (int64_t)value;
  }
  return NULL;
}

static tf_status element_count(const char *name, int32_t rank, const int64_t *shape, int64_t *count) {
  *count = 1;
  if (rank < 0 || rank > TF_MAX_RANK || (rank > 0 && !shape))
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': rank %d outside 0..%d", name, (int)rank,
                         TF_MAX_RANK);
  for (int32_t d = 0; d < rank; d++)
    if (shape[d] < 0 || __builtin_mul_overflow(*count, shape[d], count))
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "init of tensor '%s': dimension %d (%" PRId64 ") is negative or the count overflows", name,
                           (int)d, shape[d]);
  return NULL;
}

tf_status tf_init_fill_range(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                             uint64_t seed, tf_dtype dtype, int64_t begin, int64_t count, void *out) {
  const char *name = name_of(tensor_name);
  if (!init)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': NULL initializer", name);
  int64_t total;
  TF_RETURN_IF_ERROR(element_count(name, rank, shape, &total));
  if (begin < 0 || count < 0 || begin > total || count > total - begin)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                         "init of tensor '%s': range [%" PRId64 ", %" PRId64 " + %" PRId64 ") outside its %" PRId64
                         " elements",
                         name, begin, begin, count, total);
  if (count > 0 && !out)
    return tf_status_new(TF_ERR_INVALID_ARGUMENT, "init of tensor '%s': NULL output", name);
  plan p = {0};
  TF_RETURN_IF_ERROR(make_plan(init, tensor_name, rank, shape, &p));
  switch (dtype) {
  case TF_F32: fill_f32(&p, seed, begin, count, out); return NULL;
  case TF_I32:
  case TF_I64:
  case TF_U8: return fill_integer(&p, name, begin, count, dtype, out);
  default:
    return tf_status_new(TF_ERR_UNSUPPORTED, "init of tensor '%s': cannot fill dtype %s (f32, i32, i64, u8 only)", name,
                         tf_dtype_name(dtype));
  }
}

static tf_status fill_whole(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                            uint64_t seed, tf_dtype dtype, void *out) {
  int64_t total;
  TF_RETURN_IF_ERROR(element_count(name_of(tensor_name), rank, shape, &total));
  return tf_init_fill_range(init, tensor_name, rank, shape, seed, dtype, 0, total, out);
}

tf_status tf_init_fill_f32(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, float *out) {
  return fill_whole(init, tensor_name, rank, shape, seed, TF_F32, out);
}

tf_status tf_init_fill_i32(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, int32_t *out) {
  return fill_whole(init, tensor_name, rank, shape, seed, TF_I32, out);
}

tf_status tf_init_fill_i64(const tf_init *init, const char *tensor_name, int32_t rank, const int64_t *shape,
                           uint64_t seed, int64_t *out) {
  return fill_whole(init, tensor_name, rank, shape, seed, TF_I64, out);
}
