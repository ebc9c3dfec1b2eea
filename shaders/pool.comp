#version 450
// max_pool2d, avg_pool2d and their gradients over NCHW planes (kernels/cpu/pool.c). Windows are
// clipped to the image; max takes the first maximum in row-major order (the first NaN wins), avg
// divides by the whole window (count_include_pad). The gradients gather: an invocation per input
// element adds, in (oh, ow) order as the CPU scatters them, the dy of every window that routes to it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { ELEMENT x[]; };   // x, or dy (avg_pool2d_grad)
layout(std430, set = 0, binding = 1) readonly buffer DY { ELEMENT dy[]; }; // max_pool2d_grad
layout(std430, set = 0, binding = 2) writeonly buffer Out { ELEMENT out_data[]; };

#define MAX_FORWARD 0
#define AVG_FORWARD 1
#define MAX_GRAD 2
#define AVG_GRAD 3

layout(push_constant) uniform Push {
  uint planes, height, width, out_height, out_width;
  uint kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  uint mode;
} pc;

// Window (oh, ow) clipped to the image: rows [r.x, r.y), columns [r.z, r.w).
ivec4 window(uint oh, uint ow) {
  int top = int(oh * pc.stride_h) - int(pc.pad_h), left = int(ow * pc.stride_w) - int(pc.pad_w);
  return ivec4(max(top, 0), min(top + int(pc.kernel_h), int(pc.height)), max(left, 0),
               min(left + int(pc.kernel_w), int(pc.width)));
}

// Index within the plane of window (oh, ow)'s first maximum.
uint first_maximum(uint plane, uint oh, uint ow) {
  ivec4 r = window(oh, ow);
  uint best = uint(r.x) * pc.width + uint(r.z);
  float best_value = TO_F32(x[plane + best]);
  for (int h = r.x; h < r.y; h++)
    for (int w = r.z; w < r.w; w++) {
      if (isnan(best_value))
        return best;
      uint at = uint(h) * pc.width + uint(w);
      float value = TO_F32(x[plane + at]);
      if (value > best_value || isnan(value)) {
        best = at;
        best_value = value;
      }
    }
  return best;
}

void main() {
  float scale = 1.0 / float(pc.kernel_h * pc.kernel_w);
  uint in_plane = pc.height * pc.width, out_plane = pc.out_height * pc.out_width;
  if (pc.mode == MAX_FORWARD || pc.mode == AVG_FORWARD) {
    uint total = pc.planes * out_plane;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += grid_size()) {
      uint plane = (i / out_plane) * in_plane, oh = (i % out_plane) / pc.out_width, ow = i % pc.out_width;
      if (pc.mode == MAX_FORWARD) {
        out_data[i] = FROM_F32(TO_F32(x[plane + first_maximum(plane, oh, ow)])); // as the casts would
        continue;
      }
      ivec4 r = window(oh, ow);
      float sum = 0.0;
      for (int h = r.x; h < r.y; h++)
        for (int w = r.z; w < r.w; w++)
          sum += TO_F32(x[plane + uint(h) * pc.width + uint(w)]);
      out_data[i] = FROM_F32(sum * scale);
    }
    return;
  }
  uint total = pc.planes * in_plane;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += grid_size()) {
    uint p = i / in_plane, at = i % in_plane;
    int ih = int(at / pc.width), iw = int(at % pc.width);
    // Windows whose unclipped span [o s - pad, o s - pad + kernel) holds (ih, iw).
    int oh0 = max(0, (ih + int(pc.pad_h) - int(pc.kernel_h) + int(pc.stride_h)) / int(pc.stride_h));
    int oh1 = min(int(pc.out_height) - 1, (ih + int(pc.pad_h)) / int(pc.stride_h));
    int ow0 = max(0, (iw + int(pc.pad_w) - int(pc.kernel_w) + int(pc.stride_w)) / int(pc.stride_w));
    int ow1 = min(int(pc.out_width) - 1, (iw + int(pc.pad_w)) / int(pc.stride_w));
    float sum = 0.0;
    for (int oh = oh0; oh <= oh1; oh++)
      for (int ow = ow0; ow <= ow1; ow++) {
        uint o = p * out_plane + uint(oh) * pc.out_width + uint(ow);
        if (pc.mode == AVG_GRAD) {
          // precise: the share rounded before it is added, as the CPU adds it (NVIDIA's compiler
          // fused the two into an fma: 1 ulp off the CPU where the two must agree bit for bit)
          precise float share = TO_F32(x[o]) * scale;
          sum += share;
        }
        else if (first_maximum(p * in_plane, uint(oh), uint(ow)) == at)
          sum += TO_F32(dy[o]);
      }
    out_data[i] = FROM_F32(sum);
  }
}
