// Shared by every compute shader (#include "common.glsl" after #version and the extension line).
//
// Bindings: set 0, bindings 0..7 are the step's operands (each bound as its own sub-range of a
// region, so indices start at 0), binding 8 the run-state buffer (backends/vulkan/vk_record.c
// writes it before each submission). Sizes come in push constants (at most 128 bytes).
//
// Element types: every shader names its floating storage type through ELEMENT (ELEMENT4 for
// four) and converts with TO_F32 / TO_F32_4 / FROM_F32; arithmetic stays f32. -DELEMENT_F16 and
// -DELEMENT_BF16 select 16-bit storage: the elements are uint16_t bit patterns (only
// storageBuffer16BitAccess is needed, no 16-bit arithmetic), converted by half.glsl's integer code,
// so a shader on half data computes bit for bit what cast up -> its f32 variant -> cast down does.
#if defined(LAYOUT8)
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#endif
#if defined(ELEMENT_F16) || defined(ELEMENT_BF16) || defined(LAYOUT16) || defined(INPUT_F16) || defined(INPUT_BF16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "half.glsl"
#if defined(ELEMENT_F16) || defined(ELEMENT_BF16)
#define ELEMENT uint16_t
#define ELEMENT4 u16vec4
#endif
#if defined(ELEMENT_F16)
#define TO_F32(x) uintBitsToFloat(f32_from_half(uint(x)))
#define TO_F32_4(x) uintBitsToFloat(f32_from_half4(uvec4(x)))
#define FROM_F32(x) uint16_t(half_from_f32(floatBitsToUint(x)))
#elif defined(ELEMENT_BF16)
#define TO_F32(x) uintBitsToFloat(f32_from_bf16(uint(x)))
#define TO_F32_4(x) uintBitsToFloat(f32_from_bf16_4(uvec4(x)))
#define FROM_F32(x) uint16_t(bf16_from_f32(floatBitsToUint(x)))
#else
#define ELEMENT float
#define ELEMENT4 vec4
#define TO_F32(x) (x)
#define TO_F32_4(x) (x)
#define FROM_F32(x) (x)
#endif

// Inputs stored in another type than ELEMENT (attention.comp's q, k and v with -DINPUT_F16 or
// -DINPUT_BF16: a mixed-precision plan's gradient reads the half copies it stored beside an f32 dy
// and f32 gradients): IN_ELEMENT and IN_TO_F32, widened exactly as TO_F32 widens; without them,
// ELEMENT's.
#if defined(INPUT_F16)
#define IN_ELEMENT uint16_t
#define IN_TO_F32(x) uintBitsToFloat(f32_from_half(uint(x)))
#elif defined(INPUT_BF16)
#define IN_ELEMENT uint16_t
#define IN_TO_F32(x) uintBitsToFloat(f32_from_bf16(uint(x)))
#else
#define IN_ELEMENT ELEMENT
#define IN_TO_F32(x) TO_F32(x)
#endif

// Statistics a multi-pass shader keeps in one of its outputs between passes (norm.comp's and
// attention.comp's gradients), as exact f32 bits: one element each in f32 storage, two in f16/bf16
// storage (the low half first), so half storage does not round them. STAT_ELEMENTS per statistic
// (STAT_SPLIT: 1 when a statistic takes two elements, for #if).
#if defined(ELEMENT_F16) || defined(ELEMENT_BF16)
#define STAT_ELEMENTS 2u
#define STAT_SPLIT 1
#define STORE_STAT(buffer, at, value)                                                                                  \
  {                                                                                                                    \
    uint stat_bits_ = floatBitsToUint(value);                                                                          \
    buffer[(at)] = uint16_t(stat_bits_ & 0xFFFFu);                                                                     \
    buffer[(at) + 1u] = uint16_t(stat_bits_ >> 16);                                                                    \
  }
#define LOAD_STAT(buffer, at) uintBitsToFloat(uint(buffer[(at)]) | (uint(buffer[(at) + 1u]) << 16))
#else
#define STAT_ELEMENTS 1u
#define STAT_SPLIT 0
#define STORE_STAT(buffer, at, value) buffer[(at)] = (value)
#define LOAD_STAT(buffer, at) buffer[(at)]
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
