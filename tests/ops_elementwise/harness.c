#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "kernels/cpu/list.h"

/* ---- allocation ---- */

static void **allocations;
static size_t n_allocations, allocation_capacity;

void *th_alloc(size_t bytes) {
  if (n_allocations == allocation_capacity) {
    allocation_capacity = allocation_capacity ? 2 * allocation_capacity : 256;
    allocations = realloc(allocations, allocation_capacity * sizeof(void *));
    if (!allocations)
      abort();
  }
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p)
    abort();
  allocations[n_allocations++] = p;
  return p;
}

void th_release(void) {
  for (size_t i = 0; i < n_allocations; i++)
    free(allocations[i]);
  free(allocations);
  allocations = NULL;
  n_allocations = allocation_capacity = 0;
}

/* ---- random numbers: splitmix64 ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

void th_seed(uint64_t seed) { rng_state = seed; }

static uint64_t next_word(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double th_uniform(double low, double high) { return low + (high - low) * (double)(next_word() >> 11) * 0x1p-53; }

int64_t th_integer(int64_t low, int64_t high) { return low + (int64_t)(next_word() % (uint64_t)(high - low + 1)); }

/* ---- tensors ---- */

th_tensor th_zeros(tf_dtype dtype, size_t rank, const int64_t *shape) {
  th_tensor t;
  memset(&t, 0, sizeof(t));
  t.dtype = dtype;
  t.rank = (int32_t)rank;
  t.count = 1;
  for (size_t i = 0; i < rank; i++) {
    t.shape[i] = shape[i];
    t.count *= shape[i];
  }
  t.values = th_alloc(sizeof(double) * (size_t)t.count);
  return t;
}

th_tensor th_random(double low, double high, size_t rank, const int64_t *shape) {
  th_tensor t = th_zeros(TF_F32, rank, shape);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = th_uniform(low, high);
  return t;
}

th_tensor th_mask_with_zeros(size_t rank, const int64_t *shape) {
  static const double kept[] = {1.0, -0.5, 3.0};
  th_tensor t = th_zeros(TF_F32, rank, shape);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = i % 3 == 0 ? 0.0 : kept[i % 4 % 3];
  return t;
}

th_tensor th_nonfinite_where_zero(size_t rank, const int64_t *shape) {
  static const double bad[] = {NAN, INFINITY, -INFINITY};
  th_tensor t = th_random(-2, 2, rank, shape);
  for (int64_t i = 0; i < t.count; i += 3)
    t.values[i] = bad[i / 3 % 3];
  return t;
}

th_tensor th_scalar(double value) {
  th_tensor t = th_zeros(TF_F32, 0, NULL);
  t.values[0] = value;
  return t;
}

th_tensor th_copy(const th_tensor *t) {
  th_tensor c = *t;
  c.values = th_alloc(sizeof(double) * (size_t)(t->count ? t->count : 1));
  memcpy(c.values, t->values, sizeof(double) * (size_t)t->count);
  return c;
}

void th_round_to_float(th_tensor *t) {
  if (t->dtype == TF_F32)
    for (int64_t i = 0; i < t->count; i++)
      t->values[i] = (double)(float)t->values[i];
}

const char *th_shape_text(const th_tensor *t) {
  static char text[128];
  int n = snprintf(text, sizeof(text), "[");
  for (int32_t i = 0; i < t->rank; i++)
    n += snprintf(text + n, sizeof(text) - (size_t)n, "%s%lld", i ? "," : "", (long long)t->shape[i]);
  snprintf(text + n, sizeof(text) - (size_t)n, "]");
  return text;
}

/* ---- attributes ---- */

static tf_attrs attrs_of(tf_attr_kind kind) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  return a;
}

tf_attrs th_no_attrs(void) { return attrs_of(TF_ATTR_NONE); }

tf_attrs th_reduce(bool keepdims, int32_t n_axes, const int32_t *axes) {
  tf_attrs a = attrs_of(TF_ATTR_REDUCE);
  a.u.reduce.keepdims = keepdims;
  a.u.reduce.n_axes = n_axes;
  for (int32_t i = 0; i < n_axes; i++)
    a.u.reduce.axes[i] = axes[i];
  return a;
}

tf_attrs th_axis(int32_t axis) {
  tf_attrs a = attrs_of(TF_ATTR_AXIS);
  a.u.axis.axis = axis;
  return a;
}

tf_attrs th_norm(float epsilon) {
  tf_attrs a = attrs_of(TF_ATTR_NORM);
  a.u.norm.epsilon = epsilon;
  return a;
}

