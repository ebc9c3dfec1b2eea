#version 450
// The CTC loss and its gradient (kernels/cpu/loss_ctc.c, the reference: what is clamped, skipped
// and how impossible alignments count is said there), on f32 logits, in the workspace core/ctc.h
// lays out (f32 words). One module, five passes (push constant `mode`), each its own dispatch:
//   FRAMES  an invocation per (n, t): the frame's log-sum-exp over its classes;
//   ALPHA   a workgroup per sequence, invocations over the 2S + 1 extended positions, a barrier per
//           frame: log alpha, then the sequence's loss;
//   BETA    the same, backwards: log beta (the gradient only);
//   FINISH  one invocation: the mean over the batch of each loss / its target length, a
//           compensated sum in sequence order (deterministic);
//   GRAD    an invocation per logit: dlogits.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, set = 0, binding = 1) readonly buffer Labels { int labels[]; };   // i32, or i64 as (low, high)
layout(std430, set = 0, binding = 2) readonly buffer Lengths { int lengths[]; }; // the same; unread without
layout(std430, set = 0, binding = 3) readonly buffer DLoss { float dloss[]; };   // GRAD
layout(std430, set = 0, binding = 4) buffer Work { float work[]; };
layout(std430, set = 0, binding = 5) writeonly buffer Out { float out_data[]; }; // the loss or dlogits

#define FRAMES 0u
#define ALPHA 1u
#define BETA 2u
#define FINISH 3u
#define GRAD 4u

#define WIDE_LABELS 1u
#define HAS_LENGTHS 2u
#define WIDE_LENGTHS 4u
#define ZERO_INFINITY 8u

layout(push_constant) uniform Push {
  uint batch;
  uint frames;
  uint classes;
  uint label_length; // S
  uint blank;
  uint flags;
  uint mode;
} pc;

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

uint extended() { return 2u * pc.label_length + 1u; }
uint alpha_at(uint n) { return n * pc.frames * extended(); }
uint beta_at(uint n) { return (pc.batch + n) * pc.frames * extended(); }
uint lse_at(uint n) { return 2u * pc.batch * pc.frames * extended() + n * pc.frames; }
uint loss_at(uint n) { return 2u * pc.batch * pc.frames * extended() + pc.batch * pc.frames + n; }

// Label i: negative (the target's end), or its class; an i64 label that does not fit in 31 bits
// and is not negative counts as a class >= C.
bool label_negative(uint i) {
  return (pc.flags & WIDE_LABELS) != 0u ? labels[2u * i + 1u] < 0 : labels[i] < 0;
}
int label_class(uint i) { // -1: outside [0, C)
  int low = (pc.flags & WIDE_LABELS) != 0u ? labels[2u * i] : labels[i];
  int high = (pc.flags & WIDE_LABELS) != 0u ? labels[2u * i + 1u] : 0;
  return high != 0 || low < 0 || uint(low) >= pc.classes ? -1 : low;
}

uint target_length(uint n) {
  uint s = 0u;
  while (s < pc.label_length && !label_negative(n * pc.label_length + s))
    s++;
  return s;
}

uint input_length(uint n) { // clamped to [0, T]
  if ((pc.flags & HAS_LENGTHS) == 0u)
    return pc.frames;
  bool wide = (pc.flags & WIDE_LENGTHS) != 0u;
  int low = wide ? lengths[2u * n] : lengths[n], high = wide ? lengths[2u * n + 1u] : (low < 0 ? -1 : 0);
  if (high < 0)
    return 0u;
  if (high > 0 || low < 0 || uint(low) > pc.frames)
    return pc.frames;
  return uint(low);
}

int extended_class(uint n, uint s) {
  return s % 2u == 0u ? int(pc.blank) : label_class(n * pc.label_length + (s - 1u) / 2u);
}

float log1p_of(float e) {
  float u = 1.0 + e;
  return u == 1.0 ? e : log(u) * e / (u - 1.0);
}

float log_add(float a, float b) {
  if (a == NEG_INF)
    return b;
  if (b == NEG_INF)
    return a;
  float high = max(a, b), low = min(a, b);
  return high + log1p_of(exp(low - high));
}

bool may_skip(uint n, uint s, int c) { return s >= 2u && s % 2u == 1u && c != extended_class(n, s - 2u); }

float emission(uint n, uint t, int c) {
  return c < 0 ? NEG_INF : logits[(n * pc.frames + t) * pc.classes + uint(c)] - work[lse_at(n) + t];
}

void frames_pass() {
  uint rows = pc.batch * pc.frames, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint row = gl_GlobalInvocationID.x; row < rows; row += stride) {
    uint base = row * pc.classes;
    float high = logits[base];
    for (uint c = 1u; c < pc.classes; c++)
      high = max(high, logits[base + c]);
    float sum = 0.0;
    for (uint c = 0u; c < pc.classes; c++)
      sum += exp(logits[base + c] - high);
    uint n = row / pc.frames, t = row % pc.frames;
    work[lse_at(n) + t] = high + log(sum);
  }
}

