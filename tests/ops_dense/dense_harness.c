/* The dense-kernel test harness (dense_harness.h). */
#include "dense_harness.h"

#include <cblas.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "kernels/cpu/list.h"

#define GUARD_BYTES 256
#define GUARD_BYTE 0xA5

uint64_t dense_next(dense_rng *rng) { // splitmix64
  uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double dense_uniform(dense_rng *rng, double low, double high) {
  return low + (high - low) * (double)(dense_next(rng) >> 11) * 0x1.0p-53;
}

dense_tensor dense_zeros(tf_dtype dtype, int32_t rank, const int64_t *shape) {
  dense_tensor t;
  memset(&t, 0, sizeof(t));
  t.dtype = dtype;
  t.rank = rank;
  t.count = 1;
  for (int32_t i = 0; i < rank; i++) {
    t.shape[i] = shape[i];
    t.count *= shape[i];
  }
  t.values = calloc((size_t)(t.count > 0 ? t.count : 1), sizeof(double));
  if (!t.values) {
    fprintf(stderr, "out of memory for %" PRId64 " values\n", t.count);
    exit(2);
  }
  return t;
}

dense_tensor dense_random(dense_rng *rng, int32_t rank, const int64_t *shape, double low, double high) {
  dense_tensor t = dense_zeros(TF_F32, rank, shape);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = dense_uniform(rng, low, high);
  return t;
}

dense_tensor dense_random_ids(dense_rng *rng, tf_dtype dtype, int32_t rank, const int64_t *shape, int64_t low,
                              int64_t high) {
  dense_tensor t = dense_zeros(dtype, rank, shape);
  for (int64_t i = 0; i < t.count; i++)
    t.values[i] = (double)(low + (int64_t)(dense_next(rng) % (uint64_t)(high - low)));
  return t;
}

dense_tensor dense_copy(const dense_tensor *t) {
  dense_tensor c = dense_zeros(t->dtype, t->rank, t->shape);
  memcpy(c.values, t->values, sizeof(double) * (size_t)t->count);
  return c;
}

dense_tensor dense_flat_rows(const dense_tensor *t) {
  dense_tensor v = *t;
  v.rank = 2;
  v.shape[1] = t->shape[t->rank - 1];
  v.shape[0] = t->count / v.shape[1];
  return v;
}

void dense_free(dense_tensor *t) {
  free(t->values);
  t->values = NULL;
}

void dense_free_all(dense_tensor *ts, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    dense_free(&ts[i]);
}

void dense_setup(void) { openblas_set_num_threads(1); }

#define DENSE_OPS(X)                                                                                                   \
  X(TF_OP_MATMUL, matmul)                                                                                              \
  X(TF_OP_CONV1D, conv1d)                                                                                              \
  X(TF_OP_CONV2D, conv2d)                                                                                              \
  X(TF_OP_CONV_TRANSPOSE2D, conv_transpose2d)                                                                          \
  X(TF_OP_CONV1D_GRAD_INPUT, conv1d_grad_input)                                                                        \
  X(TF_OP_CONV1D_GRAD_WEIGHT, conv1d_grad_weight)                                                                      \
  X(TF_OP_CONV2D_GRAD_INPUT, conv2d_grad_input)                                                                        \
  X(TF_OP_CONV2D_GRAD_WEIGHT, conv2d_grad_weight)                                                                      \
  X(TF_OP_MAX_POOL2D, max_pool2d)                                                                                      \
  X(TF_OP_AVG_POOL2D, avg_pool2d)                                                                                      \
  X(TF_OP_MAX_POOL2D_GRAD, max_pool2d_grad)                                                                            \
  X(TF_OP_AVG_POOL2D_GRAD, avg_pool2d_grad)                                                                            \
  X(TF_OP_ATTENTION, attention)                                                                                        \
  X(TF_OP_ATTENTION_GRAD, attention_grad)                                                                              \
  X(TF_OP_EMBEDDING, embedding)                                                                                        \
  X(TF_OP_EMBEDDING_GRAD, embedding_grad)

tf_cpu_kernel dense_kernel(tf_op op, bool f64) {
#define DENSE_CASE(value, name)                                                                                        \
  case value: return f64 ? tf_cpu_##name##_f64 : tf_cpu_##name##_f32;
  switch (op) {
    DENSE_OPS(DENSE_CASE)
  default: return NULL;
  }
#undef DENSE_CASE
}

int32_t dense_infer(tf_op op, const tf_attrs *attrs, const dense_tensor *inputs, int32_t n_inputs,
                    dense_tensor *outputs) {
  tf_shape_operand operands[8];
  for (int32_t i = 0; i < n_inputs; i++)
    operands[i] = (tf_shape_operand){"x", inputs[i].dtype, TF_ACTIVATION, inputs[i].rank, inputs[i].shape};
  const tf_op_info *info = tf_op_info_get(op);
  tf_shape_query query = {op, attrs, n_inputs, operands, NULL, NULL};
  tf_shape_result results[TF_MAX_OUTPUTS];
  memset(results, 0, sizeof(results));
  tf_status status = info->shape_rule(&query, results);
  if (status) {
    printf("shape rule of %s refused: %s\n", info->name, tf_status_message(status));
    tf_status_free(status);
    return -1;
  }
  for (int32_t i = 0; i < info->n_outputs; i++)
    outputs[i] = dense_zeros(results[i].dtype, results[i].rank, results[i].shape);
  return info->n_outputs;
}

/* A block with GUARD_BYTES of guard on either side of `bytes` usable bytes, 64-byte aligned. */
static unsigned char *guarded_alloc(int64_t bytes) {
  size_t total = (size_t)(GUARD_BYTES + bytes + GUARD_BYTES + 63) / 64 * 64;
  unsigned char *block = aligned_alloc(64, total);
  if (!block) {
    fprintf(stderr, "out of memory for %" PRId64 " bytes\n", bytes);
    exit(2);
  }
  memset(block, GUARD_BYTE, total);
  return block;
}

static bool guards_intact(const unsigned char *block, int64_t bytes) {
  for (int64_t i = 0; i < GUARD_BYTES; i++)
    if (block[i] != GUARD_BYTE || block[GUARD_BYTES + bytes + i] != GUARD_BYTE)
      return false;
  return true;
}

/* The kernel's view of a test tensor, in a guarded block holding the compute type or the ids. */
static tf_cpu_tensor view_of(const dense_tensor *t, bool f64, unsigned char **block, int64_t *bytes) {
  tf_cpu_tensor v;
  memset(&v, 0, sizeof(v));
  v.dtype = t->dtype;
  v.rank = t->rank;
  memcpy(v.shape, t->shape, sizeof(t->shape));
  v.count = t->count;
  int64_t size = t->dtype == TF_I32 ? 4 : t->dtype == TF_I64 ? 8 : f64 ? 8 : 4;
  *bytes = size * t->count;
  *block = guarded_alloc(*bytes);
  v.data = *block + GUARD_BYTES;
  for (int64_t i = 0; i < t->count; i++) {
    double x = t->values[i];
    if (t->dtype == TF_I32)
      ((int32_t *)v.data)[i] = (int32_t)x;
    else if (t->dtype == TF_I64)
      ((int64_t *)v.data)[i] = (int64_t)x;
    else if (f64)
      ((double *)v.data)[i] = x;
    else
      ((float *)v.data)[i] = (float)x;
  }
  return v;
}

bool dense_run(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
               const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs, int32_t n_outputs,
               int64_t *workspace_bytes) {
  return dense_run_planned(counts, op, attrs, f64, threads, threads, inputs, n_inputs, outputs, n_outputs,
                           workspace_bytes);
}

bool dense_run_planned(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
                       int32_t planned_threads, const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs,
                       int32_t n_outputs, int64_t *workspace_bytes) {
  tf_cpu_tensor in[8], out[TF_MAX_OUTPUTS];
  unsigned char *in_blocks[8], *out_blocks[TF_MAX_OUTPUTS];
  int64_t in_bytes[8], out_bytes[TF_MAX_OUTPUTS];
  const tf_op_info *info = tf_op_info_get(op);
  for (int32_t i = 0; i < n_inputs; i++) {
    in[i] = view_of(&inputs[i], f64, &in_blocks[i], &in_bytes[i]);
    if (info->shape_only & (1u << i))
      in[i].data = NULL; // read for its shape only: a kernel touching the data crashes the test
  }
  for (int32_t i = 0; i < n_outputs; i++) {
    out[i] = view_of(&outputs[i], f64, &out_blocks[i], &out_bytes[i]);
    memset(out[i].data, 0xFF, (size_t)out_bytes[i]); // NaN in f32 and f64: every element must be written
  }
  int32_t element = f64 ? 8 : 4;
  int64_t bytes = tf_cpu_workspace_bytes(op, attrs, n_inputs, in, n_outputs, out, planned_threads, element);
  unsigned char *workspace = guarded_alloc(bytes);
  memset(workspace + GUARD_BYTES, 0xFF, (size_t)bytes); // NaN: a kernel must not read scratch it did not write
  tf_cpu_context context = {.threads = threads, .optimizer_step = 1, .seed = 1234};
  tf_cpu_args args = {.op = op,
                      .attrs = attrs,
                      .n_inputs = n_inputs,
                      .inputs = in,
                      .n_outputs = n_outputs,
                      .outputs = out,
                      .workspace = bytes ? workspace + GUARD_BYTES : NULL,
                      .workspace_bytes = bytes,
                      .context = &context};
  dense_kernel(op, f64)(&args);

  bool ok = guards_intact(workspace, bytes);
  CHECK(counts, ok, "%s (%s, %d threads): the workspace guard bytes changed (%" PRId64 " bytes planned)",
        tf_op_name(op), f64 ? "f64" : "f32", threads, bytes);
  for (int32_t i = 0; i < n_inputs; i++) {
    bool intact = guards_intact(in_blocks[i], in_bytes[i]);
    CHECK(counts, intact, "%s: guard bytes around input %d changed", tf_op_name(op), i);
    ok = ok && intact;
    free(in_blocks[i]);
  }
  for (int32_t i = 0; i < n_outputs; i++) {
    bool intact = guards_intact(out_blocks[i], out_bytes[i]);
    CHECK(counts, intact, "%s: guard bytes around output %d changed", tf_op_name(op), i);
    int64_t unwritten = 0;
    for (int64_t e = 0; e < outputs[i].count; e++) {
      double x = f64 ? ((double *)out[i].data)[e] : (double)((float *)out[i].data)[e];
      outputs[i].values[e] = x;
      unwritten += !isfinite(x);
    }
    CHECK(counts, unwritten == 0, "%s (%s, %d threads): %" PRId64 " of %" PRId64 " elements of output %d not finite",
          tf_op_name(op), f64 ? "f64" : "f32", threads, unwritten, outputs[i].count, i);
    ok = ok && intact && unwritten == 0;
    free(out_blocks[i]);
  }
  free(workspace);
  if (workspace_bytes)
    *workspace_bytes = bytes;
  return ok;
}

int32_t dense_call(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
                   const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs) {
  int32_t n = dense_infer(op, attrs, inputs, n_inputs, outputs);
  CHECK(counts, n >= 0, "%s: the shape rule refused the test's operands", tf_op_name(op));
  if (n >= 0)
    dense_run(counts, op, attrs, f64, threads, inputs, n_inputs, outputs, n, NULL);
  return n;
}

double dense_max_abs(const dense_tensor *t) {
  double m = 0;
  for (int64_t i = 0; i < t->count; i++)
    m = fmax(m, fabs(t->values[i]));
  return m;
}

double dense_relative_error(const dense_tensor *a, const dense_tensor *b, double floor) {
  if (a->count != b->count)
    return INFINITY;
  double diff = 0;
  for (int64_t i = 0; i < a->count; i++) {
    double d = fabs(a->values[i] - b->values[i]);
    diff = isnan(d) ? INFINITY : fmax(diff, d);
  }
  return diff / fmax(dense_max_abs(b), floor);
}

bool dense_identical(const dense_tensor *a, const dense_tensor *b) {
  return a->count == b->count && memcmp(a->values, b->values, sizeof(double) * (size_t)a->count) == 0;
}

tf_attrs dense_matmul_attrs(bool transpose_a, bool transpose_b) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = TF_ATTR_MATMUL;
  a.u.matmul.transpose_a = transpose_a;
  a.u.matmul.transpose_b = transpose_b;
  return a;
}

