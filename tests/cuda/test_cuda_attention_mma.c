/* Attention on tensor cores (kernels/cuda/attention_mma*.cu). Anywhere: the choice of path
 * (tf_cuda_tensor_attention_refusal, _describe, _mode_of: dtypes, head width, compute capability,
 * shared memory, alignment, workspace, the switch). On a GPU: bf16 and f16, D 32, 64, 128, T in
 * {1, 17, 64, 130, 256} (tails of the 64-row tiles), causal and not, Tq != Tk, forward and gradient,
 *   1. the two-term path (=split: P, dS as two half terms) against a float64 reference on the same half
 *      inputs, held to the conformance suite's step tolerance for half data (harness: one rounding of
 *      the result, u = 2^-8 bf16, 2^-11 f16, plus the f32 "sums" tolerance): |y - ref| <= (1e-5 +
 *      1.01 u)|ref| + 1e-5 max(1, max |ref|). Two-term P is P to 2^-16 (bf16) relative, far inside;
 *   2. the same through the launcher (attention.cu's choice, =split) bit for bit (deterministic, and proof
 *      the launcher took the tensor path), and the CUDA-core kernels (TIGHTFIT_CUDA_TENSOR_ATTENTION=0)
 *      against the same reference and against the tensor path (2.02 u |b| + 2e-5 max(1, max |b|):
 *      each within one rounding of the f32 result);
 *   3. TIGHTFIT_CUDA_TENSOR_ATTENTION=rounded (P, dS rounded once: each term off by up to u of itself,
 *      so an output by up to u sum |terms|, a few times max |ref| for these data): 1.01 u |ref| +
 *      4 u max(1, max |ref|);
 *   4. the default, =fast (attention_fast*.cu, FlashAttention-2-style kernels; P and dS rounded
 *      once, as `rounded`): the same tolerance as 3, and through the launcher with the switch unset
 *      bit for bit;
 *   5. causal: query 0 sees one key, so its dS is 0 and dq's row 0 must be exactly 0 (delta from the
 *      same dP product as dS, attention_mma.cu, attention_fast.cuh), on every tensor path.
 *   6. f32 (attention_f32*.cu, the default; TIGHTFIT_CUDA_F32_ATTENTION=cores: the CUDA cores): the
 *      tensor kernels and the CUDA-core ones against the reference at f32's tolerance, 2e-5 |ref| +
 *      2e-5 max(1, max |ref|) (a 3xTF32 product is the f32 one to ~2^-21; a wrong fragment is off by
 *      O(1)), the launcher with the switch unset bit for bit the tensor kernels', and dq's row 0 exactly 0.
 * Then the step times of gpt2-small's attention (8 x 1024, 12 heads of 64, causal) on each path, bf16
 * and f32.
 * Exits 77 after the host checks without a CUDA device. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda_test.h"
#include "half_values.h"
#include "kernels/cuda/kernels.h"

static tf_test_counts counts;

/* ---- one attention problem: tensors, attributes and the launch arguments of both ops ---- */

typedef struct problem {
  tf_dtype type;
  int64_t batch, queries, keys, heads, depth;
  bool causal;
  tf_attrs attrs;
  tf_cuda_tensor forward_in[3], forward_out[1], grad_in[4], grad_out[3];
  tf_cuda_args forward, grad;
} problem;

static tf_cuda_tensor tensor_of(tf_dtype type, int64_t n, int64_t t, int64_t width, void *data) {
  tf_cuda_tensor x = {.data = data, .dtype = type, .rank = 3, .shape = {n, t, width}, .count = n * t * width};
  return x;
}

static size_t element_bytes(tf_dtype type) { return type == TF_F32 ? 4 : 2; }

/* The problem's arguments over device buffers (NULL: none, for host checks). */
static void problem_init(problem *p, tf_dtype type, int64_t n, int64_t tq, int64_t tk, int64_t heads, int64_t depth,
                         bool causal, void *const buffers[8], void *workspace, int64_t workspace_bytes) {
  memset(p, 0, sizeof(*p));
  p->type = type, p->batch = n, p->queries = tq, p->keys = tk, p->heads = heads, p->depth = depth;
  p->causal = causal;
  p->attrs.kind = TF_ATTR_ATTENTION;
  p->attrs.u.attention.num_heads = (int32_t)heads;
  p->attrs.u.attention.causal = causal;
  const int64_t width = heads * depth;
  void *const *b = buffers;
  p->forward_in[0] = p->grad_in[0] = tensor_of(type, n, tq, width, b ? b[0] : NULL);
  p->forward_in[1] = p->grad_in[1] = tensor_of(type, n, tk, width, b ? b[1] : NULL);
  p->forward_in[2] = p->grad_in[2] = tensor_of(type, n, tk, width, b ? b[2] : NULL);
  p->grad_in[3] = tensor_of(type, n, tq, width, b ? b[3] : NULL);
  p->forward_out[0] = tensor_of(type, n, tq, width, b ? b[4] : NULL);
  p->grad_out[0] = tensor_of(type, n, tq, width, b ? b[5] : NULL);
  p->grad_out[1] = tensor_of(type, n, tk, width, b ? b[6] : NULL);
  p->grad_out[2] = tensor_of(type, n, tk, width, b ? b[7] : NULL);
  p->forward = (tf_cuda_args){.op = TF_OP_ATTENTION,
                              .attrs = &p->attrs,
                              .n_inputs = 3,
                              .inputs = p->forward_in,
                              .n_outputs = 1,
                              .outputs = p->forward_out};
  p->grad = (tf_cuda_args){.op = TF_OP_ATTENTION_GRAD,
                           .attrs = &p->attrs,
                           .n_inputs = 4,
                           .inputs = p->grad_in,
                           .n_outputs = 3,
                           .outputs = p->grad_out,
                           .workspace = workspace,
                           .workspace_bytes = workspace_bytes};
}

