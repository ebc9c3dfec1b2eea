/* The fused loss head on half data on Vulkan (backends/vulkan/vk_lower_linear_loss_half.c): a bf16
 * (and an f16) head over 9,000 classes (five of the shaders' class spans of 2,048), compiled for the
 * vulkan target, runs linear_cross_entropy on its half x and weight itself: no step of its head
 * reads or writes an f32 [9000, 32] buffer (between casts they read the weight widened and write
 * its f32 gradient) and its arena is smaller; one micro-step's loss and grad(W) are within one unit of the half type of
 * the f32 head fed the same half-rounded x and W (the CPU, f32), as the CPU's half kernel is (test_half_loss_head).
 * Under the validation layer; exits 77 without a Vulkan device. */
#include "check.h"
#include "half_head.h"
#include "parity.h"

static tf_test_counts counts;

int main(void) {
  const int available = parity_vulkan_available();
  if (available != 0)
    return available;
  tf_half_head_check_target(&counts, TF_TARGET_VULKAN, "vulkan", TF_BF16, true);
  tf_half_head_check_target(&counts, TF_TARGET_VULKAN, "vulkan", TF_F16, true);
  parity_check_validation(&counts);
  return tf_test_finish("vulkan half head", &counts);
}
