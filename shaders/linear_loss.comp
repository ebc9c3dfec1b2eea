#version 450
// The fused loss head (kernels/cpu/linear_loss.c): linear_cross_entropy(x, weight, labels [, bias]),
// the mean cross-entropy of the logits x weight^T ([V, d] weight, TRANSPOSED set) or x weight
// ([d, V]) plus the bias (has_bias), and its gradient (dx, dweight [, dbias]), without the [rows, V]
// logits: every logit is recomputed as a dot product where it is needed, and no workspace is used.
// A plain first version: correct, not fast (no tiling; a GPU deserves the chunked products of the
// CPU and CUDA kernels).
//
// Modes (one dispatch each; the gradient is three, four with a bias, in order STATS, DWEIGHT,
// DBIAS, DX):
//   LOSS      one workgroup: each invocation takes rows t, t + 256, ..., the loss is their terms'
//             compensated sums in a fixed tree (deterministic), divided by the labels that count.
//   STATS     an invocation per row: log sum exp of the row's logits, parked in dx[row * d] (dx is
//             written last, by DX, which does not read it).
//   DWEIGHT   an invocation per dweight element (class v, feature k): sum over the rows that count
//             of (softmax - onehot)[row, v] scale x[row, k], scale = dloss / count.
//   DBIAS     an invocation per class v: sum over the rows that count of (softmax - onehot)[row, v]
//             scale, the log sum exp read from dx as DWEIGHT reads it.
//   DX        an invocation per dx element (row, feature k): the row's log sum exp again, then the
//             sum over the classes of (softmax - onehot)[row, v] scale weight[v, k].
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { ELEMENT w[]; };
layout(std430, set = 0, binding = 2) readonly buffer Labels { int labels[]; };
layout(std430, set = 0, binding = 3) readonly buffer DLoss { ELEMENT dloss[]; };
layout(std430, set = 0, binding = 4) buffer Out { ELEMENT out_data[]; };   // the loss, or dx
layout(std430, set = 0, binding = 5) buffer DW { ELEMENT dw[]; };  // read too when accumulating
layout(std430, set = 0, binding = 6) readonly buffer Bias { ELEMENT bias[]; };
layout(std430, set = 0, binding = 7) buffer DBias { ELEMENT dbias[]; };

#define LOSS 0u
#define STATS 1u
#define DWEIGHT 2u
#define DX 3u
#define DBIAS 4u

layout(push_constant) uniform Push {
  uint rows;
  uint features;
  uint classes;
  uint transposed;  // weight is [V, d]
  int ignore_low;   // ignore_index, as two words (it is an int64)
  int ignore_high;
  uint mode;
  uint has_bias;    // bias (binding 6) is added to every row of logits; DBIAS writes binding 7
  uint accumulate;  // DWEIGHT and DBIAS add to what bindings 5 and 7 hold (k > 1 micro-batches)
} pc;

shared float partial[256];
shared uint tally[256];

// The label of `row`, or -1 when it does not count.
int label_of(uint row) {
  int label = labels[row];
  bool ignored = pc.ignore_low == label && pc.ignore_high == (label < 0 ? -1 : 0);
  return ignored || label < 0 || uint(label) >= pc.classes ? -1 : label;
}

float weight_at(uint v, uint k) {
  return TO_F32(w[pc.transposed != 0u ? v * pc.features + k : k * pc.classes + v]);
}

// The product first, then the bias, as the unfused matmul -> add.
float logit(uint row, uint v) {
  float sum = 0.0;
  for (uint k = 0u; k < pc.features; k++)
    sum += TO_F32(x[row * pc.features + k]) * weight_at(v, k);
  return pc.has_bias != 0u ? sum + TO_F32(bias[v]) : sum;
}

float log_sum_exp(uint row) {
  float best = logit(row, 0u);
  for (uint v = 1u; v < pc.classes; v++)
    best = max(best, logit(row, v));
  float sum = 0.0, carry = 0.0;
  for (uint v = 0u; v < pc.classes; v++)
    kahan_add(sum, carry, exp(logit(row, v) - best));
  return log(sum) + best;
}

uint counted_rows() {
  uint n = 0u;
  for (uint row = 0u; row < pc.rows; row++)
    n += label_of(row) >= 0 ? 1u : 0u;
  return n;
}

// The sum of every invocation's value in a fixed tree order.
float tree(float value) {
  uint t = gl_LocalInvocationID.x;
  partial[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  return partial[0];
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
  return tally[0];
}

void loss_value() {
  uint t = gl_LocalInvocationID.x;
  float sum = 0.0, carry = 0.0;
  uint mine = 0u;
  for (uint row = t; row < pc.rows; row += 256u) {
    int label = label_of(row);
    if (label >= 0) {
      kahan_add(sum, carry, log_sum_exp(row) - logit(row, uint(label)));
      mine++;
    }
  }
  float total = tree(sum - carry);
  uint n = tree_count(mine);
  if (t == 0u)
    out_data[0] = FROM_F32(n > 0u ? total / float(n) : 0.0);
}

float scale_of() {
  uint n = counted_rows();
  return n > 0u ? TO_F32(dloss[0]) / float(n) : 0.0;
}

void main() {
  if (pc.mode == LOSS) {
    loss_value();  // one workgroup; no early return before its barriers
    return;
  }
  if (pc.mode == STATS) {
    for (uint row = gl_GlobalInvocationID.x; row < pc.rows; row += grid_size())
      if (label_of(row) >= 0)
        out_data[row * pc.features] = FROM_F32(log_sum_exp(row));
    return;
  }
  float scale = scale_of();
  if (pc.mode == DWEIGHT) {
    uint n = pc.classes * pc.features;
    for (uint e = gl_GlobalInvocationID.x; e < n; e += grid_size()) {
      uint v = pc.transposed != 0u ? e / pc.features : e % pc.classes;
      uint k = pc.transposed != 0u ? e % pc.features : e / pc.classes;
      float sum = 0.0;
      for (uint row = 0u; row < pc.rows; row++) {
        int label = label_of(row);
        if (label < 0)
          continue;
        float p = exp(logit(row, v) - TO_F32(out_data[row * pc.features]));
        sum += ((uint(label) == v ? p - 1.0 : p) * scale) * TO_F32(x[row * pc.features + k]);
      }
      dw[e] = FROM_F32(pc.accumulate != 0u ? TO_F32(dw[e]) + sum : sum);
    }
    return;
  }
  if (pc.mode == DBIAS) {
    for (uint v = gl_GlobalInvocationID.x; v < pc.classes; v += grid_size()) {
      float sum = 0.0;
      for (uint row = 0u; row < pc.rows; row++) {
        int label = label_of(row);
        if (label < 0)
          continue;
        float p = exp(logit(row, v) - TO_F32(out_data[row * pc.features]));
        sum += (uint(label) == v ? p - 1.0 : p) * scale;
      }
      dbias[v] = FROM_F32(pc.accumulate != 0u ? TO_F32(dbias[v]) + sum : sum);
    }
    return;
  }
  uint n = pc.rows * pc.features;  // DX
  for (uint e = gl_GlobalInvocationID.x; e < n; e += grid_size()) {
    uint row = e / pc.features, k = e % pc.features;
    int label = label_of(row);
    float sum = 0.0;
    if (label >= 0) {
      float lse = log_sum_exp(row);
      for (uint v = 0u; v < pc.classes; v++) {
        float p = exp(logit(row, v) - lse);
        sum += ((uint(label) == v ? p - 1.0 : p) * scale) * weight_at(v, k);
      }
    }
    out_data[e] = FROM_F32(sum);
  }
}
