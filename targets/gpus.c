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
     OOM_REPORTS " (14.56-14.76 GiB; drivers from 535 report less)"},
    {"v100-16gb", "NVIDIA V100 16 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(1575), OOM_REPORTS " (15.75-15.78 GiB)"},
    {"v100-32gb", "NVIDIA V100 32 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(3174), OOM_REPORTS " (31.74-31.75 GiB)"},
    {"a10g", "NVIDIA A10G 24 GB (AWS g5)", TF_TARGET_CUDA, GIB_HUNDREDTHS(2199), OOM_REPORTS " (21.99-22.20 GiB)"},
    {"a10", "NVIDIA A10 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2199), OOM_REPORTS " (21.99-22.18 GiB)"},
    {"l4", "NVIDIA L4 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2196), OOM_REPORTS " (21.96-22.05 GiB)"},
    {"rtx3090", "NVIDIA GeForce RTX 3090 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2356),
     OOM_REPORTS " on Linux (23.56-23.70 GiB)"},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(2349),
     OOM_REPORTS " on Linux (23.49-23.68 GiB)"},
    {"a100-40gb", "NVIDIA A100 40 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(3938), OOM_REPORTS " (39.38-39.59 GiB)"},
    {"a100-80gb", "NVIDIA A100 80 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(7914), OOM_REPORTS " (79.14-79.25 GiB)"},
    {"h100-80gb", "NVIDIA H100 80 GB (SXM, HBM3)", TF_TARGET_CUDA, GIB_HUNDREDTHS(7910),
     OOM_REPORTS " (79.10-79.19 GiB)"},
    {"h100-pcie", "NVIDIA H100 PCIe 80 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(7911), "PyTorch total_memory 81008 MiB"},
    {"h200", "NVIDIA H200 141 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(13980), OOM_REPORTS " (139.80-139.81 GiB)"},
    {"l40s", "NVIDIA L40S 48 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(4442), OOM_REPORTS " (44.42-44.52 GiB, ECC on)"},
    {"a6000", "NVIDIA RTX A6000 48 GB", TF_TARGET_CUDA, GIB_HUNDREDTHS(4754),
     OOM_REPORTS " (47.54 GiB with ECC off, the default; about 44.4 GiB with ECC on)"},
    {"mi250", "AMD Instinct MI250/MI250X, one GCD (64 GB)", TF_TARGET_VULKAN, GIB_HUNDREDTHS(6398),
     "ROCm's and OpenCL's figure (63.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N"},
    {"mi300x", "AMD Instinct MI300X 192 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(19169),
     "PyTorch-on-ROCm reports (191.69-191.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N"},
    {"max-1100", "Intel Data Center GPU Max 1100 48 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(4798),
     "PyTorch XPU reports (47.98 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N"},
    {"arc-a770", "Intel Arc A770 16 GB", TF_TARGET_VULKAN, GIB_HUNDREDTHS(1511),
     "PyTorch XPU reports (15.11-15.56 GiB); the Vulkan heap budget may be lower: prefer --device vulkan:N"},
};

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
