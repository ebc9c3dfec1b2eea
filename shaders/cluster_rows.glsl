// The row walks of the subgroup row shaders (softmax.comp, loss.comp): a cluster of 8 lanes per
// row, lane l taking classes l, l + 8, ... Include after the shader's `x` buffer and its push
// constants (`pc.classes`).
#include "cluster.glsl"

// The max over this lane's classes of the row at `base`, NaN skipped (the CPU's
// `v > best ? v : best`), started at -inf so that no NaN enters the butterfly (the max of non-NaN
// values does not depend on the order).
float lane_max(uint base) {
  float best = -1.0 / 0.0;
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER) {
    if (c0 + cluster_lane() < pc.classes) {
      float v = TO_F32(x[base + c0 + cluster_lane()]);
      best = v > best ? v : best;
    }
  }
  return best;
}

// The sum of exp(x - best) over the row at `base`, the same on every lane of the cluster.
float row_sum_of_exps(uint base, float best) {
  float sum = 0.0, carry = 0.0;
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER)
    if (c0 + cluster_lane() < pc.classes)
      kahan_add(sum, carry, exp(TO_F32(x[base + c0 + cluster_lane()]) - best));
  return cluster_sum(sum, carry);
}
