/* The fused loss head of a bf16 (and an f16) model (compiler/fuse_loss.c): logits = x_h W_h^T over a
 * vocabulary of 9,000, x_h and W_h the model's half tensors, -> cross_entropy. Fused, the head reads
 * x_h and W_h widened (exact) and computes in f32 without ever rounding the logits, so its loss and
 * its weight gradient are bit for bit those of the f32 fused head fed the same half-rounded x and W,
 * the gradient then rounded to the half type (as the cast's backward does). Checked: those bits on the
 * CPU; the fused plan holds no [rows, V] buffer and its arena is a fraction of the unfused plan's; the
 * unfused half graph (logits rounded to the half type) gives the same loss within 2^-7; --fuse-loss
 * auto fuses a half head whose logits take 147 MB in f32 (74 MB in the half type: the threshold,
 * TF_FUSE_LOSS_AUTO_BYTES, counts them in f32, as the unfused graph widens them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "half_values.h"
#include "op_graphs.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

#define ROWS 512
#define WIDTH 32
#define CLASSES 9000
#define AUTO_ROWS 4096

static tf_test_counts counts;

/* x [rows, WIDTH] and W [CLASSES, WIDTH] (f32), cast to `dtype` unless it is f32, -> logits -> loss. */
static tf_graph *build(tf_dtype dtype, int64_t rows) {
  tf_graph *g = tf_test_graph_begin(&counts, "half_head");
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

static tf_plan *compile(tf_dtype dtype, tf_fuse_loss fuse, int64_t rows, bool half_kernels) {
  tf_graph *g = build(dtype, rows);
  tf_plan *plan = NULL;
  if (g) {
    tf_compile_options o = tf_compile_options_default(TF_TARGET_CPU);
    if (!half_kernels)
      memset(o.target.half_kernels, 0, sizeof(o.target.half_kernels));
    o.fuse_loss = fuse;
    o.loss_scale = 1.0;
    o.accumulate = 2; /* grad(W) is the accumulator, read after the first micro-step */
    CHECK_OK(&counts, tf_compile(g, &o, &plan));
  }
  tf_graph_destroy(g);
  return plan;
}

/* The name of a buffer of the plan shaped like the logits [rows, CLASSES], or NULL. */
static const char *logits_buffer(const tf_plan *plan, int64_t rows) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->rank == 2 && b->shape[0] == rows && b->shape[1] == CLASSES)
      return b->name;
  }
  return NULL;
}

static int32_t count_op(const tf_plan *plan, tf_op op) {
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    n += plan->steps[s].op == op;
  return n;
}

/* One micro-step of `plan` on x and labels with W as given: the loss and grad(W). */
static double run(const tf_plan *plan, const float *x, const int32_t *labels, const float *w, float *grad_w) {
  tf_session *s = NULL;
  tf_session_options so = tf_session_options_default();
  double loss = NAN;
  CHECK_OK(&counts, tf_session_create(plan, &so, &s));
  if (!s)
    return loss;
  CHECK_OK(&counts, tf_session_write(s, "x", x, sizeof(float) * ROWS * WIDTH));
  CHECK_OK(&counts, tf_session_write(s, "labels", labels, sizeof(int32_t) * ROWS));
  CHECK_OK(&counts, tf_session_write(s, "W", w, sizeof(float) * CLASSES * WIDTH));
  CHECK_OK(&counts, tf_session_micro_step(s, &loss));
  CHECK_OK(&counts, tf_session_read(s, "grad(W)", grad_w, sizeof(float) * CLASSES * WIDTH));
  tf_session_destroy(s);
  return loss;
}