tf_attrs th_shape_attrs(size_t rank, const int64_t *shape) {
  tf_attrs a = attrs_of(TF_ATTR_SHAPE);
  a.u.shape.shape.rank = (int32_t)rank;
  for (size_t i = 0; i < rank; i++)
    a.u.shape.shape.dims[i] = (tf_dim){shape[i], -1};
  return a;
}

tf_attrs th_transpose(size_t rank, const int32_t *perm) {
  tf_attrs a = attrs_of(TF_ATTR_TRANSPOSE);
  a.u.transpose.rank = (int32_t)rank;
  for (size_t i = 0; i < rank; i++)
    a.u.transpose.perm[i] = perm[i];
  return a;
}

tf_attrs th_slice(int32_t axis, int64_t start, int64_t end, int64_t step) {
  tf_attrs a = attrs_of(TF_ATTR_SLICE);
  a.u.slice = (tf_slice_attrs){axis, start, end, step};
  return a;
}

tf_attrs th_dropout(float rate, uint64_t seed) {
  tf_attrs a = attrs_of(TF_ATTR_DROPOUT);
  a.u.dropout.rate = rate;
  a.u.dropout.seed = seed;
  return a;
}

tf_attrs th_gelu(bool approximate) {
  tf_attrs a = attrs_of(TF_ATTR_GELU);
  a.u.gelu.approximate = approximate;
  return a;
}

tf_attrs th_leaky_relu(float alpha) {
  tf_attrs a = attrs_of(TF_ATTR_LEAKY_RELU);
  a.u.leaky_relu.alpha = alpha;
  return a;
}

tf_attrs th_clip(float lo, float hi) {
  tf_attrs a = attrs_of(TF_ATTR_CLIP);
  a.u.clip.lo = lo;
  a.u.clip.hi = hi;
  return a;
}

tf_attrs th_cross_entropy(int64_t ignore_index) {
  tf_attrs a = attrs_of(TF_ATTR_CROSS_ENTROPY);
  a.u.cross_entropy.ignore_index = ignore_index;
  return a;
}

tf_attrs th_optimizer(float lr, float momentum, float beta1, float beta2, float epsilon, float weight_decay,
                      float clip_norm, float grad_scale) {
  tf_attrs a = attrs_of(TF_ATTR_OPTIMIZER);
  a.u.optimizer = (tf_optimizer_attrs){lr, momentum, beta1, beta2, epsilon, weight_decay, clip_norm, grad_scale};
  return a;
}

/* ---- running kernels ---- */

tf_cpu_context th_context = {.threads = 1, .optimizer_step = 1, .seed = 1234};

typedef struct kernel_pair {
  tf_cpu_kernel f32, f64;
} kernel_pair;

/* The kernels of `op` from the op table's cpu column (kernels/cpu/table.c). */
static kernel_pair kernel_of(tf_op op) {
  kernel_pair pair = {tf_cpu_kernel_get(op, false), tf_cpu_kernel_get(op, true)};
  if (pair.f32 && pair.f64)
    return pair;
  fprintf(stderr, "no CPU kernel for op %s\n", tf_op_name(op));
  abort();
}

/* Host buffer of a tensor in the run's storage: real (f32/f64) or the index dtype. */
static void *to_buffer(const th_tensor *t, bool f64) {
  const size_t n = (size_t)(t->count ? t->count : 1);
  switch (t->dtype) {
  case TF_I32: {
    int32_t *b = th_alloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < t->count; i++)
      b[i] = (int32_t)t->values[i];
    return b;
  }
  case TF_I64: {
    int64_t *b = th_alloc(n * sizeof(int64_t));
    for (int64_t i = 0; i < t->count; i++)
      b[i] = (int64_t)t->values[i];
    return b;
  }
  default:
    if (f64) {
      double *b = th_alloc(n * sizeof(double));
      memcpy(b, t->values, (size_t)t->count * sizeof(double));
      return b;
    } else {
      float *b = th_alloc(n * sizeof(float));
      for (int64_t i = 0; i < t->count; i++)
        b[i] = (float)t->values[i];
      return b;
    }
  }
}

static void from_buffer(th_tensor *t, const void *buffer, bool f64) {
  for (int64_t i = 0; i < t->count; i++) {
    switch (t->dtype) {
    case TF_I32: t->values[i] = ((const int32_t *)buffer)[i]; break;
    case TF_I64: t->values[i] = (double)((const int64_t *)buffer)[i]; break;
    default: t->values[i] = f64 ? ((const double *)buffer)[i] : (double)((const float *)buffer)[i]; break;
    }
  }
}

