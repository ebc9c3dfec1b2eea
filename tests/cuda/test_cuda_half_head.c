/* The fused loss head on half data on CUDA (kernels/cuda/linear_loss_half.cu, written without a
 * GPU): a bf16 (and an f16) head over 9,000 classes (five of the kernel's class spans of 2,048),
 * compiled for the cuda target, runs linear_cross_entropy on its half x and weight itself (no step
 * of its head reads or writes an f32 [9000, 32] buffer; three between casts) with a smaller arena,
 * and one micro-step's loss and grad(W) are within one unit of the half type of the f32 head fed the
 * same half-rounded x and W (the CPU, f32), as the CPU's and Vulkan's half heads are. The plan checks
 * run anywhere; the run exits 77 without a CUDA device. */
#include "check.h"
#include "cuda_test.h"
#include "half_head.h"

static tf_test_counts counts;

int main(void) {
  const int available = cuda_test_device();
  tf_half_head_check_target(&counts, TF_TARGET_CUDA, "cuda", TF_BF16, available == 0);
  tf_half_head_check_target(&counts, TF_TARGET_CUDA, "cuda", TF_F16, available == 0);
  const int code = tf_test_finish("cuda half head", &counts);
  return code != 0 || available == 0 ? code : available;
}