tf_attrs dense_conv_attrs(int32_t stride_h, int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t dilation_h,
                          int32_t dilation_w, int32_t groups, int32_t output_pad_h, int32_t output_pad_w) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = TF_ATTR_CONV;
  a.u.conv = (tf_conv_attrs){
      {stride_h, stride_w}, {pad_h, pad_w}, {dilation_h, dilation_w}, {output_pad_h, output_pad_w}, groups};
  return a;
}

tf_attrs dense_pool_attrs(int32_t kernel_h, int32_t kernel_w, int32_t stride_h, int32_t stride_w, int32_t pad_h,
                          int32_t pad_w) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = TF_ATTR_POOL;
  a.u.pool = (tf_pool_attrs){{kernel_h, kernel_w}, {stride_h, stride_w}, {pad_h, pad_w}};
  return a;
}

tf_attrs dense_attention_attrs(int32_t heads, bool causal, float scale) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  a.kind = TF_ATTR_ATTENTION;
  a.u.attention = (tf_attention_attrs){heads, causal, scale};
  return a;
}

tf_attrs dense_no_attrs(void) {
  tf_attrs a;
  memset(&a, 0, sizeof(a));
  return a;
}

const char *dense_shape_text(const dense_tensor *t, int slot) {
  static char buffers[4][128];
  char *s = buffers[slot & 3];
  int used = snprintf(s, 128, "[");
  for (int32_t i = 0; i < t->rank && used < 100; i++)
    used += snprintf(s + used, (size_t)(128 - used), "%s%" PRId64, i ? "," : "", t->shape[i]);
  snprintf(s + used, (size_t)(128 - used), "]");
  return s;
}