static void check(tf_dtype half) {
  tf_plan *fused = compile(half, TF_FUSE_LOSS_ON, ROWS, true), *unfused = compile(half, TF_FUSE_LOSS_OFF, ROWS, true);
  tf_plan *between = compile(half, TF_FUSE_LOSS_ON, ROWS, false),
          *reference = compile(TF_F32, TF_FUSE_LOSS_ON, ROWS, true);
  /* auto: 147 MB of logits counted in f32, over TF_FUSE_LOSS_AUTO_BYTES; 74 MB in the half type, under */
  tf_plan *automatic = compile(half, TF_FUSE_LOSS_AUTO, AUTO_ROWS, true);
  float *x = malloc(sizeof(float) * ROWS * WIDTH), *x_h = malloc(sizeof(float) * ROWS * WIDTH);
  float *w = malloc(sizeof(float) * CLASSES * WIDTH), *w_h = malloc(sizeof(float) * CLASSES * WIDTH);
  float *grad = malloc(sizeof(float) * CLASSES * WIDTH), *grad_ref = malloc(sizeof(float) * CLASSES * WIDTH);
  int32_t labels[ROWS];
  if (!fused || !unfused || !between || !reference || !automatic || !x || !x_h || !w || !w_h || !grad || !grad_ref) {
    CHECK(&counts, false, "%s: compile or allocation failed", tf_dtype_name(half));
    goto done;
  }
  for (int i = 0; i < ROWS * WIDTH; i++)
    x_h[i] = tf_test_half_round(half, x[i] = (float)sin(0.37 * i) * 1.7f);
  for (int i = 0; i < CLASSES * WIDTH; i++)
    w_h[i] = tf_test_half_round(half, w[i] = (float)cos(0.11 * i) * 0.3f);
  for (int i = 0; i < ROWS; i++)
    labels[i] = (i * 7919) % CLASSES;
  CHECK(&counts, count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY) + count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY_TRAIN) == 1,
        "%s: the fused plan has no linear_cross_entropy step", tf_dtype_name(half));
  CHECK(&counts, logits_buffer(fused, ROWS) == NULL && logits_buffer(unfused, ROWS) != NULL,
        "%s: the fused plan holds '%s' [%d, %d]; the unfused '%s'", tf_dtype_name(half), logits_buffer(fused, ROWS),
        ROWS, CLASSES, logits_buffer(unfused, ROWS));
  CHECK(&counts, logits_buffer(automatic, AUTO_ROWS) == NULL,
        "%s: --fuse-loss auto left the head of %lld f32-counted logit bytes unfused", tf_dtype_name(half),
        (long long)AUTO_ROWS * CLASSES * 4);
  const double expected = run(reference, x_h, labels, w_h, grad_ref);
  const double between_loss = run(between, x, labels, w, grad);
  int64_t differ = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++)
    differ += tf_test_half_round(half, grad_ref[i]) != grad[i];
  CHECK(&counts, between_loss == expected && differ == 0,
        "%s: fused loss between casts %.9g vs the f32 head on rounded inputs %.9g; %lld of %d gradient elements "
        "differ from its rounded gradient",
        tf_dtype_name(half), between_loss, expected, (long long)differ, CLASSES * WIDTH);
  /* the half kernel (class spans outside): within rounding of the same values, not bit for bit */
  const double loss = run(fused, x, labels, w, grad);
  const double unit = half == TF_BF16 ? 1.0 / 128 : 1.0 / 1024;  /* one unit in the last place, relative */
  const double spacing = half == TF_F16 ? ldexp(1.0, -24) : 0.0; /* f16's subnormals: absolute */
  double largest = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++)
    largest = fabs(grad_ref[i]) > largest ? fabs(grad_ref[i]) : largest;
  int64_t apart = 0, far = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++) {
    apart += tf_test_half_round(half, grad_ref[i]) != grad[i];
    far += fabs(grad[i] - grad_ref[i]) > unit * fabs(grad_ref[i]) + 1e-6 * largest + spacing;
  }
  const int64_t arena_kernel = fused->region_bytes[TF_REGION_ARENA],
                arena_casts = between->region_bytes[TF_REGION_ARENA];
  CHECK(
      &counts,
      fabs(loss - expected) <= 1e-6 * fabs(expected) && far == 0 && apart * 100 <= CLASSES * WIDTH &&
          arena_kernel < arena_casts,
      "%s half kernel: loss %.9g vs %.9g; %lld gradient elements another rounding, %lld beyond one unit; arena %lld B "
      "vs %lld B between casts",
      tf_dtype_name(half), loss, expected, (long long)apart, (long long)far, (long long)arena_kernel,
      (long long)arena_casts);
  printf("%-4s %s half kernel: loss %.9g (f32 head %.9g), %lld of %d grad(W) elements the neighbouring %s, none "
         "beyond one unit; arena %lld B against %lld B between casts\n",
         far == 0 ? "ok" : "FAIL", tf_dtype_name(half), loss, expected, (long long)apart, CLASSES * WIDTH,
         tf_dtype_name(half), (long long)arena_kernel, (long long)arena_casts);
  const double unfused_loss = run(unfused, x, labels, w, grad);
  CHECK(&counts, fabs(unfused_loss - loss) <= fabs(loss) / 128, "%s: unfused loss %.9g, fused %.9g",
        tf_dtype_name(half), unfused_loss, loss);
  printf("ok   %s head [%d, %d] x [%d, %d]^T: fused between casts loss %.9g = the f32 head's on rounded inputs, "
         "grad(W) its rounding bit for bit; unfused %.9g; arena %lld B fused, %lld B unfused\n",
         tf_dtype_name(half), ROWS, WIDTH, CLASSES, WIDTH, between_loss, unfused_loss,
         (long long)fused->region_bytes[TF_REGION_ARENA], (long long)unfused->region_bytes[TF_REGION_ARENA]);
done:
  free(x);
  free(x_h);
  free(w);
  free(w_h);
  free(grad);
  free(grad_ref);
  tf_plan_destroy(fused);
  tf_plan_destroy(unfused);
  tf_plan_destroy(between);
  tf_plan_destroy(reference);
  tf_plan_destroy(automatic);
}

int main(void) {
  check(TF_BF16);
  check(TF_F16);
  return tf_test_finish("half loss head", &counts);
}
