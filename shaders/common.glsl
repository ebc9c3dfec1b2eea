// Shared by every compute shader (#include "common.glsl" after #version and the extension line).
//
// Bindings: set 0, bindings 0..7 are the step's operands (each bound as its own sub-range of a
// region, so indices start at 0), binding 8 the run-state buffer (backends/vulkan/vk_record.c
// writes it before each submission). Sizes come in push constants (at most 128 bytes).
//
// Element types: every shader names its storage type through ELEMENT and converts with TO_F32 /
// FROM_F32, so an f16 or bf16 variant is a -D away (GL_EXT_shader_16bit_storage); today all are f32.
#ifndef ELEMENT
#define ELEMENT float
#define TO_F32(x) (x)
#define FROM_F32(x) (x)
#endif

layout(std430, set = 0, binding = 8) readonly buffer RunState {
  uint optimizer_step;   // >= 1
  uint step_mix_lo;      // micro_step x 0x9E3779B97F4A7C15: the dropout counter's mix
  uint step_mix_hi;
  uint seed_lo;
  uint seed_hi;
  uint reserved[3];
  vec2 adam[8];          // per (lr, beta1, beta2) slot: lr / (1 - beta1^t), sqrt(1 - beta2^t)
} run_state;

// Grid-stride loops: the host caps a dispatch at 65535 groups; invocations walk the rest. A macro,
// not a function: gl_WorkGroupSize is only known after the shader's local_size declaration, which
// follows this include.
#define grid_size() (gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Compensated (Kahan) addition: long sequential sums keep f32 accuracy. `precise` forbids the
// compiler from reassociating the correction away.
void kahan_add(inout float sum, inout float carry, float value) {
  precise float y = value - carry;
  precise float t = sum + y;
  precise float c = (t - sum) - y;
  carry = c;
  sum = t;
}