/* ---- the choice of path, host logic ---- */

static void expect_refusal(const char *label, const tf_cuda_args *args, int major, int64_t shared,
                           tf_cuda_attention_mode mode, const char *wanted) {
  const char *why = tf_cuda_tensor_attention_refusal(args, major, 0, shared, mode);
  const bool ok = wanted ? why && strstr(why, wanted) : why == NULL;
  CHECK(&counts, ok, "%s: refusal '%s', wanted '%s'", label, why ? why : "(none)", wanted ? wanted : "(none)");
  printf("%-4s %s: %s\n", ok ? "ok" : "FAIL", label, why ? why : "tensor cores");
}

/* The f32 tensor kernels' choice: the switch, the refusals, the devices line. */
static void expect_f32(const char *label, const tf_cuda_args *args, int major, int64_t shared, const char *wanted) {
  const char *why = tf_cuda_f32_attention_refusal(args, major, 0, shared);
  const bool ok = wanted ? why && strstr(why, wanted) : why == NULL;
  CHECK(&counts, ok, "f32 refusal %s: got '%s', wanted %s", label, why ? why : "(accepted)",
        wanted ? wanted : "accept");
  printf("%-4s f32 %s: %s\n", ok ? "ok" : "FAIL", label, why ? why : "accepted");
}

static void test_f32_choice(int64_t h100, void *const aligned[8], void *fake, int64_t workspace) {
  const struct {
    const char *value;
    bool on;
  } values[] = {{NULL, true}, {"", true}, {"0", false}, {"cores", false}, {"tensor", true}, {"1", true}};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
    CHECK(&counts, tf_cuda_f32_attention_on(values[i].value) == values[i].on, "TIGHTFIT_CUDA_F32_ATTENTION=%s",
          values[i].value ? values[i].value : "(unset)");
  printf("ok   TIGHTFIT_CUDA_F32_ATTENTION: unset, '', tensor, 1 -> tensor cores; cores, 0 -> CUDA cores\n");
  problem p;
  problem_init(&p, TF_F32, 2, 130, 130, 2, 64, true, aligned, fake, workspace);
  expect_f32("D 64 forward, sm_90", &p.forward, 9, h100, NULL);
  expect_f32("D 64 gradient, sm_80", &p.grad, 8, h100, NULL);
  expect_f32("D 64 gradient, 99 KiB (sm_86)", &p.grad, 8, 99 * 1024, "shared memory");
  expect_f32("D 64 forward, sm_75", &p.forward, 7, h100, "compute capability");
  problem_init(&p, TF_F32, 2, 130, 130, 2, 128, true, aligned, fake, workspace);
  expect_f32("D 128 forward, 227 KiB", &p.forward, 9, h100, NULL);
  expect_f32("D 128 gradient, 227 KiB", &p.grad, 9, h100, "shared memory");
  problem_init(&p, TF_F32, 2, 130, 130, 2, 100, true, aligned, fake, workspace);
  expect_f32("D 100", &p.forward, 9, h100, "head width");
  problem_init(&p, TF_BF16, 2, 130, 130, 2, 64, true, aligned, fake, workspace);
  expect_f32("bf16 operands", &p.forward, 9, h100, "not all f32");
  problem_init(&p, TF_F32, 2, 130, 130, 2, 64, true, aligned, fake, workspace);
  p.grad_in[3].dtype = TF_BF16;
  expect_f32("f32 q, k, v with a bf16 dy", &p.grad, 9, h100, "not all f32");
  const struct {
    int major;
    int64_t shared;
    bool on;
    const char *wanted;
  } lines[] = {
      {9, h100, true, "f32 attention: tensor cores (3xTF32 mma.sync, D in {32, 64, 128}; gradient D in {32, 64})"},
      {9, h100, false, "f32 attention: CUDA cores (TIGHTFIT_CUDA_F32_ATTENTION=cores"},
      {7, h100, true, "f32 attention: CUDA cores (compute capability 7.5"},
  };
  for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    char text[256];
    tf_cuda_f32_attention_describe(text, sizeof(text), lines[i].major, lines[i].major == 7 ? 5 : 0, lines[i].shared,
                                   lines[i].on);
    const bool ok = strstr(text, lines[i].wanted) != NULL;
    CHECK(&counts, ok, "f32 describe: '%s' lacks '%s'", text, lines[i].wanted);
    printf("%-4s f32 describe sm_%d%d: %s\n", ok ? "ok" : "FAIL", lines[i].major, lines[i].major == 7 ? 5 : 0, text);
  }
}

