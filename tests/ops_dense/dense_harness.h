/* Test harness of the dense CPU kernels (matmul, conv, pool, attention, embedding): tensors held in
 * float64, output shapes from the compiler's shape rules, and a runner that calls a kernel in f32
 * or f64 the way the CPU backend does, with the workspace of exactly tf_cpu_workspace_bytes()
 * bytes followed by guard bytes that must stay untouched. */
#ifndef TIGHTFIT_TESTS_OPS_DENSE_HARNESS_H
#define TIGHTFIT_TESTS_OPS_DENSE_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "core/workspace_cpu.h"
#include "kernels/cpu/kernels.h"

/* A tensor of the tests: floating values (dtype TF_F32, held in f64 here) or ids (TF_I32/TF_I64). */
typedef struct dense_tensor {
  tf_dtype dtype;
  int32_t rank;
  int64_t shape[TF_MAX_RANK];
  int64_t count;
  double *values;
} dense_tensor;

#define DENSE_RANK(...) ((int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define DENSE_SHAPE(...)                                                                                               \
  DENSE_RANK(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }

typedef struct dense_rng {
  uint64_t state;
} dense_rng;

uint64_t dense_next(dense_rng *rng);
double dense_uniform(dense_rng *rng, double low, double high);

/* A zero tensor; the caller frees it with dense_free(). */
dense_tensor dense_zeros(tf_dtype dtype, int32_t rank, const int64_t *shape);
/* Uniform values in [low, high). */
dense_tensor dense_random(dense_rng *rng, int32_t rank, const int64_t *shape, double low, double high);
/* ids of `dtype` uniform in [low, high). */
dense_tensor dense_random_ids(dense_rng *rng, tf_dtype dtype, int32_t rank, const int64_t *shape, int64_t low,
                              int64_t high);
dense_tensor dense_copy(const dense_tensor *t);
/* A view of t (sharing its values) as [rows, last dim]. */
dense_tensor dense_flat_rows(const dense_tensor *t);
void dense_free(dense_tensor *t);
/* Frees n tensors. */
void dense_free_all(dense_tensor *ts, int32_t n);

/* Makes BLAS single-threaded, as the kernels expect (core/workspace_cpu.h). */
void dense_setup(void);

/* The f32 or f64 kernel of one of the dense ops; NULL for any other op. */
tf_cpu_kernel dense_kernel(tf_op op, bool f64);

/* Output shapes of `op` by the compiler's shape rule; allocates *outputs (zeros) and returns their
 * number, or -1 (with the rule's message printed) when the rule refuses the operands. */
int32_t dense_infer(tf_op op, const tf_attrs *attrs, const dense_tensor *inputs, int32_t n_inputs,
                    dense_tensor *outputs);

/* Runs the kernel of `op` in f64 or f32 (inputs rounded to f32, outputs widened back) on `threads`
 * threads into the already-shaped `outputs`. Outputs and workspace are poisoned with NaN first;
 * the workspace is exactly tf_cpu_workspace_bytes() bytes between guard bytes; inputs the op table
 * marks shape-only get NULL data. Records in `counts`
 * whether the guards held and every output element was written with a finite value; returns
 * whether all of that held. *workspace_bytes (may be NULL) receives the workspace size. */
bool dense_run(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
               const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs, int32_t n_outputs,
               int64_t *workspace_bytes);

/* dense_run() with the workspace planned for `planned_threads` threads while the kernel runs with
 * `threads`: the backend may run fewer threads than the plan was made for. */
bool dense_run_planned(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
                       int32_t planned_threads, const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs,
                       int32_t n_outputs, int64_t *workspace_bytes);

/* dense_infer() + dense_run(); returns the number of outputs or -1. */
int32_t dense_call(tf_test_counts *counts, tf_op op, const tf_attrs *attrs, bool f64, int32_t threads,
                   const dense_tensor *inputs, int32_t n_inputs, dense_tensor *outputs);

/* max |a - b| / max(max |b|, floor): the error of a relative to the reference b. */
double dense_relative_error(const dense_tensor *a, const dense_tensor *b, double floor);
bool dense_identical(const dense_tensor *a, const dense_tensor *b);
double dense_max_abs(const dense_tensor *t);

/* Attribute builders. */
tf_attrs dense_matmul_attrs(bool transpose_a, bool transpose_b);
/* conv1d uses index 0 of each pair. */
tf_attrs dense_conv_attrs(int32_t stride_h, int32_t stride_w, int32_t pad_h, int32_t pad_w, int32_t dilation_h,
                          int32_t dilation_w, int32_t groups, int32_t output_pad_h, int32_t output_pad_w);
tf_attrs dense_pool_attrs(int32_t kernel_h, int32_t kernel_w, int32_t stride_h, int32_t stride_w, int32_t pad_h,
                          int32_t pad_w);
tf_attrs dense_attention_attrs(int32_t heads, bool causal, float scale);
tf_attrs dense_no_attrs(void);

/* A one-line description of a shape, e.g. "[2,3,5]", in a static buffer per call slot (0..3). */
const char *dense_shape_text(const dense_tensor *t, int slot);

#endif
