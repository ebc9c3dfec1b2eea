#version 450
// The losses and their gradients (kernels/cpu/loss.c): cross_entropy over the last axis (mean over
// labels that count: not ignore_index, inside [0, classes)), mse and bce_with_logits (means over
// every element). A loss is one workgroup's compensated tree sum, so it is deterministic. The
// gradients are elementwise; cross_entropy_grad's invocations each own a row, and every workgroup
// first counts the labels that count (the mean's divisor) itself, so no workspace is needed.
//
// The subgroup variant (-DSUBGROUP=1) gives each cross_entropy row to a cluster of 8 consecutive
// subgroup lanes instead of one invocation: lane l reads classes l, l + 8, ... (coalesced), keeps
// its own max and compensated sum, and the cluster combines them with shuffles (xor 4, 2, 1). The
// loss is still one workgroup's: its 32 clusters take rows c, c + 32, ..., and their sums meet in
// the same tree, placed by cluster number (a fixed order). cross_entropy_grad: 32 rows per
// workgroup. mse and bce_with_logits are elementwise and unchanged.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };          // logits or predictions
layout(std430, set = 0, binding = 1) readonly buffer Target { ELEMENT target[]; }; // mse, bce
// -DLOSS_HALF (with -DELEMENT_F16 or -DELEMENT_BF16): the half kernels of a loss on f16/bf16 data
// (the Vulkan target's, targets/target.c): x, the target and the gradient in the half type, the
// loss and dloss f32, as the losses' shape rules type them. The loss is then written as the f32 it
// is (binding 3 read as floats), not rounded.
#ifdef LOSS_HALF
#if !defined(ELEMENT_F16) && !defined(ELEMENT_BF16)
#error "LOSS_HALF needs ELEMENT_F16 or ELEMENT_BF16"
#endif
layout(std430, set = 0, binding = 2) readonly buffer DLoss { float dloss[]; };     // gradients
layout(std430, set = 0, binding = 3) writeonly buffer OutLoss { float out_loss[]; }; // the loss
#define DLOSS_VALUE dloss[0]
#define STORE_LOSS(value) out_loss[0] = (value)
#else
layout(std430, set = 0, binding = 2) readonly buffer DLoss { ELEMENT dloss[]; };   // gradients
#define DLOSS_VALUE TO_F32(dloss[0])
#define STORE_LOSS(value) out_data[0] = FROM_F32(value)
#endif
layout(std430, set = 0, binding = 3) writeonly buffer Out { ELEMENT out_data[]; };
layout(std430, set = 0, binding = 4) readonly buffer Labels { int labels[]; };     // cross_entropy

#define CROSS_ENTROPY 0
#define CROSS_ENTROPY_GRAD 1
#define MSE 2
#define MSE_GRAD 3
#define BCE 4
#define BCE_GRAD 5

layout(push_constant) uniform Push {
  uint count;         // rows (cross_entropy) or elements
  uint classes;
  int ignore_low;     // ignore_index, as two words (it is an int64)
  int ignore_high;
  uint mode;
  uint wide_labels;   // 1: the labels are i64, (low, high) pairs of ints
} pc;

shared float partial[256];
shared uint tally[256];

// The label of `row`, or -1 when it does not count (ignore_index, or outside [0, classes): an i64
// label that does not fit in 32 bits too).
int label_of(uint row) {
  int label = pc.wide_labels != 0u ? labels[2u * row] : labels[row];
  int sign = label < 0 ? -1 : 0, high = pc.wide_labels != 0u ? labels[2u * row + 1u] : sign;
  bool ignored = pc.ignore_low == label && pc.ignore_high == high;
  return ignored || high != sign || label < 0 || uint(label) >= pc.classes ? -1 : label;
}

float log1p_of(float e) {
  float u = 1.0 + e;
  return u == 1.0 ? e : log(u) * e / (u - 1.0);
}

float term(uint i) {
  float p = TO_F32(x[i]);
  if (pc.mode == MSE) {
    float d = p - TO_F32(target[i]);
    return d * d;
  }
  if (pc.mode == BCE)
    return max(p, 0.0) - p * TO_F32(target[i]) + log1p_of(exp(-abs(p)));
  int label = label_of(i);
  if (label < 0)
    return 0.0;
  uint base = i * pc.classes;
  float best = TO_F32(x[base]);
  for (uint c = 1u; c < pc.classes; c++)
    best = max(best, TO_F32(x[base + c]));
  float sum = 0.0, carry = 0.0;
  for (uint c = 0u; c < pc.classes; c++)
    kahan_add(sum, carry, exp(TO_F32(x[base + c]) - best));
  return log(sum) + (best - TO_F32(x[base + uint(label)]));
}

#if SUBGROUP
#define CLUSTERS 32u  // per workgroup: 256 / CLUSTER
#include "cluster_rows.glsl"

// -log softmax(row)[label], the same on every lane of the cluster. The max keeps the CPU forward's
// NaN rule (it starts from the first class): NaN exactly when the first class is.
float cluster_row_loss(uint row, uint label) {
  uint base = row * pc.classes;
  float best = cluster_max(lane_max(base)), first = TO_F32(x[base]);
  best = isnan(first) ? first : best;
  return log(row_sum_of_exps(base, best)) + (best - TO_F32(x[base + label]));
}

