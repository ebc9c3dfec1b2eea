// Clusters of 8 lanes for the subgroup variants (matmul.comp, softmax.comp, loss.comp,
// attention.comp; see shaders/README.md): the lane and cluster numbers and the butterflies. Include in
// a shader compiled with GL_KHR_shader_subgroup_basic and _shuffle; row walks are in cluster_rows.glsl.
//
// Every loop around a shuffle runs to the same bound on all lanes of its cluster (loads and stores
// are guarded instead), so the whole cluster reaches each shuffle together.
#ifndef TIGHTFIT_CLUSTER_GLSL
#define TIGHTFIT_CLUSTER_GLSL
#define CLUSTER 8u // lanes per row

uint cluster_lane() { return gl_SubgroupInvocationID & 7u; }

// Clusters are numbered through the subgroups, not by local index: a cluster's lanes must share a
// subgroup whatever the mapping of invocations to subgroups.
uint cluster_number() { return gl_SubgroupID * (gl_SubgroupSize >> 3) + (gl_SubgroupInvocationID >> 3); }


// The cluster's max. Masks 4, 2, 1 stay inside the 8-lane cluster on any power-of-two subgroup of
// at least 8 lanes; only shuffles are needed (lavapipe lacks the clustered operations).
float cluster_max(float best) {
  best = max(best, subgroupShuffleXor(best, 4u));
  best = max(best, subgroupShuffleXor(best, 2u));
  return max(best, subgroupShuffleXor(best, 1u));
}

// Adds the partner lane's compensated sum (sum - carry) to this lane's. The rounding error of the
// two sums' addition is recovered exactly (two-sum), so both partners end with the same bits and
// the carries keep what each lane's Kahan sum kept.
void combine_sums(inout float sum, inout float carry, uint mask) {
  float other = subgroupShuffleXor(sum, mask), other_carry = subgroupShuffleXor(carry, mask);
  precise float total = sum + other;
  precise float part = total - sum;
  precise float error = (sum - (total - part)) + (other - part);
  precise float carried = (carry + other_carry) - error;
  sum = total;
  carry = carried;
}

// The cluster's total of the lanes' compensated sums; every lane gets the same value.
float cluster_sum(float sum, float carry) {
  combine_sums(sum, carry, 4u);
  combine_sums(sum, carry, 2u);
  combine_sums(sum, carry, 1u);
  return sum - carry;
}

// The cluster's total of the lanes' plain (uncompensated) partial sums, added pairwise: lane l
// and lane l ^ m add the same two values, so all 8 lanes end with the same bits and a branch on
// the result stays cluster-uniform.
float cluster_add(float part) {
  part += subgroupShuffleXor(part, 4u);
  part += subgroupShuffleXor(part, 2u);
  return part + subgroupShuffleXor(part, 1u);
}

// `value` as lane `lane` (< CLUSTER) of this lane's cluster holds it.
float cluster_read(float value, uint lane) { return subgroupShuffle(value, (gl_SubgroupInvocationID & ~7u) | lane); }
uint cluster_read_bits(uint value, uint lane) { return subgroupShuffle(value, (gl_SubgroupInvocationID & ~7u) | lane); }
#endif
