/* The fused loss head on half data on CUDA: its two paths, the tensor-core one
 * (kernels/cuda/linear_loss_tensor.cu, half operands multiplied as they are) and the widening one
 * (linear_loss_half.cu, TIGHTFIT_CUDA_HEAD_TENSOR=0).
 *   (a) host logic, anywhere: the tensor-core layout (core/workspace_cuda.h) for shapes with and
 *       without tails: its span and balanced chunks, parts in order, aligned, each as large as what
 *       the kernel touches there, and the planned workspace covering both paths' layouts;
 *   (b) the kernel itself: the CPU's half kernel anywhere (which checks the reference and bounds: it
 *       uses about half of the f32-math bound), and on a GPU both CUDA paths (the tensor-core one
 *       with TIGHTFIT_CUDA_HEAD_TENSOR=1, which turns a decline into an error: it really ran). Every
 *       form (loss, gradient, single pass; with and without a bias; both weight layouts; i32 and i64
 *       labels, ignored and out-of-range ones; rows not a multiple of either path's chunk, classes
 *       not a multiple of either span; bf16 and f16; f32 math and the half type's math), each
 *       output against a float64 reference within a bound stated per element (make_reference);
 *   (c) the head compiled for the cuda target (9,000 classes: five of the widening path's spans)
 *       runs linear_cross_entropy on its half x and weight itself (no f32 [9000, 32] operand) with
 *       a smaller arena, and one micro-step's loss and grad(W) are within one unit of the half type
 *       of the f32 head fed the same rounded x and W (the CPU), on each path.
 * (a), the CPU part of (b) and the plan checks of (c) run anywhere; the rest exits 77 without a
 * CUDA device. */
#define _POSIX_C_SOURCE 200809L
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/workspace_cpu.h"
#include "core/workspace_cuda.h"
#include "cuda_test.h"
#include "half_head.h"
#include "half_values.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/kernels.h"

static tf_test_counts counts;

/* ---- (a) the tensor-core layout ---- */

static int64_t align_up(int64_t bytes) { return (bytes + 255) / 256 * 256; }

/* The geometry and operands of a head step (x [rows, d], weight [V, d], labels, dloss, bias). */
typedef struct step_shape {
  tf_linear_loss_geometry g;
  tf_attrs attrs;
  tf_tensor_ref inputs[5], outputs[4];
  int32_t n_inputs, n_outputs;
} step_shape;

static bool has_bias(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD || op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN;
}

static void shape_step(step_shape *s, tf_op op, bool bias, tf_dtype half, bool transpose, bool wide, int64_t rows,
                       int64_t features, int64_t classes, int64_t chunk_rows) {
  memset(s, 0, sizeof(*s));
  s->attrs.kind = TF_ATTR_CROSS_ENTROPY;
  s->attrs.u.cross_entropy.ignore_index = -100;
  s->attrs.u.cross_entropy.transpose_weight = transpose;
  s->attrs.u.cross_entropy.chunk_rows = chunk_rows;
  const int64_t x[2] = {rows, features}, w[2] = {transpose ? classes : features, transpose ? features : classes};
  const int64_t one[1] = {rows}, v[1] = {classes};
  s->inputs[0] = tf_tensor_ref_make(NULL, half, 2, x);
  s->inputs[1] = tf_tensor_ref_make(NULL, half, 2, w);
  s->inputs[2] = tf_tensor_ref_make(NULL, wide ? TF_I64 : TF_I32, 1, one);
  s->n_inputs = 3;
  if (op != TF_OP_LINEAR_CROSS_ENTROPY)
    s->inputs[s->n_inputs++] = tf_tensor_ref_make(NULL, TF_F32, 0, NULL);
  if (bias)
    s->inputs[s->n_inputs++] = tf_tensor_ref_make(NULL, half, 1, v);
  const bool train = tf_linear_loss_is_train(op), forward = op == TF_OP_LINEAR_CROSS_ENTROPY;
  if (forward || train)
    s->outputs[s->n_outputs++] = tf_tensor_ref_make(NULL, TF_F32, 0, NULL);
  if (!forward) {
    s->outputs[s->n_outputs++] = s->inputs[0];
    s->outputs[s->n_outputs++] = s->inputs[1];
    if (bias)
      s->outputs[s->n_outputs++] = s->inputs[s->n_inputs - 1];
  }
  s->g = tf_linear_loss_geometry_of(&s->attrs, &s->inputs[0], &s->inputs[1]);
}