static void test_choice(void) {
  const int64_t h100 = 227 * 1024, a6000 = 99 * 1024;
  const int64_t big_workspace = (int64_t)1 << 30;
  char fake[64] __attribute__((aligned(16)));
  void *aligned[8] = {fake, fake, fake, fake, fake, fake, fake, fake};
  problem p;
  problem_init(&p, TF_BF16, 2, 130, 130, 2, 64, true, aligned, fake, big_workspace);
  expect_refusal("bf16 D 64 forward, sm_90", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, NULL);
  expect_refusal("bf16 D 64 gradient, sm_90", &p.grad, 9, h100, TF_CUDA_ATTENTION_SPLIT, NULL);
  expect_refusal("bf16 D 64 gradient, rounded", &p.grad, 8, h100, TF_CUDA_ATTENTION_ROUNDED, NULL);
  expect_refusal("bf16 D 64 forward, fast", &p.forward, 8, h100, TF_CUDA_ATTENTION_FAST, NULL);
  expect_refusal("bf16 D 64 gradient, fast", &p.grad, 9, h100, TF_CUDA_ATTENTION_FAST, NULL);
  expect_refusal("bf16 D 64 gradient, fast, sm_75", &p.grad, 7, h100, TF_CUDA_ATTENTION_FAST, "compute capability");
  expect_refusal("switched off", &p.forward, 9, h100, TF_CUDA_ATTENTION_OFF, "TIGHTFIT_CUDA_TENSOR_ATTENTION=0");
  expect_refusal("sm_75", &p.forward, 7, h100, TF_CUDA_ATTENTION_SPLIT, "compute capability");
  problem_init(&p, TF_F16, 1, 5, 9, 1, 128, false, aligned, fake, big_workspace);
  expect_refusal("f16 D 128 forward, 99 KiB (sm_86)", &p.forward, 8, a6000, TF_CUDA_ATTENTION_SPLIT, NULL);
  expect_refusal("f16 D 128 gradient, 99 KiB (sm_86)", &p.grad, 8, a6000, TF_CUDA_ATTENTION_SPLIT, "shared memory");
  expect_refusal("f16 D 128 forward, fast, 99 KiB (sm_86)", &p.forward, 8, a6000, TF_CUDA_ATTENTION_FAST, NULL);
  expect_refusal("f16 D 128 gradient, fast, 99 KiB (sm_86)", &p.grad, 8, a6000, TF_CUDA_ATTENTION_FAST,
                 "shared memory");
  problem_init(&p, TF_F32, 1, 5, 9, 1, 64, false, aligned, fake, big_workspace);
  expect_refusal("f32", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, "not f16 or bf16");
  problem_init(&p, TF_BF16, 1, 5, 9, 1, 100, false, aligned, fake, big_workspace);
  expect_refusal("D 100", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, "head width");
  problem_init(&p, TF_BF16, 1, 5, 9, 4, 16, false, aligned, fake, big_workspace);
  expect_refusal("D 16", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, "head width");
  problem_init(&p, TF_BF16, 1, 5, 9, 2, 32, true, aligned, fake, big_workspace);
  p.grad_in[3].dtype = TF_F32; /* half q, k, v beside an f32 dy (a --precision plan) */
  expect_refusal("bf16 q, k, v with f32 dy", &p.grad, 9, h100, TF_CUDA_ATTENTION_SPLIT, "one half type");
  problem_init(&p, TF_BF16, 1, 5, 9, 2, 32, true, aligned, fake, big_workspace);
  p.grad_out[1].dtype = TF_F32;
  expect_refusal("bf16 with an f32 dk", &p.grad, 9, h100, TF_CUDA_ATTENTION_SPLIT, "outputs");
  problem_init(&p, TF_BF16, 1, 5, 9, 2, 32, true, aligned, fake, big_workspace);
  p.forward_in[1].data = fake + 2;
  expect_refusal("k 2 bytes off 16", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, "aligned");
  problem_init(&p, TF_BF16, 3, 5, 9, 2, 32, true, aligned, fake, 256 + 4 * 29);
  expect_refusal("workspace one row short", &p.grad, 9, h100, TF_CUDA_ATTENTION_SPLIT, "workspace");
  problem_init(&p, TF_BF16, 3, 5, 9, 2, 32, true, aligned, fake, 256 + 4 * 30);
  expect_refusal("workspace exact", &p.grad, 9, h100, TF_CUDA_ATTENTION_SPLIT, NULL);
  problem_init(&p, TF_BF16, 1, 0, 9, 2, 32, true, aligned, fake, big_workspace);
  expect_refusal("no queries", &p.forward, 9, h100, TF_CUDA_ATTENTION_SPLIT, "no queries");
  test_f32_choice(h100, aligned, fake, big_workspace);

  const struct {
    const char *value;
    tf_cuda_attention_mode mode;
  } modes[] = {{NULL, TF_CUDA_ATTENTION_FAST},     {"", TF_CUDA_ATTENTION_FAST},
               {"1", TF_CUDA_ATTENTION_FAST},      {"0", TF_CUDA_ATTENTION_OFF},
               {"split", TF_CUDA_ATTENTION_SPLIT}, {"rounded", TF_CUDA_ATTENTION_ROUNDED},
               {"fast", TF_CUDA_ATTENTION_FAST}};
  for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
    CHECK(&counts, tf_cuda_attention_mode_of(modes[i].value) == modes[i].mode, "TIGHTFIT_CUDA_TENSOR_ATTENTION=%s",
          modes[i].value ? modes[i].value : "(unset)");
  printf("ok   TIGHTFIT_CUDA_TENSOR_ATTENTION: unset, '', 1, fast -> fast, 0 -> off, split -> two-term, rounded -> "
         "rounded\n");

  const struct {
    int major;
    int64_t shared;
    tf_cuda_attention_mode mode;
    const char *wanted;
  } lines[] = {
      {9, h100, TF_CUDA_ATTENTION_SPLIT,
       "attention: tensor cores (wmma bf16/f16, P, dS in two terms, D in {32, 64, 128})"},
      {8, a6000, TF_CUDA_ATTENTION_SPLIT, "D in {32, 64, 128}; gradient D in {32}"},
      {9, h100, TF_CUDA_ATTENTION_ROUNDED, "P, dS rounded"},
      {9, h100, TF_CUDA_ATTENTION_FAST,
       "attention: tensor cores (FlashAttention-2-style mma.sync bf16/f16, P, dS rounded, D in {32, 64, 128})"},
      {8, a6000, TF_CUDA_ATTENTION_FAST, "D in {32, 64, 128}; gradient D in {32, 64})"},
      {7, h100, TF_CUDA_ATTENTION_SPLIT, "attention: CUDA cores (compute capability 7.5"},
      {9, h100, TF_CUDA_ATTENTION_OFF, "attention: CUDA cores (TIGHTFIT_CUDA_TENSOR_ATTENTION=0)"},
  };
  for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
    char text[256];
    tf_cuda_tensor_attention_describe(text, sizeof(text), lines[i].major, lines[i].major == 7 ? 5 : 0, lines[i].shared,
                                      lines[i].mode);
    const bool ok = strstr(text, lines[i].wanted) != NULL;
    CHECK(&counts, ok, "describe: '%s' lacks '%s'", text, lines[i].wanted);
    printf("%-4s describe sm_%d%d, %lld bytes: %s\n", ok ? "ok" : "FAIL", lines[i].major, lines[i].major == 7 ? 5 : 0,
           (long long)lines[i].shared, text);
  }
}

