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