/* Checks one geometry's tensor-core layout against what the kernel touches; returns the planned bytes. */
static int64_t check_layout(const char *what, tf_op op, bool bias, int64_t rows, int64_t features, int64_t classes,
                            int64_t chunk_rows) {
  step_shape s;
  shape_step(&s, op, bias, TF_BF16, true, false, rows, features, classes, chunk_rows);
  const bool gradients = op != TF_OP_LINEAR_CROSS_ENTROPY;
  const tf_cuda_linear_loss_tensor_layout l = tf_cuda_linear_loss_tensor_layout_of(&s.g, gradients, bias);
  const int64_t plan_chunk = s.g.chunk_rows, span = classes < 2048 ? classes : 2048, chunk = l.chunk_rows;
  const int64_t chunks = chunk > 0 ? (rows + chunk - 1) / chunk : 0, last = rows - (chunks - 1) * chunk;
  bool ok = l.span == span && (rows == 0 || (chunk >= plan_chunk && chunk <= rows && last > 0 && last <= chunk &&
                                             chunk - last < chunks && chunk * span <= plan_chunk * classes));
  /* parts in order, 256-byte aligned, each at least what the kernel touches */
  const int64_t at[] = {l.statistics, l.logits, l.x_chunk, l.weight_span, l.dweight_span,
                        l.dbias_span, l.dx_sum, l.count,   l.cublas,      l.total};
  const int64_t need[] = {24 * rows,
                          4 * chunk * span,
                          gradients ? 4 * chunk * features : 0,
                          gradients ? 4 * span * features : 0,
                          gradients ? 4 * span * features : 0,
                          gradients && bias ? 8 * span : 0,
                          gradients ? 4 * rows * features : 0,
                          8,
                          TF_CUDA_CUBLAS_WORKSPACE};
  for (int i = 0; i < 9; i++)
    ok = ok && at[i] % 256 == 0 && at[i + 1] - at[i] >= need[i] && at[i + 1] - at[i] == align_up(need[i]);
  const int64_t planned = tf_cuda_workspace_bytes(op, &s.attrs, s.n_inputs, s.inputs, s.n_outputs, s.outputs);
  const int64_t widening = tf_cuda_linear_loss_half_layout_of(&s.g, gradients, bias).total;
  ok = ok && planned >= l.total && planned >= widening && (planned == l.total || planned == widening);
  CHECK(&counts, ok,
        "%s: span %lld, %lld-row chunks (%lld, last %lld) of the plan's %lld; planned %lld B, tensor %lld B, "
        "widening %lld B",
        what, (long long)l.span, (long long)chunk, (long long)chunks, (long long)last, (long long)plan_chunk,
        (long long)planned, (long long)l.total, (long long)widening);
  printf("%-4s layout %s: span %lld, %lld chunk(s) of %lld rows (last %lld); workspace %.2f MiB (tensor %.2f, "
         "widening %.2f)\n",
         ok ? "ok" : "FAIL", what, (long long)l.span, (long long)chunks, (long long)chunk, (long long)last,
         planned / 1048576.0, l.total / 1048576.0, widening / 1048576.0);
  return planned;
}

static void check_layouts(void) {
  check_layout("gpt2-small 8x1024 (train)", TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, false, 8192, 768, 50257, 256);
  check_layout("gpt2-small 8x1024 shifted (train)", TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, false, 8184, 768, 50257, 256);
  check_layout("gpt2-small 8x1024 (forward)", TF_OP_LINEAR_CROSS_ENTROPY, false, 8192, 768, 50257, 256);
  check_layout("budget-shrunk chunk 40", TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN, true, 1000, 64, 9000, 40);
  check_layout("classes below a span", TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD, true, 18, 16, 37, 4);
  check_layout("test head", TF_OP_LINEAR_CROSS_ENTROPY_GRAD, false, 512, 32, 9000, 256);
  check_layout("no rows", TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, false, 0, 32, 9000, 0);
}

