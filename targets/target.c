/* The targets' default capabilities and device overhead models. Every overhead figure is a
 * conservative default with its source, until a GPU session measures it (docs/memory.md says how);
 * `--device cuda:N` replaces the measurable parts with this machine's figures. */
#include <stdio.h>
#include <string.h>

#include "tightfit/target.h"

#define MIB ((int64_t)1 << 20)
#define KIB ((int64_t)1 << 10)

static void add_part(tf_overhead_model *model, const char *name, int64_t bytes, const char *source) {
  tf_overhead_part *part = &model->fixed[model->n_fixed++];
  snprintf(part->name, sizeof(part->name), "%s", name);
  part->bytes = bytes;
  snprintf(part->source, sizeof(part->source), "%s", source);
}

/* Without a card: the context model (targets/gpus.c) for 160 SMs x 2048 threads, above every named
 * card (an H100 or H200: 132 x 2048), rounded up to 64 MiB: 608 -> 640 MiB. */
static int64_t default_context_bytes(void) {
  const int64_t step = 64 * MIB, modelled = tf_cuda_context_model(160, 2048);
  return (modelled + step - 1) / step * step;
}

static void cuda_overhead(tf_overhead_model *m) {
  add_part(m, "context", default_context_bytes(),
           "default: the context model (docs/gpus.md) for 160 SMs x 2048 threads, 608 MiB; NVML measured 523.6 "
           "MiB on an H200 and an H100 (CUDA 13.0); --gpu NAME models it, --device cuda:N measures it");
  add_part(m, "libraries", 80 * MIB,
           "default: the cuBLAS handle, streams and events (cuBLAS's workspace is in the arena, "
           "cublasSetWorkspace); measured 66 MiB on an H200 (CUDA 13.0); --device cuda:N measures it");
  add_part(m, "module_code", 32 * MIB,
           "default: device code of tightfit's and cuBLAS's kernels (lazy loading; the warm-up loads it all); "
           "calibrations measured 2-10 MiB on an H200; with the graphs 12-16 MiB for gpt2-small, xtts-gpt on an H100");
  m->granularity = 2 * MIB;
  snprintf(m->granularity_source, sizeof(m->granularity_source), "%s",
           "default: cudaMalloc rounds each region up to the allocation granularity, 2 MiB on current GPUs "
           "(cuMemGetAllocationGranularity); --device cuda:N measures it");
  m->graph_base_bytes = 8 * MIB;
  m->graph_step_bytes = 4 * KIB;
  snprintf(m->graph_source, sizeof(m->graph_source), "%s",
           "default: CUDA-graph executables, 8 MiB + 4 KiB per captured step (micro-batch and forward blocks "
           "twice, optimizer block once); calibrations on an H200 measured 2 MiB + 1 KiB per step");
}

static void vulkan_overhead(tf_overhead_model *m) {
  add_part(m, "driver", 256 * MIB,
           "default: the Vulkan driver's own device memory (queues, descriptor and shader heaps); an H200 "
           "(NVIDIA 580.159) measured 31 MiB per process, 65 MiB device-wide with staging; other vendors not yet");
  add_part(m, "staging", TF_TARGET_VULKAN_STAGING_BYTES,
           "exact: the staging (8 MiB) and run-state (256 B) buffers the Vulkan backend creates with the device "
           "(backends/vulkan/vulkan.h)");
  m->granularity = 2 * MIB;
  snprintf(m->granularity_source, sizeof(m->granularity_source), "%s",
           "default: vkAllocateMemory rounds each region up to the driver's page size; 2 MiB (large pages) assumed");
}

_Static_assert(TF_OP_COUNT <= 128, "tf_target.half_kernels holds 128 ops");

/* The op table's half column (core/op_table.h): where an op runs on f16/bf16 data without casts.
 *
 * CPU (CPU, ALL, MIXED): every op through half slices (core/half_slices.h: its f32 kernel on widened
 * copies of one slice at a time, results rounded once), or a half kernel of its own (the fused loss
 * head, embedding and its gradient, batch_norm_running: tf_cpu_half_own_kernel), each also taking
 * f32 operands. NONE: the cast itself, and the ops that update a tensor in place (accumulations,
 * optimizer updates, the global norm's sum), which keep their sums in f32.
 *
 * GPUs (ALL, MIXED). Vulkan: their lowerings emit only shaders with half storage variants
 * (backends/vulkan/vk_lower.c, half_variants), layout moves, fills and copies, and their shaders
 * write each output element once, from f32 arithmetic, or keep what they read back as exact f32
 * bits (the norms' and attention's gradients' row statistics). CUDA: their kernels are templated on
 * the storage of their floating operands (kernels/cuda/table.cu, takes_half), load each element to
 * f32, compute as on f32 and write each output element once, rounded (kernels/cuda/common.cuh);
 * matmul is cuBLAS's 16-bit GEMM accumulating in f32; the convolutions are the f32 kernel on
 * operands widened into the workspace (kernels/cuda/conv.cu). Embedding's gradient sums each
 * element in f32 registers and writes it once on both (shaders/embedding.comp,
 * kernels/cuda/embedding.cu). The accumulations and the optimizer keep sums in their outputs, which
 * half storage would round: they run between casts on both. MIXED, half kernels that take f32
 * operands too: the fused loss head (backends/vulkan/vk_lower_linear_loss_half.c,
 * kernels/cuda/linear_loss_half.cu: half x, weight, bias and gradients, an f32 loss and dloss; the
 * accumulating forms keep sums in their half accumulators and run between casts), the losses
 * (shaders/loss.comp with LOSS_HALF, kernels/cuda/loss.cu: an f32 loss and dloss), attention's
 * gradient reading f16/bf16 q, k, v beside an f32 dy, writing f32 dq, dk, dv (shaders/attention.comp
 * with -DINPUT_F16/-DINPUT_BF16, kernels/cuda/attention*.cu: a `--precision` plan's backward reads the
 * q, k, v it stored in half without their f32 copies, compiler/precision.c), and batch_norm_running
 * on half x, its running statistics f32 (shaders/batch_norm_running.comp's f16/bf16 variants bind
 * them as f32; kernels/cuda/batch_norm.cu templated on x's storage). */
