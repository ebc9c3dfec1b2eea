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

static void cuda_overhead(tf_overhead_model *m) {
  add_part(m, "context", 768 * MIB,
           "default: the CUDA context (its local-memory reserve grows with the SM count); PyTorch processes "
           "show 0.3-0.6 GiB; NVML measured 523.6 MiB on an H200 (CUDA 13.0); --device cuda:N measures it");
  add_part(m, "libraries", 80 * MIB,
           "default: the cuBLAS handle, streams and events (cuBLAS's workspace is in the arena, "
           "cublasSetWorkspace); measured 66 MiB on an H200 (CUDA 13.0); --device cuda:N measures it");
  add_part(m, "module_code", 112 * MIB,
           "default: device code of tightfit's kernels and of the cuBLAS kernels loaded on first use (lazy "
           "loading, all loaded by the warm-up before capture); the warm-up and graphs of gpt2-small took "
           "under 10 MiB on an H200");
  m->granularity = 2 * MIB;
  snprintf(m->granularity_source, sizeof(m->granularity_source), "%s",
           "default: cudaMalloc rounds each region up to the allocation granularity, 2 MiB on current GPUs "
           "(cuMemGetAllocationGranularity); --device cuda:N measures it");
  m->graph_base_bytes = 32 * MIB;
  m->graph_step_bytes = 16 * KIB;
  snprintf(m->graph_source, sizeof(m->graph_source), "%s",
           "default: CUDA-graph executables, 32 MiB + 16 KiB per captured step (micro-batch and forward blocks "
           "twice, optimizer block once); with the warm-up under 10 MiB for gpt2-small's 733 steps on an H200");
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

/* The ops both GPU backends run on f16/bf16 data. Vulkan: their lowerings emit only shaders with
 * half storage variants (backends/vulkan/vk_lower.c, half_variants), layout moves, fills and copies,
 * and their shaders write each output element once, from f32 arithmetic, or keep what they read
 * back as exact f32 bits (the norms' and attention's gradients' row statistics). CUDA: their kernels
 * are templated on the storage of their floating operands (kernels/cuda/table.cu, takes_half), load
 * each element to f32, compute as on f32 and write each output element once, rounded
 * (kernels/cuda/common.cuh); matmul is cuBLAS's 16-bit GEMM accumulating in f32; the convolutions
 * are the f32 kernel on operands widened into the workspace (kernels/cuda/conv.cu). Embedding's
 * gradient sums each element in f32 registers and writes it once on both (shaders/embedding.comp,
 * kernels/cuda/embedding.cu). The accumulations and the optimizer keep sums in their outputs, which
 * half storage would round: they run between casts on both. The fused loss head and the losses: gpu_half_heads,
 * gpu_half_losses. */
// clang-format off
static const tf_op gpu_half_kernels[] = {
    TF_OP_MATMUL,
    TF_OP_ADD, TF_OP_SUB, TF_OP_MUL, TF_OP_DIV,
    TF_OP_NEG, TF_OP_EXP, TF_OP_LOG, TF_OP_SQRT, TF_OP_RSQRT, TF_OP_RELU, TF_OP_GELU, TF_OP_SILU,
    TF_OP_SIGMOID, TF_OP_TANH, TF_OP_SOFTPLUS, TF_OP_LEAKY_RELU, TF_OP_ABS,
    TF_OP_RELU_GRAD, TF_OP_GELU_GRAD, TF_OP_SILU_GRAD, TF_OP_SIGMOID_GRAD, TF_OP_TANH_GRAD, TF_OP_LEAKY_RELU_GRAD,
    TF_OP_ABS_GRAD,
    TF_OP_SOFTMAX, TF_OP_LOG_SOFTMAX, TF_OP_SOFTMAX_GRAD, TF_OP_LOG_SOFTMAX_GRAD,
    TF_OP_SUM, TF_OP_MEAN, TF_OP_MAX, TF_OP_SUM_TO, TF_OP_MAX_GRAD,
    TF_OP_LAYER_NORM, TF_OP_RMS_NORM, TF_OP_LAYER_NORM_GRAD, TF_OP_RMS_NORM_GRAD,
    TF_OP_ATTENTION, TF_OP_ATTENTION_GRAD, TF_OP_EMBEDDING, TF_OP_EMBEDDING_GRAD,
    TF_OP_MAX_POOL2D, TF_OP_AVG_POOL2D, TF_OP_MAX_POOL2D_GRAD, TF_OP_AVG_POOL2D_GRAD,
    TF_OP_CONV1D, TF_OP_CONV2D, TF_OP_CONV_TRANSPOSE2D, TF_OP_CONV1D_GRAD_INPUT, TF_OP_CONV1D_GRAD_WEIGHT,
    TF_OP_CONV2D_GRAD_INPUT, TF_OP_CONV2D_GRAD_WEIGHT,
    TF_OP_BATCH_NORM, TF_OP_BATCH_NORM_GRAD,
    TF_OP_DROPOUT, TF_OP_ZERO,
    TF_OP_RESHAPE, TF_OP_TRANSPOSE, TF_OP_CONCAT, TF_OP_SLICE, TF_OP_EXPAND, TF_OP_SLICE_GRAD,
};
// clang-format on

/* The CPU backend runs every op on f16/bf16 data through half slices (backends/cpu/cpu_half.h, its
 * f32 kernel on widened copies of one slice at a time, results rounded once), except the cast
 * itself and the ops that update a tensor in place (accumulations, optimizer updates, the global
 * norm's sum, which keep their sums in f32 gradients); batch_norm_running, which updates f32
 * running statistics from half x, has a kernel of its own (kernels/cpu/batch_norm_half.c). */
static bool cpu_half_kernel(tf_op op) {
  switch (op) {
  case TF_OP_CAST:
  case TF_OP_ACCUMULATE:
  case TF_OP_GLOBAL_NORM_SQ:
  case TF_OP_SGD:
  case TF_OP_ADAMW:
  case TF_OP_EMBEDDING_GRAD_ACCUMULATE:
  case TF_OP_MATMUL_ACCUMULATE:
  case TF_OP_LINEAR_CROSS_ENTROPY_GRAD_ACCUMULATE:
  case TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD_ACCUMULATE: return false;
  default: return true;
  }
}

/* The fused loss head on half data (backends/vulkan/vk_lower_linear_loss_half.c,
 * kernels/cuda/linear_loss_half.cu): bf16 or f16 x, weight, bias and gradients, an f32 loss and
 * dloss, so these are half kernels taking f32 operands too (mixed_half_kernels). The accumulating
 * forms keep sums in their half accumulators: they run between casts. */
static const tf_op gpu_half_heads[] = {
    TF_OP_LINEAR_CROSS_ENTROPY,       TF_OP_LINEAR_CROSS_ENTROPY_GRAD,       TF_OP_LINEAR_CROSS_ENTROPY_BIAS_GRAD,
    TF_OP_LINEAR_CROSS_ENTROPY_TRAIN, TF_OP_LINEAR_CROSS_ENTROPY_BIAS_TRAIN,
};

/* The losses on half data (shaders/loss.comp with LOSS_HALF, kernels/cuda/loss.cu): half x, target
 * and gradient, an f32 loss and dloss, so half kernels taking f32 operands too. */
static const tf_op gpu_half_losses[] = {
    TF_OP_CROSS_ENTROPY, TF_OP_CROSS_ENTROPY_GRAD, TF_OP_MSE,
    TF_OP_MSE_GRAD,      TF_OP_BCE_WITH_LOGITS,    TF_OP_BCE_WITH_LOGITS_GRAD,
};

/* Half kernels that also take an f32 gradient beside their half operands: attention's gradient
 * reading f16/bf16 q, k, v beside an f32 dy, writing f32 dq, dk, dv (shaders/attention.comp with
 * -DINPUT_F16/-DINPUT_BF16, kernels/cuda/attention*.cu): a `--precision` plan's backward reads the
 * q, k, v it stored in half without their f32 copies (compiler/precision.c). */
static const tf_op gpu_mixed_gradients[] = {TF_OP_ATTENTION_GRAD};

/* batch_norm_running on half x, its running statistics f32 (shaders/batch_norm_running.comp's
 * f16/bf16 variants bind them as f32; kernels/cuda/batch_norm.cu templated on x's storage). */
static const tf_op gpu_half_running_statistics[] = {TF_OP_BATCH_NORM_RUNNING};

static void set_bit(uint64_t *mask, tf_op op) { mask[op / 64] |= (uint64_t)1 << (op % 64); }
static bool bit_of(const uint64_t *mask, tf_op op) {
  return (int)op >= 0 && op < TF_OP_COUNT && ((mask[op / 64] >> (op % 64)) & 1u);
}

static void set_half_kernel(tf_target *target, tf_op op) { set_bit(target->half_kernels, op); }

static void set_half_kernels(tf_target *target, const tf_op *ops, size_t n) {
  for (size_t i = 0; i < n; i++)
    set_half_kernel(target, ops[i]);
}

/* ops[0..n) as half kernels that take f32 operands too. */
static void set_mixed_half_kernels(tf_target *target, const tf_op *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    set_half_kernel(target, ops[i]);
    set_bit(target->mixed_half_kernels, ops[i]);
  }
}