/* ---- (b) the kernel on both paths against a float64 reference ---- */

typedef struct head_case {
  const char *name;
  tf_op op;
  bool bias, transpose, wide;
  int64_t rows, features, classes, chunk_rows;
  int ignored; /* every ignored-th label ignore_index (-100), the one after it out of range; 1: all ignored */
} head_case;

/* Host data of a case: half values (as f32) of x, the weight and the bias, labels, dloss. */
typedef struct head_data {
  float *x, *w, *b;
  int64_t *labels;
  float dloss;
} head_data;

/* The float64 reference and what the bounds of the paths' errors are made of (make_reference). */
typedef struct head_reference {
  double loss, loss_bound;
  double *grad[3], *magnitude[3], *operands[3]; /* dx, dweight, dbias */
  double length[3];                             /* the f32 sums' lengths */
  double unit, spacing, f32_dl, dl_round;
} head_reference;

static int64_t weight_at(const head_case *c, int64_t cls, int64_t k) {
  return c->transpose ? cls * c->features + k : k * c->classes + cls;
}

static bool make_data(const head_case *c, tf_dtype half, head_data *d) {
  memset(d, 0, sizeof(*d));
  d->x = malloc(sizeof(float) * (size_t)(c->rows * c->features));
  d->w = malloc(sizeof(float) * (size_t)(c->classes * c->features));
  d->b = malloc(sizeof(float) * (size_t)c->classes);
  d->labels = malloc(sizeof(int64_t) * (size_t)c->rows);
  if (!d->x || !d->w || !d->b || !d->labels)
    return false;
  uint64_t state = (uint64_t)(c->rows * 131 + c->classes);
  for (int64_t i = 0; i < c->rows * c->features; i++)
    d->x[i] = tf_test_half_round(half, cuda_test_normal(&state));
  for (int64_t i = 0; i < c->classes * c->features; i++)
    d->w[i] = tf_test_half_round(half, 0.3 * cuda_test_normal(&state));
  for (int64_t i = 0; i < c->classes; i++)
    d->b[i] = tf_test_half_round(half, 0.5 * cuda_test_normal(&state));
  for (int64_t r = 0; r < c->rows; r++) {
    d->labels[r] = (int64_t)(cuda_test_random(&state) % (uint64_t)c->classes);
    if (c->ignored > 0 && r % c->ignored == 0)
      d->labels[r] = -100;
    else if (c->ignored > 1 && r % c->ignored == 1)
      d->labels[r] = c->classes + 3; /* out of range: does not count */
  }
  d->dloss = half == TF_F16 ? 384.0f : 0.75f; /* f16: a loss scale's seed keeps most dlogits normal */
  return true;
}

static void free_data(head_data *d) { free(d->x), free(d->w), free(d->b), free(d->labels); }

/* The reference. Bounds: the loss within 2 (2 d M + 4 L + 8) 2^-24 (M the largest sum_k |x_k w_k|,
 * L the largest |logit| + |lse|: the f32 logits' summation, expf, log and the f32 max); a gradient
 * element within one unit of the half type of its value (its rounding: 2^-7 relative for bf16,
 * 2^-10 for f16, plus f16's subnormal spacing 2^-24) plus 2 (e_dl + K 2^-24) times its magnitude
 * sum (p + [label]) scale |operand| (K the length of its f32 sums: classes for dx, rows for dweight;
 * a tensor core's f32 additions may truncate: the 2), with e_dl the dlogits' relative error: the
 * f32 one, (2 d M + 4 L + 8) 2^-24, plus under the half type's math their rounding to it (2^-8 for
 * bf16, 2^-11 for f16: twice round-to-nearest) and an absolute floor per dlogit times
 * sum |operand| (grad_bound's). */
