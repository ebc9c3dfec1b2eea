/* The CUDA kernels' error values (kernels/cuda/kernels.h), checked on any machine that builds them:
 * what tf_cuda_kernel_check refuses, as a TF_ERR_UNSUPPORTED status naming the op and the numbers
 * (host logic only, no GPU needed); and, where there is no CUDA device, what tf_cuda_kernel_launch
 * returns when CUDA or cuBLAS refuses a launch: a TF_ERR_BACKEND status naming the op, the call and
 * the error. With a device those launches would run for real on null pointers, so they are left to
 * test_cuda_ops there. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels/cuda/kernels.h"

static tf_test_counts counts;

/* A tensor of `dtype` and `rank` dims from `shape`, at no memory (checks read only the shapes). */
static tf_cuda_tensor tensor(tf_dtype dtype, int32_t rank, const int64_t *shape) {
  tf_cuda_tensor t = {.data = NULL, .dtype = dtype, .rank = rank, .count = 1};
  for (int32_t d = 0; d < rank; d++) {
    t.shape[d] = shape[d];
    t.count *= shape[d];
  }
  return t;
}

/* Checks that `status` has `code` and contains each of `wanted` (NULL-terminated), prints it, frees it. */
static void expect(const char *label, tf_status status, tf_code code, const char *const *wanted) {
  bool found = true;
  for (int i = 0; wanted[i]; i++)
    found = found && strstr(tf_status_message(status), wanted[i]) != NULL;
  CHECK(&counts, tf_status_code(status) == code && found, "%s: got %s: '%s'", label,
        tf_code_name(tf_status_code(status)), tf_status_message(status));
  printf("%-4s %s: %s: %s\n", tf_status_code(status) == code && found ? "ok" : "FAIL", label,
         tf_code_name(tf_status_code(status)), tf_status_message(status));
  tf_status_free(status);
}

/* One op's arguments over tensors without memory; `args` points into the case, which stays put. */
typedef struct op_case {
  tf_attrs attrs;
  tf_cuda_tensor inputs[3], output;
  tf_cuda_args args;
} op_case;

static void case_init(op_case *c, tf_op op, tf_attr_kind kind, int32_t n_inputs) {
  memset(c, 0, sizeof(*c));
  c->attrs.kind = kind;
  c->args = (tf_cuda_args){
      .op = op, .attrs = &c->attrs, .n_inputs = n_inputs, .inputs = c->inputs, .n_outputs = 1, .outputs = &c->output};
}

/* add of two [4] tensors, the first of dtype `first`. */
static void add_case(op_case *c, tf_dtype first) {
  const int64_t four[] = {4};
  case_init(c, TF_OP_ADD, TF_ATTR_NONE, 2);
  c->inputs[0] = tensor(first, 1, four);
  c->inputs[1] = c->output = tensor(TF_F32, 1, four);
}

/* embedding_grad (ids [5] i32, dy [5, 4], table [7, 4] for its shape) -> dtable [7, 4], in `half`. */
static void embedding_grad_case(op_case *c, tf_dtype half) {
  const int64_t ids[] = {5}, dy[] = {5, 4}, table[] = {7, 4};
  case_init(c, TF_OP_EMBEDDING_GRAD, TF_ATTR_NONE, 3);
  c->inputs[0] = tensor(TF_I32, 1, ids);
  c->inputs[1] = tensor(half, 2, dy);
  c->inputs[2] = c->output = tensor(half, 2, table);
}

/* matmul [2, k] x [k, 3]. */
static void matmul_case(op_case *c, int64_t k) {
  const int64_t a[] = {2, k}, b[] = {k, 3}, product[] = {2, 3};
  case_init(c, TF_OP_MATMUL, TF_ATTR_MATMUL, 2);
  c->inputs[0] = tensor(TF_F32, 2, a);
  c->inputs[1] = tensor(TF_F32, 2, b);
  c->output = tensor(TF_F32, 2, product);
}

