/* Ops on half data in a graph (compiler/half_ops.c), on the CPU: a model whose activations are
 * declared bf16 or f16 compiles into f32 arithmetic between casts, trains, and its loss and weight
 * gradient match a float64 evaluation of the same graph that rounds to the half type wherever the
 * graph holds a half tensor, forward and backward:
 *
 *     xh = r(x), Wh = r(W), y = r(xh Wh), z = r(tanh y), s = r(z + y), loss = sum(s * probe)
 *     ds = r(probe); dy = r(r(ds) + r(ds (1 - tanh^2 y)))   (y's two gradient parts, summed once)
 *     grad W = r(xh^T dy)
 *
 * y has two readers, so its gradient is the sum of two half parts (autodiff's half_sum). The
 * tolerance is 4 units of the half type times the largest reference value: an f32 result a few f32
 * ulps from the f64 one may round to the neighbouring half value, which the next ops carry on; a
 * missing or doubled gradient part, a transposed product or an unrounded step is far outside it.
 * Run both ways: with the CPU's half kernels (the matmuls, tanh and the add on half data themselves,
 * f32 kernels over half slices: backends/cpu/cpu_half.h) and with --no-half-kernels (every op
 * between casts). Also checked: between casts, no step but a cast reads half data, the plan's
 * f32 copy of a half input is not kept for the backward pass (it is cast back from the half
 * tensor: xh, for grad W), nor tanh's f32 result (z cast back, for tanh's gradient); with half
 * kernels, steps read half data and no f32 copy of a half input exists; the note says what the
 * pass did, and an f16 graph scales its loss. A bf16 parameter is refused for training (f32 master weights) and
 * initialised for inference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/ops.h"
#include "half_values.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define M 5
#define K 7
#define N 3

static tf_test_counts counts;

static tf_graph *build(tf_dtype half) {
  tf_graph *g = tf_test_graph_begin(&counts, "half_ops");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_cast(g, tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(M), d(K))), half);
  tf_tensor_id w = tf_cast(g, tf_test_param(g, "W", TF_SHAPE(d(K), d(N))), half);
  tf_tensor_id y = tf_matmul(g, x, w, false, false);
  tf_tensor_id s = tf_add(g, tf_unary(g, TF_OP_TANH, y), y);
  tf_tensor_id probe = tf_graph_input(g, "probe", TF_F32, TF_SHAPE(d(M), d(N)));
  tf_graph_set_loss(g, tf_reduce(g, TF_OP_SUM, tf_mul(g, tf_cast(g, s, TF_F32), probe), NULL, 0, false));
  return g;
}

/* The float64 evaluation of the header's formulas: the loss and grad W. */
static double reference(tf_dtype half, const float *x, const float *w, const float *probe, double *grad_w) {
  double xh[M * K], wh[K * N], dy[M * N], loss = 0.0;
  for (int i = 0; i < M * K; i++)
    xh[i] = tf_test_half_round(half, x[i]);
  for (int i = 0; i < K * N; i++)
    wh[i] = tf_test_half_round(half, w[i]);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double sum = 0.0;
      for (int k = 0; k < K; k++)
        sum += xh[m * K + k] * wh[k * N + n];
      const double y = tf_test_half_round(half, sum), t = tanh(y), z = tf_test_half_round(half, t);
      const double s = tf_test_half_round(half, z + y);
      loss += s * probe[m * N + n];
      const double ds = tf_test_half_round(half, probe[m * N + n]);
      const double through_tanh = tf_test_half_round(half, ds * (1.0 - z * z)); /* tanh_grad reads z, stored half */
      dy[m * N + n] = tf_test_half_round(half, ds + through_tanh);
    }
  for (int k = 0; k < K; k++)
    for (int n = 0; n < N; n++) {
      double sum = 0.0;
      for (int m = 0; m < M; m++)
        sum += xh[m * K + k] * dy[m * N + n];
      grad_w[k * N + n] = tf_test_half_round(half, sum);
    }
  return loss;
}

