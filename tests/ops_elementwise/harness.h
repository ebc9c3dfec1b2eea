/* Test harness for the element-wise, reduction, layout, loss and optimizer CPU kernels: tensors
 * held as double values, and one call that infers an op's outputs with the compiler's shape rule,
 * runs its f32 or f64 kernel and reads the results back as doubles.
 *
 * Allocations of a test are released together by th_release(). */
#ifndef TIGHTFIT_TESTS_OPS_ELEMENTWISE_HARNESS_H
#define TIGHTFIT_TESTS_OPS_ELEMENTWISE_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/kernels.h"
#include "tightfit/graph.h"

/* A test tensor: floating (TF_F32 whatever the build; the kernel's compute type at run time) or an
 * index tensor (TF_I32, TF_I64: labels), its values in double either way (exact up to 2^53). */
typedef struct th_tensor {
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count;
  double *values;
} th_tensor;

#define TH_SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

/* ---- allocation and random numbers ---- */
void *th_alloc(size_t bytes); /* zeroed; freed by th_release() */
void th_release(void);
void th_seed(uint64_t seed);
double th_uniform(double low, double high);
int64_t th_integer(int64_t low, int64_t high); /* in [low, high] */

/* ---- tensors ---- */
th_tensor th_zeros(tf_dtype dtype, size_t rank, const int64_t *shape);
th_tensor th_random(double low, double high, size_t rank, const int64_t *shape);
/* A mask with zeros at every third element (from the first), 1, -0.5 or 3 elsewhere: keep's masks. */
th_tensor th_mask_with_zeros(size_t rank, const int64_t *shape);
/* Values in [-2, 2] with NaN, +inf and -inf where th_mask_with_zeros of the shape is 0. */
th_tensor th_nonfinite_where_zero(size_t rank, const int64_t *shape);
th_tensor th_scalar(double value);
th_tensor th_copy(const th_tensor *t);
/* The same values rounded to float: f32 and f64 runs then see identical inputs. */
void th_round_to_float(th_tensor *t);
const char *th_shape_text(const th_tensor *t); /* "[2,3,5]"; valid until the next call */

/* ---- attributes ---- */
tf_attrs th_no_attrs(void);
tf_attrs th_reduce(bool keepdims, int32_t n_axes, const int32_t *axes);
tf_attrs th_axis(int32_t axis);
tf_attrs th_norm(float epsilon);
tf_attrs th_shape_attrs(size_t rank, const int64_t *shape);
tf_attrs th_transpose(size_t rank, const int32_t *perm);
tf_attrs th_slice(int32_t axis, int64_t start, int64_t end, int64_t step);
tf_attrs th_dropout(float rate, uint64_t seed);
tf_attrs th_gelu(bool approximate);
tf_attrs th_leaky_relu(float alpha);
tf_attrs th_clip(float lo, float hi);
tf_attrs th_cross_entropy(int64_t ignore_index);
tf_attrs th_optimizer(float lr, float momentum, float beta1, float beta2, float epsilon, float weight_decay,
                      float clip_norm, float grad_scale);

/* ---- running kernels ---- */

/* The context of the next th_run calls (threads, optimizer_step, micro_step, seed). */
extern tf_cpu_context th_context;

/* Runs op's kernel (f64 or f32) on `inputs`; outputs[0..n) receive the op's outputs, shaped by the
 * op's shape rule (core/ops.c), and in-place inputs are updated. Returns the number of outputs,
 * or -1 after printing why the shape rule refused the call. In f32 runs every floating value is
 * rounded to float on the way in. */
int th_run(tf_op op, const tf_attrs *attrs, th_tensor *inputs, int n_inputs, th_tensor *outputs, bool f64);

/* th_run in f64 returning the first output (an empty tensor for in-place ops); aborts the test on
 * a refusal (a bug in the test). th_call(op, attrs, &a, &b, ...) lists the inputs. */
th_tensor th_call_list(tf_op op, const tf_attrs *attrs, const th_tensor *const *inputs, int n_inputs);
#define th_call(op, attrs, ...)                                                                                        \
  th_call_list(op, attrs, (const th_tensor *const[]){__VA_ARGS__},                                                     \
               (int)(sizeof((const th_tensor *const[]){__VA_ARGS__}) / sizeof(const th_tensor *)))

/* max |a - b| / max(max |b|, floor): the error of a against reference b, relative to b's scale. */
double th_relative_error(const th_tensor *a, const th_tensor *b, double floor);
bool th_bitwise_equal(const th_tensor *a, const th_tensor *b);

#endif