static bool make_reference(const head_case *c, tf_dtype half, tf_dtype math, const head_data *d, head_reference *ref) {
  const int64_t R = c->rows, D = c->features, V = c->classes;
  memset(ref, 0, sizeof(*ref));
  const int64_t sizes[3] = {R * D, V * D, V};
  for (int i = 0; i < 3; i++) {
    ref->grad[i] = calloc((size_t)sizes[i], sizeof(double));
    ref->magnitude[i] = calloc((size_t)sizes[i], sizeof(double));
    ref->operands[i] = calloc((size_t)sizes[i], sizeof(double));
    if (!ref->grad[i] || !ref->magnitude[i] || !ref->operands[i])
      return false;
  }
  double *logits = malloc(sizeof(double) * (size_t)V);
  if (!logits)
    return false;
  int64_t count = 0;
  for (int64_t r = 0; r < R; r++)
    count += d->labels[r] >= 0 && d->labels[r] < V;
  const double scale = count > 0 ? d->dloss / (double)count : 0, u = ldexp(1, -24);
  double M = 0, L = 0, loss = 0;
  for (int pass = 0; pass < 2; pass++) /* pass 0: M, L and the loss; pass 1: the gradients */
    for (int64_t r = 0; r < R; r++) {
      const int64_t label = d->labels[r];
      if (label < 0 || label >= V)
        continue;
      double best = -INFINITY, sum = 0;
      for (int64_t cls = 0; cls < V; cls++) {
        double l = c->bias ? d->b[cls] : 0, a = 0;
        for (int64_t k = 0; k < D; k++) {
          l += (double)d->x[r * D + k] * d->w[weight_at(c, cls, k)];
          a += fabs((double)d->x[r * D + k] * d->w[weight_at(c, cls, k)]);
        }
        logits[cls] = l, M = a > M ? a : M, best = l > best ? l : best;
      }
      for (int64_t cls = 0; cls < V; cls++)
        sum += exp(logits[cls] - best);
      const double lse = best + log(sum);
      for (int64_t cls = 0; pass == 0 && cls < V; cls++)
        L = fabs(logits[cls]) + fabs(lse) > L ? fabs(logits[cls]) + fabs(lse) : L;
      loss += pass == 0 ? lse - logits[label] : 0;
      for (int64_t cls = 0; pass == 1 && cls < V; cls++) {
        const double p = exp(logits[cls] - lse), dl = (p - (cls == label)) * scale, size = (p + (cls == label)) * scale;
        ref->grad[2][cls] += dl, ref->magnitude[2][cls] += size, ref->operands[2][cls] += 1;
        for (int64_t k = 0; k < D; k++) {
          const int64_t at = weight_at(c, cls, k);
          const double x = d->x[r * D + k], w = d->w[at];
          ref->grad[0][r * D + k] += dl * w, ref->magnitude[0][r * D + k] += size * fabs(w);
          ref->grad[1][at] += dl * x, ref->magnitude[1][at] += size * fabs(x);
          ref->operands[0][r * D + k] += fabs(w), ref->operands[1][at] += fabs(x);
        }
      }
    }
  free(logits);
  ref->f32_dl = (2 * D * M + 4 * L + 8) * u;
  ref->loss = count > 0 ? loss / (double)count : 0;
  ref->loss_bound = 2 * ref->f32_dl + 2 * u * fabs(ref->loss);
  ref->unit = half == TF_BF16 ? ldexp(1, -7) : ldexp(1, -10);
  ref->spacing = half == TF_F16 ? ldexp(1, -24) : 0;
  ref->dl_round = math == half ? (half == TF_BF16 ? ldexp(1, -8) : ldexp(1, -11)) : 0;
  ref->length[0] = (double)V, ref->length[1] = (double)R, ref->length[2] = 0;
  return true;
}

/* The bound of gradient i's element j when each dlogit may also be off by `floor` absolute. */
static double grad_bound(const head_reference *ref, int i, int64_t j, double floor) {
  return ref->unit * fabs(ref->grad[i][j]) + ref->spacing +
         2 * ((ref->f32_dl + ref->dl_round + ref->length[i] * ldexp(1, -24)) * ref->magnitude[i][j] +
              floor * ref->operands[i][j]);
}

