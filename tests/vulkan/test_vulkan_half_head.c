/* The fused loss head on half data on Vulkan (backends/vulkan/vk_lower_linear_loss_half.c): a bf16
 * (and an f16) head over 9,000 classes (five of the shaders' class spans of 2,048), compiled for the
 * vulkan target, runs linear_cross_entropy on its half x and weight itself: no step of its head
 * reads or writes an f32 [9000, 32] buffer (between casts they read the weight widened and write
 * its f32 gradient) and its arena is smaller; one micro-step's loss and grad(W) are within one unit of the half type of the f32 head
 * fed the same half-rounded x and W (the CPU, f32), as the CPU's half kernel is (test_half_loss_head).
 * Under the validation layer; exits 77 without a Vulkan device. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "half_head.h"
#include "parity.h"

#define ROWS TF_HALF_HEAD_ROWS
#define WIDTH TF_HALF_HEAD_WIDTH
#define CLASSES TF_HALF_HEAD_CLASSES

static tf_test_counts counts;

static bool is_head(tf_op op) {
  return op == TF_OP_LINEAR_CROSS_ENTROPY || op == TF_OP_LINEAR_CROSS_ENTROPY_GRAD ||
         op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN;
}

static bool f32_weight_shaped(const tf_plan_buffer *b) {
  return b->dtype == TF_F32 && b->rank == 2 && b->shape[0] == CLASSES && b->shape[1] == WIDTH;
}

/* The operands of the plan's fused head steps shaped like the weight [CLASSES, WIDTH] in f32: the
 * widened copy of the weight they read and the f32 gradient they write, between casts. */
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

/* The dtype of x in the plan's fused head step, or -1 when it has none. */
static int head_dtype(const tf_plan *plan) {
  for (int32_t s = 0; s < plan->n_steps; s++)
    if (plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY || plan->steps[s].op == TF_OP_LINEAR_CROSS_ENTROPY_TRAIN)
      return (int)plan->buffers[plan->steps[s].inputs[0]].dtype;
  return -1;
}

static void check(tf_dtype half) {
  tf_plan *fused = tf_half_head_compile(&counts, TF_TARGET_VULKAN, half, TF_FUSE_LOSS_ON, ROWS, true);
  tf_plan *between = tf_half_head_compile(&counts, TF_TARGET_VULKAN, half, TF_FUSE_LOSS_ON, ROWS, false);
  tf_plan *reference = tf_half_head_compile(&counts, TF_TARGET_CPU, TF_F32, TF_FUSE_LOSS_ON, ROWS, true);
  tf_half_head_data data;
  float *grad = malloc(sizeof(float) * CLASSES * WIDTH), *grad_ref = malloc(sizeof(float) * CLASSES * WIDTH);
  if (!tf_half_head_data_make(&data, half) || !fused || !between || !reference || !grad || !grad_ref) {
    CHECK(&counts, false, "%s: compile or allocation failed", tf_dtype_name(half));
    goto done;
  }
  const int32_t copies = f32_weights_at_head(fused), copies_between = f32_weights_at_head(between);
  const int64_t arena = fused->region_bytes[TF_REGION_ARENA], arena_between = between->region_bytes[TF_REGION_ARENA];
  CHECK(&counts, head_dtype(fused) == (int)half && head_dtype(between) == (int)TF_F32,
        "%s: the fused head step reads x of dtype %d (half kernels) and %d (between casts)", tf_dtype_name(half),
        head_dtype(fused), head_dtype(between));
  CHECK(&counts, copies == 0 && copies_between > 0 && arena < arena_between,
        "%s: the head steps read or write %d f32 [%d, %d] buffers with the half head, %d between casts; arena %lld B "
        "vs %lld B",
        tf_dtype_name(half), copies, CLASSES, WIDTH, copies_between, (long long)arena, (long long)arena_between);
  printf("%-4s %s plan: the head on %s data, no f32 [%d, %d] operand (%d between casts: the widened weight, its "
         "f32 gradient); arena %lld B "
         "(%lld B between casts)\n",
         copies == 0 && arena < arena_between ? "ok" : "FAIL", tf_dtype_name(half), tf_dtype_name(half), CLASSES,
         WIDTH, copies_between, (long long)arena, (long long)arena_between);
  const double expected = tf_half_head_run(&counts, reference, "cpu", data.x_h, data.labels, data.w_h, grad_ref);
  const double loss = tf_half_head_run(&counts, fused, "vulkan", data.x, data.labels, data.w, grad);
  tf_half_head_check(&counts, "vulkan half head", half, loss, grad, expected, grad_ref);
done:
  tf_half_head_data_free(&data);
  free(grad);
  free(grad_ref);
  tf_plan_destroy(fused);
  tf_plan_destroy(between);
  tf_plan_destroy(reference);
}

int main(void) {
  const int available = parity_vulkan_available();
  if (available != 0)
    return available;
  check(TF_BF16);
  check(TF_F16);
  parity_check_validation(&counts);
  return tf_test_finish("vulkan half head", &counts);
}