static tf_cpu_tensor cpu_tensor(const th_tensor *t, void *data) {
  tf_cpu_tensor c;
  memset(&c, 0, sizeof(c));
  c.data = data;
  c.dtype = t->dtype;
  c.rank = t->rank;
  for (int32_t i = 0; i < t->rank; i++)
    c.shape[i] = t->shape[i];
  c.count = t->count;
  return c;
}

int th_run(tf_op op, const tf_attrs *attrs, th_tensor *inputs, int n_inputs, th_tensor *outputs, bool f64) {
  const tf_op_info *info = tf_op_info_get(op);
  tf_shape_operand operands[TF_OP_VARIADIC_INTERNAL];
  for (int i = 0; i < n_inputs; i++)
    operands[i] = (tf_shape_operand){"input", inputs[i].dtype, TF_ACTIVATION, inputs[i].rank, inputs[i].shape};
  tf_attrs none = th_no_attrs();
  tf_shape_query query = {op, attrs ? attrs : &none, n_inputs, operands, NULL, NULL};
  tf_shape_result results[TF_MAX_OUTPUTS];
  memset(results, 0, sizeof(results));
  tf_status status = info->shape_rule(&query, results);
  if (status) {
    fprintf(stderr, "%s: %s\n", info->name, tf_status_message(status));
    tf_status_free(status);
    return -1;
  }
  tf_cpu_tensor cpu_inputs[TF_OP_VARIADIC_INTERNAL], cpu_outputs[TF_MAX_OUTPUTS];
  for (int i = 0; i < n_inputs; i++)
    cpu_inputs[i] = cpu_tensor(&inputs[i], to_buffer(&inputs[i], f64));
  for (int i = 0; i < info->n_outputs; i++) {
    // Floating outputs are the compute type; the shape rules call loss outputs "f32".
    tf_dtype dtype = results[i].dtype == TF_F16 || results[i].dtype == TF_BF16 ? TF_F32 : results[i].dtype;
    outputs[i] = th_zeros(dtype, (size_t)results[i].rank, results[i].shape);
    cpu_outputs[i] = cpu_tensor(&outputs[i], to_buffer(&outputs[i], f64));
  }
  tf_cpu_args args = {.op = op,
                      .attrs = attrs ? attrs : &none,
                      .n_inputs = n_inputs,
                      .inputs = cpu_inputs,
                      .n_outputs = info->n_outputs,
                      .outputs = cpu_outputs,
                      .context = &th_context};
  kernel_pair kernel = kernel_of(op);
  (f64 ? kernel.f64 : kernel.f32)(&args);
  for (int i = 0; i < info->n_outputs; i++)
    from_buffer(&outputs[i], cpu_outputs[i].data, f64);
  for (int i = 0; i < n_inputs && i < 8; i++)
    if (info->in_place & (1u << i))
      from_buffer(&inputs[i], cpu_inputs[i].data, f64);
  return info->n_outputs;
}

th_tensor th_call_list(tf_op op, const tf_attrs *attrs, const th_tensor *const *list, int n_inputs) {
  th_tensor inputs[16], outputs[TF_MAX_OUTPUTS];
  for (int i = 0; i < n_inputs; i++)
    inputs[i] = *list[i];
  int n = th_run(op, attrs, inputs, n_inputs, outputs, true);
  if (n < 0) {
    fprintf(stderr, "th_call(%s) failed\n", tf_op_name(op));
    abort();
  }
  if (n == 0) // an in-place op
    memset(&outputs[0], 0, sizeof(outputs[0]));
  return outputs[0];
}

double th_relative_error(const th_tensor *a, const th_tensor *b, double floor) {
  double worst = 0, scale = floor;
  for (int64_t i = 0; i < b->count; i++)
    scale = fabs(b->values[i]) > scale ? fabs(b->values[i]) : scale;
  if (a->count != b->count)
    return INFINITY;
  for (int64_t i = 0; i < a->count; i++) {
    double d = fabs(a->values[i] - b->values[i]);
    if (d != d)
      return INFINITY;
    worst = d > worst ? d : worst;
  }
  return worst / scale;
}

bool th_bitwise_equal(const th_tensor *a, const th_tensor *b) {
  return a->count == b->count && memcmp(a->values, b->values, sizeof(double) * (size_t)a->count) == 0;
}