static void free_reference(head_reference *ref) {
  for (int i = 0; i < 3; i++)
    free(ref->grad[i]), free(ref->magnitude[i]), free(ref->operands[i]);
}

/* A case's operands as a step takes them: half bits, labels of the case's type, outputs. */
typedef struct head_operands {
  void *x, *w, *b, *labels, *dloss, *loss, *grad[3], *workspace;
} head_operands;

/* The step's arguments over `o` (host or device memory). */
static void bind_step(const head_case *c, const step_shape *s, const head_operands *o, tf_tensor_ref *inputs,
                      tf_tensor_ref *outputs) {
  memcpy(inputs, s->inputs, sizeof(s->inputs));
  memcpy(outputs, s->outputs, sizeof(s->outputs));
  void *in_data[5] = {o->x, o->w, o->labels, o->dloss, o->b};
  for (int32_t i = 0; i < s->n_inputs; i++)
    inputs[i].data = in_data[i == 3 && c->op == TF_OP_LINEAR_CROSS_ENTROPY ? 4 : i];
  const int32_t first_grad = c->op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD || c->op == TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD;
  for (int32_t k = 0; k < s->n_outputs; k++)
    outputs[k].data = k == 0 && !first_grad ? o->loss : o->grad[k - 1 + first_grad];
}

/* The outputs in `o` (host memory) widened into loss and grad[] (NULL: not wanted). */
static void read_outputs(const head_case *c, tf_dtype half, const head_operands *o, float *loss, float *grad[3]) {
  const int64_t sizes[3] = {c->rows * c->features, c->classes * c->features, c->classes};
  for (int i = 0; i < 3; i++)
    for (int64_t j = 0; grad[i] && j < sizes[i]; j++)
      grad[i][j] = tf_test_half_value(half, ((const uint16_t *)o->grad[i])[j]);
  if (loss)
    *loss = *(const float *)o->loss;
}

/* The CPU's half kernel (kernels/cpu/linear_loss_half.c: f32 products, f32 dlogits) on `host`. */
static void run_cpu(const head_case *c, const step_shape *s, tf_dtype half, head_operands *host, float *loss,
                    float *grad[3]) {
  tf_tensor_ref inputs[5], outputs[4];
  const int64_t bytes =
      tf_cpu_workspace_bytes(c->op, &s->attrs, s->n_inputs, s->inputs, s->n_outputs, s->outputs, 1, 4);
  void *workspace = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64 + 64));
  bind_step(c, s, host, inputs, outputs);
  const tf_cpu_context context = {.threads = 1};
  const tf_cpu_args args = {.op = c->op,
                            .attrs = &s->attrs,
                            .n_inputs = s->n_inputs,
                            .inputs = inputs,
                            .n_outputs = s->n_outputs,
                            .outputs = outputs,
                            .workspace = workspace,
                            .workspace_bytes = bytes,
                            .context = &context};
  if (workspace)
    tf_cpu_linear_cross_entropy_half(&args);
  CHECK(&counts, workspace != NULL, "%s: cpu workspace", c->name);
  free(workspace);
  read_outputs(c, half, host, loss, grad);
}

/* Runs the step once on the GPU with TIGHTFIT_CUDA_HEAD_TENSOR=`mode`: operands in `dev`, outputs
 * copied into `host`, then widened into loss and grad[]. */
