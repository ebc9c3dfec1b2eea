#version 450
// The fused loss head (kernels/cpu/linear_loss.c): linear_cross_entropy(x, weight, labels [, bias]),
// the mean cross-entropy of the logits x weight^T (or x weight) plus the bias, and its gradient
// (dx, dweight [, dbias]), chunk_rows rows at a time so the [rows, V] logits never exist. The
// products are matmul.comp's GEMMs on row blocks (backends/vulkan/vk_lower_linear_loss.c); this
// shader does the rest, on the step's workspace (core/linear_loss.h, tf_linear_loss_vulkan_*):
// one chunk of logits, then every row's loss term, then the count of the labels that count.
//
// Modes (the lowering's order: COUNT once; per chunk the logits GEMM, ROWS, then for a gradient the
// dx GEMM (or its slices and DX_SUM), the dweight GEMM and DBIAS; LOSS once after the last chunk):
//   COUNT  one workgroup: the labels that count (not ignore_index, inside [0, V)), as a u32 word.
//   ROWS   a workgroup per row of the chunk: adds the bias, takes the row's log sum exp (max and
//          compensated sum in a fixed tree), writes its loss term (want_loss), then turns the row's
//          logits in place into (softmax - onehot) dloss / count (want_grad; 0 where the label does
//          not count), as kernels/cpu/xent_row.h computes it.
//   DBIAS  an invocation per class: dbias[v] (+)= the chunk's dlogits[., v], rows in order.
//   LOSS   one workgroup: the terms of every row in a fixed order over the count (0 when none).
//   DX_SUM an invocation per element of the chunk's dx rows: (add: dx, the left-over classes'
//          product, else 0) plus the slices' partial products in slice order
//          (core/linear_loss.h, tf_linear_loss_vulkan_dx_slices).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Labels { int labels[]; };
layout(std430, set = 0, binding = 1) readonly buffer DLoss { ELEMENT dloss[]; };
layout(std430, set = 0, binding = 2) buffer Work { float work[]; };
layout(std430, set = 0, binding = 3) readonly buffer Bias { ELEMENT bias[]; };
layout(std430, set = 0, binding = 4) buffer Loss { ELEMENT loss_out[]; };
layout(std430, set = 0, binding = 5) buffer DOut { ELEMENT dout[]; }; // dbias, or DX_SUM's dx; read too when adding

#define COUNT 0u
#define ROWS 1u
#define DBIAS 2u
#define LOSS 3u
#define DX_SUM 4u

layout(push_constant) uniform Push {
  uint rows;       // of the whole step
  uint classes;
  int ignore_low;  // ignore_index, as two words (it is an int64)
  int ignore_high;
  uint mode;
  uint first;      // the chunk's first row
  uint chunk;      // its rows
  uint terms_at;   // word offsets in the workspace (the chunk's logits start at 0)
  uint count_at;
  uint has_bias;
  uint want_loss;
  uint want_grad;
  uint add;        // DBIAS: add to dbias (a later chunk, or an accumulating step); DX_SUM: to dx
  uint wide_labels; // 1: the labels are i64, (low, high) pairs of ints
  uint features;    // DX_SUM: dx's row length
  uint slices;      // DX_SUM: the partial products, each chunk x features words
  uint partials_at; // DX_SUM: the first one's word offset in the workspace
} pc;

#include "linear_loss_rows.glsl"

// Row `r` of the chunk (every invocation of the workgroup takes part: barriers inside).
void row_pass(uint r) {
  uint t = gl_LocalInvocationID.x, base = r * pc.classes;
  int label = label_of(pc.first + r);
  float best = uintBitsToFloat(0xFF800000u); // -infinity
  for (uint v = t; v < pc.classes; v += 256u) {
    float logit = work[base + v];
    if (pc.has_bias != 0u) { // the product first, then the bias, as the unfused matmul -> add
      logit += TO_F32(bias[v]);
      work[base + v] = logit;
    }
    best = max(best, logit);
  }
  // The biased logits are read by other invocations below (the label's by invocation 0): buffer
  // writes are made visible to them only by a memory barrier (barrier() orders shared memory alone).
  memoryBarrierBuffer();
  best = tree_max(best);
  float sum = 0.0, carry = 0.0;
  for (uint v = t; v < pc.classes; v += 256u)
    kahan_add(sum, carry, exp(work[base + v] - best));
  float total = tree_sum(sum - carry), lse = log(total) + best;
  if (pc.want_loss != 0u && t == 0u)
    work[pc.terms_at + pc.first + r] = label >= 0 ? lse - work[base + uint(label)] : 0.0;
  if (pc.want_grad == 0u)
    return;
  memoryBarrierBuffer();
  barrier(); // the term read the label's logit before it is overwritten
  uint n = counted();
  float scale = n > 0u ? TO_F32(dloss[0]) / float(n) : 0.0;
  for (uint v = t; v < pc.classes; v += 256u) {
    if (label < 0) { // a row that does not count has no gradient, whatever its logits hold
      work[base + v] = 0.0;
      continue;
    }
    // as kernels/cpu/xent_row.h: exp(x - max) / sum x scale, less scale at the label
    precise float d = exp(work[base + v] - best) / total * scale; // no fused d - scale at the label
    work[base + v] = uint(label) == v ? d - scale : d;
  }
}

void main() {
  if (pc.mode == COUNT) {
    count_labels();
    return;
  }
  if (pc.mode == ROWS) {
    for (uint r = gl_WorkGroupID.x; r < pc.chunk; r += gl_NumWorkGroups.x)
      row_pass(r); // uniform per workgroup: its barriers are reached by all
    return;
  }
  if (pc.mode == DX_SUM) {
    uint count = pc.chunk * pc.features, at = pc.first * pc.features;
    for (uint i = gl_GlobalInvocationID.x; i < count; i += grid_size()) {
      float sum = pc.add != 0u ? TO_F32(dout[at + i]) : 0.0;
      for (uint s = 0u; s < pc.slices; s++)
        sum += work[pc.partials_at + s * count + i];
      dout[at + i] = FROM_F32(sum);
    }
    return;
  }
  if (pc.mode == DBIAS) {
    for (uint v = gl_GlobalInvocationID.x; v < pc.classes; v += grid_size()) {
      float sum = pc.add != 0u ? TO_F32(dout[v]) : 0.0;
      for (uint r = 0u; r < pc.chunk; r++)
        sum += work[r * pc.classes + v];
      dout[v] = FROM_F32(sum);
    }
    return;
  }
  // LOSS
  float sum = 0.0, carry = 0.0;
  for (uint row = gl_LocalInvocationID.x; row < pc.rows; row += 256u)
    kahan_add(sum, carry, work[pc.terms_at + row]);
  float total = tree_sum(sum - carry);
  uint n = counted();
  if (gl_LocalInvocationID.x == 0u)
    loss_out[0] = FROM_F32(n > 0u ? total / float(n) : 0.0);
}