/* Both GPU targets' half kernels that take f32 operands too: the fused loss head, the losses and
 * attention's gradient, and batch_norm_running. */
static void set_mixed_gpu_kernels(tf_target *target) {
  set_mixed_half_kernels(target, gpu_half_heads, sizeof(gpu_half_heads) / sizeof(gpu_half_heads[0]));
  set_mixed_half_kernels(target, gpu_half_losses, sizeof(gpu_half_losses) / sizeof(gpu_half_losses[0]));
  set_mixed_half_kernels(target, gpu_mixed_gradients, sizeof(gpu_mixed_gradients) / sizeof(gpu_mixed_gradients[0]));
  set_mixed_half_kernels(target, gpu_half_running_statistics,
                         sizeof(gpu_half_running_statistics) / sizeof(gpu_half_running_statistics[0]));
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
    for (int op = 0; op < TF_OP_COUNT; op++)
      if (cpu_half_kernel((tf_op)op)) {
        set_half_kernel(&target, (tf_op)op);
        set_bit(target.mixed_half_kernels, (tf_op)op);
      }
    break; /* no overhead: the regions are host memory, and a plan's region sizes are already aligned */
  case TF_TARGET_VULKAN:
    target.alignment = 256;
    target.threads = 1;
    target.flops_per_second = 10e12;
    target.bytes_per_second = 500e9;
    vulkan_overhead(&target.overhead);
    set_half_kernels(&target, gpu_half_kernels, sizeof(gpu_half_kernels) / sizeof(gpu_half_kernels[0]));
    set_mixed_gpu_kernels(&target);
    break;
  default:
    target.alignment = 256;
    target.threads = 1;
    target.flops_per_second = 50e12;
    target.bytes_per_second = 2e12;
    cuda_overhead(&target.overhead);
    set_half_kernels(&target, gpu_half_kernels, sizeof(gpu_half_kernels) / sizeof(gpu_half_kernels[0]));
    set_mixed_gpu_kernels(&target);
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