/* Between casts (--no-half-kernels): no step but a cast reads or writes half data; the f32 copies
 * of half inputs die in the forward pass (the backward reads them cast back from the half tensors).
 * With the CPU's half kernels: the matmuls, tanh and its gradient read the half tensors themselves
 * and no f32 copy of a half input exists at all. */
static void check_plan(const tf_plan *plan, tf_dtype half, bool half_kernels) {
  int32_t half_reads = 0, kept_copies = 0, copies = 0, restored = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs && step->op != TF_OP_CAST; k++)
      half_reads += plan->buffers[step->inputs[k]].dtype == half;
    if (step->op == TF_OP_CAST && strstr(step->name, "restored_f32"))
      restored += plan->buffers[step->inputs[0]].dtype == half;
  }
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    const size_t length = strlen(b->name);
    const bool input_copy = strstr(b->name, "/input") && length > 4 && strcmp(b->name + length - 4, "_f32") == 0;
    copies += input_copy;
    if (input_copy && b->first_step >= 0 && plan->steps[b->first_step].phase == TF_PHASE_FORWARD &&
        plan->steps[b->last_step].phase != TF_PHASE_FORWARD)
      kept_copies++;
  }
  const char *mode = half_kernels ? "half kernels" : "between casts";
  if (half_kernels) {
    CHECK(&counts, half_reads >= 6 && copies == 0 && restored == 0,
          "%s, %s: %d non-cast step inputs are half, %d f32 copies of half inputs, %d restored", tf_dtype_name(half),
          mode, half_reads, copies, restored);
  } else {
    CHECK(&counts, half_reads == 0, "%s, %s: %d non-cast step inputs are half", tf_dtype_name(half), mode, half_reads);
    CHECK(&counts, kept_copies == 0 && restored == 2,
          "%s, %s: %d f32 copies of half inputs live into the backward pass; %d restored from half",
          tf_dtype_name(half), mode, kept_copies, restored);
  }
  const char *note = half_kernels ? "run the target's half kernels" : "computed in f32 between casts";
  CHECK(&counts, plan->report.notes && strstr(plan->report.notes, note),
        "%s, %s: the notes do not say what half_ops did: %s", tf_dtype_name(half), mode,
        plan->report.notes ? plan->report.notes : "(none)");
  const bool scaled = plan->loss_scale_seed >= 0;
  CHECK(&counts, scaled == (half == TF_F16), "%s: loss scaled %d", tf_dtype_name(half), scaled);
}