// This cluster's compensated sum of its rows' losses (rows c, c + 32, ...), from lane 0; 0 from the
// other lanes, so the tree counts each cluster once.
float cluster_loss_sum() {
  float sum = 0.0, carry = 0.0;
  for (uint row = cluster_number(); row < pc.count; row += CLUSTERS) {
    int label = label_of(row);
    if (label >= 0)
      kahan_add(sum, carry, cluster_row_loss(row, uint(label)));
  }
  return cluster_lane() == 0u ? sum - carry : 0.0;
}

void zero_row(uint base) {
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER)
    if (c0 + cluster_lane() < pc.classes)
      out_data[base + c0 + cluster_lane()] = FROM_F32(0.0);
}

// (softmax(row) - onehot(label)) scale on a row that counts. The max skips every NaN, as the CPU
// gradient's does (it starts from -inf).
void counted_row_gradient(uint base, uint label, float scale) {
  float best = cluster_max(lane_max(base)), sum = row_sum_of_exps(base, best);
  for (uint c0 = 0u; c0 < pc.classes; c0 += CLUSTER) {
    uint c = c0 + cluster_lane();
    if (c < pc.classes) {
      float d = exp(TO_F32(x[base + c]) - best) / sum * scale;
      out_data[base + c] = FROM_F32(c == label ? d - scale : d);
    }
  }
}

// No early returns here either (the shader has barriers; see main).
void cross_entropy_gradient_row(uint row, float scale) {
  int label = label_of(row);
  if (label < 0)
    zero_row(row * pc.classes);
  else
    counted_row_gradient(row * pc.classes, uint(label), scale);
}
#endif

// The sum of every invocation's value, each placed at `slot` (a permutation of 0..255), in a fixed
// tree order.
float tree(uint slot, float value) {
  uint t = gl_LocalInvocationID.x;
  partial[slot] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  float result = partial[0];
  barrier();
  return result;
}

uint tree_count(uint value) {
  uint t = gl_LocalInvocationID.x;
  tally[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      tally[t] += tally[t + s];
    barrier();
  }
  uint result = tally[0];
  barrier();
  return result;
}

uint counted_labels() {
  uint mine = 0u;
  for (uint row = gl_LocalInvocationID.x; row < pc.count; row += 256u)
    mine += label_of(row) >= 0 ? 1u : 0u;
  return tree_count(mine);
}

// One workgroup: the mean of the per-element (per-row) terms.
void loss_value() {
  uint t = gl_LocalInvocationID.x;
  float total;
#if SUBGROUP
  // Slots by cluster number: which rows a partial sum holds decides where it enters the tree.
  if (pc.mode == CROSS_ENTROPY)
    total = tree(cluster_number() * CLUSTER + cluster_lane(), cluster_loss_sum());
  else
#endif
  {
    float sum = 0.0, carry = 0.0;
    for (uint i = t; i < pc.count; i += 256u)
      kahan_add(sum, carry, term(i));
    total = tree(t, sum);
  }
  uint n = pc.mode == CROSS_ENTROPY ? counted_labels() : pc.count;
  if (t == 0u)
    STORE_LOSS(n > 0u ? total / float(n) : 0.0);
}

void pair_gradient() {
  float upstream = DLOSS_VALUE;
  float scale = pc.count > 0u ? (pc.mode == MSE_GRAD ? 2.0 : 1.0) * upstream / float(pc.count) : 0.0;
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    float p = TO_F32(x[i]), y = TO_F32(target[i]);
    out_data[i] = FROM_F32(pc.mode == MSE_GRAD ? scale * (p - y) : scale * (1.0 / (1.0 + exp(-p)) - y));
  }
}

void cross_entropy_gradient() {
  uint n = counted_labels();
  float scale = n > 0u ? DLOSS_VALUE / float(n) : 0.0;
#if SUBGROUP
  // The loop is workgroup-uniform and the row test cluster-uniform: shuffles see whole clusters.
  uint cluster = cluster_number(), stride = gl_NumWorkGroups.x * CLUSTERS;
  for (uint first = gl_WorkGroupID.x * CLUSTERS; first < pc.count; first += stride) {
    uint row = first + cluster;
    if (row < pc.count)
      cross_entropy_gradient_row(row, scale);
  }
#else
  for (uint row = gl_GlobalInvocationID.x; row < pc.count; row += grid_size()) {
    uint base = row * pc.classes;
    int label = label_of(row);
    if (label < 0) {
      for (uint c = 0u; c < pc.classes; c++)
        out_data[base + c] = FROM_F32(0.0);
      continue;
    }
    float best = -1.0 / 0.0;
    for (uint c = 0u; c < pc.classes; c++)
      best = max(best, TO_F32(x[base + c]));
    float sum = 0.0, carry = 0.0;
    for (uint c = 0u; c < pc.classes; c++)
      kahan_add(sum, carry, exp(TO_F32(x[base + c]) - best));
    for (uint c = 0u; c < pc.classes; c++) {
      float d = exp(TO_F32(x[base + c]) - best) / sum * scale;
      out_data[base + c] = FROM_F32(c == uint(label) ? d - scale : d);
    }
  }
#endif
}

// No early return from main in shaders with barriers: lavapipe runs them as coroutines and leaks a
// coroutine frame when main returns early.
void main() {
  if (pc.mode == CROSS_ENTROPY || pc.mode == MSE || pc.mode == BCE)
    loss_value();
  else if (pc.mode == MSE_GRAD || pc.mode == BCE_GRAD)
    pair_gradient();
  else
    cross_entropy_gradient();
}
