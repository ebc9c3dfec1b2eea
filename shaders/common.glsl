// Shared by every compute shader (#include "common.glsl" after #version and the extension line).
//
// Bindings: set 0, bindings 0..7 are the step's operands (each bound as its own sub-range of a
// region, so indices start at 0), binding 8 the run-state buffer (backends/vulkan/vk_record.c
// writes it before each submission). Sizes come in push constants (at most 128 bytes).
//
// Element types: every shader names its storage type through ELEMENT and converts with TO_F32 /
// FROM_F32 (arithmetic stays f32). Today the embedded variants are all f32; -DELEMENT_F16 or
// -DELEMENT_BF16 selects 16-bit storage, and the build compiles and validates every shader that way
// too (backends/vulkan/CMakeLists.txt, tightfit_shader_precisions), so the structure stays ready for
// the f16/bf16 variants a mixed-precision plan will need.
#if defined(ELEMENT_F16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ELEMENT float16_t
#define ELEMENT4 f16vec4
#define TO_F32(x) float(x)
#define TO_F32_4(x) vec4(x)
#define FROM_F32(x) float16_t(x)
#elif defined(ELEMENT_BF16)
// bfloat16 as the high half of an f32's bits (no GLSL type in glslang 12): round to nearest even.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define ELEMENT uint16_t
#define ELEMENT4 u16vec4
#define TO_F32(x) uintBitsToFloat(uint(x) << 16)
#define TO_F32_4(x) uintBitsToFloat(uvec4(x) << 16)
#define FROM_F32(x) bf16_from_f32(x)
uint16_t bf16_from_f32(float value) {
  uint bits = floatBitsToUint(value);
  if (isnan(value))
    return uint16_t((bits >> 16) | 0x40u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
#else
#define ELEMENT float
#define ELEMENT4 vec4
#define TO_F32(x) (x)
#define TO_F32_4(x) (x)
#define FROM_F32(x) (x)
#endif

layout(std430, set = 0, binding = 8) readonly buffer RunState {
  uint optimizer_step;   // >= 1
  uint step_mix_lo;      // micro_step x 0x9E3779B97F4A7C15: the dropout counter's mix
  uint step_mix_hi;
  uint seed_lo;
  uint seed_hi;
  float gradient_unscale; // 2^-e for a loss scaled by 2^e: sgd/adamw take it out of the gradients
  uint reserved[2];
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