static void run(tf_dtype half, bool half_kernels) {
  tf_graph *g = build(half);
  tf_plan *plan = NULL;
  if (g) {
    tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
    o.loss_scale = 1.0;
    o.accumulate = 2; /* grad(W) is the accumulator, read after the first micro-step */
    if (!half_kernels)
      memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
    CHECK_OK(&counts, tf_compile(g, &o, &plan));
  }
  tf_graph_destroy(g);
  if (!plan)
    return;
  check_plan(plan, half, half_kernels);
  tf_session_options so = tf_session_options_default();
  so.seed = 5;
  tf_session *s = NULL;
  CHECK_OK(&counts, tf_session_create(plan, &so, &s));
  float x[M * K], w[K * N], probe[M * N], grad_w[K * N];
  for (int i = 0; i < M * K; i++)
    x[i] = (float)sin(1.3 * i + 0.2) * 2.0f;
  for (int i = 0; i < M * N; i++)
    probe[i] = (float)cos(0.7 * i) * 1.5f;
  double loss = NAN, ref_grad[K * N];
  if (s) {
    CHECK_OK(&counts, tf_session_write(s, "x", x, sizeof(x)));
    CHECK_OK(&counts, tf_session_write(s, "probe", probe, sizeof(probe)));
    CHECK_OK(&counts, tf_session_read(s, "W", w, sizeof(w)));
    CHECK_OK(&counts, tf_session_micro_step(s, &loss));
    CHECK_OK(&counts, tf_session_read(s, "grad(W)", grad_w, sizeof(grad_w)));
    const double ref_loss = reference(half, x, w, probe, ref_grad);
    const double u = half == TF_BF16 ? 1.0 / 256.0 : 1.0 / 2048.0;
    double loss_scale = 0.0, grad_max = 0.0, worst = 0.0;
    for (int i = 0; i < M * N; i++)
      loss_scale += fabs(probe[i]) * 2.0; /* |s| <= |z| + |y| ~ 2: a sum of terms of that size */
    for (int i = 0; i < K * N; i++)
      grad_max = fmax(grad_max, fabs(ref_grad[i]));
    for (int i = 0; i < K * N; i++)
      worst = fmax(worst, fabs(grad_w[i] - ref_grad[i]) / (4.0 * u * grad_max));
    const double loss_ratio = fabs(loss - ref_loss) / (4.0 * u * loss_scale);
    CHECK(&counts, loss_ratio <= 1.0, "%s: loss %.9g, f64 reference %.9g (%.2f x the tolerance)", tf_dtype_name(half),
          loss, ref_loss, loss_ratio);
    CHECK(&counts, worst <= 1.0, "%s: grad(W) %.2f x the tolerance", tf_dtype_name(half), worst);
    printf("%-4s cpu %-4s %-13s loss %.7g vs f64 %.7g (%.3f of 4u); grad(W) worst %.3f of 4u x max |ref| (%.4g)\n",
           loss_ratio <= 1.0 && worst <= 1.0 ? "ok" : "FAIL", tf_dtype_name(half),
           half_kernels ? "half kernels" : "between casts", loss, ref_loss, loss_ratio, worst, grad_max);
  }
  tf_session_destroy(s);
  tf_plan_destroy(plan);
}

/* A bf16 parameter: a training plan keeps an f32 master of it in the optimizer state, updated and
 * then written into it by cast_into (compiler/master_weights.c); an inference plan initialises it
 * (normal values rounded to bf16) and runs. */
static void half_parameter(void) {
  tf_graph *g = tf_test_graph_begin(&counts, "half_parameter");
  if (!g)
    return;
  tf_tensor_id x = tf_cast(g, tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(M), d(K))), TF_BF16);
  tf_tensor_id w = tf_graph_parameter(g, "W", TF_BF16, TF_SHAPE(d(K), d(N)), tf_init_make(TF_INIT_NORMAL, 0.0, 1.0));
  tf_tensor_id y = tf_cast(g, tf_matmul(g, x, w, false, false), TF_F32);
  tf_graph_add_output(g, y);
  tf_graph_set_loss(g, tf_reduce(g, TF_OP_SUM, y, NULL, 0, false));
  tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  int32_t master = -1, written = 0;
  for (int32_t i = 0; plan && i < plan->n_buffers; i++)
    if (strcmp(plan->buffers[i].name, "master(W)") == 0 && plan->buffers[i].role == TF_ROLE_OPTIMIZER_STATE &&
        plan->buffers[i].dtype == TF_F32 && plan->buffers[i].bytes == K * N * 4)
      master = i;
  for (int32_t i = 0; plan && master >= 0 && i < plan->n_steps; i++)
    written += plan->steps[i].op == TF_OP_CAST_INTO && strcmp(plan->buffers[plan->steps[i].inputs[0]].name, "W") == 0 &&
               plan->steps[i].inputs[1] == master;
  CHECK(&counts, master >= 0 && written == 1, "training a bf16 parameter: master %d, %d cast_into steps", master,
        written);
  printf("%-4s cpu training with a bf16 parameter: an f32 master(W) in the optimizer state, W written from it "
         "(%d cast_into)\n",
         master >= 0 && written == 1 ? "ok" : "FAIL", written);
  tf_plan_destroy(plan);
  plan = NULL;
  o.training = false;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  tf_graph_destroy(g);
  tf_session_options so = tf_session_options_default();
  tf_session *s = NULL;
  if (plan)
    CHECK_OK(&counts, tf_session_create(plan, &so, &s));
  uint16_t bits[K * N];
  float x_values[M * K];
  double loss = NAN, largest = 0.0;
  for (int i = 0; i < M * K; i++)
    x_values[i] = 0.25f * (float)(i % 5);
  if (s) {
    CHECK_OK(&counts, tf_session_write(s, "x", x_values, sizeof(x_values)));
    CHECK_OK(&counts, tf_session_forward(s, &loss));
    CHECK_OK(&counts, tf_session_read(s, "W", bits, sizeof(bits)));
    for (int i = 0; i < K * N; i++)
      largest = fmax(largest, fabs(tf_test_half_value(TF_BF16, bits[i])));
  }
  const bool ran = isfinite(loss) && largest > 0.0 && largest < 8.0;
  CHECK(&counts, ran, "inference with a bf16 parameter: loss %g, largest |W| %g", loss, largest);
  printf("%-4s cpu inference with a bf16 parameter: loss %g, largest |W| %g\n", ran ? "ok" : "FAIL", loss, largest);
  tf_session_destroy(s);
  tf_plan_destroy(plan);
}