void alpha_pass() {
  for (uint n = gl_WorkGroupID.x; n < pc.batch; n += gl_NumWorkGroups.x) { // uniform in the workgroup
    uint frames = input_length(n), used = 2u * target_length(n) + 1u, width = extended(), at = alpha_at(n);
    if (frames > 0u) {
      for (uint s = gl_LocalInvocationID.x; s < used; s += gl_WorkGroupSize.x)
        work[at + s] = s < 2u ? emission(n, 0u, extended_class(n, s)) : NEG_INF;
      memoryBarrierBuffer();
      barrier();
      for (uint t = 1u; t < frames; t++) {
        uint previous = at + (t - 1u) * width;
        for (uint s = gl_LocalInvocationID.x; s < used; s += gl_WorkGroupSize.x) {
          int c = extended_class(n, s);
          float sum = work[previous + s];
          if (s >= 1u)
            sum = log_add(sum, work[previous + s - 1u]);
          if (may_skip(n, s, c))
            sum = log_add(sum, work[previous + s - 2u]);
          work[at + t * width + s] = sum == NEG_INF ? NEG_INF : sum + emission(n, t, c);
        }
        memoryBarrierBuffer();
        barrier();
      }
    }
    if (gl_LocalInvocationID.x == 0u) {
      float loss;
      if (frames == 0u) {
        loss = used == 1u ? 0.0 : POS_INF;
      } else {
        uint last = at + (frames - 1u) * width;
        loss = -(used > 1u ? log_add(work[last + used - 1u], work[last + used - 2u]) : work[last]);
      }
      work[loss_at(n)] = (pc.flags & ZERO_INFINITY) != 0u && isinf(loss) ? 0.0 : loss;
    }
    memoryBarrierBuffer();
    barrier();
  }
}

void beta_pass() {
  for (uint n = gl_WorkGroupID.x; n < pc.batch; n += gl_NumWorkGroups.x) {
    uint frames = input_length(n), used = 2u * target_length(n) + 1u, width = extended(), at = beta_at(n);
    if (frames == 0u)
      continue;
    for (uint s = gl_LocalInvocationID.x; s < used; s += gl_WorkGroupSize.x)
      work[at + (frames - 1u) * width + s] = s + 2u >= used ? emission(n, frames - 1u, extended_class(n, s)) : NEG_INF;
    memoryBarrierBuffer();
    barrier();
    for (uint k = 1u; k < frames; k++) {
      uint t = frames - 1u - k, next = at + (t + 1u) * width;
      for (uint s = gl_LocalInvocationID.x; s < used; s += gl_WorkGroupSize.x) {
        float sum = work[next + s];
        if (s + 1u < used)
          sum = log_add(sum, work[next + s + 1u]);
        if (s + 2u < used && may_skip(n, s + 2u, extended_class(n, s + 2u)))
          sum = log_add(sum, work[next + s + 2u]);
        work[at + t * width + s] = sum == NEG_INF ? NEG_INF : sum + emission(n, t, extended_class(n, s));
      }
      memoryBarrierBuffer();
      barrier();
    }
  }
}

void finish_pass() {
  if (gl_GlobalInvocationID.x != 0u)
    return;
  float total = 0.0, compensation = 0.0;
  for (uint n = 0u; n < pc.batch; n++) {
    uint length = target_length(n);
    float term = work[loss_at(n)] / float(max(length, 1u)) - compensation;
    float sum = total + term;
    compensation = isinf(sum) ? 0.0 : (sum - total) - term;
    total = sum;
  }
  out_data[0] = pc.batch > 0u ? total / float(pc.batch) : 0.0;
}

void grad_pass() {
  uint count = pc.batch * pc.frames * pc.classes, stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < count; i += stride) {
    uint c = i % pc.classes, t = (i / pc.classes) % pc.frames, n = i / (pc.classes * pc.frames);
    float loss = work[loss_at(n)];
    if (t >= input_length(n) || ((pc.flags & ZERO_INFINITY) != 0u && isinf(loss))) {
      out_data[i] = 0.0;
      continue;
    }
    uint length = target_length(n), used = 2u * length + 1u, width = extended();
    uint a = alpha_at(n) + t * width, b = beta_at(n) + t * width;
    float both = NEG_INF;
    for (uint s = 0u; s < used; s++)
      if (extended_class(n, s) == int(c))
        both = log_add(both, work[a + s] + work[b + s]);
    float log_y = logits[i] - work[lse_at(n) + t];
    float scale = dloss[0] / float(pc.batch) / float(max(length, 1u));
    out_data[i] = (exp(log_y) - exp(both + loss - log_y)) * scale;
  }
}

void main() {
  if (pc.mode == FRAMES)
    frames_pass();
  else if (pc.mode == ALPHA)
    alpha_pass();
  else if (pc.mode == BETA)
    beta_pass();
  else if (pc.mode == FINISH)
    finish_pass();
  else
    grad_pass();
}
