/* The fused-head tests' shared head (half_head.h). */
#include "half_head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half_values.h"
#include "op_graphs.h"

#define ROWS TF_HALF_HEAD_ROWS
#define WIDTH TF_HALF_HEAD_WIDTH
#define CLASSES TF_HALF_HEAD_CLASSES

/* x [rows, WIDTH] and W [CLASSES, WIDTH] (f32), cast to `dtype` unless it is f32, -> logits -> loss. */
static tf_graph *build(tf_test_counts *counts, tf_dtype dtype, int64_t rows) {
  tf_graph *g = tf_test_graph_begin(counts, "half_head");
  if (!g)
    return NULL;
  tf_tensor_id x = tf_graph_input(g, "x", TF_F32, TF_SHAPE(d(rows), d(WIDTH)));
  tf_tensor_id labels = tf_graph_input(g, "labels", TF_I32, TF_SHAPE(d(rows)));
  tf_tensor_id w = tf_test_param(g, "W", TF_SHAPE(d(CLASSES), d(WIDTH)));
  if (dtype != TF_F32) {
    x = tf_cast(g, x, dtype);
    w = tf_cast(g, w, dtype);
  }
  tf_graph_set_loss(g, tf_cross_entropy(g, tf_matmul(g, x, w, false, true), labels, -1));
  return g;
}

tf_plan *tf_half_head_compile(tf_test_counts *counts, tf_target_kind target, tf_dtype dtype, tf_fuse_loss fuse,
                              int64_t rows, bool half_kernels) {
  tf_graph *g = build(counts, dtype, rows);
  tf_plan *plan = NULL;
  if (g) {
    tf_compile_options o = tf_compile_options_default(target);
    if (!half_kernels)
      memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
    o.fuse_loss = fuse;
    o.loss_scale = 1.0;
    o.accumulate = 2; /* grad(W) is the accumulator, read after the first micro-step */
    CHECK_OK(counts, tf_compile(g, &o, &plan));
  }
  tf_graph_destroy(g);
  return plan;
}

bool tf_half_head_data_make(tf_half_head_data *data, tf_dtype half) {
  data->x = malloc(sizeof(float) * ROWS * WIDTH);
  data->x_h = malloc(sizeof(float) * ROWS * WIDTH);
  data->w = malloc(sizeof(float) * CLASSES * WIDTH);
  data->w_h = malloc(sizeof(float) * CLASSES * WIDTH);
  if (!data->x || !data->x_h || !data->w || !data->w_h)
    return false;
  for (int i = 0; i < ROWS * WIDTH; i++)
    data->x_h[i] = tf_test_half_round(half, data->x[i] = (float)sin(0.37 * i) * 1.7f);
  for (int i = 0; i < CLASSES * WIDTH; i++)
    data->w_h[i] = tf_test_half_round(half, data->w[i] = (float)cos(0.11 * i) * 0.3f);
  for (int i = 0; i < ROWS; i++)
    data->labels[i] = (i * 7919) % CLASSES;
  return true;
}

void tf_half_head_data_free(tf_half_head_data *data) {
  free(data->x);
  free(data->x_h);
  free(data->w);
  free(data->w_h);
  memset(data, 0, sizeof(*data));
}

double tf_half_head_run(tf_test_counts *counts, const tf_plan *plan, const char *backend, const float *x,
                        const int32_t *labels, const float *w, float *grad_w) {
  tf_session *s = NULL;
  tf_session_options so = tf_session_options_default();
  so.backend = backend;
  double loss = NAN;
  CHECK_OK(counts, tf_session_create(plan, &so, &s));
  if (!s)
    return loss;
  CHECK_OK(counts, tf_session_write(s, "x", x, sizeof(float) * ROWS * WIDTH));
  CHECK_OK(counts, tf_session_write(s, "labels", labels, sizeof(int32_t) * ROWS));
  CHECK_OK(counts, tf_session_write(s, "W", w, sizeof(float) * CLASSES * WIDTH));
  CHECK_OK(counts, tf_session_micro_step(s, &loss));
  CHECK_OK(counts, tf_session_read(s, "grad(W)", grad_w, sizeof(float) * CLASSES * WIDTH));
  tf_session_destroy(s);
  return loss;
}

const char *tf_half_head_buffer(const tf_plan *plan, int64_t rows, int64_t cols, tf_dtype dtype) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->rank == 2 && b->shape[0] == rows && b->shape[1] == cols && b->dtype == dtype)
      return b->name;
  }
  return NULL;
}

