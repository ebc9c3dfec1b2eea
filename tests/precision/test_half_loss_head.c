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

#include "check.h"
#include "half_head.h"
#include "half_values.h"

#define ROWS TF_HALF_HEAD_ROWS
#define WIDTH TF_HALF_HEAD_WIDTH
#define CLASSES TF_HALF_HEAD_CLASSES
#define AUTO_ROWS 4096

static tf_test_counts counts;

static tf_plan *compile(tf_dtype dtype, tf_fuse_loss fuse, int64_t rows, bool half_kernels) {
  return tf_half_head_compile(&counts, TF_TARGET_CPU, dtype, fuse, rows, half_kernels);
}

static int32_t count_op(const tf_plan *plan, tf_op op) {
  int32_t n = 0;
  for (int32_t s = 0; s < plan->n_steps; s++)
    n += plan->steps[s].op == op;
  return n;
}

static double run(const tf_plan *plan, const float *x, const int32_t *labels, const float *w, float *grad_w) {
  return tf_half_head_run(&counts, plan, "cpu", x, labels, w, grad_w);
}

/* The name of a buffer of the plan shaped like the logits [rows, CLASSES] (f32 or half), or NULL. */
static const char *logits_buffer(const tf_plan *plan, int64_t rows) {
  const tf_dtype types[3] = {TF_F32, TF_BF16, TF_F16};
  const char *name = NULL;
  for (int i = 0; i < 3 && !name; i++)
    name = tf_half_head_buffer(plan, rows, CLASSES, types[i]);
  return name;
}

static void check(tf_dtype half) {
  tf_plan *fused = compile(half, TF_FUSE_LOSS_ON, ROWS, true), *unfused = compile(half, TF_FUSE_LOSS_OFF, ROWS, true);
  tf_plan *between = compile(half, TF_FUSE_LOSS_ON, ROWS, false),
          *reference = compile(TF_F32, TF_FUSE_LOSS_ON, ROWS, true);
  /* auto: 147 MB of logits counted in f32, over TF_FUSE_LOSS_AUTO_BYTES; 74 MB in the half type, under */
  tf_plan *automatic = compile(half, TF_FUSE_LOSS_AUTO, AUTO_ROWS, true);
  tf_half_head_data data;
  float *grad = malloc(sizeof(float) * CLASSES * WIDTH), *grad_ref = malloc(sizeof(float) * CLASSES * WIDTH);
  if (!tf_half_head_data_make(&data, half) || !fused || !unfused || !between || !reference || !automatic || !grad ||
      !grad_ref) {
    CHECK(&counts, false, "%s: compile or allocation failed", tf_dtype_name(half));
    goto done;
  }
  CHECK(&counts, count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY) + count_op(fused, TF_OP_LINEAR_CROSS_ENTROPY_TRAIN) == 1,
        "%s: the fused plan has no linear_cross_entropy step", tf_dtype_name(half));
  CHECK(&counts, logits_buffer(fused, ROWS) == NULL && logits_buffer(unfused, ROWS) != NULL,
        "%s: the fused plan holds '%s' [%d, %d]; the unfused '%s'", tf_dtype_name(half), logits_buffer(fused, ROWS),
        ROWS, CLASSES, logits_buffer(unfused, ROWS));
  CHECK(&counts, logits_buffer(automatic, AUTO_ROWS) == NULL,
        "%s: --fuse-loss auto left the head of %lld f32-counted logit bytes unfused", tf_dtype_name(half),
        (long long)AUTO_ROWS * CLASSES * 4);
  const double expected = run(reference, data.x_h, data.labels, data.w_h, grad_ref);
  const double between_loss = run(between, data.x, data.labels, data.w, grad);
  int64_t differ = 0;
  for (int i = 0; i < CLASSES * WIDTH; i++)
    differ += tf_test_half_round(half, grad_ref[i]) != grad[i];
  CHECK(&counts, between_loss == expected && differ == 0,
        "%s: fused loss between casts %.9g vs the f32 head on rounded inputs %.9g; %lld of %d gradient elements "
        "differ from its rounded gradient",
        tf_dtype_name(half), between_loss, expected, (long long)differ, CLASSES * WIDTH);
  /* the half kernel (class spans outside): within rounding of the same values, not bit for bit */
  const double loss = run(fused, data.x, data.labels, data.w, grad);
  tf_half_head_check(&counts, "cpu half kernel", half, loss, grad, expected, grad_ref);
  const int64_t arena_kernel = fused->region_bytes[TF_REGION_ARENA],
                arena_casts = between->region_bytes[TF_REGION_ARENA];
  CHECK(&counts, arena_kernel < arena_casts, "%s: arena %lld B with the half kernel vs %lld B between casts",
        tf_dtype_name(half), (long long)arena_kernel, (long long)arena_casts);
  const double unfused_loss = run(unfused, data.x, data.labels, data.w, grad);
  CHECK(&counts, fabs(unfused_loss - loss) <= fabs(loss) / 128, "%s: unfused loss %.9g, fused %.9g",
        tf_dtype_name(half), unfused_loss, loss);
  printf("ok   %s head [%d, %d] x [%d, %d]^T: fused between casts loss %.9g = the f32 head's on rounded inputs, "
         "grad(W) its rounding bit for bit; unfused %.9g; arena %lld B fused (half kernel), %lld B between casts, "
         "%lld B unfused\n",
         tf_dtype_name(half), ROWS, WIDTH, CLASSES, WIDTH, between_loss, unfused_loss, (long long)arena_kernel,
         (long long)arena_casts, (long long)unfused->region_bytes[TF_REGION_ARENA]);
done:
  tf_half_head_data_free(&data);
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