static bool run_gpu(const head_case *c, const step_shape *s, tf_dtype half, tf_dtype math, const head_operands *dev,
                    head_operands *host, int64_t workspace_bytes, cublasHandle_t handle, const char *mode, float *loss,
                    float *grad[3]) {
  tf_tensor_ref inputs[5], outputs[4];
  bind_step(c, s, dev, inputs, outputs);
  setenv("TIGHTFIT_CUDA_HEAD_TENSOR", mode, 1);
  cudaMemset(dev->workspace, 0xff, (size_t)workspace_bytes); /* NaN wherever a path reads what it did not write */
  const tf_cuda_args args = {.op = c->op,
                             .attrs = &s->attrs,
                             .n_inputs = s->n_inputs,
                             .inputs = inputs,
                             .n_outputs = s->n_outputs,
                             .outputs = outputs,
                             .workspace = dev->workspace,
                             .workspace_bytes = workspace_bytes,
                             .cublas = handle,
                             .math = math};
  tf_status status = tf_cuda_kernel_check(&args);
  if (!status)
    status = tf_cuda_kernel_launch(&args);
  unsetenv("TIGHTFIT_CUDA_HEAD_TENSOR");
  const cudaError_t synced = cudaDeviceSynchronize();
  const bool ok = !status && synced == cudaSuccess;
  CHECK(&counts, ok, "%s, %s, %s math, TIGHTFIT_CUDA_HEAD_TENSOR=%s: %s%s", c->name, tf_dtype_name(half),
        tf_dtype_name(math), mode, status ? tf_status_message(status) : "", cudaGetErrorString(synced));
  tf_status_free(status);
  const int64_t sizes[3] = {c->rows * c->features, c->classes * c->features, c->classes};
  for (int i = 0; ok && i < 3; i++)
    if (grad[i])
      cudaMemcpy(host->grad[i], dev->grad[i], sizeof(uint16_t) * (size_t)sizes[i], cudaMemcpyDeviceToHost);
  if (ok && loss)
    cudaMemcpy(host->loss, dev->loss, sizeof(float), cudaMemcpyDeviceToHost);
  if (ok)
    read_outputs(c, half, host, loss, grad);
  return ok;
}

/* |got - want| / bound (0 when both are 0: no bound needed; NaN stays NaN). */
static double ratio_of(double got, double want, double bound) {
  return bound > 0 ? fabs(got - want) / bound : got == want ? 0 : INFINITY;
}

/* Worst |error| / bound of a path's outputs, each dlogit off by up to `floor` more; the count of
 * gradient elements whose value differs from `other`'s. */
static double worst_ratio(const head_reference *ref, const head_case *c, bool has_loss, float loss, float *grad[3],
                          double floor, float *other[3], int64_t *differ) {
  const int64_t sizes[3] = {c->rows * c->features, c->classes * c->features, c->classes};
  double worst = has_loss ? ratio_of(loss, ref->loss, ref->loss_bound) : 0;
  for (int i = 0; i < 3; i++)
    for (int64_t j = 0; grad[i] && j < sizes[i]; j++) {
      const double ratio = ratio_of(grad[i][j], ref->grad[i][j], grad_bound(ref, i, j, floor));
      worst = ratio > worst || ratio != ratio ? ratio : worst;
      *differ += other && other[i] && grad[i][j] != other[i][j];
    }
  return worst;
}

/* Host and (with a GPU) device operands of a case; false when an allocation or copy failed. */
static bool make_operands(const head_case *c, tf_dtype half, const head_data *d, head_operands *host,
                          head_operands *dev, bool gpu) {
  const int64_t sizes[3] = {c->rows * c->features, c->classes * c->features, c->classes};
  const float *values[3] = {d->x, d->w, d->b};
  void **in[3] = {&host->x, &host->w, &host->b};
  bool ok = true;
  for (int i = 0; i < 3; i++) {
    uint16_t *bits = malloc(sizeof(uint16_t) * (size_t)sizes[i]);
    for (int64_t j = 0; bits && j < sizes[i]; j++)
      bits[j] = tf_test_half_bits(half, values[i][j]);
    *in[i] = bits;
    host->grad[i] = malloc(sizeof(uint16_t) * (size_t)sizes[i]);
    ok = ok && bits && host->grad[i];
  }
  const size_t label_size = c->wide ? sizeof(int64_t) : sizeof(int32_t);
  host->labels = malloc(label_size * (size_t)c->rows);
  host->dloss = malloc(sizeof(float));
  host->loss = malloc(sizeof(float));
  ok = ok && host->labels && host->dloss && host->loss;
  for (int64_t r = 0; ok && r < c->rows; r++)
    if (c->wide)
      ((int64_t *)host->labels)[r] = d->labels[r];
    else
      ((int32_t *)host->labels)[r] = (int32_t)d->labels[r];
  if (ok)
    *(float *)host->dloss = d->dloss;
  if (!ok || !gpu)
    return ok;
  void **from[] = {&host->x, &host->w, &host->b, &host->labels, &host->dloss};
  void **to[] = {&dev->x, &dev->w, &dev->b, &dev->labels, &dev->dloss};
  const size_t bytes[] = {2 * (size_t)sizes[0], 2 * (size_t)sizes[1], 2 * (size_t)sizes[2],
                          label_size * (size_t)c->rows, sizeof(float)};
  for (int i = 0; ok && i < 5; i++)
    ok = cudaMalloc(to[i], bytes[i]) == cudaSuccess &&
         cudaMemcpy(*to[i], *from[i], bytes[i], cudaMemcpyHostToDevice) == cudaSuccess;
  for (int i = 0; ok && i < 3; i++)
    ok = cudaMalloc(&dev->grad[i], 2 * (size_t)sizes[i]) == cudaSuccess;
  return ok && cudaMalloc(&dev->loss, sizeof(float)) == cudaSuccess;
}