bool tf_half_head_check(tf_test_counts *counts, const char *what, tf_dtype half, double loss, const float *grad,
                        double expected, const float *grad_ref) {
  const double unit = half == TF_BF16 ? 1.0 / 128 : 1.0 / 1024;  /* one unit in the last place, relative */
  const double spacing = half == TF_F16 ? ldexp(1.0, -24) : 0.0; /* f16's subnormals: absolute */
  double largest = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++)
    largest = fabs(grad_ref[i]) > largest ? fabs(grad_ref[i]) : largest;
  int64_t apart = 0, far = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++) {
    apart += tf_test_half_round(half, grad_ref[i]) != grad[i];
    far += !(fabs(grad[i] - grad_ref[i]) <= unit * fabs(grad_ref[i]) + 1e-6 * largest + spacing);
  }
  const bool ok = fabs(loss - expected) <= 1e-6 * fabs(expected) && far == 0 && apart * 100 <= CLASSES * WIDTH;
  CHECK(counts, ok, "%s, %s: loss %.9g vs %.9g; %lld gradient elements another rounding, %lld beyond one unit", what,
        tf_dtype_name(half), loss, expected, (long long)apart, (long long)far);
  printf("%-4s %s, %s: loss %.9g (f32 head %.9g), %lld of %d grad(W) elements the neighbouring %s, %lld beyond one "
         "unit\n",
         ok ? "ok" : "FAIL", what, tf_dtype_name(half), loss, expected, (long long)apart, CLASSES * WIDTH,
         tf_dtype_name(half), (long long)far);
  return ok;
}

static bool is_head(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN;
}

static bool f32_weight_shaped(const tf_plan_buffer *b) {
  return b->dtype == TF_F32 && b->rank == 2 && b->shape[0] == CLASSES && b->shape[1] == WIDTH;
}

/* The operands of the plan's fused head steps shaped like the weight in f32. */
static int32_t f32_weights_at_head(const tf_plan *plan) {
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; is_head(step->op) && k < step->n_inputs; k++)
      n += f32_weight_shaped(&plan->buffers[step->inputs[k]]);
    for (int32_t k = 0; is_head(step->op) && k < step->n_outputs; k++)
      n += f32_weight_shaped(&plan->buffers[step->outputs[k]]);
  }
  return n;
}

/* The dtype of x in the plan's forward head step, or -1 when it has none. */
static int head_dtype(const tf_plan *plan) {
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY || plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN)
      return (int)plan->buffers[plan->steps[s].inputs[0]].dtype;
  return -1;
}

void tf_half_head_check_plans(tf_test_counts *counts, const char *target, tf_dtype half, const tf_plan *fused,
                              const tf_plan *between) {
  const int32_t copies = f32_weights_at_head(fused), copies_between = f32_weights_at_head(between);
  const int64_t arena = fused->region_bytes[TF_REGION_ARENA], arena_between = between->region_bytes[TF_REGION_ARENA];
  CHECK(counts, head_dtype(fused) == (int)half && head_dtype(between) == (int)TF_F32,
        "%s, %s: the fused head step reads x of dtype %d (half kernels) and %d (between casts)", target,
        tf_dtype_name(half), head_dtype(fused), head_dtype(between));
  const bool ok = copies == 0 && copies_between > 0 && arena < arena_between;
  CHECK(counts, ok,
        "%s, %s: the head steps read or write %d f32 [%d, %d] buffers with the half head, %d between casts; arena "
        "%lld B vs %lld B",
        target, tf_dtype_name(half), copies, CLASSES, WIDTH, copies_between, (long long)arena,
        (long long)arena_between);
  printf("%-4s %s %s plan: the head on %s data, no f32 [%d, %d] operand (%d between casts: the widened weight, its "
         "f32 gradient); arena %lld B (%lld B between casts)\n",
         ok ? "ok" : "FAIL", target, tf_dtype_name(half), tf_dtype_name(half), CLASSES, WIDTH, copies_between,
         (long long)arena, (long long)arena_between);
}

void tf_half_head_check_target(tf_test_counts *counts, tf_target_kind target, const char *backend, tf_dtype half,
                               bool run) {
  tf_plan *fused = tf_half_head_compile(counts, target, half, TF_FUSE_LOSS_ON, ROWS, true);
  tf_plan *between = tf_half_head_compile(counts, target, half, TF_FUSE_LOSS_ON, ROWS, false);
  tf_plan *reference = tf_half_head_compile(counts, TF_TARGET_CPU, TF_F32, TF_FUSE_LOSS_ON, ROWS, true);
  tf_half_head_data data;
  float *grad = malloc(sizeof(float) * CLASSES * WIDTH), *grad_ref = malloc(sizeof(float) * CLASSES * WIDTH);
  char what[64];
  snprintf(what, sizeof(what), "%s half head", backend);
  if (!tf_half_head_data_make(&data, half) || !fused || !between || !reference || !grad || !grad_ref) {
    CHECK(counts, false, "%s, %s: compile or allocation failed", backend, tf_dtype_name(half));
  } else {
    tf_half_head_check_plans(counts, backend, half, fused, between);
    if (run) {
      const double expected = tf_half_head_run(counts, reference, "cpu", data.x_h, data.labels, data.w_h, grad_ref);
      const double loss = tf_half_head_run(counts, fused, backend, data.x, data.labels, data.w, grad);
      tf_half_head_check(counts, what, half, loss, grad, expected, grad_ref);
    }
  }
  tf_half_head_data_free(&data);
  free(grad);
  free(grad_ref);
  tf_plan_destroy(fused);
  tf_plan_destroy(between);
  tf_plan_destroy(reference);
}