/* ---- the float64 reference ---- */

typedef struct reference {
  double *y, *dq, *dk, *dv;
} reference;

/* Attention and its gradient in double on the half inputs (widened exactly), head by head. */
static void reference_run(const problem *p, const float *q, const float *k, const float *v, const float *dy,
                          reference *r) {
  const int64_t width = p->heads * p->depth, tq = p->queries, tk = p->keys, depth = p->depth;
  const double scale = 1.0 / sqrt((double)depth);
  double *s = malloc(sizeof(double) * (size_t)tk), *dp = malloc(sizeof(double) * (size_t)tk);
  for (int64_t n = 0; n < p->batch; n++)
    for (int64_t h = 0; h < p->heads; h++)
      for (int64_t i = 0; i < tq; i++) {
        const float *qi = q + (n * tq + i) * width + h * depth, *dyi = dy + (n * tq + i) * width + h * depth;
        double top = -INFINITY, sum = 0, delta = 0;
        for (int64_t j = 0; j < tk; j++) {
          const float *kj = k + (n * tk + j) * width + h * depth, *vj = v + (n * tk + j) * width + h * depth;
          double dot = 0, dvdot = 0;
          for (int64_t c = 0; c < depth; c++) {
            dot += (double)qi[c] * kj[c];
            dvdot += (double)dyi[c] * vj[c];
          }
          s[j] = p->causal && j > i ? -INFINITY : dot * scale;
          dp[j] = dvdot;
          top = s[j] > top ? s[j] : top;
        }
        for (int64_t j = 0; j < tk; j++)
          sum += s[j] == -INFINITY ? 0 : exp(s[j] - top);
        double *yi = r->y + (n * tq + i) * width + h * depth, *dqi = r->dq + (n * tq + i) * width + h * depth;
        for (int64_t j = 0; j < tk; j++) {
          const double pj = s[j] == -INFINITY ? 0 : exp(s[j] - top) / sum;
          s[j] = pj; /* s holds P from here on */
          delta += pj * dp[j];
          const float *vj = v + (n * tk + j) * width + h * depth;
          for (int64_t c = 0; c < depth; c++)
            yi[c] += pj * vj[c];
        }
        for (int64_t j = 0; j < tk; j++) {
          const double ds = s[j] * (dp[j] - delta);
          const float *kj = k + (n * tk + j) * width + h * depth;
          double *dkj = r->dk + (n * tk + j) * width + h * depth, *dvj = r->dv + (n * tk + j) * width + h * depth;
          for (int64_t c = 0; c < depth; c++) {
            dqi[c] += scale * ds * kj[c];
            dkj[c] += scale * ds * qi[c];
            dvj[c] += s[j] * dyi[c];
          }
        }
      }
  free(s);
  free(dp);
}

/* ---- comparisons ---- */

/* The largest |got - want| / (rel |want| + abs max(1, max |want|)) over n values (> 1: a failure). */
static double worst_ratio(const float *got, const double *want, int64_t n, double rel, double abs) {
  double magnitude = 1.0, worst = 0.0;
  for (int64_t i = 0; i < n; i++)
    magnitude = fmax(magnitude, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) {
    const double bound = rel * fabs(want[i]) + abs * magnitude;
    const double ratio = fabs((double)got[i] - want[i]) / bound;
    worst = isfinite(got[i]) ? fmax(worst, ratio) : INFINITY;
  }
  return worst;
}