typedef enum half_support { HALF_NONE, HALF_CPU, HALF_ALL, HALF_MIXED } half_support;
#define HALF_SUPPORT(ID, name, number, scope, min, max, outputs, shape_only, in_place, attrs, shape, alias, workspace, \
                     vjp, cpu, cuda, vulkan, dtypes, slices, half)                                                     \
  [TF_OP_##ID] = HALF_##half,
static const half_support half_support_of[TF_OP_COUNT] = {TF_OP_TABLE(HALF_SUPPORT)};
#undef HALF_SUPPORT

static void set_bit(uint64_t *mask, tf_op op) { mask[op / 64] |= (uint64_t)1 << (op % 64); }
static bool bit_of(const uint64_t *mask, tf_op op) {
  return (int)op >= 0 && op < TF_OP_COUNT && ((mask[op / 64] >> (op % 64)) & 1u);
}

/* The target's half kernels from the half column: on the CPU, every op but NONE's, each taking f32
 * operands too; on a GPU, ALL's and MIXED's, MIXED's taking f32 operands too. */
static void set_half_kernels(tf_target *target) {
  for (int op = 0; op < TF_OP_COUNT; op++) {
    const half_support half = half_support_of[op];
    const bool runs = target->kind == TF_TARGET_CPU ? half != HALF_NONE : half == HALF_ALL || half == HALF_MIXED;
    if (runs)
      set_bit(target->half_kernels, (tf_op)op);
    if (runs && (target->kind == TF_TARGET_CPU || half == HALF_MIXED))
      set_bit(target->mixed_half_kernels, (tf_op)op);
  }
}

bool tf_target_half_kernel(const tf_target *target, tf_op op) { return bit_of(target->half_kernels, op); }

bool tf_target_mixed_half_kernel(const tf_target *target, tf_op op) {
  return tf_target_half_kernel(target, op) && bit_of(target->mixed_half_kernels, op);
}

tf_target tf_target_default(tf_target_kind kind) {
  tf_target target;
  memset(&target, 0, sizeof(target));
  target.kind = kind;
  switch (kind) {
  case TF_TARGET_CPU:
    target.alignment = 64;
    target.threads = 2;
    target.flops_per_second = 150e9;
    target.bytes_per_second = 10e9;
    set_half_kernels(&target);
    break; /* no overhead: the regions are host memory, and a plan's region sizes are already aligned */
  case TF_TARGET_VULKAN:
    target.alignment = 256;
    target.threads = 1;
    target.flops_per_second = 10e12;
    target.bytes_per_second = 500e9;
    vulkan_overhead(&target.overhead);
    set_half_kernels(&target);
    break;
  default:
    target.alignment = 256;
    target.threads = 1;
    target.flops_per_second = 50e12;
    target.bytes_per_second = 2e12;
    cuda_overhead(&target.overhead);
    set_half_kernels(&target);
    break;
  }
  return target;
}

static const char *const target_names[TF_TARGET_COUNT] = {"cpu", "vulkan", "cuda"};

const char *tf_target_name(tf_target_kind kind) {
  return (int)kind >= 0 && kind < TF_TARGET_COUNT ? target_names[kind] : "?";
}

bool tf_target_parse(const char *name, tf_target_kind *kind) {
  for (int i = 0; i < TF_TARGET_COUNT; i++) {
    if (strcmp(name, target_names[i]) == 0) {
      *kind = (tf_target_kind)i;
      return true;
    }
  }
  return false;
}

bool tf_target_set_part(tf_target *target, const char *name, int64_t bytes, const char *source) {
  tf_overhead_model *m = &target->overhead;
  for (int32_t i = 0; i < m->n_fixed; i++) {
    if (strcmp(m->fixed[i].name, name) == 0) {
      m->fixed[i].bytes = bytes;
      snprintf(m->fixed[i].source, sizeof(m->fixed[i].source), "%s", source);
      return true;
    }
  }
  if (m->n_fixed >= (int32_t)(sizeof(m->fixed) / sizeof(m->fixed[0])))
    return false;
  add_part(m, name, bytes, source);
  return true;
}