static void test_checks(void) {
  op_case c;
  add_case(&c, TF_F16);
  expect("add of an f16 operand beside f32 ones", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda add kernel", "input 1 is f32 beside f16 operands", NULL});
  c.inputs[1] = c.output = c.inputs[0];
  CHECK(&counts, tf_cuda_kernel_check(&c.args) == NULL, "add of f16 operands (a half kernel) refused");
  printf("ok   add of f16 operands: a half kernel, accepted\n");
  c.inputs[0].dtype = c.inputs[1].dtype = TF_BF16;
  expect("add of bf16 inputs into f16", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda add kernel", "output 0 is f16 beside bf16 operands", NULL});
  matmul_case(&c, 5); /* matmul_accumulate (sum, a, b) on bf16: C += would round the running sum */
  c.args.op = TF_OP_MATMUL_ACCUMULATE;
  c.inputs[2] = c.inputs[1];
  c.inputs[1] = c.inputs[0];
  c.inputs[0] = c.output;
  c.args.n_inputs = 3;
  c.args.n_outputs = 0;
  for (int k = 0; k < 3; k++)
    c.inputs[k].dtype = TF_BF16;
  expect("matmul_accumulate on bf16", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda matmul_accumulate kernel", "its operands are bf16", "f32 only", NULL});
  embedding_grad_case(&c, TF_BF16); /* each row's sum kept in f32 and written once: a half kernel */
  CHECK(&counts, tf_cuda_kernel_check(&c.args) == NULL, "embedding_grad on bf16 (a half kernel) refused");
  printf("ok   embedding_grad of bf16 dy into a bf16 dtable: a half kernel, accepted\n");
  c.args.op = TF_OP_EMBEDDING_GRAD_ACCUMULATE; /* (ids, dy, sum): sum += would round the running sums */
  c.inputs[2] = c.output;
  c.args.n_outputs = 0;
  expect("embedding_grad_accumulate on bf16", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda embedding_grad_accumulate kernel", "its operands are bf16", "f32 only", NULL});
  c.args.op = TF_OP_COUNT;
  expect("an op number past the table", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"no CUDA kernel for op", NULL});
  expect("launching it", tf_cuda_kernel_launch(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"no CUDA kernel for op", NULL});

  const int64_t qkv[] = {1, 4, 1280};
  case_init(&c, TF_OP_ATTENTION, TF_ATTR_ATTENTION, 3);
  c.attrs.u.attention.num_heads = 2;
  c.inputs[0] = c.inputs[1] = c.inputs[2] = c.output = tensor(TF_F32, 3, qkv);
  expect(
      "attention, heads of 640", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
      (const char *const[]){"cuda attention kernel", "head width 640 (1280 features / 2 heads)", "limit of 512", NULL});

  matmul_case(&c, (int64_t)1 << 31);
  expect("matmul, k = 2^31", tf_cuda_kernel_check(&c.args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda matmul kernel", "k is 2147483648", "32-bit int", NULL});
}

/* Checks that `status` is NULL (a step the kernels take), prints `label`, frees it. */
static void expect_accepted(const char *label, tf_status status) {
  CHECK(&counts, status == NULL, "%s refused: %s", label, tf_status_message(status));
  printf("%-4s %s: accepted\n", status ? "FAIL" : "ok", label);
  tf_status_free(status);
}

/* The fused loss head's gradient on half x (kernels/cuda/linear_loss_half.cu): x [4, 8], weight
 * [5, 8]ᵀ and dx, dweight in `half`, i32 labels, f32 dloss; accepted, and refused (naming the operand)
 * with a weight of the other half type, a half dloss, or in its accumulating form. */
static void test_half_head_checks(tf_dtype half) {
  const int64_t x_shape[] = {4, 8}, w_shape[] = {5, 8}, rows[] = {4};
  tf_attrs attrs = {.kind = TF_ATTR_CROSS_ENTROPY};
  attrs.u.cross_entropy.transpose_weight = true;
  attrs.u.cross_entropy.ignore_index = -100;
  tf_cuda_tensor inputs[5] = {tensor(half, 2, x_shape), tensor(half, 2, w_shape), tensor(TF_I32, 1, rows),
                              tensor(TF_F32, 0, NULL), tensor(half, 2, w_shape)};
  tf_cuda_tensor outputs[2] = {tensor(half, 2, x_shape), tensor(half, 2, w_shape)};
  tf_cuda_args args = {.op = TF_OP_LINEAR_CROSS_ENTROPY_GRAD,
                       .attrs = &attrs,
                       .n_inputs = 4,
                       .inputs = inputs,
                       .n_outputs = 2,
                       .outputs = outputs};
  char label[96];
  snprintf(label, sizeof(label), "linear_cross_entropy_grad on %s x, weight and gradients, f32 dloss",
           tf_dtype_name(half));
  expect_accepted(label, tf_cuda_kernel_check(&args));
  const tf_dtype other = half == TF_BF16 ? TF_F16 : TF_BF16;
  char wanted[64];
  inputs[1].dtype = other;
  snprintf(wanted, sizeof(wanted), "input 1 is %s beside %s x", tf_dtype_name(other), tf_dtype_name(half));
  expect("the half head, a weight of the other half type", tf_cuda_kernel_check(&args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda linear_cross_entropy_grad kernel", wanted, NULL});
  inputs[1].dtype = half;
  inputs[3].dtype = half;
  snprintf(wanted, sizeof(wanted), "input 3 is %s beside %s x", tf_dtype_name(half), tf_dtype_name(half));
  expect("the half head, a half dloss", tf_cuda_kernel_check(&args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda linear_cross_entropy_grad kernel", wanted, "f32 dloss", NULL});
  inputs[3].dtype = TF_F32;
  args.op = TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE; /* (x, w, labels, dloss, dweight_sum) -> dx */
  args.n_inputs = 5;
  args.n_outputs = 1;
  expect("the half head adding into a half accumulator", tf_cuda_kernel_check(&args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda linear_cross_entropy_grad_accumulate kernel", "half accumulators", NULL});
}

/* mse_grad on half data (loss.cu): prediction, target and gradient [6] in `half`, f32 dloss:
 * accepted; a target of the other half type, or an f32 gradient, refused naming the operand. */
static void test_half_loss_checks(tf_dtype half) {
  const int64_t six[] = {6};
  tf_cuda_tensor inputs[3] = {tensor(half, 1, six), tensor(half, 1, six), tensor(TF_F32, 0, NULL)};
  tf_cuda_tensor output = tensor(half, 1, six);
  tf_attrs attrs = {.kind = TF_ATTR_NONE};
  tf_cuda_args args = {
      .op = TF_OP_MSE_GRAD, .attrs = &attrs, .n_inputs = 3, .inputs = inputs, .n_outputs = 1, .outputs = &output};
  char label[96];
  snprintf(label, sizeof(label), "mse_grad on %s prediction, target and gradient, f32 dloss", tf_dtype_name(half));
  expect_accepted(label, tf_cuda_kernel_check(&args));
  const tf_dtype other = half == TF_BF16 ? TF_F16 : TF_BF16;
  char wanted[64];
  inputs[1].dtype = other;
  snprintf(wanted, sizeof(wanted), "input 1 is %s beside %s x", tf_dtype_name(other), tf_dtype_name(half));
  expect("mse_grad, a target of the other half type", tf_cuda_kernel_check(&args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda mse_grad kernel", wanted, NULL});
  inputs[1].dtype = half;
  output.dtype = TF_F32;
  snprintf(wanted, sizeof(wanted), "output 0 is f32 beside %s x", tf_dtype_name(half));
  expect("mse_grad, an f32 gradient of half data", tf_cuda_kernel_check(&args), TF_ERR_UNSUPPORTED,
         (const char *const[]){"cuda mse_grad kernel", wanted, NULL});
}

/* Without a device every launch fails: CUDA's launch error, or cuBLAS's refusal of a null handle. */
static void test_launch_failures(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    printf("ok   launch failures: this machine has %d CUDA device(s); test_cuda_ops launches for real\n", devices);
    return;
  }
  op_case c;
  add_case(&c, TF_F32);
  expect("add without a device", tf_cuda_kernel_launch(&c.args), TF_ERR_BACKEND,
         (const char *const[]){"cuda add kernel: launching a kernel failed: ", "(cuda", NULL});
  matmul_case(&c, 5);
  expect("matmul without a cuBLAS handle", tf_cuda_kernel_launch(&c.args), TF_ERR_BACKEND,
         (const char *const[]){"cuda matmul kernel: cublasSetWorkspace (0 bytes) failed: ", "(CUBLAS_STATUS_", NULL});
}

int main(void) {
  test_checks();
  test_half_head_checks(TF_BF16);
  test_half_head_checks(TF_F16);
  test_half_loss_checks(TF_BF16);
  test_half_loss_checks(TF_F16);
  test_launch_failures();
  return tf_test_finish("cuda errors", &counts);
}