static void free_operands(head_operands *o, bool device) {
  void *all[] = {o->x, o->w, o->b, o->labels, o->dloss, o->loss, o->grad[0], o->grad[1], o->grad[2], o->workspace};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    if (device)
      cudaFree(all[i]);
    else
      free(all[i]);
}

/* One case: the CPU's half kernel (anywhere) and, with a cuBLAS handle (a GPU), both CUDA paths,
 * each against the float64 reference. */
static void check_case(const head_case *c, tf_dtype half, tf_dtype math, cublasHandle_t handle) {
  step_shape s;
  shape_step(&s, c->op, c->bias, half, c->transpose, c->wide, c->rows, c->features, c->classes, c->chunk_rows);
  const int64_t workspace_bytes =
      tf_cuda_workspace_bytes(c->op, &s.attrs, s.n_inputs, s.inputs, s.n_outputs, s.outputs);
  head_data d;
  head_reference ref;
  head_operands host, dev;
  memset(&host, 0, sizeof(host));
  memset(&dev, 0, sizeof(dev));
  const int64_t sizes[3] = {c->rows * c->features, c->classes * c->features, c->classes};
  float *out[3][3] = {{NULL}}, loss[3] = {NAN, NAN, NAN}; /* cpu, tensor cores, widening */
  const bool forward = c->op == TF_OP_LINEAR_CROSS_ENTROPY, has_loss = forward || tf_linear_loss_is_train(c->op);
  bool ok = make_data(c, half, &d) && make_reference(c, half, math, &d, &ref);
  for (int p = 0; ok && !forward && p < 3; p++)
    for (int i = 0; i < (c->bias ? 3 : 2); i++)
      ok = (out[p][i] = malloc(sizeof(float) * (size_t)sizes[i])) != NULL;
  ok = ok && make_operands(c, half, &d, &host, &dev, handle != NULL);
  ok = ok && (!handle || cudaMalloc(&dev.workspace, (size_t)workspace_bytes) == cudaSuccess);
  CHECK(&counts, ok, "%s: set-up failed", c->name);
  if (ok) {
    /* f16 dlogits below 2^-14 are subnormal: the tensor-core path's rounding keeps them (2^-24
     * apart); cuBLAS's conversion under COMPUTE_32F_FAST_16F might flush them, up to 2^-14 each */
    const bool f16_dlogits = half == TF_F16 && math == TF_F16;
    const double floors[3] = {0, f16_dlogits ? ldexp(1, -24) : 0, f16_dlogits ? ldexp(1, -14) : 0};
    static const char *const modes[3] = {NULL, "1", "0"};
    double worst[3] = {NAN, NAN, NAN};
    int64_t differ = 0, unused = 0;
    for (int p = 0; p < (handle ? 3 : 1); p++) {
      float *loss_at = has_loss ? &loss[p] : NULL;
      if (p == 0)
        run_cpu(c, &s, half, &host, loss_at, out[p]);
      if (p == 0 || run_gpu(c, &s, half, math, &dev, &host, workspace_bytes, handle, modes[p], loss_at, out[p]))
        worst[p] = worst_ratio(&ref, c, has_loss, loss[p], out[p], floors[p], p == 1 ? out[2] : NULL,
                               p == 1 ? &differ : &unused);
    }
    const bool good = worst[0] <= 1 && (!handle || (worst[1] <= 1 && worst[2] <= 1));
    CHECK(&counts, good, "%s, %s, %s math: worst error / bound %.3g (cpu), %.3g (tensor cores), %.3g (widening)",
          c->name, tf_dtype_name(half), tf_dtype_name(math), worst[0], worst[1], worst[2]);
    printf("%-4s %s, %s, %s math: loss %.7g cpu, %.7g tensor cores, %.7g widening (f64 %.7g); worst error / "
           "bound %.3f, %.3f, %.3f; %lld gradient elements differ between the cuda paths\n",
           good ? "ok" : "FAIL", c->name, tf_dtype_name(half), tf_dtype_name(math), loss[0], loss[1], loss[2], ref.loss,
           worst[0], worst[1], worst[2], (long long)differ);
  }
  for (int p = 0; p < 3; p++)
    for (int i = 0; i < 3; i++)
      free(out[p][i]);
  if (handle)
    free_operands(&dev, true);
  free_operands(&host, false);
  free_reference(&ref);
  free_data(&d);
}

