#version 450
// The fused loss head on f16/bf16 data (compiled with -DELEMENT_F16 or -DELEMENT_BF16 only): x, the
// weight (and the bias) and the gradients dx, dweight (and dbias) in the half type, labels, an f32
// loss and dloss. As the CPU's half kernel (kernels/cpu/linear_loss_half.c), the lowering
// (backends/vulkan/vk_lower_linear_loss_half.c) walks the classes in spans outside and the row
// chunks inside, so no f32 copy of the whole weight or of its gradient exists: a span of the weight
// and a chunk of x are widened into the workspace (WIDEN), the products are matmul.comp's f32 GEMMs
// there, a span of dweight is summed over every chunk in f32 and rounded once into its half output
// (NARROW), and dx is summed over the spans in f32 and rounded once at the end. The softmax needs
// each row's log sum exp over all classes before any gradient: a first pass over the spans keeps per
// row the running max, the sum of exp(logit - max) (rescaled when the max grows) and the label's
// logit (STATS); the loss comes from them (LOSS), and the gradient pass computes each chunk's logits
// again (GRAD, DBIAS). Workspace offsets: core/linear_loss.h, tf_linear_loss_vulkan_half_workspace_of.
//
// Modes:
//   COUNT   one workgroup: the labels that count, as a u32 word at count_at.
//   WIDEN   an invocation per element: work[dest_offset + r dest_stride + c] = the source's element
//           at source_offset + r source_stride + c (r < copy_rows, c < copy_cols), exactly.
//   NARROW  an invocation per element: the destination's element at dest_offset + r dest_stride + c
//           = work[source_offset + r source_stride + c] rounded (0 when no label counts).
//   STATS   a workgroup per row of the chunk: adds the bias (source) to the span's logits, then
//           updates the row's statistics (max, sum, label logit) at statistics_at + 3 row.
//   GRAD    a workgroup per row of the chunk: the span's logits, in place, become
//           (softmax - onehot) dloss / count (0 on a row whose label does not count).
//   DBIAS   an invocation per class of the span: work[dbias_at + v] (+)= the chunk's dlogits[., v].
//   LOSS    one workgroup: the mean over the rows that count of log(sum) + max - label logit.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if !defined(ELEMENT_F16) && !defined(ELEMENT_BF16)
#error "linear_loss_half.comp is compiled with -DELEMENT_F16 or -DELEMENT_BF16"
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Labels { int labels[]; };
layout(std430, set = 0, binding = 1) readonly buffer DLoss { float dloss[]; };
layout(std430, set = 0, binding = 2) buffer Work { float work[]; };
layout(std430, set = 0, binding = 3) readonly buffer Source { ELEMENT source[]; }; // x, weight or bias
layout(std430, set = 0, binding = 4) writeonly buffer Loss { float loss_out[]; };
layout(std430, set = 0, binding = 5) writeonly buffer Dest { ELEMENT dest[]; }; // dx, dweight or dbias

#define COUNT 0u
#define WIDEN 1u
#define NARROW 2u
#define STATS 3u
#define GRAD 4u
#define DBIAS 5u
#define LOSS 6u

layout(push_constant) uniform Push {
  uint rows; // of the whole step
  uint classes;
  int ignore_low; // ignore_index, as two words (it is an int64)
  int ignore_high;
  uint wide_labels; // 1: the labels are i64, (low, high) pairs of ints
  uint mode;
  uint first;       // STATS, GRAD: the chunk's first row; its rows
  uint chunk;
  uint first_class; // STATS, GRAD, DBIAS: the span's first class; its classes (the logits' row stride)
  uint span;
  uint has_bias;
  uint add;         // DBIAS: add to the span's sums (a later chunk)
  uint statistics_at; // word offsets in the workspace
  uint logits_at;
  uint dbias_at;
  uint count_at;
  uint copy_rows;   // WIDEN, NARROW: the rectangle and where it lies in each buffer
  uint copy_cols;
  uint source_offset;
  uint source_stride;
  uint dest_offset;
  uint dest_stride;
} pc;

#include "linear_loss_rows.glsl"