/* A backward step between casts reads a half tensor it needs for its shape only as it is: on the
 * vulkan and cuda targets the embedding runs as a half kernel on the bf16 table and its gradient (no half
 * kernel there) between casts, which cast the table to f32 for its shape: a copy of the table, and
 * the table kept alive from the forward pass to the end of the backward pass. Now every step that
 * reads the table is a forward step (the CPU target checked the same way). */
static void shape_only_operand(tf_target_kind kind) {
  tf_graph *g = tf_test_graph_begin(&counts, "shape_only");
  if (!g)
    return;
  tf_tensor_id ids = tf_graph_input(g, "ids", TF_I32, TF_SHAPE(d(M)));
  tf_tensor_id table = tf_cast(g, tf_test_param(g, "W", TF_SHAPE(d(50), d(K))), TF_BF16);
  tf_graph_rename(g, table, "table");
  tf_tensor_id e = tf_embedding(g, ids, table);
  tf_graph_set_loss(g, tf_reduce(g, TF_OP_SUM, tf_cast(g, tf_mul(g, e, e), TF_F32), NULL, 0, false));
  tf_compile_options o = tf_compile_options_default(kind);
  tf_plan *plan = NULL;
  CHECK_OK(&counts, tf_compile(g, &o, &plan));
  tf_graph_destroy(g);
  int32_t readers = 0, backward = 0;
  for (int32_t s = 0; plan && s < plan->n_steps; s++)
    for (int32_t k = 0; k < plan->steps[s].n_inputs; k++) {
      const int32_t b = plan->steps[s].inputs[k];
      const tf_op op = plan->steps[s].op;
      const bool data = !tf_op_input_shape_only(op, k);
      if (b >= 0 && data && strcmp(plan->buffers[b].name, "table") == 0) {
        readers++;
        backward += plan->steps[s].phase != TF_PHASE_FORWARD;
      }
    }
  const bool ok = plan && readers > 0 && backward == 0;
  CHECK(&counts, ok, "%s: %d steps read the bf16 table's data, %d of them after the forward pass", tf_target_name(kind),
        readers, backward);
  printf("%-4s %s: the bf16 table's data is read by %d forward step(s), by no backward step\n", ok ? "ok" : "FAIL",
         tf_target_name(kind), readers);
  tf_plan_destroy(plan);
}

int main(void) {
  shape_only_operand(TF_TARGET_CPU);
  shape_only_operand(TF_TARGET_VULKAN);
  shape_only_operand(TF_TARGET_CUDA);
  for (int kernels = 0; kernels < 2; kernels++) {
    run(TF_BF16, kernels == 1);
    run(TF_F16, kernels == 1);
  }
  half_parameter();
  return tf_test_finish("ops on half data", &counts);
}