/* Device buffers 4..7 (y, dq, dk, dv) to host floats; `bits` holds the largest as half bits. */
static bool download(const problem *p, void *const device[8], float *out[8], uint16_t *bits) {
  for (int b = 4; b < 8; b++) {
    const int64_t count = (b == 6 || b == 7 ? p->keys : p->queries) * p->batch * p->heads * p->depth;
    if (p->type == TF_F32) {
      if (cudaMemcpy(out[b], device[b], (size_t)count * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        return false;
      continue;
    }
    if (cudaMemcpy(bits, device[b], (size_t)count * 2, cudaMemcpyDeviceToHost) != cudaSuccess)
      return false;
    for (int64_t i = 0; i < count; i++)
      out[b][i] = tf_test_half_value(p->type, bits[i]);
  }
  return true;
}

/* What one path wrote (y, dq, dk, dv) and how it was obtained. */
typedef struct outcome {
  float *values[8]; /* [4..7] used */
  bool ran;
} outcome;

static bool outcome_alloc(outcome *o, int64_t count) {
  memset(o, 0, sizeof(*o));
  for (int b = 4; b < 8; b++)
    if (!(o->values[b] = calloc((size_t)count, sizeof(float))))
      return false;
  return true;
}

static void outcome_free(outcome *o) {
  for (int b = 4; b < 8; b++)
    free(o->values[b]);
}

/* Runs forward and gradient one way: 0 the tensor path (no fallback) in `mode` (f32: the f32 tensor
 * kernels), 1 the launcher under the environment as it is. Clears the outputs first. */
static void run_path(const problem *p, void *const device[8], int64_t count, int how, tf_cuda_attention_mode mode,
                     outcome *o, uint16_t *bits, const char *label) {
  for (int b = 4; b < 8; b++) /* NaN bits: an element left unwritten shows */
    cudaMemset(device[b], 0xff, (size_t)count * element_bytes(p->type));
  const bool f32 = p->type == TF_F32;
  tf_status status = how == 1 ? tf_cuda_kernel_launch(&p->forward)
                     : f32    ? tf_cuda_f32_attention_launch(&p->forward)
                              : tf_cuda_tensor_attention_launch(&p->forward, mode);
  if (!status)
    status = how == 1 ? tf_cuda_kernel_launch(&p->grad)
             : f32    ? tf_cuda_f32_attention_launch(&p->grad)
                      : tf_cuda_tensor_attention_launch(&p->grad, mode);
  const cudaError_t synced = cudaDeviceSynchronize();
  CHECK(&counts, status == NULL && synced == cudaSuccess, "%s: %s / %s", label, tf_status_message(status),
        cudaGetErrorString(synced));
  o->ran = status == NULL && synced == cudaSuccess && download(p, device, o->values, bits);
  tf_status_free(status);
}

static const char *NAMES[8] = {"q", "k", "v", "dy", "y", "dq", "dk", "dv"};

/* Checks each output of `o` against the reference: rel |ref| + abs max(1, max |ref|). */
static double against(const problem *p, const outcome *o, const reference *r, double rel, double abs,
                      const char *label) {
  if (!o->ran)
    return INFINITY;
  const double *want[8] = {NULL, NULL, NULL, NULL, r->y, r->dq, r->dk, r->dv};
  double worst = 0;
  for (int b = 4; b < 8; b++) {
    const int64_t count = (b == 6 || b == 7 ? p->keys : p->queries) * p->batch * p->heads * p->depth;
    const double ratio = worst_ratio(o->values[b], want[b], count, rel, abs);
    CHECK(&counts, ratio <= 1.0, "%s: %s at %.3g x its tolerance", label, NAMES[b], ratio);
    worst = fmax(worst, ratio);
  }
  return worst;
}

/* One problem on every path, checked as the top says. */
static void run_case(tf_dtype type, int64_t tq, int64_t tk, int64_t depth, bool causal) {
  const int64_t batch = 2, heads = 2, width = heads * depth;
  const int64_t count = batch * (tq > tk ? tq : tk) * width, rows = batch * heads * tq;
  const int64_t workspace_bytes = ((4 * rows + 255) / 256) * 256 + 4 * rows;
  char label[160];
  snprintf(label, sizeof(label), "%s D %lld %s Tq %lld Tk %lld", tf_dtype_name(type), (long long)depth,
           causal ? "causal" : "full", (long long)tq, (long long)tk);
  void *device[8] = {NULL}, *workspace = NULL;
  float *host[4] = {NULL};
  uint16_t *bits = malloc((size_t)count * 2);
  reference r = {calloc((size_t)count, 8), calloc((size_t)count, 8), calloc((size_t)count, 8),
                 calloc((size_t)count, 8)};
  outcome tensor = {0}, launcher = {0}, cores = {0}, rounded = {0}, fast = {0}, fast_launcher = {0};
  bool ok = bits && r.y && r.dq && r.dk && r.dv && outcome_alloc(&tensor, count) && outcome_alloc(&launcher, count) &&
            outcome_alloc(&cores, count) && outcome_alloc(&rounded, count) && outcome_alloc(&fast, count) &&
            outcome_alloc(&fast_launcher, count);
  for (int b = 0; b < 8 && ok; b++)
    ok = cudaMalloc(&device[b], (size_t)count * 2) == cudaSuccess;
  ok = ok && cudaMalloc(&workspace, (size_t)workspace_bytes) == cudaSuccess;
  uint64_t seed = 1234 + (uint64_t)(tq * 1000 + tk) * 7 + (uint64_t)depth + (causal ? 1 : 0) + (type == TF_F16);
  for (int b = 0; b < 4 && ok; b++) {
    const int64_t n = (b == 1 || b == 2 ? tk : tq) * batch * width;
    ok = (host[b] = malloc(sizeof(float) * (size_t)n)) != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
      bits[i] = tf_test_half_bits(type, (b == 0 ? 1.5 : 1.0) * cuda_test_normal(&seed)); /* q: sharper rows */
      host[b][i] = tf_test_half_value(type, bits[i]);
    }
    ok = ok && cudaMemcpy(device[b], bits, (size_t)n * 2, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  CHECK(&counts, ok, "%s: setting up (host or device memory)", label);
  if (ok) {
    problem p;
    problem_init(&p, type, batch, tq, tk, heads, depth, causal, device, workspace, workspace_bytes);
    reference_run(&p, host[0], host[1], host[2], host[3], &r);
    const double u = type == TF_BF16 ? 1.0 / 256.0 : 1.0 / 2048.0;
    setenv("TIGHTFIT_CUDA_TENSOR_ATTENTION", "split", 1);
    run_path(&p, device, count, 0, TF_CUDA_ATTENTION_SPLIT, &tensor, bits, label);
    run_path(&p, device, count, 1, TF_CUDA_ATTENTION_SPLIT, &launcher, bits, label);
    run_path(&p, device, count, 0, TF_CUDA_ATTENTION_ROUNDED, &rounded, bits, label);
    run_path(&p, device, count, 0, TF_CUDA_ATTENTION_FAST, &fast, bits, label);
    unsetenv("TIGHTFIT_CUDA_TENSOR_ATTENTION"); /* the default: the fast kernels */
    run_path(&p, device, count, 1, TF_CUDA_ATTENTION_FAST, &fast_launcher, bits, label);
    setenv("TIGHTFIT_CUDA_TENSOR_ATTENTION", "0", 1);
    run_path(&p, device, count, 1, TF_CUDA_ATTENTION_OFF, &cores, bits, label);
    unsetenv("TIGHTFIT_CUDA_TENSOR_ATTENTION");
    const double w_tensor = against(&p, &tensor, &r, 1e-5 + 1.01 * u, 1e-5, label);
    const double w_cores = against(&p, &cores, &r, 1e-5 + 1.01 * u, 1e-5, label);
    const double w_rounded = against(&p, &rounded, &r, 1.01 * u, 4 * u, label);
    const double w_fast = against(&p, &fast, &r, 1.01 * u, 4 * u, label);
    bool same = tensor.ran && launcher.ran, same_fast = fast.ran && fast_launcher.ran;
    for (int b = 4; b < 8; b++) {
      const size_t bytes = sizeof(float) * (size_t)(b == 6 || b == 7 ? tk : tq) * (size_t)(batch * width);
      same = same && memcmp(tensor.values[b], launcher.values[b], bytes) == 0;
      same_fast = same_fast && memcmp(fast.values[b], fast_launcher.values[b], bytes) == 0;
    }
    CHECK(&counts, same, "%s: the launcher's results differ from the tensor path's (did it take another path?)", label);
    CHECK(&counts, same_fast, "%s: the launcher's results by default differ from the fast kernels' (another path?)",
          label);
    double w_pair = 0; /* tensor path vs CUDA cores */
    for (int b = 4; b < 8 && tensor.ran && cores.ran; b++) {
      const int64_t n = (b == 6 || b == 7 ? tk : tq) * batch * width;
      double *wide = malloc(sizeof(double) * (size_t)n);
      for (int64_t i = 0; wide && i < n; i++)
        wide[i] = cores.values[b][i];
      const double ratio = wide ? worst_ratio(tensor.values[b], wide, n, 2.02 * u, 2e-5) : INFINITY;
      CHECK(&counts, ratio <= 1.0, "%s: %s, tensor path vs CUDA cores, %.3g x the tolerance", label, NAMES[b], ratio);
      w_pair = fmax(w_pair, ratio);
      free(wide);
    }
    bool zero_row = true; /* causal: query 0 sees key 0 only, dS = 0, dq row 0 exactly 0 */
    for (int64_t n = 0; causal && n < batch && tensor.ran && rounded.ran && fast.ran; n++)
      for (int64_t c = 0; c < width; c++)
        zero_row = zero_row && tensor.values[5][n * tq * width + c] == 0.0f &&
                   rounded.values[5][n * tq * width + c] == 0.0f && fast.values[5][n * tq * width + c] == 0.0f;
    CHECK(&counts, zero_row, "%s: dq of query 0 (one visible key) is not exactly 0", label);
    const bool passed =
        w_tensor <= 1 && w_cores <= 1 && w_rounded <= 1 && w_fast <= 1 && w_pair <= 1 && same && same_fast && zero_row;
    printf(
        "%-4s %-36s two-term %.3f, CUDA cores %.3f, rounded %.3f, fast %.3f, tensor vs cores %.3f (x tolerance)%s%s\n",
        passed ? "ok" : "FAIL", label, w_tensor, w_cores, w_rounded, w_fast, w_pair,
        same && same_fast ? "; launchers identical" : "",
        causal ? (zero_row ? "; dq row 0 exactly 0" : "; dq row 0 NOT 0") : "");
  }
  for (int b = 0; b < 8; b++)
    cudaFree(device[b]);
  cudaFree(workspace);
  for (int b = 0; b < 4; b++)
    free(host[b]);
  free(bits);
  free(r.y), free(r.dq), free(r.dk), free(r.dv);
  outcome_free(&tensor), outcome_free(&launcher), outcome_free(&cores), outcome_free(&rounded);
  outcome_free(&fast), outcome_free(&fast_launcher);
}

/* One f32 problem: the f32 tensor kernels (3xTF32), the launcher with TIGHTFIT_CUDA_F32_ATTENTION unset
 * (the default) and the CUDA-core kernels (=cores), as the top says (6). */
static void run_case_f32(int64_t tq, int64_t tk, int64_t depth, bool causal) {
  const int64_t batch = 2, heads = 2, width = heads * depth;
  const int64_t count = batch * (tq > tk ? tq : tk) * width, rows = batch * heads * tq;
  const int64_t workspace_bytes = ((4 * rows + 255) / 256) * 256 + 4 * rows;
  char label[160];
  snprintf(label, sizeof(label), "f32 D %lld %s Tq %lld Tk %lld", (long long)depth, causal ? "causal" : "full",
           (long long)tq, (long long)tk);
  void *device[8] = {NULL}, *workspace = NULL;
  float *host[4] = {NULL};
  reference r = {calloc((size_t)count, 8), calloc((size_t)count, 8), calloc((size_t)count, 8),
                 calloc((size_t)count, 8)};
  outcome tensor = {0}, launcher = {0}, cores = {0};
  bool ok = r.y && r.dq && r.dk && r.dv && outcome_alloc(&tensor, count) && outcome_alloc(&launcher, count) &&
            outcome_alloc(&cores, count);
  for (int b = 0; b < 8 && ok; b++)
    ok = cudaMalloc(&device[b], (size_t)count * 4) == cudaSuccess;
  ok = ok && cudaMalloc(&workspace, (size_t)workspace_bytes) == cudaSuccess;
  uint64_t seed = 4321 + (uint64_t)(tq * 1000 + tk) * 7 + (uint64_t)depth + (causal ? 1 : 0);
  for (int b = 0; b < 4 && ok; b++) {
    const int64_t n = (b == 1 || b == 2 ? tk : tq) * batch * width;
    ok = (host[b] = malloc(sizeof(float) * (size_t)n)) != NULL;
    for (int64_t i = 0; ok && i < n; i++)
      host[b][i] = (float)((b == 0 ? 1.5 : 1.0) * cuda_test_normal(&seed)); /* q: sharper rows */
    ok = ok && cudaMemcpy(device[b], host[b], (size_t)n * 4, cudaMemcpyHostToDevice) == cudaSuccess;
  }
  CHECK(&counts, ok, "%s: setting up (host or device memory)", label);
  if (ok) {
    problem p;
    problem_init(&p, TF_F32, batch, tq, tk, heads, depth, causal, device, workspace, workspace_bytes);
    reference_run(&p, host[0], host[1], host[2], host[3], &r);
    run_path(&p, device, count, 0, TF_CUDA_ATTENTION_FAST, &tensor, NULL, label);
    unsetenv("TIGHTFIT_CUDA_F32_ATTENTION");
    run_path(&p, device, count, 1, TF_CUDA_ATTENTION_FAST, &launcher, NULL, label);
    setenv("TIGHTFIT_CUDA_F32_ATTENTION", "cores", 1);
    run_path(&p, device, count, 1, TF_CUDA_ATTENTION_OFF, &cores, NULL, label);
    unsetenv("TIGHTFIT_CUDA_F32_ATTENTION");
    const double w_tensor = against(&p, &tensor, &r, 2e-5, 2e-5, label);
    const double w_cores = against(&p, &cores, &r, 2e-5, 2e-5, label);
    bool same = tensor.ran && launcher.ran, differ = false;
    for (int b = 4; b < 8; b++) {
      const size_t bytes = sizeof(float) * (size_t)(b == 6 || b == 7 ? tk : tq) * (size_t)(batch * width);
      same = same && memcmp(tensor.values[b], launcher.values[b], bytes) == 0;
      differ = differ || (cores.ran && memcmp(tensor.values[b], cores.values[b], bytes) != 0);
    }
    CHECK(&counts, same, "%s: the launcher's results by default differ from the f32 tensor kernels'", label);
    /* sums in other orders differ somewhere at these sizes: equal would mean the tensor path ran the CUDA cores */
    CHECK(&counts, tq < 64 || differ, "%s: the f32 tensor kernels' results equal the CUDA cores' bit for bit", label);
    bool zero_row = true; /* causal: query 0 sees key 0 only, dS = 0, dq row 0 exactly 0 */
    for (int64_t n = 0; causal && n < batch && tensor.ran; n++)
      for (int64_t c = 0; c < width; c++)
        zero_row = zero_row && tensor.values[5][n * tq * width + c] == 0.0f;
    CHECK(&counts, zero_row, "%s: dq of query 0 (one visible key) is not exactly 0", label);
    const bool passed = w_tensor <= 1 && w_cores <= 1 && same && (tq < 64 || differ) && zero_row;
    printf("%-4s %-36s 3xTF32 %.3f, CUDA cores %.3f (x tolerance)%s%s\n", passed ? "ok" : "FAIL", label, w_tensor,
           w_cores, same ? "; launcher identical" : "",
           causal ? (zero_row ? "; dq row 0 exactly 0" : "; dq row 0 NOT 0") : "");
  }
  for (int b = 0; b < 8; b++)
    cudaFree(device[b]);
  cudaFree(workspace);
  for (int b = 0; b < 4; b++)
    free(host[b]);
  free(r.y), free(r.dq), free(r.dk), free(r.dv);
  outcome_free(&tensor), outcome_free(&launcher), outcome_free(&cores);
}

/* Milliseconds per launch of `args` (mean of 10 after one warm-up), or -1 on failure. */
static double time_launch(const tf_cuda_args *args) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  tf_status status = tf_cuda_kernel_launch(args);
  cudaEventRecord(start, NULL);
  for (int i = 0; i < 10 && !status; i++)
    status = tf_cuda_kernel_launch(args);
  cudaEventRecord(stop, NULL);
  float ms = -10.0f;
  const bool ok =
      !status && cudaEventSynchronize(stop) == cudaSuccess && cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
  tf_status_free(status);
  cudaEventDestroy(start), cudaEventDestroy(stop);
  return ok ? ms / 10.0 : -1.0;
}

/* gpt2-small's attention, 8 x 1024, 12 heads of 64, causal, in `type`, on each of `n` paths, path i
 * chosen by `variable` set to settings[i] (NULL: unset) and named names[i] (printed, not held). */
static void time_paths(tf_dtype type, const char *variable, const char *const *settings, const char *const *names,
                       int n) {
  const int64_t batch = 8, t = 1024, heads = 12, depth = 64, count = batch * t * heads * depth;
  const int64_t rows = batch * heads * t, workspace_bytes = ((4 * rows + 255) / 256) * 256 + 4 * rows;
  const size_t bytes = (size_t)count * element_bytes(type);
  void *device[8] = {NULL}, *workspace = NULL;
  bool ok = cudaMalloc(&workspace, (size_t)workspace_bytes) == cudaSuccess;
  for (int b = 0; b < 8 && ok; b++)
    ok = cudaMalloc(&device[b], bytes) == cudaSuccess && cudaMemset(device[b], 0x3c, bytes) == cudaSuccess;
  CHECK(&counts, ok, "timing %s: device memory", tf_dtype_name(type));
  if (ok) {
    problem p;
    problem_init(&p, type, batch, t, t, heads, depth, true, device, workspace, workspace_bytes);
    for (int s = 0; s < n; s++) {
      if (settings[s])
        setenv(variable, settings[s], 1);
      else
        unsetenv(variable);
      const double forward = time_launch(&p.forward), gradient = time_launch(&p.grad);
      CHECK(&counts, forward >= 0 && gradient >= 0, "timing %s %s failed", tf_dtype_name(type), names[s]);
      printf("time gpt2-small attention (8 x 1024, 12 x 64, causal, %s), %-24s forward %.3f ms, gradient %.3f ms "
             "(per layer)\n",
             tf_dtype_name(type), names[s], forward, gradient);
    }
    unsetenv(variable);
  }
  for (int b = 0; b < 8; b++)
    cudaFree(device[b]);
  cudaFree(workspace);
}

int main(void) {
  test_choice();
  const int available = cuda_test_device();
  if (available != 0) {
    if (counts.failed)
      return tf_test_finish("cuda tensor-core attention (host checks)", &counts);
    return available;
  }
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (major < 8) {
    printf("SKIP: compute capability %d.x: the tensor-core kernels need 8.0\n", major);
    return 77;
  }
  const int64_t lengths[][2] = {{1, 1}, {17, 17}, {64, 64}, {130, 130}, {256, 256}, {17, 130}, {130, 17}, {64, 256}};
  const tf_dtype types[2] = {TF_BF16, TF_F16};
  for (int t = 0; t < 2; t++)
    for (int64_t depth = 64; depth <= 128; depth *= 2)
      for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
        for (int causal = 0; causal < 2; causal++)
          run_case(types[t], lengths[l][0], lengths[l][1], depth, causal);
  run_case(TF_BF16, 130, 130, 32, true);
  run_case(TF_F16, 17, 64, 32, false);
  for (int64_t depth = 32; depth <= 64; depth *= 2) /* the f32 gradient kernels take D 32 and 64 */
    for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
      for (int causal = 0; causal < 2; causal++)
        run_case_f32(lengths[l][0], lengths[l][1], depth, causal);
  const char *half_settings[4] = {"split", "rounded", NULL, "0"};
  const char *half_names[4] = {"tensor cores, two-term", "tensor cores, rounded", "tensor cores, fast", "CUDA cores"};
  time_paths(TF_BF16, "TIGHTFIT_CUDA_TENSOR_ATTENTION", half_settings, half_names, 4);
  const char *f32_settings[2] = {"cores", NULL}, *f32_names[2] = {"CUDA cores", "tensor cores, 3xTF32"};
  time_paths(TF_F32, "TIGHTFIT_CUDA_F32_ATTENTION", f32_settings, f32_names, 2);
  return tf_test_finish("cuda tensor-core attention", &counts);
}