// WIDEN and NARROW: element i of the copy_rows x copy_cols rectangle.
void copy_elements(bool widen) {
  uint n = pc.copy_rows * pc.copy_cols;
  bool none = !widen && counted() == 0u;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += grid_size()) {
    uint r = i / pc.copy_cols, c = i - r * pc.copy_cols;
    uint from = pc.source_offset + r * pc.source_stride + c, to = pc.dest_offset + r * pc.dest_stride + c;
    if (widen)
      work[to] = TO_F32(source[from]);
    else
      dest[to] = FROM_F32(none ? 0.0 : work[from]);
  }
}

// Logit v of chunk row r in this span, the bias added (the product first, as the unfused matmul -> add).
float logit(uint r, uint v) {
  float value = work[pc.logits_at + r * pc.span + v];
  return pc.has_bias != 0u ? value + TO_F32(source[pc.first_class + v]) : value;
}

// STATS for chunk row r (every invocation of the workgroup takes part: barriers inside).
void row_statistics(uint r) {
  uint t = gl_LocalInvocationID.x, row = pc.first + r, at = pc.statistics_at + 3u * row;
  float best = uintBitsToFloat(0xFF800000u); // -infinity
  for (uint v = t; v < pc.span; v += 256u)
    best = max(best, logit(r, v));
  best = tree_max(best);
  float old = work[at]; // the running max of the spans before (unused on the first)
  if (pc.first_class > 0u)
    best = max(best, old);
  float sum = 0.0, carry = 0.0;
  for (uint v = t; v < pc.span; v += 256u)
    kahan_add(sum, carry, exp(logit(r, v) - best));
  memoryBarrierBuffer(); // with tree_sum's barrier: every invocation read work[at] before invocation 0 writes it
  float total = tree_sum(sum - carry);
  if (t != 0u)
    return;
  work[at + 1u] = pc.first_class == 0u ? total : work[at + 1u] * exp(old - best) + total;
  work[at] = best;
  int label = label_of(row);
  if (label >= 0 && uint(label) >= pc.first_class && uint(label) - pc.first_class < pc.span)
    work[at + 2u] = logit(r, uint(label) - pc.first_class);
}

// GRAD for chunk row r: as kernels/cpu/linear_loss_half.c, exp(logit - lse) scale, less scale at the label.
void row_gradient(uint r) {
  uint row = pc.first + r, base = pc.logits_at + r * pc.span, at = pc.statistics_at + 3u * row;
  int label = label_of(row);
  uint n = counted();
  float scale = n > 0u ? dloss[0] / float(n) : 0.0, lse = work[at] + log(work[at + 1u]);
  for (uint v = gl_LocalInvocationID.x; v < pc.span; v += 256u) {
    if (label < 0) { // a row that does not count has no gradient, whatever its logits hold
      work[base + v] = 0.0;
      continue;
    }
    float d = exp(logit(r, v) - lse) * scale;
    work[base + v] = uint(label) == pc.first_class + v ? d - scale : d;
  }
}

void main() {
  if (pc.mode == COUNT) {
    count_labels();
    return;
  }
  if (pc.mode == WIDEN || pc.mode == NARROW) {
    copy_elements(pc.mode == WIDEN);
    return;
  }
  if (pc.mode == STATS || pc.mode == GRAD) {
    for (uint r = gl_WorkGroupID.x; r < pc.chunk; r += gl_NumWorkGroups.x) {
      if (pc.mode == STATS)
        row_statistics(r); // uniform per workgroup: its barriers are reached by all
      else
        row_gradient(r);
    }
    return;
  }
  if (pc.mode == DBIAS) {
    for (uint v = gl_GlobalInvocationID.x; v < pc.span; v += grid_size()) {
      float sum = pc.add != 0u ? work[pc.dbias_at + v] : 0.0;
      for (uint r = 0u; r < pc.chunk; r++)
        sum += work[pc.logits_at + r * pc.span + v];
      work[pc.dbias_at + v] = sum;
    }
    return;
  }
  // LOSS
  float sum = 0.0, carry = 0.0;
  for (uint row = gl_LocalInvocationID.x; row < pc.rows; row += 256u) {
    uint at = pc.statistics_at + 3u * row;
    if (label_of(row) >= 0)
      kahan_add(sum, carry, log(work[at + 1u]) + (work[at] - work[at + 2u]));
  }
  float total = tree_sum(sum - carry);
  uint n = counted();
  if (gl_LocalInvocationID.x == 0u)
    loss_out[0] = n > 0u ? total / float(n) : 0.0;
}