/* Every case on the CPU's half kernel and, with a GPU, on both CUDA paths. */
static void check_kernels(bool gpu) {
  /* spans: 2,048 (both paths); tensor chunks: the plan's chunk x (classes / span) rows, balanced */
  static const head_case cases[] = {
      {"train, tied [4500, 40] weight, 300 rows in 3 chunks of 100 (widening: 5 of 64)",
       TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, false, true, false, 300, 40, 4500, 64, 9},
      {"bias_grad, [24, 2100] weight, i64 labels, 77 rows in chunks of 16 (last 13)",
       TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD, true, false, true, 77, 24, 2100, 16, 7},
      {"bias_train, tied [5000, 32] weight, 129 rows in one chunk", TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN, true, true,
       false, 129, 32, 5000, 129, 5},
      {"grad, [16, 37] weight, 18 rows in chunks of 4", TF_OP_LINEAR_CROSS_ENTROPY_GRAD, false, false, false, 18, 16,
       37, 4, 6},
      {"forward with a bias, tied [2049, 8] weight, 45 rows in chunks of 10", TF_OP_LINEAR_CROSS_ENTROPY, true, true,
       false, 45, 8, 2049, 10, 4},
      {"train, every label ignored", TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, false, true, false, 20, 8, 3000, 8, 1},
  };
  cublasHandle_t handle = NULL;
  if (gpu && (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS || cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH) != 0)) {
    CHECK(&counts, false, "cublasCreate failed");
    return;
  }
  static const tf_dtype halves[] = {TF_BF16, TF_F16};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (int h = 0; h < 2; h++)
      for (int m = 0; m < 2; m++)
        check_case(&cases[i], halves[h], m == 0 ? TF_F32 : halves[h], handle);
  if (handle)
    cublasDestroy(handle);
}

/* ---- (c) the head through a session, on each path ---- */

int main(void) {
  check_layouts();
  const int available = cuda_test_device();
  check_kernels(available == 0);
  static const char *const modes[] = {"1", "0"};
  for (int m = 0; m < (available == 0 ? 2 : 1); m++) {
    setenv("TIGHTFIT_CUDA_HEAD_TENSOR", modes[m], 1);
    printf("TIGHTFIT_CUDA_HEAD_TENSOR=%s (%s path)\n", modes[m], m == 0 ? "tensor-core" : "widening");
    tf_half_head_check_target(&counts, TF_TARGET_CUDA, "cuda", TF_BF16, available == 0);
    tf_half_head_check_target(&counts, TF_TARGET_CUDA, "cuda", TF_F16, available == 0);
  }
  unsetenv("TIGHTFIT_CUDA_HEAD_TENSOR");
  const int code = tf_test_finish("cuda half head", &counts);
  return code != 0 || available == 0 ? code : available;
}
