/* Named GPUs for `--gpu NAME`: the memory each card reports to a process (CUDA's totalGlobalMem,
 * PyTorch's "total capacity"), the smallest figure found in public reports, since newer drivers and
 * ECC keep more back (docs/gpus.md lists every figure seen and its source). */
#include <ctype.h>
#include <string.h>

#include "tightfit/target.h"

#define GIB_HUNDREDTHS(x) ((int64_t)((double)(x) / 100.0 * 1073741824.0))

#define OOM_REPORTS "the smallest 'total capacity' in public PyTorch out-of-memory reports"

static const tf_gpu gpus[] = {
    {"t4", "NVIDIA Tesla T4 16 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(1456),
     OOM_REPORTS " (14.56-14.76 GiB; drivers from 535 report less)", 40, 1024},
    {"v100-16gb", "NVIDIA V100 16 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(1575), OOM_REPORTS " (15.75-15.78 GiB)", 80,
     2048},
    {"v100-32gb", "NVIDIA V100 32 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(3174), OOM_REPORTS " (31.74-31.75 GiB)", 80,
     2048},
    {"a10g", "NVIDIA A10G 24 GB (AWS g5)", TF_TARGET_CUDA, GIB_HUNDREDTHS(2199), OOM_REPORTS " (21.99-22.20 GiB)", 80,
     1536},
    {"a10", "NVIDIA A10 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2199), OOM_REPORTS " (21.99-22.18 GiB)", 72, 1536},
    {"l4", "NVIDIA L4 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2196), OOM_REPORTS " (21.96-22.05 GiB)", 58, 1536},
    {"rtx3090", "NVIDIA GeForce RTX 3090 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2356),
     OOM_REPORTS " on Linux (23.56-23.70 GiB)", 82, 1536},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2349),
     OOM_REPORTS " on Linux (23.49-23.68 GiB)", 128, 1536},
    {"a100-40gb", "NVIDIA A100 40 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(3938), OOM_REPORTS " (39.38-39.59 GiB)", 108,
     2048},
    {"a100-80gb", "NVIDIA A100 80 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(7914), OOM_REPORTS " (79.14-79.25 GiB)", 108,
     2048},
    {"h100-80gb", "NVIDIA H100 80 GB (SXM, HBM3)", TF_TARGET_CUDA, GIB_HUNDREDTHS(7910),
     OOM_REPORTS " (79.10-79.19 GiB)", 132, 2048},
    {"h100-pcie", "NVIDIA H100 PCIe 80 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(7911), "PyTorch total_memory 81008 MiB", 114,
     2048},
    {"h200", "NVIDIA H200 141 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(13980), OOM_REPORTS " (139.80-139.81 GiB)", 132,
     2048},
    {"l40s", "NVIDIA L40S 48 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(4442), OOM_REPORTS " (44.42-44.52 GiB, ECC on)", 142,
     1536},
    {"a6000", "NVIDIA RTX A6000 48 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(4754),
     OOM_REPORTS " (47.54 GiB with ECC off, the default; about 44.4 GiB with ECC on)", 84, 1536},
    {"mi250", "AMD Instinct MI250/MI250X, one GCD (64 GB)", TF_TARGET_VULKAN, GIB_HUNDREDTHS(6398),
     "ROCm's and OpenCL's figure (63.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N", 0, 0},
    {"mi300x", "AMD Instinct MI300X 192 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(19169),
     "PyTorch-on-ROCm reports (191.69-191.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N", 0,
     0},
    {"max-1100", "Intel Data Center GPU Max 1100 48 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(4798),
     "PyTorch XPU reports (47.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N", 0, 0},
    {"arc-a770", "Intel Arc A770 16 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(1511),
     "PyTorch XPU reports (15.11-15.56 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N", 0, 0},
};

/* The context model: the fixed part is the H200's measured context (523.6 MiB through NVML, CUDA 13.0,
 * 2026-11-27) less its modelled reserve (132 SMs x 2048 threads x 1 KiB = 264 MiB), 259.6 MiB, rounded
 * up to 288 MiB; the reserve is the CUDA default stack (cudaLimitStackSize, 1 KiB) for every thread the
 * card can keep resident. A smaller card's page tables and driver state are not larger than the
 * H200's, so the fixed part errs on the large side there. */
#define CONTEXT_FIXED_BYTES ((int64_t)288 << 20)
#define STACK_BYTES_PER_THREAD ((int64_t)1024)

int64_t tf_cuda_context_model(int32_t sms, int32_t threads_per_sm) {
  return CONTEXT_FIXED_BYTES + (int64_t)sms * threads_per_sm * STACK_BYTES_PER_THREAD;
}

int64_t tf_gpu_context_bytes(const tf_gpu *gpu) {
  if (!gpu || gpu->target != TF_TARGET_CUDA || gpu->sms <= 0 || gpu->threads_per_sm <= 0)
    return -1;
  return tf_cuda_context_model(gpu->sms, gpu->threads_per_sm);
}

static bool same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
      return false;
  return *a == *b;
}

const tf_gpu *tf_gpu_find(const char *name) {
  for (size_t i = 0; name && i < sizeof(gpus) / sizeof(gpus[0]); i++)
    if (same_name(name, gpus[i].name))
      return &gpus[i];
  return NULL;
}

const tf_gpu *tf_gpu_list(int32_t *count) {
  *count = (int32_t)(sizeof(gpus) / sizeof(gpus[0]));
  return gpus;
}
