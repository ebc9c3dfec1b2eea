/* The fused loss head (linear_cross_entropy and its gradient). */
#include "backends/vulkan/vk_lower.h"

tf_status vk_lower_linear_cross_entropy(vk_lower *l) { return vk_refuse(l, "not lowered yet"); }
